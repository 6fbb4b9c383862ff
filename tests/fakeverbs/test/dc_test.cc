// DC (dc.cc, FIDELITY.md "DC"): a DCT over an SRQ with its access key, DCIs
// posted through the ibv_qp_ex API with mlx5dv_wr_set_dc_addr, RDMA writes
// with immediate completing on the DCT's CQ; one DCI's writes arrive in
// order; a wrong key lands nothing and fails the DCI; what a driver refuses.
#include <arpa/inet.h>
#include <infiniband/mlx5dv.h>

#include <cstring>
#include <vector>

#include "harness.h"

using namespace fvtest;

namespace {

constexpr size_t kBuf = 1 << 16;

struct DcAddress {
  uint16_t lid;
  ibv_gid gid;
  uint32_t dctn[2];
  uint64_t addr;
  uint32_t rkey;
};

// One process's DC objects: device, PD, CQ, buffer, and a DCT (over an
// SRQ) or a DCI as asked. Destroyed in reverse.
struct DcSide {
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_cq* cq = nullptr;
  ibv_srq* srq = nullptr;
  std::vector<ibv_qp*> qps;
  ibv_ah* ah = nullptr;
  ibv_mr* mr = nullptr;
  std::vector<uint8_t> buf = std::vector<uint8_t>(kBuf);
  bool roce = false;

  DcSide() {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    if (!list || n < 1 || !(ctx = ibv_open_device(list[0]))) {
      ADD_FAILURE() << "no fake device";
      exit(2);
    }
    ibv_free_device_list(list);
    ibv_port_attr pa{};
    ibv_query_port(ctx, 1, &pa);
    roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
    pd = ibv_alloc_pd(ctx);
    cq = ibv_create_cq(ctx, 1024, nullptr, nullptr, 0);
    mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!pd || !cq || !mr) {
      ADD_FAILURE() << "PD/CQ/MR: " << strerror(errno);
      exit(2);
    }
  }
  ~DcSide() {
    if (ah) {
      EXPECT_EQ(ibv_destroy_ah(ah), 0);
    }
    for (ibv_qp* q : qps) EXPECT_EQ(ibv_destroy_qp(q), 0);
    if (srq) {
      EXPECT_EQ(ibv_destroy_srq(srq), 0);
    }
    ibv_dereg_mr(mr);
    ibv_destroy_cq(cq);
    ibv_dealloc_pd(pd);
    ibv_close_device(ctx);
  }

  ibv_qp* create(int dc_type, uint64_t key, uint64_t send_ops = IBV_QP_EX_WITH_RDMA_WRITE |
                                                               IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) {
    ibv_qp_init_attr_ex ia{};
    ia.qp_type = IBV_QPT_DRIVER;
    ia.send_cq = ia.recv_cq = cq;
    ia.pd = pd;
    ia.comp_mask = IBV_QP_INIT_ATTR_PD;
    mlx5dv_qp_init_attr dv{};
    dv.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC;
    dv.dc_init_attr.dc_type = mlx5dv_dc_type(dc_type);
    if (dc_type == MLX5DV_DCTYPE_DCT) {
      ia.srq = srq;
      dv.dc_init_attr.dct_access_key = key;
    } else {
      ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
      ia.send_ops_flags = send_ops;
      ia.cap.max_send_wr = 256;
      ia.cap.max_send_sge = 2;
      ia.cap.max_inline_data = 64;
    }
    return mlx5dv_create_qp(ctx, &ia, &dv);
  }

