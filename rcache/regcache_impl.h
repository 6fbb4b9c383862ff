// mlxa2a::rcache — RegCache internals (not part of the API; included by regcache*.cc).
#pragma once

#include <atomic>
#include <mutex>
#include <vector>

#include "rcache/pin_table.h"
#include "rcache/regcache.h"
#include "rcache/region_index.h"
#include "rcache/unmap_events.h"

namespace mlxa2a::rcache {

namespace detail {

enum RegionState : uint8_t {
  kFree = 0,  // id unused
  kLive = 1,  // registered and in the index
  kDead = 2,  // registered, out of the index (unmapped, merged away, or never cached);
              // deregistered when its last Ref goes
};

// The writer's record of a registration. Hits do not read it (the index slot carries
// what they need); pin holders read `state`, `start`/`end` (diagnostics) and `key`
// (offset iova only). Fields read by lock-free readers are atomics (relaxed loads:
// plain moves). `key` is written only while the id is unreachable.
struct alignas(64) Region {
  std::atomic<uintptr_t> start{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<unsigned> access{0};
  std::atomic<uint8_t> state{kFree};
  // CLOCK, writer only: the sum of the pin tables' `taken` counters when the hand last
  // passed. A different sum means the region was taken since (any hit bumps `taken`),
  // so no hit has to write anything shared for CLOCK's sake.
  uint32_t clock = 0;
  MemoryKey key;
};

}  // namespace detail

class RegCache::Impl {
 public:
  Impl(RegCache& owner, Registrar& registrar, const Options& options, size_t max_bytes);
  ~Impl();

  Ref get(RegCache* owner, uintptr_t p, size_t len, unsigned access);
  [[gnu::noinline]] Ref get_locked(RegCache* owner, uintptr_t p, size_t len, unsigned access);
  // The pin is already dropped: deregister if the region died meanwhile.
  void release_checked(const Ref& ref) noexcept;
  // Drops the pin from this thread's table (not the taker's), then as above.
  void release_foreign(const Ref& ref) noexcept;
  void purge();
  Stats stats();

  // The owner's, read by the inline hit path there.
  detail::EventSink& sink_;
  std::atomic<uint64_t>& seq_;
  bool caching_ok_ = true;  // false once invalidation is known lost
  Invalidation mode_ = Invalidation::kNone;  // the mechanism actually in use

  const uint64_t uid_;
  void light_barrier() const {
    if (membarrier_) std::atomic_signal_fence(std::memory_order_seq_cst);
    else std::atomic_thread_fence(std::memory_order_seq_cst);
  }
  [[nodiscard]] bool membarrier() const { return membarrier_; }

 private:
  // Reader side: ids come from racy reads, so bound them.
  detail::Region* region(uint32_t id) const {
    return id < detail::PinTable::kMaxIds ? &region_array_[id] : nullptr;
  }
  uint32_t id_of(const detail::Region* r) const {
    return static_cast<uint32_t>(r - region_array_.data());
  }
  // Writer side: id < high_water_.
  detail::Region* slot(uint32_t id) const { return &region_array_[id]; }
  detail::PinTable* my_table();  // defined in regcache.cc (thread-local fast check)
  detail::PinTable* my_table_slow();
  void heavy_barrier() const;

  // Everything below: caller holds mu_.
  Ref slow_get(RegCache* owner, detail::PinTable* pins, uintptr_t p, size_t len, unsigned access);
  // seq: the seqlock value the pin was validated at, kNoSeq off the lock-free path.
  Ref make_ref(RegCache* owner, detail::PinTable* pins, uint32_t id, uintptr_t p, size_t len,
               uint64_t seq);
  uint32_t find_locked(uintptr_t p, size_t len, unsigned access) const;
  void sync_locked();
  int64_t pin_sum(uint32_t id) const;
  uint32_t taken_sum(uint32_t id) const;
  void begin_write() { seq_.store(seq_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); std::atomic_thread_fence(std::memory_order_release); }
  void end_write() { seq_.store(seq_.load(std::memory_order_relaxed) + 1, std::memory_order_release); }
  // Takes live regions out of the index; deregisters the unreferenced ones now and the
  // others at their last release.
  void drop_locked(std::vector<uint32_t>& ids);
  // A new region (bounds, access and key set): into the index within the
  // limits, else private (dies with its last Ref).
  void admit_locked(uint32_t id, const MemoryKey& key);
  void drop_all_locked();
  void collect_overlapping(uintptr_t start, uintptr_t end, std::vector<uint32_t>* out) const;
  void evict_locked(size_t need_bytes);
  void settle(uint32_t id);  // kDead and unreferenced -> deregister + free id
  void free_region(uint32_t id);
  uint32_t alloc_id();

  Registrar& registrar_;
  const Options opt_;
  const size_t max_bytes_;
  const size_t max_regions_;
  const bool membarrier_;
  alignas(64) std::mutex mu_;
  detail::RegionIndex index_;
  detail::VirtualArray<detail::Region> region_array_{detail::PinTable::kMaxIds};
  std::vector<std::unique_ptr<detail::PinTable>> tables_;
  std::vector<uint32_t> free_ids_;
  uint32_t high_water_ = 0;
  std::vector<uint32_t> dead_;
  size_t hand_ = 0;
  size_t regions_ = 0;
  size_t bytes_ = 0;
  size_t registrations_ = 0;
  uint64_t mech_epoch_ = 0;
  Stats stats_;
};

// Pin already taken.
inline Ref RegCache::Impl::make_ref(RegCache* owner, detail::PinTable* pins, uint32_t id, uintptr_t p,
                                    size_t len, uint64_t seq) {
  detail::Region* r = region(id);
  const uintptr_t start = r->start.load(std::memory_order_relaxed);
  return Ref(owner, r, &pins->at(id), seq, p, len, r->key.iova - start, r->key.lkey, r->key.rkey);
}

}  // namespace mlxa2a::rcache
