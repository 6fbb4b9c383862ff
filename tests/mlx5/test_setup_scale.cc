// Set-up grows linearly (issue 39, item 1): each pair's links go pairwise
// (an alltoall), so what a leader's set-up collectives move is c * (n - 1)
// bytes for n leaders - where the allgather of every member's links table
// moved n * (n - 1) link entries per leader. n = 2, 4, 8, 16 forked leaders
// over fakeverbs, each partnered with every other (one leader per node).
#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "core/hier/transport.h"
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/rdma_transport.h"
#include "core/shm/status.h"
#include "tests/mlx5/fork_group.h"
#include "tests/mlx5/rdma_fixture.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::mlx5 {
namespace {

constexpr std::size_t kArea = 4096;

int leader(int me, int n, const test::ForkGroupWiring& wiring, std::size_t* bytes) {
  test::ForkGroup group(wiring, me);
  std::vector<int> first_rank(static_cast<std::size_t>(n)), peers;
  for (int m = 0; m < n; ++m) {
    first_rank[static_cast<std::size_t>(m)] = m;
    if (m != me) peers.push_back(m);
  }
  std::vector<char> in[2], out[2];
  hier::StageAreas areas;
  for (int p = 0; p < 2; ++p) {
    in[p].assign(kArea, 0);
    out[p].assign(kArea, 0);
    areas.in[p] = in[p].data();
    areas.out[p] = out[p].data();
  }
  areas.bytes = kArea;
  std::unique_ptr<RdmaLeaderTransport> t;
  std::string why;
  const Status st = RdmaLeaderTransport::create(group, areas, first_rank, peers,
                                                test::test_options(), &t, &why);
  if (st != Status::ok) std::fprintf(stderr, "leader %d of %d: %s\n", me, n, why.c_str());
  FT_CHECK(st == Status::ok);
  bytes[me] = t->setup_bytes();
  t.reset();
  EndpointPool::shutdown();
  return 0;
}

// Every leader's set-up bytes for a group of n.
std::vector<std::size_t> setup_bytes(int n) {
  auto* shared = static_cast<std::size_t*>(mmap(nullptr, sizeof(std::size_t) * 16,
                                                PROT_READ | PROT_WRITE,
                                                MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  EXPECT_NE(shared, MAP_FAILED);
  if (shared == MAP_FAILED) return {};
  test::ForkGroupWiring wiring(n);
  EXPECT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked(n, [&](shm::test::ForkBootstrap& boot) {
    return leader(boot.local_rank(), n, wiring, shared);
  }, 120);
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
  std::vector<std::size_t> out(shared, shared + n);
  munmap(shared, sizeof(std::size_t) * 16);
  return out;
}

TEST(SetupScale, EachLeaderMovesBytesLinearInTheLeaders) {
  std::size_t per_partner = 0;
  for (int n : {2, 4, 8, 16}) {
    const std::vector<std::size_t> b = setup_bytes(n);
    ASSERT_EQ(b.size(), static_cast<std::size_t>(n));
    for (std::size_t v : b) {
      // Every collective moves a fixed size to and from each other member.
      EXPECT_EQ(v % static_cast<std::size_t>(n - 1), 0u) << "n=" << n;
      if (per_partner == 0) per_partner = v / static_cast<std::size_t>(n - 1);
      EXPECT_EQ(v / static_cast<std::size_t>(n - 1), per_partner)
          << "n=" << n << ": " << v << " bytes; with 2 leaders " << per_partner
          << " per partner (a table of every member's links grows as n^2)";
    }
    std::printf("%2d leaders: %zu set-up bytes per leader\n", n, b[0]);
  }
}

}  // namespace
}  // namespace mlxa2a::mlx5
