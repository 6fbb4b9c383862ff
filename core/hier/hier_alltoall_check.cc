// HierAlltoall::check() and trial() (docs/hier.md "A rank sent to PMPI").
#include "core/hier/hier_alltoall.h"

namespace mlxa2a::hier {

// Signals and messages are a first round's in either mode, so peers in run()
// stay in step. A node with a rank in PMPI is released before complete():
// nobody there reads the out-area, and its ranks in run() must reach PMPI
// without waiting for a PMPI call to end. The leader's next signal comes
// after complete(), so the reuse rules hold as after a real round.
shm::Status HierAlltoall::check_round(std::uint64_t k, std::size_t announced, Beside mode,
                                      bool* posted, std::uint64_t* verdict_out) noexcept {
  const bool pmpi = mode != Beside::none;
  if (pipeline_) {
    if (shm::Status st = stage_->wait_finished(all_local_, before(k, 2)); st != shm::Status::ok) {
      return st;
    }
  }
  const std::uint64_t note = (announced & ~kNoteMarks) | (pmpi ? kNotePmpi : 0) |
                             (mode == Beside::trial ? kNoteTrial : 0);
  if (shm::Status st = stage_->arrive_at(k, note); st != shm::Status::ok) return st;
  if (plan_.leader()) {
    // A leader in PMPI knows the verdict (kWentPmpi) without its node's
    // arrivals. Not in a trial: its headers must say if the whole node is in.
    const bool at_once = mode == Beside::pmpi && transport_->two_sided();
    if (shm::Status st = node_ready(k, at_once); st != shm::Status::ok) return st;
    std::uint64_t verdict = at_once ? Header::kWentPmpi : local_verdict(announced, k);
    // Laid out at the largest chunk: a partner's message of any size fits its
    // receive, and no two receives overlap.
    const int par = static_cast<int>(k & 1);
    build_messages(stage_->in_area(par), stage_->out_area(par), par, announced, 0,
                   plan_.max_chunk(), false, verdict);
    for (Message& m : messages_) {
      m.bytes = 0;
      reinterpret_cast<Header*>(stage_->in_area(par) + plan_.header(m.node))->message_bytes = 0;
    }
    *posted = !messages_.empty();
    if (*posted && transport_->post(messages_) != shm::Status::ok) {
      *posted = false;
      return shm::Status::transport_failed;
    }
    if (!(verdict & Header::kWentPmpi)) {
      if (*posted && transport_->complete() != shm::Status::ok) {
        *posted = false;
        return shm::Status::transport_failed;
      }
      *posted = false;
      verdict |= remote_verdict(announced);
    }
    *verdict_out = verdict;
    if (shm::Status st = stage_->release_at(k, verdict); st != shm::Status::ok) return st;
  }
  // A rank in PMPI goes there whatever its peers do, and its next signal
  // (the next call's arrival) needs nobody's release.
  return pmpi ? shm::Status::ok : stage_->wait_released(leaders_, k);
}

// Normally a node barrier at k: the local verdict needs the arrivals, and a
// one-sided partner with our message of k may overwrite k-1's areas. at_once
// (leader to PMPI, two-sided: only our own receives land here) needs only
// call k-2's readers done (k's areas and per-parity notes): arrivals at k-1,
// or the finished k-2 that a pipelined check_round() waited for
// (docs/hier.md "Without the node barrier").
shm::Status HierAlltoall::node_ready(std::uint64_t k, bool at_once) noexcept {
  if (at_once) {
    return pipeline_ ? shm::Status::ok : stage_->wait_arrived(all_local_, before(k, 1));
  }
  if (shm::Status st = stage_->wait_arrived(all_local_, k); st != shm::Status::ok) return st;
  return pipeline_ ? stage_->wait_finished(all_local_, before(k, 1)) : shm::Status::ok;
}

shm::Status HierAlltoall::beside(std::size_t announced, Beside mode, void (*call)(void*),
                                 void* ctx) noexcept {
  if (broken_) {
    if (call) call(ctx);
    return shm::Status::broken;
  }
  const std::uint64_t k = stage_->begin();
  bool posted = false;
  std::uint64_t verdict = 0;
  shm::Status st = check_round(k, announced, mode, &posted, &verdict);
  if (call) call(ctx);
  if (st == shm::Status::ok && posted && transport_->complete() != shm::Status::ok) {
    st = shm::Status::transport_failed;
  }
  // A trial's leaders publish their partners' word with their finished signal,
  // in either mode (serial teams wait for it only here).
  const bool publish = mode == Beside::trial && plan_.leader();
  if (st == shm::Status::ok && publish) {
    st = stage_->finish_at(k, trial_verdict(verdict, announced));
  }
  if (st != shm::Status::ok) return fail(st);
  // Read before finishing: then a pipelined leader may signal k + 2 (k's parity).
  const shm::Status out = mode == Beside::trial  ? trial_outcome(k)
                          : mode == Beside::pmpi ? shm::Status::ok
                                                 : verdict_status(released_verdict(k));
  if (broken_ || !pipeline_ || publish) return out;
  if (shm::Status f = stage_->finish_at(k); f != shm::Status::ok) return fail(f);
  return out;
}

std::uint64_t HierAlltoall::trial_verdict(std::uint64_t local, std::size_t announced) const
    noexcept {
  std::uint64_t v = local;
  for (const Message& msg : messages_) {
    const Header& h = *msg.head_recv;
    if (h.bytes_per_peer != announced || (h.flags & Header::kOtherSize)) v |= Header::kOtherSize;
    if (!(h.flags & Header::kAllTrial)) v &= ~Header::kAllTrial;
  }
  return v;
}

// Matched if every leader saw its whole node in the trial with one size (its
// release) and so did every partner (its finished note; waited for only
// once the releases say so: a leader outside the trial never publishes one).
shm::Status HierAlltoall::trial_outcome(std::uint64_t k) noexcept {
  auto matched = [](std::uint64_t v) {
    return (v & Header::kAllTrial) && !(v & Header::kOtherSize);
  };
  if (shm::Status st = stage_->wait_released(leaders_, k); st != shm::Status::ok) return fail(st);
  for (const int l : leaders_) {
    if (!matched(stage_->released_note(l, k))) return shm::Status::size_mismatch;
  }
  if (shm::Status st = stage_->wait_finished(leaders_, k); st != shm::Status::ok) return fail(st);
  for (const int l : leaders_) {
    if (!matched(stage_->finished_note(l, k))) return shm::Status::size_mismatch;
  }
  return shm::Status::ok;
}

}  // namespace mlxa2a::hier
