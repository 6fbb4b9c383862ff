#include "core/hier/hier_alltoall.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "core/hier/phases.h"
#include "core/hier/rows.h"
#include "core/shm/layout.h"
#include "core/shm/strided_copy.h"

namespace mlxa2a::hier {

NodeCopyCounters& node_copy_counters() noexcept {
  static NodeCopyCounters c;
  return c;
}

namespace {

void count(std::atomic<std::uint64_t>& c, std::size_t bytes) noexcept {
  c.fetch_add(bytes, std::memory_order_relaxed);
}

// Member i of `run` (node `node`): between stage + (i - run.first) *
// stage_stride and its user block, direction `to_user`. Always inlined: out
// of line, fan-in + fan-out took 705 instead of 557 instructions per call
// (2 B, 2 x 2 ranks).
[[gnu::always_inline]] inline void move_blocks(const NodeMap& map, int node, const BlockRun& run,
                                               char* user, std::size_t bytes, std::size_t off,
                                               char* stage, std::size_t stage_stride,
                                               std::size_t chunk, bool to_user) noexcept {
  const int* members = map.members(node).data() + run.first;
  if (const int step = map.member_step(node); step > 0) {
    char* first = user + static_cast<std::size_t>(members[0]) * bytes + off;
    const std::size_t user_stride = static_cast<std::size_t>(step) * bytes;
    if (to_user) {
      shm::copy_blocks(first, user_stride, stage, stage_stride, chunk, run.count);
    } else {
      shm::copy_blocks(stage, stage_stride, first, user_stride, chunk, run.count);
    }
    return;
  }
  for (std::size_t i = 0; i < run.count; ++i) {
    char* u = user + static_cast<std::size_t>(members[i]) * bytes + off;
    char* s = stage + i * stage_stride;
    if (to_user) {
      shm::copy_blocks(u, chunk, s, chunk, chunk, 1);
    } else {
      shm::copy_blocks(s, chunk, u, chunk, chunk, 1);
    }
  }
}

// From this block size a rank copies its own block send -> recv in fan-out,
// one copy instead of two (nobody else reads it: the rank's own choice).
// Below it, splitting row and column costs more instructions than the bytes
// (bench/results/per-byte.md).
constexpr std::size_t kOwnBlockDirectFrom = 4096;

constexpr bool own_block_direct(std::size_t chunk) noexcept {
  return chunk >= kOwnBlockDirectFrom;
}

}  // namespace

HierAlltoall::HierAlltoall(std::span<const int> node_ids, std::span<const int> leads, int rank,
                           std::size_t stage_bytes_per_rank)
    : map_(node_ids, leads), plan_(map_, rank, stage_bytes_per_rank) {}

std::size_t HierAlltoall::publish_bytes(int local_size) noexcept {
  const std::size_t b = static_cast<std::size_t>(local_size) * sizeof(GatherSource);
  return (b + 63) / 64 * 64;
}

StageAreas HierAlltoall::areas_of(const shm::NodeStage& stage) noexcept {
  StageAreas a;
  for (int p = 0; p < 2; ++p) {
    a.in[p] = stage.in_area(p);
    a.out[p] = stage.out_area(p);
  }
  a.bytes = std::min(stage.in_bytes(), stage.out_bytes());
  a.pages = shm::pages_name(stage.pages());
  return a;
}

std::size_t HierAlltoall::area_bytes(int team_size, int local_size,
                                     std::size_t stage_bytes_per_rank) noexcept {
  // Plan's chunk rule; Plan needs the whole node map, this only the sizes.
  std::size_t chunk = stage_bytes_per_rank / static_cast<std::size_t>(team_size);
  chunk = chunk >= 64 ? chunk / 64 * 64 : 64;
  return (shm::layout::Size(static_cast<std::size_t>(local_size)) *
              static_cast<std::size_t>(team_size) * chunk +
          Plan::header_bytes(team_size) + publish_bytes(local_size))
      .value();
}

shm::Status HierAlltoall::create(std::span<const int> node_ids, std::span<const int> leads,
                                 int rank, std::size_t stage_bytes_per_rank,
                                 std::unique_ptr<shm::NodeStage> stage,
                                 std::unique_ptr<LeaderTransport> transport,
                                 std::unique_ptr<HierAlltoall>& out) noexcept {
  out.reset();
  if (!stage || rank < 0 || rank >= static_cast<int>(node_ids.size())) {
    return shm::Status::invalid_argument;
  }
  try {
    std::unique_ptr<HierAlltoall> self(
        new HierAlltoall(node_ids, leads, rank, stage_bytes_per_rank));
    const Plan& p = self->plan_;
    // The node split must match the plan's local ranks, or blocks land wrongly.
    if (stage->local_rank() != p.local_rank() || stage->local_size() != p.local_size() ||
        stage->in_bytes() < p.area_bytes() + publish_bytes(p.local_size()) ||
        stage->out_bytes() < p.area_bytes() ||
        (p.leader() && !transport)) {
      return shm::Status::invalid_argument;
    }
    for (int l = 0; l < p.local_size(); ++l) self->all_local_.push_back(l);
    self->leaders_ = self->map_.leaders(p.node());
    self->messages_.reserve(static_cast<std::size_t>(self->map_.nodes()));
    self->gathers_.reserve(static_cast<std::size_t>(self->map_.nodes()));
    self->stage_ = std::move(stage);
    self->transport_ = std::move(transport);
    out = std::move(self);
    return shm::Status::ok;
  } catch (...) {  // allocation only
    return shm::Status::create_failed;
  }
}

shm::Status HierAlltoall::fail(shm::Status st) noexcept {
  broken_ = true;
  stage_->abandon();
  return st;
}

void HierAlltoall::abandon() noexcept { (void)fail(shm::Status::broken); }

shm::Status HierAlltoall::run(const void* send, void* recv, std::size_t bytes,
                              SendRegistration* zero_copy) noexcept {
  if (broken_) return shm::Status::broken;
  if (bytes == 0) return shm::Status::ok;  // every rank returns here alike
  if (send == nullptr || recv == nullptr) return shm::Status::invalid_argument;
  const auto* s = static_cast<const char*>(send);
  auto* r = static_cast<char*>(recv);
  if (!zero_copy) return run_rounds(s, r, bytes, nullptr);
  GatherSource mine;
  const std::size_t total = static_cast<std::size_t>(map_.size()) * bytes;
  if (!zero_copy->acquire(s, total, &mine)) {
    mine = GatherSource{};
    mine.staged = 1;  // this call stages this rank's blocks; the others still gather
    node_copy_counters().staged_fallbacks.fetch_add(1, std::memory_order_relaxed);
  }
  mine.pid = static_cast<std::int32_t>(getpid());
  const shm::Status st = run_rounds(s, r, bytes, &mine);
  // Only now: the last wait_released covered the writes reading the buffer
  // (or the call failed, and a failed transport writes no more).
  zero_copy->release();
  return st;
}

shm::Status HierAlltoall::run_rounds(const char* send, char* recv, std::size_t bytes,
                                     const GatherSource* mine) noexcept {
  if (pipeline_) return run_pipelined(send, recv, bytes, mine);
  const std::size_t max = plan_.max_chunk();
  for (std::size_t off = 0; off < bytes; off += max) {
    const std::size_t chunk = bytes - off < max ? bytes - off : max;
    const shm::Status st = round(send, recv, bytes, off, chunk, mine);
    if (st != shm::Status::ok) return st;
  }
  return shm::Status::ok;
}

// Two loops, not a test inside one: the split there cost 64 instructions per
// call at 8 B on 2 x 2 ranks (the budget's hier-pmpi cases).
std::size_t HierAlltoall::fan_in(char* in, const char* send, std::size_t bytes, std::size_t off,
                                 std::size_t chunk, const GatherSource* mine) noexcept {
  return own_block_direct(chunk) ? fan_in_rows<true>(in, send, bytes, off, chunk, mine)
                                 : fan_in_rows<false>(in, send, bytes, off, chunk, mine);
}

std::size_t HierAlltoall::fan_out(const char* in, const char* out, const char* send, char* recv,
                                  std::size_t bytes, std::size_t off,
                                  std::size_t chunk) noexcept {
  return own_block_direct(chunk) ? fan_out_columns<true>(in, out, send, recv, bytes, off, chunk)
                                 : fan_out_columns<false>(in, out, send, recv, bytes, off, chunk);
}

template <bool kOwnDirect>
[[gnu::noinline]] std::size_t HierAlltoall::fan_in_rows(char* in, const char* send, std::size_t bytes,
                                      std::size_t off, std::size_t chunk,
                                      const GatherSource* mine) noexcept {
  // Zero-copy: only my own node's row (the leader gathers the rest).
  const Plan& p = plan_;
  const std::size_t local = static_cast<std::size_t>(p.local_rank());
  const bool gather = mine && !mine->staged;
  std::size_t copied = 0;
  for (int m = 0; m < map_.nodes(); ++m) {
    const std::size_t lm = static_cast<std::size_t>(map_.node_size(m));
    if (gather && m != p.node()) {
      count(node_copy_counters().zero_copy, lm * chunk);
      continue;
    }
    char* section = in + p.section(m, chunk);
    auto row = [&](const BlockRun& run) __attribute__((always_inline)) {
      move_blocks(map_, m, run, const_cast<char*>(send), bytes, off, section + run.slot * chunk,
                  chunk, chunk, false);
    };
    if (kOwnDirect && m == p.node()) {
      row_runs(local, lm, chunk, [&](const BlockRun& run) { runs_without(run, local, row); });
      copied += (lm - 1) * chunk;
      continue;
    }
    row_runs(local, lm, chunk, row);
    copied += lm * chunk;
  }
  if (mine) trailer(in)[local] = *mine;  // read by the leader after wait_arrived
  return copied;
}

std::uint64_t HierAlltoall::local_verdict(std::size_t bytes, std::uint64_t k) const noexcept {
  std::uint64_t v = Header::kAllTrial;
  for (const int l : all_local_) {
    const std::uint64_t note = stage_->arrived_note(l, k);
    if (note & kNotePmpi) v |= Header::kWentPmpi;
    if (!(note & kNoteTrial)) v &= ~Header::kAllTrial;
    if ((note & ~kNoteMarks) != bytes) v |= Header::kOtherSize;
  }
  return v;
}

std::uint64_t HierAlltoall::remote_verdict(std::size_t bytes) const noexcept {
  std::uint64_t v = 0;
  for (const Message& msg : messages_) {
    const Header& h = *msg.head_recv;
    v |= h.flags & Header::kWentPmpi;
    if (h.bytes_per_peer != bytes || (h.flags & Header::kOtherSize)) v |= Header::kOtherSize;
  }
  return v;
}

std::uint64_t HierAlltoall::released_verdict(std::uint64_t k) const noexcept {
  std::uint64_t v = 0;
  for (const int l : leaders_) v |= stage_->released_note(l, k);
  return v;
}

shm::Status HierAlltoall::verdict_status(std::uint64_t verdict) noexcept {
  if (verdict & Header::kWentPmpi) return shm::Status::peer_in_pmpi;
  return verdict != 0 ? shm::Status::size_mismatch : shm::Status::ok;
}

void HierAlltoall::build_messages(char* in, char* out, int parity, std::size_t bytes,
                                  std::size_t off, std::size_t chunk, bool zero_copy,
                                  std::uint64_t verdict) noexcept {
  const Plan& p = plan_;
  const std::size_t lsize = static_cast<std::size_t>(p.local_size());
  const std::size_t area_end = p.area_bytes();
  messages_.clear();
  gathers_.clear();
  // Plan::target order: at any moment the leaders write to different nodes.
  for (int k = 1; k < map_.nodes(); ++k) {
    const int m = p.target(k);
    if (p.handled_by(m) != p.leader_index()) continue;
    const std::size_t at = p.section(m, chunk);
    auto* head = reinterpret_cast<Header*>(in + p.header(m));
    *head = Header{bytes, verdict, p.message_bytes(m, chunk)};
    Message& msg = messages_.emplace_back(Message{m, p.partner(m), in + at, out + at,
                                                  p.message_bytes(m, chunk),
                                                  p.remote_section(m, chunk), parity});
    msg.head_send = head;
    msg.head_recv = reinterpret_cast<Header*>(out + p.header(m));
    msg.head_remote_offset = p.header(p.node());
    msg.recv_capacity = area_end - at;
    // Not under a verdict: buffers of another size are shorter than the layout.
    if (zero_copy && verdict == 0) {  // reserved in create(): no reallocation, no throw
      gathers_.push_back(Gather{{trailer(in), lsize}, map_.members(m), bytes, off, chunk});
      msg.gather = &gathers_.back();
    }
  }
}

template <bool kOwnDirect>
[[gnu::noinline]] std::size_t HierAlltoall::fan_out_columns(const char* in, const char* out, const char* send,
                                          char* recv, std::size_t bytes, std::size_t off,
                                          std::size_t chunk) noexcept {
  // My own node's blocks are in the in-area, the others' in the out-area.
  const Plan& p = plan_;
  const std::size_t local = static_cast<std::size_t>(p.local_rank());
  const std::size_t lsize = static_cast<std::size_t>(p.local_size());
  std::size_t copied = 0;
  for (int m = 0; m < map_.nodes(); ++m) {
    char* section = const_cast<char*>(m == p.node() ? in : out) + p.section(m, chunk);
    const std::size_t lm = static_cast<std::size_t>(map_.node_size(m));
    auto column = [&](const BlockRun& run) __attribute__((always_inline)) {
      move_blocks(map_, m, run, recv, bytes, off, section + run.slot * chunk, run.step * chunk,
                  chunk, true);
    };
    if (kOwnDirect && m == p.node()) {
      column_runs(local, lm, lsize, chunk,
                  [&](const BlockRun& run) { runs_without(run, local, column); });
      const std::size_t mine = static_cast<std::size_t>(p.rank()) * bytes + off;
      std::memcpy(recv + mine, send + mine, chunk);
      copied += lm * chunk;
      continue;
    }
    column_runs(local, lm, lsize, chunk, column);
    copied += lm * chunk;
  }
  return copied;
}

// One round: bytes [off, off + chunk) of every block; the first one compares
// the sizes (docs/hier.md "Sizes that differ").
shm::Status HierAlltoall::round(const char* send, char* recv, std::size_t bytes, std::size_t off,
                                std::size_t chunk, const GatherSource* mine) noexcept {
  const Plan& p = plan_;
  const bool first = off == 0;
  phases::Lap lap;
  stage_->begin();
  char* in = stage_->in();
  char* out = stage_->out();
  std::size_t copied = fan_in(in, send, bytes, off, chunk, mine);
  if (shm::Status st = stage_->arrive(bytes); st != shm::Status::ok) return fail(st);
  lap.mark(phases::kFanIn);

  if (p.leader()) {
    if (shm::Status st = stage_->wait_arrived(all_local_); st != shm::Status::ok) return fail(st);
    lap.mark(phases::kNodeWait);
    std::uint64_t verdict = first ? local_verdict(bytes, stage_->seq()) : 0;
    build_messages(in, out, stage_->parity(), bytes, off, chunk, mine != nullptr, verdict);
    if (!messages_.empty()) {
      // post() + complete() is exchange() (core/hier/transport.h), timed apart.
      if (transport_->post(messages_) != shm::Status::ok) {
        return fail(shm::Status::transport_failed);
      }
      lap.mark(phases::kPost);
      if (transport_->complete() != shm::Status::ok) {
        return fail(shm::Status::transport_failed);
      }
      lap.mark(phases::kNetWait);
    }
    if (first) verdict |= remote_verdict(bytes);
    if (shm::Status st = stage_->release(verdict); st != shm::Status::ok) return fail(st);
  }
  if (shm::Status st = stage_->wait_released(leaders_); st != shm::Status::ok) return fail(st);
  lap.mark(phases::kReleaseWait);
  // A mismatch stops every rank here, one round further alike: still usable.
  if (first) {
    if (const std::uint64_t v = released_verdict(stage_->seq()); v != 0) return verdict_status(v);
  }
  copied += fan_out(in, out, send, recv, bytes, off, chunk);
  lap.mark(phases::kFanOut);
  lap.round();
  count(node_copy_counters().copied, copied);
  return shm::Status::ok;
}

// Pipelined rounds; the schedule and why each wait is needed: docs/hier.md
// "Pipelined rounds". fill(k) waits until every local rank finished k-2 (the
// in-area's reuse); post(k) until it finished k-1 (a partner posts k+1 once
// our k arrived). Round 1 is filled only after round 0's verdict, so a size
// mismatch stops every rank after exactly one, finished round.
struct HierAlltoall::Pipelined {
  Pipelined(HierAlltoall& self, const char* s, std::size_t b, const GatherSource* m,
            std::size_t per_round) noexcept
      : a(self), send(s), bytes(b), mine(m), max(per_round) {}
  HierAlltoall& a;
  const char* send;
  std::size_t bytes;
  const GatherSource* mine;
  std::size_t max;  // bytes per peer per round
  std::size_t copied = 0;
  phases::Lap lap;
  bool posted = false;        // leader: the last post() had messages
  std::uint64_t verdict = 0;  // leader, first round: another size seen

