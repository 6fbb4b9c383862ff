// FAKEVERBS_FAULT modes, transport/RNR retry exhaustion, rendezvous hygiene.
#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "harness.h"

using namespace fvtest;

namespace {

// Runs `body` on a self-connected endpoint in a child with FAKEVERBS_FAULT.
void with_fault(const char* spec, std::function<void(Endpoint&, Address&)> body) {
  std::string env = std::string("FAKEVERBS_FAULT=") + spec;
  run_one([body](Channel&) {
    Endpoint e;
    e.connect_self();
    Address self = e.address();
    body(e, self);
  }, {env, "FAKEVERBS_QUIET=1"});
}

}  // namespace

TEST(Faults, FailNthPost) {
  with_fault("fail_post=2", [](Endpoint& e, Address& self) {
    EXPECT_EQ(e.post_write(1, self, 0, 8, true, 1024), 0);
    EXPECT_EQ(e.post_write(2, self, 0, 8, true, 1024), ENOMEM);
    EXPECT_EQ(e.post_write(3, self, 0, 8, true, 1024), 0);
    auto wc = e.poll(2);
    ASSERT_EQ(wc.size(), 2u);
    EXPECT_EQ(wc[0].wr_id, 1u);
    EXPECT_EQ(wc[1].wr_id, 3u);
  });
}

TEST(Faults, FailNthPostRecv) {
  with_fault("fail_recv=1", [](Endpoint& e, Address&) {
    EXPECT_EQ(e.post_recv(1, 0, 8), ENOMEM);
    EXPECT_EQ(e.post_recv(2, 0, 8), 0);
  });
}

TEST(Faults, RetryExceededStatus) {
  with_fault("retry_exc=2", [](Endpoint& e, Address& self) {
    for (int i = 1; i <= 3; ++i) EXPECT_EQ(e.post_write(i, self, 0, 8, true, 1024), 0);
    auto wc = e.poll(3);
    ASSERT_EQ(wc.size(), 3u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc[1].status, IBV_WC_RETRY_EXC_ERR);
    EXPECT_EQ(wc[2].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(e.qp_state(), IBV_QPS_ERR);
  });
}

TEST(Faults, RemoteAccessErrorStatus) {
  with_fault("rem_access=1", [](Endpoint& e, Address& self) {
    EXPECT_EQ(e.post_write(1, self, 0, 8, false, 1024), 0);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR);
    EXPECT_EQ(e.qp_state(), IBV_QPS_ERR);
  });
}

TEST(Faults, DropCompletion) {
  with_fault("drop_cqe=1", [](Endpoint& e, Address& self) {
    EXPECT_EQ(e.post_write(1, self, 0, 8, true, 1024), 0);
    EXPECT_EQ(e.post_write(2, self, 0, 8, true, 1024), 0);
    auto wc = e.poll(2, 300);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].wr_id, 2u);
  });
}

TEST(Faults, DelayedExecution) {
  auto a = [](Channel& ch) {
    Endpoint e;
    Address peer = e.connect_over(ch);
    e.buf[0] = 9;
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(e.post_write(1, peer, 0, 1, true), 0);
    ch.sync();  // B checks the data has not landed yet
    ch.sync();
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(200));
    ch.sync();
  };
  auto b = [](Channel& ch) {
    Endpoint e;
    e.connect_over(ch);
    ch.sync();
    EXPECT_EQ(e.buf[0], 0) << "delayed write landed early";
    ch.sync();
    ch.sync();
    EXPECT_EQ(e.buf[0], 9);
  };
  run_pair(a, b, {"FAKEVERBS_FAULT=delay_us=200000"}, {});
}

