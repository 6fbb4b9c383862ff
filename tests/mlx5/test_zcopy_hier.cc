// Zero-copy through the hierarchical engine end to end, without MPI (issue 15;
// docs/zerocopy.md): forked "nodes" over fakeverbs, each node's ranks share
// its leader's PD (ZeroCopySender: SharedPd + VerbsRegistrar + RegCache), the
// leader's RdmaLeaderTransport gathers the remote-bound blocks straight from
// the ranks' send buffers. Every call checks the data byte for byte, guard
// bytes around the buffers, and the per-process counters that prove the
// blocks were read in place (bytes_zero_copy grows by exactly the remote
// bytes, no staged fallback) - the bug class of the reference's page-rounded
// base addresses: alignments 16/64/4096 x offsets 1/3/17, send and receive
// adjacent in one allocation with n * bytes not a multiple of 16, sub-buffers
// of a cached region, buffers unmapped and mapped again (invalidation; with
// invalidation off fakeverbs must see the stale pages), a small
// RLIMIT_MEMLOCK forcing evictions and refused registrations, and staged and
// zero-copy calls alternating over one remapped arena (issue 24).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/hier/zero_copy.h"
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/verbs.h"
#include "core/mlx5/zcopy_sender.h"
#include "tests/mlx5/fork_group.h"
#include "tests/mlx5/rdma_fixture.h"
#include "tests/shm/fork_team.h"
#include "tests/shm/pattern.h"

