// Send credits across teams sharing a queue pair (issue 27, item 2): a
// zero-copy message may fill the QP's whole send queue (kMaxGatherWrs WRs
// and its header), and teams in different threads share the QP, so their
// posts must take turns instead of meeting ENOMEM from ibv_post_send.
// Two forked leaders over fakeverbs, three transports each (one QP), one
// thread per transport exchanging full-queue gathers concurrently; every
// arrival is checked byte for byte, and the pool must have seen two of the
// threads waiting at once (no lock is held while waiting).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/hier/transport.h"
#include "core/mlx5/endpoint_pool.h"
#include "core/mlx5/rdma_transport.h"
#include "core/shm/status.h"
#include "tests/mlx5/fork_group.h"
#include "tests/mlx5/rdma_fixture.h"
#include "tests/shm/fork_team.h"

namespace mlxa2a::mlx5 {
namespace {

constexpr int kTeams = 3;
constexpr int kRounds = 12;
constexpr std::size_t kArea = 8192;

unsigned char pattern(int from, int team, int round, std::size_t i) {
  return static_cast<unsigned char>(from * 131 + team * 31 + round * 7 + i);
}

struct Team {
  std::vector<char> in[2], out[2];
  std::unique_ptr<RdmaLeaderTransport> t;
};

// One thread: kRounds exchanges of one gather message of `sources` one-byte
// staged rows, split into as many WRs as the send queue holds.
bool run_team(Team& tm, int me, int team, std::size_t sources) {
  std::vector<hier::GatherSource> src(sources);
  for (hier::GatherSource& s : src) s.staged = 1;
  const int dest[1] = {1 - me};
  hier::Gather g{src, dest, 1, 0, 1};
  for (int r = 0; r < kRounds; ++r) {
    const int par = r & 1;
    for (std::size_t i = 0; i < sources; ++i) tm.in[par][i] = static_cast<char>(pattern(me, team, r, i));
    hier::Message m{};
    m.node = 1 - me;
    m.leader = 0;
    m.send = tm.in[par].data();
    m.recv = tm.out[par].data();
    m.bytes = sources;
    m.remote_offset = 0;
    m.parity = par;
    m.gather = &g;
    const Status st = tm.t->exchange({&m, 1});
    if (st != Status::ok) {
      std::fprintf(stderr, "leader %d team %d round %d: %s\n", me, team, r, to_string(st));
      return false;
    }
    for (std::size_t i = 0; i < sources; ++i) {
      if (static_cast<unsigned char>(tm.out[par][i]) != pattern(1 - me, team, r, i)) {
        std::fprintf(stderr, "leader %d team %d round %d: byte %zu wrong\n", me, team, r, i);
        return false;
      }
    }
  }
  return true;
}

int leader(int me, const test::ForkGroupWiring& wiring) {
  test::ForkGroup group(wiring, me);
  const NetOptions opt = test::test_options();
  const int first_rank[2] = {0, 1};
  const int peers[1] = {1 - me};
  Team teams[kTeams];
  for (Team& tm : teams) {
    hier::StageAreas areas;
    for (int p = 0; p < 2; ++p) {
      tm.in[p].assign(kArea, 0);
      tm.out[p].assign(kArea, 0);
      areas.in[p] = tm.in[p].data();
      areas.out[p] = tm.out[p].data();
    }
    areas.bytes = kArea;
    std::string why;
    const Status st = RdmaLeaderTransport::create(group, areas, first_rank, peers, opt, &tm.t, &why);
    if (st != Status::ok) std::fprintf(stderr, "leader %d: %s\n", me, why.c_str());
    FT_CHECK(st == Status::ok);
  }
  FT_CHECK(EndpointPool::stats().qps_live == 1);  // all three share one QP
  // As many one-byte SGEs as fill the send queue with the header's slot.
  const std::size_t sources = RdmaLeaderTransport::kMaxGatherWrs * teams[0].t->gather_sge();
  FT_CHECK(sources <= kArea);
  bool ok[kTeams] = {};
  std::vector<std::thread> threads;
  for (int k = 0; k < kTeams; ++k) {
    threads.emplace_back([&, k] { ok[k] = run_team(teams[k], me, k, sources); });
  }
  for (std::thread& th : threads) th.join();
  for (bool b : ok) FT_CHECK(b);
  // The teams waited side by side: no lock is held while waiting (issue 39,
  // item 5; docs/hier-transports.md, "Threads").
  FT_CHECK(EndpointPool::stats().peak_waiters >= 2);
  for (Team& tm : teams) tm.t.reset();
  EndpointPool::shutdown();
  return 0;
}

// The credit ring alone (issue 39, item 5): one producer thread takes
// credits for messages of 1-8 WRs and "posts" them (tells the consumer, as
// the HCA's completion would), one consumer thread retires them as they
// complete, concurrently, 200,000 messages through a 64-deep queue
// (under ASan/UBSan in CI). Credits are never more than the queue, never
// lost, and every message is retired with exactly what it took.
TEST(SendCredits, RingOfOneProducerAndOneConsumerKeepsEveryCredit) {
  constexpr std::uint32_t kDepth = 64;
  constexpr std::uint32_t kMessages = 200'000;
  Endpoint ep;
  ep.sq_free = kDepth;
  ep.sq_groups.assign(kDepth, 0);
  std::atomic<std::uint32_t> completed{0};  // messages "the HCA" completed
  std::atomic<bool> bad{false};
  std::thread consumer([&] {
    for (std::uint32_t retired = 0; retired < kMessages;) {
      if (retired == completed.load(std::memory_order_acquire)) {
        std::this_thread::yield();  // CI's 2 cores: let the producer run
        continue;
      }
      ep.retire_send();
      ++retired;
      if (ep.sq_free.load() > kDepth) bad = true;
    }
  });
  std::uint64_t taken = 0;
  for (std::uint32_t m = 0; m < kMessages;) {
    const std::uint32_t wrs = 1 + (m * 2654435761u >> 29);  // 1..8
    if (!ep.take_send(wrs)) {
      std::this_thread::yield();
      continue;
    }
    taken += wrs;
    completed.store(++m, std::memory_order_release);
  }
  consumer.join();
  EXPECT_FALSE(bad.load());
  EXPECT_EQ(ep.sq_free.load(), kDepth);
  EXPECT_EQ(ep.sq_head.load(), ep.sq_tail.load());
  EXPECT_GT(taken, std::uint64_t{kMessages});
  ep.retire_send();  // a flushed WR's completion with nothing in flight: no change
  EXPECT_EQ(ep.sq_free.load(), kDepth);
}

TEST(SendCredits, TeamsInThreadsShareAFullSendQueueWithoutOverflow) {
  test::ForkGroupWiring wiring(2);
  ASSERT_TRUE(wiring.ok());
  const auto res = shm::test::run_forked(2, [&](shm::test::ForkBootstrap& boot) {
    return leader(boot.local_rank(), wiring);
  }, 60);
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace mlxa2a::mlx5
