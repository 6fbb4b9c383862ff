// Eviction and limits: CLOCK eviction of unreferenced regions, referenced regions never
// evicted or deregistered, uncached fallback when everything is in use.
#include <gtest/gtest.h>

#include <vector>

#include "tests/rcache/test_util.h"

namespace mlxa2a::rcache::test {
namespace {

TEST(RcacheLimits, MaxRegionsEvictsUnreferenced) {
  FakeRegistrar fake;
  {
    Options o = test_options();
    o.max_regions = 4;
    auto cache = make_cache(fake, o);
    std::vector<std::vector<char>> bufs(10, std::vector<char>(256));
    for (auto& b : bufs) {
      Ref r = cache->get(b.data(), b.size(), kLocalWrite);
      ASSERT_TRUE(r);
      EXPECT_LE(cache->stats().regions, 4u);
    }
    const Stats s = cache->stats();
    EXPECT_LE(s.regions, 4u);
    EXPECT_GE(s.evictions, 6u);
    EXPECT_EQ(fake.live(), s.regions);
  }
  EXPECT_EQ(fake.live(), 0u);
}

TEST(RcacheLimits, ReferencedRegionsAreNeverEvicted) {
  FakeRegistrar fake;
  {
    Options o = test_options();
    o.max_regions = 3;
    auto cache = make_cache(fake, o);
    std::vector<std::vector<char>> bufs(6, std::vector<char>(256));
    std::vector<Ref> held;
    for (int i = 0; i < 3; ++i) held.push_back(cache->get(bufs[i].data(), 256, kLocalWrite));
    // Full of referenced regions: the next ones are handed out uncached.
    Ref extra = cache->get(bufs[3].data(), 256, kLocalWrite);
    ASSERT_TRUE(extra);
    EXPECT_EQ(cache->stats().uncached, 1u);
    for (const Ref& r : held) EXPECT_TRUE(fake.is_live(r.lkey()));
    const uint32_t extra_key = extra.lkey();
    extra.reset();
    EXPECT_FALSE(fake.is_live(extra_key));  // uncached: dies with its Ref
    held.pop_back();                        // one region becomes evictable
    Ref next = cache->get(bufs[4].data(), 256, kLocalWrite);
    EXPECT_EQ(cache->stats().uncached, 1u);
    for (const Ref& r : held) EXPECT_TRUE(fake.is_live(r.lkey()));
    // Hits on referenced regions still work.
    Ref again = cache->get(bufs[0].data(), 256, kLocalWrite);
    EXPECT_EQ(again.lkey(), held[0].lkey());
  }
  EXPECT_EQ(fake.live(), 0u);
}

TEST(RcacheLimits, MaxBytes) {
  FakeRegistrar fake;
  {
    Options o = test_options();
    o.max_bytes = 3 * 4096;
    auto cache = make_cache(fake, o);
    std::vector<std::vector<char>> bufs(8, std::vector<char>(4000));
    for (auto& b : bufs) (void)cache->get(b.data(), b.size(), kLocalWrite);
    EXPECT_LE(cache->stats().bytes, 3u * 4096);
    // Bigger than the whole budget: served, not cached.
    std::vector<char> big(5 * 4096);
    Ref r = cache->get(big.data(), big.size(), kLocalWrite);
    EXPECT_TRUE(r);
    EXPECT_LE(cache->stats().bytes, 3u * 4096);
  }
  EXPECT_EQ(fake.live(), 0u);
}

TEST(RcacheLimits, ClockKeepsRecentlyHitRegions) {
  FakeRegistrar fake;
  {
    Options o = test_options();
    o.max_regions = 4;
    auto cache = make_cache(fake, o);
    std::vector<std::vector<char>> bufs(8, std::vector<char>(256));
    for (int i = 0; i < 4; ++i) (void)cache->get(bufs[i].data(), 256, kLocalWrite);
    // One eviction pass clears every referenced bit; then keep buffer 0 hot.
    (void)cache->get(bufs[4].data(), 256, kLocalWrite);
    for (int i = 5; i < 8; ++i) {
      (void)cache->get(bufs[0].data(), 256, kLocalWrite);
      (void)cache->get(bufs[i].data(), 256, kLocalWrite);
    }
    const size_t before = fake.registrations();
    (void)cache->get(bufs[0].data(), 256, kLocalWrite);
    EXPECT_EQ(fake.registrations(), before) << "hot region was evicted";
  }
  EXPECT_EQ(fake.live(), 0u);
}

TEST(RcacheLimits, MemlockCapsBytes) {
  FakeRegistrar fake;
  Options o = test_options();
  o.honour_memlock = true;
  o.max_bytes = 0;
  auto cache = make_cache(fake, o);
  std::vector<char> buf(64);
  EXPECT_TRUE(cache->get(buf.data(), buf.size(), kLocalWrite));
  cache->purge();
  EXPECT_EQ(fake.live(), 0u);
}

}  // namespace
}  // namespace mlxa2a::rcache::test
