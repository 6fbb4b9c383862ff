// Reachability and build agreement before any queue pair is used (issue 37,
// items 2 and 3): leaders on different subnets, or running builds whose
// set-up cards differ, refuse RDMA at set-up with a reason that names both
// sides - instead of connecting and running the retries out on the first
// write (or misreading each other's cards). The rules as pure functions,
// then two single-rank nodes over fakeverbs, each describing its own port
// (FAKEVERBS_SUBNETS, FAKEVERBS_LINK) in its forked process.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/hier/hier_alltoall.h"
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/hca_choice.h"
#include "core/mlx5/setup_card.h"
#include "tests/mlx5/fork_group.h"
#include "tests/mlx5/rdma_fixture.h"
#include "tests/shm/fork_team.h"
#include "tests/shm/pattern.h"

namespace mlxa2a::mlx5 {
namespace {

using shm::test::ForkBootstrap;

Card ib_card(const char* hca, std::uint16_t subnet) {
  Card c;
  std::snprintf(c.hca, sizeof c.hca, "%s", hca);
  c.addr.gid[0] = 0xfe;
  c.addr.gid[1] = 0x80;
  c.addr.gid[6] = static_cast<std::uint8_t>(subnet >> 8);
  c.addr.gid[7] = static_cast<std::uint8_t>(subnet);
  c.addr.gid[15] = 7;  // the interface id does not matter
  return c;
}

GidCandidate v4(std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d, int bits) {
  GidCandidate g;
  g.raw[10] = g.raw[11] = 0xff;
  g.raw[12] = a, g.raw[13] = b, g.raw[14] = c, g.raw[15] = d;
  g.prefix = 96 + bits;
  g.index = 0;
  return g;
}

TEST(Reachability, InfiniBandNeedsTheSameSubnetPrefix) {
  const Card ours = ib_card("mlx5_0", 2), same = ib_card("mlx5_3", 2), other = ib_card("mlx5_1", 1);
  std::string why;
  EXPECT_TRUE(reachable({&ours, {}}, {&same, {}}, 3, &why));
  EXPECT_FALSE(reachable({&ours, {}}, {&other, {}}, 3, &why));
  EXPECT_EQ(why, "node 3's leader mlx5_1 is on subnet fe80:0:0:1 and ours (mlx5_0) on "
                 "fe80:0:0:2: no common subnet");
}

TEST(Reachability, RoceNeedsTheChosenGidsInOneSubnetAndOneLinkLayer) {
  Card a = ib_card("mlx5_0", 0), b = ib_card("mlx5_1", 0);
  a.addr.roce = b.addr.roce = 1;
  std::string why;
  EXPECT_TRUE(reachable({&a, v4(10, 1, 0, 1, 16)}, {&b, v4(10, 1, 7, 2, 16)}, 1, &why));
  EXPECT_FALSE(reachable({&a, v4(10, 1, 0, 1, 24)}, {&b, v4(10, 2, 0, 1, 24)}, 1, &why));
  EXPECT_EQ(why, "node 1's leader mlx5_1 is on subnet 10.2.0.0/24 and ours (mlx5_0) on "
                 "10.1.0.0/24: no common subnet");
  b.addr.roce = 0;
  EXPECT_FALSE(reachable({&a, v4(10, 1, 0, 1, 24)}, {&b, {}}, 1, &why));
  EXPECT_NE(why.find("no common link layer"), std::string::npos) << why;
}

TEST(CardFormat, AMismatchNamesTheNodeBothFormatsAndBothBuilds) {
  const std::vector<int> first_rank = {0, 2, 3};  // node 0 has two leaders
  PortOffer ib;
  ib.links = 1;
  std::vector<Preamble> all(4, make_preamble(ib, kCardFormat));
  std::string why;
  EXPECT_EQ(format_mismatch(all, 0, first_rank, &why), -1);
  std::snprintf(all[3].build, sizeof all[3].build, "mlxa2a 9.9 (git other)");
  all[3].format = kCardFormat + 1;
  EXPECT_EQ(format_mismatch(all, 0, first_rank, &why), 3);
  EXPECT_NE(why.find("set-up card of node 2 has format " + std::to_string(kCardFormat + 1) +
                     ", ours " + std::to_string(kCardFormat)),
            std::string::npos) << why;
  EXPECT_NE(why.find("mlxa2a 9.9 (git other) there"), std::string::npos) << why;
  all[1].magic = 0;  // not a card at all: found first
  EXPECT_EQ(format_mismatch(all, 0, first_rank, &why), 1);
  EXPECT_NE(why.find("node 0's leader is not an mlxa2a card"), std::string::npos) << why;
  EXPECT_EQ(node_of_member(first_rank, 1), 0);
  EXPECT_EQ(node_of_member(first_rank, 2), 1);
}

TEST(Rails, LeadersMeetOnTheLowestSubnetAllOffer) {
  auto offering = [](std::initializer_list<std::uint64_t> subnets) {
    PortOffer o;
    o.links = 1;
    for (std::uint64_t s : subnets) o.add_subnet(s);
    return make_preamble(o, kCardFormat);
  };
  // Two nodes listing their rails in opposite orders, a RoCE-only leader
  // (no subnets: not counted).
  std::vector<Preamble> all = {offering({7, 3}), offering({3, 7}), offering({})};
  EXPECT_EQ(rail_subnet(all), 3u);
  all.push_back(offering({7}));  // one leader has only 7: everyone takes it
  EXPECT_EQ(rail_subnet(all), 7u);
  all.push_back(offering({9}));  // nothing in common: no preference
  EXPECT_EQ(rail_subnet(all), 0u);
}

TEST(Rails, ThePortOnTheAssignedSubnetIsChosenFirst) {
  std::vector<PortCandidate> c = {{"mlx5_0", 1, false, 0, false}, {"mlx5_1", 1, false, 1, true}};
  const HcaChoice h = choose_hca(c, {0}, 0);  // mlx5_0 is nearer but on the other subnet
  EXPECT_EQ(h.index, 1);
  EXPECT_EQ(h.reason, "numa1-remote,rail1/1,subnet");
  c[0].on_subnet = true;  // both on it: the subnet decides nothing
  EXPECT_EQ(choose_hca(c, {0}, 0).reason, "numa0-near,rail1/1");
}

// Two single-rank nodes; rank r's environment is env[r] (name=value pairs).
// want_why "": RDMA set up and an exchange checked; else the set-up is
// refused on both with a reason containing want_why[r].
struct Case {
  std::vector<std::vector<std::pair<const char*, const char*>>> env;
  std::vector<const char*> want_why;
  std::vector<const char*> want_hca = {};  // with RDMA: the device each rank took
  std::vector<std::uint32_t> card_format = {};  // MLXA2A_DEBUG_CARD_FORMAT per rank
};

int case_rank(ForkBootstrap& boot, int rank, const test::ForkGroupWiring& wiring, const Case& c) {
  for (const auto& [k, v] : c.env[static_cast<std::size_t>(rank)]) setenv(k, v, 1);
  const char* want = c.want_why[static_cast<std::size_t>(rank)];
  const bool refuse = *want != 0;
  NetOptions opt = test::test_options();
  if (!c.card_format.empty()) opt.debug_card_format = c.card_format[static_cast<std::size_t>(rank)];
  std::unique_ptr<hier::HierAlltoall> e;
  int created = 0;
  std::string why;
  const int rc = test::build_rdma_hier(boot, rank, {0, 1}, {}, opt, wiring, &e,
                                       refuse ? Status::unavailable : Status::ok, &created,
                                       nullptr, &why);
  if (refuse) {
    if (why.find(want) == std::string::npos) std::fprintf(stderr, "rank %d: why: %s\n", rank, why.c_str());
    return rc == 42 && why.find(want) != std::string::npos ? 0 : 1;
  }
  FT_CHECK(rc == 0 && created == 1);
  std::vector<unsigned char> send(2 * 64), recv(2 * 64, 0);
  shm::test::fill_send(send, rank, 2, 1, 64);
  FT_CHECK_STATUS(e->run(send.data(), recv.data(), 64), Status::ok);
  FT_CHECK(shm::test::check_recv(recv, rank, 2, 1, 64));
  if (!c.want_hca.empty()) {
    const EndpointPool* pool = EndpointPool::get(test::test_options(), &why);
    FT_CHECK(pool != nullptr);
    const std::string& took = pool->device()->name();
    if (took != c.want_hca[static_cast<std::size_t>(rank)]) {
      std::fprintf(stderr, "rank %d took %s (%s)\n", rank, took.c_str(), pool->device()->choice().c_str());
    }
    FT_CHECK(took == c.want_hca[static_cast<std::size_t>(rank)]);
  }
  return 0;
}

void run_case(const Case& c) {
  test::ForkGroupWiring wiring(2);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked_nodes(
      {0, 1}, [&](ForkBootstrap& boot, int rank) { return case_rank(boot, rank, wiring, c); }, 30);
  EXPECT_FALSE(res.hung);
  for (std::size_t r = 0; r < res.exit_codes.size(); ++r) EXPECT_EQ(res.exit_codes[r], 0) << "rank " << r;
}

TEST(Reachability, InfiniBandLeadersOnDifferentSubnetsRefuseRdma) {
  run_case({{{{"FAKEVERBS_SUBNETS", "1"}}, {{"FAKEVERBS_SUBNETS", "2"}}},
            {"node 1's leader mlx5_0 is on subnet fe80:0:0:2 and ours (mlx5_0) on fe80:0:0:1",
             "node 0's leader mlx5_0 is on subnet fe80:0:0:1 and ours (mlx5_0) on fe80:0:0:2"}});
}

TEST(Reachability, InfiniBandLeadersOnOneSubnetUseRdma) {
  run_case({{{{"FAKEVERBS_SUBNETS", "5"}}, {{"FAKEVERBS_SUBNETS", "5"}}}, {"", ""}});
}

TEST(Reachability, RoceLeadersWithNoCommonSubnetRefuseRdma) {
  run_case({{{{"FAKEVERBS_LINK", "eth"}, {"FAKEVERBS_SUBNETS", "1"}},
             {{"FAKEVERBS_LINK", "eth"}, {"FAKEVERBS_SUBNETS", "2"}}},
            {"is on subnet 172.16.2.0/24 and ours (mlx5_0) on 172.16.1.0/24: no common subnet",
             "is on subnet 172.16.1.0/24 and ours (mlx5_0) on 172.16.2.0/24: no common subnet"}});
}

TEST(Reachability, RoceLeadersOnOneSubnetUseRdma) {
  run_case({{{{"FAKEVERBS_LINK", "eth"}, {"FAKEVERBS_SUBNETS", "3"}, {"FAKEVERBS_NODE", "1"}},
             {{"FAKEVERBS_LINK", "eth"}, {"FAKEVERBS_SUBNETS", "3"}, {"FAKEVERBS_NODE", "2"}}},
            {"", ""}});
}

TEST(Reachability, RailsListedInOtherOrdersMeetOnOneSubnet) {
  // Two HCAs per node on subnets 1 and 2, listed in the other order on node
  // 1: by list order both leaders would take mlx5_0, on different subnets;
  // both prefer subnet 1, on mlx5_0 here and mlx5_1 there.
  run_case({{{{"FAKEVERBS_DEVICES", "2"}, {"FAKEVERBS_SUBNETS", "1,2"}},
             {{"FAKEVERBS_DEVICES", "2"}, {"FAKEVERBS_SUBNETS", "2,1"}}},
            {"", ""},
            {"mlx5_0", "mlx5_1"}});
}

TEST(Reachability, RailsWithNoSubnetInCommonAreNeverPaired) {
  run_case({{{{"FAKEVERBS_DEVICES", "2"}, {"FAKEVERBS_SUBNETS", "1,2"}},
             {{"FAKEVERBS_DEVICES", "2"}, {"FAKEVERBS_SUBNETS", "3,4"}}},
            {"no common subnet", "no common subnet"}});
}

TEST(CardFormat, NodesOfDifferentBuildsRefuseRdmaWithBothNamed) {
  const std::string ours = std::to_string(kCardFormat);
  static const std::string want0 = "set-up card of node 1 has format 99, ours " + ours;
  static const std::string want1 = "set-up card of node 0 has format " + ours + ", ours 99";
  run_case({{{}, {}}, {want0.c_str(), want1.c_str()}, {}, {0, 99}});
}

}  // namespace
}  // namespace mlxa2a::mlx5
