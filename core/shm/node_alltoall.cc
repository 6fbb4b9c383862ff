#include "core/shm/node_alltoall.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/shm/lines.h"
#include "core/shm/segment.h"

namespace mlxa2a::shm {

namespace {

enum Param { kSlotCapacity = 0, kCmaThreshold = 1, kLineMode = 2 };

std::size_t user_bytes(int n, const SegmentParams& p) {
  if (p[kSlotCapacity] < 64 * static_cast<std::uint64_t>(n)) return 0;
  return layout::alltoall_geometry(static_cast<std::size_t>(n), p[kSlotCapacity]).total;
}

}  // namespace

const char* to_string(Path p) noexcept {
  switch (p) {
    case Path::local: return "local";
    case Path::line: return "line";
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
    // Only allocation can throw. This rank leaves the creation sequence early;
    // peers blocked in a later Bootstrap step rely on the Bootstrap to fail.
    return Status::create_failed;
  }
}

Status NodeAlltoall::setup(Bootstrap& boot, const Options& opt) {
  // Rank 0's layout choices travel in the segment parameters, so every rank
  // takes the same path for a given size.
  NodeSegment::Request req;
  const std::size_t min_capacity = 64 * static_cast<std::size_t>(n_);
  const std::size_t slot = opt.oversubscribed ? opt.slot_capacity_oversubscribed : opt.slot_capacity;
  req.params[kSlotCapacity] = slot < min_capacity ? min_capacity : slot;
  req.params[kCmaThreshold] = n_ == 1               ? 0
                              : opt.oversubscribed ? opt.cma_threshold_oversubscribed
                                                   : opt.cma_threshold;
  req.params[kLineMode] = opt.line_mode ? 1 : 0;
  // Probed whatever the threshold says: measured selection may pick CMA at
  // any size (docs/tune.md).
  req.probe_cma = n_ > 1;
  req.user_bytes = user_bytes;
  const Status st = NodeSegment::create(boot, opt, req, seg_);
  if (st != Status::ok) return st;

  max_bytes_ = SIZE_MAX / static_cast<std::size_t>(n_);  // no division on the hot path
  capacity_ = seg_.params()[kSlotCapacity];
  cma_usable_ = seg_.cma_usable();
  cma_threshold_ = cma_usable_ ? seg_.params()[kCmaThreshold] : 0;
  const layout::AlltoallGeometry g = layout::alltoall_geometry(static_cast<std::size_t>(n_), capacity_);
  char* user = seg_.user();
  // A stream holds the n - 1 outgoing blocks; polling a block's lines beats
  // a second transfer only up to 256 B per peer (docs/shm.md, "Line mode").
  constexpr std::size_t kLineStream = layout::kLineAreaBytes / lines::kBytes * lines::kPayload;
  constexpr std::size_t kLineBlockMax = 256;
  line_max_ = n_ > 1 && seg_.params()[kLineMode] != 0
                  ? std::min(kLineBlockMax, kLineStream / static_cast<std::size_t>(n_ - 1))
                  : 0;
  lines_.resize(2 * static_cast<std::size_t>(n_));
  slots_.resize(2 * static_cast<std::size_t>(n_));
  done_.resize(static_cast<std::size_t>(n_));
  calls_info_.resize(static_cast<std::size_t>(n_));
  for (int r = 0; r < n_; ++r) {
    lines_[2 * r] = user + g.lines_offset + (2 * static_cast<std::size_t>(r)) * layout::kLineAreaBytes;
    lines_[2 * r + 1] = lines_[2 * r] + layout::kLineAreaBytes;
    slots_[2 * r] = user + g.slots_offset + (2 * static_cast<std::size_t>(r)) * g.slot_stride;
    slots_[2 * r + 1] = slots_[2 * r] + g.slot_stride;
    done_[r] = reinterpret_cast<layout::DoneFlag*>(user + g.done_offset) + r;
    calls_info_[r] = reinterpret_cast<layout::CallInfo*>(user + g.calls_offset) + r;
  }
  waiter_ = Waiter(opt, seg_.failed_flag());
  return Status::ok;
}

void NodeAlltoall::abandon() noexcept {
  broken_ = true;
  seg_.failed_flag()->store(1, std::memory_order_release);
}

bool NodeAlltoall::healthy() const noexcept {
  return !broken_ && seg_.failed_flag()->load(std::memory_order_acquire) == 0;
}

std::uint64_t NodeAlltoall::id() const noexcept {
  std::uint64_t h = 14695981039346656037ull;  // FNV-1a
  for (const char c : seg_.name()) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h == 0 ? 1 : h;
}

void NodeAlltoall::rebind(const Options& opt) noexcept {
  try {
    waiter_ = Waiter(opt, seg_.failed_flag());
  } catch (...) {
    broken_ = true;  // copying the callback failed (allocation): later calls report it
  }
}

Path NodeAlltoall::path_for(std::size_t bytes_per_peer) const noexcept {
  if (n_ == 1 || bytes_per_peer == 0) return Path::local;
  if (cma_threshold_ != 0 && bytes_per_peer >= cma_threshold_) return Path::cma;
  if (bytes_per_peer <= line_max_) return Path::line;
  return Path::copy;
}

bool NodeAlltoall::can_take(Path path, std::size_t bytes) const noexcept {
  switch (path) {
    case Path::local: return n_ == 1 || bytes == 0;
    case Path::line: return n_ > 1 && bytes != 0 && bytes <= line_max_;
    case Path::copy: return n_ > 1;
    case Path::cma: return n_ > 1 && cma_usable_;
  }
  return false;
}

Status NodeAlltoall::run(const void* send, void* recv, std::size_t bytes) noexcept {
  return run(send, recv, bytes, path_for(bytes));
}

Status NodeAlltoall::run(const void* send, void* recv, std::size_t bytes, Path path) noexcept {
  if (broken_) return Status::broken;
  if (bytes != 0 && (send == nullptr || recv == nullptr)) return Status::invalid_argument;
  if (bytes > max_bytes_) return Status::invalid_argument;  // n * bytes would overflow
  const auto* s = static_cast<const char*>(send);
  auto* r = static_cast<char*>(recv);
  if (n_ == 1) {
    if (bytes != 0) std::memcpy(r, s, bytes);
    return Status::ok;
  }
  announce(bytes);
  if (!can_take(path, bytes)) path = path_for(bytes);
  if (path == Path::line) {
    return settle(n_ == 2 ? run_line_pair(s, r, bytes) : run_lines(s, r, bytes));
  }
  return settle(path == Path::local  ? run_empty(bytes)
                : path == Path::cma  ? run_cma(s, r, bytes)
                                     : run_copy(s, r, bytes));
}

Status NodeAlltoall::check_sizes(std::size_t bytes) noexcept {
  if (broken_) return Status::broken;
  if (n_ == 1) return Status::ok;
  announce(bytes);
  return settle(run_empty(bytes));
}

// A peer called with another size compares it while it waits for us
// (CallProbe).
void NodeAlltoall::announce(std::size_t bytes) noexcept {
  calls_info_[static_cast<std::size_t>(me_)]->word.store(layout::call_word(++calls_, bytes),
                                                         std::memory_order_release);
}

Status NodeAlltoall::settle(Status st) noexcept {
  if (st == Status::size_mismatch) return st;  // not broken: see resync()
  if (st != Status::ok) {
    broken_ = true;
    // Tell the peers, which may be waiting for us, to give up too.
    seg_.failed_flag()->store(1, std::memory_order_release);
  }
  return st;
}

// Nothing moves (0 bytes per peer, or check_sizes()), but a peer may have
// called with another size (an erroneous program) and wait for us; compare
// sizes with every peer. A peer whose CallInfo shows the next call has
// finished this one, which it could only do with our size.
Status NodeAlltoall::run_empty(std::size_t bytes) noexcept {
  for (int k = 1; k < n_; ++k) {
    const int j = me_ + k < n_ ? me_ + k : me_ + k - n_;
    const CallProbe pr = probe(j, bytes);
    auto state = [](const CallProbe& x) noexcept {
      const std::uint32_t d = static_cast<std::uint32_t>(
          (x.word->load(std::memory_order_acquire) >> 32) - (x.mine >> 32));
      return d;  // 0: this call, 1: the next, otherwise still behind
    };
    if (state(pr) > 1) {
      const Status st = waiter_.wait_until(
          [](const void* c) noexcept {
            const CallProbe& x = *static_cast<const CallProbe*>(c);
            const std::uint32_t d = static_cast<std::uint32_t>(
                (x.word->load(std::memory_order_acquire) >> 32) - (x.mine >> 32));
            return d <= 1;
          },
          &pr, seg_.watch_pid(j), &pr);
      if (st != Status::ok) return st;
    }
    if (pr.mismatched()) return Status::size_mismatch;
  }
  return Status::ok;
}

// Line mode (lines.h): the writer's stream is its blocks for the other ranks,
// rotated as in run_copy, in its area of parity seq & 1. Reusing an area is
// safe as a slot is (run_copy): every call, in any mode, waits for every
// peer's publication of that call.
Status NodeAlltoall::run_lines(const char* send, char* recv, std::size_t bytes) noexcept {
  const std::size_t n = static_cast<std::size_t>(n_);
  const std::size_t me = static_cast<std::size_t>(me_);
  const std::uint64_t seq = ++seq_;
  const std::uint64_t p = seq & 1;
  // The words carry our size: a reader of another size sees the mismatch.
  const std::uint64_t word = lines::word(seq, bytes);
  lines::publish(lines_[2 * me + p], send + (me + 1) * bytes, (n - 1 - me) * bytes, send,
                 me * bytes, word);
  lines::copy(recv + me * bytes, send + me * bytes, bytes);
  for (std::size_t k = 1, j = me + 1; k < n; ++k, ++j) {
    if (j == n) j = 0;
    const std::size_t off = (n - 1 - k) * bytes;
    const LineBlock b{lines_[2 * j + p], off / lines::kPayload,
                      (off + bytes - 1) / lines::kPayload, word};
    lines::Check c = lines::check(b.area, b.first, b.last, b.word);
    if (c == lines::Check::pending) [[unlikely]] {
      const Status st = wait_lines(b, static_cast<int>(j), bytes, c);
      if (st != Status::ok) return st;
    }
    if (c != lines::Check::ready) return Status::size_mismatch;
    lines::read(b.area, off, bytes, recv + j * bytes);
  }
  return Status::ok;
}

// run_lines at two ranks: the peer's block is the writer's whole stream
// (from line 0): the same words, checks and waits without per-peer offsets.
Status NodeAlltoall::run_line_pair(const char* send, char* recv, std::size_t bytes) noexcept {
  const std::size_t me = static_cast<std::size_t>(me_);
  const std::size_t peer = me ^ 1;
  const std::uint64_t seq = ++seq_;
  const std::uint64_t p = seq & 1;
  const std::uint64_t word = lines::word(seq, bytes);
  lines::publish_one(lines_[2 * me + p], send + peer * bytes, bytes, word);
  lines::copy(recv + me * bytes, send + me * bytes, bytes);
  const std::size_t last = bytes <= lines::kPayload ? 0 : (bytes - 1) / lines::kPayload;
  const LineBlock b{lines_[2 * peer + p], 0, last, word};
  lines::Check c = last == 0 ? lines::check(b.area, 0, 0, word) : lines::check(b.area, 0, last, word);
  if (c == lines::Check::pending) [[unlikely]] {
    const Status st = wait_lines(b, static_cast<int>(peer), bytes, c);
    if (st != Status::ok) return st;
  }
  if (c != lines::Check::ready) return Status::size_mismatch;
  lines::read_all(b.area, bytes, recv + peer * bytes);
  return Status::ok;
}

// Out of line, so that run_lines keeps a small frame when the block is
// already there; `c` receives the block's state once it is no longer pending.
Status NodeAlltoall::wait_lines(const LineBlock& b, int j, std::size_t bytes,
                                lines::Check& c) const noexcept {
  const CallProbe pr = probe(j, bytes);
  const Status st = waiter_.wait_until(
      [](const void* x) noexcept {
        const LineBlock& y = *static_cast<const LineBlock*>(x);
        return lines::check(y.area, y.first, y.last, y.word) != lines::Check::pending;
      },
      &b, seg_.watch_pid(j), &pr);
  if (st == Status::ok) c = lines::check(b.area, b.first, b.last, b.word);
  return st;
}

// Copy-in/copy-out, in rounds when local_size * bytes exceeds the slot
// (docs/shm.md, "Copy-in/copy-out protocol"). A writer's slot holds its
// blocks for the others rotated so that rank me+1's comes first (block for j
// at (j - i - 1) mod n): at two ranks it arrives with the flag's line.
//
// Round s = ++seq_ uses parity s & 1. Overwriting our slot is safe without a
// "done" flag: every peer j read round s-2's content before publishing round
// s-1 (program order), and we acquired j's round-(s-1) flag before round s.
Status NodeAlltoall::run_copy(const char* send, char* recv, std::size_t bytes) noexcept {
  const std::size_t n = static_cast<std::size_t>(n_);
  const std::size_t me = static_cast<std::size_t>(me_);
  const bool one_round = n * bytes <= capacity_;
  // Chunks a multiple of 64 bytes keep every round's copies line-aligned.
  const std::size_t chunk = one_round ? bytes : (capacity_ / n) / 64 * 64;
  // With d = me + k (mod n), d's block sits at position k - 1 of our slot,
  // and our block at position n - 1 - k of d's slot: no division needed.
  for (std::size_t off = 0; off < bytes; off += chunk) {
    const std::size_t len = bytes - off < chunk ? bytes - off : chunk;
    const std::uint64_t seq = ++seq_;
    const std::uint64_t p = seq & 1;
    char* mine = slot_data(me_, p);
    if (one_round) {
      // Two copies: the blocks after mine, then the ones before it.
      const std::size_t after = n - 1 - me;
      if (after != 0) std::memcpy(mine, send + (me + 1) * bytes, after * bytes);
      if (me != 0) std::memcpy(mine + after * bytes, send, me * bytes);
    } else {
      for (std::size_t k = 1, d = me + 1; k < n; ++k, ++d) {
        if (d == n) d = 0;
        std::memcpy(mine + (k - 1) * len, send + d * bytes + off, len);
      }
    }
    slot_bytes(me_, p).store(bytes, std::memory_order_relaxed);
    slot_seq(me_, p).store(seq, std::memory_order_release);
    std::memcpy(recv + me * bytes + off, send + me * bytes + off, len);
    // Start at the next rank so that ranks do not all read the same slot first.
    for (std::size_t k = 1, j = me + 1; k < n; ++k, ++j) {
      if (j == n) j = 0;
      const int jr = static_cast<int>(j);
      const CallProbe pr = probe(jr, bytes);
      const Status st = waiter_.wait_geq(slot_seq(jr, p), seq, seg_.watch_pid(jr), &pr);
      if (st != Status::ok) return st;
      if (slot_bytes(jr, p).load(std::memory_order_relaxed) != bytes) return Status::size_mismatch;
      std::memcpy(recv + j * bytes + off, slot_data(jr, p) + (n - 1 - k) * len, len);
    }
  }
  return Status::ok;
}

// Single copy: each rank publishes its send buffer's address in its slot and
// reads its block out of every peer's. The done flag tells a writer nobody
// reads its buffer any more, which run() must know before returning.
Status NodeAlltoall::run_cma(const char* send, char* recv, std::size_t bytes) noexcept {
  const std::size_t n = static_cast<std::size_t>(n_);
  const std::size_t me = static_cast<std::size_t>(me_);
  const std::uint64_t seq = ++seq_;
  const std::uint64_t p = seq & 1;
  const std::uint64_t addr = reinterpret_cast<std::uintptr_t>(send);
  std::memcpy(slot_data(me_, p), &addr, sizeof addr);
  slot_bytes(me_, p).store(bytes, std::memory_order_relaxed);
  slot_seq(me_, p).store(seq, std::memory_order_release);
  std::memcpy(recv + me * bytes, send + me * bytes, bytes);
  // Every peer's size first, before reading any peer's buffer: a rank that
  // finds a mismatch returns at once, and its send buffer must not be read
  // after that. If any size differs, every rank finds a differing peer here
  // (had all of mine equalled mine, all would be equal), so no rank reads.
  for (std::size_t k = 1; k < n; ++k) {
    const std::size_t j = me + k < n ? me + k : me + k - n;
    const int jr = static_cast<int>(j);
    const CallProbe pr = probe(jr, bytes);
    const Status st = waiter_.wait_geq(slot_seq(jr, p), seq, seg_.watch_pid(jr), &pr);
    if (st != Status::ok) return st;
    if (slot_bytes(jr, p).load(std::memory_order_relaxed) != bytes) return Status::size_mismatch;
  }
  for (std::size_t k = 1; k < n; ++k) {
    const std::size_t j = me + k < n ? me + k : me + k - n;
    std::uint64_t peer_send = 0;
    std::memcpy(&peer_send, slot_data(static_cast<int>(j), p), sizeof peer_send);
    if (!cma_read(seg_.pid(static_cast<int>(j)), recv + j * bytes, peer_send + me * bytes, bytes)) {
      // A peer that failed elsewhere may have left run(), or died, since it
      // published its address: report that cause, not the symptom.
      if (seg_.failed_flag()->load(std::memory_order_acquire) != 0) return Status::peer_failed;
      if (!process_alive(seg_.pid(static_cast<int>(j)))) return Status::peer_dead;
      return Status::cma_failed;
    }
  }
  done_[me]->seq.store(seq, std::memory_order_release);
  for (std::size_t k = 1; k < n; ++k) {
    const std::size_t j = me + k < n ? me + k : me + k - n;
    const Status st = waiter_.wait_geq(done_[j]->seq, seq, seg_.watch_pid(static_cast<int>(j)));
    if (st != Status::ok) return st;
  }
  return Status::ok;
}

}  // namespace mlxa2a::shm
