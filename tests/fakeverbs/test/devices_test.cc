// Devices, ports, GIDs, mlx5dv, and the stock ibverbs-utils clients.
#include <dlfcn.h>
#include <infiniband/mlx5dv.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "harness.h"

using namespace fvtest;

namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

}  // namespace

TEST(Devices, RunningAgainstTheFake) {
  run_one([](Channel&) {
    // Every other test is meaningless if the real libibverbs got loaded.
    Dl_info info{};
    ASSERT_NE(dladdr(reinterpret_cast<void*>(&ibv_get_device_list), &info), 0);
    EXPECT_NE(std::string(info.dli_fname).find("fakeverbs/lib/libibverbs.so.1"), std::string::npos)
        << "loaded " << info.dli_fname
        << ", not the fake: run with LD_LIBRARY_PATH=<build>/tests/fakeverbs/lib";
  });
}

TEST(Devices, ConfigurableListAndPorts) {
  run_one(
      [](Channel&) {
        int n = 0;
        ibv_device** list = ibv_get_device_list(&n);
        ASSERT_EQ(n, 3);
        EXPECT_STREQ(ibv_get_device_name(list[0]), "mlx5_0");
        EXPECT_STREQ(ibv_get_device_name(list[2]), "mlx5_2");
        EXPECT_EQ(list[3], nullptr);
        for (int i = 0; i < n; ++i) {
          ibv_context* c = ibv_open_device(list[i]);
          ASSERT_NE(c, nullptr);
          ibv_device_attr da{};
          ASSERT_EQ(ibv_query_device(c, &da), 0);
          EXPECT_EQ(da.vendor_id, 0x02c9u);
          EXPECT_EQ(da.vendor_part_id, 4123u);
          EXPECT_EQ(da.max_qp_wr, 32768);
          EXPECT_EQ(da.max_sge, 30);
          EXPECT_EQ(da.atomic_cap, IBV_ATOMIC_HCA);
          ibv_device_attr_ex dx{};
          ASSERT_EQ(ibv_query_device_ex(c, nullptr, &dx), 0);
          EXPECT_EQ(dx.orig_attr.max_cqe, da.max_cqe);
          ibv_port_attr pa{};
          ASSERT_EQ(ibv_query_port(c, 1, &pa), 0);
          EXPECT_EQ(ibv_query_port(c, 2, &pa), EINVAL);
          ASSERT_EQ(ibv_query_port(c, 1, &pa), 0);
          ibv_gid gid{};
          ASSERT_EQ(ibv_query_gid(c, 1, 0, &gid), 0);
          if (i == 1) {  // eth
            EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_ETHERNET);
            EXPECT_EQ(pa.lid, 0);
            EXPECT_EQ(gid.raw[10], 0xff);
            EXPECT_EQ(gid.raw[12], 10);
            EXPECT_EQ(gid.raw[13], 5);  // FAKEVERBS_NODE=5
            ibv_gid_entry ge{};
            ASSERT_EQ(ibv_query_gid_ex(c, 1, 0, &ge, 0), 0);
            EXPECT_EQ(ge.gid_type, IBV_GID_TYPE_ROCE_V2);
          } else {
            EXPECT_EQ(pa.link_layer, IBV_LINK_LAYER_INFINIBAND);
            EXPECT_EQ(pa.lid, 1 + 5 * 16 + i);
            EXPECT_EQ(gid.raw[0], 0xfe);
          }
          EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
          __be16 pkey = 0;
          EXPECT_EQ(ibv_query_pkey(c, 1, 0, &pkey), 0);
          EXPECT_EQ(pkey, 0xffff);
          EXPECT_TRUE(mlx5dv_is_supported(list[i]));
          mlx5dv_context mc{};
          EXPECT_EQ(mlx5dv_query_device(c, &mc), 0);
          EXPECT_EQ(mc.version, 1);
          EXPECT_TRUE(mc.flags & MLX5DV_CONTEXT_FLAGS_CQE_V1);
          EXPECT_EQ(ibv_close_device(c), 0);
        }
        ibv_free_device_list(list);
      },
      {"FAKEVERBS_DEVICES=3", "FAKEVERBS_LINK=ib,eth,ib", "FAKEVERBS_NODE=5"});
}

