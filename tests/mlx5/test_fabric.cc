// The fabric as a site configured it (issue 27, item 3), without MPI: the
// QoS and partition every queue pair carries (MLXA2A_NET_TRAFFIC_CLASS,
// _SL, _PKEY through NetOptions), read back from fakeverbs with
// ibv_query_qp, and P_Keys that are not in the port's table refused. Each
// case runs in a forked process: fakeverbs reads its FAKEVERBS_* description
// once per process, so this binary's parent process never loads verbs
// (its own meson test, mlx5-fabric).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "core/mlx5/qos.h"
#include "core/mlx5/resources.h"
#include "core/mlx5/verbs.h"
#include "tests/mlx5/rdma_fixture.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::mlx5 {
namespace {

// Runs fn in one forked process with the given fakeverbs environment.
void in_child(const std::function<int()>& fn, const char* link, const char* pkeys) {
  const auto res = shm::test::run_forked_nodes(
      {0},
      [&](shm::test::ForkBootstrap&, int) {
        setenv("FAKEVERBS_LINK", link, 1);
        if (pkeys) setenv("FAKEVERBS_PKEYS", pkeys, 1);
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
      "ib", "0xffff,0x0001,0x8001");
  in_child([] { return check_qps(test::test_options(), 0, 0, 0); }, "ib", nullptr);
}

TEST(FabricQos, RoceQueuePairsCarryTheTrafficClass) {
  // UCX's default on RoCE: 106 (DSCP 26, ECN capable); the switch overrides.
  in_child([] { return check_qps(test::test_options(), 0, 0, 106); }, "eth", nullptr);
  in_child(
      [] {
        NetOptions opt = test::test_options();
        opt.traffic_class = 96;
        opt.service_level = 3;
        return check_qps(opt, 0, 3, 96);
      },
      "eth", nullptr);
}

TEST(FabricQos, PkeyNotInTheTableOrLimitedIsRefused) {
  in_child(
      [] {
        NetOptions opt = test::test_options();
        opt.pkey = 0x7777;
        return refused(opt, "MLXA2A_NET_PKEY=0x7777 is not in the P_Key table");
      },
      "ib", "0xffff,0x8001");
  in_child(
      [] {
        NetOptions opt = test::test_options();
        opt.pkey = 0x8005;
        return refused(opt, "only limited membership");
      },
      "ib", "0xffff,0x0005");
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
      "ib", "0xffff,0x0000,0x8001");
}

}  // namespace
}  // namespace mlxa2a::mlx5
