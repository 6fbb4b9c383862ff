// fakeverbs behaves like an HCA in time and memory (issue 13): execution is
// asynchronous, placement within a write is unordered, keys are unpredictable,
// registration is limited by RLIMIT_MEMLOCK and pins pages.  Each test names
// the old (kinder-than-hardware) behaviour it fails on.
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "harness.h"

using namespace fvtest;

namespace {

using Clock = std::chrono::steady_clock;

// The fake's own counter (FAKEVERBS_PRIVATE): WRs that wrote into pages of
// this process remapped since their registration.
uint64_t stale_writes() {
  using Fn = uint64_t (*)();
  auto fn = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "fakeverbs_stale_writes"));
  if (!fn) ADD_FAILURE() << "fakeverbs_stale_writes not exported";
  return fn ? fn() : 0;
}

// Spins (yielding: 2 cores) until pred() or the deadline; returns pred().
template <class Pred>
bool wait_for(Pred pred, int ms = 5000) {
  auto end = Clock::now() + std::chrono::milliseconds(ms);
  while (!pred()) {
    if (Clock::now() > end) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

// Old behaviour: the write was executed inside ibv_post_send, so the data was
// always complete when the call returned.
TEST(Fidelity, PostReturnsBeforeDataMoves) {
  run_one([](Channel&) {
    EndpointOptions o;
    o.buf_size = 1 << 20;
    Endpoint e(o);
    e.connect_self();
    Address self = e.address();
    const size_t half = o.buf_size / 2;
    int incomplete = 0;
    for (int round = 1; round <= 10; ++round) {
      memset(e.buf, round, half);
      ASSERT_EQ(e.post_write(round, self, 0, half, true, half), 0);
      // Right after the post: has everything landed already?
      if (memcmp(e.buf, e.buf + half, half) != 0) ++incomplete;
      auto wc = e.poll(1);
      ASSERT_EQ(wc.size(), 1u);
      ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
      ASSERT_EQ(memcmp(e.buf, e.buf + half, half), 0) << "complete once polled";
    }
    EXPECT_GT(incomplete, 0) << "every write had landed before ibv_post_send returned";
  }, {"FAKEVERBS_JITTER_US=2000"});
}

// Old behaviour: work that could not run at post time (here: an injected
// delay) progressed only from the sender's own ibv_post_send/ibv_poll_cq, so a
// peer waiting on memory waited forever for a sender that does not poll.
TEST(Fidelity, PeerSeesDataWithoutSenderPolling) {
  auto a = [](Channel& ch) {
    Endpoint e;
    Address peer = e.connect_over(ch);
    memset(e.buf, 0x42, 64);
    ASSERT_EQ(e.post_write(1, peer, 0, 64, true), 0);
    ch.sync();  // blocks in read(): no verbs call until B saw the data
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  };
  auto b = [](Channel& ch) {
    Endpoint e;
    e.connect_over(ch);
    volatile uint8_t* last = e.buf + 63;
    EXPECT_TRUE(wait_for([&] { return *last == 0x42; })) << "data never arrived";
    ch.sync();
  };
  run_pair(a, b, {"FAKEVERBS_FAULT=delay_us=1000"}, {});
}

// Old behaviour: bytes of one write landed in ascending order, so polling the
// last byte "worked".  Now the last byte may land first (placement.h): a
// consumer that treats it as a completion reads a partly written buffer.
TEST(Fidelity, PollingLastByteIsNotACompletion) {
  constexpr size_t kLen = 1 << 20;
  constexpr int kRounds = 12;
  auto writer = [](Channel& ch) {
    EndpointOptions o;
    o.buf_size = kLen;
    Endpoint e(o);
    Address peer = e.connect_over(ch);
    for (int r = 1; r <= kRounds; ++r) {
      memset(e.buf, r, kLen);
      ASSERT_EQ(e.post_write(r, peer, 0, kLen, true), 0);
      auto wc = e.poll(1);
      ASSERT_EQ(wc.size(), 1u);
      ch.sync();
    }
  };
  auto reader = [](Channel& ch) {
    EndpointOptions o;
    o.buf_size = kLen;
    Endpoint e(o);
    e.connect_over(ch);
    int torn = 0;
    for (int r = 1; r <= kRounds; ++r) {
      volatile uint8_t* last = e.buf + kLen - 1;
      ASSERT_TRUE(wait_for([&] { return *last == uint8_t(r); }));
      size_t behind = 0;
      for (size_t i = 0; i < kLen; i += 64) behind += e.buf[i] != uint8_t(r);
      torn += behind != 0;
      ch.sync();
    }
    EXPECT_GT(torn, 0) << "the last byte never arrived before the rest in 12 writes of 1 MiB";
  };
  run_pair(writer, reader);
}

// Old behaviour: the source buffer was copied inside ibv_post_send, so reusing
// it before the completion was harmless.  On hardware (and now) the HCA reads
// it later, and the peer receives the new contents.
TEST(Fidelity, BufferReuseBeforeCompletionCorruptsPeer) {
  constexpr int kRounds = 10;
  auto writer = [](Channel& ch) {
    Endpoint e;
    Address peer = e.connect_over(ch);
    for (int r = 0; r < kRounds; ++r) {
      memset(e.buf, 'A', 1024);
      ASSERT_EQ(e.post_write(r, peer, 0, 1024, true), 0);
      memset(e.buf, 'B', 1024);  // the bug: reuse before the completion
      ASSERT_EQ(e.poll(1).size(), 1u);
      ch.sync();
      ch.sync();
    }
  };
  auto target = [](Channel& ch) {
    Endpoint e;
    e.connect_over(ch);
    int corrupted = 0;
    for (int r = 0; r < kRounds; ++r) {
      ch.sync();
      for (int i = 0; i < 1024; ++i)
        if (e.buf[i] != 'A') {
          ++corrupted;
          break;
        }
      memset(e.buf, 0, 1024);
      ch.sync();
    }
    EXPECT_GT(corrupted, 0) << "reusing the source before its completion never showed";
  };
  run_pair(writer, target, {"FAKEVERBS_JITTER_US=200"}, {});
}

// Old behaviour: every WR executed at its post, so a WR posted earlier on one
// QP was always done before a WR posted later on another QP.
TEST(Fidelity, QueuePairsProgressIndependently) {
  run_one([](Channel&) {
    Endpoint e1, e2;
    e1.connect_self();
    e2.connect_self();
    Address a1 = e1.address(), a2 = e2.address();
    int overtaken = 0;
    for (int r = 0; r < 40; ++r) {
      ASSERT_EQ(e1.post_write(r, a1, 0, 64, true, 2048), 0);
      ASSERT_EQ(e2.post_write(r, a2, 0, 64, true, 2048), 0);
      ibv_wc wc;
      ASSERT_TRUE(wait_for([&] { return ibv_poll_cq(e2.cq, 1, &wc) == 1; }));
      if (ibv_poll_cq(e1.cq, 1, &wc) == 0) {  // the earlier WR is not done yet
        ++overtaken;
        ASSERT_TRUE(wait_for([&] { return ibv_poll_cq(e1.cq, 1, &wc) == 1; }));
      }
    }
    EXPECT_GT(overtaken, 0) << "a later WR of another QP never completed first";
  }, {"FAKEVERBS_JITTER_US=500"});
}

// Old behaviour: keys were slot 1, tag 1, ... in registration order, so two
// processes registering alike got the same keys and one leader's rkey was
// accepted by the other.
TEST(Fidelity, AnotherProcessRkeyIsRejected) {
  // Both register the same size, in the same order, at the same address.
  auto setup = [](Endpoint& e, void** p, ibv_mr** mr) {
    void* fixed = reinterpret_cast<void*>(0x6f0000000000ull);
    *p = mmap(fixed, 8192, PROT_READ | PROT_WRITE,
              MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    ASSERT_EQ(*p, fixed);
    *mr = ibv_reg_mr(e.pd, *p, 8192, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(*mr, nullptr);
  };
  auto a = [&](Channel& ch) {
    Endpoint e;
    void* p = nullptr;
    ibv_mr* mr = nullptr;
    setup(e, &p, &mr);
    Address peer = e.connect_over(ch);
    uint32_t peer_rkey = ch.get<uint32_t>();
    EXPECT_NE(peer_rkey, mr->rkey) << "keys are predictable";
    // The bug: our own rkey (another leader's, for the peer) at the peer's
    // address.
    peer.addr = uintptr_t(p);
    peer.rkey = mr->rkey;
    ASSERT_EQ(e.post_write(1, peer, 0, 8, true), 0);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR) << wc_name(wc[0].status);
    ch.sync();
    ASSERT_EQ(ibv_dereg_mr(mr), 0);
    munmap(p, 8192);
  };
  auto b = [&](Channel& ch) {
    Endpoint e;
    void* p = nullptr;
    ibv_mr* mr = nullptr;
    setup(e, &p, &mr);
    e.connect_over(ch);
    ch.put(mr->rkey);
    ch.sync();
    EXPECT_EQ(static_cast<uint8_t*>(p)[0], 0) << "written with another process's rkey";
    ASSERT_EQ(ibv_dereg_mr(mr), 0);
    munmap(p, 8192);
  };
  run_pair(a, b, {"FAKEVERBS_QUIET=1"}, {"FAKEVERBS_QUIET=1"});
}

// Old behaviour: RLIMIT_MEMLOCK was ignored.
TEST(Fidelity, MemlockExhaustionReturnsEnomem) {
  run_one([](Channel&) {
    Endpoint e;  // its own 4 KiB buffer is registered: one page pinned
    rlimit lim{64 * 1024, 64 * 1024};
    ASSERT_EQ(setrlimit(RLIMIT_MEMLOCK, &lim), 0);
    std::vector<uint8_t> a(40 * 1024), b(40 * 1024);
    ibv_mr* ma = ibv_reg_mr(e.pd, a.data(), a.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(ma, nullptr);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(e.pd, b.data(), b.size(), IBV_ACCESS_LOCAL_WRITE), nullptr);
    EXPECT_EQ(errno, ENOMEM);
    ASSERT_EQ(ibv_dereg_mr(ma), 0);  // gives the pages back
    ibv_mr* mb = ibv_reg_mr(e.pd, b.data(), b.size(), IBV_ACCESS_LOCAL_WRITE);
    ASSERT_NE(mb, nullptr);
    ASSERT_EQ(ibv_dereg_mr(mb), 0);
  }, {"FAKEVERBS_QUIET=1"});
}

// Old behaviour: no way to fail a registration on purpose.
TEST(Fidelity, FaultFailsTheKthRegistration) {
  run_one([](Channel&) {
    Endpoint e;  // registration 1
    std::vector<uint8_t> a(4096);
    errno = 0;
    EXPECT_EQ(ibv_reg_mr(e.pd, a.data(), a.size(), IBV_ACCESS_LOCAL_WRITE), nullptr);  // 2
    EXPECT_EQ(errno, ENOMEM);
    ibv_mr* m = ibv_reg_mr(e.pd, a.data(), a.size(), IBV_ACCESS_LOCAL_WRITE);  // 3
    ASSERT_NE(m, nullptr);
    ASSERT_EQ(ibv_dereg_mr(m), 0);
  }, {"FAKEVERBS_FAULT=fail_reg=2", "FAKEVERBS_QUIET=1"});
}

// Old behaviour: ibv_reg_mr_iova with iova != addr failed with EOPNOTSUPP.
// Both the local SGE and the remote address are in the MR's IOVA space.
TEST(Fidelity, RegMrIovaTranslatesLocalAndRemote) {
  run_one([](Channel&) {
    Endpoint e;
    e.connect_self();
    std::vector<uint8_t> mem(8192, 0);
    const uint64_t iova = 0x10000;
    ibv_mr* mr = ibv_reg_mr_iova(e.pd, mem.data(), mem.size(), iova,
                                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(mr, nullptr);
    memset(mem.data() + 100, 0x3c, 50);
    ibv_sge sge{iova + 100, 50, mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = iova + 5000;
    wr.wr.rdma.rkey = mr->rkey;
    ASSERT_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
    for (int i = 0; i < 50; ++i) ASSERT_EQ(mem[5000 + i], 0x3c) << i;
    // The virtual address is not an IOVA of this MR.
    wr.wr.rdma.remote_addr = uintptr_t(mem.data());
    ASSERT_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
    wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_REM_ACCESS_ERR) << wc_name(wc[0].status);
    EXPECT_EQ(e.qp_state(), IBV_QPS_ERR);
    ASSERT_EQ(ibv_dereg_mr(mr), 0);
  }, {"FAKEVERBS_QUIET=1"});
}

// Registration pins pages.  Old behaviour: a write through the old MR landed
// in whatever memory was now at that address (munmap+mmap, DONTNEED) or
// failed with IBV_WC_REM_ACCESS_ERR (mremap away).  Hardware writes the old
// pinned pages: the completion succeeds and the new memory is untouched.
enum class Remap { kMunmapMmap, kDontNeed, kMremap };

class StaleRegistration : public ::testing::TestWithParam<Remap> {};

TEST_P(StaleRegistration, WriteThroughOldMrIsLostAndCounted) {
  const Remap how = GetParam();
  if (how != Remap::kMremap && !page_frames_readable())
    GTEST_SKIP() << "page frame numbers unreadable (not root): a page replaced at the same "
                    "address cannot be told from the registered one";
  run_one([how](Channel&) {
    Endpoint e;
    e.connect_self();
    const size_t len = 2 * 4096;
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(p, MAP_FAILED);
    memset(p, 0, len);
    ibv_mr* mr = ibv_reg_mr(e.pd, p, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(mr, nullptr);
    Address target = e.address();
    target.addr = uintptr_t(p);
    target.rkey = mr->rkey;
    memset(e.buf, 0x5a, 256);
    // Fresh registration: the write lands, nothing is stale.
    ASSERT_EQ(e.post_write(1, target, 0, 256, true), 0);
    ASSERT_EQ(e.poll(1).size(), 1u);
    EXPECT_EQ(static_cast<uint8_t*>(p)[255], 0x5a);
    EXPECT_EQ(stale_writes(), 0u);
    void* now = p;
    size_t now_len = len;
    bool old_still_mapped = how != Remap::kMremap;
    switch (how) {
      case Remap::kMunmapMmap:
        ASSERT_EQ(munmap(p, len), 0);
        now = mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
        ASSERT_EQ(now, p);
        memset(now, 0, len);  // the application's new data
        break;
      case Remap::kDontNeed:
        ASSERT_EQ(madvise(p, len, MADV_DONTNEED), 0);
        memset(now, 0, len);
        break;
      case Remap::kMremap:
        // DONTUNMAP leaves empty pages at the old address; without it the
        // old range is gone.
        now = mremap(p, len, len, MREMAP_MAYMOVE | MREMAP_DONTUNMAP);
        old_still_mapped = now != MAP_FAILED;
        if (now == MAP_FAILED) now = mremap(p, len, now_len = 2 * len, MREMAP_MAYMOVE);
        ASSERT_NE(now, MAP_FAILED);
        ASSERT_NE(now, p);
        break;
    }
    memset(e.buf, 0x77, 256);
    ASSERT_EQ(e.post_write(2, target, 0, 256, true), 0);
    auto wc = e.poll(1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status) << " (hardware succeeds)";
    EXPECT_EQ(stale_writes(), 1u);
    if (old_still_mapped) {
      for (int i = 0; i < 256; ++i)
        ASSERT_NE(static_cast<uint8_t*>(p)[i], 0x77) << "write landed in the new memory";
    }
    ASSERT_EQ(ibv_dereg_mr(mr), 0);
    munmap(now, now_len);
    if (now != p) munmap(p, len);
  }, {"FAKEVERBS_QUIET=1"});
}

INSTANTIATE_TEST_SUITE_P(Fake, StaleRegistration,
                         ::testing::Values(Remap::kMunmapMmap, Remap::kDontNeed, Remap::kMremap),
                         [](const ::testing::TestParamInfo<Remap>& info) {
                           return std::string(info.param == Remap::kMunmapMmap ? "MunmapMmap"
                                              : info.param == Remap::kDontNeed ? "DontNeed"
                                                                               : "Mremap");
                         });

// FAKEVERBS_STALE=abort stops the executing process at the stale write.
// Old behaviour: the write landed in the new page and the process went on.
TEST(Fidelity, StaleAbortMode) {
  char dir[] = "/dev/shm/fakeverbs-abort-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  pid_t child = fork();
  if (child == 0) {
    setenv("FAKEVERBS_DIR", dir, 1);
    setenv("FAKEVERBS_STALE", "abort", 1);
    setenv("FAKEVERBS_QUIET", "1", 1);
    Endpoint e;
    e.connect_self();
    void* p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ibv_mr* mr = ibv_reg_mr(e.pd, p, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!mr) _exit(3);
    Address t = e.address();
    t.addr = uintptr_t(p);
    t.rkey = mr->rkey;
    madvise(p, 4096, MADV_DONTNEED);
    if (e.post_write(1, t, 0, 64, true) != 0) _exit(4);
    e.poll(1, 3000);
    _exit(0);  // not reached when the fake aborts
  }
  int st = 0;
  ASSERT_EQ(waitpid(child, &st, 0), child);
  EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT)
      << "the process writing into a stale page was not aborted (status " << st << ")";
  std::string rm = std::string("rm -rf '") + dir + "'";
  EXPECT_EQ(system(rm.c_str()), 0);
}

// IBV_SEND_FENCE (man ibv_post_send; IB spec 10.8.3.3): a WR with the fence
// indicator waits for the responses of earlier RDMA READ/atomics of its QP;
// one without it may execute before they arrived.  READ into L then WRITE
// from L: unfenced, the write may send L's old contents; fenced, never.
// Old behaviour: every WR finished before the next started, so the unfenced
// write always sent the read data.
TEST(Fidelity, WriteAfterReadNeedsFence) {
  run_one([](Channel&) {
    Endpoint e;
    e.connect_self();
    Address self = e.address();
    auto round = [&](int r, bool fence) {
      memset(e.buf + 2048, r, 64);  // what the READ fetches
      memset(e.buf, 0xee, 64);      // L before the READ lands
      memset(e.buf + 1024, 0, 64);  // T
      EXPECT_EQ(e.post_write(1, self, 0, 64, true, 2048, IBV_WR_RDMA_READ), 0);
      EXPECT_EQ(e.post_write(2, self, 0, 64, true, 1024, IBV_WR_RDMA_WRITE, 0,
                             fence ? unsigned(IBV_SEND_FENCE) : 0u), 0);
      auto wc = e.poll(2);
      EXPECT_EQ(wc.size(), 2u);
      if (wc.size() == 2) {
        EXPECT_EQ(wc[0].wr_id, 1u);  // completions stay in posting order
        EXPECT_EQ(wc[1].wr_id, 2u);
      }
      return e.buf[1024];
    };
    int old_sent = 0;
    for (int r = 1; r <= 30; ++r) old_sent += round(r, false) == 0xee;
    EXPECT_GT(old_sent, 0) << "an unfenced WRITE never overtook the READ before it";
    for (int r = 1; r <= 30; ++r) ASSERT_EQ(round(r, true), r) << "fenced WRITE sent stale data";
  }, {"FAKEVERBS_JITTER_US=500"});
}

// Completion channels (man ibv_req_notify_cq, ibv_get_cq_event): the
// receiver sleeps in ibv_get_cq_event until the peer's SEND completes into
// its CQ; solicited_only waits for a SEND with IBV_SEND_SOLICITED; events
// are acknowledged before the CQ is destroyed.  Old behaviour:
// ibv_create_comp_channel failed with EOPNOTSUPP.
TEST(Fidelity, CompletionChannelWakesTheReceiver) {
  auto sender = [](Channel& ch) {
    Endpoint e;
    e.connect_over(ch);
    ch.sync();  // the receiver is armed and asleep
    ASSERT_EQ(e.post_send(1, 0, 16), 0);
    ch.sync();
    ASSERT_EQ(e.post_send(2, 0, 16), 0);  // not solicited: must not wake
    ibv_sge sge{uintptr_t(e.buf), 16, e.mr->lkey};
    ibv_send_wr wr{}, *bad = nullptr;
    wr.wr_id = 3;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
    ASSERT_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
    EXPECT_EQ(e.poll(3).size(), 3u);
    ch.sync();
  };
  auto receiver = [](Channel& ch) {
    EndpointOptions o;
    o.comp_channel = true;
    Endpoint e(o);
    e.connect_over(ch, [&] {
      for (int i = 0; i < 3; ++i) ASSERT_EQ(e.post_recv(10 + i, 0, 64), 0);
    });
    ASSERT_EQ(ibv_req_notify_cq(e.cq, 0), 0);
    ch.sync();
    ibv_cq* cq = nullptr;
    void* cq_ctx = nullptr;
    ASSERT_EQ(ibv_get_cq_event(e.channel, &cq, &cq_ctx), 0);  // blocks until the SEND
    EXPECT_EQ(cq, e.cq);
    ibv_wc wc;
    ASSERT_EQ(ibv_poll_cq(e.cq, 1, &wc), 1);
    EXPECT_EQ(wc.wr_id, 10u);
    // Solicited only: the plain SEND (wr 2) completes but does not wake us.
    ASSERT_EQ(ibv_req_notify_cq(e.cq, 1), 0);
    ch.sync();
    ASSERT_EQ(ibv_get_cq_event(e.channel, &cq, &cq_ctx), 0);
    ibv_wc two[2];
    int got = 0;
    for (int i = 0; i < 1000 && got < 2; ++i) got += ibv_poll_cq(e.cq, 2 - got, two + got);
    ASSERT_EQ(got, 2);
    EXPECT_EQ(two[1].wr_id, 12u) << "woken before the solicited SEND";
    EXPECT_EQ(ibv_destroy_cq(e.cq), EBUSY) << "events not acknowledged";
    ibv_ack_cq_events(e.cq, 2);
    ch.sync();
  };
  run_pair(sender, receiver, {}, {"FAKEVERBS_QUIET=1"});
}

// Shared protection domain (man ibv_import_device, ibv_import_pd,
// ibv_import_mr): A passes its context's cmd_fd over the Unix socket; B
// imports the device, A's PD and A's MR, creates a QP on that PD and posts a
// WRITE from A's MR into A's MR -- B moves A's memory with A's keys, as the
// shared-PD zero-copy path does.  Old behaviour: ibv_import_device was an
// abort stub.
TEST(Fidelity, ImportPdLetsAnotherProcessPostFromItsMr) {
  auto owner = [](Channel& ch) {
    Endpoint e;  // A's context, PD and registered buffer
    for (int i = 0; i < 64; ++i) e.buf[i] = uint8_t(0x40 + i);
    ASSERT_GE(e.ctx->cmd_fd, 0);
    ch.send_fd(e.ctx->cmd_fd);
    ch.put(e.pd->handle);
    ch.put(e.mr->handle);
    ch.sync();  // B posted and completed
    for (int i = 0; i < 64; ++i) ASSERT_EQ(e.buf[1024 + i], uint8_t(0x40 + i)) << i;
    ch.sync();  // B released its imports
  };
  auto importer = [](Channel& ch) {
    int fd = ch.recv_fd();
    ASSERT_GE(fd, 0);
    uint32_t pd_handle = ch.get<uint32_t>(), mr_handle = ch.get<uint32_t>();
    ibv_context* ctx = ibv_import_device(fd);
    close(fd);
    ASSERT_NE(ctx, nullptr);
    ibv_pd* pd = ibv_import_pd(ctx, pd_handle);
    ASSERT_NE(pd, nullptr);
    EXPECT_EQ(ibv_import_pd(ctx, pd_handle ^ 1), nullptr) << "unknown PD handle accepted";
    ibv_mr* mr = ibv_import_mr(pd, mr_handle);
    ASSERT_NE(mr, nullptr);
    {
      EndpointOptions o;
      o.shared_pd = pd;
      Endpoint e(o);
      e.connect_self();
      ibv_sge sge{uintptr_t(mr->addr), 64, mr->lkey};  // A's address, A's key
      ibv_send_wr wr{}, *bad = nullptr;
      wr.wr_id = 7;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.rdma.remote_addr = uintptr_t(mr->addr) + 1024;
      wr.wr.rdma.rkey = mr->rkey;
      ASSERT_EQ(ibv_post_send(e.qp, &wr, &bad), 0);
      auto wc = e.poll(1);
      ASSERT_EQ(wc.size(), 1u);
      EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS) << wc_name(wc[0].status);
      ch.sync();
      EXPECT_EQ(ibv_dereg_mr(mr), EINVAL) << "only the owner deregisters";
    }
    ibv_unimport_mr(mr);
    ibv_unimport_pd(pd);
    EXPECT_EQ(ibv_close_device(ctx), 0);
    ch.sync();
  };
  run_pair(owner, importer, {}, {"FAKEVERBS_QUIET=1"});
}
