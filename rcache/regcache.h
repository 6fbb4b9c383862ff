// mlxa2a::rcache — the registration cache.
//
//   RegCache: maps user buffers to NIC registrations made through a Registrar you own.
//   Ref:      RAII reference to one cached registration, for one user buffer.
//
// THE RULE: a Ref gives you keys for *your own pointers*. The registered range is the
// request rounded out to Options::alignment and possibly merged with neighbours; its
// start is not your buffer and must never be used as one (a remote NIC writing at the
// region start instead of at the buffer corrupts memory before it). Use
// ref.key_for(ptr) to get {lkey, rkey, addr} for a pointer inside the range you asked
// for; it refuses pointers outside that range.
//
// Thread safety: get() and Ref destruction may run concurrently from any threads. A hit
// takes no lock and performs no atomic read-modify-write (see docs/rcache.md). Misses,
// invalidation and eviction serialise on one mutex; deregistration happens there, never
// inside an unmap hook.
//
// Lifetime: every Ref must be destroyed before its RegCache, and the Registrar must
// outlive the RegCache. While a Ref lives its registration stays valid: it is never
// evicted, and if its memory is unmapped it is dropped from the cache but deregistered
// only when the last Ref goes. ~RegCache deregisters everything.
//
// Invalidation sees munmap, mremap, madvise(DONTNEED|FREE|REMOVE), MAP_FIXED mmap, brk
// shrink and shmdt, including glibc's internal calls (free, realloc, heap trim). It does
// not see raw system calls that bypass libc (syscall(SYS_munmap, ...), or a runtime's
// own syscall stubs) unless Invalidation::kStrict adds userfaultfd; see docs/rcache.md.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "rcache/options.h"
#include "rcache/registrar.h"
#include "rcache/unmap_events.h"

namespace mlxa2a::rcache {

class RegCache;
namespace detail {
struct Region;
class PinTable;

// One thread's pin counters for one region (pin_table.h explains the scheme). Here
// because the inline hit and release paths below bump them.
struct PinCounters {
  std::atomic<uint32_t> taken;
  std::atomic<uint32_t> dropped;
};
// Owner thread only: a relaxed load and store (plain moves), no lock prefix.
inline void bump(std::atomic<uint32_t>& c) {
  c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

// A sequence value the cache never reaches: "no memo" / "not taken on the hit path".
inline constexpr uint64_t kNoSeq = UINT64_MAX;
inline constexpr uint32_t kMaxIds = uint32_t{1} << 20;  // regions per cache

// This thread's current cache (uid, pin table) and a memo of the last region it hit
// there, valid while the cache's seqlock still reads `seq`. Everything a repeated hit
// needs is here, so that hit reads no Region and calls nothing. In the header so the
// hit and release paths inline into the caller; initial-exec + constinit so an access
// is one %fs-relative load, with no __tls_get_addr and no TLS init wrapper.
struct Memo {
  uint64_t uid = 0;  // cache uids start at 1
  PinTable* table = nullptr;
  PinCounters* pins = nullptr;  // table's counter array (a Ref's pin_ inside it: ours)
  uint64_t seq = kNoSeq;
  uintptr_t start = 0;
  uintptr_t end = 0;
  unsigned access = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint64_t delta = 0;
  PinCounters* pin = nullptr;  // this thread's counters for the region
  Region* region = nullptr;
};
extern constinit thread_local Memo tl_memo __attribute__((tls_model("initial-exec")));
}  // namespace detail

// Keys and NIC address for one user pointer. `addr` goes into ibv_sge.addr (local) or
// the RDMA write's remote_addr (when sent to a peer together with rkey).
struct KeyInfo {
  bool valid = false;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
};

class Ref {
 public:
  Ref() = default;
  Ref(Ref&& other) noexcept { take(other); }
  Ref& operator=(Ref&& other) noexcept {
    if (this != &other) {
      reset();
      take(other);
    }
    return *this;
  }
  Ref(const Ref&) = delete;
  Ref& operator=(const Ref&) = delete;
  ~Ref() { reset(); }

