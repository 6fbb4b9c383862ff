// The RC queue-pair budget (issue 39, item 2; core/mlx5/qp_budget.h): its
// default from the HCA's max_qp and the ranks per node, and a set-up that
// would take one process past it refused on every leader alike, with the
// reason, before that process makes a QP. Three forked leaders over
// fakeverbs, each partnered with the other two.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/hier/transport.h"
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/qp_budget.h"
#include "core/mlx5/rdma_transport.h"
#include "tests/mlx5/fork_group.h"
#include "tests/mlx5/rdma_fixture.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::mlx5 {
namespace {

TEST(QpBudget, DefaultIsHalfTheHcaSharedByTheNode) {
  // ConnectX-6: 2^18 QPs; 32 ranks per node keep 4,096 each.
  EXPECT_EQ(default_rc_qp_budget(1 << 18, 32), 4096u);
  EXPECT_EQ(default_rc_qp_budget(1 << 18, 1), std::uint64_t{1} << 17);
  EXPECT_EQ(default_rc_qp_budget(1000, 0), 500u);  // no rank count: one
  EXPECT_EQ(default_rc_qp_budget(3, 8), 1u);       // never 0
  EXPECT_EQ(default_rc_qp_budget(0, 8), 1u);
  const QpBudget forced = rc_qp_budget(7, 1 << 18, 32);
  EXPECT_EQ(forced.limit, 7u);
  EXPECT_STREQ(forced.from, "MLXA2A_NET_RC_QP_BUDGET");
  EXPECT_EQ(rc_qp_budget(0, 1 << 18, 32).limit, 4096u);
}

TEST(QpBudget, OverOnlyAboveTheLimit) {
  std::string why;
  EXPECT_FALSE(rc_over_budget(4, {4, "x"}, &why));
  EXPECT_TRUE(why.empty());
  EXPECT_TRUE(rc_over_budget(5, {4, "MLXA2A_NET_RC_QP_BUDGET"}, &why));
  EXPECT_EQ(why, "RC needs 5 queue pairs in this process, above its budget of 4 "
                 "(MLXA2A_NET_RC_QP_BUDGET)");
}

constexpr std::size_t kArea = 4096;
constexpr int kLeaders = 3;

// Leader `me` sets up with its budget (0: the default); checks the outcome
// against `want_ok` and the reason against `want_why` (a substring).
int leader(int me, const test::ForkGroupWiring& wiring, std::uint32_t budget, bool want_ok,
           const char* want_why) {
  test::ForkGroup group(wiring, me);
  std::vector<int> first_rank, peers;
  for (int m = 0; m < kLeaders; ++m) {
    first_rank.push_back(m);
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
  NetOptions opt = test::test_options();
  opt.rc_qp_budget = budget;
  std::unique_ptr<RdmaLeaderTransport> t;
  std::string why;
  const Status st = RdmaLeaderTransport::create(group, areas, first_rank, peers, opt, &t, &why);
  if ((st == Status::ok) != want_ok || std::strstr(why.c_str(), want_why) == nullptr) {
    std::fprintf(stderr, "leader %d: status %d, why '%s' (want '%s')\n", me,
                 static_cast<int>(st), why.c_str(), want_why);
    return 1;
  }
  if (!want_ok && budget != 0) {
    // The process over its budget made no QP at all.
    std::string e;
    EndpointPool* pool = EndpointPool::get(opt, &e);
    FT_CHECK(pool != nullptr);
    std::lock_guard<std::mutex> lock(pool->mutex());
    FT_CHECK(pool->endpoint_count() == 0);
  }
  if (want_ok) FT_CHECK(t->qps_created() == kLeaders - 1);
  t.reset();
  EndpointPool::shutdown();
  return 0;
}

void run(std::uint32_t leader0_budget, bool want_ok, const char* why0, const char* why_others) {
  test::ForkGroupWiring wiring(kLeaders);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked(kLeaders, [&](shm::test::ForkBootstrap& boot) {
    const int me = boot.local_rank();
    return leader(me, wiring, me == 0 ? leader0_budget : 0, want_ok, me == 0 ? why0 : why_others);
  }, 60);
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

TEST(QpBudget, OneLeaderOverItsBudgetTurnsRcOffForTheTeam) {
  // Leader 0 needs 2 QPs (one per partner) and may hold 1.
  run(1, false, "RC needs 2 queue pairs in this process, above its budget of 1",
      "leader 0 is over its RC queue-pair budget (MLXA2A_NET_RC_QP_BUDGET)");
}

TEST(QpBudget, ABudgetThatFitsChangesNothing) {
  run(2, true, "", "");
}

}  // namespace
}  // namespace mlxa2a::mlx5
