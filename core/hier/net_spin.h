// How long a leader polls its network exchange before yielding between polls:
// twice the recent waits' typical length when that is at most kMaxNs (short
// waits keep their core), else kMinNs (long ones gain nothing from spinning);
// why not a fixed poll count: docs/hier-transports.md "Adaptive network waits".
//
// Contract: pure policy, no clock (callers pass ns). One per transport, not
// thread-safe. Oversubscribed nodes always get kMinNs: the peers waited for
// may need this very core.
#pragma once

#include <cstdint>

namespace mlxa2a::hier {

class NetSpin {
 public:
  static constexpr std::uint64_t kMinNs = 1'000;    // ~a few polls
  static constexpr std::uint64_t kMaxNs = 50'000;   // longest spin ever
  static constexpr std::uint64_t kStartNs = 10'000; // before any wait was seen

  explicit NetSpin(bool oversubscribed = false) noexcept : oversubscribed_(oversubscribed) {}

  // Nanoseconds to poll without yielding in the next wait.
  std::uint64_t budget_ns() const noexcept {
    if (oversubscribed_) return kMinNs;
    const std::uint64_t b = 2 * typical_ns_;
    if (b > kMaxNs) return kMinNs;
    return b < kMinNs ? kMinNs : b;
  }
  // Moves the typical length a quarter of the way to each wait, capped so one
  // very long wait (a late peer) is forgotten after a few short ones.
  void observe(std::uint64_t waited_ns) noexcept {
    const std::uint64_t w = waited_ns < kCapNs ? waited_ns : kCapNs;
    typical_ns_ = typical_ns_ - typical_ns_ / 4 + w / 4;
  }
  std::uint64_t typical_ns() const noexcept { return typical_ns_; }
  // Past the budget a wait yields between polls, unless the poll itself took
  // kGaveAwayNs: the core was already given away inside it (Open MPI's
  // mpi_yield_when_idle) or preempted, and yielding again would queue the
  // leader behind every runnable process a second time.
  static constexpr std::uint64_t kGaveAwayNs = 10'000;
  static bool yield_after(std::uint64_t poll_ns) noexcept { return poll_ns < kGaveAwayNs; }

 private:
  static constexpr std::uint64_t kCapNs = 4 * kMaxNs;
  bool oversubscribed_;
  std::uint64_t typical_ns_ = kStartNs;
};

}  // namespace mlxa2a::hier
