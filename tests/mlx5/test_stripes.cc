// Stripes (MLXA2A_NET_STRIPES, docs/hier-transports.md "Stripes") without
// MPI: K RC QPs per pair of leaders, made and connected by the set-up, each
// with its own flow label on RoCE (read back from fakeverbs with
// ibv_query_qp), messages of at least MLXA2A_NET_STRIPE_MIN cut into K
// stripes whose bytes arrive right (sizes around the minimum, lengths K does
// not divide), and a stripe whose write fails (FAKEVERBS_FAULT fail_wr aimed
// at one stripe's QP) ending the call on every rank instead of counting an
// incomplete message as arrived. The relay path (a failed stripe's message
// through PMPI) is the MPI test np4-rdma-fault-stripes. In the fabric
// binary (test_mlx5_fabric): its parent never loads fakeverbs, so each
// forked case gets the link it sets.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/hier/hier_alltoall.h"
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/qos.h"
#include "tests/mlx5/fork_group.h"
#include "tests/mlx5/rdma_fixture.h"
#include "tests/shm/fork_team.h"
#include "tests/shm/pattern.h"

namespace mlxa2a::mlx5 {
namespace {

using hier::HierAlltoall;
using shm::test::ForkBootstrap;

constexpr std::uint32_t kStripes = 3;
constexpr std::size_t kMin = 256;  // bytes of a message: 2 ranks x 1 rank x 128 per peer
const std::vector<int> kNodes = {0, 0, 1};  // node 0 -> node 1: 2 x bytes per round

// ibv_query_qp is not in the engine's table: found in the loaded library.
bool query_qp(ibv_qp* qp, ibv_qp_attr* a) {
  void* h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return false;
  using Fn = int (*)(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*);
  auto fn = reinterpret_cast<Fn>(dlsym(h, "ibv_query_qp"));
  ibv_qp_init_attr init{};
  const bool ok = fn && fn(qp, a, IBV_QP_AV | IBV_QP_DEST_QPN, &init) == 0;
  dlclose(h);
  return ok;
}

// A leader's one pair: K QPs to K distinct remote QPs; on RoCE K distinct
// flow labels, stripe s's the pair label of its QP numbers and s.
// *remote_qpn: stripe 1's remote QP number (for a fault aimed at it).
int check_pair(bool roce, std::uint32_t* remote_qpn) {
  std::string why;
  EndpointPool* pool = EndpointPool::get(test::test_options(), &why);
  FT_CHECK(pool != nullptr);
  FT_CHECK(pool->device()->address().roce == roce);  // the link the case asked for
  std::vector<std::vector<ibv_qp*>> all;
  {
    std::lock_guard<std::mutex> lock(pool->mutex());
    all = pool->queue_pairs();
  }
  FT_CHECK(all.size() == 1 && all[0].size() == kStripes);
  std::vector<std::uint32_t> labels, remotes;
  for (std::uint32_t s = 0; s < kStripes; ++s) {
    ibv_qp_attr a{};
    FT_CHECK(query_qp(all[0][s], &a));
    for (std::uint32_t r : remotes) FT_CHECK(r != a.dest_qp_num);
    remotes.push_back(a.dest_qp_num);
    const std::uint32_t label = a.ah_attr.grh.flow_label;
    if (!roce) {
      FT_CHECK(label == 0);  // InfiniBand routes by LID: no GRH
      continue;
    }
    FT_CHECK(label == pair_flow_label(all[0][s]->qp_num, a.dest_qp_num, s));
    for (std::uint32_t l : labels) FT_CHECK(l != label);
    labels.push_back(label);
  }
  *remote_qpn = remotes[1];
  return 0;
}

struct Script {
  const char* link;
  std::vector<std::size_t> sizes;  // bytes per peer, one call each
  int fault_call = -1;  // node 0's leader aims fail_wr at stripe 1's QP before this call
  bool pipeline = false;         // HierAlltoall::set_pipeline
  const char* jitter_us = "0";   // FAKEVERBS_JITTER_US: writes land late, shuffled
};

int run_rank(ForkBootstrap& boot, int rank, const Script& s, const test::ForkGroupWiring& wiring) {
  setenv("FAKEVERBS_LINK", s.link, 1);
  setenv("FAKEVERBS_JITTER_US", s.jitter_us, 1);
  NetOptions opt = test::test_options();
  opt.stripes = kStripes;
  opt.stripe_min = kMin;
  std::unique_ptr<HierAlltoall> engine;
  int pairs = 0;
  if (const int rc = test::build_rdma_hier(boot, rank, kNodes, {}, opt, wiring, &engine,
                                           Status::ok, &pairs);
      rc != 0) {
    return rc;
  }
  const bool leader = engine->plan().leader();
  std::uint32_t stripe1 = 0;
  if (leader) {
    FT_CHECK(pairs == 1);  // one pair ...
    FT_CHECK(EndpointPool::stats().qps_created == kStripes);  // ... of K QPs
    if (const int rc = check_pair(std::string(s.link) == "eth", &stripe1); rc != 0) return rc;
  }
  engine->set_pipeline(s.pipeline);
  const int n = static_cast<int>(kNodes.size());
  for (std::size_t it = 0; it < s.sizes.size(); ++it) {
    const std::size_t bytes = s.sizes[it];
    if (static_cast<int>(it) == s.fault_call && leader && engine->plan().node() == 0) {
      // Its next WR on stripe 1's QP fails (fail_wr counts a QP's WRs from
      // its first: one per striped message so far), the others land.
      const std::string rule = "fail_wr=" +
                               std::to_string(EndpointPool::stats().stripes_posted + 1) + "@" +
                               std::to_string(stripe1);
      setenv("FAKEVERBS_FAULT", rule.c_str(), 1);
    }
    std::vector<unsigned char> send(n * bytes), recv(n * bytes, 0);
    shm::test::fill_send(send, rank, n, static_cast<int>(it), bytes);
    const std::uint64_t before = EndpointPool::stats().stripes_posted;
    const Status st = engine->run(send.data(), recv.data(), bytes);
    if (static_cast<int>(it) >= s.fault_call && s.fault_call >= 0 && st != Status::ok) {
      if (st != Status::transport_failed && st != Status::peer_failed) {
        std::fprintf(stderr, "rank %d call %zu: %s\n", rank, it, to_string(st));
        return 1;
      }
      return 42;  // the failed stripe ended the call: nothing counted as arrived
    }
    FT_CHECK_STATUS(st, Status::ok);
    FT_CHECK(shm::test::check_recv(recv, rank, n, static_cast<int>(it), bytes));
    if (!leader) continue;
    // Every round's message is 2 x its bytes per peer (2 ranks to 1 and back).
    const bool striped = 2 * bytes >= kMin;
    FT_CHECK(striped == (EndpointPool::stats().stripes_posted > before));
  }
  if (s.fault_call >= 0) return 1;  // the fault never surfaced
  engine.reset();
  EndpointPool::shutdown();
  return 0;
}

void run(const Script& s, int want_exit) {
  test::ForkGroupWiring wiring(2);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked_nodes(
      kNodes, [&](ForkBootstrap& boot, int rank) { return run_rank(boot, rank, s, wiring); }, 30);
  EXPECT_FALSE(res.hung);
  for (std::size_t r = 0; r < res.exit_codes.size(); ++r) {
    EXPECT_EQ(res.exit_codes[r], want_exit) << "rank " << r;
  }
}

// Around the minimum (127: 254 bytes, one QP; 128: 256, striped), lengths
// 3 does not divide (129 -> 258 = 3 x 86 does; 131 -> 262, 1001 -> 2002
// do not), several rounds per call (2047), a stripe shorter than 64 bytes
// (the last of 3 of 262: 128 + 128 + 6), and back to one QP.
const std::vector<std::size_t> kSizes = {127, 128, 129, 131, 1001, 2047, 1, 0, 130, 64};

TEST(Stripes, RocePairsHaveKQpsWithDistinctFlowLabelsAndDeliverEveryByte) {
  run(Script{.link = "eth", .sizes = kSizes}, 0);
}

TEST(Stripes, InfinibandPairsHaveKQpsAndDeliverEveryByte) {
  run(Script{.link = "ib", .sizes = kSizes}, 0);
}

// Pipelined rounds with writes landing up to 300 us late in shuffled order:
// a partner one round ahead stripes into the other parity's area, and a
// round's K stripes arrive in any order across the QPs; each round counts
// its own.
TEST(Stripes, PipelinedRoundsUnderJitterCountEachRoundsStripes) {
  run(Script{.link = "eth",
             .sizes = {2047, 131, 2047, 4000, 127, 3001},
             .pipeline = true,
             .jitter_us = "300"},
      0);
}

// One stripe's write fails (the QP of stripe 1 goes to error) while the
// message's other stripes land: the partner never sees K stripes, so the
// call ends on every rank (no relay without MPI) rather than reading a
// message with a hole - calls before it were right.
TEST(Stripes, AFailedStripeEndsTheCallWithoutWrongData) {
  run(Script{.link = "eth", .sizes = {128, 131, 1001, 1001, 131}, .fault_call = 2}, 42);
}

// Stripe 0's label is the unstriped pair's; every stripe's is the same at
// both ends, 20 bits, never 0, and differs from its pair's other stripes'.
TEST(Stripes, FlowLabelMixesInTheStripeIndex) {
  EXPECT_EQ(pair_flow_label(5, 9, 0), pair_flow_label(5, 9));
  for (std::uint32_t a : {5u, 77u, 0xfffffeu}) {
    std::vector<std::uint32_t> seen;
    for (std::uint32_t s = 0; s < EndpointPool::kMaxStripes; ++s) {
      const std::uint32_t l = pair_flow_label(a, a + 1, s);
      EXPECT_EQ(l, pair_flow_label(a + 1, a, s));
      EXPECT_TRUE(l != 0 && l <= 0xfffff);
      for (std::uint32_t o : seen) EXPECT_NE(o, l);
      seen.push_back(l);
    }
  }
}

// Leaders with another MLXA2A_NET_STRIPES (an all-equal switch set
// unequally) cannot connect their pair: both refuse RDMA, saying why,
// instead of counting arrivals by different K.
TEST(Stripes, PartnersWithAnotherStripeCountRefuseRdma) {
  test::ForkGroupWiring wiring(2);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked_nodes(kNodes, [&](ForkBootstrap& boot, int rank) {
    NetOptions opt = test::test_options();
    opt.stripes = rank == 2 ? 2 : 3;  // node 1's leader differs
    std::unique_ptr<HierAlltoall> engine;
    int pairs = 0;
    std::string why;
    const int rc = test::build_rdma_hier(boot, rank, kNodes, {}, opt, wiring, &engine,
                                         Status::unavailable, &pairs, nullptr, &why);
    if (rc != 42) return 1;
    if (rank == 1) return 0;  // not a leader
    if (why.find("differ in MLXA2A_NET_STRIPES") == std::string::npos) {
      std::fprintf(stderr, "rank %d: why: %s\n", rank, why.c_str());
      return 1;
    }
    return 0;
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace mlxa2a::mlx5