TEST(Faults, QpToError) {
  with_fault("qp_error=2", [](Endpoint& e, Address& self) {
    EXPECT_EQ(e.post_recv(5, 0, 8), 0);
    EXPECT_EQ(e.post_write(1, self, 0, 8, true, 1024), 0);
    // Execution is asynchronous: a QP entering ERR flushes what it has not
    // executed yet, so let the first write complete before the fault.
    auto first = e.poll(1);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(e.post_write(2, self, 0, 8, true, 1024), 0);  // QP goes to ERR here
    auto wc = e.poll(2);
    ASSERT_EQ(wc.size(), 2u);
    wc.insert(wc.begin(), first[0]);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wc[1].status, IBV_WC_WR_FLUSH_ERR);  // the receive
    EXPECT_EQ(wc[1].wr_id, 5u);
    EXPECT_EQ(wc[2].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(wc[2].wr_id, 2u);
    EXPECT_EQ(e.qp_state(), IBV_QPS_ERR);
    int fl = fcntl(e.ctx->async_fd, F_GETFL);
    fcntl(e.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
    ibv_async_event ev{};
    ASSERT_EQ(ibv_get_async_event(e.ctx, &ev), 0);
    EXPECT_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
    EXPECT_EQ(ev.element.qp, e.qp);
  });
}

TEST(Faults, PortDownRaisesPortErrAndWritesRunOutOfRetries) {
  with_fault("port_down=1", [](Endpoint& e, Address& self) {
    EXPECT_EQ(e.post_write(1, self, 0, 8, true, 1024), 0);  // the port goes down here
    int fl = fcntl(e.ctx->async_fd, F_GETFL);
    fcntl(e.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
    ibv_async_event ev{};
    ASSERT_EQ(ibv_get_async_event(e.ctx, &ev), 0);
    EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ERR);
    EXPECT_EQ(ev.element.port_num, 1);
    ibv_ack_async_event(&ev);
    ibv_port_attr pa{};
    ASSERT_EQ(ibv_query_port(e.ctx, 1, &pa), 0);
    EXPECT_EQ(pa.state, IBV_PORT_DOWN);
    auto wc = e.poll(1);  // the harness's QP retries briefly, then gives up
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR) << wc_name(wc[0].status);
  });
}

namespace {

// The next async event of the context (made non-blocking), or -1.
int next_event(ibv_context* ctx, int* port = nullptr) {
  int fl = fcntl(ctx->async_fd, F_GETFL);
  fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
  ibv_async_event ev{};
  if (ibv_get_async_event(ctx, &ev) != 0) return -1;
  if (port) *port = int(ev.element.port_num);
  ibv_ack_async_event(&ev);
  return ev.event_type;
}

}  // namespace

TEST(Faults, PortFlapInsideTheRetryBudgetDelaysTheWriteOnly) {
  // The harness's QPs retry for 16.8 ms x 3: a 10 ms flap is survived.
  with_fault("port_flap=1:10", [](Endpoint& e, Address& self) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(e.post_write(1, self, 0, 8, true, 1024), 0);  // down from here for 10 ms
    int port = 0;
    EXPECT_EQ(next_event(e.ctx, &port), IBV_EVENT_PORT_ERR);
    EXPECT_EQ(port, 1);
    ibv_port_attr pa{};
    ASSERT_EQ(ibv_query_port(e.ctx, 1, &pa), 0);
    EXPECT_EQ(pa.state, IBV_PORT_DOWN);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
    EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(10));
    EXPECT_EQ(next_event(e.ctx, &port), IBV_EVENT_PORT_ACTIVE);
    ASSERT_EQ(ibv_query_port(e.ctx, 1, &pa), 0);
    EXPECT_EQ(pa.state, IBV_PORT_ACTIVE);
  });
}

TEST(Faults, PortFlapLongerThanTheRetryBudgetFailsTheWrite) {
  with_fault("port_flap=1:300", [](Endpoint& e, Address& self) {
    EXPECT_EQ(e.post_write(1, self, 0, 8, true, 1024), 0);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR) << wc_name(wc[0].status);
  });
}

