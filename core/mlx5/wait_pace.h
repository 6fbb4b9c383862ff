// How a leader's network wait spends its core (RdmaLeaderTransport::complete
// with or without a relay): poll without yielding for as long as recent
// exchanges took (hier::NetSpin's budget; the clock is read every 16 polls,
// a poll is ~50 ns, a clock read ~25), then give the core away between polls
// (no lock is held: docs/hier.md, "Threads"), and past 50 ms sleep 200 us between them: a
// partner that late (a checkpoint, I/O) is not coming within microseconds,
// and the nap adds at most 0.4% to such a wait (a rank 125 s late cost its
// waiting partners 93 s of CPU with yields alone).
#pragma once

#include <sched.h>
#include <time.h>

#include <chrono>
#include <cstdint>

#include "core/arch.h"

namespace mlxa2a::mlx5 {

class WaitPace {
 public:
  explicit WaitPace(std::uint64_t spin_budget_ns) : budget_(spin_budget_ns) {}

  std::uint64_t waited_ns() const {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start_).count());
  }

  // After poll number i found the wait not over: false while spinning (poll
  // again at once); true once the core was given away, when the caller may
  // do its slower periodic work. The caller holds no lock.
  bool step(unsigned i) {
    if (spinning_ && ((i & 15) != 15 || waited_ns() < budget_)) {
      cpu_relax();
      return false;
    }
    spinning_ = false;
    sched_yield();
    if (waited_ns() > kLateNs) {
      const timespec nap{0, kNapNs};
      nanosleep(&nap, nullptr);
    }
    return true;
  }

 private:
  using Clock = std::chrono::steady_clock;
  static constexpr std::uint64_t kLateNs = 50'000'000;
  static constexpr long kNapNs = 200'000;
  const Clock::time_point start_ = Clock::now();
  const std::uint64_t budget_;
  bool spinning_ = true;
};

}  // namespace mlxa2a::mlx5
