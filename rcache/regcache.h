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

namespace mlxa2a::rcache {

class RegCache;
namespace detail {
struct Region;
class PinTable;
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
  void reset() noexcept {
    if (cache_ != nullptr) release();
  }

  [[nodiscard]] uint32_t lkey() const { return key_.lkey; }
  [[nodiscard]] uint32_t rkey() const { return key_.rkey; }
  // For ptr in [addr(), addr() + length()] (one-past-the-end allowed, for empty tails).
  [[nodiscard]] KeyInfo key_for(const void* ptr) const {
    const auto q = reinterpret_cast<uintptr_t>(ptr);
    if (cache_ == nullptr || q < addr_ || q > addr_ + len_) return {};
    return {true, key_.lkey, key_.rkey, key_.iova + (q - reg_begin_)};
  }

  // The request this Ref was made for.
  [[nodiscard]] const void* addr() const { return reinterpret_cast<const void*>(addr_); }
  [[nodiscard]] size_t length() const { return len_; }
  // Diagnostics and tests only: the registered range. NOT a buffer address.
  [[nodiscard]] uintptr_t registered_begin() const { return reg_begin_; }
  [[nodiscard]] uintptr_t registered_end() const { return reg_end_; }

 private:
  friend class RegCache;
  Ref(RegCache* cache, detail::Region* region, detail::PinTable* table, uint32_t id, uintptr_t addr,
      size_t len, uintptr_t reg_begin, uintptr_t reg_end, const MemoryKey& key) noexcept
      : cache_(cache), region_(region), table_(table), id_(id), addr_(addr), len_(len),
        reg_begin_(reg_begin), reg_end_(reg_end), key_(key) {}
  void release() noexcept;  // drops the pin; cache_ becomes nullptr
  void take(Ref& other) noexcept {
    cache_ = other.cache_;
    region_ = other.region_;
    table_ = other.table_;
    id_ = other.id_;
    addr_ = other.addr_;
    len_ = other.len_;
    reg_begin_ = other.reg_begin_;
    reg_end_ = other.reg_end_;
    key_ = other.key_;
    other.cache_ = nullptr;
  }
  RegCache* cache_ = nullptr;
  detail::Region* region_ = nullptr;
  detail::PinTable* table_ = nullptr;  // the getting thread's pin table
  uint32_t id_ = 0;
  uintptr_t addr_ = 0;
  size_t len_ = 0;
  uintptr_t reg_begin_ = 0;
  uintptr_t reg_end_ = 0;
  MemoryKey key_;
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
  [[nodiscard]] Ref get(const void* addr, size_t len, unsigned access);

  // Deregisters every region nobody references. Locks.
  void purge();
  [[nodiscard]] Stats stats();
  [[nodiscard]] Invalidation invalidation() const { return mode_; }
  [[nodiscard]] size_t alignment() const { return options_.alignment; }

  class Impl;

 private:
  friend class Ref;
  RegCache() = default;
  std::unique_ptr<Impl> impl_;
  Options options_;
  Invalidation mode_ = Invalidation::kNone;
};

}  // namespace mlxa2a::rcache
