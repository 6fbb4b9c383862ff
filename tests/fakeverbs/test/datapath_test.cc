// Data movement between processes: SEND/RECV ping-pong, RDMA WRITE (inline,
// multi-SGE, with immediate), READ, ordering, completion-after-data.
#include <arpa/inet.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <cstdio>
#include <cstring>
#include <utility>

#include "harness.h"

using namespace fvtest;

class LinkLayer : public ::testing::TestWithParam<const char*> {
 protected:
  std::vector<std::string> env() const { return {std::string("FAKEVERBS_LINK=") + GetParam()}; }
};

TEST_P(LinkLayer, SendRecvPingPong) {
  auto ping = [](Channel& ch) {
    Endpoint e;
    e.connect_over(ch);
    for (int i = 0; i < 50; ++i) {
      ASSERT_EQ(e.post_recv(100 + i, 1024, 512), 0);
      ch.sync();  // both receives are posted before anyone sends
      memset(e.buf, 'a' + i % 26, 256);
      ASSERT_EQ(e.post_send(i, 0, 256), 0);
      auto wc = e.poll(2);
      ASSERT_EQ(wc.size(), 2u);
      // The send and the receive complete on one CQ in either order: the
      // peer's reply may land before our send's acknowledgement (an HCA
      // orders completions per work queue, not across them).
      if (wc[0].opcode == IBV_WC_RECV) std::swap(wc[0], wc[1]);
      EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
      EXPECT_EQ(wc[0].opcode, IBV_WC_SEND);
      EXPECT_EQ(wc[0].wr_id, uint64_t(i));
      EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS) << wc_name(wc[1].status);
      EXPECT_EQ(wc[1].opcode, IBV_WC_RECV);
      EXPECT_EQ(wc[1].wr_id, uint64_t(100 + i));
      EXPECT_EQ(wc[1].byte_len, 16u);
      EXPECT_EQ(e.buf[1024], 'A' + i % 26);
    }
  };
  auto pong = [](Channel& ch) {
    Endpoint e;
    e.connect_over(ch);
    for (int i = 0; i < 50; ++i) {
      ASSERT_EQ(e.post_recv(100 + i, 1024, 512), 0);
      ch.sync();
      auto r = e.poll(1);
      ASSERT_EQ(r.size(), 1u);
      EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << wc_name(r[0].status);
      EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
      EXPECT_EQ(r[0].byte_len, 256u);
      EXPECT_EQ(r[0].wr_id, uint64_t(100 + i));
      EXPECT_EQ(r[0].qp_num, e.qp->qp_num);
      EXPECT_EQ(e.buf[1024], 'a' + i % 26);
      EXPECT_EQ(e.buf[1024 + 255], 'a' + i % 26);
      memset(e.buf, 'A' + i % 26, 16);
      ASSERT_EQ(e.post_send(i, 0, 16), 0);
      auto s = e.poll(1);
      ASSERT_EQ(s.size(), 1u);
      EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
    }
  };
  run_pair(ping, pong, env(), env());
}

