#include "core/shm/node_segment.h"

#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <new>
#include <string>

#include "core/collective_setup.h"
#include "core/shm/layout.h"

namespace mlxa2a::shm {

namespace {

// What local rank 0 broadcasts after trying to create the segment.
struct SetupMessage {
  std::int32_t status;
  std::uint32_t probe_cma;  // rank 0's Request::probe_cma: all ranks probe or none
  std::uint32_t pages;      // what rank 0 got (Pages)
  std::uint32_t pad;
  std::uint64_t bytes;
  SegmentParams params;
  char name[224];
};

// Identity of our pid namespace: pids are only comparable (and watchable for
// liveness) between processes of the same namespace.
std::uint64_t pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

// Where the user area starts, plus `user` bytes: the segment's size; 0 when
// it does not fit in a size_t.
std::size_t segment_bytes(int n, std::size_t user) {
  using layout::Size;
  const Size head = (Size(sizeof(layout::SegmentHeader)) +
                     Size(static_cast<std::size_t>(n)) * sizeof(layout::RankInfo))
                        .round_up(4096);
  return (head + user).value();
}

std::size_t user_offset(int n) { return segment_bytes(n, 0); }

layout::SegmentHeader* header(const Segment& seg) {
  return static_cast<layout::SegmentHeader*>(seg.data());
}

// Local rank 0's step: creates the segment, writes its header and fills msg.
Status create_owned(const Options& opt, const NodeSegment::Request& req, int n, Segment& seg,
                    SetupMessage& msg) {
  const std::size_t user = req.user_bytes(n, req.params);
  const bool name_ok = !opt.name_prefix.empty() &&
                       opt.name_prefix.find_first_of("/-") == std::string::npos &&
                       opt.job_tag.find('/') == std::string::npos;
  // user == 0: the owner's layout overflows (or its parameters are invalid).
  const std::size_t total = user != 0 ? segment_bytes(n, user) : 0;
  Status st = name_ok ? Status::too_large : Status::invalid_argument;
  if (name_ok && total != 0) {
    const Pages pages = choose_pages(opt.hugepages, total, read_page_facts());
    // A recycled pid can meet a leftover of its own name: try a few sequence numbers.
    for (int attempt = 0; attempt < 8; ++attempt) {
      const std::string name = make_segment_name(opt.name_prefix, opt.job_tag);
      if (name.size() >= sizeof msg.name) break;
      st = Segment::create(name, total, seg, pages);
      if (st != Status::create_failed) break;
    }
  }
  if (st != Status::ok) return st;
  auto* h = new (seg.data()) layout::SegmentHeader{};
  h->magic = layout::kMagic;
  h->version = layout::kVersion;
  h->local_size = static_cast<std::uint32_t>(n);
  std::snprintf(msg.name, sizeof msg.name, "%s", seg.name().c_str());
  msg.bytes = seg.size();
  msg.pages = static_cast<std::uint32_t>(seg.pages());
  msg.params = req.params;
  msg.probe_cma = req.probe_cma ? 1 : 0;
  return Status::ok;
}

// Another rank's step: attaches to rank 0's segment and checks its header.
bool attach_checked(int n, const NodeSegment::Request& req, SetupMessage& msg, Segment& seg) {
  msg.name[sizeof msg.name - 1] = '\0';
  const std::size_t user = req.user_bytes(n, msg.params);
  if (user == 0 || segment_bytes(n, user) != msg.bytes ||
      Segment::attach(msg.name, msg.bytes, seg,
                      msg.pages == static_cast<std::uint32_t>(Pages::thp)) != Status::ok) {
    return false;
  }
  const layout::SegmentHeader* h = header(seg);
  return h->magic == layout::kMagic && h->version == layout::kVersion &&
         h->local_size == static_cast<std::uint32_t>(n);
}

// This rank's RankInfo, counted in the header's attached count.
void publish(const Segment& seg, layout::RankInfo& info, const std::uint64_t& probe_value) {
  info.pid = static_cast<std::int32_t>(::getpid());
  info.probe_addr = reinterpret_cast<std::uintptr_t>(&probe_value);
  info.probe_value = probe_value;
  info.pid_ns = pid_namespace();
  // Release: our RankInfo is visible to whoever reads the final count.
  header(seg)->attached.fetch_add(1, std::memory_order_acq_rel);
}

// Reads every peer's probe value, then agrees (barrier) whether all could;
// false if the barrier failed.
bool probe_cma(Bootstrap& boot, layout::RankInfo* infos, int n, int me, bool* usable) {
  bool ok = true;
  for (int r = 0; r < n && ok; ++r) {
    if (r == me) continue;
    std::uint64_t v = 0;
    ok = cma_read(infos[r].pid, &v, infos[r].probe_addr, sizeof v) && v == infos[r].probe_value;
  }
  infos[me].cma_ok.store(ok ? 1 : 2, std::memory_order_release);
  if (!boot.barrier()) return false;
  bool all_ok = true;
  for (int r = 0; r < n; ++r)
    all_ok = all_ok && infos[r].cma_ok.load(std::memory_order_acquire) == 1;
  *usable = all_ok;
  return true;
}

}  // namespace

bool cma_read(int pid, void* local, std::uint64_t remote, std::size_t len) noexcept {
  char* dst = static_cast<char*>(local);
  while (len > 0) {
    iovec l{dst, len};
    iovec r{reinterpret_cast<void*>(remote), len};
    // process_vm_readv(2) may stop early at a page it cannot read: loop.
    const ssize_t got = ::process_vm_readv(pid, &l, 1, &r, 1, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    dst += got;
    remote += static_cast<std::uint64_t>(got);
    len -= static_cast<std::size_t>(got);
  }
  return true;
}

std::atomic<std::uint32_t>* NodeSegment::failed_flag() const noexcept {
  return &static_cast<layout::SegmentHeader*>(seg_.data())->failed;
}

Status NodeSegment::create(Bootstrap& boot, const Options& opt, const Request& req,
                           NodeSegment& out) {
  const int n = boot.local_size();
  const int me = boot.local_rank();
  if (n < 1 || me < 0 || me >= n || !req.user_bytes) return Status::invalid_argument;
  NodeSegment ns;
  ns.me_ = me;
  ns.n_ = n;
  CollectiveSetup setup(Status::create_failed);

  // 1. Local rank 0 creates the segment; its broadcast is the agreement.
  SetupMessage msg{};
  msg.status = static_cast<std::int32_t>(Status::create_failed);
  if (me == 0) {
    setup.step([&] { msg.status = static_cast<std::int32_t>(create_owned(opt, req, n, ns.seg_, msg)); });
  }
  // The broadcast orders rank 0's header writes before the others' reads
  // (it is a synchronising collective: MPI, or a futex/pipe in tests).
  if (!setup.agree([&](const SetupOutcome&) -> SetupOutcome {
         if (!boot.broadcast(&msg, sizeof msg, 0)) return {Status::bootstrap_failed, ""};
         return {static_cast<Status>(msg.status), ""};
       }).ok()) {
    return setup.outcome().status;
  }
  ns.params_ = msg.params;
  ns.pages_ = msg.pages <= static_cast<std::uint32_t>(Pages::hugetlb) ? static_cast<Pages>(msg.pages)
                                                                       : Pages::normal;

  // 2. Everybody else attaches; all publish their RankInfo, then agree.
  setup.step([&] { return me == 0 || attach_checked(n, req, msg, ns.seg_); });
  char* base = static_cast<char*>(ns.seg_.data());
  auto* infos = reinterpret_cast<layout::RankInfo*>(base + sizeof(layout::SegmentHeader));
  // Peers read this with process_vm_readv before the probe barrier below,
  // while this frame is still alive.
  const std::uint64_t probe_value =
      layout::kMagic ^ (static_cast<std::uint64_t>(::getpid()) << 20) ^ std::uint64_t{0x5a5a};
  if (!setup.failed_here()) publish(ns.seg_, infos[me], probe_value);
  if (!setup.agree([&](const SetupOutcome& here) -> SetupOutcome {
         if (!boot.barrier()) return {Status::bootstrap_failed, ""};
         ns.seg_.unlink();  // everybody who could attach has
         if (!here.ok() || header(ns.seg_)->attached.load(std::memory_order_acquire) !=
                               static_cast<std::uint32_t>(n)) {
           return {Status::create_failed, ""};
         }
         return {};
       }).ok()) {
    return setup.outcome().status;
  }

  ns.user_ = base + user_offset(n);
  ns.pids_.resize(static_cast<std::size_t>(n));
  ns.watch_pids_.resize(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    ns.pids_[r] = infos[r].pid;
    // A pid from another pid namespace would look dead (or be someone else):
    // only watch peers of our namespace. Decided from recorded identities, not
    // by probing the pid now, because a peer may legitimately have died already.
    ns.watch_pids_[r] = (r != me && infos[r].pid_ns == infos[me].pid_ns) ? infos[r].pid : 0;
  }
  // 3. Optionally agree on CMA: every rank must be able to read every peer.
  if (msg.probe_cma != 0 && n > 1 && !probe_cma(boot, infos, n, me, &ns.cma_usable_)) {
    return Status::bootstrap_failed;
  }
  out = std::move(ns);
  return Status::ok;
}

}  // namespace mlxa2a::shm
