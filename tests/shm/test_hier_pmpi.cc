// The hierarchical alltoall beside PMPI_Alltoall (docs/hier.md "A rank sent
// to PMPI", docs/tune.md "What a pmpi trial times"), across forked "nodes"
// with the fake transport of hier_fake.h.
#include <gtest/gtest.h>

#include <chrono>

#include "tests/shm/hier_fake.h"

namespace mlxa2a::hier {
namespace {

using namespace fake;

// Correct calls beside PMPI (docs/hier.md "A rank sent to PMPI"): the
// shared state of LeaderSkipsItsNodeBarrier's forks.
struct BarrierProbe {
  PmpiStandIn pmpi;
  std::atomic<std::uint64_t> leaders_in{0};  // leaders' entries into the stand-in
};

struct LeaderCall {
  StandInCall call;
  BarrierProbe* probe;
};

void leader_enters_pmpi(void* p) {
  auto* c = static_cast<LeaderCall*>(p);
  c->probe->leaders_in.fetch_add(1, std::memory_order_acq_rel);
  enter_pmpi(&c->call);
}

// Alternates a real call (checked) with a call that every rank serves beside
// PMPI; in the latter each non-leader enters check() only once every leader
// is inside its PMPI call - or, after 2 s, late (its exit code counts them).
int beside_pmpi_rank(ForkBootstrap& boot, int rank, const Case& c, Mailboxes& boxes,
                     bool pipeline, BarrierProbe* probe) {
  const int n = static_cast<int>(c.node_of.size());
  const NodeMap map(c.node_of, c.leads);
  std::unique_ptr<HierAlltoall> engine;
  if (make_engine(boot, rank, c, map, boxes, -1, 0, pipeline, true, engine) != 0) return 100;
  const Plan& plan = engine->plan();
  const std::uint64_t leaders = static_cast<std::uint64_t>(map.nodes());
  int late = 0;
  for (int it = 0; it < 4; ++it) {
    const std::size_t bytes = it % 2 ? plan.max_chunk() + 10 : 100;  // 2 rounds, 1 round
    std::vector<unsigned char> send(n * bytes), recv(n * bytes, 0);
    shm::test::fill_send(send, rank, n, it, bytes);
    if (engine->run(send.data(), recv.data(), bytes) != Status::ok) return 100;
    if (!shm::test::check_recv(recv, rank, n, it, bytes)) return 100;
    const std::uint64_t want = static_cast<std::uint64_t>(it + 1);
    LeaderCall lc{{&probe->pmpi, want * static_cast<std::uint64_t>(n)}, probe};
    if (!plan.leader()) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (probe->leaders_in.load(std::memory_order_acquire) < want * leaders) {
        if (std::chrono::steady_clock::now() > until) {
          ++late;
          break;
        }
        sched_yield();
      }
    }
    const Status st = plan.leader() ? engine->check(bytes, true, leader_enters_pmpi, &lc)
                                    : engine->check(bytes, true, enter_pmpi, &lc.call);
    if (st != Status::ok || lc.call.calls != 1) return 100;
  }
  return late;
}

// A leader whose own call goes to PMPI skips its node barrier over a
// two-sided transport: its non-leaders, entering only once the leaders are
// in PMPI, are never late (with the barrier every one of them was, each
// call); and the real calls around stay right (serial and pipelined).
TEST(HierMixed, LeaderBesidePmpiSkipsItsNodeBarrier) {
  for (const bool pipeline : {false, true}) {
    SCOPED_TRACE(pipeline ? "pipelined" : "serial");
    const Case c{"2+3", {0, 0, 1, 1, 1}, {}};
    Mailboxes boxes(2, 1 << 20);
    ASSERT_TRUE(boxes.ok());
    void* mem = mmap(nullptr, sizeof(BarrierProbe), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    auto* probe = new (mem) BarrierProbe;
    const auto res = shm::test::run_forked_nodes(c.node_of, [&](ForkBootstrap& boot, int rank) {
      return beside_pmpi_rank(boot, rank, c, boxes, pipeline, probe);
    });
    EXPECT_FALSE(res.hung);
    for (int code : res.exit_codes) EXPECT_EQ(code, 0);  // else: late calls (or 100: wrong)
    munmap(mem, sizeof(BarrierProbe));
  }
}

// pmpi trials (HierAlltoall::trial): after the stand-in PMPI call every
// trial rank learns whether every rank of the team was in the trial with its
// size. Calls in turn: all in the trial (ok); `odd` in the trial with
// another size; `odd` routed beside PMPI (check(pmpi = true), same size);
// `odd` in the engine (it gets peer_in_pmpi and joins PMPI) - each of these
// size_mismatch on every trial rank. A real call (checked) after each.
int trial_rank(ForkBootstrap& boot, int rank, const Case& c, Mailboxes& boxes, bool pipeline,
               int odd, PmpiStandIn* pmpi) {
  const int n = static_cast<int>(c.node_of.size());
  const NodeMap map(c.node_of, c.leads);
  std::unique_ptr<HierAlltoall> engine;
  if (make_engine(boot, rank, c, map, boxes, -1, 0, pipeline, true, engine) != 0) return 1;
  for (int it = 0; it < 8; ++it) {
    const std::size_t bytes = it % 2 ? engine->plan().max_chunk() + 10 : 100;
    const int kind = it % 4;
    StandInCall call{pmpi, static_cast<std::uint64_t>(it + 1) * static_cast<std::uint64_t>(n)};
    Status st = Status::ok;
    if (rank != odd || kind == 0) {
      st = engine->trial(bytes, enter_pmpi, &call);
      FT_CHECK_STATUS(st, kind == 0 ? Status::ok : Status::size_mismatch);
    } else if (kind == 1) {
      FT_CHECK_STATUS(engine->trial(bytes + 1000, enter_pmpi, &call), Status::size_mismatch);
    } else if (kind == 2) {
      FT_CHECK_STATUS(engine->check(bytes, true, enter_pmpi, &call), Status::ok);
    } else {
      std::vector<unsigned char> send(n * bytes), recv(n * bytes);
      FT_CHECK_STATUS(engine->run(send.data(), recv.data(), bytes), Status::peer_in_pmpi);
      enter_pmpi(&call);
    }
    FT_CHECK(call.calls == 1);
    std::vector<unsigned char> send(n * bytes), recv(n * bytes, 0);
    shm::test::fill_send(send, rank, n, it, bytes);
    FT_CHECK_STATUS(engine->run(send.data(), recv.data(), bytes), Status::ok);
    FT_CHECK(shm::test::check_recv(recv, rank, n, it, bytes));
  }
  return 0;
}

TEST(HierTrial, MatchedOnlyWhenEveryRankIsInTheTrialWithOneSize) {
  for (const bool pipeline : {false, true}) {
    SCOPED_TRACE(pipeline ? "pipelined" : "serial");
    for (const OddCase& k : odd_rank_cases()) {
      SCOPED_TRACE(k.c.name);
      Mailboxes boxes(NodeMap(k.c.node_of, k.c.leads).nodes(), 1 << 20);
      ASSERT_TRUE(boxes.ok());
      void* mem = mmap(nullptr, sizeof(PmpiStandIn), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(mem, MAP_FAILED);
      auto* pmpi = new (mem) PmpiStandIn;
      const auto res =
          shm::test::run_forked_nodes(k.c.node_of, [&](ForkBootstrap& boot, int rank) {
            return trial_rank(boot, rank, k.c, boxes, pipeline, k.odd, pmpi);
          });
      EXPECT_FALSE(res.hung);
      for (int code : res.exit_codes) EXPECT_EQ(code, 0);
      munmap(mem, sizeof(PmpiStandIn));
    }
  }
}

}  // namespace
}  // namespace mlxa2a::hier