  // A DCT over the SRQ (made at the first), in RTR with `key`.
  uint32_t dct(uint64_t key) {
    if (!srq) {
      ibv_srq_init_attr sa{};
      sa.attr.max_wr = 512;
      sa.attr.max_sge = 1;
      srq = ibv_create_srq(pd, &sa);
      EXPECT_NE(srq, nullptr);
    }
    ibv_qp* q = create(MLX5DV_DCTYPE_DCT, key);
    EXPECT_NE(q, nullptr) << strerror(errno);
    if (!q) exit(2);
    qps.push_back(q);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    EXPECT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                       IBV_QP_ACCESS_FLAGS), 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = roce ? IBV_MTU_1024 : IBV_MTU_4096;
    a.min_rnr_timer = 12;
    a.ah_attr.port_num = 1;
    a.ah_attr.is_global = roce;
    EXPECT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER | IBV_QP_AV |
                                       IBV_QP_PATH_MTU), 0);
    return q->qp_num;
  }

  void post_srq(int n, uint64_t first_id) {
    for (int i = 0; i < n; ++i) {
      ibv_recv_wr wr{}, *bad = nullptr;
      wr.wr_id = first_id + uint64_t(i);
      ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
    }
  }

  // A DCI in RTS; retry_cnt and timeout bound a lost write's wait.
  ibv_qp* dci(uint8_t timeout = 14, uint8_t retry_cnt = 3) {
    ibv_qp* q = create(MLX5DV_DCTYPE_DCI, 0);
    EXPECT_NE(q, nullptr) << strerror(errno);
    if (!q) exit(2);
    qps.push_back(q);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    EXPECT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), 0);
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = roce ? IBV_MTU_1024 : IBV_MTU_4096;
    EXPECT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_PATH_MTU), 0);
    a = {};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = timeout;
    a.retry_cnt = retry_cnt;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    EXPECT_EQ(ibv_modify_qp(q, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                       IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                       IBV_QP_MAX_QP_RD_ATOMIC), 0);
    return q;
  }

  DcAddress address(uint32_t dct0, uint32_t dct1) const {
    DcAddress a{};
    ibv_port_attr pa{};
    ibv_query_port(ctx, 1, &pa);
    a.lid = pa.lid;
    ibv_query_gid(ctx, 1, 0, &a.gid);
    a.dctn[0] = dct0;
    a.dctn[1] = dct1;
    a.addr = reinterpret_cast<uintptr_t>(buf.data());
    a.rkey = mr->rkey;
    return a;
  }

  void address_peer(const DcAddress& p) {
    ibv_ah_attr at{};
    at.port_num = 1;
    at.dlid = p.lid;
    if (roce) {
      at.is_global = 1;
      at.grh.dgid = p.gid;
      at.grh.hop_limit = 1;
    }
    ah = ibv_create_ah(pd, &at);
    ASSERT_NE(ah, nullptr) << strerror(errno);
  }

  // One RDMA write with immediate of buf[off, off+len) to the peer's same
  // place through DCT `dctn` with `key`.
  int write_imm(ibv_qp* q, const DcAddress& p, uint32_t dctn, uint64_t key, uint64_t id,
                size_t off, uint32_t len, uint32_t imm) {
    ibv_qp_ex* x = ibv_qp_to_qp_ex(q);
    mlx5dv_qp_ex* d = mlx5dv_qp_ex_from_ibv_qp_ex(x);
    ibv_wr_start(x);
    x->wr_id = id;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write_imm(x, p.rkey, p.addr + off, htonl(imm));
    ibv_wr_set_sge(x, mr->lkey, reinterpret_cast<uintptr_t>(buf.data() + off), len);
    mlx5dv_wr_set_dc_addr(d, ah, dctn, key);
    return ibv_wr_complete(x);
  }

  std::vector<ibv_wc> poll(size_t n, int timeout_ms = 5000) {
    std::vector<ibv_wc> out;
    for (int waited = 0; out.size() < n && waited < timeout_ms * 10; ++waited) {
      ibv_wc wc[16];
      const int got = ibv_poll_cq(cq, 16, wc);
      out.insert(out.end(), wc, wc + (got > 0 ? got : 0));
      if (got <= 0) usleep(100);
    }
    return out;
  }
};

constexpr uint64_t kKey = 0x1234abcd5678ull;

class Dc : public ::testing::TestWithParam<const char*> {
 protected:
  std::vector<std::string> env() const { return {std::string("FAKEVERBS_LINK=") + GetParam()}; }
};

