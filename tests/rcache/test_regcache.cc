// Hits, misses, overlaps, alignment and the "your pointer, not the region" rule.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/rcache/test_util.h"

namespace mlxa2a::rcache::test {
namespace {

TEST(RcacheOptions, AlignmentMustBePowerOfTwoFrom16ToPage) {
  Options o;
  for (size_t bad : {size_t{0}, size_t{8}, size_t{24}, size_t{100}, page() * 2}) {
    o.alignment = bad;
    EXPECT_NE(validate(o), "") << bad;
    FakeRegistrar fake;
    std::string err;
    EXPECT_EQ(RegCache::create(fake, o, &err), nullptr);
    EXPECT_NE(err.find("MLXA2A_RCACHE_ALIGN"), std::string::npos) << err;
  }
  for (size_t good : {size_t{16}, size_t{64}, size_t{4096}}) {
    o.alignment = good;
    EXPECT_EQ(validate(o), "") << good;
  }
  Invalidation m;
  EXPECT_TRUE(parse_invalidation("ucm", &m));
  EXPECT_EQ(m, Invalidation::kUcm);
  EXPECT_TRUE(parse_invalidation("strict", &m));
  EXPECT_EQ(m, Invalidation::kStrict);
  EXPECT_STREQ(to_string(m), "strict");
  EXPECT_FALSE(parse_invalidation("userfaultfd", &m));
}

TEST(Rcache, HitOnSameBufferAndSubBuffer) {
  FakeRegistrar fake;
  {
    auto cache = make_cache(fake, test_options());
    std::vector<char> buf(4096);
    Ref a = cache->get(buf.data(), buf.size(), kLocalWrite);
    ASSERT_TRUE(a);
    Ref b = cache->get(buf.data(), buf.size(), kLocalWrite);
    Ref c = cache->get(buf.data() + 100, 50, kLocalWrite);
    ASSERT_TRUE(b && c);
    EXPECT_EQ(fake.registrations(), 1u);
    EXPECT_EQ(a.lkey(), b.lkey());
    EXPECT_EQ(a.lkey(), c.lkey());
    EXPECT_EQ(c.key_for(buf.data() + 100).addr, reinterpret_cast<uintptr_t>(buf.data() + 100));
    EXPECT_EQ(cache->stats().misses, 1u);
  }
  EXPECT_EQ(fake.live(), 0u);
}

TEST(Rcache, MissOnDisjointBuffersAndAccessUpgrade) {
  FakeRegistrar fake;
  {
    auto cache = make_cache(fake, test_options());
    std::vector<char> x(1000), y(1000);
    Ref a = cache->get(x.data(), x.size(), kLocalWrite);
    Ref b = cache->get(y.data(), y.size(), kLocalWrite);
    EXPECT_EQ(fake.registrations(), 2u);
    EXPECT_NE(a.lkey(), b.lkey());
    // More access than cached: a miss, merged into one region with the union.
    Ref c = cache->get(x.data(), x.size(), kRemoteWrite);
    EXPECT_EQ(fake.registrations(), 3u);
    EXPECT_EQ(fake.entry(c.lkey()).access, unsigned{kLocalWrite | kRemoteWrite});
    Ref d = cache->get(x.data(), 10, kLocalWrite);
    EXPECT_EQ(d.lkey(), c.lkey());
    // The old registration lives on under `a` and dies with it.
    EXPECT_TRUE(fake.is_live(a.lkey()));
    const uint32_t old = a.lkey();
    a.reset();
    (void)cache->stats();
    EXPECT_FALSE(fake.is_live(old));
  }
  EXPECT_EQ(fake.live(), 0u);
}

TEST(Rcache, OverlapsMergeIntoOneRegion) {
  FakeRegistrar fake;
  {
    auto cache = make_cache(fake, test_options());
    std::vector<char> buf(10000);
    char* p = buf.data();
    { Ref a = cache->get(p + 100, 1000, kLocalWrite); }
    Ref b = cache->get(p + 600, 2000, kLocalWrite);  // overlaps a
    ASSERT_TRUE(b);
    const auto e = fake.entry(b.lkey());
    EXPECT_LE(e.addr, reinterpret_cast<uintptr_t>(p + 100));
    EXPECT_GE(e.addr + e.len, reinterpret_cast<uintptr_t>(p + 2600));
    EXPECT_EQ(fake.live(), 1u);  // a's region was merged away (unreferenced)
    EXPECT_EQ(cache->stats().regions, 1u);
    Ref c = cache->get(p + 100, 10, kLocalWrite);  // inside the union: hit
    EXPECT_EQ(c.lkey(), b.lkey());
    EXPECT_EQ(fake.registrations(), 2u);
  }
  EXPECT_EQ(fake.live(), 0u);
}

TEST(Rcache, FailedRegistrationLeavesNothingBehind) {
  FakeRegistrar fake;
  {
    auto cache = make_cache(fake, test_options());
    std::vector<char> buf(512);
    fake.fail_next(3);
    Ref a = cache->get(buf.data() + 1, 100, kLocalWrite);  // aligned + exact retry both fail
    EXPECT_FALSE(a);
    EXPECT_EQ(fake.live(), 0u);
    EXPECT_EQ(cache->stats().regions, 0u);
    fake.fail_next(0);
    Ref b = cache->get(buf.data() + 1, 100, kLocalWrite);
    EXPECT_TRUE(b);
    EXPECT_EQ(cache->stats().regions, 1u);
  }
  EXPECT_EQ(fake.live(), 0u);
}

TEST(Rcache, UnionThatFailsFallsBackToTheRequest) {
  FakeRegistrar fake;
  {
    auto cache = make_cache(fake, test_options());
    std::vector<char> buf(8192);
    Ref a = cache->get(buf.data(), 4000, kLocalWrite);
    fake.fail_if_longer(4000);
    Ref b = cache->get(buf.data() + 3000, 1000 + 96, kLocalWrite);  // union 4096+: refused
    ASSERT_TRUE(b);
    EXPECT_NE(a.lkey(), b.lkey());
    EXPECT_TRUE(fake.is_live(a.lkey()));
  }
  EXPECT_EQ(fake.live(), 0u);
}

// Every alignment, odd offsets: the registered range covers the request, starts on the
// alignment, never leaves the pages of the buffer, and key_for() translates the
// user's own pointer. A simulated remote write through the returned address hits
// exactly the buffer: guard bytes around it survive.
class RcacheAlign : public ::testing::TestWithParam<size_t> {};

TEST_P(RcacheAlign, RangeRoundsWithinPagesAndKeysFollowUserPointer) {
  const size_t align = GetParam();
  FakeRegistrar fake;
  {
    auto cache = make_cache(fake, test_options(align));
    Mapping m(4 * page());
    ASSERT_NE(m.get(), nullptr);
    std::memset(m.get(), 0x5A, 4 * page());
    for (size_t off : {size_t{1}, size_t{7}, size_t{13}, size_t{4095}, page() + 3, 2 * page() - 5}) {
      for (size_t len : {size_t{1}, size_t{15}, size_t{17}, size_t{100}, size_t{1000}}) {
        char* p = m.get() + off;
        if (p + len > m.get() + 4 * page()) continue;
        cache->purge();  // a fresh registration each time (hits may return merged ones)
        Ref r = cache->get(p, len, kLocalWrite | kRemoteWrite);
        ASSERT_TRUE(r);
        const uintptr_t up = reinterpret_cast<uintptr_t>(p);
        EXPECT_EQ(r.registered_begin() % align, 0u);
        EXPECT_LE(r.registered_begin(), up);
        EXPECT_GE(r.registered_end(), up + len);
        EXPECT_GE(r.registered_begin(), up & ~(page() - 1));
        EXPECT_LE(r.registered_end(), (up + len + page() - 1) & ~(page() - 1));
        const KeyInfo k = r.key_for(p);
        ASSERT_TRUE(k.valid);
        EXPECT_EQ(k.addr, up);
        EXPECT_EQ(k.lkey, r.lkey());
        EXPECT_FALSE(r.key_for(p - 1).valid);
        EXPECT_FALSE(r.key_for(p + len + 1).valid);
        // "NIC" writes len bytes at k.addr, which must be inside the registration.
        const auto reg = fake.entry(k.lkey);
        ASSERT_GE(k.addr, reg.addr);
        ASSERT_LE(k.addr + len, reg.addr + reg.len);
        std::memset(reinterpret_cast<void*>(k.addr), 0xC3, len);
        if (off > 0) {
          EXPECT_EQ(static_cast<unsigned char>(p[-1]), 0x5Au);
        }
        if (p + len < m.get() + 4 * page()) {
          EXPECT_EQ(static_cast<unsigned char>(p[len]), 0x5Au);
        }
        std::memset(p, 0x5A, len);
      }
    }
    EXPECT_EQ(cache->stats().live_registrations, fake.live());
  }
  EXPECT_EQ(fake.live(), 0u);
}

INSTANTIATE_TEST_SUITE_P(Alignments, RcacheAlign, ::testing::Values(16, 64, 4096));

// Send and receive buffers adjacent in one allocation, sizes not multiples of 16.
TEST_P(RcacheAlign, AdjacentSendAndReceiveBuffers) {
  const size_t align = GetParam();
  FakeRegistrar fake;
  {
    auto cache = make_cache(fake, test_options(align));
    std::vector<unsigned char> block(3 * 1000 + 64, 0xEE);
    unsigned char* send = block.data() + 5;
    unsigned char* recv = send + 37 * 27;  // 999 bytes of send, then recv
    const size_t send_len = 37 * 27, recv_len = 53 * 19;
    Ref s = cache->get(send, send_len, kLocalWrite);
    Ref r = cache->get(recv, recv_len, kLocalWrite | kRemoteWrite);
    ASSERT_TRUE(s && r);
    std::memset(send, 0x11, send_len);
    const KeyInfo k = r.key_for(recv);
    ASSERT_TRUE(k.valid);
    EXPECT_EQ(k.addr, reinterpret_cast<uintptr_t>(recv));
    std::memset(reinterpret_cast<void*>(k.addr), 0x22, recv_len);  // the "remote write"
    for (size_t i = 0; i < send_len; ++i) ASSERT_EQ(send[i], 0x11) << i;
    EXPECT_EQ(send[-1], 0xEE);
    EXPECT_EQ(recv[recv_len], 0xEE);
    // Both keys cover what they were asked for, with the access they were asked for.
    const auto es = fake.entry(s.lkey()), er = fake.entry(r.lkey());
    EXPECT_LE(es.addr, reinterpret_cast<uintptr_t>(send));
    EXPECT_GE(es.addr + es.len, reinterpret_cast<uintptr_t>(send + send_len));
    EXPECT_LE(er.addr, reinterpret_cast<uintptr_t>(recv));
    EXPECT_GE(er.addr + er.len, reinterpret_cast<uintptr_t>(recv + recv_len));
    EXPECT_TRUE(er.access & kRemoteWrite);
    // Again: now both are hits.
    const size_t regs = fake.registrations();
    Ref s2 = cache->get(send, send_len, kLocalWrite);
    Ref r2 = cache->get(recv, recv_len, kLocalWrite | kRemoteWrite);
    EXPECT_EQ(fake.registrations(), regs);
  }
  EXPECT_EQ(fake.live(), 0u);
}

TEST(Rcache, RefMovesAndResets) {
  FakeRegistrar fake;
  {
    auto cache = make_cache(fake, test_options());
    std::vector<char> buf(100);
    Ref a = cache->get(buf.data(), buf.size(), kLocalWrite);
    Ref b = std::move(a);
    EXPECT_FALSE(a);
    EXPECT_TRUE(b);
    Ref c;
    c = std::move(b);
    EXPECT_TRUE(c);
    c.reset();
    EXPECT_FALSE(c);
    EXPECT_FALSE(c.key_for(buf.data()).valid);
  }
  EXPECT_EQ(fake.live(), 0u);
}

// The NIC address comes from the registrar's iova, not the virtual address, on every
// path: the miss, the index hit, and the thread-local memo hit (which keeps its own copy).
TEST(Rcache, KeyForUsesIovaOnEveryPath) {
  FakeRegistrar fake;
  fake.iova_offset(0x123456789000ull);
  {
    auto cache = make_cache(fake, test_options());
    std::vector<char> x(1000), y(1000);
    for (int round = 0; round < 3; ++round) {  // miss, index hit, memo hit
      for (char* b : {x.data(), y.data()}) {
        Ref r = cache->get(b + 10, 500, kLocalWrite);
        ASSERT_TRUE(r);
        const KeyInfo k = r.key_for(b + 20);
        ASSERT_TRUE(k.valid);
        EXPECT_EQ(k.addr, reinterpret_cast<uintptr_t>(b + 20) + 0x123456789000ull) << round;
        EXPECT_EQ(k.lkey, r.lkey());
        EXPECT_EQ(fake.entry(r.lkey()).addr, r.registered_begin());
        EXPECT_EQ(r.registered_begin() + fake.entry(r.lkey()).len, r.registered_end());
        Ref again = cache->get(b + 10, 500, kLocalWrite);  // memo hit while r is held
        EXPECT_EQ(again.key_for(b + 20).addr, k.addr);
      }
    }
    EXPECT_EQ(cache->stats().misses, 2u);
  }
  EXPECT_EQ(fake.live(), 0u);
}

// A Ref taken on the lock-free hit path whose region is merged away while it is held:
// its release must notice (the release skips the state check only when no write
// section began since the hit) and deregister the absorbed region.
TEST(Rcache, HitRefOutlivingItsMergedRegionDeregistersIt) {
  FakeRegistrar fake;
  {
    auto cache = make_cache(fake, test_options());
    std::vector<char> buf(4096);
    { Ref warm = cache->get(buf.data(), 100, kLocalWrite); }       // miss
    { Ref warm = cache->get(buf.data(), 100, kLocalWrite); }       // index hit, sets the memo
    Ref held = cache->get(buf.data(), 100, kLocalWrite);           // memo hit
    Ref held2 = cache->get(buf.data() + 8, 50, kLocalWrite);       // memo hit
    const uint32_t old_key = held.lkey();
    Ref big = cache->get(buf.data(), buf.size(), kLocalWrite);     // merges the region
    ASSERT_NE(big.lkey(), old_key);
    EXPECT_TRUE(fake.is_live(old_key));  // still referenced
    held.reset();
    EXPECT_TRUE(fake.is_live(old_key));
    held2.reset();
    EXPECT_FALSE(fake.is_live(old_key));
    EXPECT_EQ(fake.live(), 1u);
  }
  EXPECT_EQ(fake.live(), 0u);
}

TEST(Rcache, TeardownDeregistersEverything) {
  FakeRegistrar fake;
  {
    auto cache = make_cache(fake, test_options());
    std::vector<std::vector<char>> bufs(50, std::vector<char>(333));
    for (auto& b : bufs) (void)cache->get(b.data(), b.size(), kLocalWrite);
    EXPECT_EQ(fake.live(), 50u);
  }
  EXPECT_EQ(fake.live(), 0u);
  EXPECT_EQ(fake.registrations(), fake.deregistrations());
}

}  // namespace
}  // namespace mlxa2a::rcache::test
