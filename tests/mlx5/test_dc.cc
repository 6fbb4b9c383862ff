// The DC leader transport (issue 39, item 2; core/mlx5/dc_transport.h) over
// fakeverbs' DC: four forked leaders, each partnered with the other three.
// Set-up makes one DCT and at most kMaxDcis DCIs whatever the partners and no
// RC endpoint; rounds of both parities carry headers and data that land
// where and as written; a message's header, written on its DCI before the
// data's write with immediate, is in place when the arrival is counted (the
// DCI's stream is in order; fakeverbs jitters every WR); and RC over its
// budget says so alike on every leader.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/hier/transport.h"
#include "core/mlx5/dc_transport.h"
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/rdma_transport.h"
#include "tests/mlx5/fork_group.h"
#include "tests/mlx5/rdma_fixture.h"
#include "tests/mlx5/socket_relay.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::mlx5 {
namespace {

constexpr int kLeaders = 4;
constexpr int kMaxLeaders = 6;        // the relay test's: more partners than DCIs
constexpr std::size_t kSlice = 1024;  // bytes per partner and round
constexpr std::size_t kHeadAt = kMaxLeaders * kSlice;
constexpr std::size_t kArea = kHeadAt + kMaxLeaders * sizeof(hier::Header);
constexpr int kRounds = 40;

unsigned char pattern(int from, int to, int round, std::size_t i) {
  return static_cast<unsigned char>(from * 31 + to * 7 + round * 13 + i);
}

struct Areas {
  std::vector<char> in[2], out[2];
  hier::StageAreas view;
  Areas() {
    for (int p = 0; p < 2; ++p) {
      in[p].assign(kArea, 0);
      out[p].assign(kArea, 0);
      view.in[p] = in[p].data();
      view.out[p] = out[p].data();
    }
    view.bytes = kArea;
  }
};

// Round r's messages of leader `me`: slice `to` of the in-area goes to slice
// `me` of partner `to`'s out-area, its header (message_bytes = r) before it.
std::vector<hier::Message> messages(Areas& a, int me, int r, int leaders = kLeaders) {
  const int par = r & 1;
  std::vector<hier::Message> ms;
  for (int k = 1; k < leaders; ++k) {
    const int to = (me + k) % leaders;
    char* in = a.in[par].data();
    for (std::size_t i = 0; i < kSlice; ++i) in[to * kSlice + i] = static_cast<char>(pattern(me, to, r, i));
    auto* head = reinterpret_cast<hier::Header*>(in + kHeadAt + std::size_t(to) * sizeof(hier::Header));
    *head = hier::Header{kSlice, 0, static_cast<std::uint64_t>(r)};
    hier::Message m{};
    m.node = to;
    m.leader = 0;
    m.send = in + to * kSlice;
    m.recv = a.out[par].data() + to * kSlice;
    m.bytes = kSlice;
    m.remote_offset = std::size_t(me) * kSlice;
    m.parity = par;
    m.head_send = head;
    m.head_recv = reinterpret_cast<hier::Header*>(a.out[par].data() + kHeadAt +
                                                  std::size_t(to) * sizeof(hier::Header));
    m.head_remote_offset = kHeadAt + std::size_t(me) * sizeof(hier::Header);
    m.recv_capacity = kSlice;
    ms.push_back(m);
  }
  return ms;
}

bool check_round(const Areas& a, int me, int r, int leaders = kLeaders) {
  const int par = r & 1;
  for (int from = 0; from < leaders; ++from) {
    if (from == me) continue;
    const char* out = a.out[par].data();
    const auto* head = reinterpret_cast<const hier::Header*>(out + kHeadAt +
                                                             std::size_t(from) * sizeof(hier::Header));
    if (head->message_bytes != std::uint64_t(r) || head->bytes_per_peer != kSlice) {
      std::fprintf(stderr, "leader %d round %d: header from %d says round %llu\n", me, r, from,
                   static_cast<unsigned long long>(head->message_bytes));
      return false;
    }
    for (std::size_t i = 0; i < kSlice; ++i) {
      if (static_cast<unsigned char>(out[std::size_t(from) * kSlice + i]) != pattern(from, me, r, i)) {
        std::fprintf(stderr, "leader %d round %d: byte %zu from %d wrong\n", me, r, i, from);
        return false;
      }
    }
  }
  return true;
}

bool barrier(GroupBootstrap& group) {
  int word = 0;
  std::vector<int> all(static_cast<std::size_t>(group.size()));
  return group.allgather(&word, all.data(), sizeof word);
}

int dc_leader(int me, const test::ForkGroupWiring& wiring) {
  test::ForkGroup group(wiring, me);
  std::vector<int> first_rank, peers;
  for (int m = 0; m < kLeaders; ++m) {
    first_rank.push_back(m);
    if (m != me) peers.push_back(m);
  }
  Areas a;
  std::unique_ptr<DcLeaderTransport> t;
  std::string why;
  const Status st = DcLeaderTransport::create(group, a.view, first_rank, peers,
                                              test::test_options(), &t, &why);
  if (st != Status::ok) std::fprintf(stderr, "leader %d: %s\n", me, why.c_str());
  FT_CHECK(st == Status::ok);
  FT_CHECK(t->qps() == 1 + DcLeaderTransport::kMaxDcis - 1);  // 3 partners: 3 DCIs + the DCT
  FT_CHECK(std::strcmp(t->name(), "dc") == 0);
  FT_CHECK(EndpointPool::stats().qps_live == 0);  // no RC endpoint at all
  FT_CHECK(t->ping(&why));
  for (int r = 0; r < kRounds; ++r) {
    const std::vector<hier::Message> ms = messages(a, me, r);
    FT_CHECK(t->post(ms) == Status::ok);
    FT_CHECK(t->complete() == Status::ok);
    FT_CHECK(check_round(a, me, r));
    // Every leader has checked round r before anyone writes round r + 2's
    // parity into it again (the engine's node barrier does this).
    FT_CHECK(barrier(group));
  }
  t.reset();
  EndpointPool::shutdown();
  return 0;
}

TEST(Dc, SetUpAndRoundsOfDataOverDctAndDcis) {
  test::ForkGroupWiring wiring(kLeaders);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked(kLeaders, [&](shm::test::ForkBootstrap& boot) {
    return dc_leader(boot.local_rank(), wiring);
  }, 120);
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// A DC write that goes with a wrong access key (FAKEVERBS_FAULT dc_bad_key,
// as after a partner's DCT was replaced): the partner's DCT drops it, our
// DCI retries out and our call fails; the partner, waiting for it, times out;
// nothing landed; nobody hangs and the transports stay failed.
int wrong_key_leader(int me, const test::ForkGroupWiring& wiring) {
  if (me == 0) setenv("FAKEVERBS_FAULT", "dc_bad_key=1", 1);
  test::ForkGroup group(wiring, me);
  const int first_rank[2] = {0, 1};
  const int peers[1] = {1 - me};
  Areas a;
  std::unique_ptr<DcLeaderTransport> t;
  std::string why;
  FT_CHECK(DcLeaderTransport::create(group, a.view, first_rank, peers, test::test_options(), &t,
                                     &why) == Status::ok);
  hier::Message m{};
  m.node = 1 - me;
  m.send = a.in[0].data();
  m.recv = a.out[0].data();
  m.bytes = kSlice;
  std::memset(a.in[0].data(), 'k', kSlice);
  const Status st = t->exchange({&m, 1});
  FT_CHECK(st == (me == 0 ? Status::net_failed : Status::timeout));
  // Both have returned before either's DCT goes (leader 0 fails within ~4 ms,
  // leader 1's write may land after that).
  FT_CHECK(barrier(group));
  // Leader 0's message never landed; leader 1's (right key) did.
  FT_CHECK(a.out[0][0] == (me == 0 ? 'k' : 0));
  FT_CHECK(t->exchange({&m, 1}) == Status::net_failed);  // broken from now on
  t.reset();
  EndpointPool::shutdown();
  return 0;
}

// The set-up's ping finds a key the partner's DCT refuses (before any call).
int ping_leader(int me, const test::ForkGroupWiring& wiring) {
  if (me == 0) setenv("FAKEVERBS_FAULT", "dc_bad_key=1", 1);
  test::ForkGroup group(wiring, me);
  const int first_rank[2] = {0, 1};
  const int peers[1] = {1 - me};
  Areas a;
  std::unique_ptr<DcLeaderTransport> t;
  std::string why;
  FT_CHECK(DcLeaderTransport::create(group, a.view, first_rank, peers, test::test_options(), &t,
                                     &why) == Status::ok);
  const bool pinged = t->ping(&why);
  // As the engine's agreement after the ping: nobody's DCT goes before every
  // ping ended (leader 0's fails within ~4 ms, leader 1's may come later).
  FT_CHECK(barrier(group));
  FT_CHECK(pinged == (me == 1));
  if (me == 0) FT_CHECK(why.find("a DCT refused its key") != std::string::npos);
  t.reset();
  EndpointPool::shutdown();
  return 0;
}

TEST(Dc, TheSetUpPingFindsARefusedKey) {
  test::ForkGroupWiring wiring(2);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked(2, [&](shm::test::ForkBootstrap& boot) {
    return ping_leader(boot.local_rank(), wiring);
  }, 60);
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

TEST(Dc, AWrongAccessKeyFailsTheCallOnBothEnds) {
  test::ForkGroupWiring wiring(2);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked(2, [&](shm::test::ForkBootstrap& boot) {
    return wrong_key_leader(boot.local_rank(), wiring);
  }, 60);
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// Failure transparency (docs/hier-transports.md, "Errors on DC"): six
// leaders (five partners on four DCIs: one DCI serves two) with a relay
// between them, as the engine gives one (here socketpairs). Leader 0's
// sixth DC work request (after 5 pings: round 0's header to leader 1) goes
// with a wrong key: its DCI, which also serves leader 5, retries out and
// flushes leader 5's message; leader 1 relays from then on, leader 5 moves
// to another DCI and only its flushed message is relayed (41 in all).
// Leader 1's twentieth executed write completes with exhausted retries,
// leader 2's tenth post fails. Every round still completes with the right
// headers and data everywhere, each relayed copy counts once (a duplicate
// would break the partner's sequence), and every failed DCI is back in RTS
// at the end (its messages completed, it was reset).
int relayed_leader(int me, const test::ForkGroupWiring& wiring,
                   const test::SocketRelayWiring& relays) {
  if (me == 0) setenv("FAKEVERBS_FAULT", "dc_bad_key=6", 1);
  if (me == 1) setenv("FAKEVERBS_FAULT", "retry_exc=20", 1);
  if (me == 2) setenv("FAKEVERBS_FAULT", "fail_post=10", 1);
  test::ForkGroup group(wiring, me);
  std::vector<int> first_rank, peers;
  for (int m = 0; m < kMaxLeaders; ++m) {
    first_rank.push_back(m);
    if (m != me) peers.push_back(m);
  }
  Areas a;
  std::unique_ptr<DcLeaderTransport> t;
  std::string why;
  FT_CHECK(DcLeaderTransport::create(group, a.view, first_rank, peers, test::test_options(), &t,
                                     &why) == Status::ok);
  FT_CHECK(t->qps() == 1 + DcLeaderTransport::kMaxDcis);
  FT_CHECK(t->ping(&why));
  FT_CHECK(barrier(group));  // every ping done before any fault rule counts
  auto relay = std::make_unique<test::SocketRelay>(relays, me);
  const test::SocketRelay* view = relay.get();
  std::unique_ptr<hier::Relay> given = std::move(relay);
  FT_CHECK(t->set_relay(given) && !given);
  for (int r = 0; r < kRounds; ++r) {
    const std::vector<hier::Message> ms = messages(a, me, r, kMaxLeaders);
    FT_CHECK(t->post(ms) == Status::ok);
    FT_CHECK(t->complete() == Status::ok);
    FT_CHECK(check_round(a, me, r, kMaxLeaders));
    FT_CHECK(barrier(group));
  }
  if (me <= 2) FT_CHECK(view->sent() >= 1);
  // Each failed DCI went back to RTS once its messages had completed.
  FT_CHECK(t->live_dcis() == DcLeaderTransport::kMaxDcis);
  if (me == 0 && view->sent() != kRounds + 1) {
    std::fprintf(stderr, "leader 0 relayed %zu messages\n", view->sent());
    FT_CHECK(false);
  }
  t.reset();
  EndpointPool::shutdown();
  return 0;
}

TEST(Dc, FailedWritesGoThroughTheRelay) {
  test::ForkGroupWiring wiring(kMaxLeaders);
  test::SocketRelayWiring relays(kMaxLeaders);
  ASSERT_TRUE(wiring.ok());
  ASSERT_TRUE(relays.ok());
  const auto res = shm::test::run_forked(kMaxLeaders, [&](shm::test::ForkBootstrap& boot) {
    return relayed_leader(boot.local_rank(), wiring, relays);
  }, 120);
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// RC's set-up tells every leader alike that RC is over the budget (the
// engine's cue to set up DC, core/mpi/hier_engine.cc).
int rc_leader(int me, const test::ForkGroupWiring& wiring, std::uint32_t budget, bool want_over) {
  test::ForkGroup group(wiring, me);
  std::vector<int> first_rank, peers;
  for (int m = 0; m < kLeaders; ++m) {
    first_rank.push_back(m);
    if (m != me) peers.push_back(m);
  }
  Areas a;
  NetOptions opt = test::test_options();
  opt.rc_qp_budget = me == 2 ? budget : 0;  // one leader's budget decides for all
  std::unique_ptr<RdmaLeaderTransport> t;
  std::string why;
  bool over = !want_over;
  const Status st = RdmaLeaderTransport::create(group, a.view, first_rank, peers, opt, &t, &why,
                                                &over);
  FT_CHECK(over == want_over);
  FT_CHECK((st == Status::ok) == !want_over);
  t.reset();
  // Over the budget, no leader keeps an RC QP from this set-up, not even
  // those within their own budget (their pairs were made, then dropped).
  FT_CHECK(EndpointPool::stats().qps_live == (want_over ? 0 : kLeaders - 1));
  EndpointPool::shutdown();
  return 0;
}

void rc_budget(std::uint32_t budget, bool want_over) {
  test::ForkGroupWiring wiring(kLeaders);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked(kLeaders, [&](shm::test::ForkBootstrap& boot) {
    return rc_leader(boot.local_rank(), wiring, budget, want_over);
  }, 60);
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

TEST(Dc, RcOverItsBudgetIsKnownToEveryLeader) {
  rc_budget(2, true);   // 3 partners need 3 RC QPs
  rc_budget(3, false);  // they fit
}

}  // namespace
}  // namespace mlxa2a::mlx5
