// core/hier/phases.h: a Lap files time only once enabled (MLXA2A_COLL_STATS),
// each mark under its own phase, and the phases add up to the Lap's span.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/hier/phases.h"

namespace mlxa2a::hier::phases {
namespace {

std::uint64_t total() {
  std::uint64_t t = 0;
  for (const auto& p : g_ns) t += p.load();
  return t;
}

TEST(Phases, OffCountsNothingOnFilesEachMarkUnderItsPhase) {
  const std::uint64_t before = total();
  {
    Lap off;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    off.mark(kFanIn);
    off.round();
  }
  EXPECT_EQ(total(), before);
  EXPECT_EQ(g_rounds.load(), 0u);
  enable();
  const std::uint64_t net0 = g_ns[kNetWait].load();
  const std::uint64_t fan0 = g_ns[kFanOut].load();
  const std::uint64_t start = now_ns();
  Lap lap;
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  lap.mark(kNetWait);
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  lap.mark(kFanOut);
  lap.round();
  const std::uint64_t span = now_ns() - start;
  EXPECT_GE(g_ns[kNetWait].load() - net0, 5'000'000u);
  EXPECT_GE(g_ns[kFanOut].load() - fan0, 1'000'000u);
  EXPECT_LT(g_ns[kFanOut].load() - fan0, 5'000'000u);
  EXPECT_LE(total() - before, span);
  EXPECT_EQ(g_rounds.load(), 1u);
}

}  // namespace
}  // namespace mlxa2a::hier::phases
