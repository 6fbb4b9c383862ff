// core/wait_cpu.h: a Scope adds its thread's CPU time only once accounting is
// enabled (MLXA2A_COLL_STATS), and time another thread burns is not ours.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "core/wait_cpu.h"

namespace mlxa2a::core::wait_cpu {
namespace {

// Burns at least `ns` of this thread's CPU.
void burn(std::uint64_t ns) {
  const std::uint64_t until = thread_cpu_ns() + ns;
  std::atomic<std::uint64_t> sink{0};
  while (thread_cpu_ns() < until) sink.fetch_add(1, std::memory_order_relaxed);
}

TEST(WaitCpu, CountsOnlyWhenEnabledAndOnlyTheScopesThread) {
  const std::uint64_t before = total_ns();
  {
    const Scope s;  // disabled: nothing counted
    burn(2'000'000);
  }
  EXPECT_EQ(total_ns(), before);
  enable();
  {
    const Scope s;
    burn(5'000'000);
    std::thread other([] { burn(50'000'000); });  // another thread's time
    other.join();
  }
  const std::uint64_t added = total_ns() - before;
  EXPECT_GE(added, 5'000'000u);
  EXPECT_LT(added, 50'000'000u);
}

}  // namespace
}  // namespace mlxa2a::core::wait_cpu