// One DCI writes n messages with immediate, alternating between the
// receiver's two DCTs (one SRQ, one CQ); the receiver checks each completion
// names its DCT, carries its immediate in posting order, consumed the SRQ's
// receives in order, and that every byte landed.
void stream(int n, const std::vector<std::string>& env) {
  auto sender = [n](Channel& ch) {
    DcSide s;
    ibv_qp* q = s.dci();
    const DcAddress peer = ch.get<DcAddress>();
    s.address_peer(peer);
    for (int i = 0; i < n; ++i) {
      const size_t off = size_t(i) * 256;
      memset(s.buf.data() + off, 'a' + i % 26, 256);
      ASSERT_EQ(s.write_imm(q, peer, peer.dctn[i % 2], kKey, uint64_t(i), off, 256, 1000u + i), 0);
    }
    const auto wc = s.poll(size_t(n));
    ASSERT_EQ(wc.size(), size_t(n));
    for (int i = 0; i < n; ++i) {
      EXPECT_EQ(wc[size_t(i)].status, IBV_WC_SUCCESS) << wc_name(wc[size_t(i)].status);
      EXPECT_EQ(wc[size_t(i)].wr_id, uint64_t(i));  // a DCI completes in order
    }
    ch.put<int>(1);
  };
  auto receiver = [n](Channel& ch) {
    DcSide s;
    const uint32_t d0 = s.dct(kKey), d1 = s.dct(kKey);
    s.post_srq(n, 500);
    ch.put(s.address(d0, d1));
    const auto wc = s.poll(size_t(n));
    ASSERT_EQ(wc.size(), size_t(n));
    for (int i = 0; i < n; ++i) {
      const ibv_wc& w = wc[size_t(i)];
      EXPECT_EQ(w.status, IBV_WC_SUCCESS) << wc_name(w.status);
      EXPECT_EQ(w.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
      EXPECT_EQ(ntohl(w.imm_data), 1000u + uint32_t(i)) << "arrival " << i << " out of order";
      EXPECT_EQ(w.wr_id, 500u + uint64_t(i));  // SRQ receives consumed in order
      EXPECT_EQ(w.qp_num, i % 2 ? d1 : d0);
      EXPECT_EQ(w.byte_len, 256u);
      // Data before its completion: every byte of this write is in.
      const uint8_t want = uint8_t('a' + i % 26);
      for (size_t b = 0; b < 256; ++b) {
        if (s.buf[size_t(i) * 256 + b] != want) {
          ADD_FAILURE() << "write " << i << " byte " << b << " missing at its completion";
          break;
        }
      }
    }
    EXPECT_EQ(ch.get<int>(), 1);
  };
  run_pair(sender, receiver, env, env);
}

TEST_P(Dc, WriteWithImmediateCompletesOnTheDctsSrqAndCq) { stream(2, env()); }

TEST_P(Dc, OneDciStreamArrivesInOrder) { stream(200, env()); }

// A write whose key is not the DCT's lands nothing and completes nothing at
// the receiver; the DCI retries, fails (transport retries exhausted) and goes
// to the error state. The DCT is unharmed: a new DCI with the key gets in.
TEST_P(Dc, WrongKeyLandsNothingAndFailsTheDci) {
  auto sender = [](Channel& ch) {
    DcSide s;
    ibv_qp* bad = s.dci(8, 1);  // ~1 ms x 2 tries
    const DcAddress peer = ch.get<DcAddress>();
    s.address_peer(peer);
    memset(s.buf.data(), 'x', 64);
    ASSERT_EQ(s.write_imm(bad, peer, peer.dctn[0], kKey + 1, 7, 0, 64, 1), 0);
    auto wc = s.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR) << wc_name(wc[0].status);
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    ASSERT_EQ(ibv_query_qp(bad, &a, IBV_QP_STATE, &ia), 0);
    EXPECT_EQ(a.qp_state, IBV_QPS_ERR);
    ch.put<int>(1);  // the receiver checks nothing landed
    EXPECT_EQ(ch.get<int>(), 2);
    ibv_qp* good = s.dci();
    memset(s.buf.data(), 'y', 64);
    ASSERT_EQ(s.write_imm(good, peer, peer.dctn[0], kKey, 8, 0, 64, 2), 0);
    wc = s.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
    ch.put<int>(3);
  };
  auto receiver = [](Channel& ch) {
    DcSide s;
    const uint32_t d = s.dct(kKey);
    s.post_srq(4, 0);
    ch.put(s.address(d, d));
    EXPECT_EQ(ch.get<int>(), 1);
    EXPECT_TRUE(s.poll(1, 200).empty());
    EXPECT_EQ(s.buf[0], 0);
    ch.put<int>(2);
    EXPECT_EQ(ch.get<int>(), 3);
    const auto wc = s.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(ntohl(wc[0].imm_data), 2u);
    EXPECT_EQ(s.buf[0], 'y');
  };
  run_pair(sender, receiver, env(), env());
}

