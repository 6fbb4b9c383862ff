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
using detail::tl_memo;  // named directly everywhere: see RegCache::get in regcache.h

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

// Every cache this thread has used, with its PinTable. detail::tl_memo is the current
// one (plus the memo). Cache uids are never reused, so entries of dead caches never
// match again (they are a few bytes each).
struct TlEntry {
  uint64_t uid;
  PinTable* table;
};
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

// initial-exec: the hit path reads this on every call, and the default model for PIC
// code goes through __tls_get_addr. A hundred bytes of static TLS are fine for a
// library that is LD_PRELOADed or linked (glibc keeps surplus static TLS for dlopen).
constinit thread_local detail::Memo detail::tl_memo __attribute__((tls_model("initial-exec")));

// ---------------------------------------------------------------- Ref

void Ref::release_checked() noexcept { cache_->impl_->release_checked(*this); }
uintptr_t Ref::registered_begin() const {
  return cache_ == nullptr ? 0 : region_->start.load(std::memory_order_relaxed);
}
uintptr_t Ref::registered_end() const {
  return cache_ == nullptr ? 0 : region_->end.load(std::memory_order_relaxed);
}
void Ref::release_foreign() noexcept { cache_->impl_->release_foreign(*this); }

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
  cache->impl_ = std::make_unique<Impl>(*cache, registrar, options, effective_max_bytes(options));
  cache->uid_ = cache->impl_->uid_;
  cache->membarrier_ = cache->impl_->membarrier();
  err = detail::subscribe(&cache->sink_, options.invalidation, &cache->mode_);
  cache->impl_->mode_ = cache->mode_;
  if (!err.empty()) {
    if (error != nullptr) *error = err;
    cache->impl_.reset();
    return nullptr;
  }
  return cache;
}

RegCache::~RegCache() {
  if (impl_ != nullptr && mode_ != Invalidation::kNone) detail::unsubscribe(&sink_);
}

Ref RegCache::get_slow(uintptr_t p, size_t len, unsigned access) {
  return impl_->get(this, p, len, access);
}
void RegCache::purge() { impl_->purge(); }
Stats RegCache::stats() { return impl_->stats(); }

// ---------------------------------------------------------------- Impl: hit path

RegCache::Impl::Impl(RegCache& owner, Registrar& registrar, const Options& options, size_t max_bytes)
    : sink_(owner.sink_),
      seq_(owner.seq_),
      uid_(g_next_uid.fetch_add(1)),
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
  const bool alone = tables_.empty() || (tables_.size() == 1 && tl_memo.uid == uid_ &&
                                         tl_memo.table == tables_[0].get());
  if (membarrier_ && !alone) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

[[gnu::always_inline]] inline PinTable* RegCache::Impl::my_table() {
  return tl_memo.uid == uid_ ? tl_memo.table : my_table_slow();
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
    tl_all.push_back({uid_, t});
  }
  detail::tl_memo = detail::Memo{};
  tl_memo.uid = uid_;
  tl_memo.table = t;
  tl_memo.pins = t->data();
  return t;
}

// The index hit: no lock, no call, few registers (the locked rest is out of line, so
// this part needs no callee-saved spills).
Ref RegCache::Impl::get(RegCache* owner, uintptr_t p, size_t len, unsigned access) {
  // A thread switching between caches points its memo at this one (its first get here
  // creates its pin table), then hits without the lock like any other.
  if (tl_memo.uid != uid_) (void)my_table_slow();
  if (!sink_.pending()) {
    const uint64_t s1 = seq_.load(std::memory_order_acquire);
    detail::IndexEntry e;
    // One index slot holds everything below: the only cache line read before the pin.
    if ((s1 & 1) == 0 && index_.find(p, len, access, &e)) {
      PinTable::Counters& pin = tl_memo.pins[e.id];  // e.id < 2^20: masked by the index
      PinTable::bump(pin.taken);
      light_barrier();  // pin visible before we re-check seq_ (pairs with heavy_barrier)
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq_.load(std::memory_order_relaxed) == s1) {
        // e was read whole before the re-check: it is the live region's. Pinned now, so
        // its Region is stable (read only for an offset iova).
        Region* r = region(e.id);
        const uint64_t delta = e.offset_iova ? r->key.iova - e.start : 0;
        tl_memo.seq = s1;
        tl_memo.start = e.start;
        tl_memo.end = e.end;
        tl_memo.access = e.access;
        tl_memo.lkey = e.lkey;
        tl_memo.rkey = e.rkey;
        tl_memo.delta = delta;
        tl_memo.pin = &pin;
        tl_memo.region = r;
        return Ref(owner, r, &pin, s1, p, len, delta, e.lkey, e.rkey);
      }
      PinTable::bump(pin.dropped);
    }
  }
  return get_locked(owner, p, len, access);
}

Ref RegCache::Impl::get_locked(RegCache* owner, uintptr_t p, size_t len, unsigned access) {
  PinTable* pins = my_table();
  std::lock_guard<std::mutex> lock(mu_);
  return slow_get(owner, pins, p, len, access);
}

void RegCache::Impl::release_checked(const Ref& ref) noexcept {
  if (ref.region_->state.load(std::memory_order_relaxed) != kLive) {
    std::lock_guard<std::mutex> lock(mu_);
    settle(id_of(ref.region_));
  }
}

void RegCache::Impl::release_foreign(const Ref& ref) noexcept {
  // -1 in this thread's table, +1 in the taker's: only the sum counts.
  PinTable::bump(my_table_slow()->at(id_of(ref.region_)).dropped);
  light_barrier();  // pairs with the heavy_barrier after a region is marked kDead
  release_checked(ref);
}

}  // namespace mlxa2a::rcache
