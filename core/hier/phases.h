// Wall time per step of HierAlltoall's rounds, per process (docs/hier.md
// "Where the time goes"): end to end, the steps hide each other.
//
// Contract: off unless enable() (MLXA2A_COLL_STATS): a Lap then costs one
// relaxed load and a branch per mark; on, a steady-clock read per mark.
// Counters: relaxed atomics, any thread, read at MPI_Finalize.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>

namespace mlxa2a::hier::phases {

enum Phase : int {
  kFanIn,         // copying this rank's blocks into the in-area
  kNodeWait,      // leader: waiting for the node's ranks (arrived, finished)
  kPost,          // leader: posting the round's messages
  kNetWait,       // leader: until every message of the round completed
  kReleaseWait,   // every rank: waiting for its leaders' release
  kFanOut,        // copying this rank's blocks out of the areas
  kCount
};
inline constexpr const char* kNames[kCount] = {"fan_in",       "node_wait", "post", "net_wait",
                                               "release_wait", "fan_out"};

inline std::atomic<bool> g_on{false};
inline std::atomic<std::uint64_t> g_ns[kCount]{};
inline std::atomic<std::uint64_t> g_rounds{0};

inline void enable() noexcept { g_on.store(true, std::memory_order_relaxed); }
inline bool enabled() noexcept { return g_on.load(std::memory_order_relaxed); }

inline std::uint64_t now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// One call's stopwatch: mark(p) files the time since the last mark under p.
class Lap {
 public:
  Lap() noexcept : on_(enabled()), last_(on_ ? now_ns() : 0) {}
  void mark(Phase p) noexcept {
    if (!on_) return;
    const std::uint64_t t = now_ns();
    g_ns[p].fetch_add(t - last_, std::memory_order_relaxed);
    last_ = t;
  }
  void round() noexcept {
    if (on_) g_rounds.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  bool on_;
  std::uint64_t last_;
};

}  // namespace mlxa2a::hier::phases