// A write the DCT's MR refuses (a bad rkey) fails its DCI with
// IBV_WC_REM_ACCESS_ERR, lands nothing, and leaves the DCT serving others.
TEST_P(Dc, BadRkeyFailsTheDciNotTheDct) {
  auto sender = [](Channel& ch) {
    DcSide s;
    ibv_qp* bad = s.dci();
    DcAddress peer = ch.get<DcAddress>();
    s.address_peer(peer);
    memset(s.buf.data(), 'z', 64);
    DcAddress wrong = peer;
    wrong.rkey ^= 0x100;
    ASSERT_EQ(s.write_imm(bad, wrong, peer.dctn[0], kKey, 1, 0, 64, 1), 0);
    auto wc = s.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR) << wc_name(wc[0].status);
    ibv_qp* good = s.dci();
    ASSERT_EQ(s.write_imm(good, peer, peer.dctn[0], kKey, 2, 0, 64, 2), 0);
    wc = s.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
    ch.put<int>(1);
  };
  auto receiver = [](Channel& ch) {
    DcSide s;
    const uint32_t d = s.dct(kKey);
    s.post_srq(4, 0);
    ch.put(s.address(d, d));
    EXPECT_EQ(ch.get<int>(), 1);
    const auto wc = s.poll(1);
    ASSERT_EQ(wc.size(), 1u);  // only the good write's
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
    EXPECT_EQ(ntohl(wc[0].imm_data), 2u);
    EXPECT_TRUE(s.poll(1, 100).empty());
    ibv_qp_attr a{};
    ibv_qp_init_attr ia{};
    ASSERT_EQ(ibv_query_qp(s.qps[0], &a, IBV_QP_STATE, &ia), 0);
    EXPECT_EQ(a.qp_state, IBV_QPS_RTR);
  };
  run_pair(sender, receiver, env(), env());
}

// FAKEVERBS_FAULT fail_post counts a DCI's ibv_wr_complete with the
// ibv_post_send calls: the first fails with ENOMEM and posts nothing (no
// completion, nothing lands), the DCI stays in RTS and the next one goes.
TEST_P(Dc, FailPostFailsADciPostAndPostsNothing) {
  auto sender = [](Channel& ch) {
    DcSide s;
    ibv_qp* q = s.dci();
    const DcAddress peer = ch.get<DcAddress>();
    s.address_peer(peer);
    memset(s.buf.data(), 'p', 64);
    EXPECT_EQ(s.write_imm(q, peer, peer.dctn[0], kKey, 1, 0, 64, 1), ENOMEM);
    EXPECT_TRUE(s.poll(1, 100).empty());
    ASSERT_EQ(s.write_imm(q, peer, peer.dctn[0], kKey, 2, 0, 64, 2), 0);
    const auto wc = s.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
    EXPECT_EQ(wc[0].wr_id, 2u);
    ch.put<int>(1);
  };
  auto receiver = [](Channel& ch) {
    DcSide s;
    const uint32_t d = s.dct(kKey);
    s.post_srq(4, 0);
    ch.put(s.address(d, d));
    EXPECT_EQ(ch.get<int>(), 1);
    const auto wc = s.poll(1);
    ASSERT_EQ(wc.size(), 1u);  // only the second write's
    EXPECT_EQ(ntohl(wc[0].imm_data), 2u);
    EXPECT_TRUE(s.poll(1, 100).empty());
  };
  std::vector<std::string> faulty = env();
  faulty.push_back("FAKEVERBS_FAULT=fail_post=1");
  run_pair(sender, receiver, faulty, env());
}

INSTANTIATE_TEST_SUITE_P(Fake, Dc, ::testing::Values("ib", "eth"));

// What the driver refuses, locally.
TEST(DcChecks, RefusesWhatADriverRefuses) {
  run_one([](Channel&) {
    DcSide s;
    // A DCT needs an SRQ; a DCI needs send_ops_flags.
    EXPECT_EQ(s.create(MLX5DV_DCTYPE_DCT, kKey), nullptr);
    EXPECT_EQ(s.create(MLX5DV_DCTYPE_DCI, 0, 0), nullptr);
    const uint32_t d = s.dct(kKey);
    // A DCT never goes to RTS: it only responds.
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    EXPECT_EQ(ibv_modify_qp(s.qps[0], &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                              IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                              IBV_QP_MAX_QP_RD_ATOMIC), EINVAL);
    // No receive queue of its own: receives go to the SRQ.
    ibv_recv_wr rwr{}, *rbad = nullptr;
    EXPECT_EQ(ibv_post_recv(s.qps[0], &rwr, &rbad), EINVAL);
    ibv_qp* q = s.dci();
    s.address_peer(s.address(d, d));
    ibv_qp_ex* x = ibv_qp_to_qp_ex(q);
    // A work request without a DC address is refused whole.
    ibv_wr_start(x);
    x->wr_id = 1;
    x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_rdma_write(x, s.mr->rkey, reinterpret_cast<uintptr_t>(s.buf.data()));
    ibv_wr_set_sge(x, s.mr->lkey, reinterpret_cast<uintptr_t>(s.buf.data()) + 1024, 8);
    EXPECT_EQ(ibv_wr_complete(x), EINVAL);
    EXPECT_TRUE(s.poll(1, 100).empty());
    // The SRQ is busy while a DCT uses it.
    EXPECT_EQ(ibv_destroy_srq(s.srq), EBUSY);
  });
}

}  // namespace
