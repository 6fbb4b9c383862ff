#include "rcache/region_index.h"

namespace mlxa2a::rcache::detail {

RegionIndex::RegionIndex() {
  tables_.push_back(std::make_unique<Table>(64));
  table_.store(tables_.back().get(), std::memory_order_release);
}

RegionIndex::~RegionIndex() = default;

uint64_t RegionIndex::home_of(const Table& t, const Slot& s) {
  const uintptr_t start = s.start.load(std::memory_order_relaxed);
  const uintptr_t end = s.end.load(std::memory_order_relaxed);
  const unsigned k = level_of(end - start);
  const bool second = (s.meta.load(std::memory_order_relaxed) & kSecond) != 0;
  return hash(t, key_of(k, (second ? end - 1 : start) >> k));
}

void RegionIndex::put(Table& t, uintptr_t start, uintptr_t end, uint64_t keys, uint64_t meta) {
  const unsigned k = level_of(end - start);
  size_t i = hash(t, key_of(k, ((meta & kSecond) != 0 ? end - 1 : start) >> k));
  for (;; i = (i + 1) & t.mask) {
    Slot& s = t.slots[i];
    if (s.meta.load(std::memory_order_relaxed) == 0) {
      // Meta last: a reader that sees it must not pair it with a stale range for long
      // (the seqlock validation rejects the mix anyway).
      s.start.store(start, std::memory_order_relaxed);
      s.end.store(end, std::memory_order_relaxed);
      s.keys.store(keys, std::memory_order_relaxed);
      s.meta.store(meta, std::memory_order_release);
      return;
    }
  }
}

void RegionIndex::grow_if_needed() {
  Table* cur = table_.load(std::memory_order_relaxed);
  const size_t cap = cur->mask + 1;
  // Grow past 5/8 full, to at most half full: short linear probes, and a table half the
  // size of a 1/4-full one (fewer cache and TLB misses on random lookups).
  if ((live_ + 2) * 8 <= cap * 5) return;
  size_t new_cap = cap;
  while ((live_ + 2) * 2 > new_cap) new_cap *= 2;
  auto fresh = std::make_unique<Table>(new_cap);
  for (size_t i = 0; i < cap; ++i) {
    const Slot& s = cur->slots[i];
    const uint64_t m = s.meta.load(std::memory_order_relaxed);
    if (m != 0) {
      put(*fresh, s.start.load(std::memory_order_relaxed), s.end.load(std::memory_order_relaxed),
          s.keys.load(std::memory_order_relaxed), m);
    }
  }
  table_.store(fresh.get(), std::memory_order_release);
  // Readers may still be walking `cur`: it stays allocated until the index dies. Tables
  // only grow (x2), so the retired ones together are smaller than the live one.
  tables_.push_back(std::move(fresh));
}

void RegionIndex::insert(const IndexEntry& e) {
  const unsigned k = level_of(e.end - e.start);
  const uintptr_t g0 = e.start >> k, g1 = (e.end - 1) >> k;
  grow_if_needed();
  Table& t = *table_.load(std::memory_order_relaxed);
  const uint64_t keys = e.lkey | (static_cast<uint64_t>(e.rkey) << 32);
  const uint64_t meta = kUsed | (e.offset_iova ? kOffsetIova : 0) |
                        (static_cast<uint64_t>(e.id & kIdMask) << 32) | e.access;
  put(t, e.start, e.end, keys, meta);
  ++live_;
  if (g1 != g0) {
    put(t, e.start, e.end, keys, meta | kSecond);
    ++live_;
  }
  if (per_level_[k]++ == 0) {
    levels_.store(levels_.load(std::memory_order_relaxed) | (uint64_t{1} << k),
                  std::memory_order_release);
  }
}

// Backward-shift deletion: empty slot i, then walk on and move back every entry whose
// home position does not lie cyclically in (hole, its position], so that no chain has
// a gap before its entry.
void RegionIndex::erase_at(Table& t, size_t i) {
  size_t hole = i;
  for (size_t j = (i + 1) & t.mask; j != i; j = (j + 1) & t.mask) {
    Slot& s = t.slots[j];
    if (s.meta.load(std::memory_order_relaxed) == 0) break;
    const size_t home = home_of(t, s);
    if (((j - home) & t.mask) < ((j - hole) & t.mask)) continue;  // home in (hole, j]
    Slot& h = t.slots[hole];
    h.start.store(s.start.load(std::memory_order_relaxed), std::memory_order_relaxed);
    h.end.store(s.end.load(std::memory_order_relaxed), std::memory_order_relaxed);
    h.keys.store(s.keys.load(std::memory_order_relaxed), std::memory_order_relaxed);
    h.meta.store(s.meta.load(std::memory_order_relaxed), std::memory_order_relaxed);
    hole = j;
  }
  Slot& h = t.slots[hole];
  h.meta.store(0, std::memory_order_relaxed);
  h.start.store(0, std::memory_order_relaxed);
  h.end.store(0, std::memory_order_relaxed);
  h.keys.store(0, std::memory_order_relaxed);
}

void RegionIndex::erase(uintptr_t start, uintptr_t end, uint32_t id) {
  const unsigned k = level_of(end - start);
  const uintptr_t g0 = start >> k, g1 = (end - 1) >> k;
  Table& t = *table_.load(std::memory_order_relaxed);
  for (uintptr_t g = g0; g <= g1; ++g) {
    const uint64_t second = g == g0 ? 0 : kSecond;
    for_chain(t, key_of(k, g), [&](size_t i, uint64_t m) {
      if (id_of(m) != id || (m & kSecond) != second) return false;
      erase_at(t, i);
      --live_;
      return true;
    });
  }
  if (--per_level_[k] == 0) {
    levels_.store(levels_.load(std::memory_order_relaxed) & ~(uint64_t{1} << k),
                  std::memory_order_relaxed);
  }
}

}  // namespace mlxa2a::rcache::detail
