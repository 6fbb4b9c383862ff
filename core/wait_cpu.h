// CPU time the ranks' threads spend waiting inside mlxa2a (for a peer's flag
// or for the leaders' RDMA completions), process-wide.
//
// Why: benchmarks on fakeverbs (bench/results/zerocopy.md) need the CPU
// work a real NIC would leave on the host. The fake NIC's own thread is
// accounted by fakeverbs (FAKEVERBS_CPU_FILE); the ranks' waits for that
// slow fake NIC are accounted here, so "busy" CPU = CPU inside MPI_Alltoall
// minus this counter.
//
// Contract: off unless enable() was called (MLXA2A_COLL_STATS, at init):
// then every slow wait reads the thread's CPU clock (a system call, ~0.3 us)
// at its start and end. Scopes may be used from any thread; the counter is a
// relaxed atomic, read for the stats line at MPI_Finalize.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>

namespace mlxa2a::core::wait_cpu {

inline std::atomic<bool> g_enabled{false};
inline std::atomic<std::uint64_t> g_ns{0};

inline void enable() noexcept { g_enabled.store(true, std::memory_order_relaxed); }
inline std::uint64_t total_ns() noexcept { return g_ns.load(std::memory_order_relaxed); }

inline std::uint64_t thread_cpu_ns() noexcept {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// Adds the thread CPU time between construction and destruction to the
// counter (nothing when accounting is off).
class Scope {
 public:
  Scope() noexcept
      : on_(g_enabled.load(std::memory_order_relaxed)), start_(on_ ? thread_cpu_ns() : 0) {}
  ~Scope() {
    if (on_) g_ns.fetch_add(thread_cpu_ns() - start_, std::memory_order_relaxed);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  bool on_;
  std::uint64_t start_;
};

}  // namespace mlxa2a::core::wait_cpu