namespace mlxa2a::mlx5 {
namespace {

using hier::NodeMap;
using shm::test::ForkBootstrap;
using shm::test::check_recv;
using shm::test::fill_send;

enum class Mode { layouts, memlock, stale, mixed, untouched, forked };

struct Case {
  const char* name;
  std::vector<int> node_of;
  // More blocks per message than the QPs' SGEs (16 asked): several WRs each.
  bool multi_wr = false;
  // MLXA2A_NET_STRIPES (from 16 bytes): each message's SGE list cut into
  // stripes, SGEs cut at their boundaries, each stripe on its own QP.
  std::uint32_t stripes = 1;
};

constexpr unsigned char kGuard = 0xA5;
constexpr std::size_t kGuardBytes = 64;

std::uint64_t zero_copied() {
  return hier::node_copy_counters().zero_copy.load(std::memory_order_relaxed);
}
std::uint64_t staged() {
  return hier::node_copy_counters().staged_fallbacks.load(std::memory_order_relaxed);
}

bool guards_intact(const unsigned char* p, std::size_t len) {
  for (std::size_t i = 0; i < len; ++i) {
    if (p[i] != kGuard) return false;
  }
  return true;
}

// fakeverbs' count of reads through stale registrations in this process
// (FIDELITY.md; exported for tests, found in the dlopen()ed library).
std::uint64_t stale_reads() {
  void* h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return 0;
  using Fn = std::uint64_t (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(h, "fakeverbs_stale_reads"));
  const std::uint64_t n = fn ? fn() : 0;
  dlclose(h);
  return n;
}

// The access flags fakeverbs recorded for an MR of this process (-1: none).
int mr_access(std::uint32_t lkey) {
  void* h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return -1;
  using Fn = int (*)(std::uint32_t);
  auto fn = reinterpret_cast<Fn>(dlsym(h, "fakeverbs_mr_access"));
  const int access = fn ? fn(lkey) : -1;
  dlclose(h);
  return access;
}

struct Rank {
  int rank = 0;
  int n = 0;
  std::size_t remote = 0;  // ranks on other nodes
  std::unique_ptr<hier::HierAlltoall> engine;
  std::unique_ptr<ZeroCopySender> sender;
};

// One zero-copy call on [send, recv) with `bytes` per peer: data, guards
// around both, and exactly the remote blocks read in place (unless staged).
int call(Rank& r, unsigned char* send, unsigned char* recv, std::size_t bytes, int iter,
         bool expect_zero_copy = true) {
  fill_send(send, r.rank, r.n, iter, bytes);
  const std::uint64_t before = zero_copied(), staged_before = staged();
  FT_CHECK_STATUS(r.engine->run(send, recv, bytes, r.sender.get()), Status::ok);
  FT_CHECK(check_recv(recv, r.rank, r.n, iter, bytes));
  if (expect_zero_copy) {
    FT_CHECK(staged() == staged_before);
    FT_CHECK(zero_copied() - before == r.remote * bytes);
  }
  return 0;
}

// Alignment x offset x size, send and receive adjacent in one allocation
// framed by guards, then a sub-buffer of an already cached region.
int layouts(Rank& r) {
  int iter = 0;
  for (std::size_t align : {16, 64, 4096}) {
    for (std::size_t off : {1, 3, 17}) {
      for (std::size_t bytes : {1, 13, 100, 5000}) {  // 5000: several rounds
        const std::size_t span = 2 * r.n * bytes;
        const std::size_t framed = kGuardBytes + off + span + kGuardBytes;
        const std::size_t total = (framed + align - 1) / align * align;
        auto* base = static_cast<unsigned char*>(std::aligned_alloc(align, total));
        FT_CHECK(base != nullptr);
        std::memset(base, kGuard, total);
        unsigned char* send = base + kGuardBytes + off;
        unsigned char* recv = send + r.n * bytes;  // adjacent: no gap, any alignment
        const int rc = call(r, send, recv, bytes, ++iter);
        const bool ok = rc == 0 && guards_intact(base, kGuardBytes + off) &&
                        guards_intact(recv + r.n * bytes, total - (kGuardBytes + off + span));
        std::free(base);  // freed between calls: the cache must not serve it stale
        FT_CHECK(ok);
      }
    }
  }
  // A region cached for a large call serves a sub-buffer at an odd offset
  // inside it: a hit, no new registration, the address still the user's.
  std::vector<unsigned char> big(2 * r.n * 2000 + 64, kGuard);
  FT_CHECK(call(r, big.data(), big.data() + r.n * 2000 + 32, 2000, ++iter) == 0);
  const std::uint64_t hits = zero_copy_counters().hits.load();
  const std::uint64_t misses = zero_copy_counters().misses.load();
  FT_CHECK(call(r, big.data() + 3, big.data() + r.n * 2000 + 40, 700, ++iter) == 0);
  FT_CHECK(zero_copy_counters().hits.load() == hits + 1);
  FT_CHECK(zero_copy_counters().misses.load() == misses);
  return 0;
}

// A buffer unmapped and mapped again at the same address between calls.
// With invalidation the second call registers the new pages and is correct;
// without it the cached MR still names the old pages and fakeverbs must
// report the leader's reads from them as stale.
int remap(Rank& r, bool invalidation) {
  const std::size_t bytes = 1000;
  const std::size_t len = 2 * r.n * bytes;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  FT_CHECK(p != MAP_FAILED);
  auto* send = static_cast<unsigned char*>(p);
  FT_CHECK(call(r, send, send + r.n * bytes, bytes, 100) == 0);
  const std::uint64_t inval = zero_copy_counters().invalidations.load();
  const std::uint64_t stale = stale_reads();
  FT_CHECK(munmap(p, len) == 0);
  FT_CHECK(mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
           p);
  fill_send(send, r.rank, r.n, 101, bytes);
  FT_CHECK_STATUS(r.engine->run(send, send + r.n * bytes, bytes, r.sender.get()), Status::ok);
  if (invalidation) {
    FT_CHECK(check_recv(send + r.n * bytes, r.rank, r.n, 101, bytes));
    FT_CHECK(zero_copy_counters().invalidations.load() > inval);
    FT_CHECK(stale_reads() == stale);
  } else {
    FT_CHECK(stale_reads() > stale);  // the detector works: this is what invalidation prevents
  }
  munmap(p, len);
  return 0;
}

// Issue 27: a send buffer registered before it was ever written (a fresh
// mapping: every page is the shared zero page), then written and sent. The
// registration must ask for LOCAL_WRITE, so the pin takes private pages;
// pinned read-only, the leader would read the zero page fakeverbs reports
// as stale (docs/zerocopy.md).
int untouched(Rank& r) {
  const std::size_t bytes = 1000;
  const std::size_t len = 2 * r.n * bytes;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  FT_CHECK(p != MAP_FAILED);
  auto* send = static_cast<unsigned char*>(p);
  hier::GatherSource src{};
  FT_CHECK(r.sender->acquire(send, r.n * bytes, &src));
  const int access = mr_access(src.lkey);
  FT_CHECK(access >= 0);
  FT_CHECK((access & IBV_ACCESS_LOCAL_WRITE) != 0);
  const std::uint64_t stale = stale_reads();
  FT_CHECK(call(r, send, send + r.n * bytes, bytes, 500) == 0);
  FT_CHECK(stale_reads() == stale);
  munmap(p, len);
  return 0;
}

// Issue 27: the application forks between two calls (system()-like: the
// child exits at once) and then writes its send buffer again. The parent's
// cached registration must not keep sending the pages the fork shared with
// the child (docs/zerocopy.md, "Fork").
int forked(Rank& r) {
  const std::size_t bytes = 1000;
  const std::size_t len = 2 * r.n * bytes;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  FT_CHECK(p != MAP_FAILED);
  auto* send = static_cast<unsigned char*>(p);
  FT_CHECK(call(r, send, send + r.n * bytes, bytes, 600) == 0);
  const pid_t child = fork();
  if (child == 0) _exit(0);
  FT_CHECK(child > 0);
  int status = 0;
  FT_CHECK(waitpid(child, &status, 0) == child);
  const std::uint64_t stale = stale_reads();
  for (int it = 601; it < 604; ++it) FT_CHECK(call(r, send, send + r.n * bytes, bytes, it) == 0);
  FT_CHECK(stale_reads() == stale);
  munmap(p, len);
  return 0;
}

// Issue 24: staged and zero-copy calls alternating on one engine, the send
// and receive buffers at offsets 0-17 and 4095 inside one page-aligned arena
// with guard bytes (the same pages at other offsets: the cache merges its
// regions), sizes on both sides of the rounds' boundary; then the arena is
// unmapped and mapped again at the same address and everything runs again.
// No read may go through a stale registration, no byte may be wrong.
int mixed(Rank& r) {
  const std::vector<std::size_t> sizes = {1, 100, 4095, 4096, 5000};
  const std::vector<std::size_t> offsets = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                            10, 11, 12, 13, 14, 15, 16, 17, 4095};
  const std::size_t span = 2 * r.n * 5000;
  const std::size_t len = (kGuardBytes + 4095 + span + kGuardBytes + 4095) / 4096 * 4096;
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  FT_CHECK(p != MAP_FAILED);
  auto* base = static_cast<unsigned char*>(p);
  const std::uint64_t stale = stale_reads();
  int iter = 300;
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t off : offsets) {
      for (std::size_t i = 0; i < sizes.size(); ++i) {
        const std::size_t bytes = sizes[i];
        std::memset(base, kGuard, len);
        unsigned char* send = base + kGuardBytes + off;
        unsigned char* recv = send + r.n * bytes;
        const bool zero_copy = (i + off + static_cast<std::size_t>(pass)) % 2 == 0;
        fill_send(send, r.rank, r.n, ++iter, bytes);
        FT_CHECK_STATUS(r.engine->run(send, recv, bytes, zero_copy ? r.sender.get() : nullptr),
                        Status::ok);
        FT_CHECK(check_recv(recv, r.rank, r.n, iter, bytes));
        FT_CHECK(guards_intact(base, kGuardBytes + off));
        FT_CHECK(guards_intact(recv + r.n * bytes, len - (kGuardBytes + off + 2 * r.n * bytes)));
      }
    }
    // New pages at the same address: every cached registration of the arena is stale.
    FT_CHECK(munmap(p, len) == 0);
    FT_CHECK(mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1,
                  0) == p);
  }
  FT_CHECK(stale_reads() == stale);
  munmap(p, len);
  return 0;
}

