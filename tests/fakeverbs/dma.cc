// fakeverbs: the fake HCA's DMA across processes (execute.h).  place()
// (placement.h) moves between this process and one other; a transfer whose
// sides span several processes goes through a staging buffer here, as an
// HCA's gather engine reads every SGE before the packet leaves.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "execute.h"
#include "hca.h"

namespace fakeverbs {
namespace {

pid_t pid_at(const Side& s, size_t i) {
  const pid_t p = i < s.pins.size() ? s.pins[i].pid : 0;
  return p ? p : getpid();
}

// Consecutive iovecs of one side in one process's memory.
struct Run {
  pid_t pid;
  Side side;
  uint64_t len = 0;
};

std::vector<Run> runs_of(const Side& s) {
  std::vector<Run> out;
  for (size_t i = 0; i < s.iov.size(); ++i) {
    const pid_t p = pid_at(s, i);
    if (out.empty() || out.back().pid != p) out.push_back({p, {}, 0});
    out.back().side.iov.push_back(s.iov[i]);
    out.back().side.pins.push_back(i < s.pins.size() ? s.pins[i] : PinnedRange{});
    out.back().len += s.iov[i].iov_len;
  }
  return out;
}

// Stale accesses are counted where the memory's owner reads them
// (fakeverbs_stale_writes/reads in that process): its own MR table.
void count_stale(pid_t pid, bool wrote, uint64_t bytes) {
  MappedFile other;
  wire::MrTable* t = nullptr;
  if (pid == getpid()) {
    t = own_mr_table();
  } else if (other.open(std::to_string(pid) + ".mr")) {
    t = static_cast<wire::MrTable*>(other.data());
  }
  if (!t || t->magic != wire::kMrMagic) return;
  SharedLock lk(&t->mu);
  (wrote ? t->stale_writes : t->stale_reads)++;
  t->stale_bytes += bytes;
}

void report_stale(uint32_t qpn, pid_t pid, bool wrote, uint64_t bytes) {
  if (!bytes) return;
  count_stale(pid, wrote, bytes);
  log_error("QP 0x%x: stale registration: %llu bytes %s pages of pid %d remapped since "
            "ibv_reg_mr; a real HCA uses the old pinned pages, so the application loses them",
            qpn, (unsigned long long)bytes, wrote ? "written into" : "read from", int(pid));
  if (stale_aborts()) {
    fprintf(stderr, "fakeverbs: FAKEVERBS_STALE=abort: aborting (FAKEVERBS_SEED=%llu)\n",
            (unsigned long long)hca::seed());
    abort();
  }
}

}  // namespace

DmaFail dma(const Side& src, const Side& dst, uint64_t* rng, uint32_t qpn) {
  const pid_t self = getpid();
  const std::vector<Run> from = runs_of(src), to = runs_of(dst);
  if (from.empty() || to.empty()) return DmaFail::kNone;
  PlaceStats st;
  if (from.size() == 1 && to.size() == 1 && (from[0].pid == self || to[0].pid == self)) {
    // One process on each side, one of them us: a single direct move.
    const bool write = from[0].pid == self;
    if (!place(write ? to[0].pid : from[0].pid, src, dst, write, rng, &st))
      return write ? DmaFail::kDst : DmaFail::kSrc;
    report_stale(qpn, to[0].pid, true, st.stale_dst_bytes);
    report_stale(qpn, from[0].pid, false, st.stale_src_bytes);
    return DmaFail::kNone;
  }
  // Gather every source run into a staging buffer, then scatter it.
  uint64_t len = 0;
  for (const Run& r : from) len += r.len;
  std::vector<uint8_t> staging(len);
  uint64_t at = 0;
  for (const Run& r : from) {
    Side mid;
    mid.iov.push_back({staging.data() + at, size_t(r.len)});
    mid.pins.resize(1);
    if (r.len && !place(r.pid, r.side, mid, false, nullptr, &st)) return DmaFail::kSrc;
    report_stale(qpn, r.pid, false, st.stale_src_bytes);
    at += r.len;
  }
  at = 0;
  for (const Run& r : to) {
    if (at >= len) break;
    Side mid;
    mid.iov.push_back({staging.data() + at, size_t(std::min(r.len, len - at))});
    mid.pins.resize(1);
    if (r.len && !place(r.pid, mid, r.side, true, rng, &st)) return DmaFail::kDst;
    report_stale(qpn, r.pid, true, st.stale_dst_bytes);
    at += r.len;
  }
  return DmaFail::kNone;
}

}  // namespace fakeverbs
