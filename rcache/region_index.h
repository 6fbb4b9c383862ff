// mlxa2a::rcache — address -> region index with lock-free, validated reads.
//
// Layout: a region of size S lives at level k = max(4, ceil(log2 S)); at that level it
// touches at most two granules of 2^k bytes, and it is entered under the key (k,
// granule) of each. A region containing [p, p+len) has size >= len, so a lookup probes
// one key per *populated* level >= ceil(log2 len): usually one or two hash probes,
// independent of how many regions are cached. Keys live in an open-addressing multimap.
//
// Concurrency contract: one writer at a time (the cache mutex), and the writer brackets
// every change with the cache's seqlock. Readers run concurrently with the writer and may
// observe a half-done change; every read is an atomic load, every index is bounded and
// every loop is bounded by the table size, so a torn read yields a wrong candidate
// (rejected by the seqlock validation), never a crash. Old tables are retired, not freed,
// until the index dies, so a reader never touches freed memory.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "rcache/virtual_array.h"

namespace mlxa2a::rcache::detail {

class RegionIndex {
 public:
  static constexpr unsigned kMinLevel = 4;
  static constexpr uint32_t kNoId = UINT32_MAX;

  RegionIndex();
  ~RegionIndex();
  RegionIndex(const RegionIndex&) = delete;
  RegionIndex& operator=(const RegionIndex&) = delete;

  // Writer side.
  void insert(uintptr_t start, uintptr_t end, uint32_t id);
  void erase(uintptr_t start, uintptr_t end, uint32_t id);
  [[nodiscard]] size_t entries() const { return live_; }

  // Reader side: calls accept(id) for each id that may hold a region containing
  // [p, p+len), smallest level first, until accept returns true. Returns that id or kNoId.
  template <class Accept>
  uint32_t find(uintptr_t p, size_t len, Accept&& accept) const;

  // Writer side: calls visit(id) for every region that may overlap [start, end) (an id
  // may be visited twice). Returns false without visiting when that would take more
  // probes than `budget`; the caller then scans all regions instead.
  template <class Visit>
  bool for_overlapping(uintptr_t start, uintptr_t end, size_t budget, Visit&& visit) const;

  static unsigned level_of(size_t size) {
    const unsigned k = size <= 1 ? 0u : static_cast<unsigned>(std::bit_width(size - 1));
    return k < kMinLevel ? kMinLevel : k;
  }

 private:
  struct Slot {
    std::atomic<uint64_t> key{0};  // 0 empty, kTomb deleted
    std::atomic<uint32_t> id{kNoId};
  };
  struct Table {
    explicit Table(size_t cap) : mask(cap - 1), shift(64 - std::countr_zero(cap)), slots(cap) {}
    size_t mask;
    unsigned shift;
    VirtualArray<Slot> slots;  // zero = empty; huge pages when large
  };
  static constexpr uint64_t kTomb = UINT64_MAX;
  static uint64_t key_of(unsigned level, uintptr_t granule) {
    return ((static_cast<uint64_t>(granule) << 6) | level) + 1;
  }
  static size_t hash(const Table& t, uint64_t key) {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> t.shift);
  }
  template <class Fn>
  static bool probe(const Table& t, uint64_t key, Fn&& fn);
  void put(Table& t, uint64_t key, uint32_t id);
  void grow_if_needed();

  std::atomic<Table*> table_;
  std::atomic<uint64_t> levels_{0};  // bit k set while level k has regions
  size_t per_level_[64] = {};
  size_t live_ = 0;   // keys present
  size_t used_ = 0;   // keys + tombstones in the current table
  std::vector<std::unique_ptr<Table>> tables_;  // current one last; older ones retired
};

template <class Fn>
bool RegionIndex::probe(const Table& t, uint64_t key, Fn&& fn) {
  size_t i = hash(t, key);
  for (size_t n = 0; n <= t.mask; ++n, i = (i + 1) & t.mask) {
    const uint64_t k = t.slots[i].key.load(std::memory_order_relaxed);
    if (k == 0) return false;
    if (k == key && fn(t.slots[i].id.load(std::memory_order_relaxed))) return true;
  }
  return false;
}

template <class Accept>
uint32_t RegionIndex::find(uintptr_t p, size_t len, Accept&& accept) const {
  const Table* t = table_.load(std::memory_order_acquire);
  uint64_t levels = levels_.load(std::memory_order_acquire);
  const unsigned min_level = level_of(len == 0 ? 1 : len);
  levels &= min_level >= 64 ? 0 : ~((uint64_t{1} << min_level) - 1);
  uint32_t found = kNoId;
  while (levels != 0) {
    const unsigned k = static_cast<unsigned>(std::countr_zero(levels));
    levels &= levels - 1;
    if (probe(*t, key_of(k, p >> k), [&](uint32_t id) {
          if (!accept(id)) return false;
          found = id;
          return true;
        })) {
      return found;
    }
  }
  return kNoId;
}

template <class Visit>
bool RegionIndex::for_overlapping(uintptr_t start, uintptr_t end, size_t budget, Visit&& visit) const {
  if (end <= start) return true;
  const Table* t = table_.load(std::memory_order_relaxed);
  const uint64_t all = levels_.load(std::memory_order_relaxed);
  size_t cost = 0;
  for (uint64_t l = all; l != 0; l &= l - 1) {
    const unsigned k = static_cast<unsigned>(std::countr_zero(l));
    cost += ((end - 1) >> k) - (start >> k) + 1;
    if (cost > budget) return false;
  }
  for (uint64_t l = all; l != 0; l &= l - 1) {
    const unsigned k = static_cast<unsigned>(std::countr_zero(l));
    for (uintptr_t g = start >> k; g <= ((end - 1) >> k); ++g) {
      probe(*t, key_of(k, g), [&](uint32_t id) {
        visit(id);
        return false;
      });
    }
  }
  return true;
}

}  // namespace mlxa2a::rcache::detail
