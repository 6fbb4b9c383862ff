// QuietPmpi: when a multi-node team's PMPI-routed calls may skip the engine's
// check call (docs/tune.md, "Quiet PMPI": why it is safe, cost). MPI-free:
// the caller makes the one agreement (an allreduce) this asks for.
//
// While every class the team has met is decided `pmpi` and unmet classes are
// held on PMPI, no rank of any call, correct or not, can reach the engine, so
// the check guards nothing. Leaving must be agreed at the same call on every
// rank (else one rank starts an engine trial while a peer skips its check):
// at boundary calls (counted alike on every rank, at doubling intervals from
// kFirstInterval to kMaxInterval), one MAX of pending(); any yes ends quiet
// everywhere. Entering needs no message: it follows a
// deciding agreement, itself a collective.
//
// Contract: one instance per team (TeamTuner), calls serialised by MPI.
// `call` is the communicator's call number, equal on every rank, increasing.
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
  // A boundary: the caller agrees on pending() (MAX over ranks) and passes
  // the result to agreed(). Idempotent within a call once agreed() ran.
  bool due(std::uint64_t call) const noexcept { return on_ && call >= next_; }
  // any_pending: leave.
  void agreed(bool any_pending, std::uint64_t call) noexcept;
  std::uint64_t next_boundary() const noexcept { return next_; }
  std::uint64_t agreements() const noexcept { return agreements_; }

 private:
  bool on_ = false;
  bool pending_ = false;
  std::uint64_t next_ = 0;
  std::uint64_t interval_ = kFirstInterval;
  std::uint64_t agreements_ = 0;
};

}  // namespace mlxa2a::core::tune
