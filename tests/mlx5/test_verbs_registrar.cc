// The registration cache's verbs registrar (core/mlx5/verbs_registrar.h)
// under the real RegCache, over fakeverbs, on this process's own PD.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/mlx5/resources.h"
#include "core/mlx5/verbs_registrar.h"
#include "core/shm/status.h"
#include "rcache/regcache.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::mlx5 {
namespace {

// The registrar under the real cache, on this process's own PD.
class VerbsRegistrarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    v_ = load_verbs();
    ASSERT_NE(v_, nullptr) << verbs_unavailable_reason();
    std::string why;
    ASSERT_EQ(Device::open(*v_, NetOptions{}, 16, &dev_, &why), Status::ok) << why;
    reg_ = std::make_unique<VerbsRegistrar>(*v_, dev_->pd());
    rcache::Options o;
    o.alignment = 16;
    cache_ = rcache::RegCache::create(*reg_, o, &why);
    ASSERT_NE(cache_, nullptr) << why;
  }
  void TearDown() override {
    cache_.reset();
    if (reg_) {
      EXPECT_EQ(reg_->registered(), reg_->deregistered());  // nothing leaked
    }
  }
  static constexpr unsigned kAccess = rcache::kLocalWrite | rcache::kRemoteRead;
  const Verbs* v_ = nullptr;
  std::shared_ptr<Device> dev_;
  std::unique_ptr<VerbsRegistrar> reg_;
  std::unique_ptr<rcache::RegCache> cache_;
};

// The seed's bug class: the address put into an SGE must be the user's
// pointer, whatever the alignment and offset, and the MR must cover it.
TEST_F(VerbsRegistrarTest, AddressIsTheUsersPointerAtEveryAlignmentAndOffset) {
  for (std::size_t align : {16u, 64u, 4096u}) {
    for (std::size_t off : {1u, 3u, 17u}) {
      const std::size_t len = 1000;
      void* base = std::aligned_alloc(align, 3 * 4096);
      ASSERT_NE(base, nullptr);
      const char* p = static_cast<const char*>(base) + off;
      rcache::Ref ref = cache_->get(p, len, kAccess);
      ASSERT_TRUE(ref);
      const rcache::KeyInfo k = ref.key_for(p);
      ASSERT_TRUE(k.valid);
      EXPECT_EQ(k.addr, reinterpret_cast<std::uintptr_t>(p)) << align << "+" << off;
      EXPECT_NE(ref.registered_begin(), reinterpret_cast<std::uintptr_t>(p));  // rounded out
      EXPECT_EQ(ref.key_for(p + len).addr, reinterpret_cast<std::uintptr_t>(p + len));
      EXPECT_FALSE(ref.key_for(p - 1).valid);  // outside the request: refused
      ref.reset();
      cache_->purge();
      std::free(base);
    }
  }
  EXPECT_EQ(reg_->refused(), 0u);
}

TEST_F(VerbsRegistrarTest, SubBufferOfACachedRegionHitsWithItsOwnAddress) {
  std::vector<char> buf(64 * 1024);
  rcache::Ref whole = cache_->get(buf.data(), buf.size(), kAccess);
  ASSERT_TRUE(whole);
  const std::uint64_t before = reg_->registered();
  rcache::Ref part = cache_->get(buf.data() + 4099, 333, kAccess);
  ASSERT_TRUE(part);
  EXPECT_EQ(reg_->registered(), before);  // served by the cached region
  EXPECT_EQ(part.lkey(), whole.lkey());
  EXPECT_EQ(part.key_for(buf.data() + 4099).addr,
            reinterpret_cast<std::uintptr_t>(buf.data() + 4099));
}

TEST_F(VerbsRegistrarTest, RefusalLeavesNothingBehind) {
  // A range that is not mapped: ibv_reg_mr must refuse it (EFAULT).
  void* hole = mmap(nullptr, 8192, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(hole, MAP_FAILED);
  ASSERT_EQ(munmap(hole, 8192), 0);
  rcache::Ref ref = cache_->get(hole, 100, kAccess);
  EXPECT_FALSE(ref);
  EXPECT_GE(reg_->refused(), 1u);  // the cache may retry once after a purge
  EXPECT_FALSE(reg_->last_error().empty());
  EXPECT_EQ(cache_->stats().live_registrations, 0u);
}


// Freed and mapped again between calls: the cache must drop the old
// registration (invalidation) and register the new memory, never hand out
// the stale keys.
TEST_F(VerbsRegistrarTest, FreedAndRemappedBufferIsRegisteredAgain) {
  constexpr std::size_t kLen = 3 * 4096;
  void* a = mmap(nullptr, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(a, MAP_FAILED);
  char* p = static_cast<char*>(a) + 17;
  {
    rcache::Ref r = cache_->get(p, 5000, kAccess);
    ASSERT_TRUE(r);
  }
  ASSERT_EQ(munmap(a, kLen), 0);
  void* b = mmap(a, kLen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                 -1, 0);
  ASSERT_EQ(b, a);
  rcache::Ref r = cache_->get(p, 5000, kAccess);
  ASSERT_TRUE(r);
  EXPECT_EQ(r.key_for(p).addr, reinterpret_cast<std::uintptr_t>(p));
  const rcache::Stats st = cache_->stats();
  EXPECT_EQ(st.invalidations, 1u);
  EXPECT_EQ(st.misses, 2u);
  EXPECT_EQ(reg_->registered(), 2u);
  EXPECT_EQ(reg_->deregistered(), 1u);  // the stale one, at once
  r.reset();
  cache_.reset();
  ASSERT_EQ(munmap(b, kLen), 0);
}

// RLIMIT_MEMLOCK far below the working set: fakeverbs refuses pinning past
// it (ENOMEM, as the kernel), the cache caps itself at half of it and evicts;
// every request must still get correct keys. In a child: the limit is
// process-wide.
TEST(VerbsRegistrarMemlock, SmallLimitEvictsAndStaysCorrect) {
  const auto res = shm::test::run_forked(1, [](shm::test::ForkBootstrap&) {
    const rlimit lim{64 * 1024, 64 * 1024};
    FT_CHECK(setrlimit(RLIMIT_MEMLOCK, &lim) == 0);
    const Verbs* v = load_verbs();
    FT_CHECK(v != nullptr);
    std::shared_ptr<Device> dev;
    std::string why;
    FT_CHECK(Device::open(*v, NetOptions{}, 16, &dev, &why) == Status::ok);
    VerbsRegistrar reg(*v, dev->pd());
    {
      auto cache = rcache::RegCache::create(reg, rcache::Options{}, &why);
      FT_CHECK(cache != nullptr);
      std::vector<char> mem(16 * 16 * 1024);
      for (int round = 0; round < 2; ++round) {
        for (std::size_t i = 0; i < 16; ++i) {
          const char* p = mem.data() + i * 16 * 1024 + 3;
          rcache::Ref r = cache->get(p, 8 * 1024, rcache::kLocalWrite | rcache::kRemoteRead);
          FT_CHECK(r);
          FT_CHECK(r.key_for(p).addr == reinterpret_cast<std::uintptr_t>(p));
        }
      }
      FT_CHECK(cache->stats().evictions > 0);
    }
    FT_CHECK(reg.registered() == reg.deregistered());
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace mlxa2a::mlx5
