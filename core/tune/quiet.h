// QuietPmpi: when a multi-node team's PMPI-routed calls may skip the engine's
// check call (docs/tune.md, "Quiet PMPI"). MPI-free: the caller makes the one
// agreement (an allreduce) this asks for.
//
// Why it is safe. A check beside PMPI_Alltoall exists for an erroneous call
// whose ranks' sizes differ, so that one rank goes to PMPI while a peer is in
// the engine waiting for it. While every size class the team has met is
// decided `pmpi` and a class not yet met is held on PMPI too (not measured),
// no rank of any call, correct or not, can be routed to the engine: every
// rank calls PMPI_Alltoall and the MPI judges the call, as without mlxa2a.
// What ends that state must be agreed by every rank at the same call, or one
// rank would start a trial in the engine while a peer skips its check:
//   * entering: right after an agreement that decided a class (a collective
//     every rank runs at the same call), when every class is then `pmpi`;
//   * leaving: at boundary calls, counted alike on every rank (every call on
//     the communicator, whatever its size), one allreduce of "a class not
//     decided pmpi was called here since the last boundary" (pending); any
//     rank's yes ends quiet on every rank, and the held class is measured
//     from then on. Boundaries come 16 calls after entering, then at doubling
//     intervals up to 256 calls: about one allreduce per 256 calls in a
//     steady state, and a new size class waits at most 256 calls.
//
// Contract: one instance per team (TeamTuner); calls are serialised by MPI
// like the team's. `call` is the communicator's call number, equal on every
// rank for the same call and increasing.
#pragma once

#include <cstdint>

namespace mlxa2a::core::tune {

class QuietPmpi {
 public:
  static constexpr std::uint64_t kFirstInterval = 16;
  static constexpr std::uint64_t kMaxInterval = 256;

  bool on() const noexcept { return on_; }
  // Enter at call `call` (the first boundary is kFirstInterval calls later).
  void enter(std::uint64_t call) noexcept;
  // A call of a class that is not decided pmpi was held on PMPI.
  void note_pending() noexcept { pending_ = true; }
  bool pending() const noexcept { return pending_; }
  // Whether call `call` is a boundary: the caller agrees on pending() (MAX
  // over the ranks) and passes the result to agreed(). Idempotent within a
  // call once agreed() ran.
  bool due(std::uint64_t call) const noexcept { return on_ && call >= next_; }
  // The boundary's outcome: any rank had a pending class -> leave.
  void agreed(bool any_pending, std::uint64_t call) noexcept;
  std::uint64_t next_boundary() const noexcept { return next_; }
  // Boundary agreements made so far (for the trace and tests).
  std::uint64_t agreements() const noexcept { return agreements_; }

 private:
  bool on_ = false;
  bool pending_ = false;
  std::uint64_t next_ = 0;
  std::uint64_t interval_ = kFirstInterval;
  std::uint64_t agreements_ = 0;
};

}  // namespace mlxa2a::core::tune
