#include "rcache/region_index.h"

namespace mlxa2a::rcache::detail {

RegionIndex::RegionIndex() {
  tables_.push_back(std::make_unique<Table>(64));
  table_.store(tables_.back().get(), std::memory_order_release);
}

RegionIndex::~RegionIndex() = default;

void RegionIndex::put(Table& t, uintptr_t start, uintptr_t end, uint64_t keys, uint64_t meta) {
  const unsigned k = level_of(end - start);
  size_t i = hash(t, key_of(k, ((meta & kSecond) != 0 ? end - 1 : start) >> k));
  for (;; i = (i + 1) & t.mask) {
    Slot& s = t.slots[i];
    const uint64_t m = s.meta.load(std::memory_order_relaxed);
    if (m == 0 || (m & kTomb) != 0) {
      if (m == 0) ++used_;
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
  // Rebuild past 5/8 full (keys + tombstones), to at most half full (live keys): short
  // linear probes, a table half the size of a 1/4-full one (fewer cache and TLB misses
  // on random lookups), and at least cap/8 inserts between rebuilds.
  if ((used_ + 2) * 8 <= cap * 5) return;
  size_t new_cap = cap;
  while ((live_ + 2) * 2 > new_cap) new_cap *= 2;
  struct Kept {
    uintptr_t start, end;
    uint64_t keys, meta;
  };
  std::vector<Kept> keep;
  keep.reserve(live_);
  for (size_t i = 0; i < cap; ++i) {
    const Slot& s = cur->slots[i];
    const uint64_t m = s.meta.load(std::memory_order_relaxed);
    if (m != 0 && (m & kTomb) == 0) {
      keep.push_back({s.start.load(std::memory_order_relaxed), s.end.load(std::memory_order_relaxed),
                      s.keys.load(std::memory_order_relaxed), m});
    }
  }
  used_ = 0;
  if (new_cap == cap) {
    // Same size: only tombstones go. Rebuild in place; concurrent readers may see a
    // half-rebuilt table, which the seqlock validation rejects (memory stays valid).
    for (size_t i = 0; i < cap; ++i) {
      cur->slots[i].meta.store(0, std::memory_order_relaxed);
      cur->slots[i].end.store(0, std::memory_order_relaxed);
    }
    for (const Kept& e : keep) put(*cur, e.start, e.end, e.keys, e.meta);
    return;
  }
  auto fresh = std::make_unique<Table>(new_cap);
  for (const Kept& e : keep) put(*fresh, e.start, e.end, e.keys, e.meta);
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

void RegionIndex::erase(uintptr_t start, uintptr_t end, uint32_t id) {
  const unsigned k = level_of(end - start);
  const uintptr_t g0 = start >> k, g1 = (end - 1) >> k;
  Table& t = *table_.load(std::memory_order_relaxed);
  for (uintptr_t g = g0; g <= g1; ++g) {
    bool done = false;
    for_key(t, key_of(k, g), [&](Slot& s) {
      const uint64_t m = s.meta.load(std::memory_order_relaxed);
      if (done || id_of(m) != id || s.start.load(std::memory_order_relaxed) != start) return;
      s.end.store(0, std::memory_order_relaxed);  // holds no request from now on
      s.meta.store(m | kTomb, std::memory_order_relaxed);
      --live_;
      done = true;
    });
  }
  if (--per_level_[k] == 0) {
    levels_.store(levels_.load(std::memory_order_relaxed) & ~(uint64_t{1} << k),
                  std::memory_order_relaxed);
  }
}

}  // namespace mlxa2a::rcache::detail
