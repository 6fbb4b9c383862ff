// What an HCA refuses: remote access violations, state-machine misuse,
// queue and CQ limits, deregistration of busy memory, atomic rules.
#include <sys/eventfd.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "harness.h"

using namespace fvtest;

namespace {

// A pair where A issues one RDMA WRITE described by `mutate` against B and
// both sides check the outcome: requester gets `expect`, and on an access
// error both QPs end in the error state (B's posted receive is flushed).
void access_case(EndpointOptions target_opts, std::function<void(Address&)> mutate,
                 ibv_wc_status expect, size_t len = 64, size_t remote_off = 0) {
  auto a = [=](Channel& ch) {
    Endpoint e;
    Address peer = e.connect_over(ch);
    mutate(peer);
    // Unsignalled: an error completes anyway, a success only if signalled.
    ASSERT_EQ(e.post_write(1, peer, 0, len, expect == IBV_WC_SUCCESS, remote_off), 0);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, expect) << wc_name(wc[0].status);
    EXPECT_EQ(wc[0].wr_id, 1u);
    if (expect != IBV_WC_SUCCESS) {
      EXPECT_EQ(e.qp_state(), IBV_QPS_ERR);
      // Later WRs are flushed, not executed.
      ASSERT_EQ(e.post_write(2, peer, 0, 8, false), 0);
      auto f = e.poll(1);
      ASSERT_EQ(f.size(), 1u);
      EXPECT_EQ(f[0].status, IBV_WC_WR_FLUSH_ERR);
    }
    ch.sync();
  };
  auto b = [=](Channel& ch) {
    Endpoint e(target_opts);
    e.connect_over(ch, [&] { ASSERT_EQ(e.post_recv(5, 0, 16), 0); });
    ch.sync();
    if (expect == IBV_WC_REM_ACCESS_ERR) {
      EXPECT_EQ(e.qp_state(), IBV_QPS_ERR);
      auto wc = e.poll(1);
      ASSERT_EQ(wc.size(), 1u);
      EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
      EXPECT_EQ(wc[0].wr_id, 5u);
      // The responder's owner is told by an affiliated async event.
      int fl = fcntl(e.ctx->async_fd, F_GETFL);
      fcntl(e.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
      ibv_async_event ev{};
      ASSERT_EQ(ibv_get_async_event(e.ctx, &ev), 0);
      EXPECT_EQ(ev.event_type, IBV_EVENT_QP_ACCESS_ERR);
      EXPECT_EQ(ev.element.qp, e.qp);
      ibv_ack_async_event(&ev);
    }
  };
  run_pair(a, b, {"FAKEVERBS_QUIET=1"}, {"FAKEVERBS_QUIET=1"});
}

}  // namespace

TEST(AccessChecks, ValidWriteSucceeds) {
  access_case({}, [](Address&) {}, IBV_WC_SUCCESS);
}

TEST(AccessChecks, BadRkey) {
  access_case({}, [](Address& p) { p.rkey ^= 0x100; }, IBV_WC_REM_ACCESS_ERR);
}

TEST(AccessChecks, StaleRkeyTag) {
  access_case({}, [](Address& p) { p.rkey ^= 0x1; }, IBV_WC_REM_ACCESS_ERR);
}

TEST(AccessChecks, WritePastEndOfMr) {
  access_case({}, [](Address&) {}, IBV_WC_REM_ACCESS_ERR, 64, 4096 - 32);
}

TEST(AccessChecks, WriteBeforeStartOfMr) {
  access_case({}, [](Address& p) { p.addr -= 16; }, IBV_WC_REM_ACCESS_ERR);
}

TEST(AccessChecks, MrWithoutRemoteWrite) {
  EndpointOptions o;
  o.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
  access_case(o, [](Address&) {}, IBV_WC_REM_ACCESS_ERR);
}

TEST(AccessChecks, QpWithoutRemoteWrite) {
  EndpointOptions o;
  o.qp_access = IBV_ACCESS_REMOTE_READ;
  access_case(o, [](Address&) {}, IBV_WC_REM_ACCESS_ERR);
}

TEST(AccessChecks, LocalLkeyOutsideMr) {
  run_one([](Channel&) {
    Endpoint e;
    e.connect_self();
    ASSERT_EQ(e.post_write(1, e.address(), 4096 - 8, 64, false), 0);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_LOC_PROT_ERR) << wc_name(wc[0].status);
    EXPECT_EQ(e.qp_state(), IBV_QPS_ERR);
  }, {"FAKEVERBS_QUIET=1"});
}