// RLIMIT_MEMLOCK 256 KiB (the cache keeps half): six distinct 48 KiB send
// buffers in turn force evictions; one 300 KiB buffer cannot be pinned at
// all, and that call stages this rank's blocks - still correct.
int memlock(Rank& r) {
  std::vector<std::vector<unsigned char>> bufs(6);
  const std::size_t bytes = 48 * 1024 / static_cast<std::size_t>(r.n);
  for (auto& b : bufs) b.assign(2 * r.n * bytes, 0);
  int iter = 200;
  for (int round = 0; round < 2; ++round) {
    for (auto& b : bufs) FT_CHECK(call(r, b.data(), b.data() + r.n * bytes, bytes, ++iter) == 0);
  }
  FT_CHECK(zero_copy_counters().evictions.load() > 0);
  const std::size_t large = 300 * 1024 / static_cast<std::size_t>(r.n);
  std::vector<unsigned char> huge(2 * r.n * large, 0);
  const std::uint64_t staged_before = staged();
  FT_CHECK(call(r, huge.data(), huge.data() + r.n * large, large, ++iter, false) == 0);
  FT_CHECK(staged() == staged_before + 1);
  return 0;
}

int run_rank(ForkBootstrap& boot, int rank, const Case& c, Mode mode,
             const test::ForkGroupWiring& leaders,
             const std::vector<std::unique_ptr<test::ForkGroupWiring>>& nodes) {
  if (mode == Mode::memlock) {
    const rlimit lim{256 * 1024, 256 * 1024};
    FT_CHECK(setrlimit(RLIMIT_MEMLOCK, &lim) == 0);
  }
  const NodeMap map(c.node_of);
  Rank r;
  r.rank = rank;
  r.n = map.size();
  r.remote = static_cast<std::size_t>(r.n - map.node_size(map.node_of(rank)));
  int qps = 0;
  unsigned sge = 0;
  NetOptions opt = test::test_options();
  opt.stripes = c.stripes;
  opt.stripe_min = 16;
  if (const int rc = test::build_rdma_hier(boot, rank, c.node_of, {}, opt, leaders, &r.engine,
                                           Status::ok, &qps, &sge);
      rc != 0) {
    return rc;
  }
  const int node = map.node_of(rank);
  const bool leader = map.index_in_node(rank) == map.leaders(node)[0];
  std::shared_ptr<Device> dev;
  std::string why;
  if (leader) {
    EndpointPool* pool = EndpointPool::get(opt, &why);
    FT_CHECK(pool != nullptr);
    dev = pool->device();
  }
  test::ForkGroup group(*nodes[static_cast<std::size_t>(node)], map.index_in_node(rank));
  SharedPdOptions pd_opt;
  pd_opt.leader = map.leaders(node)[0];
  rcache::Options ro;
  if (mode == Mode::stale) ro.invalidation = rcache::Invalidation::kNone;
  const Status st = ZeroCopySender::create(load_verbs(), group, dev, pd_opt, ro, &r.sender, &why);
  if (st != Status::ok) std::fprintf(stderr, "rank %d: zero-copy: %s\n", rank, why.c_str());
  FT_CHECK_STATUS(st, Status::ok);
  if (c.multi_wr) {
    // One round, one message per remote node: more WRs than messages.
    std::vector<unsigned char> buf(2 * r.n, 0);
    const std::uint64_t before = EndpointPool::stats().writes_posted;
    FT_CHECK(call(r, buf.data(), buf.data() + r.n, 1, 1) == 0);
    const std::size_t blocks = static_cast<std::size_t>(map.node_size(node)) *
                               static_cast<std::size_t>(r.remote);
    if (leader && c.stripes == 1) {
      FT_CHECK(sge < blocks);
      FT_CHECK(EndpointPool::stats().writes_posted - before == (blocks + sge - 1) / sge);
    } else if (leader) {  // every stripe is a write at least: more WRs than SGE lists need
      FT_CHECK(EndpointPool::stats().writes_posted - before >= c.stripes);
      FT_CHECK(EndpointPool::stats().stripes_posted >= 1);
    }
  }
  int rc = 0;
  switch (mode) {
    case Mode::layouts: rc = layouts(r) || remap(r, true); break;
    case Mode::memlock: rc = memlock(r); break;
    case Mode::stale: rc = remap(r, false); break;
    case Mode::mixed: rc = mixed(r); break;
    case Mode::untouched: rc = untouched(r); break;
    case Mode::forked: rc = forked(r); break;
  }
  r.sender.reset();
  r.engine.reset();
  EndpointPool::shutdown();
  return rc;
}