TEST(Devices, PortDownRefusesTraffic) {
  run_one(
      [](Channel&) {
        EndpointOptions o;
        o.timeout = 8;  // ~1 ms
        o.retry_cnt = 1;
        Endpoint e(o);
        ibv_port_attr pa{};
        ibv_query_port(e.ctx, 1, &pa);
        EXPECT_EQ(pa.state, IBV_PORT_DOWN);
        e.connect_self();
        ASSERT_EQ(e.post_write(1, e.address(), 0, 8, true, 64), 0);
        auto wc = e.poll(1);
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR) << wc_name(wc[0].status);
      },
      {"FAKEVERBS_PORT_STATE=down"});
}

// FAKEVERBS_SUBNETS: each device's IB subnet prefix; a LID names a port of
// the sender's subnet only, so two ports on different subnets never reach
// each other (IB routes between subnets by GRH through routers, not by LID).
TEST(Devices, SubnetsSetTheGidPrefixAndLidsStayInTheirSubnet) {
  run_one(
      [](Channel&) {
        EndpointOptions o;
        o.timeout = 8;  // ~1 ms
        o.retry_cnt = 1;
        Endpoint a(o);
        o.device = 1;
        Endpoint b(o), c(o);
        ibv_gid g{};
        ASSERT_EQ(ibv_query_gid(a.ctx, 1, 0, &g), 0);
        EXPECT_EQ(g.raw[0], 0xfe);
        EXPECT_EQ(g.raw[7], 1);
        ASSERT_EQ(ibv_query_gid(b.ctx, 1, 0, &g), 0);
        EXPECT_EQ(g.raw[7], 2);
        a.connect(b.address());
        b.connect(a.address());
        ASSERT_EQ(a.post_write(1, b.address(), 0, 8, true, 64), 0);
        auto wc = a.poll(1);
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR) << wc_name(wc[0].status);
        c.connect_self();  // within one subnet all is as before
        ASSERT_EQ(c.post_write(2, c.address(), 0, 8, true, 64), 0);
        wc = c.poll(1);
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
      },
      {"FAKEVERBS_DEVICES=2", "FAKEVERBS_SUBNETS=1,2"});
}

TEST(StockTools, IbvDevicesListsFakeDevices) {
  const char* tool = getenv("FV_IBV_DEVICES");
  if (!tool || !*tool) GTEST_SKIP() << "ibv_devices (ibverbs-utils) not installed";
  std::string out = run(std::string("FAKEVERBS_DEVICES=2 ") + tool + " 2>&1");
  EXPECT_NE(out.find("mlx5_0"), std::string::npos) << out;
  EXPECT_NE(out.find("mlx5_1"), std::string::npos) << out;
  EXPECT_NE(out.find("0002c90300000001"), std::string::npos) << out;
}

TEST(StockTools, IbvDevinfoListsDevicesAndPorts) {
  const char* tool = getenv("FV_IBV_DEVINFO");
  if (!tool || !*tool) GTEST_SKIP() << "ibv_devinfo (ibverbs-utils) not installed";
  std::string out =
      run(std::string("FAKEVERBS_DEVICES=2 FAKEVERBS_LINK=ib,eth ") + tool + " -v 2>&1");
  EXPECT_NE(out.find("hca_id:\tmlx5_0"), std::string::npos) << out;
  EXPECT_NE(out.find("hca_id:\tmlx5_1"), std::string::npos) << out;
  EXPECT_NE(out.find("vendor_part_id:\t\t\t4123"), std::string::npos) << out;
  EXPECT_NE(out.find("PORT_ACTIVE"), std::string::npos) << out;
  EXPECT_NE(out.find("link_layer:\t\tInfiniBand"), std::string::npos) << out;
  EXPECT_NE(out.find("link_layer:\t\tEthernet"), std::string::npos) << out;
  EXPECT_NE(out.find("port_lid:\t\t1"), std::string::npos) << out;
  EXPECT_NE(out.find("::ffff:10.0.1.1"), std::string::npos) << out;  // RoCE v2 GID
  std::string down = run(std::string("FAKEVERBS_PORT_STATE=down ") + tool + " 2>&1");
  EXPECT_NE(down.find("PORT_DOWN"), std::string::npos) << down;
  std::string one = run(std::string(tool) + " -d mlx5_0 2>&1");
  EXPECT_NE(one.find("mlx5_0"), std::string::npos) << one;
}

