// How long a leader polls its network exchange before it starts yielding
// the core between polls (docs/hier-transports.md, "Adaptive network waits").
//
// Why: a fixed count of polls (2,000) is a different time on every
// transport (an ibv_poll_cq is ~50 ns, a PMPI_Testall over TCP microseconds)
// and on every network. What decides whether spinning pays is how long the
// waits take: a wait that usually ends within a few microseconds should not
// hand its core away (a yield and the way back cost ~1-2 us here), one that
// takes far longer than any spin gains nothing from spinning and should let
// the node's other ranks (or another job) run. So the budget follows the
// recent waits: twice their typical length when that is at most kMaxNs,
// else only kMinNs.
//
// Contract: pure policy, no clock of its own (callers pass nanoseconds, tests
// a fake clock). One per transport, not thread-safe. An oversubscribed node
// (ranks outnumber cores) always gets kMinNs: the peers it waits for may
// need this very core.
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
  // A wait that ended `waited_ns` after it began. The typical length moves
  // a quarter of the way to each wait (one outlier moves it little; a
  // changed network within a few calls), capped so one very long wait (a
  // late peer) is forgotten after a few short ones.
  void observe(std::uint64_t waited_ns) noexcept {
    const std::uint64_t w = waited_ns < kCapNs ? waited_ns : kCapNs;
    typical_ns_ = typical_ns_ - typical_ns_ / 4 + w / 4;
  }
  std::uint64_t typical_ns() const noexcept { return typical_ns_; }
  // Past the budget a wait yields the core between polls - unless the poll
  // itself lasted kGaveAwayNs or more: the core was then given away inside
  // it already (Open MPI with mpi_yield_when_idle, set on oversubscribed
  // nodes, yields in its progress loop when nothing moved) or taken by a
  // preemption, and yielding again would queue the leader behind every
  // runnable process a second time before it next looks at the network.
  static constexpr std::uint64_t kGaveAwayNs = 10'000;
  static bool yield_after(std::uint64_t poll_ns) noexcept { return poll_ns < kGaveAwayNs; }

 private:
  static constexpr std::uint64_t kCapNs = 4 * kMaxNs;
  bool oversubscribed_;
  std::uint64_t typical_ns_ = kStartNs;
};

}  // namespace mlxa2a::hier
