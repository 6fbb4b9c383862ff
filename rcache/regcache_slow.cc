// RegCache slow path: misses, invalidation, eviction, teardown. Everything here runs
// with the cache mutex held. Readers run concurrently; see regcache.h and
// docs/rcache.md for the seqlock + per-thread pin protocol.
#include <algorithm>
#include <cstdio>

#include "rcache/regcache_impl.h"
#include "rcache/uffd_monitor.h"

namespace mlxa2a::rcache {

using detail::kDead;
using detail::kFree;
using detail::kLive;
using detail::PinTable;
using detail::Region;
using detail::RegionIndex;

RegCache::Impl::~Impl() {
  // Hooks no longer reach sink_ (the owner unsubscribed). Deregister everything.
  size_t leaked = 0;
  for (uint32_t id = 0; id < high_water_; ++id) {
    Region* r = slot(id);
    if (r->state.load(std::memory_order_relaxed) == kFree) continue;
    if (pin_sum(id) != 0) ++leaked;
    registrar_.deregister_memory(r->key);
    r->state.store(kFree, std::memory_order_relaxed);
  }
  if (leaked != 0) {
    std::fprintf(stderr, "mlxa2a rcache: destroyed with %zu slot(s) still referenced\n", leaked);
  }
}

int64_t RegCache::Impl::pin_sum(uint32_t id) const {
  int64_t sum = 0;
  for (const auto& t : tables_) sum += t->get(id);
  return sum;
}

uint32_t RegCache::Impl::taken_sum(uint32_t id) const {
  uint32_t sum = 0;
  for (const auto& t : tables_) sum += t->taken(id);
  return sum;
}

uint32_t RegCache::Impl::alloc_id() {
  if (!free_ids_.empty()) {
    const uint32_t id = free_ids_.back();
    free_ids_.pop_back();
    return id;
  }
  if (high_water_ >= PinTable::kMaxIds) return RegionIndex::kNoId;
  const uint32_t id = high_water_++;
  return id;
}

void RegCache::Impl::free_region(uint32_t id) {
  Region* r = slot(id);
  registrar_.deregister_memory(r->key);
  --registrations_;
  r->state.store(kFree, std::memory_order_relaxed);
  free_ids_.push_back(id);
}

void RegCache::Impl::settle(uint32_t id) {
  Region* r = slot(id);
  if (r != nullptr && r->state.load(std::memory_order_relaxed) == kDead && pin_sum(id) == 0) {
    free_region(id);
  }
}

uint32_t RegCache::Impl::find_locked(uintptr_t p, size_t len, unsigned access) const {
  detail::IndexEntry e;
  return index_.find(p, len, access, &e) ? e.id : RegionIndex::kNoId;  // only live regions
}

void RegCache::Impl::collect_overlapping(uintptr_t start, uintptr_t end,
                                         std::vector<uint32_t>* out) const {
  auto consider = [&](uint32_t id) {
    const Region* r = slot(id);
    if (r != nullptr && r->state.load(std::memory_order_relaxed) == kLive &&
        r->start.load(std::memory_order_relaxed) < end && start < r->end.load(std::memory_order_relaxed)) {
      out->push_back(id);
    }
  };
  // A huge range (brk shrink, big munmap) may cover more granules than there are
  // regions: then scanning the regions is cheaper than probing the index.
  if (!index_.for_overlapping(start, end, 4 * regions_ + 64, consider)) {
    for (uint32_t id = 0; id < high_water_; ++id) consider(id);
  }
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
}

void RegCache::Impl::drop_locked(std::vector<uint32_t>& ids) {
  if (ids.empty()) return;
  begin_write();
  for (uint32_t id : ids) {
    Region* r = slot(id);
    if (r->state.load(std::memory_order_relaxed) != kLive) continue;
    const uintptr_t s = r->start.load(std::memory_order_relaxed);
    const uintptr_t e = r->end.load(std::memory_order_relaxed);
    index_.erase(s, e, id);
    r->state.store(kDead, std::memory_order_relaxed);
    --regions_;
    bytes_ -= e - s;
  }
  // Every reader that pinned one of these and still believes the seqlock is now
  // visible to pin_sum(); every later reader sees the odd sequence and backs off.
  heavy_barrier();
  for (uint32_t id : ids) {
    settle(id);
    if (slot(id)->state.load(std::memory_order_relaxed) == kDead) dead_.push_back(id);
  }
  end_write();
}

void RegCache::Impl::drop_all_locked() {
  std::vector<uint32_t> ids;
  for (uint32_t id = 0; id < high_water_; ++id) {
    if (slot(id)->state.load(std::memory_order_relaxed) == kLive) ids.push_back(id);
  }
  ++stats_.flushes;
  stats_.invalidations += ids.size();
  drop_locked(ids);
}

// Applies everything that happened since the last call: unmap events, a lost hook,
// and references released since a region died.
void RegCache::Impl::sync_locked() {
  detail::check_mechanisms();
  const uint64_t epoch = detail::mechanism_epoch();
  bool flush = false;
  if (epoch != mech_epoch_) {
    mech_epoch_ = epoch;
    flush = true;
    caching_ok_ = caching_ok_ && detail::mechanism_ok(mode_);
  }
  if (sink_.pending() || flush) {
    std::vector<uint32_t> ids;
    const bool complete = sink_.drain([&](uintptr_t s, uintptr_t e) { collect_overlapping(s, e, &ids); });
    if (!complete || flush) {
      drop_all_locked();
    } else {
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      stats_.invalidations += ids.size();
      drop_locked(ids);
    }
    // Narrowed only here, never inside drop_locked(): slow_get() drops the regions a
    // merge absorbed *after* widening the span for the union it just registered, and
    // a reset there left the union's unmaps unheard (stale registrations, issue 24).
    if (regions_ == 0) sink_.reset_span();
  }
  if (!dead_.empty()) {
    std::vector<uint32_t> keep;
    for (uint32_t id : dead_) {
      settle(id);
      if (slot(id)->state.load(std::memory_order_relaxed) == kDead) keep.push_back(id);
    }
    std::sort(keep.begin(), keep.end());
    keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
    dead_.swap(keep);
  }
}

// CLOCK over region ids: a region taken since the hand last passed (its `taken` sum
// moved) gets a second chance; otherwise it is evicted. Referenced-by-a-Ref regions are skipped. Evicts a little more than
// needed so the membarrier is paid once per batch, not once per miss.
void RegCache::Impl::evict_locked(size_t need_bytes) {
  const size_t slack = max_regions_ / 64;
  auto fits = [&](size_t extra_regions) {
    return regions_ + 1 + extra_regions <= max_regions_ && bytes_ + need_bytes <= max_bytes_;
  };
  if (fits(0)) return;
  begin_write();
  heavy_barrier();
  for (size_t steps = 0; !fits(slack) && regions_ != 0 && steps < 2 * size_t{high_water_} + 2; ++steps) {
    const uint32_t id = static_cast<uint32_t>(hand_++ % high_water_);
    Region* r = slot(id);
    if (r->state.load(std::memory_order_relaxed) != kLive) continue;
    const uint32_t taken = taken_sum(id);
    if (taken != r->clock) {
      r->clock = taken;
      continue;
    }
    if (pin_sum(id) != 0) continue;
    const uintptr_t s = r->start.load(std::memory_order_relaxed);
    const uintptr_t e = r->end.load(std::memory_order_relaxed);
    index_.erase(s, e, id);
    --regions_;
    bytes_ -= e - s;
    free_region(id);
    ++stats_.evictions;
  }
  end_write();
}

Ref RegCache::Impl::slow_get(RegCache* owner, PinTable* pins, uintptr_t p, size_t len, unsigned access) {
  sync_locked();
  uint32_t id = find_locked(p, len, access);
  if (id != RegionIndex::kNoId) {
    PinTable::bump(pins->at(id).taken);
    return make_ref(owner, pins, id, p, len, detail::kNoSeq);
  }
  ++stats_.misses;
  const uintptr_t a = opt_.alignment;
  // Rounding to a <= page size never leaves the pages holding [p, p+len): those
  // pages are mapped, so the range cannot reach into another mapping.
  const uintptr_t s = p & ~(a - 1);
  const uintptr_t e = (p + len + a - 1) & ~(a - 1);

  // Overlap policy: merge. Regions sharing at least one byte with the new range are
  // absorbed into one registration covering the union, with the union of access
  // flags. (Overlapping ranges were each registered successfully and are still mapped,
  // else an unmap event would have removed them, so the union is registrable.)
  std::vector<uint32_t> merged;
  uintptr_t ms = s, me = e;
  unsigned macc = access;
  if (caching_ok_) {
    collect_overlapping(s, e, &merged);
    for (uint32_t m : merged) {
      const Region* r = slot(m);
      ms = std::min(ms, r->start.load(std::memory_order_relaxed));
      me = std::max(me, r->end.load(std::memory_order_relaxed));
      macc |= r->access.load(std::memory_order_relaxed);
    }
    evict_locked(me - ms);
  }
  // Events about this range must reach us from now on (before the NIC sees it).
  sink_.widen_span(ms, me);
  MemoryKey key;
  bool ok = registrar_.register_memory(reinterpret_cast<void*>(ms), me - ms, macc, &key);
  if (!ok && !merged.empty()) {  // the union failed: fall back to the request alone
    merged.clear();
    ms = s;
    me = e;
    macc = access;
    ok = registrar_.register_memory(reinterpret_cast<void*>(ms), me - ms, macc, &key);
  }
  if (!ok && (s != p || e != p + len)) {  // retry smaller: exactly the user's bytes
    ms = p;
    me = p + len;
    ok = registrar_.register_memory(reinterpret_cast<void*>(ms), me - ms, macc, &key);
  }
  if (!ok) return Ref{};  // nothing left behind
  if (mode_ == Invalidation::kStrict && !detail::uffd_watch(ms, me)) ++stats_.unwatched;
  id = alloc_id();
  if (id == RegionIndex::kNoId) {
    registrar_.deregister_memory(key);
    return Ref{};
  }
  ++registrations_;
  Region* r = slot(id);
  r->start.store(ms, std::memory_order_relaxed);
  r->end.store(me, std::memory_order_relaxed);
  r->access.store(macc, std::memory_order_relaxed);
  r->clock = taken_sum(id);  // before the bump below: the first pass spares it
  r->key = key;
  stats_.merges += merged.size();
  drop_locked(merged);
  PinTable::bump(pins->at(id).taken);
  admit_locked(id, key);
  return make_ref(owner, pins, id, p, len, detail::kNoSeq);
}

void RegCache::Impl::admit_locked(uint32_t id, const MemoryKey& key) {
  Region* r = slot(id);
  const uintptr_t ms = r->start.load(std::memory_order_relaxed);
  const uintptr_t me = r->end.load(std::memory_order_relaxed);
  const unsigned macc = r->access.load(std::memory_order_relaxed);
  if (caching_ok_ && regions_ + 1 <= max_regions_ && bytes_ + (me - ms) <= max_bytes_) {
    begin_write();
    index_.insert({ms, me, macc, id, key.lkey, key.rkey, key.iova != ms});
    r->state.store(kLive, std::memory_order_relaxed);
    ++regions_;
    bytes_ += me - ms;
    end_write();
  } else {
    // Over the limits with everything in use (or invalidation lost): hand out a
    // private registration that dies with its last Ref.
    r->state.store(kDead, std::memory_order_relaxed);
    dead_.push_back(id);
    ++stats_.uncached;
  }
}

void RegCache::Impl::purge() {
  std::lock_guard<std::mutex> lock(mu_);
  sync_locked();
  begin_write();
  heavy_barrier();
  for (uint32_t id = 0; id < high_water_; ++id) {
    Region* r = slot(id);
    if (r->state.load(std::memory_order_relaxed) != kLive || pin_sum(id) != 0) continue;
    const uintptr_t s = r->start.load(std::memory_order_relaxed);
    const uintptr_t e = r->end.load(std::memory_order_relaxed);
    index_.erase(s, e, id);
    --regions_;
    bytes_ -= e - s;
    free_region(id);
  }
  end_write();
}

Stats RegCache::Impl::stats() {
  std::lock_guard<std::mutex> lock(mu_);
  sync_locked();
  Stats s = stats_;
  s.regions = regions_;
  s.bytes = bytes_;
  s.live_registrations = registrations_;
  return s;
}

}  // namespace mlxa2a::rcache
