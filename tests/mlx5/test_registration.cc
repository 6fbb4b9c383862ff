// Registration and posting switches (issue 39, item 6), without MPI: two
// forked leaders exchange messages of many sizes over fakeverbs, every byte
// checked, under MLXA2A_NET_INLINE and MLXA2A_NET_RELAXED_ORDERING (through
// NetOptions) and fakeverbs' device description (FAKEVERBS_MAX_INLINE,
// FAKEVERBS_RELAXED_ORDERING: set in the children before verbs loads, so
// this runs in the mlx5-fabric binary, whose parent never loads verbs).
// Each case shows which path was taken: fakeverbs counts the inline posts
// (and refuses one above the QP's max_inline_data, as an HCA would), the
// fabric summary names the inline size granted and the relaxed-ordering state.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/hier/transport.h"
#include "core/mlx5/qos.h"
#include "core/mlx5/rdma_transport.h"
#include "tests/mlx5/fork_group.h"
#include "tests/mlx5/rdma_fixture.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::mlx5 {
namespace {

constexpr std::size_t kArea = 4096;
constexpr std::size_t kSizes[] = {1, 64, 100, 129, 200, 256, 257, 1000, 4096};

struct Case {
  std::vector<std::pair<const char*, const char*>> env;
  std::uint32_t inline_ask;
  bool relaxed;
  std::string want_summary;  // words the fabric summary must have
  std::uint64_t want_inline_max;  // the most bytes one inline post carried
};

unsigned char pattern(int from, std::size_t size, std::size_t i) {
  return static_cast<unsigned char>(from * 97 + size * 13 + i * 7 + 1);
}

// Work requests this process posted inline, and the most bytes one carried.
std::uint64_t inline_posts(std::uint64_t* max_bytes) {
  void* h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return 0;
  using Fn = std::uint64_t (*)(std::uint64_t*);
  auto fn = reinterpret_cast<Fn>(dlsym(h, "fakeverbs_inline_posts"));
  const std::uint64_t n = fn ? fn(max_bytes) : 0;
  dlclose(h);
  return n;
}

int leader(int me, const test::ForkGroupWiring& wiring, const Case& c) {
  for (const auto& [k, v] : c.env) setenv(k, v, 1);
  test::ForkGroup group(wiring, me);
  NetOptions opt = test::test_options();
  opt.inline_ask = c.inline_ask;
  opt.relaxed_ordering = c.relaxed;
  std::vector<char> in[2], out[2];
  hier::StageAreas areas;
  for (int p = 0; p < 2; ++p) {
    in[p].assign(kArea, 0);
    out[p].assign(kArea, 0);
    areas.in[p] = in[p].data();
    areas.out[p] = out[p].data();
  }
  areas.bytes = kArea;
  const int first_rank[2] = {0, 1};
  const int peers[1] = {1 - me};
  std::unique_ptr<RdmaLeaderTransport> t;
  std::string why;
  const Status st = RdmaLeaderTransport::create(group, areas, first_rank, peers, opt, &t, &why);
  if (st != Status::ok) std::fprintf(stderr, "leader %d: %s\n", me, why.c_str());
  FT_CHECK(st == Status::ok);
  for (std::size_t r = 0; r < std::size(kSizes); ++r) {
    const std::size_t size = kSizes[r];
    const int par = static_cast<int>(r & 1);
    for (std::size_t i = 0; i < size; ++i) in[par][i] = static_cast<char>(pattern(me, size, i));
    hier::Message m{};
    m.node = 1 - me;
    m.send = in[par].data();
    m.recv = out[par].data();
    m.bytes = size;
    m.parity = par;
    FT_CHECK(t->exchange({&m, 1}) == Status::ok);
    for (std::size_t i = 0; i < size; ++i) {
      FT_CHECK(static_cast<unsigned char>(out[par][i]) == pattern(1 - me, size, i));
    }
  }
  std::uint64_t max_bytes = 0;
  const std::uint64_t posts = inline_posts(&max_bytes);
  const std::string summary = fabric_summary();
  if (max_bytes != c.want_inline_max || summary.find(c.want_summary) == std::string::npos) {
    std::fprintf(stderr, "leader %d: %llu inline posts, at most %llu bytes (want %llu); "
                 "summary '%s' (want '%s')\n", me, static_cast<unsigned long long>(posts),
                 static_cast<unsigned long long>(max_bytes),
                 static_cast<unsigned long long>(c.want_inline_max), summary.c_str(),
                 c.want_summary.c_str());
    return 1;
  }
  t.reset();
  EndpointPool::shutdown();
  return 0;
}

void run(const Case& c) {
  test::ForkGroupWiring wiring(2);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked(2, [&](shm::test::ForkBootstrap& boot) {
    return leader(boot.local_rank(), wiring, c);
  }, 60);
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// 128 asked, 16 SGEs per WR: the WQE holds 256 inline bytes (fakeverbs'
// limit; mlx5 would grant 268), and writes up to 256 bytes go inline - more
// than the 128 asked: the threshold is the QP's, not the ask. The device
// takes relaxed ordering.
TEST(Registration, InlineUpToWhatTheQueuePairGrantedAndRelaxedOrderingTaken) {
  run({{}, 128, true, " inline=256 relaxed-ordering=on", 256});
}

// A device whose inline limit is 100 bytes refuses 512, 256 and 128: 64 is
// asked and 100 granted (the WQE rounding, capped at the limit); a device
// that refuses the relaxed-ordering flag gets the out-areas without it.
TEST(Registration, RefusedInlineAskIsHalvedAndRefusedRelaxedOrderingIsDropped) {
  run({{{"FAKEVERBS_MAX_INLINE", "100"}, {"FAKEVERBS_RELAXED_ORDERING", "0"}}, 512, true,
       " inline=100 relaxed-ordering=refused", 100});
}

// Both off: no write goes inline, no out-area asks for relaxed ordering.
TEST(Registration, BothOff) {
  run({{}, 0, false, " inline=0 relaxed-ordering=off", 0});
}

}  // namespace
}  // namespace mlxa2a::mlx5
