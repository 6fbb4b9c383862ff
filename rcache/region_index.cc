#include "rcache/region_index.h"

namespace mlxa2a::rcache::detail {

RegionIndex::RegionIndex() {
  tables_.push_back(std::make_unique<Table>(64));
  table_.store(tables_.back().get(), std::memory_order_release);
}

RegionIndex::~RegionIndex() = default;

void RegionIndex::put(Table& t, uint64_t key, uint32_t id) {
  size_t i = hash(t, key);
  for (;; i = (i + 1) & t.mask) {
    const uint64_t k = t.slots[i].key.load(std::memory_order_relaxed);
    if (k == 0 || k == kTomb) {
      if (k == 0) ++used_;
      // id first: a reader that sees the key must not pair it with a stale id for
      // long (the seqlock validation rejects the pair anyway).
      t.slots[i].id.store(id, std::memory_order_relaxed);
      t.slots[i].key.store(key, std::memory_order_release);
      return;
    }
  }
}

void RegionIndex::grow_if_needed() {
  Table* cur = table_.load(std::memory_order_relaxed);
  const size_t cap = cur->mask + 1;
  // Rebuild past 5/8 full (keys + tombstones), to at most half full (live keys): short
  // linear probes, a table half the size of a 1/4-full one (fewer cache and TLB misses
  // on random lookups), and at least cap/8 inserts between rebuilds.
  if ((used_ + 2) * 8 <= cap * 5) return;
  size_t new_cap = cap;
  while ((live_ + 2) * 2 > new_cap) new_cap *= 2;
  std::vector<std::pair<uint64_t, uint32_t>> keep;
  keep.reserve(live_);
  for (size_t i = 0; i < cap; ++i) {
    const uint64_t k = cur->slots[i].key.load(std::memory_order_relaxed);
    if (k != 0 && k != kTomb) keep.emplace_back(k, cur->slots[i].id.load(std::memory_order_relaxed));
  }
  used_ = 0;
  if (new_cap == cap) {
    // Same size: only tombstones go. Rebuild in place; concurrent readers may see a
    // half-rebuilt table, which the seqlock validation rejects (memory stays valid).
    for (size_t i = 0; i < cap; ++i) cur->slots[i].key.store(0, std::memory_order_relaxed);
    for (const auto& [k, id] : keep) put(*cur, k, id);
    return;
  }
  auto fresh = std::make_unique<Table>(new_cap);
  for (const auto& [k, id] : keep) put(*fresh, k, id);
  table_.store(fresh.get(), std::memory_order_release);
  // Readers may still be walking `cur`: it stays allocated until the index dies. Tables
  // only grow (x2), so the retired ones together are smaller than the live one.
  tables_.push_back(std::move(fresh));
}

void RegionIndex::insert(uintptr_t start, uintptr_t end, uint32_t id) {
  const unsigned k = level_of(end - start);
  const uintptr_t g0 = start >> k, g1 = (end - 1) >> k;
  grow_if_needed();
  Table& t = *table_.load(std::memory_order_relaxed);
  put(t, key_of(k, g0), id);
  ++live_;
  if (g1 != g0) {
    put(t, key_of(k, g1), id);
    ++live_;
  }
  if (per_level_[k]++ == 0) {
    levels_.store(levels_.load(std::memory_order_relaxed) | (uint64_t{1} << k),
                  std::memory_order_release);
  }
}

void RegionIndex::erase(uintptr_t start, uintptr_t end, uint32_t id) {
  const unsigned k = level_of(end - start);
  const uintptr_t g0 = start >> k, g1 = (end - 1) >> k;
  Table& t = *table_.load(std::memory_order_relaxed);
  for (uintptr_t g = g0; g <= g1; ++g) {
    const uint64_t key = key_of(k, g);
    size_t i = hash(t, key);
    for (size_t n = 0; n <= t.mask; ++n, i = (i + 1) & t.mask) {
      const uint64_t cur = t.slots[i].key.load(std::memory_order_relaxed);
      if (cur == 0) break;
      if (cur == key && t.slots[i].id.load(std::memory_order_relaxed) == id) {
        t.slots[i].key.store(kTomb, std::memory_order_relaxed);
        --live_;
        break;
      }
    }
  }
  if (--per_level_[k] == 0) {
    levels_.store(levels_.load(std::memory_order_relaxed) & ~(uint64_t{1} << k),
                  std::memory_order_relaxed);
  }
}

}  // namespace mlxa2a::rcache::detail
