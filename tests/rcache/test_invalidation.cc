// Invalidation through every path the cache promises to see, in whichever mechanism
// this executable was built for (RCACHE_TEST_MODE: patch or ucm).
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/ipc.h>
#include <sys/shm.h>

#include <sys/syscall.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tests/rcache/test_util.h"

#if defined(__SANITIZE_ADDRESS__)
#define RCACHE_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RCACHE_UNDER_ASAN 1
#endif
#endif

namespace mlxa2a::rcache::test {
namespace {

uint64_t marker(const char* text) {
  uint64_t m;
  std::memcpy(&m, text, sizeof m);
  return m;
}

class RcacheInvalidation : public ::testing::Test {
 protected:
  void SetUp() override {
    cache_ = make_cache(fake_, test_options());
    ASSERT_NE(cache_, nullptr);
    ASSERT_EQ(cache_->invalidation(), test_mode());
    fake_.read_marker(true);
  }
  void TearDown() override {
    cache_.reset();
    EXPECT_EQ(fake_.live(), 0u);
  }
  // Registers [p, p+len), drops the Ref (the region stays cached), returns its lkey.
  uint32_t cache_it(void* p, size_t len) {
    Ref r = cache_->get(p, len, kLocalWrite);
    EXPECT_TRUE(r);
    return r.lkey();
  }
  bool still_cached(uint32_t key) {
    (void)cache_->stats();  // the next cache call applies pending events
    return fake_.is_live(key);
  }
  FakeRegistrar fake_;
  std::unique_ptr<RegCache> cache_;
};

TEST_F(RcacheInvalidation, Munmap) {
  Mapping m(4 * page());
  const uint32_t k = cache_it(m.get() + 10, 3 * page());
  EXPECT_TRUE(still_cached(k));
  m.unmap();
  EXPECT_FALSE(still_cached(k));
}

TEST_F(RcacheInvalidation, PartialMunmapDropsTheWholeRegion) {
  Mapping m(4 * page());
  const uint32_t k = cache_it(m.get(), 4 * page());
  munmap(m.get() + 3 * page(), page());
  EXPECT_FALSE(still_cached(k));
  munmap(m.get(), 3 * page());
  m.forget();
}

TEST_F(RcacheInvalidation, MunmapThenMmapAtSameAddressRegistersAfresh) {
  Mapping first(2 * page());
  char* addr = first.get();
  std::memcpy(addr, "MARKER-1", 8);
  Ref a = cache_->get(addr, 2 * page(), kLocalWrite);
  EXPECT_EQ(fake_.entry(a.lkey()).marker, marker("MARKER-1"));
  const uint32_t old = a.lkey();
  a.reset();
  first.unmap();
  Mapping second(2 * page(), addr);
  ASSERT_EQ(second.get(), addr) << "could not map the same address again";
  std::memcpy(addr, "MARKER-2", 8);
  Ref b = cache_->get(addr, 2 * page(), kLocalWrite);
  ASSERT_TRUE(b);
  EXPECT_NE(b.lkey(), old);
  EXPECT_FALSE(fake_.is_live(old));
  EXPECT_EQ(fake_.entry(b.lkey()).marker, marker("MARKER-2")) << "stale registration";
}

// Issue 24: a get that merged the cache's only region into a larger one (the same
// buffer at another offset, its end past the old region's) dropped the absorbed
// region after widening the event span for the union, and the drop emptied the
// span; the union's unmap then went unheard and the cache handed out the stale
// registration of the unmapped pages (wrong data under zero-copy).
TEST_F(RcacheInvalidation, MergedRegionStillSeesItsUnmap) {
  for (size_t off : {size_t{5}, size_t{10}, size_t{17}}) {
    Mapping first(4 * page());
    char* addr = first.get();
    char* start = addr + (off & ~size_t{15});  // where the merged/fresh registration begins
    std::memcpy(start, "MARKER-1", 8);
    const uint32_t a = cache_it(addr, 2 * page());
    const uint32_t merged = cache_it(addr + off, 2 * page());  // reaches past a's end
    ASSERT_NE(merged, a) << "offset " << off << ": expected a merged registration";
    EXPECT_FALSE(fake_.is_live(a));
    first.unmap();
    Mapping second(4 * page(), addr);
    ASSERT_EQ(second.get(), addr) << "could not map the same address again";
    std::memcpy(start, "MARKER-2", 8);
    Ref b = cache_->get(addr + off, 2 * page(), kLocalWrite);
    ASSERT_TRUE(b);
    EXPECT_NE(b.lkey(), merged) << "offset " << off << ": stale registration handed out";
    EXPECT_FALSE(fake_.is_live(merged));
    EXPECT_EQ(fake_.entry(b.lkey()).marker, marker("MARKER-2")) << "offset " << off;
  }
}

TEST_F(RcacheInvalidation, MapFixedOverACachedRange) {
  Mapping m(2 * page());
  const uint32_t k = cache_it(m.get(), 2 * page());
  void* p = mmap(m.get(), page(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  ASSERT_EQ(p, m.get());
  EXPECT_FALSE(still_cached(k));
}

TEST_F(RcacheInvalidation, MremapMove) {
  Mapping m(2 * page());
  Mapping blocker(page(), m.get() + 2 * page());  // growth in place impossible: it moves
  const uint32_t k = cache_it(m.get(), 2 * page());
  void* moved = mremap(m.get(), 2 * page(), 64 * page(), MREMAP_MAYMOVE);
  ASSERT_NE(moved, MAP_FAILED);
  m.forget();
  EXPECT_NE(moved, static_cast<void*>(m.get()));
  EXPECT_FALSE(still_cached(k));
  munmap(moved, 64 * page());
}

TEST_F(RcacheInvalidation, MremapFixedTarget) {
  // libucm 1.13's mremap hook drops the new_address argument of MREMAP_FIXED (the call
  // fails); our own patch forwards it.
  if (test_mode() == Invalidation::kUcm) GTEST_SKIP() << "libucm 1.13 does not support MREMAP_FIXED";
  Mapping m(2 * page());
  Mapping target(8 * page());
  const uint32_t k = cache_it(m.get(), 2 * page());
  const uint32_t t = cache_it(target.get(), 8 * page());
  void* moved = mremap(m.get(), 2 * page(), 8 * page(), MREMAP_MAYMOVE | MREMAP_FIXED, target.get());
  ASSERT_EQ(moved, target.get());
  m.forget();
  EXPECT_FALSE(still_cached(k));
  EXPECT_FALSE(still_cached(t));  // the target's old pages were replaced
}

TEST_F(RcacheInvalidation, MadviseDontneedAndFree) {
  Mapping m(4 * page());
  std::memset(m.get(), 1, 4 * page());
  const uint32_t k1 = cache_it(m.get(), page());
  const uint32_t k2 = cache_it(m.get() + 2 * page(), page());
  const uint32_t k3 = cache_it(m.get() + 3 * page(), page());
  ASSERT_EQ(madvise(m.get(), page(), MADV_DONTNEED), 0);
  ASSERT_EQ(madvise(m.get() + 2 * page(), page(), MADV_FREE), 0);
  ASSERT_EQ(madvise(m.get() + 3 * page(), page(), MADV_WILLNEED), 0);
  EXPECT_FALSE(still_cached(k1));
  EXPECT_FALSE(still_cached(k2));
  EXPECT_TRUE(still_cached(k3));  // harmless advice keeps the region
}

TEST_F(RcacheInvalidation, Shmdt) {
  const int id = shmget(IPC_PRIVATE, 16 * page(), IPC_CREAT | 0600);
  if (id < 0) GTEST_SKIP() << "System V shared memory unavailable: " << std::strerror(errno);
  void* p = shmat(id, nullptr, 0);
  shmctl(id, IPC_RMID, nullptr);
  ASSERT_NE(p, reinterpret_cast<void*>(-1));
  const uint32_t k = cache_it(static_cast<char*>(p) + 5 * page(), 100);
  ASSERT_EQ(shmdt(p), 0);
  EXPECT_FALSE(still_cached(k));
}

TEST_F(RcacheInvalidation, ReferencedRegionSurvivesUntilRelease) {
  Mapping m(2 * page());
  Ref r = cache_->get(m.get(), page(), kLocalWrite);
  const uint32_t k = r.lkey();
  m.unmap();
  EXPECT_TRUE(still_cached(k));        // out of the cache, but registered under r
  EXPECT_EQ(cache_->stats().regions, 0u);
  r.reset();
  EXPECT_FALSE(fake_.is_live(k));
}

TEST_F(RcacheInvalidation, EventRingOverflowFlushesEverything) {
  Mapping m(16 * page());
  const uint32_t k = cache_it(m.get(), page());
  (void)cache_it(m.get() + 15 * page(), page());  // the address filter now spans the mapping
  // More events than the ring holds, inside the filter but touching no region: the
  // cache must assume the worst and flush.
  for (int i = 0; i < 5000; ++i) ASSERT_EQ(madvise(m.get() + 7 * page(), page(), MADV_DONTNEED), 0);
  EXPECT_FALSE(still_cached(k));
  EXPECT_GE(cache_->stats().flushes, 1u);
  // And it keeps working.
  EXPECT_TRUE(cache_->get(m.get(), page(), kLocalWrite));
}

TEST_F(RcacheInvalidation, UnrelatedUnmapsKeepTheRegion) {
  Mapping m(4 * page());
  const uint32_t k = cache_it(m.get(), 2 * page());
  munmap(m.get() + 3 * page(), page());  // same mapping, other pages
  Mapping other(page());
  other.unmap();
  EXPECT_TRUE(still_cached(k));
}

TEST_F(RcacheInvalidation, BrkShrink) {
  // sbrk directly: nothing may allocate from the heap top in between, so prepare first.
  (void)cache_->stats();
  void* top = sbrk(0);
  if (sbrk(static_cast<intptr_t>(16 * page())) == reinterpret_cast<void*>(-1)) GTEST_SKIP() << "sbrk failed";
  const uint32_t k = cache_it(top, 16 * page());
  if (sbrk(0) != static_cast<char*>(top) + 16 * page()) GTEST_SKIP() << "heap moved underneath the test";
  ASSERT_NE(sbrk(-static_cast<intptr_t>(16 * page())), reinterpret_cast<void*>(-1));
  EXPECT_FALSE(still_cached(k));
}

#ifndef RCACHE_UNDER_ASAN  // ASan's allocator neither munmaps on free nor uses brk
TEST_F(RcacheInvalidation, FreeOfLargeMallocBlock) {
  ASSERT_EQ(mallopt(M_MMAP_THRESHOLD, 256 * 1024), 1);  // fixed: no dynamic threshold
  char* p = static_cast<char*>(malloc(4 << 20));
  ASSERT_NE(p, nullptr);
  std::memset(p, 3, 4 << 20);
  const uint32_t k = cache_it(p + 100, 3 << 20);
  free(p);  // glibc: munmap_chunk -> __munmap (hidden alias, not the PLT)
  EXPECT_FALSE(still_cached(k));
}

TEST_F(RcacheInvalidation, ReallocThatMoves) {
  ASSERT_EQ(mallopt(M_MMAP_THRESHOLD, 256 * 1024), 1);
  char* p = static_cast<char*>(malloc(1 << 20));
  ASSERT_NE(p, nullptr);
  Mapping blocker(page(), p + (1 << 20) + page());  // ask for the neighbour to force a move
  const uint32_t k = cache_it(p, 1 << 20);
  char* q = static_cast<char*>(realloc(p, 64 << 20));  // glibc: mremap_chunk -> __mremap
  ASSERT_NE(q, nullptr);
  EXPECT_FALSE(still_cached(k));
  free(q);
}

TEST_F(RcacheInvalidation, HeapTrim) {
  // Fill the heap top, register some of it, free it all and trim: glibc returns the
  // top to the kernel (sbrk(-n) -> __brk) and/or madvises free pages away.
  ASSERT_EQ(mallopt(M_MMAP_THRESHOLD, 256 * 1024), 1);
  std::vector<char*> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(static_cast<char*>(malloc(64 * 1024)));
  std::memset(blocks.back(), 7, 64 * 1024);
  const uint32_t k = cache_it(blocks.back(), 64 * 1024);
  for (char* b : blocks) free(b);
  malloc_trim(0);
  EXPECT_FALSE(still_cached(k));
}
#endif


// Strict mode: raw system calls bypass every libc hook; userfaultfd still reports them.
class RcacheStrict : public ::testing::Test {
 protected:
  void SetUp() override {
    Options o = test_options();
    o.invalidation = Invalidation::kStrict;
    std::string err;
    cache_ = RegCache::create(fake_, o, &err);
    if (cache_ == nullptr) GTEST_SKIP() << err;
  }
  void TearDown() override {
    cache_.reset();
    EXPECT_EQ(fake_.live(), 0u);
  }
  uint32_t cache_it(void* p, size_t len) {
    Ref r = cache_->get(p, len, kLocalWrite);
    EXPECT_TRUE(r);
    return r.lkey();
  }
  // The event is published by the monitor thread right after the kernel hands it over.
  bool dropped_soon(uint32_t key) {
    for (int i = 0; i < 1000; ++i) {
      (void)cache_->stats();
      if (!fake_.is_live(key)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  }
  FakeRegistrar fake_;
  std::unique_ptr<RegCache> cache_;
};

TEST_F(RcacheStrict, RawMunmap) {
  Mapping m(4 * page());
  const uint32_t k = cache_it(m.get() + 8, 2 * page());
  EXPECT_EQ(cache_->stats().unwatched, 0u);
  ASSERT_EQ(syscall(SYS_munmap, m.get(), 4 * page()), 0);
  m.forget();
  EXPECT_TRUE(dropped_soon(k));
}

TEST_F(RcacheStrict, RawMadviseDontneed) {
  Mapping m(4 * page());
  std::memset(m.get(), 1, 4 * page());
  const uint32_t k = cache_it(m.get(), page());
  ASSERT_EQ(syscall(SYS_madvise, m.get(), page(), MADV_DONTNEED), 0);
  EXPECT_TRUE(dropped_soon(k));
}

TEST_F(RcacheStrict, RawMremap) {
  Mapping m(2 * page());
  Mapping blocker(page(), m.get() + 2 * page());
  const uint32_t k = cache_it(m.get(), 2 * page());
  const long moved = syscall(SYS_mremap, m.get(), 2 * page(), 64 * page(), MREMAP_MAYMOVE);
  ASSERT_NE(moved, -1);
  m.forget();
  EXPECT_TRUE(dropped_soon(k));
  munmap(reinterpret_cast<void*>(moved), 64 * page());
}

TEST_F(RcacheStrict, HooksStillWork) {
  Mapping m(2 * page());
  const uint32_t k = cache_it(m.get(), page());
  m.unmap();
  EXPECT_TRUE(dropped_soon(k));
}

}  // namespace
}  // namespace mlxa2a::rcache::test
