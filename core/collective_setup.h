// CollectiveSetup: the shape of every collective set-up (a node's segment, its
// shared PD, a team's engine, the leaders' transport): every rank runs every
// step whatever failed before - so no rank skips a collective its peers are
// in - and then all agree on the outcome.
//
// Contract
// * step() runs its callable always. A step that returns false, a failed
//   Status or throws (allocation) marks this rank failed; the first failure's
//   status and why are kept. A step may ask failed_here() to skip local work,
//   never to skip a collective.
// * agree() is collective: it calls the injected agreement once with this
//   rank's outcome and keeps what it returns, which must be the same on every
//   rank (an allreduce, an allgather, a barrier and a shared count...). Later
//   steps see it through failed_here(); a set-up may agree more than once.
// * MPI-free and header-only, so shm, mlx5 and mpi share it and tests inject
//   the agreement. Not thread-safe (one set-up, one thread).
#pragma once

#include <new>
#include <string>
#include <type_traits>
#include <utility>

#include "core/status.h"

namespace mlxa2a {

struct SetupOutcome {
  Status status = Status::ok;
  std::string why;  // "" when ok, or when the failure said nothing
  bool ok() const noexcept { return status == Status::ok; }
};

class CollectiveSetup {
 public:
  // A step's failure with no status of its own.
  explicit CollectiveSetup(Status default_failure = Status::unavailable) noexcept
      : default_failure_(default_failure) {}

  // Runs step() (returning void, bool or Status) whatever failed before.
  template <class Step>
  CollectiveSetup& step(Step&& step) noexcept {
    try {
      using R = std::invoke_result_t<Step&>;
      if constexpr (std::is_void_v<R>) {
        step();
      } else if constexpr (std::is_same_v<R, bool>) {
        if (!step()) fail(default_failure_);
      } else {
        static_assert(std::is_same_v<R, Status>, "a step returns void, bool or Status");
        if (const Status st = step(); st != Status::ok) fail(st);
      }
    } catch (...) {  // allocation only: nothing else in a set-up throws
      fail(default_failure_, "out of memory");
    }
    return *this;
  }

  // Marks this rank failed; the first failure is the one reported.
  void fail(Status st, const char* why = "") noexcept {
    if (!outcome_.ok() || st == Status::ok) return;
    outcome_.status = st;
    try {
      outcome_.why = why;
    } catch (...) {  // the status alone then
    }
  }
  void fail(Status st, const std::string& why) noexcept { fail(st, why.c_str()); }

  bool failed_here() const noexcept { return !outcome_.ok(); }
  const SetupOutcome& outcome() const noexcept { return outcome_; }

  // Collective: agreement(outcome()) -> SetupOutcome, equal on every rank.
  template <class Agreement>
  const SetupOutcome& agree(Agreement&& agreement) noexcept {
    try {
      outcome_ = agreement(std::as_const(outcome_));
    } catch (...) {  // allocation only; the agreement itself was not reached
      outcome_.status = outcome_.ok() ? default_failure_ : outcome_.status;
    }
    return outcome_;
  }

 private:
  Status default_failure_;
  SetupOutcome outcome_;
};

}  // namespace mlxa2a