TEST(AccessChecks, SendIntoTooSmallReceive) {
  auto a = [](Channel& ch) {
    Endpoint e;
    e.connect_over(ch);
    ASSERT_EQ(e.post_send(1, 0, 100), 0);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_REM_INV_REQ_ERR) << wc_name(wc[0].status);
    ch.sync();
  };
  auto b = [](Channel& ch) {
    Endpoint e;
    e.connect_over(ch, [&] { ASSERT_EQ(e.post_recv(1, 0, 50), 0); });
    ch.sync();
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_LOC_LEN_ERR) << wc_name(wc[0].status);
    EXPECT_EQ(e.qp_state(), IBV_QPS_ERR);
  };
  run_pair(a, b, {"FAKEVERBS_QUIET=1"}, {"FAKEVERBS_QUIET=1"});
}

TEST(AccessChecks, RegMrAccessRules) {
  run_one([](Channel&) {
    Endpoint e;
    static char mem[4096];
    // man ibv_reg_mr: REMOTE_WRITE / REMOTE_ATOMIC require LOCAL_WRITE.
    EXPECT_EQ(ibv_reg_mr(e.pd, mem, sizeof mem, IBV_ACCESS_REMOTE_WRITE), nullptr);
    EXPECT_EQ(errno, EINVAL);
    EXPECT_EQ(ibv_reg_mr(e.pd, mem, sizeof mem, IBV_ACCESS_REMOTE_ATOMIC), nullptr);
    EXPECT_EQ(ibv_reg_mr(e.pd, mem, sizeof mem, 1 << 30), nullptr);
    // Unmapped memory cannot be pinned.
    EXPECT_EQ(ibv_reg_mr(e.pd, reinterpret_cast<void*>(0x1000), 4096, IBV_ACCESS_LOCAL_WRITE), nullptr);
    EXPECT_EQ(errno, EFAULT);
    ibv_mr* ok = ibv_reg_mr(e.pd, mem, sizeof mem, IBV_ACCESS_REMOTE_READ);
    ASSERT_NE(ok, nullptr);
    EXPECT_EQ(ok->lkey, ok->rkey);
    EXPECT_EQ(ibv_dealloc_pd(e.pd), EBUSY);  // still has an MR and a QP
    EXPECT_EQ(ibv_dereg_mr(ok), 0);
  }, {"FAKEVERBS_QUIET=1"});
}

TEST(StateMachine, MisuseRejected) {
  run_one([](Channel&) {
    Endpoint e;
    Address self = e.address();
    // RESET: no receives, no sends.
    EXPECT_EQ(e.post_recv(1, 0, 8), EINVAL);
    EXPECT_EQ(e.post_write(1, self, 0, 8, true), EINVAL);
    // RESET -> RTR skips INIT.
    EXPECT_EQ(e.to_rtr(self), EINVAL);
    // RESET -> INIT without the access flags.
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT), EINVAL);
    // ... with a bad port.
    a.port_num = 2;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                          IBV_QP_ACCESS_FLAGS), EINVAL);
    ASSERT_EQ(e.to_init(), 0);
    EXPECT_EQ(e.post_recv(1, 0, 8), 0);  // allowed from INIT on
    EXPECT_EQ(e.post_write(1, self, 0, 8, true), EINVAL);  // not in RTS
    EXPECT_EQ(e.to_rts(), EINVAL);                          // INIT -> RTS
    // INIT -> RTR with an extra attribute that belongs to RTS.
    a = {};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = self.qpn;
    a.ah_attr.dlid = self.lid;
    a.ah_attr.port_num = 1;
    const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, rtr | IBV_QP_SQ_PSN), EINVAL);
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, rtr & ~IBV_QP_DEST_QPN), EINVAL);
    a.ah_attr.dlid = 0;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, rtr), EINVAL);  // no destination LID
    a.ah_attr.dlid = self.lid;
    a.max_dest_rd_atomic = 17;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, rtr), EINVAL);  // above max_qp_rd_atom
    a.max_dest_rd_atomic = 1;
    a.dest_qp_num = 1 << 24;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, rtr), EINVAL);
    a.dest_qp_num = self.qpn;
    ASSERT_EQ(ibv_modify_qp(e.qp, &a, rtr), 0);
    EXPECT_EQ(e.post_write(1, self, 0, 8, true), EINVAL);  // RTR: still no sends
    ibv_qp_attr r{};
    r.qp_state = IBV_QPS_RTS;
    r.timeout = 32;
    r.retry_cnt = 7;
    r.rnr_retry = 7;
    const int rts = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
    EXPECT_EQ(ibv_modify_qp(e.qp, &r, rts), EINVAL);  // timeout is 5 bits
    r.timeout = 14;
    r.retry_cnt = 8;
    EXPECT_EQ(ibv_modify_qp(e.qp, &r, rts), EINVAL);
    r.retry_cnt = 7;
    ASSERT_EQ(ibv_modify_qp(e.qp, &r, rts), 0);
    EXPECT_EQ(e.to_init(), EINVAL);  // RTS -> INIT
    // Any -> ERR and ERR -> RESET -> INIT are legal.
    ibv_qp_attr s{};
    s.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(ibv_modify_qp(e.qp, &s, IBV_QP_STATE), 0);
    auto wc = e.poll(1);  // the receive posted in INIT is flushed
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
    s.qp_state = IBV_QPS_RESET;
    ASSERT_EQ(ibv_modify_qp(e.qp, &s, IBV_QP_STATE), 0);
    EXPECT_EQ(e.to_init(), 0);
  }, {"FAKEVERBS_QUIET=1"});
}

