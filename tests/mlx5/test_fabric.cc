// The fabric as a site configured it (issue 27, item 3), without MPI: the
// QoS and partition every queue pair carries (MLXA2A_NET_TRAFFIC_CLASS,
// _SL, _PKEY through NetOptions), read back from fakeverbs with
// ibv_query_qp, and P_Keys that are not in the port's table refused. Each
// case runs in a forked process: fakeverbs reads its FAKEVERBS_* description
// once per process, so this binary's parent process never loads verbs
// (its own meson test, mlx5-fabric).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/hier/hier_alltoall.h"
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/gid_choice.h"
#include "core/mlx5/hca_choice.h"
#include "core/mlx5/link_layer.h"
#include "core/mlx5/qos.h"
#include "core/mlx5/resources.h"
#include "core/mlx5/verbs.h"
#include "tests/mlx5/rdma_fixture.h"
#include "tests/shm/fork_team.h"
#include "tests/shm/pattern.h"

namespace mlxa2a::mlx5 {
namespace {

using Env = std::vector<std::pair<const char*, const char*>>;

// Runs fn in one forked process with the given fakeverbs environment.
void in_child(const std::function<int()>& fn, const Env& env) {
  const auto res = shm::test::run_forked_nodes(
      {0},
      [&](shm::test::ForkBootstrap&, int) {
        for (const auto& [k, v] : env) setenv(k, v, 1);
        return fn();
      },
      30);
  EXPECT_FALSE(res.hung);
  ASSERT_EQ(res.exit_codes.size(), 1u);
  EXPECT_EQ(res.exit_codes[0], 0);
}

// ibv_query_qp is not in the engine's table: found in the loaded library.
bool query_qp(ibv_qp* qp, ibv_qp_attr* a) {
  void* h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (!h) return false;
  using Fn = int (*)(ibv_qp*, ibv_qp_attr*, int, ibv_qp_init_attr*);
  auto fn = reinterpret_cast<Fn>(dlsym(h, "ibv_query_qp"));
  ibv_qp_init_attr init{};
  const bool ok = fn && fn(qp, a, IBV_QP_PKEY_INDEX | IBV_QP_AV, &init) == 0;
  dlclose(h);
  return ok;
}

// Two QPs of this process connected to each other (loopback through the
// port), each read back: what the HCA was told.
int check_qps(const NetOptions& opt, int want_pkey_index, int want_sl, int want_tc) {
  const Verbs* v = load_verbs();
  FT_CHECK(v != nullptr);
  std::shared_ptr<Device> dev;
  std::string why;
  FT_CHECK_STATUS(Device::open(*v, opt, 256, &dev, &why), Status::ok);
  FT_CHECK(dev->qos().pkey_index == want_pkey_index);
  std::unique_ptr<QueuePair> a, b;
  FT_CHECK_STATUS(QueuePair::create(dev, {8, 8, 0, 1}, &a), Status::ok);
  FT_CHECK_STATUS(QueuePair::create(dev, {8, 8, 0, 1}, &b), Status::ok);
  FT_CHECK_STATUS(a->connect(dev->address(), b->qpn(), 7, 9, opt), Status::ok);
  FT_CHECK_STATUS(b->connect(dev->address(), a->qpn(), 9, 7, opt), Status::ok);
  for (QueuePair* q : {a.get(), b.get()}) {
    ibv_qp_attr attr{};
    FT_CHECK(query_qp(q->get(), &attr));
    FT_CHECK(attr.pkey_index == want_pkey_index);
    FT_CHECK(attr.ah_attr.sl == want_sl);
    if (dev->address().roce) FT_CHECK(attr.ah_attr.grh.traffic_class == want_tc);
  }
  return 0;
}

// Device::open refuses the port, naming the switch and `what`.
int refused(const NetOptions& opt, const char* what) {
  const Verbs* v = load_verbs();
  FT_CHECK(v != nullptr);
  std::shared_ptr<Device> dev;
  std::string why;
  FT_CHECK_STATUS(Device::open(*v, opt, 256, &dev, &why), Status::unavailable);
  if (why.find(what) == std::string::npos) std::fprintf(stderr, "why: %s\n", why.c_str());
  FT_CHECK(why.find(what) != std::string::npos);
  return 0;
}

TEST(FabricQos, PkeyMatchesThePartitionWithFullMembership) {
  const std::uint16_t table[] = {0xffff, 0x0005, 0x0000, 0x8001, 0x8005};
  bool limited = false;
  EXPECT_EQ(match_pkey(table, 5, -1, &limited), 0);
  EXPECT_EQ(match_pkey(table, 5, 0x8001, &limited), 3);
  EXPECT_EQ(match_pkey(table, 5, 0x0001, &limited), 3);  // by partition, either bit 15
  EXPECT_EQ(match_pkey(table, 5, 0x8005, &limited), 4);  // the full entry, not index 1
  EXPECT_EQ(match_pkey(table, 3, 0x8005, &limited), -1);
  EXPECT_TRUE(limited);
  EXPECT_EQ(match_pkey(table, 5, 0x7777, &limited), -1);
  EXPECT_FALSE(limited);
  const std::uint16_t empty[] = {0x0000, 0x8000};
  EXPECT_EQ(match_pkey(empty, 2, -1, &limited), -1);
}

TEST(FabricQos, InfiniBandQueuePairsUseTheChosenPkeyAndSl) {
  in_child(
      [] {
        NetOptions opt = test::test_options();
        opt.pkey = 0x8001;
        opt.service_level = 5;
        return check_qps(opt, 2, 5, 0);
      },
      Env{{"FAKEVERBS_LINK", "ib"}, {"FAKEVERBS_PKEYS", "0xffff,0x0001,0x8001"}});
  in_child([] { return check_qps(test::test_options(), 0, 0, 0); }, Env{{"FAKEVERBS_LINK", "ib"}});
}

TEST(FabricQos, RoceQueuePairsCarryTheTrafficClass) {
  // UCX's default on RoCE: 106 (DSCP 26, ECN capable); the switch overrides.
  in_child([] { return check_qps(test::test_options(), 0, 0, 106); }, Env{{"FAKEVERBS_LINK", "eth"}});
  in_child(
      [] {
        NetOptions opt = test::test_options();
        opt.traffic_class = 96;
        opt.service_level = 3;
        return check_qps(opt, 0, 3, 96);
      },
      Env{{"FAKEVERBS_LINK", "eth"}});
}

// RoCE: every RC pair carries its own flow label (both ends alike, never 0),
// read back from the QPs' address vectors; InfiniBand sets none.
int check_flow_labels() {
  const Verbs* v = load_verbs();
  FT_CHECK(v != nullptr);
  std::shared_ptr<Device> dev;
  std::string why;
  const NetOptions opt = test::test_options();
  FT_CHECK_STATUS(Device::open(*v, opt, 256, &dev, &why), Status::ok);
  std::vector<std::unique_ptr<QueuePair>> qps(8);
  for (auto& q : qps) FT_CHECK_STATUS(QueuePair::create(dev, {8, 8, 0, 1}, &q), Status::ok);
  std::vector<std::uint32_t> labels;
  for (std::size_t i = 0; i < qps.size(); i += 2) {
    QueuePair& a = *qps[i];
    QueuePair& b = *qps[i + 1];
    FT_CHECK_STATUS(a.connect(dev->address(), b.qpn(), 7, 9, opt), Status::ok);
    FT_CHECK_STATUS(b.connect(dev->address(), a.qpn(), 9, 7, opt), Status::ok);
    ibv_qp_attr aa{}, ba{};
    FT_CHECK(query_qp(a.get(), &aa) && query_qp(b.get(), &ba));
    FT_CHECK(aa.ah_attr.grh.flow_label == ba.ah_attr.grh.flow_label);
    if (!dev->address().roce) {
      FT_CHECK(aa.ah_attr.grh.flow_label == 0);
      continue;
    }
    FT_CHECK(aa.ah_attr.grh.flow_label != 0 && aa.ah_attr.grh.flow_label <= 0xfffff);
    for (std::uint32_t l : labels) FT_CHECK(l != aa.ah_attr.grh.flow_label);
    labels.push_back(aa.ah_attr.grh.flow_label);
  }
  return 0;
}

TEST(FabricQos, RocePairsHaveDistinctFlowLabels) {
  in_child(check_flow_labels, Env{{"FAKEVERBS_LINK", "eth"}});
  in_child(check_flow_labels, Env{{"FAKEVERBS_LINK", "ib"}});
  EXPECT_EQ(pair_flow_label(5, 9), pair_flow_label(9, 5));
  EXPECT_NE(pair_flow_label(5, 9), pair_flow_label(5, 10));
}

TEST(FabricQos, PkeyNotInTheTableOrLimitedIsRefused) {
  in_child(
      [] {
        NetOptions opt = test::test_options();
        opt.pkey = 0x7777;
        return refused(opt, "MLXA2A_NET_PKEY=0x7777 is not in the P_Key table");
      },
      Env{{"FAKEVERBS_LINK", "ib"}, {"FAKEVERBS_PKEYS", "0xffff,0x8001"}});
  in_child(
      [] {
        NetOptions opt = test::test_options();
        opt.pkey = 0x8005;
        return refused(opt, "only limited membership");
      },
      Env{{"FAKEVERBS_LINK", "ib"}, {"FAKEVERBS_PKEYS", "0xffff,0x0005"}});
}

// fakeverbs itself, as an HCA: INIT with an empty P_Key entry is refused.
TEST(FabricQos, FakeverbsRejectsAnEmptyPkeyEntry) {
  in_child(
      [] {
        const Verbs* v = load_verbs();
        FT_CHECK(v != nullptr);
        std::shared_ptr<Device> dev;
        std::string why;
        FT_CHECK_STATUS(Device::open(*v, test::test_options(), 256, &dev, &why), Status::ok);
        ibv_qp_init_attr init{};
        init.send_cq = init.recv_cq = dev->cq();
        init.qp_type = IBV_QPT_RC;
        init.cap = {4, 4, 1, 1, 0};
        ibv_qp* qp = v->create_qp(dev->pd(), &init);
        FT_CHECK(qp != nullptr);
        ibv_qp_attr a{};
        a.qp_state = IBV_QPS_INIT;
        a.port_num = 1;
        a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
        const int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
        a.pkey_index = 1;  // empty in the table
        FT_CHECK(v->modify_qp(qp, &a, mask) != 0);
        a.pkey_index = 2;  // 0x8001
        FT_CHECK(v->modify_qp(qp, &a, mask) == 0);
        FT_CHECK(v->destroy_qp(qp) == 0);
        return 0;
      },
      Env{{"FAKEVERBS_LINK", "ib"}, {"FAKEVERBS_PKEYS", "0xffff,0x0000,0x8001"}});
}

TEST(HcaChoice, NearestFirstThenLeadersSpreadOverEquallyNearPorts) {
  const std::vector<PortCandidate> c = {
      {"mlx5_0", 1, false, 0}, {"mlx5_1", 1, false, 1}, {"mlx5_2", 1, false, 0},
      {"mlx5_3", 1, false, 1}};
  EXPECT_EQ(choose_hca(c, {1}, 0).index, 1);  // on NUMA 1: its first HCA
  EXPECT_EQ(choose_hca(c, {1}, 1).index, 3);  // a second leader there: the other one
  EXPECT_EQ(choose_hca(c, {1}, 2).index, 1);  // a third wraps around
  EXPECT_EQ(choose_hca(c, {0}, 1).index, 2);
  EXPECT_EQ(choose_hca(c, {1}, 1).reason, "numa1-near,rail2/2");
  // The process's locality unknown: every port is as near, leaders spread.
  EXPECT_EQ(choose_hca(c, {}, 3).index, 3);
  EXPECT_EQ(choose_hca(c, {}, 3).reason, "numa1-unknown,rail4/4");
  // Nothing on our NUMA node: unknown locality beats known-remote.
  const std::vector<PortCandidate> d = {{"mlx5_0", 1, false, 0}, {"mlx5_1", 1, true, -1}};
  EXPECT_EQ(choose_hca(d, {1}, 0).index, 1);
  const std::vector<PortCandidate> e = {{"mlx5_0", 1, false, 0}};
  EXPECT_EQ(choose_hca(e, {1}, 5).index, 0);
  EXPECT_EQ(choose_hca(e, {1}, 5).reason, "numa0-remote,rail1/1");
  EXPECT_EQ(choose_hca({}, {1}, 0).index, -1);
}

// Device::open over four fake HCAs on two NUMA nodes: the process (on NUMA
// node 0 here, or of unknown locality) takes a port by locality and slot,
// MLXA2A_NET_DEVICES still wins, and the device says why.
int opens(int slot, std::vector<NetOptions::Port> devices, const char* want,
          const char* want_choice) {
  const Verbs* v = load_verbs();
  FT_CHECK(v != nullptr);
  NetOptions opt = test::test_options();
  opt.leader_slot = slot;
  opt.devices = std::move(devices);
  std::shared_ptr<Device> dev;
  std::string why;
  FT_CHECK_STATUS(Device::open(*v, opt, 256, &dev, &why), Status::ok);
  if (dev->name() != want || dev->choice() != want_choice) {
    std::fprintf(stderr, "slot %d took %s (%s)\n", slot, dev->name().c_str(),
                 dev->choice().c_str());
  }
  FT_CHECK(dev->name() == want);
  FT_CHECK(dev->choice() == want_choice);
  return 0;
}

TEST(HcaChoice, DeviceOpenTakesTheNearestHcaPerLeaderSlot) {
  // Which NUMA node this process is on: hwloc's answer, as the engine sees it.
  const std::unique_ptr<Locality> where = hwloc_locality();
  ASSERT_NE(where, nullptr);
  const std::vector<int> mine = where->my_numa();
  if (mine.size() != 1 || mine[0] != 0) GTEST_SKIP() << "needs a process bound to NUMA node 0";
  const Env env = {{"FAKEVERBS_DEVICES", "4"}, {"FAKEVERBS_NUMA", "1,0,1,0"}};
  in_child([] { return opens(0, {}, "mlx5_1", "numa0-near,rail1/2"); }, env);
  in_child([] { return opens(1, {}, "mlx5_3", "numa0-near,rail2/2"); }, env);
  in_child([] { return opens(1, {{"mlx5_2", 0}}, "mlx5_2", "MLXA2A_NET_DEVICES"); }, env);
  // Locality unknown (no FAKEVERBS_NUMA): list order, as before.
  in_child([] { return opens(0, {}, "mlx5_0", "numa?-unknown,rail1/4"); },
           Env{{"FAKEVERBS_DEVICES", "4"}});
}

// Link layer (issue 27, item 4): a leader skips ports the other nodes'
// leaders cannot reach. Two single-rank nodes, each describing its own
// fakeverbs devices: node 0 lists `link0` (a comma list per device), node 1
// `link1`. want_dev0: the device node 0's leader must take ("" when the
// set-up must be refused on both).
int link_rank(shm::test::ForkBootstrap& boot, int rank, const test::ForkGroupWiring& wiring,
              const char* link0, const char* link1, const char* want_dev0) {
  const char* link = rank == 0 ? link0 : link1;
  const std::string devices = std::to_string(1 + std::count(link, link + std::strlen(link), ','));
  setenv("FAKEVERBS_DEVICES", devices.c_str(), 1);
  setenv("FAKEVERBS_LINK", link, 1);
  // The RoCE ports on one /24 (the default table's addresses differ in the
  // third byte by device, and leaders refuse RoCE pairs with no common
  // subnet, setup_card.h). One RoCE device per process here: the table is
  // every RoCE device's.
  setenv("FAKEVERBS_GIDS", rank == 0 ? "10.9.0.1/24" : "10.9.0.2/24", 1);
  const std::vector<int> nodes = {0, 1};
  const NetOptions opt = test::test_options();
  const bool refuse = *want_dev0 == 0;
  std::unique_ptr<hier::HierAlltoall> e;
  int created = 0;
  const int rc = test::build_rdma_hier(boot, rank, nodes, {}, opt, wiring, &e,
                                       refuse ? Status::unavailable : Status::ok, &created);
  if (refuse) return rc == 42 ? 0 : 1;
  FT_CHECK(rc == 0 && created == 1);
  std::vector<unsigned char> send(2 * 64), recv(2 * 64, 0);
  shm::test::fill_send(send, rank, 2, 1, 64);
  FT_CHECK_STATUS(e->run(send.data(), recv.data(), 64), Status::ok);
  FT_CHECK(shm::test::check_recv(recv, rank, 2, 1, 64));
  std::string why;
  const EndpointPool* pool = EndpointPool::get(opt, &why);
  FT_CHECK(pool != nullptr);
  if (rank == 0) {
    if (pool->device()->name() != want_dev0) {
      std::fprintf(stderr, "took %s: %s\n", pool->device()->name().c_str(),
                   fabric_summary().c_str());
    }
    FT_CHECK(pool->device()->name() == want_dev0);
    FT_CHECK(fabric_summary().find("link-by=team") != std::string::npos);
  }
  e.reset();
  EndpointPool::shutdown();
  return 0;
}

void run_link_case(const char* link0, const char* link1, const char* want_dev0) {
  test::ForkGroupWiring wiring(2);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked_nodes(
      {0, 1},
      [&](shm::test::ForkBootstrap& boot, int rank) {
        return link_rank(boot, rank, wiring, link0, link1, want_dev0);
      },
      30);
  EXPECT_FALSE(res.hung);
  for (std::size_t r = 0; r < res.exit_codes.size(); ++r) {
    EXPECT_EQ(res.exit_codes[r], 0) << "rank " << r << " (" << link0 << " / " << link1 << ")";
  }
}

TEST(LinkLayer, TheRule) {
  const std::uint32_t both_ib[] = {kLinkAny, kLinkIb};
  EXPECT_EQ(agree_link_layer(both_ib, 2), kLinkIb);
  const std::uint32_t eth[] = {kLinkAny, kLinkEth, 0};  // 0: a leader without RDMA
  EXPECT_EQ(agree_link_layer(eth, 3), kLinkEth);
  const std::uint32_t any[] = {kLinkAny, kLinkAny};
  EXPECT_EQ(agree_link_layer(any, 2), kLinkIb);
  const std::uint32_t none[] = {kLinkIb, kLinkEth};
  EXPECT_EQ(agree_link_layer(none, 2), 0u);
}

TEST(LinkLayer, LeaderSkipsPortsTheOtherNodesCannotReach) {
  run_link_case("eth,ib", "ib", "mlx5_1");  // its first port is RoCE: skipped
  run_link_case("ib,eth", "eth", "mlx5_1");
}

TEST(LinkLayer, NoLayerInCommonIsRefusedOnEveryLeader) { run_link_case("eth", "ib", ""); }

// GID choice (issue 27, item 3): each node's RoCE port has several GIDs;
// the first IPv4-mapped one of each is on a per-node subnet the other node
// cannot route to (fakeverbs drops such packets). The leaders must agree on
// the entries of their common subnet; an IPv6-only table works too. The
// trace's summary names the index: gid=<index>.
int gid_rank(shm::test::ForkBootstrap& boot, int rank, const test::ForkGroupWiring& wiring,
             const char* gids0, const char* gids1, const char* want) {
  setenv("FAKEVERBS_LINK", "eth", 1);
  setenv("FAKEVERBS_GIDS", rank == 0 ? gids0 : gids1, 1);
  const std::vector<int> nodes = {0, 1};
  const NetOptions opt = test::test_options();
  std::unique_ptr<hier::HierAlltoall> e;
  int created = 0;
  FT_CHECK(test::build_rdma_hier(boot, rank, nodes, {}, opt, wiring, &e, Status::ok, &created) ==
           0);
  std::vector<unsigned char> send(2 * 64), recv(2 * 64, 0);
  shm::test::fill_send(send, rank, 2, 1, 64);
  FT_CHECK_STATUS(e->run(send.data(), recv.data(), 64), Status::ok);
  FT_CHECK(shm::test::check_recv(recv, rank, 2, 1, 64));
  if (fabric_summary().find(want) == std::string::npos) {
    std::fprintf(stderr, "rank %d: %s\n", rank, fabric_summary().c_str());
  }
  FT_CHECK(fabric_summary().find(want) != std::string::npos);
  e.reset();
  EndpointPool::shutdown();
  return 0;
}

void run_gid_case(const char* gids0, const char* gids1, const char* want) {
  test::ForkGroupWiring wiring(2);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked_nodes(
      {0, 1},
      [&](shm::test::ForkBootstrap& boot, int rank) {
        return gid_rank(boot, rank, wiring, gids0, gids1, want);
      },
      30);
  EXPECT_FALSE(res.hung);
  for (std::size_t r = 0; r < res.exit_codes.size(); ++r) {
    EXPECT_EQ(res.exit_codes[r], 0) << "rank " << r << " (" << gids0 << " / " << gids1 << ")";
  }
}

TEST(GidChoice, TheRule) {
  GidList l[3];
  auto v4 = [](GidList* g, std::uint8_t a, std::uint8_t b, std::uint8_t c, std::uint8_t d) {
    GidCandidate& e = g->e[g->n];
    e.raw[10] = e.raw[11] = 0xff;
    e.raw[12] = a, e.raw[13] = b, e.raw[14] = c, e.raw[15] = d;
    e.index = static_cast<std::int32_t>(g->n++);
    e.prefix = 96 + 24;
  };
  v4(&l[0], 10, 1, 0, 1), v4(&l[0], 192, 168, 7, 1);
  v4(&l[1], 10, 2, 0, 1), v4(&l[1], 192, 168, 7, 2);
  bool matched = false;
  EXPECT_EQ(choose_gid(l, 3, 0, &matched), 1);  // l[2] has none: ignored
  EXPECT_TRUE(matched);
  v4(&l[2], 172, 16, 0, 3);  // nobody shares its subnet
  EXPECT_EQ(choose_gid(l, 3, 0, &matched), 0);
  EXPECT_FALSE(matched);
}

TEST(GidChoice, LeadersTakeTheirCommonSubnetNotTheFirstEntry) {
  run_gid_case("10.1.0.1/24,192.168.7.1/24", "10.2.0.1/24,192.168.7.2/24",
               "gid=1 gid-by=subnet");
}

TEST(GidChoice, Ipv6OnlyRoce) { run_gid_case("fd00:7::1/64", "fd00:7::2/64", "gid=0 gid-by=subnet"); }

}  // namespace
}  // namespace mlxa2a::mlx5