TEST(StockTools, IbvRcPingpongRunsUnmodified) {
  const char* tool = getenv("FV_IBV_RC_PINGPONG");
  if (!tool || !*tool) GTEST_SKIP() << "ibv_rc_pingpong (ibverbs-utils) not installed";
  std::string port = std::to_string(20000 + getpid() % 20000);
  std::string base = std::string("timeout 20 ") + tool + " -d mlx5_0 -g 0 -n 20 -p " + port;
  std::string server_out = "/tmp/fv-pingpong-" + port;
  if (system((base + " > " + server_out + " 2>&1 &").c_str()) != 0) FAIL();
  std::string client;
  for (int i = 0; i < 50; ++i) {  // the server needs a moment to listen
    usleep(100000);
    client = run(base + " localhost 2>&1");
    if (client.find("iters in") != std::string::npos) break;
  }
  EXPECT_NE(client.find("20 iters in"), std::string::npos) << client;
  usleep(200000);
  std::string server = run("cat " + server_out + "; rm -f " + server_out);
  EXPECT_NE(server.find("20 iters in"), std::string::npos) << server;
}

TEST(Devices, LimitsFromEnvironmentAreReportedAndEnforced) {
  run_one(
      [](Channel&) {
        EndpointOptions o;
        o.max_send_wr = 64;
        o.max_recv_wr = 64;
        o.max_send_sge = 2;
        o.max_recv_sge = 2;
        o.max_inline = 0;
        Endpoint e(o);
        ibv_device_attr da{};
        ASSERT_EQ(ibv_query_device(e.ctx, &da), 0);
        EXPECT_EQ(da.max_qp_wr, 64);
        EXPECT_EQ(da.max_sge, 2);
        ibv_qp_init_attr ia{};
        ia.send_cq = ia.recv_cq = e.cq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = 65;
        ia.cap.max_send_sge = 1;
        EXPECT_EQ(ibv_create_qp(e.pd, &ia), nullptr);
        ia.cap.max_send_wr = 8;
        ia.cap.max_inline_data = 1;
        EXPECT_EQ(ibv_create_qp(e.pd, &ia), nullptr);
        ia.cap.max_inline_data = 0;
        ia.cap.max_send_sge = 3;
        EXPECT_EQ(ibv_create_qp(e.pd, &ia), nullptr);
      },
      {"FAKEVERBS_MAX_QP_WR=64", "FAKEVERBS_MAX_SGE=2", "FAKEVERBS_MAX_INLINE=0",
       "FAKEVERBS_QUIET=1"});
}

TEST(StockTools, VersionNodesMatchInstalledRdmaCore) {
  // Binaries linked against this machine's rdma-core need every version node
  // it defines; gen_abi.py copies them at build time.
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&ibv_get_device_list), &info), 0);
  std::string fake_dir = info.dli_fname;
  fake_dir = fake_dir.substr(0, fake_dir.rfind('/'));
  const char* nodes =
      " | sed -n '/Version definition/,/Version needs/p' | grep -o 'Name: [A-Z0-9_.]*' | sort";
  // Where this architecture's rdma-core is (meson passes pkg-config's libdir).
  const char* libdir = getenv("FV_RDMA_LIBDIR");
  ASSERT_NE(libdir, nullptr) << "FV_RDMA_LIBDIR not set by meson";
  for (std::string lib : {"libibverbs.so.1", "libmlx5.so.1"}) {
    std::string real = run("readelf -V " + std::string(libdir) + "/" + lib + nodes);
    // FAKEVERBS_PRIVATE holds the fake's own test hooks (fakeverbs_stale_*).
    std::string fake = run("readelf -V " + fake_dir + "/" + lib + nodes +
                           " | grep -v 'Name: FAKEVERBS_PRIVATE'");
    ASSERT_FALSE(real.empty()) << "readelf failed";
    EXPECT_NE(real.find("_1.0\n"), std::string::npos) << real;  // IBVERBS_1.0 / MLX5_1.0
    EXPECT_EQ(real, fake) << lib;
  }
}
