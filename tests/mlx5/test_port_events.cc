// Port flaps and address changes (issue 37, item 1), two single-rank nodes
// over fakeverbs, no MPI. A port that goes down and comes back within the
// QPs' retry budget costs a stall, not the team: the call completes with
// the right data and the queue pair is still in use afterwards. After the
// port's LID or GID changed, the old pairs no longer reach it (as on a
// fabric), and the next set-up publishes and connects to the new address.
// In the mlx5-fabric binary: each case describes its fakeverbs port in the
// environment of a forked child, read once per process.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
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

const std::vector<int> kNodes = {0, 1};
constexpr std::size_t kBytes = 64;

Status exchange(HierAlltoall& e, int rank, int it, bool* data_ok) {
  std::vector<unsigned char> send(2 * kBytes), recv(2 * kBytes, 0);
  shm::test::fill_send(send, rank, 2, it, kBytes);
  const Status st = e.run(send.data(), recv.data(), kBytes);
  *data_ok = st == Status::ok && shm::test::check_recv(recv, rank, 2, it, kBytes);
  return st;
}

bool contained(Status st) { return st == Status::transport_failed || st == Status::peer_failed; }

template <class Fn>
void run_pair(Fn fn) {
  test::ForkGroupWiring wiring(2);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked_nodes(
      kNodes, [&](ForkBootstrap& boot, int rank) { return fn(boot, rank, wiring); }, 40);
  EXPECT_FALSE(res.hung);
  for (std::size_t r = 0; r < res.exit_codes.size(); ++r) {
    EXPECT_EQ(res.exit_codes[r], 0) << "rank " << r;
  }
}

// Node 1's port goes down for 100 ms at its second post; its QPs retry for
// 67 ms x 8 = 0.54 s, so the flap ends inside the budget.
int flap_rank(ForkBootstrap& boot, int rank, const test::ForkGroupWiring& wiring) {
  NetOptions opt = test::test_options();
  opt.qp_timeout = 14;  // 4.096 us x 2^14 = 67 ms per try
  opt.retry_count = 7;
  opt.timeout_ms = 5000;
  std::unique_ptr<HierAlltoall> a, b;
  int created = 0;
  FT_CHECK(test::build_rdma_hier(boot, rank, kNodes, {}, opt, wiring, &a, Status::ok,
                                 &created) == 0);
  FT_CHECK(created == 1);
  if (rank == 1) setenv("FAKEVERBS_FAULT", "port_flap=2:100", 1);
  for (int it = 1; it <= 6; ++it) {
    bool ok = false;
    const Status st = exchange(*a, rank, it, &ok);
    if (st != Status::ok) std::fprintf(stderr, "rank %d call %d: %s\n", rank, it, to_string(st));
    FT_CHECK(st == Status::ok && ok);
  }
  if (rank == 1) FT_CHECK(std::strcmp(EndpointPool::last_event(), "IBV_EVENT_PORT_ERR") == 0);
  // The pair survived: a new team reuses it (no QP created) and runs.
  created = 0;
  FT_CHECK(test::build_rdma_hier(boot, rank, kNodes, {}, opt, wiring, &b, Status::ok,
                                 &created) == 0);
  FT_CHECK(created == 0);
  bool ok = false;
  FT_CHECK(exchange(*b, rank, 7, &ok) == Status::ok && ok);
  return 0;
}

TEST(PortEvents, AFlapInsideTheRetryBudgetCostsAStallNotTheTeam) { run_pair(flap_rank); }

// Node 1's port gets a new address (`rule`, at its first post) in the middle
// of a call: that call fails on both (the pair addresses the old one), the
// next set-up publishes the new one and RDMA works again over new QPs.
// `moved` says whether node 1's address is the new one.
int address_change_rank(ForkBootstrap& boot, int rank, const test::ForkGroupWiring& wiring,
                        const char* rule, bool (*moved)(const PortAddress& before,
                                                        const PortAddress& now)) {
  const NetOptions opt = test::test_options();
  std::unique_ptr<HierAlltoall> a, b;
  int created = 0;
  FT_CHECK(test::build_rdma_hier(boot, rank, kNodes, {}, opt, wiring, &a, Status::ok,
                                 &created) == 0);
  std::string why;
  EndpointPool* pool = EndpointPool::get(opt, &why);
  FT_CHECK(pool != nullptr);
  const PortAddress before = pool->device()->address();
  if (rank == 1) setenv("FAKEVERBS_FAULT", rule, 1);
  bool ok = false;
  FT_CHECK(contained(exchange(*a, rank, 1, &ok)));
  a.reset();
  created = 0;
  FT_CHECK(test::build_rdma_hier(boot, rank, kNodes, {}, opt, wiring, &b, Status::ok,
                                 &created) == 0);
  FT_CHECK(created == 1);
  {
    std::lock_guard<std::mutex> lock(pool->mutex());
    const bool now_moved = moved(before, pool->device()->address());
    if (now_moved != (rank == 1)) std::fprintf(stderr, "rank %d: address moved %d\n", rank, now_moved);
    FT_CHECK(now_moved == (rank == 1));
  }
  FT_CHECK(exchange(*b, rank, 2, &ok) == Status::ok && ok);
  return 0;
}

TEST(PortEvents, AfterALidChangeTheNextSetUpUsesTheNewLid) {
  setenv("FAKEVERBS_LINK", "ib", 1);
  run_pair([](ForkBootstrap& boot, int rank, const test::ForkGroupWiring& wiring) {
    return address_change_rank(boot, rank, wiring, "lid_change=1",
                               [](const PortAddress& b, const PortAddress& n) { return b.lid != n.lid; });
  });
  unsetenv("FAKEVERBS_LINK");
}

TEST(PortEvents, AfterAGidChangeTheNextRoceSetUpUsesTheNewGid) {
  setenv("FAKEVERBS_LINK", "eth", 1);
  run_pair([](ForkBootstrap& boot, int rank, const test::ForkGroupWiring& wiring) {
    return address_change_rank(boot, rank, wiring, "gid_change=1",
                               [](const PortAddress& b, const PortAddress& n) {
                                 return std::memcmp(b.gid, n.gid, sizeof b.gid) != 0;
                               });
  });
  unsetenv("FAKEVERBS_LINK");
}

}  // namespace
}  // namespace mlxa2a::mlx5
