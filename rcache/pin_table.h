// mlxa2a::rcache — per-thread pin counters, so that taking a reference on a cache hit
// needs no atomic read-modify-write.
//
// Each thread owns one PinTable per cache and is the only writer of it (a relaxed load
// and a relaxed store: plain moves on x86). A region's pin count is the sum over all
// tables; a Ref released on another thread than the one that took it simply leaves +1
// in one table and -1 in the other. Only the cache's writer (under its mutex) sums.
#pragma once

#include <atomic>
#include <cstdint>

#include "rcache/virtual_array.h"

namespace mlxa2a::rcache::detail {

class PinTable {
 public:
  static constexpr uint32_t kMaxIds = uint32_t{1} << 20;  // regions per cache

  PinTable() : counters_(kMaxIds) {}

  // Owner thread only.
  std::atomic<int32_t>& counter(uint32_t id) { return counters_[id]; }
  static void add(std::atomic<int32_t>& c, int32_t delta) {
    c.store(c.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }
  void add(uint32_t id, int32_t delta) { add(counters_[id], delta); }
  // Any thread.
  [[nodiscard]] int32_t get(uint32_t id) const {
    return counters_[id].load(std::memory_order_relaxed);
  }

 private:
  VirtualArray<std::atomic<int32_t>> counters_;
};

}  // namespace mlxa2a::rcache::detail
