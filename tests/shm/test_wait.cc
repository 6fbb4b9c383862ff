// Waiter's sleeping wait (core/shm/wait.h): an oversubscribed waiter whose
// writer wakes the flag sleeps instead of yielding, yet every check of a
// wait still runs while it sleeps.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "core/shm/wait.h"

namespace mlxa2a::shm::test {
namespace {

using Clock = std::chrono::steady_clock;

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

Options oversubscribed() {
  Options o;
  o.oversubscribed = true;
  o.timeout_ms = 10000;
  return o;
}

// The writer stores late and never wakes: the sleeper still sees the store
// (it sleeps 1 ms at a time), and it slept: it used a small part of the
// wall time on its own CPU clock (a yielding waiter uses all it is given).
TEST(WaiterSleep, SleepsYetSeesAStoreNobodyWoke) {
  std::atomic<std::uint32_t> failed{0};
  std::atomic<std::uint64_t> flag{4};
  const Waiter w(oversubscribed(), &failed);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
    flag.store(5, std::memory_order_release);
  });
  const Clock::time_point t0 = Clock::now();
  const double cpu0 = thread_cpu_ms();
  const Status st = w.wait_geq_sleeping(flag, 5, 0);
  const double cpu = thread_cpu_ms() - cpu0;
  const double wall = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  writer.join();
  EXPECT_EQ(st, Status::ok);
  EXPECT_GE(wall, 50.0);
  EXPECT_LT(cpu, 0.25 * wall) << "cpu " << cpu << " ms of " << wall << " ms wall";
}

// wake() finds the sleeper: a writer that stores long after the reader
// started waiting wakes it (FUTEX_WAKE counts the sleepers it woke), and the
// reader returns with the store seen, every round.
TEST(WaiterSleep, WakeFindsTheSleeper) {
  std::atomic<std::uint64_t> flag{0};
  const Waiter w(oversubscribed(), nullptr);
  constexpr std::uint64_t kRounds = 20;
  std::atomic<std::uint64_t> ack{0};
  int woken = 0;
  std::thread writer([&] {
    for (std::uint64_t i = 1; i <= kRounds; ++i) {
      while (ack.load(std::memory_order_acquire) < i - 1) std::this_thread::yield();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the reader goes to sleep
      flag.store(i, std::memory_order_release);
      woken += w.wake(flag);
    }
  });
  for (std::uint64_t i = 1; i <= kRounds; ++i) {
    ASSERT_EQ(w.wait_geq_sleeping(flag, i, 0), Status::ok);
    ack.store(i, std::memory_order_release);
  }
  writer.join();
  // Each round's wake lands inside a 1 ms sleep unless the store fell in the
  // few microseconds between two; no wake ever finding the reader asleep
  // means it never slept on the flag.
  EXPECT_GT(woken, 0);
}

// Not oversubscribed: nobody sleeps, and wake() makes no system call.
TEST(WaiterSleep, NotOversubscribedNeitherSleepsNorWakes) {
  Options o;
  o.timeout_ms = 10000;
  std::atomic<std::uint64_t> flag{0};
  const Waiter w(o, nullptr);
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    flag.store(1, std::memory_order_release);
  });
  EXPECT_EQ(w.wait_geq_sleeping(flag, 1, 0), Status::ok);
  writer.join();
  EXPECT_EQ(w.wake(flag), 0);
}

// A sleeper still notices the node's failure flag.
TEST(WaiterSleep, SeesTheFailureFlag) {
  std::atomic<std::uint32_t> failed{0};
  std::atomic<std::uint64_t> flag{0};
  const Waiter w(oversubscribed(), &failed);
  std::thread other([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    failed.store(1, std::memory_order_release);
  });
  EXPECT_EQ(w.wait_geq_sleeping(flag, 1, 0), Status::peer_failed);
  other.join();
}

// The spin budget's rule: a first yield that returned at once doubles it (up
// to the ceiling); one that gave the core away and after which the awaited
// flag was set halves it (down to the floor); a long yield after which the
// flag is still unset says nothing.
TEST(SpinBudget, Rule) {
  using namespace spin_budget;
  EXPECT_EQ(next(16, 300, false), 32u);
  EXPECT_EQ(next(16, 300, true), 32u);
  EXPECT_EQ(next(kCeiling / 2, 100, false), kCeiling);
  EXPECT_EQ(next(kCeiling, 100, false), kCeiling);
  EXPECT_EQ(next(2000, kGaveCoreNs, true), 1000u);
  EXPECT_EQ(next(kFloor * 2 + 1, 50000, true), kFloor);
  EXPECT_EQ(next(kFloor, 50000, true), kFloor);
  EXPECT_EQ(next(2000, 50000, false), 2000u);
}

bool pin_to_cpu0() {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(0, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

// Two waiters taking turns on one core (as ranks do when they share a core
// with each other or with other work): each spin only delays the turn of the
// one it waits for, so the budget falls to the floor, and the turns still all
// complete. Before the budget adapted, every wait spun Options::spin_iterations.
TEST(SpinBudget, FallsWhenTheWaitersShareACore) {
  spin_budget::reset();
  Options o;
  o.timeout_ms = 20000;
  const Waiter w(o, nullptr);
  std::atomic<std::uint64_t> ping{0}, pong{0};
  constexpr std::uint64_t kTurns = 2000;
  std::atomic<bool> pinned{true};
  std::thread other([&] {
    if (!pin_to_cpu0()) pinned = false;
    for (std::uint64_t i = 1; i <= kTurns; ++i) {
      if (w.wait_geq(ping, i, 0) != Status::ok) return;
      pong.store(i, std::memory_order_release);
    }
  });
  if (!pin_to_cpu0()) pinned = false;
  for (std::uint64_t i = 1; i <= kTurns; ++i) {
    ping.store(i, std::memory_order_release);
    ASSERT_EQ(w.wait_geq(pong, i, 0), Status::ok);
  }
  other.join();
  if (!pinned) GTEST_SKIP() << "cannot pin threads to CPU 0 here";
  EXPECT_LE(spin_budget::current(), 4 * spin_budget::kFloor);
  spin_budget::reset();
}

}  // namespace
}  // namespace mlxa2a::shm::test
