// Repeated failure logs are rate-limited (issue 11: after a peer died, every
// later call on the broken communicator logged a line - 1,497 lines for 3
// ranks x 499 calls).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

#include "core/log.h"

namespace mlxa2a::core::log {
namespace {

TEST(Limiter, BurstThenPowersOfTwo) {
  Limiter lim;
  std::vector<std::uint64_t> printed;
  for (int i = 0; i < 1000; ++i) {
    if (const std::uint64_t k = lim.admit()) printed.push_back(k);
  }
  const std::vector<std::uint64_t> want = {1, 2, 3, 4, 8, 16, 32, 64, 128, 256, 512};
  EXPECT_EQ(printed, want);
}

TEST(Limiter, MillionCallsLogFewLines) {
  Limiter lim;
  int lines = 0;
  for (int i = 0; i < 1000000; ++i) lines += lim.admit() != 0;
  EXPECT_LE(lines, 22);
  EXPECT_GE(lines, 20);
}

TEST(Limiter, ThreadsCountEveryOccurrenceOnce) {
  Limiter lim;
  std::atomic<int> lines{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 4096; ++i) lines += lim.admit() != 0;
    });
  }
  for (std::thread& t : threads) t.join();
  // 16384 occurrences: 1, 2, 3, then 4 .. 16384 (13 powers of two).
  EXPECT_EQ(lines.load(), 3 + 13);
}

}  // namespace
}  // namespace mlxa2a::core::log
