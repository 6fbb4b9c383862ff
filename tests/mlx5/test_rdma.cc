// The RDMA leader exchange (core/mlx5) end to end without MPI: forked
// processes form "nodes" (tests/shm/fork_team.h), each node's leaders build
// an RdmaLeaderTransport over fakeverbs (LD_LIBRARY_PATH, set by meson) with
// a pipe bootstrap between them, and the hierarchical engine runs real
// alltoalls through it: data checked byte for byte, writes counted, queue
// pairs reused, every fakeverbs fault mode ending the call on every rank in
// bounded time, and a missing verbs library refused cleanly on every leader.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/hier/hier_alltoall.h"
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/rdma_transport.h"
#include "tests/mlx5/fork_group.h"
#include "tests/mlx5/rdma_fixture.h"
#include "tests/shm/fork_team.h"
#include "tests/shm/pattern.h"

namespace mlxa2a::mlx5 {
namespace {

using hier::HierAlltoall;
using hier::NodeMap;
using hier::Plan;
using shm::test::ForkBootstrap;

struct Case {
  const char* name;
  std::vector<int> node_of;     // node number per rank (0, 1, ...; lowest rank first)
  std::vector<int> leads = {};  // per rank, 1 = leads; empty: first rank of each node
  const char* link = "ib";      // FAKEVERBS_LINK
};

// What one rank does besides running the engine.
struct Script {
  const char* fault = nullptr;  // FAKEVERBS_FAULT for the leader(s) of fault_node
  int fault_node = -1;
  const char* library = nullptr;  // verbs library to load on fault_node's leaders
  int iterations = 14;
  bool second_team = false;       // build a second transport: its QPs must be reused
  bool pipeline = false;          // HierAlltoall::set_pipeline on every rank
  // Sizes per iteration, cycled; empty: kSizes. Back to back, each call with
  // new buffers.
  std::vector<std::size_t> sizes = {};
};

// One round and up to a dozen (kStagePerRank / n per peer and round).
const std::vector<std::size_t> kSizes = {0, 1, 3, 64, 100, 1000, 5000};

int run_rank(ForkBootstrap& boot, int rank, const Case& c, const Script& s,
             const test::ForkGroupWiring& wiring) {
  setenv("FAKEVERBS_LINK", c.link, 1);
  const NodeMap map(c.node_of, c.leads);
  const int n = static_cast<int>(c.node_of.size());
  const Plan plan(map, rank, test::kStagePerRank);
  const bool faulty = plan.node() == s.fault_node;
  if (s.fault && faulty) setenv("FAKEVERBS_FAULT", s.fault, 1);
  const Status want = s.library ? Status::unavailable : Status::ok;
  std::unique_ptr<HierAlltoall> engine;
  int qps = 0;
  NetOptions opt = test::test_options();
  if (s.library && faulty) opt.verbs_library = s.library;
  if (const int rc = test::build_rdma_hier(boot, rank, c.node_of, c.leads, opt, wiring, &engine,
                                           want, &qps);
      rc != 0) {
    return rc;
  }

  // Remote nodes this leader writes to: one write per round each.
  int handled = 0;
  for (int m = 0; m < map.nodes(); ++m) {
    handled += plan.leader() && m != plan.node() && plan.handled_by(m) == plan.leader_index();
  }
  if (plan.leader()) FT_CHECK(qps == handled);  // one QP per partner process, no more
  engine->set_pipeline(s.pipeline);
  const std::vector<std::size_t>& sizes = s.sizes.empty() ? kSizes : s.sizes;
  for (int it = 0; it < s.iterations; ++it) {
    const std::size_t bytes = sizes[static_cast<std::size_t>(it) % sizes.size()];
    std::vector<unsigned char> send(n * bytes), recv(n * bytes, 0);
    shm::test::fill_send(send, rank, n, it, bytes);
    const std::uint64_t before = EndpointPool::stats().writes_posted;
    const Status st = engine->run(send.data(), recv.data(), bytes);
    if (s.fault && st != Status::ok) {
      if (st != Status::transport_failed && st != Status::peer_failed) {
        std::fprintf(stderr, "rank %d call %d: %s, want transport_failed or peer_failed\n", rank,
                     it, to_string(st));
        return 1;
      }
      FT_CHECK_STATUS(engine->run(send.data(), recv.data(), bytes), Status::broken);
      return 42;  // the expected way out
    }
    FT_CHECK_STATUS(st, Status::ok);
    FT_CHECK(shm::test::check_recv(recv, rank, n, it, bytes));
    const std::uint64_t rounds = bytes == 0 ? 0 : engine->plan().rounds(bytes);
    FT_CHECK(EndpointPool::stats().writes_posted - before == rounds * handled);
  }
  if (s.second_team) {
    // A second team over the same processes (an MPI_Comm_split child with the
    // same leaders) connects nothing new.
    const long live = EndpointPool::stats().qps_live;
    std::unique_ptr<HierAlltoall> again;
    int created = 0;
    if (const int rc = test::build_rdma_hier(boot, rank, c.node_of, c.leads, opt, wiring, &again,
                                             Status::ok, &created);
        rc != 0) {
      return rc;
    }
    again->set_pipeline(s.pipeline);
    FT_CHECK(created == 0);
    FT_CHECK(EndpointPool::stats().qps_live == live);
    std::vector<unsigned char> send(n * 77), recv(n * 77, 0);
    shm::test::fill_send(send, rank, n, 99, 77);
    FT_CHECK_STATUS(again->run(send.data(), recv.data(), 77), Status::ok);
    FT_CHECK(shm::test::check_recv(recv, rank, n, 99, 77));
    FT_CHECK_STATUS(engine->run(send.data(), recv.data(), 77), Status::ok);
    FT_CHECK(shm::test::check_recv(recv, rank, n, 99, 77));
    const long mrs = EndpointPool::stats().mrs_live;
    again.reset();
    if (plan.leader()) FT_CHECK(EndpointPool::stats().mrs_live == mrs - 4);  // in + out, 2 parities
  }
  if (s.fault) return 1;  // the fault never surfaced
  engine.reset();
  EndpointPool::shutdown();
  FT_CHECK(EndpointPool::stats().qps_live == 0 && EndpointPool::stats().mrs_live == 0);
  return 0;
}

void run_case(const Case& c, const Script& s, int want_exit, double deadline_s = 30) {
  const NodeMap map(c.node_of, c.leads);
  test::ForkGroupWiring wiring(test::leader_count(map));
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked_nodes(
      c.node_of, [&](ForkBootstrap& boot, int rank) { return run_rank(boot, rank, c, s, wiring); },
      deadline_s);
  EXPECT_FALSE(res.hung);
  for (std::size_t r = 0; r < res.exit_codes.size(); ++r) {
    EXPECT_EQ(res.exit_codes[r], want_exit) << "rank " << r;
  }
}

class RdmaHier : public ::testing::TestWithParam<Case> {};

TEST_P(RdmaHier, MatchesAlltoallAndWritesOncePerNodePair) {
  run_case(GetParam(), Script{.second_team = true}, 0);
}

// Pipelined rounds (docs/hier.md "Pipelined rounds"): every rank stages
// round r+1 while its leader's round-r writes are in flight. Sizes change
// back to back between one round and many, so a partner one round ahead
// writes into the other parity's out-area while this node still reads its
// last round: any early reuse of an area shows up as wrong bytes.
TEST_P(RdmaHier, PipelinedRoundsMatchAlltoall) {
  run_case(GetParam(),
           Script{.iterations = 16,
                  .second_team = true,
                  .pipeline = true,
                  .sizes = {5000, 1, 20000, 640, 641, 0, 12345, 64}},
           0);
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, RdmaHier,
    ::testing::Values(Case{"two_by_two", {0, 0, 1, 1}}, Case{"singles", {0, 1, 2}},
                      Case{"irregular_3_1_2", {0, 0, 0, 1, 2, 2}},
                      Case{"round_robin", {0, 1, 0, 1, 0}},
                      Case{"roce", {0, 0, 1, 2, 2}, {}, "eth"},
                      // Several leaders per node, each with its own keys and QPs.
                      Case{"two_leaders", {0, 0, 0, 1, 1, 1, 2, 2}, {1, 1, 0, 1, 0, 1, 1, 1}}),
    [](const auto& info) { return std::string(info.param.name); });

struct Fault {
  const char* name;
  const char* rule;
};

class RdmaFaults : public ::testing::TestWithParam<Fault> {};

// Every rank of every node ends the call with an error (leaders with
// transport_failed, the others with peer_failed) within the deadline.
TEST_P(RdmaFaults, EndTheCallOnEveryRankInBoundedTime) {
  const Case c{"three_nodes", {0, 0, 1, 1, 2}};
  run_case(c, Script{.fault = GetParam().rule, .fault_node = 1}, 42, 20);
}

INSTANTIATE_TEST_SUITE_P(
    Modes, RdmaFaults,
    // fail_recv=131: the set-up posts 2 x 64 receives on node 1; a later
    // replenishing one fails.
    ::testing::Values(Fault{"failed_post", "fail_post=3"}, Fault{"failed_recv", "fail_recv=131"},
                      Fault{"remote_access", "rem_access=2"}, Fault{"retry_exceeded", "retry_exc=2"},
                      Fault{"dropped_completion", "drop_cqe=3"}, Fault{"qp_error", "qp_error=2"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(RdmaDelay, SlowWritesStillDeliverEverything) {
  run_case(Case{"delayed", {0, 1, 1}}, Script{.fault = nullptr, .iterations = 7}, 0);
  // A delay is not an error: run with it on node 1 and expect success.
  const Case c{"delayed", {0, 1, 1}};
  test::ForkGroupWiring wiring(2);
  const auto res = shm::test::run_forked_nodes(c.node_of, [&](ForkBootstrap& boot, int rank) {
    if (rank != 0) setenv("FAKEVERBS_FAULT", "delay_us=3000", 1);
    return run_rank(boot, rank, c, Script{.iterations = 7}, wiring);
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// Pipelined: every fault mode still ends the call on every rank (the
// transport's post and complete fail apart).
TEST_P(RdmaFaults, EndAPipelinedCallOnEveryRankInBoundedTime) {
  const Case c{"three_nodes", {0, 0, 1, 1, 2}};
  run_case(c,
           Script{.fault = GetParam().rule, .fault_node = 1, .pipeline = true,
                  .sizes = {5000, 3, 20000}},
           42, 20);
}

// Pipelined under fakeverbs' delay and a wide jitter (writes executed up to
// 300 us after their post, placed in shuffled order): a node that falls
// behind is never overwritten by one that runs ahead.
TEST(RdmaDelay, PipelinedRoundsUnderDelayAndJitter) {
  const Case c{"irregular_jitter", {0, 0, 0, 1, 2, 2}};
  test::ForkGroupWiring wiring(3);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked_nodes(c.node_of, [&](ForkBootstrap& boot, int rank) {
    setenv("FAKEVERBS_JITTER_US", "300", 1);
    if (rank == 3) setenv("FAKEVERBS_FAULT", "delay_us=2000", 1);
    return run_rank(boot, rank, c, Script{.iterations = 10, .pipeline = true,
                                          .sizes = {20000, 700, 5000, 1}},
                    wiring);
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

TEST(RdmaUnavailable, MissingVerbsLibraryIsRefusedOnEveryLeader) {
  // Node 1's leader cannot load verbs; the others can, yet all refuse alike
  // (both set-up allgathers still run, nobody waits for a missing peer).
  run_case(Case{"three_nodes", {0, 1, 1, 2}},
           Script{.fault_node = 1, .library = "libmlxa2a-no-such-verbs.so.1"}, 42);
}

}  // namespace
}  // namespace mlxa2a::mlx5
