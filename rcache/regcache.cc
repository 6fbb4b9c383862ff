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

// Which PinTable this thread uses for which cache. Cache uids are never reused, so
// entries of dead caches never match again (they are a few bytes each).
struct TlEntry {
  uint64_t uid;
  PinTable* table;
};
thread_local TlEntry tl_last{0, nullptr};
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

Ref& Ref::operator=(Ref&& other) noexcept {
  if (this != &other) {
    reset();
    cache_ = other.cache_;
    id_ = other.id_;
    addr_ = other.addr_;
    len_ = other.len_;
    reg_begin_ = other.reg_begin_;
    reg_end_ = other.reg_end_;
    key_ = other.key_;
    other.cache_ = nullptr;
  }
  return *this;
}

void Ref::reset() noexcept {
  if (cache_ != nullptr) {
    cache_->release(id_);
    cache_ = nullptr;
  }
}

KeyInfo Ref::key_for(const void* ptr) const {
  const auto q = reinterpret_cast<uintptr_t>(ptr);
  if (cache_ == nullptr || q < addr_ || q > addr_ + len_) return {};
  return {true, key_.lkey, key_.rkey, key_.iova + (q - reg_begin_)};
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

Ref RegCache::get(const void* addr, size_t len, unsigned access) {
  return impl_->get(this, reinterpret_cast<uintptr_t>(addr), len == 0 ? 1 : len, access);
}
void RegCache::release(uint32_t id) noexcept { impl_->release(id); }
void RegCache::purge() { impl_->purge(); }
Stats RegCache::stats() { return impl_->stats(); }

// ---------------------------------------------------------------- Impl: hit path

RegCache::Impl::Impl(Registrar& registrar, const Options& options, size_t max_bytes)
    : registrar_(registrar),
      opt_(options),
      max_bytes_(max_bytes),
      max_regions_(options.max_regions == 0 ? PinTable::kMaxIds : std::min<size_t>(options.max_regions, PinTable::kMaxIds)),
      uid_(g_next_uid.fetch_add(1)),
      membarrier_(membarrier_available()),
      mech_epoch_(detail::mechanism_epoch()) {}

void RegCache::Impl::light_barrier() const {
  if (membarrier_) std::atomic_signal_fence(std::memory_order_seq_cst);
  else std::atomic_thread_fence(std::memory_order_seq_cst);
}

void RegCache::Impl::heavy_barrier() const {
  if (membarrier_) syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

PinTable* RegCache::Impl::my_table() {
  if (tl_last.uid == uid_) return tl_last.table;
  for (const TlEntry& e : tl_all) {
    if (e.uid == uid_) {
      tl_last = e;
      return e.table;
    }
  }
  PinTable* t;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tables_.push_back(std::make_unique<PinTable>());
    t = tables_.back().get();
  }
  tl_all.push_back({uid_, t});
  tl_last = {uid_, t};
  return t;
}

Ref RegCache::Impl::get(RegCache* owner, uintptr_t p, size_t len, unsigned access) {
  PinTable* pins = my_table();
  if (!sink_.pending()) {
    const uint64_t s1 = seq_.load(std::memory_order_acquire);
    if ((s1 & 1) == 0) {
      const uint32_t id = index_.find(p, len, [&](uint32_t cand) {
        const Region* r = region(cand);
        return r != nullptr && r->state.load(std::memory_order_relaxed) == kLive &&
               r->start.load(std::memory_order_relaxed) <= p &&
               p + len <= r->end.load(std::memory_order_relaxed) &&
               (r->access.load(std::memory_order_relaxed) & access) == access;
      });
      if (id != RegionIndex::kNoId) {
        pins->add(id, +1);
        light_barrier();  // pin visible before we re-check seq_ (pairs with heavy_barrier)
        std::atomic_thread_fence(std::memory_order_acquire);
        if (seq_.load(std::memory_order_relaxed) == s1) return make_ref(owner, pins, id, p, len);
        pins->add(id, -1);
      }
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  return slow_get(owner, pins, p, len, access);
}

// Pin already taken.
Ref RegCache::Impl::make_ref(RegCache* owner, PinTable*, uint32_t id, uintptr_t p, size_t len) {
  Region* r = region(id);
  if (r->referenced.load(std::memory_order_relaxed) == 0) {
    r->referenced.store(1, std::memory_order_relaxed);
  }
  Ref ref;
  ref.cache_ = owner;
  ref.id_ = id;
  ref.addr_ = p;
  ref.len_ = len;
  ref.reg_begin_ = r->start.load(std::memory_order_relaxed);
  ref.reg_end_ = r->end.load(std::memory_order_relaxed);
  ref.key_ = r->key;
  return ref;
}

void RegCache::Impl::release(uint32_t id) noexcept {
  my_table()->add(id, -1);
  light_barrier();  // pairs with the heavy_barrier after a region is marked kDead
  const Region* r = region(id);
  if (r != nullptr && r->state.load(std::memory_order_relaxed) != kLive) {
    std::lock_guard<std::mutex> lock(mu_);
    settle(id);
  }
}

}  // namespace mlxa2a::rcache