  // False when get() failed (registration refused by the registrar).
  explicit operator bool() const { return cache_ != nullptr; }
  inline void reset() noexcept;  // defined after RegCache

  [[nodiscard]] uint32_t lkey() const { return lkey_; }
  [[nodiscard]] uint32_t rkey() const { return rkey_; }
  // For ptr in [addr(), addr() + length()] (one-past-the-end allowed, for empty tails).
  [[nodiscard]] KeyInfo key_for(const void* ptr) const {
    const auto q = reinterpret_cast<uintptr_t>(ptr);
    if (cache_ == nullptr || q < addr_ || q > addr_ + len_) return {};
    return {true, lkey_, rkey_, q + delta_};
  }

  // The request this Ref was made for.
  [[nodiscard]] const void* addr() const { return reinterpret_cast<const void*>(addr_); }
  [[nodiscard]] size_t length() const { return len_; }
  // Diagnostics and tests only: the registered range. NOT a buffer address. Read from
  // the region (stable while pinned), so the hit path need not copy them. 0 if empty.
  [[nodiscard]] uintptr_t registered_begin() const;
  [[nodiscard]] uintptr_t registered_end() const;

 private:
  friend class RegCache;
  // Eight words, all of them needed by key_for() or the release: the hit path stores
  // every field, so each one costs on every hit.
  Ref(RegCache* cache, detail::Region* region, detail::PinCounters* pin, uint64_t seq,
      uintptr_t addr, size_t len, uint64_t delta, uint32_t lkey, uint32_t rkey) noexcept
      : cache_(cache), region_(region), pin_(pin), seq_(seq), addr_(addr), len_(len),
        delta_(delta), lkey_(lkey), rkey_(rkey) {}
  // Out of line, rare: the pin is dropped, but something was written since the get.
  void release_checked() noexcept;
  // Out of line: released on another thread than the one that took it.
  void release_foreign() noexcept;
  void take(Ref& other) noexcept {
    cache_ = other.cache_;
    region_ = other.region_;
    pin_ = other.pin_;
    seq_ = other.seq_;
    addr_ = other.addr_;
    len_ = other.len_;
    delta_ = other.delta_;
    lkey_ = other.lkey_;
    rkey_ = other.rkey_;
    other.cache_ = nullptr;
  }
  RegCache* cache_ = nullptr;
  detail::Region* region_ = nullptr;  // its index in the region array is the id
  detail::PinCounters* pin_ = nullptr;  // the taking thread's counters for the region
  uint64_t seq_ = detail::kNoSeq;  // seqlock value the pin was validated at (hits only)
  uintptr_t addr_ = 0;
  size_t len_ = 0;
  uint64_t delta_ = 0;  // MemoryKey::iova - registered start (mod 2^64): NIC addr = ptr + delta
  uint32_t lkey_ = 0;
  uint32_t rkey_ = 0;
};

struct Stats {
  size_t regions = 0;        // cached (indexed) regions
  size_t bytes = 0;          // bytes covered by cached regions
  size_t live_registrations = 0;  // incl. dropped-but-still-referenced and uncached ones
  uint64_t misses = 0;       // slow-path registrations
  uint64_t evictions = 0;
  uint64_t invalidations = 0;  // regions dropped because their memory was unmapped
  uint64_t merges = 0;       // regions absorbed into a larger one
  uint64_t uncached = 0;     // registrations handed out outside the cache (limits)
  uint64_t flushes = 0;      // whole-cache flushes (lost events)
  uint64_t unwatched = 0;    // strict mode: ranges userfaultfd refused (hooks only)
};

class RegCache {
 public:
  // nullptr + *error when the options are invalid or the invalidation mechanism cannot
  // be installed. Thread-safe.
  static std::unique_ptr<RegCache> create(Registrar& registrar, const Options& options,
                                          std::string* error);
  ~RegCache();
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;

  // Registration covering [addr, addr+len) with at least `access` (Access bits).
  // len 0 is treated as 1. Empty Ref if the registrar refused.
  // The hit path is inline (below); misses and first hits call get_slow().
  [[nodiscard]] inline Ref get(const void* addr, size_t len, unsigned access);

