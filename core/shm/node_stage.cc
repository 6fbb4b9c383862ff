#include "core/shm/node_stage.h"

#include "core/shm/layout.h"

namespace mlxa2a::shm {

namespace {

enum Param { kInBytes = 0, kOutBytes = 1 };

// User area: arrived[n] | released[n] | finished[n] | (page) in[2] | out[2];
// each flag has a cache line: the flag word, then its note words (one per
// parity).
struct StageGeometry {
  std::size_t released_offset;
  std::size_t finished_offset;
  std::size_t in_offset;
  std::size_t in_stride;
  std::size_t out_offset;
  std::size_t out_stride;
  std::size_t total;
};

// total == 0: the sizes do not fit in memory (NodeSegment then fails set-up
// on every rank alike).
StageGeometry stage_geometry(int n, const SegmentParams& p) {
  using layout::Size;
  const Size flags = Size(static_cast<std::size_t>(n)) * layout::kLine;
  const Size in_offset = (Size(3) * flags).round_up(4096);
  const Size in_stride = Size(p[kInBytes]).round_up(4096);
  const Size out_offset = in_offset + Size(2) * in_stride;
  const Size out_stride = Size(p[kOutBytes]).round_up(4096);
  const Size total = out_offset + Size(2) * out_stride;
  StageGeometry g{};
  if (!total.ok() || p[kInBytes] == 0 || p[kOutBytes] == 0) return g;
  g.released_offset = flags.value();
  g.finished_offset = 2 * flags.value();
  g.in_offset = in_offset.value();
  g.in_stride = in_stride.value();
  g.out_offset = out_offset.value();
  g.out_stride = out_stride.value();
  g.total = total.value();
  return g;
}

}  // namespace

Status NodeStage::create(Bootstrap& boot, const Options& opt, std::size_t in_bytes,
                         std::size_t out_bytes, std::unique_ptr<NodeStage>& out) noexcept {
  out.reset();
  try {
    std::unique_ptr<NodeStage> self(new NodeStage(opt));
    NodeSegment::Request req;
    req.params[kInBytes] = in_bytes;
    req.params[kOutBytes] = out_bytes;
    req.user_bytes = [](int n, const SegmentParams& p) { return stage_geometry(n, p).total; };
    const Status st = NodeSegment::create(boot, opt, req, self->seg_);
    if (st != Status::ok) return st;
    const int n = self->seg_.local_size();
    const StageGeometry g = stage_geometry(n, self->seg_.params());
    char* user = self->seg_.user();
    self->in_bytes_ = self->seg_.params()[kInBytes];
    self->out_bytes_ = self->seg_.params()[kOutBytes];
    for (int p = 0; p < 2; ++p) {
      self->in_[p] = user + g.in_offset + static_cast<std::size_t>(p) * g.in_stride;
      self->out_[p] = user + g.out_offset + static_cast<std::size_t>(p) * g.out_stride;
    }
    for (int r = 0; r < n; ++r) {
      const std::size_t line = static_cast<std::size_t>(r) * layout::kLine;
      self->arrived_.push_back(reinterpret_cast<std::atomic<std::uint64_t>*>(user + line));
      self->released_.push_back(
          reinterpret_cast<std::atomic<std::uint64_t>*>(user + g.released_offset + line));
      self->finished_.push_back(
          reinterpret_cast<std::atomic<std::uint64_t>*>(user + g.finished_offset + line));
    }
    self->waiter_ = Waiter(opt, self->seg_.failed_flag());
    out = std::move(self);
    return Status::ok;
  } catch (...) {  // allocation only
    return Status::create_failed;
  }
}

void NodeStage::rebind(const Options& opt) noexcept {
  try {
    waiter_ = Waiter(opt, seg_.failed_flag());
  } catch (...) {
    broken_ = true;  // copying the callback failed (allocation): later calls report it
  }
}

Status NodeStage::fail(Status st) noexcept {
  broken_ = true;
  seg_.failed_flag()->store(1, std::memory_order_release);
  return st;
}

Status NodeStage::signal(Signal which, std::uint64_t seq, std::uint64_t note) noexcept {
  if (broken_) return Status::broken;
  auto& flag = *flags(which)[static_cast<std::size_t>(local_rank())];
  // Relaxed: the flag's release store publishes it.
  note_word(&flag, seq)->store(note, std::memory_order_relaxed);
  flag.store(seq, std::memory_order_release);
  (void)waiter_.wake(flag);  // a sleeping waiter (oversubscribed) sees it now
  return Status::ok;
}

Status NodeStage::arrive_at(std::uint64_t seq, std::uint64_t note) noexcept {
  return signal(Signal::arrived, seq, note);
}
Status NodeStage::release_at(std::uint64_t seq, std::uint64_t note) noexcept {
  return signal(Signal::released, seq, note);
}
Status NodeStage::finish_at(std::uint64_t seq, std::uint64_t note) noexcept {
  return signal(Signal::finished, seq, note);
}

Status NodeStage::wait_arrived(std::span<const int> ranks, std::uint64_t seq) noexcept {
  return wait_all(ranks, Signal::arrived, seq);
}

Status NodeStage::wait_released(std::span<const int> leaders, std::uint64_t seq) noexcept {
  return wait_all(leaders, Signal::released, seq);
}

Status NodeStage::wait_finished(std::span<const int> ranks, std::uint64_t seq) noexcept {
  return wait_all(ranks, Signal::finished, seq);
}

Status NodeStage::wait_all(std::span<const int> ranks, Signal which, std::uint64_t seq) noexcept {
  if (broken_) return Status::broken;
  if (seq == 0) return Status::ok;  // names no call
  for (const int r : ranks) {
    if (r < 0 || r >= local_size()) return fail(Status::invalid_argument);
    // Every store to these flags is woken (signal()): the wait may sleep.
    const Status st = waiter_.wait_geq_sleeping(*flags(which)[static_cast<std::size_t>(r)], seq,
                                                seg_.watch_pid(r));
    if (st != Status::ok) return fail(st);
  }
  return Status::ok;
}

}  // namespace mlxa2a::shm