TEST(Faults, LidChangeMovesThePortAndItsQueuePairs) {
  with_fault("lid_change=1", [](Endpoint& e, Address& self) {
    ibv_port_attr before{};
    ASSERT_EQ(ibv_query_port(e.ctx, 1, &before), 0);
    // The QP now answers at the new LID only: its own connection, made to
    // the old one, runs out of retries as a peer's would.
    EXPECT_EQ(e.post_write(1, self, 0, 8, true, 1024), 0);
    EXPECT_EQ(next_event(e.ctx), IBV_EVENT_LID_CHANGE);
    ibv_port_attr now{};
    ASSERT_EQ(ibv_query_port(e.ctx, 1, &now), 0);
    EXPECT_NE(now.lid, before.lid);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR) << wc_name(wc[0].status);
  });
}

TEST(Faults, GidChangeRaisesTheEventAndQueryGidAnswersTheNewGid) {
  with_fault("gid_change=1", [](Endpoint& e, Address& self) {
    ibv_gid before{}, now{};
    ASSERT_EQ(ibv_query_gid(e.ctx, 1, 0, &before), 0);
    EXPECT_EQ(e.post_write(1, self, 0, 8, true, 1024), 0);
    EXPECT_EQ(next_event(e.ctx), IBV_EVENT_GID_CHANGE);
    ASSERT_EQ(ibv_query_gid(e.ctx, 1, 0, &now), 0);
    EXPECT_NE(memcmp(&before, &now, sizeof now), 0);
    EXPECT_EQ(memcmp(&before, &now, 8), 0);  // the same subnet prefix
    e.poll(1);
  });
}

TEST(Transport, UnreachablePeerRetryExceeded) {
  run_one([](Channel&) {
    EndpointOptions o;
    o.timeout = 10;  // 4.2 ms x (retry_cnt + 1)
    o.retry_cnt = 2;
    Endpoint e(o);
    Address nobody = e.address();
    nobody.qpn = 0xabcde;  // nobody owns it
    e.connect(nobody);
    ASSERT_EQ(e.post_write(1, nobody, 0, 8, true), 0);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR) << wc_name(wc[0].status);
  }, {"FAKEVERBS_QUIET=1"});
}

TEST(Transport, ReceiverNotReady) {
  run_one([](Channel&) {
    EndpointOptions o;
    o.rnr_retry = 1;
    o.min_rnr_timer = 14;  // 1.28 ms
    Endpoint e(o);
    e.connect_self();
    ASSERT_EQ(e.post_send(1, 0, 8), 0);  // no receive posted
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_RNR_RETRY_EXC_ERR) << wc_name(wc[0].status);
  }, {"FAKEVERBS_QUIET=1"});
}

TEST(Transport, RnrRetryRecoversWhenReceivePosted) {
  auto a = [](Channel& ch) {
    Endpoint e;  // rnr_retry 7: retry forever
    e.connect_over(ch);
    ASSERT_EQ(e.post_send(1, 0, 8), 0);
    ch.sync();  // let B post its receive late
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
  };
  auto b = [](Channel& ch) {
    Endpoint e;
    e.connect_over(ch);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ASSERT_EQ(e.post_recv(1, 0, 64), 0);
    ch.sync();
    EXPECT_EQ(e.poll(1).size(), 1u);
  };
  run_pair(a, b);
}