TEST(StateMachine, RoceNeedsGrhAndMtu) {
  run_one([](Channel&) {
    Endpoint e;
    ASSERT_EQ(e.to_init(), 0);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = e.qp->qp_num;
    a.ah_attr.port_num = 1;
    const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, rtr), EINVAL);  // no GRH on RoCE
    a.ah_attr.is_global = 1;
    ibv_query_gid(e.ctx, 1, 0, &a.ah_attr.grh.dgid);
    a.ah_attr.grh.sgid_index = 5;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, rtr), EINVAL);  // empty GID index
    a.ah_attr.grh.sgid_index = 0;
    a.path_mtu = IBV_MTU_4096;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, rtr), EINVAL);  // above the Ethernet MTU
    a.path_mtu = IBV_MTU_1024;
    EXPECT_EQ(ibv_modify_qp(e.qp, &a, rtr), 0);
  }, {"FAKEVERBS_LINK=eth", "FAKEVERBS_QUIET=1"});
}

TEST(StateMachine, CreateQpLimits) {
  run_one([](Channel&) {
    Endpoint e;
    ibv_qp_init_attr ia{};
    ia.send_cq = ia.recv_cq = e.cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 40000;  // above max_qp_wr
    ia.cap.max_send_sge = 1;
    EXPECT_EQ(ibv_create_qp(e.pd, &ia), nullptr);
    ia.cap.max_send_wr = 16;
    ia.cap.max_send_sge = 31;
    EXPECT_EQ(ibv_create_qp(e.pd, &ia), nullptr);
    ia.cap.max_send_sge = 1;
    ia.cap.max_inline_data = 4096;
    EXPECT_EQ(ibv_create_qp(e.pd, &ia), nullptr);
    ia.cap.max_inline_data = 0;
    ia.qp_type = IBV_QPT_UD;
    EXPECT_EQ(ibv_create_qp(e.pd, &ia), nullptr);
    EXPECT_EQ(errno, EOPNOTSUPP);
    EXPECT_EQ(ibv_create_cq(e.ctx, 0, nullptr, nullptr, 0), nullptr);
    EXPECT_EQ(ibv_create_cq(e.ctx, 5000000, nullptr, nullptr, 0), nullptr);
    EXPECT_EQ(ibv_destroy_cq(e.cq), EBUSY);  // a QP still uses it
  }, {"FAKEVERBS_QUIET=1"});
}

TEST(Resources, SendQueueDepthAndSelectiveSignalling) {
  run_one([](Channel&) {
    EndpointOptions o;
    o.max_send_wr = 4;
    o.max_recv_wr = 2;
    Endpoint e(o);
    e.connect_self();
    Address self = e.address();
    // Unsignalled WRs keep their slots until a later signalled one is polled.
    for (int i = 0; i < 3; ++i) ASSERT_EQ(e.post_write(i, self, 0, 8, false, 1024), 0);
    ASSERT_EQ(e.post_write(3, self, 0, 8, true, 1024), 0);
    EXPECT_EQ(e.post_write(4, self, 0, 8, true, 1024), ENOMEM);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].wr_id, 3u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(e.post_write(10 + i, self, 0, 8, i == 3, 1024), 0);
    EXPECT_EQ(e.post_write(20, self, 0, 8, true, 1024), ENOMEM);
    EXPECT_EQ(e.poll(1).size(), 1u);
    // Receive queue depth.
    EXPECT_EQ(e.post_recv(1, 0, 8), 0);
    EXPECT_EQ(e.post_recv(2, 0, 8), 0);
    EXPECT_EQ(e.post_recv(3, 0, 8), ENOMEM);
  }, {"FAKEVERBS_QUIET=1"});
}