void run_case(const Case& c, Mode mode) {
  const NodeMap map(c.node_of);
  test::ForkGroupWiring leaders(test::leader_count(map));
  std::vector<std::unique_ptr<test::ForkGroupWiring>> nodes;
  for (int m = 0; m < map.nodes(); ++m) {
    nodes.push_back(std::make_unique<test::ForkGroupWiring>(map.node_size(m)));
    ASSERT_TRUE(nodes.back()->ok());
  }
  ASSERT_TRUE(leaders.ok());
  const auto res = shm::test::run_forked_nodes(
      c.node_of,
      [&](ForkBootstrap& boot, int rank) { return run_rank(boot, rank, c, mode, leaders, nodes); },
      120);
  EXPECT_FALSE(res.hung);
  for (std::size_t r = 0; r < res.exit_codes.size(); ++r) {
    EXPECT_EQ(res.exit_codes[r], 0) << "rank " << r;
  }
}

class ZeroCopyHier : public ::testing::TestWithParam<Case> {};

TEST_P(ZeroCopyHier, GathersFromUserPointersAtAnyAlignment) { run_case(GetParam(), Mode::layouts); }

INSTANTIATE_TEST_SUITE_P(
    Layouts, ZeroCopyHier,
    ::testing::Values(Case{"block", {0, 0, 0, 1, 1}},
                      // one SGE per block: 25 per message, more than a WR takes
                      Case{"round_robin", {0, 1, 0, 1, 0, 1, 0, 1, 0, 1}, true},
                      Case{"irregular", {0, 1, 1, 0, 2, 2}},
                      Case{"block_striped", {0, 0, 0, 1, 1}, false, 3},
                      Case{"round_robin_striped", {0, 1, 0, 1, 0, 1, 0, 1, 0, 1}, true, 3}),
    [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

TEST(ZeroCopyMemlock, EvictsAndStagesWhatCannotBePinned) {
  run_case(Case{"block", {0, 0, 1, 1}}, Mode::memlock);
}

TEST(ZeroCopyMixed, StagedAndZeroCopyCallsAlternateOverRemappedBuffers) {
  run_case(Case{"block", {0, 0, 1, 1}}, Mode::mixed);
  run_case(Case{"irregular", {0, 1, 1, 0, 2, 2}}, Mode::mixed);
}

TEST(ZeroCopyAccess, UntouchedSendBufferIsPinnedWritable) {
  run_case(Case{"block", {0, 0, 1, 1}}, Mode::untouched);
}

TEST(ZeroCopyFork, ParentStaysCorrectAfterAForkBetweenCalls) {
  run_case(Case{"block", {0, 0, 1, 1}}, Mode::forked);
}

TEST(ZeroCopyStale, WithoutInvalidationFakeverbsSeesTheStalePages) {
  run_case(Case{"block", {0, 0, 1, 1}}, Mode::stale);
}

}  // namespace
}  // namespace mlxa2a::mlx5