TEST_P(LinkLayer, RdmaWriteWithImmVisibleOnlyAfterData) {
  auto writer = [](Channel& ch) {
    EndpointOptions o;
    o.buf_size = 1 << 20;
    Endpoint e(o);
    Address peer = e.connect_over(ch);
    for (int round = 0; round < 20; ++round) {
      for (size_t i = 0; i < o.buf_size; i += 4096) e.buf[i] = uint8_t(round + 1);
      // Large write, then a zero-length WRITE_WITH_IMM as the signal: on RC
      // the signal must not overtake the data.
      ASSERT_EQ(e.post_write(1, peer, 0, o.buf_size, false), 0);
      ASSERT_EQ(e.post_write(2, peer, 0, 0, true, 0, IBV_WR_RDMA_WRITE_WITH_IMM, 0xabc0 + round), 0);
      auto wc = e.poll(1);
      ASSERT_EQ(wc.size(), 1u);
      EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
      EXPECT_EQ(wc[0].wr_id, 2u);
      EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_WRITE);
      ch.sync();
    }
  };
  auto target = [](Channel& ch) {
    EndpointOptions o;
    o.buf_size = 1 << 20;
    Endpoint e(o);
    e.connect_over(ch, [&] {
      for (int i = 0; i < 20; ++i) ASSERT_EQ(e.post_recv(i, 0, 0), 0);
    });
    for (int round = 0; round < 20; ++round) {
      auto wc = e.poll(1);
      ASSERT_EQ(wc.size(), 1u);
      EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
      EXPECT_EQ(wc[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
      EXPECT_TRUE(wc[0].wc_flags & IBV_WC_WITH_IMM);
      EXPECT_EQ(ntohl(wc[0].imm_data), uint32_t(0xabc0 + round));
      EXPECT_EQ(wc[0].wr_id, uint64_t(round));
      for (size_t i = 0; i < o.buf_size; i += 4096)
        ASSERT_EQ(e.buf[i], uint8_t(round + 1)) << "data not complete when the immediate arrived";
      ch.sync();
    }
  };
  run_pair(writer, target, env(), env());
}

INSTANTIATE_TEST_SUITE_P(Fake, LinkLayer, ::testing::Values("ib", "eth"));

TEST(Datapath, InlineAndMultiSgeWrites) {
  auto writer = [](Channel& ch) {
    EndpointOptions o;
    o.max_send_sge = 3;
    Endpoint e(o);
    Address peer = e.connect_over(ch);
    // Inline: the buffer may be reused as soon as post returns, and its lkey
    // is not checked (man ibv_post_send).
    uint8_t stack[48];
    memset(stack, 0x5a, sizeof stack);
    ibv_sge sg{uintptr_t(stack), sizeof stack, 0xdeadbeef};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = 1;
    wr.sg_list = &sg;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = peer.addr;
    wr.wr.rdma.rkey = peer.rkey;
    ASSERT_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
    memset(stack, 0, sizeof stack);
    // Inline larger than max_inline_data is refused at post time.
    uint8_t big[128] = {};
    ibv_sge sgb{uintptr_t(big), sizeof big, 0};
    wr.sg_list = &sgb;
    EXPECT_EQ(ibv_post_send(e.qp, &wr, &bad), EINVAL);
    EXPECT_EQ(bad, &wr);
    // Gather of three SGEs into one contiguous remote range.
    for (int i = 0; i < 3; ++i) memset(e.buf + 1000 * i, 'x' + i, 100);
    ibv_sge g[3] = {{uintptr_t(e.buf), 100, e.mr->lkey},
                    {uintptr_t(e.buf + 1000), 100, e.mr->lkey},
                    {uintptr_t(e.buf + 2000), 100, e.mr->lkey}};
    ibv_send_wr w2{};
    w2.wr_id = 2;
    w2.sg_list = g;
    w2.num_sge = 3;
    w2.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    w2.imm_data = htonl(7);
    w2.send_flags = IBV_SEND_SIGNALED;
    w2.wr.rdma.remote_addr = peer.addr + 1024;
    w2.wr.rdma.rkey = peer.rkey;
    ASSERT_EQ(ibv_post_send(e.qp, &w2, &bad), 0);
    w2.num_sge = 4;  // above max_send_sge
    EXPECT_EQ(ibv_post_send(e.qp, &w2, &bad), EINVAL);
    auto wc = e.poll(2);
    ASSERT_EQ(wc.size(), 2u);
    EXPECT_EQ(wc[0].wr_id, 1u);
    EXPECT_EQ(wc[1].wr_id, 2u);
    ch.sync();
  };
  auto target = [](Channel& ch) {
    Endpoint e;
    e.connect_over(ch, [&] { ASSERT_EQ(e.post_recv(9, 0, 0), 0); });
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].byte_len, 300u);
    for (int i = 0; i < 48; ++i) EXPECT_EQ(e.buf[i], 0x5a);
    for (int i = 0; i < 300; ++i) EXPECT_EQ(e.buf[1024 + i], 'x' + i / 100) << i;
    ch.sync();
  };
  run_pair(writer, target);
}

TEST(Datapath, OrderingPerQp) {
  auto writer = [](Channel& ch) {
    Endpoint e;
    Address peer = e.connect_over(ch);
    // 200 writes of increasing values to the same remote word, plus a
    // signalled SEND behind them: the last value must be the one that stays,
    // and completions come back in posting order.
    for (uint32_t i = 1; i <= 200; ++i) {
      memcpy(e.buf + 8 * i, &i, 4);
      ASSERT_EQ(e.post_write(i, peer, 8 * i, 4, i % 10 == 0, 8 * i), 0) << i;
      if (i % 40 == 0) {
        auto wc = e.poll(4);
        ASSERT_EQ(wc.size(), 4u);
        for (int k = 0; k < 4; ++k) EXPECT_EQ(wc[k].wr_id, i - 30 + 10 * k);
      }
    }
    ASSERT_EQ(e.post_send(999, 0, 4), 0);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].wr_id, 999u);
  };
  auto target = [](Channel& ch) {
    Endpoint e;
    e.connect_over(ch, [&] { ASSERT_EQ(e.post_recv(1, 3000, 64), 0); });
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    for (uint32_t i = 1; i <= 200; ++i) {
      uint32_t v;
      memcpy(&v, e.buf + 8 * i, 4);
      ASSERT_EQ(v, i);
    }
  };
  run_pair(writer, target);
}

TEST(Datapath, RdmaRead) {
  run_one([](Channel&) {
    Endpoint e;
    e.connect_self();
    memset(e.buf + 2048, 0x77, 512);
    Address self = e.address();
    ASSERT_EQ(e.post_write(1, self, 0, 512, true, 2048, IBV_WR_RDMA_READ), 0);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
    EXPECT_EQ(wc[0].opcode, IBV_WC_RDMA_READ);
    EXPECT_EQ(e.buf[0], 0x77);
    EXPECT_EQ(e.buf[511], 0x77);
  });
}

