// mlxa2a::rcache — address -> region index with lock-free, validated reads.
//
// Layout: a region of size S lives at level k = max(4, ceil(log2 S)); at that level it
// touches at most two granules of 2^k bytes, and it is entered under the key (k,
// granule) of each. A region containing [p, p+len) has size >= len, so a lookup probes
// one key per *populated* level >= ceil(log2 len): usually one or two hash probes,
// independent of how many regions are cached. Keys live in an open-addressing multimap.
//
// A slot carries everything a hit needs (range, access, keys, id), so a random hit over
// many regions reads one half cache line here and no Region (issue 3: the separate
// region read was the second dependent cache miss). Slots store no key: a probe walks
// the chain from the key's hash to the first never-used slot and takes any slot whose
// range holds the request (any such region is a correct answer); the writer recomputes
// a slot's key from its range when it needs it.
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

// One cached region as the index holds it. A reader's copy may be torn: trust it only
// after the seqlock re-check.
struct IndexEntry {
  uintptr_t start = 0;
  uintptr_t end = 0;
  unsigned access = 0;
  uint32_t id = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  bool offset_iova = false;  // MemoryKey::iova != start: the NIC address needs the Region
};

class RegionIndex {
 public:
  static constexpr unsigned kMinLevel = 4;
  static constexpr uint32_t kNoId = UINT32_MAX;

  RegionIndex();
  ~RegionIndex();
  RegionIndex(const RegionIndex&) = delete;
  RegionIndex& operator=(const RegionIndex&) = delete;

  // Writer side. e.id < 2^20 (kMaxIds).
  void insert(const IndexEntry& e);
  void erase(uintptr_t start, uintptr_t end, uint32_t id);
  [[nodiscard]] size_t entries() const { return live_; }

  // Reader side: copies out a region holding [p, p+len) (len >= 1) with at least
  // `access`, smallest populated level first. False if none.
  bool find(uintptr_t p, size_t len, unsigned access, IndexEntry* out) const;

  // Writer side: calls visit(id) for every region that overlaps [start, end) (an id
  // may be visited twice). Returns false without visiting when that would take more
  // probes than `budget`; the caller then scans all regions instead.
  template <class Visit>
  bool for_overlapping(uintptr_t start, uintptr_t end, size_t budget, Visit&& visit) const;

  static unsigned level_of(size_t size) {
    const unsigned k = size <= 1 ? 0u : static_cast<unsigned>(std::bit_width(size - 1));
    return k < kMinLevel ? kMinLevel : k;
  }

 private:
  // Two slots per cache line. All zero: empty, ends a probe. No tombstones: erase
  // shifts the rest of the chain back (linear probing's backward-shift deletion), so
  // chains stay as short as the live keys make them and no rebuild is ever needed for
  // deleted keys. A reader racing the shift may miss or tear an entry; the seqlock
  // rejects whatever it read.
  struct alignas(32) Slot {
    std::atomic<uintptr_t> start{0};
    std::atomic<uintptr_t> end{0};
    std::atomic<uint64_t> keys{0};  // lkey | rkey << 32
    std::atomic<uint64_t> meta{0};  // access | id << 32 | flags below
  };
  static constexpr uint64_t kUsed = uint64_t{1} << 63;
  static constexpr uint64_t kSecond = uint64_t{1} << 61;  // entered under granule g0 + 1
  static constexpr uint64_t kOffsetIova = uint64_t{1} << 60;
  static constexpr uint64_t kIdMask = (uint64_t{1} << 20) - 1;
  struct Table {
    explicit Table(size_t cap) : mask(cap - 1), shift(64 - std::countr_zero(cap)), slots(cap) {}
    size_t mask;
    unsigned shift;
    VirtualArray<Slot> slots;  // zero = empty; huge pages when large
  };
  static uint64_t key_of(unsigned level, uintptr_t granule) {
    return ((static_cast<uint64_t>(granule) << 6) | level) + 1;
  }
  static size_t hash(const Table& t, uint64_t key) {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> t.shift);
  }
  static uint32_t id_of(uint64_t meta) { return static_cast<uint32_t>((meta >> 32) & kIdMask); }
  // Writer side: calls fn(index, meta) for each slot in the probe chain of `key`
  // (entered under that key or any other whose chain runs through it) until fn
  // returns true.
  template <class Fn>
  static void for_chain(const Table& t, uint64_t key, Fn&& fn);
  static uint64_t home_of(const Table& t, const Slot& s);  // hash of the slot's key
  void erase_at(Table& t, size_t i);
  void put(Table& t, uintptr_t start, uintptr_t end, uint64_t keys, uint64_t meta);
  void grow_if_needed();

  std::atomic<Table*> table_;
  std::atomic<uint64_t> levels_{0};  // bit k set while level k has regions
  size_t per_level_[64] = {};
  size_t live_ = 0;  // keys present
  std::vector<std::unique_ptr<Table>> tables_;  // current one last; older ones retired
};

template <class Fn>
void RegionIndex::for_chain(const Table& t, uint64_t key, Fn&& fn) {
  size_t i = hash(t, key);
  for (size_t n = 0; n <= t.mask; ++n, i = (i + 1) & t.mask) {
    const uint64_t meta = t.slots[i].meta.load(std::memory_order_relaxed);
    if (meta == 0 || fn(i, meta)) return;
  }
}

// Inline: the index hit is most of a random hit's work.
inline bool RegionIndex::find(uintptr_t p, size_t len, unsigned access, IndexEntry* out) const {
  const Table* t = table_.load(std::memory_order_acquire);
  uint64_t levels = levels_.load(std::memory_order_acquire);
  const unsigned min_level = level_of(len);
  levels &= min_level >= 64 ? 0 : ~((uint64_t{1} << min_level) - 1);
  const uintptr_t last = p + len;
  while (levels != 0) {
    const unsigned k = static_cast<unsigned>(std::countr_zero(levels));
    levels &= levels - 1;
    size_t i = hash(*t, key_of(k, p >> k));
    for (size_t n = 0; n <= t->mask; ++n, i = (i + 1) & t->mask) {
      const Slot& s = t->slots[i];
      const uint64_t meta = s.meta.load(std::memory_order_relaxed);
      if (meta == 0) break;
      const uintptr_t start = s.start.load(std::memory_order_relaxed);
      const uintptr_t end = s.end.load(std::memory_order_relaxed);
      if (start <= p && last <= end && (static_cast<unsigned>(meta) & access) == access) {
        const uint64_t keys = s.keys.load(std::memory_order_relaxed);
        out->start = start;
        out->end = end;
        out->access = static_cast<unsigned>(meta);
        out->id = id_of(meta);
        out->lkey = static_cast<uint32_t>(keys);
        out->rkey = static_cast<uint32_t>(keys >> 32);
        out->offset_iova = (meta & kOffsetIova) != 0;
        return true;
      }
    }
  }
  return false;
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
      for_chain(*t, key_of(k, g), [&](size_t i, uint64_t meta) {
        const Slot& s = t->slots[i];
        if (s.start.load(std::memory_order_relaxed) < end && start < s.end.load(std::memory_order_relaxed)) {
          visit(id_of(meta));
        }
        return false;
      });
    }
  }
  return true;
}

}  // namespace mlxa2a::rcache::detail