TEST(Resources, CqOverflowReported) {
  run_one([](Channel&) {
    EndpointOptions o;
    o.cqe = 1;  // rounds up to a 1-entry ring
    Endpoint e(o);
    EXPECT_EQ(e.cq->cqe, 1);
    e.connect_self();
    Address self = e.address();
    for (int i = 0; i < 3; ++i) ASSERT_EQ(e.post_write(i, self, 0, 8, true, 1024), 0);
    ibv_wc wc[4];
    // Completions arrive asynchronously (the overrun happens when the HCA
    // writes the second CQE, not at post time).  Let all three be written
    // before polling: a poller keeping up would prevent the overrun, as on
    // hardware.
    usleep(200 * 1000);
    // mlx5 reports an overrun only as IBV_EVENT_CQ_ERR: polling returns the
    // one completion written before it, then nothing (the rest are lost).
    EXPECT_EQ(ibv_poll_cq(e.cq, 4, wc), 1);
    EXPECT_EQ(ibv_poll_cq(e.cq, 4, wc), 0);
    int fl = fcntl(e.ctx->async_fd, F_GETFL);
    fcntl(e.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
    ibv_async_event ev{};
    ASSERT_EQ(ibv_get_async_event(e.ctx, &ev), 0);
    EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
    EXPECT_EQ(ev.element.cq, e.cq);
    ibv_ack_async_event(&ev);
    EXPECT_NE(ibv_get_async_event(e.ctx, &ev), 0);
  }, {"FAKEVERBS_QUIET=1"});
}

// ibv_resize_cq keeps the completions in the CQ, in order, refuses a size
// they do not fit, and the grown ring holds what overran the old one.
TEST(Resources, ResizeCqKeepsCompletionsAndGrows) {
  run_one([](Channel&) {
    EndpointOptions o;
    o.cqe = 3;  // a 3-entry ring
    Endpoint e(o);
    EXPECT_EQ(e.cq->cqe, 3);
    e.connect_self();
    Address self = e.address();
    for (int i = 0; i < 3; ++i) ASSERT_EQ(e.post_write(i, self, 0, 8, true, 1024), 0);
    usleep(200 * 1000);  // all three written
    EXPECT_EQ(ibv_resize_cq(e.cq, 1), EINVAL);  // 3 completions do not fit 1
    EXPECT_EQ(ibv_resize_cq(e.cq, 5000000), EINVAL);  // past max_cqe
    ASSERT_EQ(ibv_resize_cq(e.cq, 8), 0);
    EXPECT_EQ(e.cq->cqe, 15);
    for (int i = 3; i < 12; ++i) ASSERT_EQ(e.post_write(i, self, 0, 8, true, 1024), 0);
    usleep(200 * 1000);
    ibv_wc wc[16];
    ASSERT_EQ(ibv_poll_cq(e.cq, 16, wc), 12);  // no overrun in the grown ring
    for (int i = 0; i < 12; ++i) EXPECT_EQ(wc[i].wr_id, std::uint64_t(i));
  }, {"FAKEVERBS_QUIET=1"});
}

TEST(Resources, DeregOfMrInUseCaught) {
  run_one([](Channel&) {
    Endpoint e;
    e.connect_self();
    Address self = e.address();
    static char mem[256];
    ibv_mr* m = ibv_reg_mr(e.pd, mem, sizeof mem, IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(m, nullptr);
    ibv_sge sge{uintptr_t(mem), 64, m->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.wr.rdma.remote_addr = self.addr;
    wr.wr.rdma.rkey = self.rkey;
    ASSERT_EQ(ibv_post_send(e.qp, &wr, &bad), 0);  // unsignalled
    EXPECT_EQ(ibv_dereg_mr(m), EBUSY);
    ASSERT_EQ(e.post_write(2, self, 0, 8, true, 1024), 0);
    ASSERT_EQ(e.poll(1).size(), 1u);  // retires the unsignalled one too
    EXPECT_EQ(ibv_dereg_mr(m), 0);
  }, {"FAKEVERBS_QUIET=1"});
}

namespace {

int post_atomic(Endpoint& e, const Address& peer, uint64_t off, ibv_wr_opcode op, uint64_t a,
                uint64_t b, size_t local_off = 0) {
  ibv_sge sge{uintptr_t(e.buf + local_off), 8, e.mr->lkey};
  ibv_send_wr wr{}, *bad = nullptr;
  wr.wr_id = 77;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.atomic.remote_addr = peer.addr + off;
  wr.wr.atomic.rkey = peer.rkey;
  wr.wr.atomic.compare_add = a;
  wr.wr.atomic.swap = b;
  return ibv_post_send(e.qp, &wr, &bad);
}

}  // namespace

TEST(Atomics, FetchAddAndCompareSwapAcrossProcesses) {
  auto a = [](Channel& ch) {
    Endpoint e;
    Address peer = e.connect_over(ch);
    for (int i = 0; i < 100; ++i) {
      ASSERT_EQ(post_atomic(e, peer, 64, IBV_WR_ATOMIC_FETCH_AND_ADD, 3, 0), 0);
      auto wc = e.poll(1);
      ASSERT_EQ(wc.size(), 1u);
      ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
      EXPECT_EQ(wc[0].opcode, IBV_WC_FETCH_ADD);
      uint64_t old;
      memcpy(&old, e.buf, 8);
      EXPECT_EQ(old, 1000u + 3u * uint64_t(i));
    }
    ASSERT_EQ(post_atomic(e, peer, 64, IBV_WR_ATOMIC_CMP_AND_SWP, 1, 5), 0);  // fails: != 1
    ASSERT_EQ(e.poll(1).size(), 1u);
    ASSERT_EQ(post_atomic(e, peer, 64, IBV_WR_ATOMIC_CMP_AND_SWP, 1300, 42), 0);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].opcode, IBV_WC_COMP_SWAP);
    uint64_t old;
    memcpy(&old, e.buf, 8);
    EXPECT_EQ(old, 1300u);
    ch.sync();
  };
  auto b = [](Channel& ch) {
    Endpoint e;
    uint64_t init = 1000;
    memcpy(e.buf + 64, &init, 8);
    e.connect_over(ch);
    ch.sync();
    uint64_t v;
    memcpy(&v, e.buf + 64, 8);
    EXPECT_EQ(v, 42u);
  };
  run_pair(a, b);
}

TEST(Atomics, AlignmentAccessAndResources) {
  run_one([](Channel&) {
    {
      Endpoint e;
      e.connect_self();
      EXPECT_EQ(post_atomic(e, e.address(), 68, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0), 0);
      auto wc = e.poll(1);
      ASSERT_EQ(wc.size(), 1u);
      EXPECT_EQ(wc[0].status, IBV_WC_REM_INV_REQ_ERR) << "misaligned: " << wc_name(wc[0].status);
    }
    {
      EndpointOptions o;
      o.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
      Endpoint e(o);
      e.connect_self();
      EXPECT_EQ(post_atomic(e, e.address(), 64, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0), 0);
      auto wc = e.poll(1);
      ASSERT_EQ(wc.size(), 1u);
      EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR) << "no REMOTE_ATOMIC: " << wc_name(wc[0].status);
    }
    {
      EndpointOptions o;
      o.rd_atomic = 0;
      Endpoint e(o);
      e.connect_self();
      EXPECT_EQ(post_atomic(e, e.address(), 64, IBV_WR_ATOMIC_FETCH_AND_ADD, 1, 0), 0);
      auto wc = e.poll(1);
      ASSERT_EQ(wc.size(), 1u);
      EXPECT_EQ(wc[0].status, IBV_WC_LOC_QP_OP_ERR) << "max_rd_atomic 0: " << wc_name(wc[0].status);
    }
    {
      Endpoint e;
      e.connect_self();
      ibv_sge sge{uintptr_t(e.buf), 16, e.mr->lkey};  // result buffer must be 8 bytes
      ibv_send_wr wr{}, *bad = nullptr;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
      wr.wr.atomic.remote_addr = uintptr_t(e.buf) + 64;
      wr.wr.atomic.rkey = e.mr->rkey;
      EXPECT_EQ(ibv_post_send(e.qp, &wr, &bad), EINVAL);
    }
  }, {"FAKEVERBS_QUIET=1"});
}
