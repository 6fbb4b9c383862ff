// core/hier/net_spin.h: the leaders' spin budget follows the recent waits -
// twice their typical length while that is short, a minimal spin once waits
// are longer than any spin, back within a few waits when the network changes,
// and always minimal on an oversubscribed node.
#include <gtest/gtest.h>

#include "core/hier/net_spin.h"

namespace mlxa2a::hier {
namespace {

void feed(NetSpin& s, std::uint64_t ns, int times) {
  for (int i = 0; i < times; ++i) s.observe(ns);
}

TEST(NetSpin, ShortWaitsSpinTwiceTheirLength) {
  NetSpin s;
  feed(s, 3'000, 30);
  EXPECT_GE(s.budget_ns(), 5'000u);
  EXPECT_LE(s.budget_ns(), 7'000u);
}

TEST(NetSpin, LongWaitsSpinOnlyMinimally) {
  NetSpin s;
  feed(s, 2'000'000, 10);  // 2 ms per exchange (a loaded TCP network)
  EXPECT_EQ(s.budget_ns(), NetSpin::kMinNs);
}

TEST(NetSpin, OneLateWaitIsForgottenQuickly) {
  NetSpin s;
  feed(s, 4'000, 30);
  const std::uint64_t steady = s.budget_ns();
  s.observe(100'000'000);  // a peer 100 ms late
  EXPECT_EQ(s.budget_ns(), NetSpin::kMinNs);
  feed(s, 4'000, 20);  // within 20 waits
  EXPECT_LE(s.budget_ns(), steady + 1'000);
  EXPECT_GT(s.budget_ns(), NetSpin::kMinNs);
}

TEST(NetSpin, NeverBelowTheMinimumNorAboveTheMaximum) {
  NetSpin s;
  feed(s, 0, 50);
  EXPECT_EQ(s.budget_ns(), NetSpin::kMinNs);
  for (std::uint64_t w = 0; w < 1'000'000; w += 997) {
    s.observe(w);
    EXPECT_GE(s.budget_ns(), NetSpin::kMinNs);
    EXPECT_LE(s.budget_ns(), NetSpin::kMaxNs);
  }
}

TEST(NetSpin, OversubscribedAlwaysMinimal) {
  NetSpin s(true);
  feed(s, 3'000, 30);
  EXPECT_EQ(s.budget_ns(), NetSpin::kMinNs);
}

TEST(NetSpin, NoSecondYieldAfterAPollThatGaveTheCoreAway) {
  // A Testall of ~1-3 us kept the core: yield it between polls. One that
  // lasted 50 us or 3 ms yielded inside (Open MPI's mpi_yield_when_idle) or
  // was preempted: poll again at once (the old loop always yielded).
  EXPECT_TRUE(NetSpin::yield_after(0));
  EXPECT_TRUE(NetSpin::yield_after(3'000));
  EXPECT_TRUE(NetSpin::yield_after(NetSpin::kGaveAwayNs - 1));
  EXPECT_FALSE(NetSpin::yield_after(NetSpin::kGaveAwayNs));
  EXPECT_FALSE(NetSpin::yield_after(50'000));
  EXPECT_FALSE(NetSpin::yield_after(3'000'000));
}

}  // namespace
}  // namespace mlxa2a::hier
