// mlxa2a::rcache — per-thread pin counters, so that taking a reference on a cache hit
// needs no atomic read-modify-write.
//
// Each thread owns one PinTable per cache and is the only writer of it (a relaxed load
// and a relaxed store: plain moves on x86). A region's pin count is the sum over all
// tables of taken - dropped (modulo 2^32). Two counters instead of one +1/-1 counter:
// a get/release pair on the same buffer would otherwise form a loop-carried chain
// through one memory word (two store-to-load forwards per iteration). A Ref released
// on another thread bumps `dropped` in the releasing thread's table: only sums matter.
// Only the cache's writer (under its mutex) sums.
#pragma once

#include <atomic>
#include <cstdint>

#include "rcache/regcache.h"
#include "rcache/virtual_array.h"

namespace mlxa2a::rcache::detail {

class PinTable {
 public:
  static constexpr uint32_t kMaxIds = detail::kMaxIds;  // regions per cache

  using Counters = PinCounters;  // regcache.h: the inline paths bump them

  PinTable() : counters_(kMaxIds) {}

  // Owner thread only.
  Counters& at(uint32_t id) { return counters_[id]; }
  Counters* data() const { return counters_.data(); }
  static void bump(std::atomic<uint32_t>& c) { detail::bump(c); }
  // Any thread: this table's contribution to the pin count of `id`.
  [[nodiscard]] int32_t get(uint32_t id) const {
    const Counters& c = counters_[id];
    return static_cast<int32_t>(c.taken.load(std::memory_order_relaxed) -
                                c.dropped.load(std::memory_order_relaxed));
  }
  // Any thread: how often this table's owner took `id` (mod 2^32; CLOCK's signal).
  [[nodiscard]] uint32_t taken(uint32_t id) const {
    return counters_[id].taken.load(std::memory_order_relaxed);
  }

 private:
  VirtualArray<Counters> counters_;
};

}  // namespace mlxa2a::rcache::detail