TEST(Datapath, ConcurrentBidirectionalWritesWithImm) {
  // Both processes write to each other at the same time, each consuming the
  // other's receives and CQ: exercises the cross-process locking (a deadlock
  // shows as a timeout) and receive replenishment under RNR retry.
  auto side = [](Channel& ch) {
    EndpointOptions o;
    o.max_send_wr = 16;
    o.max_recv_wr = 16;
    o.cqe = 64;
    Endpoint e(o);
    Address peer = e.connect_over(ch, [&] {
      for (int i = 0; i < 16; ++i) ASSERT_EQ(e.post_recv(1000 + i, 0, 0), 0);
    });
    const int n = 400;
    int sent = 0, send_done = 0, received = 0;
    uint32_t expect_imm = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((send_done < n || received < n) && std::chrono::steady_clock::now() < deadline) {
      if (sent < n && sent - send_done < 8) {
        uint32_t v = uint32_t(sent);
        memcpy(e.buf + 64, &v, 4);
        // Inline, so the source buffer may change right after posting.
        ASSERT_EQ(e.post_write(sent, peer, 64, 4, true, 128 + 4 * (sent % 64),
                               IBV_WR_RDMA_WRITE_WITH_IMM, uint32_t(sent), IBV_SEND_INLINE), 0);
        ++sent;
      }
      ibv_wc wc[8];
      int k = ibv_poll_cq(e.cq, 8, wc);
      ASSERT_GE(k, 0);
      for (int i = 0; i < k; ++i) {
        ASSERT_EQ(wc[i].status, IBV_WC_SUCCESS) << wc_name(wc[i].status);
        if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
          uint32_t imm = ntohl(wc[i].imm_data), v;
          ASSERT_EQ(imm, expect_imm++);  // in order
          memcpy(&v, e.buf + 128 + 4 * (imm % 64), 4);
          ASSERT_EQ(v, imm);  // data before completion
          ++received;
          ASSERT_EQ(e.post_recv(wc[i].wr_id, 0, 0), 0);
        } else {
          ASSERT_EQ(wc[i].opcode, IBV_WC_RDMA_WRITE);
          ++send_done;
        }
      }
    }
    EXPECT_EQ(send_done, n);
    EXPECT_EQ(received, n);
    ch.sync();
  };
  run_pair(side, side);
}

TEST(Datapath, PostAndPollFromDifferentThreads) {
  // verbs are thread-safe: one thread posts, another polls the same CQ.
  run_one([](Channel&) {
    EndpointOptions o;
    o.max_send_wr = 32;
    Endpoint e(o);
    e.connect_self();
    Address self = e.address();
    const int n = 2000;
    std::atomic<int> completed{0};
    std::thread poller([&] {
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (completed < n && std::chrono::steady_clock::now() < deadline) {
        ibv_wc wc[16];
        int k = ibv_poll_cq(e.cq, 16, wc);
        ASSERT_GE(k, 0);
        for (int i = 0; i < k; ++i) ASSERT_EQ(wc[i].status, IBV_WC_SUCCESS);
        completed += k;
      }
    });
    int posted = 0;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (posted < n && std::chrono::steady_clock::now() < deadline) {
      int rc = e.post_write(posted, self, 0, 8, true, 2048);
      if (rc == ENOMEM) {  // queue full until the poller retires completions
        std::this_thread::yield();
        continue;
      }
      ASSERT_EQ(rc, 0);
      ++posted;
    }
    poller.join();
    EXPECT_EQ(completed.load(), n);
  });
}

TEST(Datapath, CpuFileReportsTheProgressThreadsTime) {
  // FAKEVERBS_CPU_FILE: at exit each process appends its progress thread's
  // CPU time (what benchmarks subtract as the NIC's work, FIDELITY.md) and
  // its threads' time in ibv_post_send. A process that moved 256 MiB in 256
  // posts reports positive times, once.
  char path[] = "/tmp/fakeverbs-cpu-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  run_one(
      [](Channel&) {
        EndpointOptions o;
        o.buf_size = 1 << 21;
        Endpoint e(o);
        e.connect_self();
        const Address self = e.address();
        for (int i = 0; i < 256; ++i) {
          ASSERT_EQ(e.post_write(uint64_t(i), self, 0, 1 << 20, true, 1 << 20), 0);
          auto wc = e.poll(1);
          ASSERT_EQ(wc.size(), 1u);
          ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
        }
      },
      {std::string("FAKEVERBS_CPU_FILE=") + path});
  FILE* f = fopen(path, "r");
  ASSERT_NE(f, nullptr);
  int pid = 0, lines = 0;
  unsigned long long ns = 0, post_ns = 0, first_ns = 0, first_post = 0;
  while (fscanf(f, "pid %d hca_cpu_ns %llu post_cpu_ns %llu\n", &pid, &ns, &post_ns) == 3) {
    if (lines++ == 0) first_ns = ns, first_post = post_ns;
  }
  fclose(f);
  unlink(path);
  EXPECT_EQ(lines, 1);
  EXPECT_GT(pid, 0);
  EXPECT_GT(first_ns, 0u);    // the progress thread moved the data
  EXPECT_GT(first_post, 0u);  // 256 ibv_post_send calls took some CPU
}
