#include "rcache/regcache.h"

#include <linux/membarrier.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "rcache/regcache_impl.h"

namespace mlxa2a::rcache {

using detail::kDead;
using detail::kFree;
using detail::kLive;
using detail::PinTable;
using detail::Region;
using detail::RegionIndex;

namespace {

// membarrier(2) lets the rare writer pay for the StoreLoad fence that the hit path
// would otherwise need (Dekker between "reader stores its pin, then checks the
// seqlock" and "writer bumps the seqlock, then sums pins"): the kernel makes every
// running thread of the process execute a full barrier. Without it the hit path uses
// a real fence.
bool membarrier_available() {
  static const bool ok = [] {
    const long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0 || (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return false;
    return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
  }();
  return ok;
}

std::atomic<uint64_t> g_next_uid{1};

// Which PinTable this thread uses for which cache, plus a memo of the last region it
// hit there (valid while the cache's seqlock still reads `seq`). Cache uids are never
// reused, so entries of dead caches never match again (they are a few bytes each).
constexpr uint64_t kNoMemo = UINT64_MAX;  // a sequence value the cache never reaches
struct TlEntry {
  uint64_t uid;
  PinTable* table;
  uint64_t seq;  // kNoMemo when there is no memo
  uintptr_t start;
  uintptr_t end;
  unsigned access;
  uint32_t id;
  PinTable::Counters* pin;  // this thread's counters for `id`
  Region* region;
};
// initial-exec: the hit path reads this on every call, and the default model for PIC
// code goes through __tls_get_addr. A few dozen bytes of static TLS are fine for a
// library that is LD_PRELOADed or linked (glibc keeps surplus static TLS for dlopen).
__attribute__((tls_model("initial-exec"))) thread_local TlEntry tl_last{0, nullptr, kNoMemo, 0, 0, 0, 0, nullptr, nullptr};
thread_local std::vector<TlEntry> tl_all;

size_t effective_max_bytes(const Options& o) {
  size_t m = o.max_bytes == 0 ? SIZE_MAX : o.max_bytes;
  rlimit lim{};
  if (o.honour_memlock && getrlimit(RLIMIT_MEMLOCK, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY) {
    m = std::min<size_t>(m, lim.rlim_cur / 2);
  }
  return m;
}

}  // namespace

// ---------------------------------------------------------------- Ref

void Ref::release() noexcept {
  cache_->impl_->release(*this);
  cache_ = nullptr;
}

// ---------------------------------------------------------------- RegCache

std::unique_ptr<RegCache> RegCache::create(Registrar& registrar, const Options& options,
                                           std::string* error) {
  std::string err = validate(options);
  if (!err.empty()) {
    if (error != nullptr) *error = err;
    return nullptr;
  }
  std::unique_ptr<RegCache> cache(new RegCache());
  cache->options_ = options;
  cache->impl_ = std::make_unique<Impl>(registrar, options, effective_max_bytes(options));
  err = detail::subscribe(&cache->impl_->sink_, options.invalidation, &cache->mode_);
  cache->impl_->mode_ = cache->mode_;
  if (!err.empty()) {
    if (error != nullptr) *error = err;
    cache->impl_.reset();
    return nullptr;
  }
  return cache;
}

RegCache::~RegCache() {
  if (impl_ != nullptr && mode_ != Invalidation::kNone) detail::unsubscribe(&impl_->sink_);
}

// The hit path proper: this thread hits the region it hit last and nothing changed
// since (no write section, no pending unmap event). Everything it needs is in the
// thread-local memo; the rest of the work is in Impl::get.
Ref RegCache::get(const void* addr, size_t len, unsigned access) {
  Impl& im = *impl_;
  const auto p = reinterpret_cast<uintptr_t>(addr);
  len = len == 0 ? 1 : len;
  TlEntry& tl = tl_last;
  const uint64_t s1 = im.seq_.load(std::memory_order_acquire);
  if (tl.uid == im.uid_ && tl.seq == s1 && tl.start <= p && p + len <= tl.end &&
      (tl.access & access) == access && !im.sink_.pending()) {
    PinTable::Counters& pin = *tl.pin;
    PinTable::bump(pin.taken);
    im.light_barrier();
    std::atomic_thread_fence(std::memory_order_acquire);
    if (im.seq_.load(std::memory_order_relaxed) == s1) {
      if (tl.region->referenced.load(std::memory_order_relaxed) == 0) {
        tl.region->referenced.store(1, std::memory_order_relaxed);
      }
      // A prvalue: built directly in the caller's slot (no zeroing, no move).
      return Ref(this, tl.region, tl.table, tl.id, p, len, tl.start, tl.end, tl.region->key);
    }
    PinTable::bump(pin.dropped);
  }
  return im.get(this, p, len, access);
}
void RegCache::purge() { impl_->purge(); }
Stats RegCache::stats() { return impl_->stats(); }

// ---------------------------------------------------------------- Impl: hit path

RegCache::Impl::Impl(Registrar& registrar, const Options& options, size_t max_bytes)
    : uid_(g_next_uid.fetch_add(1)),
      registrar_(registrar),
      opt_(options),
      max_bytes_(max_bytes),
      max_regions_(options.max_regions == 0 ? PinTable::kMaxIds : std::min<size_t>(options.max_regions, PinTable::kMaxIds)),
      membarrier_(membarrier_available()),
      mech_epoch_(detail::mechanism_epoch()) {}

// Caller holds mu_. A thread that has never used this cache has no PinTable and must
// take mu_ to get one, so it cannot be inside a hit: when the only table is the
// caller's own (the common single-threaded MPI rank), no other reader exists and the
// system call is skipped.
void RegCache::Impl::heavy_barrier() const {
  const bool alone = tables_.empty() ||
                     (tables_.size() == 1 && tl_last.uid == uid_ && tl_last.table == tables_[0].get());
  if (membarrier_ && !alone) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

[[gnu::always_inline]] inline PinTable* RegCache::Impl::my_table() {
  return tl_last.uid == uid_ ? tl_last.table : my_table_slow();
}

PinTable* RegCache::Impl::my_table_slow() {
  PinTable* t = nullptr;
  for (const TlEntry& e : tl_all) {
    if (e.uid == uid_) t = e.table;
  }
  if (t == nullptr) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      tables_.push_back(std::make_unique<PinTable>());
      t = tables_.back().get();
    }
    tl_all.push_back({uid_, t, kNoMemo, 0, 0, 0, 0, nullptr, nullptr});
  }
  tl_last = {uid_, t, kNoMemo, 0, 0, 0, 0, nullptr, nullptr};
  return t;
}

Ref RegCache::Impl::get(RegCache* owner, uintptr_t p, size_t len, unsigned access) {
  PinTable* pins = my_table();
  TlEntry& tl = tl_last;
  if (!sink_.pending()) {
    const uint64_t s1 = seq_.load(std::memory_order_acquire);
    uint32_t id = RegionIndex::kNoId;
    if ((s1 & 1) == 0) {
      id = index_.find(p, len, [&](uint32_t cand) {
        const Region* r = region(cand);
        return r != nullptr && r->state.load(std::memory_order_relaxed) == kLive &&
               r->start.load(std::memory_order_relaxed) <= p &&
               p + len <= r->end.load(std::memory_order_relaxed) &&
               (r->access.load(std::memory_order_relaxed) & access) == access;
      });
    }
    if (id != RegionIndex::kNoId) {
      PinTable::Counters& pin = pins->at(id);
      PinTable::bump(pin.taken);
      light_barrier();  // pin visible before we re-check seq_ (pairs with heavy_barrier)
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq_.load(std::memory_order_relaxed) == s1) {
        Ref ref = make_ref(owner, pins, id, p, len);
        Region* r = region(id);
        tl.seq = s1;
        tl.id = id;
        tl.start = r->start.load(std::memory_order_relaxed);
        tl.end = r->end.load(std::memory_order_relaxed);
        tl.access = r->access.load(std::memory_order_relaxed);
        tl.pin = &pin;
        tl.region = r;
        return ref;
      }
      PinTable::bump(pin.dropped);
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  return slow_get(owner, pins, p, len, access);
}

[[gnu::always_inline]] inline void RegCache::Impl::release(const Ref& ref) noexcept {
  // Our own counter if this thread took the Ref, else this thread's counter (-1 here,
  // +1 in the taker's table: the sum is what counts).
  // Tables are per thread and per cache, so "this thread's current table is the Ref's"
  // already implies the same cache.
  PinTable* table = ref.table_;
  if (tl_last.table != table) table = my_table_slow();
  PinTable::bump(table->at(ref.id_).dropped);
  light_barrier();  // pairs with the heavy_barrier after a region is marked kDead
  if (ref.region_->state.load(std::memory_order_relaxed) != kLive) {
    std::lock_guard<std::mutex> lock(mu_);
    settle(ref.id_);
  }
}

}  // namespace mlxa2a::rcache
