#include "core/shm/node_alltoall.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>

#include "core/shm/segment.h"

namespace mlxa2a::shm {

namespace {

// What local rank 0 broadcasts after trying to create the segment.
struct SetupMessage {
  std::int32_t status;
  std::uint32_t reserved;
  std::uint64_t bytes;
  char name[240];
};

// Reads `len` bytes at `remote` in process `pid` into `local`; loops over
// partial transfers (process_vm_readv(2) may stop at a page it cannot read).
bool cma_read(int pid, void* local, std::uint64_t remote, std::size_t len) noexcept {
  char* dst = static_cast<char*>(local);
  while (len > 0) {
    iovec l{dst, len};
    iovec r{reinterpret_cast<void*>(remote), len};
    const ssize_t got = ::process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    dst += got;
    remote += static_cast<std::uint64_t>(got);
    len -= static_cast<std::size_t>(got);
  }
  return true;
}

}  // namespace

const char* to_string(Status s) noexcept {
  switch (s) {
    case Status::ok: return "ok";
    case Status::invalid_argument: return "invalid argument";
    case Status::bootstrap_failed: return "bootstrap failed";
    case Status::create_failed: return "shared-memory segment creation failed";
    case Status::peer_dead: return "a local peer process died";
    case Status::peer_failed: return "a local peer reported a failure";
    case Status::timeout: return "timed out waiting for a local peer";
    case Status::aborted: return "aborted on request";
    case Status::cma_failed: return "process_vm_readv failed";
    case Status::broken: return "unusable after an earlier failure";
  }
  return "unknown status";
}

const char* to_string(Path p) noexcept {
  switch (p) {
    case Path::local: return "local";
    case Path::copy: return "copy";
    case Path::cma: return "cma";
  }
  return "unknown path";
}

NodeAlltoall::NodeAlltoall(int me, int n, const Options& opt)
    : me_(me), n_(n), waiter_(opt, nullptr) {}

NodeAlltoall::~NodeAlltoall() = default;

Status NodeAlltoall::create(Bootstrap& boot, const Options& opt,
                            std::unique_ptr<NodeAlltoall>& out) noexcept {
  out.reset();
  const int n = boot.local_size();
  const int me = boot.local_rank();
  if (n < 1 || me < 0 || me >= n) return Status::invalid_argument;
  try {
    std::unique_ptr<NodeAlltoall> self(new NodeAlltoall(me, n, opt));
    const Status st = self->setup(boot, opt);
    if (st == Status::ok) out = std::move(self);
    return st;
  } catch (...) {
    // Only allocation can throw here; peers then fail at the next collective
    // step or at the attach-count check, never hang in it (Bootstrap's job).
    return Status::create_failed;
  }
}

Status NodeAlltoall::setup(Bootstrap& boot, const Options& opt) {
  // --- local rank 0 creates and initialises the segment -------------------
  SetupMessage msg{};
  msg.status = static_cast<std::int32_t>(Status::create_failed);
  if (me_ == 0) {
    const std::size_t capacity =
        opt.slot_capacity < 64 * static_cast<std::size_t>(n_) ? 64 * static_cast<std::size_t>(n_)
                                                              : opt.slot_capacity;
    const layout::Geometry g = layout::geometry(static_cast<std::size_t>(n_), capacity);
    const bool name_ok = !opt.name_prefix.empty() &&
                         opt.name_prefix.find_first_of("/-") == std::string::npos &&
                         opt.job_tag.find('/') == std::string::npos;
    Status st = Status::invalid_argument;
    if (name_ok) {
      // A recycled pid can meet a leftover of its own name: try a few sequence numbers.
      for (int attempt = 0; attempt < 8; ++attempt) {
        const std::string name = make_segment_name(opt.name_prefix, opt.job_tag);
        if (name.size() >= sizeof msg.name) break;
        st = Segment::create(name, g.total, seg_);
        if (st != Status::create_failed) break;
      }
    }
    if (st == Status::ok) {
      auto* h = new (seg_.data()) layout::SegmentHeader{};
      h->magic = layout::kMagic;
      h->version = layout::kVersion;
      h->local_size = static_cast<std::uint32_t>(n_);
      h->slot_capacity = capacity;
      h->cma_threshold = n_ == 1               ? 0
                         : opt.oversubscribed ? opt.cma_threshold_oversubscribed
                                              : opt.cma_threshold;
      h->oversubscribed = opt.oversubscribed ? 1 : 0;
      std::snprintf(msg.name, sizeof msg.name, "%s", seg_.name().c_str());
      msg.bytes = g.total;
    }
    msg.status = static_cast<std::int32_t>(st);
  }
  if (!boot.broadcast(&msg, sizeof msg, 0)) return Status::bootstrap_failed;
  if (static_cast<Status>(msg.status) != Status::ok) return static_cast<Status>(msg.status);

  // --- everybody else attaches and checks the header ----------------------
  bool attached = me_ == 0;
  if (me_ != 0) {
    msg.name[sizeof msg.name - 1] = '\0';
    if (Segment::attach(msg.name, msg.bytes, seg_) == Status::ok) {
      const layout::SegmentHeader* h = header();
      attached = h->magic == layout::kMagic && h->version == layout::kVersion &&
                 h->local_size == static_cast<std::uint32_t>(n_) &&
                 layout::geometry(n_, h->slot_capacity).total == msg.bytes;
    }
  }
  layout::Geometry g{};
  if (attached) {
    layout::SegmentHeader* h = header();
    g = layout::geometry(static_cast<std::size_t>(n_), h->slot_capacity);
    capacity_ = h->slot_capacity;
    char* base = static_cast<char*>(seg_.data());
    auto* info = reinterpret_cast<layout::RankInfo*>(base + g.info_offset) + me_;
    probe_value_ = layout::kMagic ^ (static_cast<std::uint64_t>(::getpid()) << 20) ^
                   reinterpret_cast<std::uintptr_t>(this);
    info->pid = static_cast<std::int32_t>(::getpid());
    info->probe_addr = reinterpret_cast<std::uintptr_t>(&probe_value_);
    info->probe_value = probe_value_;
    // Release: the RankInfo written above is visible to whoever counts us.
    h->attached.fetch_add(1, std::memory_order_acq_rel);
  }
  if (!boot.barrier()) return Status::bootstrap_failed;
  // Everybody who could attach has: the name is no longer needed.
  seg_.unlink();
  if (!attached) return Status::create_failed;
  layout::SegmentHeader* h = header();
  if (h->attached.load(std::memory_order_acquire) != static_cast<std::uint32_t>(n_))
    return Status::create_failed;

  // --- per-peer state -----------------------------------------------------
  char* base = static_cast<char*>(seg_.data());
  const auto* infos = reinterpret_cast<const layout::RankInfo*>(base + g.info_offset);
  slots_.resize(2 * static_cast<std::size_t>(n_));
  done_.resize(static_cast<std::size_t>(n_));
  pids_.resize(static_cast<std::size_t>(n_));
  watch_pids_.resize(static_cast<std::size_t>(n_));
  for (int r = 0; r < n_; ++r) {
    slots_[2 * r] = base + g.slots_offset + (2 * static_cast<std::size_t>(r)) * g.slot_stride;
    slots_[2 * r + 1] = slots_[2 * r] + g.slot_stride;
    done_[r] = reinterpret_cast<layout::DoneFlag*>(base + g.done_offset) + r;
    pids_[r] = infos[r].pid;
    // A pid from another pid namespace would look dead: only watch visible ones.
    watch_pids_[r] = (r != me_ && process_alive(infos[r].pid)) ? infos[r].pid : 0;
  }
  waiter_ = Waiter(opt, &h->failed);

  // --- agree on CMA: every rank must be able to read every peer -----------
  if (h->cma_threshold != 0) {
    bool ok = true;
    for (int r = 0; r < n_ && ok; ++r) {
      if (r == me_) continue;
      std::uint64_t v = 0;
      ok = cma_read(infos[r].pid, &v, infos[r].probe_addr, sizeof v) && v == infos[r].probe_value;
    }
    auto* mine = const_cast<layout::RankInfo*>(infos + me_);
    mine->cma_ok.store(ok ? 1 : 2, std::memory_order_release);
    if (!boot.barrier()) return Status::bootstrap_failed;
    bool all_ok = true;
    for (int r = 0; r < n_; ++r)
      all_ok = all_ok && infos[r].cma_ok.load(std::memory_order_acquire) == 1;
    cma_threshold_ = all_ok ? h->cma_threshold : 0;
  }
  return Status::ok;
}

Path NodeAlltoall::path_for(std::size_t bytes_per_peer) const noexcept {
  if (n_ == 1 || bytes_per_peer == 0) return Path::local;
  if (cma_threshold_ != 0 && bytes_per_peer >= cma_threshold_) return Path::cma;
  return Path::copy;
}

Status NodeAlltoall::run(const void* send, void* recv, std::size_t bytes) noexcept {
  if (broken_) return Status::broken;
  if (bytes == 0) return Status::ok;  // every rank returns here: no sync needed
  if (send == nullptr || recv == nullptr) return Status::invalid_argument;
  if (bytes > SIZE_MAX / static_cast<std::size_t>(n_)) return Status::invalid_argument;
  const auto* s = static_cast<const char*>(send);
  auto* r = static_cast<char*>(recv);
  if (n_ == 1) {
    std::memcpy(r, s, bytes);
    return Status::ok;
  }
  const Status st = path_for(bytes) == Path::cma ? run_cma(s, r, bytes) : run_copy(s, r, bytes);
  if (st != Status::ok) {
    broken_ = true;
    // Tell the peers, which may be waiting for us, to give up too.
    header()->failed.store(1, std::memory_order_relaxed);
  }
  return st;
}

// Copy-in/copy-out, in rounds when local_size * bytes exceeds the slot.
//
// Round k (global number s = ++seq_) uses slot parity s & 1. Writing our slot
// of parity p for round s is safe: its previous content (round s-2) has been
// read by every peer j before j published round s-1 (program order in j), and
// we acquired j's round-(s-1) flag during round s-1. So no extra "done" flag
// is needed and one call costs one flag store plus one flag load per peer.
Status NodeAlltoall::run_copy(const char* send, char* recv, std::size_t bytes) noexcept {
  const std::size_t n = static_cast<std::size_t>(n_);
  const std::size_t me = static_cast<std::size_t>(me_);
  const bool one_round = n * bytes <= capacity_;
  // Chunks a multiple of 64 bytes keep every round's copies line-aligned.
  const std::size_t chunk = one_round ? bytes : (capacity_ / n) / 64 * 64;
  for (std::size_t off = 0; off < bytes; off += chunk) {
    const std::size_t len = bytes - off < chunk ? bytes - off : chunk;
    const std::uint64_t seq = ++seq_;
    const std::uint64_t p = seq & 1;
    char* mine = slot_data(me_, p);
    if (one_round) {
      std::memcpy(mine, send, n * bytes);  // one copy beats n-1 small ones
    } else {
      for (std::size_t d = 0; d < n; ++d)
        if (d != me) std::memcpy(mine + d * len, send + d * bytes + off, len);
    }
    slot_seq(me_, p).store(seq, std::memory_order_release);
    std::memcpy(recv + me * bytes + off, send + me * bytes + off, len);
    // Start at the next rank so that ranks do not all read the same slot first.
    for (std::size_t k = 1; k < n; ++k) {
      const std::size_t j = me + k < n ? me + k : me + k - n;
      const Status st = waiter_.wait_geq(slot_seq(static_cast<int>(j), p), seq, watch_pids_[j]);
      if (st != Status::ok) return st;
      std::memcpy(recv + j * bytes + off, slot_data(static_cast<int>(j), p) + me * len, len);
    }
  }
  return Status::ok;
}

// Single copy: each rank publishes its send buffer's address in its slot and
// reads its block straight out of every peer's send buffer. A second flag
// (done) tells a writer that nobody reads its send buffer any more, which
// run() must know before it returns and the caller may reuse that buffer.
Status NodeAlltoall::run_cma(const char* send, char* recv, std::size_t bytes) noexcept {
  const std::size_t n = static_cast<std::size_t>(n_);
  const std::size_t me = static_cast<std::size_t>(me_);
  const std::uint64_t seq = ++seq_;
  const std::uint64_t p = seq & 1;
  const std::uint64_t addr = reinterpret_cast<std::uintptr_t>(send);
  std::memcpy(slot_data(me_, p), &addr, sizeof addr);
  slot_seq(me_, p).store(seq, std::memory_order_release);
  std::memcpy(recv + me * bytes, send + me * bytes, bytes);
  for (std::size_t k = 1; k < n; ++k) {
    const std::size_t j = me + k < n ? me + k : me + k - n;
    Status st = waiter_.wait_geq(slot_seq(static_cast<int>(j), p), seq, watch_pids_[j]);
    if (st != Status::ok) return st;
    std::uint64_t peer_send = 0;
    std::memcpy(&peer_send, slot_data(static_cast<int>(j), p), sizeof peer_send);
    if (!cma_read(pids_[j], recv + j * bytes, peer_send + me * bytes, bytes))
      return Status::cma_failed;
  }
  done_[me]->seq.store(seq, std::memory_order_release);
  for (std::size_t k = 1; k < n; ++k) {
    const std::size_t j = me + k < n ? me + k : me + k - n;
    const Status st = waiter_.wait_geq(done_[j]->seq, seq, watch_pids_[j]);
    if (st != Status::ok) return st;
  }
  return Status::ok;
}

}  // namespace mlxa2a::shm