  std::size_t chunk_of(std::size_t i) const { return std::min(max, bytes - i * max); }

  shm::Status fill(std::size_t i, std::uint64_t k) noexcept {
    if (shm::Status st = a.stage_->wait_finished(a.all_local_, before(k, 2));
        st != shm::Status::ok) {
      return st;
    }
    lap.mark(phases::kNodeWait);
    copied += a.fan_in(a.stage_->in_area(static_cast<int>(k & 1)), send, bytes, i * max,
                       chunk_of(i), mine);
    const shm::Status st = a.stage_->arrive_at(k, bytes);
    lap.mark(phases::kFanIn);
    return st;
  }

  shm::Status post(std::size_t i, std::uint64_t k) noexcept {
    if (shm::Status st = a.stage_->wait_arrived(a.all_local_, k); st != shm::Status::ok) return st;
    if (shm::Status st = a.stage_->wait_finished(a.all_local_, before(k, 1));
        st != shm::Status::ok) {
      return st;
    }
    lap.mark(phases::kNodeWait);
    if (i == 0) verdict = a.local_verdict(bytes, k);
    const int par = static_cast<int>(k & 1);
    a.build_messages(a.stage_->in_area(par), a.stage_->out_area(par), par, bytes, i * max,
                     chunk_of(i), mine != nullptr, i == 0 ? verdict : 0);
    posted = !a.messages_.empty();
    if (posted && a.transport_->post(a.messages_) != shm::Status::ok) {
      return shm::Status::transport_failed;
    }
    lap.mark(phases::kPost);
    return shm::Status::ok;
  }
};

shm::Status HierAlltoall::run_pipelined(const char* send, char* recv, std::size_t bytes,
                                        const GatherSource* mine) noexcept {
  const Plan& p = plan_;
  Pipelined c(*this, send, bytes, mine, p.max_chunk());
  const std::size_t rounds = (bytes + c.max - 1) / c.max;

  std::uint64_t k = stage_->begin();
  if (shm::Status st = c.fill(0, k); st != shm::Status::ok) return fail(st);
  if (p.leader()) {
    if (shm::Status st = c.post(0, k); st != shm::Status::ok) return fail(st);
  }
  for (std::size_t i = 0; i < rounds; ++i, ++k) {
    const bool more = i + 1 < rounds;
    if (more && i > 0) {
      const std::uint64_t next = stage_->begin();  // == k + 1
      if (shm::Status st = c.fill(i + 1, next); st != shm::Status::ok) return fail(st);
    }
    if (p.leader()) {
      if (c.posted && transport_->complete() != shm::Status::ok) {
        return fail(shm::Status::transport_failed);
      }
      c.lap.mark(phases::kNetWait);
      if (i == 0) c.verdict |= remote_verdict(bytes);
      if (shm::Status st = stage_->release_at(k, i == 0 ? c.verdict : 0); st != shm::Status::ok) {
        return fail(st);
      }
    }
    if (shm::Status st = stage_->wait_released(leaders_, k); st != shm::Status::ok) {
      return fail(st);
    }
    c.lap.mark(phases::kReleaseWait);
    if (i == 0) {
      if (const std::uint64_t v = released_verdict(k); v != 0) {
        if (shm::Status st = stage_->finish_at(k); st != shm::Status::ok) return fail(st);
        return verdict_status(v);
      }
      if (more) {
        const std::uint64_t next = stage_->begin();  // == k + 1
        if (shm::Status st = c.fill(1, next); st != shm::Status::ok) return fail(st);
      }
    }
    const int par = static_cast<int>(k & 1);
    c.copied += fan_out(stage_->in_area(par), stage_->out_area(par), send, recv, bytes,
                        i * c.max, c.chunk_of(i));
    if (shm::Status st = stage_->finish_at(k); st != shm::Status::ok) return fail(st);
    c.lap.mark(phases::kFanOut);
    c.lap.round();
    if (more && p.leader()) {
      if (shm::Status st = c.post(i + 1, k + 1); st != shm::Status::ok) return fail(st);
    }
  }
  count(node_copy_counters().copied, c.copied);
  return shm::Status::ok;
}

}  // namespace mlxa2a::hier
