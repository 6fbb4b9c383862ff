// Several threads get and release over shared buffers while one thread unmaps and
// remaps some of them and the cache evicts. Every Ref must cover its request with a
// registration that is live in the fake for as long as the Ref lives.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "tests/rcache/test_util.h"

namespace mlxa2a::rcache::test {
namespace {

TEST(RcacheStress, ConcurrentGetsReleasesUnmapsAndEviction) {
  FakeRegistrar fake;
  {
    Options o = test_options();
    o.max_regions = 24;
    auto cache = make_cache(fake, o);
    constexpr int kBufs = 32;
    const size_t len = 4 * page();
    std::vector<char*> bufs(kBufs);
    for (auto& b : bufs) {
      b = static_cast<char*>(mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
      ASSERT_NE(b, MAP_FAILED);
    }
    std::atomic<bool> stop{false};
    std::atomic<long> failures{0}, gets{0};
    auto worker = [&](unsigned seed) {
      std::mt19937 rng(seed);
      std::vector<Ref> held;
      for (int i = 0; i < 20000; ++i) {
        // Buffers 0..7 are remapped by the churn thread; only touch the stable ones.
        const int b = 8 + static_cast<int>(rng() % (kBufs - 8));
        const size_t off = rng() % (len / 2), n = 1 + rng() % (len / 2);
        Ref r = cache->get(bufs[b] + off, n, kLocalWrite);
        gets.fetch_add(1, std::memory_order_relaxed);
        const KeyInfo k = r.key_for(bufs[b] + off);
        const auto e = fake.entry(r.lkey());
        if (!r || !k.valid || k.addr != reinterpret_cast<uintptr_t>(bufs[b] + off) || e.len == 0 ||
            e.addr > k.addr || k.addr + n > e.addr + e.len) {
          failures.fetch_add(1);
        }
        if (rng() % 4 == 0) held.push_back(std::move(r));
        if (held.size() > 6) held.erase(held.begin());
      }
    };
    std::thread churn([&] {
      std::mt19937 rng(99);
      while (!stop.load()) {
        const int b = static_cast<int>(rng() % 8);
        Ref r = cache->get(bufs[b], len, kLocalWrite);
        r.reset();
        munmap(bufs[b], len);
        void* again = mmap(bufs[b], len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        if (again == MAP_FAILED) failures.fetch_add(1);
      }
    });
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < 3; ++t) threads.emplace_back(worker, t + 1);
    for (auto& t : threads) t.join();
    stop = true;
    churn.join();
    EXPECT_EQ(failures.load(), 0);
    EXPECT_GT(cache->stats().invalidations, 0u);
    EXPECT_LE(cache->stats().regions, 24u);
    for (auto b : bufs) munmap(b, len);
  }
  EXPECT_EQ(fake.live(), 0u);
}

TEST(RcacheStress, RefReleasedOnAnotherThread) {
  FakeRegistrar fake;
  {
    auto cache = make_cache(fake, test_options());
    std::vector<char> buf(1000);
    std::vector<Ref> refs;
    for (int i = 0; i < 10; ++i) refs.push_back(cache->get(buf.data() + i, 100, kLocalWrite));
    std::thread([&] { refs.clear(); }).join();  // -1s land in the other thread's counters
    cache->purge();  // pin sums are zero: everything goes
    EXPECT_EQ(fake.live(), 0u);
    EXPECT_EQ(cache->stats().regions, 0u);
    // And a Ref taken elsewhere, still alive, is respected.
    Ref held;
    std::thread([&] { held = cache->get(buf.data(), 100, kLocalWrite); }).join();
    cache->purge();
    EXPECT_TRUE(fake.is_live(held.lkey()));
  }
  EXPECT_EQ(fake.live(), 0u);
}

}  // namespace
}  // namespace mlxa2a::rcache::test
