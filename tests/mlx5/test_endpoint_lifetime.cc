// Endpoint lifetime across teams (issue 27, item 1): teams sharing a pair of
// processes share its queue pair (EndpointPool). When one team's QP fails,
// a later set-up replaces it; every team still holding the old endpoint must
// contain itself (an error, then `broken`, so the caller falls back) instead
// of touching freed memory, and the new team gets fresh QPs and RDMA.
// Forked ranks over fakeverbs, no MPI; under ASan (build-sanitize) a use
// after free aborts the rank.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/hier/hier_alltoall.h"
#include "core/mlx5/endpoint_pool.h"
#include "tests/mlx5/fork_group.h"
#include "tests/mlx5/rdma_fixture.h"
#include "tests/shm/fork_team.h"
#include "tests/shm/pattern.h"

namespace mlxa2a::mlx5 {
namespace {

using hier::HierAlltoall;
using shm::test::ForkBootstrap;

const std::vector<int> kNodes = {0, 0, 1, 1};

// One alltoall of `bytes` per peer among the ranks of `nodes`; on success
// the data is checked.
Status run_checked(HierAlltoall& e, const std::vector<int>& nodes, int rank, int it,
                   std::size_t bytes, bool* data_ok) {
  const int n = static_cast<int>(nodes.size());
  std::vector<unsigned char> send(n * bytes), recv(n * bytes, 0);
  shm::test::fill_send(send, rank, n, it, bytes);
  const Status st = e.run(send.data(), recv.data(), bytes);
  *data_ok = st != Status::ok || shm::test::check_recv(recv, rank, n, it, bytes);
  return st;
}

Status run_checked(HierAlltoall& e, int rank, int it, std::size_t bytes, bool* data_ok) {
  return run_checked(e, kNodes, rank, it, bytes, data_ok);
}

bool contained(Status st) { return st == Status::transport_failed || st == Status::peer_failed; }

int replaced_pair_rank(ForkBootstrap& boot, int rank, const test::ForkGroupWiring& wiring) {
  const NetOptions opt = test::test_options();
  const bool leader = rank == 0 || rank == 2;
  bool ok = false;
  std::unique_ptr<HierAlltoall> a, b, c;
  int created_a = 0, created_b = 0, created_c = 0;
  FT_CHECK(test::build_rdma_hier(boot, rank, kNodes, {}, opt, wiring, &a, Status::ok,
                                 &created_a) == 0);
  FT_CHECK(test::build_rdma_hier(boot, rank, kNodes, {}, opt, wiring, &b, Status::ok,
                                 &created_b) == 0);
  FT_CHECK(created_a == (leader ? 1 : 0) && created_b == 0);  // b shares a's QP
  FT_CHECK_STATUS(run_checked(*a, rank, 1, 100, &ok), Status::ok);
  FT_CHECK(ok);
  FT_CHECK_STATUS(run_checked(*b, rank, 2, 100, &ok), Status::ok);
  FT_CHECK(ok);

  // Node 1's QP goes to the error state at a's next post (IBV_EVENT_QP_FATAL).
  if (rank == 2) setenv("FAKEVERBS_FAULT", "qp_error=1", 1);
  FT_CHECK(contained(run_checked(*a, rank, 3, 100, &ok)));
  unsetenv("FAKEVERBS_FAULT");

  // A later team: both ends replace the pair and it runs over RDMA.
  FT_CHECK(test::build_rdma_hier(boot, rank, kNodes, {}, opt, wiring, &c, Status::ok,
                                 &created_c) == 0);
  FT_CHECK(created_c == (leader ? 1 : 0));
  const std::uint64_t writes = EndpointPool::stats().writes_posted;
  FT_CHECK_STATUS(run_checked(*c, rank, 4, 100, &ok), Status::ok);
  FT_CHECK(ok);
  if (leader) FT_CHECK(EndpointPool::stats().writes_posted > writes);

  // b still holds the replaced endpoint: it contains itself, then stays broken.
  FT_CHECK(contained(run_checked(*b, rank, 5, 100, &ok)));
  FT_CHECK_STATUS(run_checked(*b, rank, 6, 100, &ok), Status::broken);
  // ... and c is undisturbed.
  FT_CHECK_STATUS(run_checked(*c, rank, 7, 300, &ok), Status::ok);
  FT_CHECK(ok);
  a.reset();
  b.reset();
  c.reset();
  EndpointPool::shutdown();
  FT_CHECK(EndpointPool::stats().qps_live == 0 && EndpointPool::stats().mrs_live == 0);
  return 0;
}

TEST(EndpointLifetime, TeamHoldingAReplacedQueuePairFallsBackAndANewTeamGetsFreshOnes) {
  test::ForkGroupWiring wiring(2);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked_nodes(
      kNodes, [&](ForkBootstrap& boot, int rank) { return replaced_pair_rank(boot, rank, wiring); },
      30);
  EXPECT_FALSE(res.hung);
  for (std::size_t r = 0; r < res.exit_codes.size(); ++r) {
    EXPECT_EQ(res.exit_codes[r], 0) << "rank " << r;
  }
}

// A QP the HCA moved to the error state without any send of ours failing
// (a responder-class error: a late write hitting a deregistered rkey), the
// partner's end still in RTS. The next set-up must not hand it to the new
// team (it polls the CQ and queries the QP), and both ends replace the pair
// within that set-up: the new team runs over RDMA on fresh QPs at once.
int responder_error_rank(ForkBootstrap& boot, int rank, const test::ForkGroupWiring& wiring) {
  const NetOptions opt = test::test_options();
  const bool leader = rank == 0 || rank == 2;
  bool ok = false;
  std::unique_ptr<HierAlltoall> a, c;
  int created_a = 0, created_c = 0;
  FT_CHECK(test::build_rdma_hier(boot, rank, kNodes, {}, opt, wiring, &a, Status::ok,
                                 &created_a) == 0);
  FT_CHECK_STATUS(run_checked(*a, rank, 1, 100, &ok), Status::ok);
  FT_CHECK(ok);
  // Node 1's end fails when the set-up queries it (ibv_query_qp): nothing was posted.
  if (rank == 2) setenv("FAKEVERBS_FAULT", "resp_error=1", 1);
  FT_CHECK(test::build_rdma_hier(boot, rank, kNodes, {}, opt, wiring, &c, Status::ok,
                                 &created_c) == 0);
  unsetenv("FAKEVERBS_FAULT");
  FT_CHECK(created_c == (leader ? 1 : 0));  // both ends replaced the pair
  if (rank == 2) FT_CHECK(std::strcmp(EndpointPool::last_event(), "IBV_EVENT_QP_ACCESS_ERR") == 0);
  const std::uint64_t writes = EndpointPool::stats().writes_posted;
  FT_CHECK_STATUS(run_checked(*c, rank, 2, 100, &ok), Status::ok);
  FT_CHECK(ok);
  if (leader) FT_CHECK(EndpointPool::stats().writes_posted > writes);
  // a held the pair in error: it contains itself, c goes on.
  FT_CHECK(contained(run_checked(*a, rank, 3, 100, &ok)));
  FT_CHECK_STATUS(run_checked(*c, rank, 4, 300, &ok), Status::ok);
  FT_CHECK(ok);
  a.reset();
  c.reset();
  EndpointPool::shutdown();
  FT_CHECK(EndpointPool::stats().qps_live == 0 && EndpointPool::stats().mrs_live == 0);
  return 0;
}

TEST(EndpointLifetime, QueuePairInErrorAtSetUpIsReplacedOnBothEndsAtOnce) {
  test::ForkGroupWiring wiring(2);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked_nodes(
      kNodes,
      [&](ForkBootstrap& boot, int rank) { return responder_error_rank(boot, rank, wiring); }, 30);
  EXPECT_FALSE(res.hung);
  for (std::size_t r = 0; r < res.exit_codes.size(); ++r) {
    EXPECT_EQ(res.exit_codes[r], 0) << "rank " << r;
  }
}

// CQ sizing (issue 27, item 2): the process's CQ is sized for the QPs it
// has, not for 1,024 endpoints, and grows before a new QP can post. Six
// single-rank nodes: every leader has 5 QPs. Then all 5 of node 5's QPs fail
// at once (5 x 64 receives flushed into its CQ together - fakeverbs
// overruns a CQ that is too small, IBV_EVENT_CQ_ERR as on mlx5) and the
// next set-up makes 5 more while team a still holds the old ones.
int cq_growth_rank(ForkBootstrap& boot, int rank, const test::ForkGroupWiring& wiring) {
  const std::vector<int> nodes = {0, 1, 2, 3, 4, 5};
  const NetOptions opt = test::test_options();
  bool ok = false;
  std::unique_ptr<HierAlltoall> a, c;
  int created_a = 0, created_c = 0;
  FT_CHECK(test::build_rdma_hier(boot, rank, nodes, {}, opt, wiring, &a, Status::ok,
                                 &created_a) == 0);
  FT_CHECK(created_a == 5);
  std::string why;
  const EndpointPool* pool = EndpointPool::get(opt, &why);
  FT_CHECK(pool != nullptr);
  const int per_qp = static_cast<int>(EndpointPool::kSendDepth + EndpointPool::kRecvDepth);
  const int depth = pool->device()->cq_depth();
  if (depth < 5 * per_qp || depth >= 4 * 5 * per_qp) {
    std::fprintf(stderr, "rank %d: CQ of %d entries for 5 QPs\n", rank, depth);
    return 1;
  }
  FT_CHECK(run_checked(*a, nodes, rank, 1, 100, &ok) == Status::ok && ok);
  if (rank == 5) setenv("FAKEVERBS_FAULT", "resp_error=1", 1);
  FT_CHECK(test::build_rdma_hier(boot, rank, nodes, {}, opt, wiring, &c, Status::ok,
                                 &created_c) == 0);
  unsetenv("FAKEVERBS_FAULT");
  FT_CHECK(created_c == (rank == 5 ? 5 : 1));
  if (rank == 5) {
    FT_CHECK(std::strcmp(EndpointPool::last_event(), "IBV_EVENT_QP_ACCESS_ERR") == 0);
    FT_CHECK(pool->device()->cq_depth() >= 10 * per_qp);  // a still holds the 5 old QPs
  }
  FT_CHECK(run_checked(*c, nodes, rank, 2, 300, &ok) == Status::ok && ok);
  FT_CHECK(contained(run_checked(*a, nodes, rank, 3, 100, &ok)));
  FT_CHECK(run_checked(*c, nodes, rank, 4, 100, &ok) == Status::ok && ok);
  a.reset();
  c.reset();
  EndpointPool::shutdown();
  FT_CHECK(EndpointPool::stats().qps_live == 0 && EndpointPool::stats().mrs_live == 0);
  return 0;
}

TEST(EndpointLifetime, CompletionQueueSizedForTheQueuePairsInUseAndGrown) {
  test::ForkGroupWiring wiring(6);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked_nodes(
      {0, 1, 2, 3, 4, 5},
      [&](ForkBootstrap& boot, int rank) { return cq_growth_rank(boot, rank, wiring); }, 30);
  EXPECT_FALSE(res.hung);
  for (std::size_t r = 0; r < res.exit_codes.size(); ++r) {
    EXPECT_EQ(res.exit_codes[r], 0) << "rank " << r;
  }
}

// The port of node 1's leader goes down for good in the middle of a call
// (IBV_EVENT_PORT_ERR): the event fails no endpoint (a flap inside the retry
// budget must cost only a stall, test_port_events.cc), so the call ends when
// the writes' retries run out (67 ms x 4 here), well before the software
// timeout; new set-ups are refused while the port is down.
int port_down_rank(ForkBootstrap& boot, int rank, const test::ForkGroupWiring& wiring) {
  NetOptions opt = test::test_options();
  opt.qp_timeout = 14;  // 67 ms per try
  opt.retry_count = 3;
  opt.timeout_ms = 3000;
  bool ok = false;
  std::unique_ptr<HierAlltoall> a, b;
  int created = 0;
  FT_CHECK(test::build_rdma_hier(boot, rank, kNodes, {}, opt, wiring, &a, Status::ok,
                                 &created) == 0);
  FT_CHECK_STATUS(run_checked(*a, rank, 1, 100, &ok), Status::ok);
  FT_CHECK(ok);
  if (rank == 2) setenv("FAKEVERBS_FAULT", "port_down=1", 1);
  const auto start = std::chrono::steady_clock::now();
  FT_CHECK(contained(run_checked(*a, rank, 2, 100, &ok)));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (rank == 2) {
    if (took >= 1.5) std::fprintf(stderr, "rank 2: the port-down call took %.2f s\n", took);
    FT_CHECK(took < 1.5);
    FT_CHECK(std::strcmp(EndpointPool::last_event(), "IBV_EVENT_PORT_ERR") == 0);
  }
  const int rc = test::build_rdma_hier(boot, rank, kNodes, {}, opt, wiring, &b,
                                       Status::unavailable, &created);
  FT_CHECK(rc == 42);  // refused on every leader alike
  return 0;
}

TEST(EndpointLifetime, PortDownForGoodEndsTheCallWhenRetriesRunOutAndRefusesNewTeams) {
  test::ForkGroupWiring wiring(2);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked_nodes(
      kNodes, [&](ForkBootstrap& boot, int rank) { return port_down_rank(boot, rank, wiring); },
      30);
  EXPECT_FALSE(res.hung);
  for (std::size_t r = 0; r < res.exit_codes.size(); ++r) {
    EXPECT_EQ(res.exit_codes[r], 0) << "rank " << r;
  }
}

}  // namespace
}  // namespace mlxa2a::mlx5