TEST(Rendezvous, DeadPeerEntriesIgnoredAndSwept) {
  auto a = [](Channel& ch) {
    Endpoint e;
    ch.put(e.address());
    ch.put(int(getpid()));
    ch.sync();
    _exit(0);  // dies without destroying anything
  };
  auto b = [](Channel& ch) {
    Address dead = ch.get<Address>();
    int dead_pid = ch.get<int>();
    ch.sync();
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // A is gone
    EndpointOptions o;
    o.timeout = 10;
    o.retry_cnt = 1;
    Endpoint e(o);
    // Opening the directory swept the dead process's files and QPN links.
    DIR* d = opendir(getenv("FAKEVERBS_DIR"));
    ASSERT_NE(d, nullptr);
    int mine = 0;
    while (dirent* ent = readdir(d)) {
      std::string n = ent->d_name;
      EXPECT_NE(n.rfind(std::to_string(dead_pid) + ".", 0), 0u) << "dead entry kept: " << n;
      mine += n.rfind(std::to_string(getpid()) + ".", 0) == 0;
    }
    closedir(d);
    EXPECT_EQ(mine, 5);  // our MR table, CQ, QP, the MR's page record (placement.h), cmd_fd
    e.connect(dead);
    ASSERT_EQ(e.post_write(1, dead, 0, 8, true), 0);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_RETRY_EXC_ERR) << wc_name(wc[0].status);
  };
  run_pair(a, b, {"FAKEVERBS_QUIET=1"}, {"FAKEVERBS_QUIET=1"});
}

// Old behaviour: faults were counted per process only, so a test could not
// fail one node pair's write and leave the others alone ("fail_wr" was an
// unknown rule, ignored).
TEST(Faults, TargetedWrFailsOnlyThatPeerQp) {
  run_one([](Channel&) {
    Endpoint a, b;
    a.connect_self();
    b.connect_self();
    const std::string spec = "fail_wr=3@" + std::to_string(b.qp->qp_num) + ":rem_access";
    setenv("FAKEVERBS_FAULT", spec.c_str(), 1);  // learnt at run time: re-read
    Address sa = a.address(), sb = b.address();
    for (int i = 1; i <= 5; ++i) {
      ASSERT_EQ(a.post_write(i, sa, 0, 8, true, 1024), 0);
      ASSERT_EQ(b.post_write(i, sb, 0, 8, true, 1024), 0);
    }
    auto wa = a.poll(5);
    ASSERT_EQ(wa.size(), 5u);
    for (auto& w : wa) EXPECT_EQ(w.status, IBV_WC_SUCCESS) << "untargeted QP hit";
    auto wb = b.poll(5);
    ASSERT_EQ(wb.size(), 5u);
    EXPECT_EQ(wb[0].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wb[1].status, IBV_WC_SUCCESS);
    EXPECT_EQ(wb[2].status, IBV_WC_REM_ACCESS_ERR) << wc_name(wb[2].status);
    EXPECT_EQ(wb[2].wr_id, 3u);
    EXPECT_EQ(wb[3].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(b.qp_state(), IBV_QPS_ERR);
    unsetenv("FAKEVERBS_FAULT");
  }, {"FAKEVERBS_QUIET=1"});
}

// fail_prob draws from the QP's seeded stream: the same seed fails the same
// WRs (a failure replays).  Old behaviour: unknown rule, nothing failed.
TEST(Faults, ProbabilisticFaultReplaysFromSeed) {
  // Each run reports the index of its first failed WR through a pipe.
  auto run = [](const char* seed) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    run_one([&](Channel&) {
      Endpoint e;
      e.connect_self();
      Address self = e.address();
      int f = 0;
      for (int i = 1; i <= 40 && !f; ++i) {
        ASSERT_EQ(e.post_write(i, self, 0, 8, true, 1024), 0);
        auto wc = e.poll(1);
        ASSERT_EQ(wc.size(), 1u);
        if (wc[0].status != IBV_WC_SUCCESS) f = i;
      }
      EXPECT_EQ(write(fds[1], &f, sizeof f), ssize_t(sizeof f));
    }, {"FAKEVERBS_FAULT=fail_prob=0.2", std::string("FAKEVERBS_SEED=") + seed,
        "FAKEVERBS_QUIET=1"});
    int f = -1;
    EXPECT_EQ(read(fds[0], &f, sizeof f), ssize_t(sizeof f));
    close(fds[0]);
    close(fds[1]);
    return f;
  };
  int a = run("12345"), b = run("12345");
  EXPECT_GT(a, 0) << "p=0.2 never failed in 40 WRs";
  EXPECT_EQ(a, b) << "the same seed failed different WRs";
}