  // Deregisters every region nobody references. Locks.
  void purge();
  [[nodiscard]] Stats stats();
  [[nodiscard]] Invalidation invalidation() const { return mode_; }
  [[nodiscard]] size_t alignment() const { return options_.alignment; }

  class Impl;

 private:
  friend class Ref;
  RegCache() = default;
  Ref get_slow(uintptr_t p, size_t len, unsigned access);
  // The reader's half of the pin/seqlock Dekker pattern (docs/rcache.md): free when the
  // writer uses membarrier, a real fence otherwise.
  void light_barrier() const {
    if (membarrier_) std::atomic_signal_fence(std::memory_order_seq_cst);
    else std::atomic_thread_fence(std::memory_order_seq_cst);
  }

  // Read by the inline paths, so they live here at fixed offsets rather than behind
  // impl_ (Impl refers to them). Declared before impl_: they outlive it.
  alignas(64) std::atomic<uint64_t> seq_{0};  // seqlock: odd while the index changes
  uint64_t uid_ = 0;                           // same line: read with seq_ on every hit
  bool membarrier_ = false;
  detail::EventSink sink_;                      // unmap events not yet applied
  std::unique_ptr<Impl> impl_;
  Options options_;
  Invalidation mode_ = Invalidation::kNone;
};

// The hit path proper: this thread hits the region it hit last and nothing changed
// since (no write section, no pending unmap event). Take the pin, make it visible
// before re-checking the seqlock, build the Ref from the memo. Everything else
// (index lookups, misses) is get_slow().
inline Ref RegCache::get(const void* addr, size_t len, unsigned access) {
  // Named directly, not through a reference: UBSan's null check on a reference to a
  // thread_local fires spuriously in threads (seen with g++ 12 -fsanitize=undefined).
  using detail::tl_memo;
  const auto p = reinterpret_cast<uintptr_t>(addr);
  len = len == 0 ? 1 : len;
  const uint64_t s1 = seq_.load(std::memory_order_acquire);
  if (tl_memo.uid == uid_ && tl_memo.seq == s1 && tl_memo.start <= p &&
      p + len <= tl_memo.end && (tl_memo.access & access) == access && !sink_.pending()) {
    detail::bump(tl_memo.pin->taken);
    light_barrier();
    std::atomic_thread_fence(std::memory_order_acquire);
    if (seq_.load(std::memory_order_relaxed) == s1) {
      // Nothing to do for CLOCK: the hand counts the `taken` bump above.
      // A prvalue: built directly in the caller's slot.
      return Ref(this, tl_memo.region, tl_memo.pin, s1, p, len, tl_memo.delta, tl_memo.lkey,
                 tl_memo.rkey);
    }
    detail::bump(tl_memo.pin->dropped);
  }
  return get_slow(p, len, access);
}

// Fast release: this thread took the Ref (its pin lies in this thread's current table:
// tables are per thread and per cache) and no write section began since the pin was
// validated. Then the region is still live and cannot be waiting for this release:
// a writer makes the sequence odd *before* marking a region dead, and the barrier pair
// guarantees that either we see the new sequence or the writer's pin sum sees our
// drop (and settles the region itself). Otherwise the out-of-line paths check the
// region's state.
inline void Ref::reset() noexcept {
  if (cache_ == nullptr) return;
  using detail::tl_memo;
  // The uid check: a dead cache's table address may be reused by a new cache's table
  // for another thread; a stale memo must not make us write that thread's counters.
  const auto off = reinterpret_cast<uintptr_t>(pin_) - reinterpret_cast<uintptr_t>(tl_memo.pins);
  if (off < detail::kMaxIds * sizeof(detail::PinCounters) && tl_memo.uid == cache_->uid_) {
    detail::bump(pin_->dropped);
    cache_->light_barrier();
    if (cache_->seq_.load(std::memory_order_relaxed) != seq_) release_checked();
  } else {
    release_foreign();
  }
  cache_ = nullptr;
}

}  // namespace mlxa2a::rcache
