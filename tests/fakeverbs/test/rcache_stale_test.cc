// The stale-registration proof (issue 13, deliverable 3): rcache's RegCache
// with a real ibv_reg_mr registrar, running over fakeverbs.  Buffers are
// unmapped and mapped again at the same address between RDMA writes.
//  * MLXA2A_RCACHE_INVALIDATION=none: the cache hands out the old MR, the
//    write goes to the pages pinned at registration -- lost to the
//    application.  fakeverbs must count it and the data must be missing
//    (with the fakeverbs of 76d1cdf the write landed in the new memory and
//    nothing was counted: this test failed).
//  * invalidation on (auto): the unmap drops the region, the next get()
//    registers the new pages; zero stale writes, every byte arrives.
#include <dlfcn.h>
#include <sys/mman.h>

#include <cstring>
#include <memory>

#include "harness.h"
#include "rcache/options.h"
#include "rcache/regcache.h"

using namespace fvtest;
namespace rc = mlxa2a::rcache;

namespace {

// The engine's registrar in miniature: ibv_reg_mr/ibv_dereg_mr on one PD.
class VerbsRegistrar final : public rc::Registrar {
 public:
  explicit VerbsRegistrar(ibv_pd* pd) : pd_(pd) {}
  bool register_memory(void* addr, size_t len, unsigned access,
                       rc::MemoryKey* out) noexcept override {
    ibv_mr* mr = ibv_reg_mr(pd_, addr, len, int(access));
    if (!mr) return false;
    *out = {mr->lkey, mr->rkey, uintptr_t(addr), mr};
    return true;
  }
  void deregister_memory(const rc::MemoryKey& key) noexcept override {
    if (ibv_dereg_mr(static_cast<ibv_mr*>(key.handle)) != 0) ADD_FAILURE() << "ibv_dereg_mr";
  }

 private:
  ibv_pd* pd_;
};

uint64_t stale_writes() {
  using Fn = uint64_t (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "fakeverbs_stale_writes"));
  if (!fn) ADD_FAILURE() << "fakeverbs_stale_writes not exported (not the fake libibverbs?)";
  return fn ? fn() : 0;
}

struct Outcome {
  uint64_t stale = 0;
  int rounds_lost = 0;  // rounds whose data did not arrive in the buffer
};

// Five rounds: map a 256 KiB buffer at the same address, get its keys from
// the cache, RDMA-write a round pattern into it through a loopback QP,
// check it, unmap it.
Outcome run_rounds(const char* invalidation) {
  Outcome out;
  constexpr size_t kLen = 256 * 1024;
  EndpointOptions eo;
  eo.buf_size = kLen;
  Endpoint e(eo);
  e.connect_self();
  VerbsRegistrar reg(e.pd);
  rc::Options opt;
  if (!rc::parse_invalidation(invalidation, &opt.invalidation)) {
    ADD_FAILURE() << "MLXA2A_RCACHE_INVALIDATION=" << invalidation;
    return out;
  }
  std::string err;
  std::unique_ptr<rc::RegCache> cache = rc::RegCache::create(reg, opt, &err);
  if (!cache) {
    ADD_FAILURE() << err;
    return out;
  }
  void* at = nullptr;
  for (int round = 1; round <= 5; ++round) {
    void* p = mmap(at, kLen, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
    if (p == MAP_FAILED || (at && p != at)) {
      ADD_FAILURE() << "cannot map the buffer again at " << at;
      return out;
    }
    at = p;
    memset(p, 0, kLen);
    {
      rc::Ref ref = cache->get(p, kLen, rc::kLocalWrite | rc::kRemoteWrite);
      rc::KeyInfo k = ref.key_for(p);
      if (!ref || !k.valid) {
        ADD_FAILURE() << "cache refused";
        return out;
      }
      Address dst = e.address();
      dst.addr = k.addr;
      dst.rkey = k.rkey;
      memset(e.buf, round, kLen);
      EXPECT_EQ(e.post_write(uint64_t(round), dst, 0, kLen, true), 0);
      auto wc = e.poll(1);
      EXPECT_EQ(wc.size(), 1u);
      if (!wc.empty()) {
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
      }
      if (memcmp(p, e.buf, kLen) != 0) ++out.rounds_lost;
    }
    munmap(p, kLen);  // "free": the next round's buffer is new memory, same address
  }
  out.stale = stale_writes();
  cache->purge();
  return out;
}

}  // namespace

TEST(RcacheOverFakeverbs, NoInvalidationWritesIntoStalePagesAndFakeverbsCountsThem) {
  if (!page_frames_readable())
    GTEST_SKIP() << "page frame numbers unreadable (not root): fakeverbs cannot see a buffer "
                    "mapped again at the same address";
  run_one([](Channel&) {
    Outcome o = run_rounds("none");
    // Round 1 registers; rounds 2..5 reuse the stale MR.
    EXPECT_EQ(o.stale, 4u) << "fakeverbs did not see the stale registrations";
    EXPECT_EQ(o.rounds_lost, 4) << "data written through a stale MR reached the new memory";
  }, {"FAKEVERBS_QUIET=1"});
}

TEST(RcacheOverFakeverbs, WithInvalidationNoStaleWrite) {
  run_one([](Channel&) {
    Outcome o = run_rounds("auto");
    EXPECT_EQ(o.stale, 0u);
    EXPECT_EQ(o.rounds_lost, 0);
  }, {"FAKEVERBS_QUIET=1"});
}
