// The hierarchical alltoall (core/hier) across several forked "nodes": each
// node has its own NodeStage, and the leaders exchange through a fake
// transport in shared memory, so the engine's fan-in, leader messages, rounds
// and fan-out are checked without MPI (the MPI transport is covered by the
// virtual-node tests in tests/mpi).
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/shm/hier_fake.h"

namespace mlxa2a::hier {
namespace {

using namespace fake;

struct Mixed {
  PmpiStandIn* pmpi;    // shared
  unsigned pmpi_ranks;  // bits: the ranks the rules send to PMPI in a mixed call
};

// One mixed call (every third call of run_rank): the ranks in pmpi_ranks
// announce `odd` beside the stand-in (check(pmpi = true)); the others run()
// with `bytes` - or, every third such call, check(pmpi = false) as the tuner
// does - and must get peer_in_pmpi and then enter the stand-in themselves;
// every fifth such call sends every rank to PMPI alike (a correct program).
// Every rank must enter the stand-in exactly once.
int mixed_call(HierAlltoall& engine, const Mixed& mx, int rank, int n, int mixed_no,
               std::size_t bytes, std::size_t odd, std::uint64_t* pmpi_calls) {
  const bool all = mixed_no % 5 == 4;
  const bool in_pmpi = all || ((mx.pmpi_ranks >> rank) & 1u);
  ++*pmpi_calls;
  StandInCall call{mx.pmpi, *pmpi_calls * static_cast<std::uint64_t>(n)};
  if (in_pmpi) {
    FT_CHECK_STATUS(engine.check(all ? bytes : odd, true, enter_pmpi, &call), Status::ok);
  } else {
    std::vector<unsigned char> send(n * bytes), recv(n * bytes, 0xee);
    const Status st = mixed_no % 3 == 2 ? engine.check(bytes, false, nullptr, nullptr)
                                        : engine.run(send.data(), recv.data(), bytes);
    FT_CHECK_STATUS(st, Status::peer_in_pmpi);
    // Nothing written: PMPI gets the receive buffer as the user left it.
    for (unsigned char b : recv) FT_CHECK(b == 0xee);
    enter_pmpi(&call);
  }
  FT_CHECK(call.calls == 1);
  return 0;
}

// odd_rank >= 0: every third call (it % 3 == 1) that rank calls with another
// size (another round count, or 1 against 5000 bytes); every rank must get
// size_mismatch, and the calls in between must be right.
int run_rank(ForkBootstrap& boot, int rank, const Case& c, Mailboxes& boxes, int fail_node,
             std::uint64_t fail_at, int iterations, bool pipeline = false, int odd_rank = -1,
             const Mixed* mixed = nullptr, bool two_sided = true) {
  const int n = static_cast<int>(c.node_of.size());
  const NodeMap map(c.node_of, c.leads);
  std::unique_ptr<HierAlltoall> engine;
  if (make_engine(boot, rank, c, map, boxes, fail_node, fail_at, pipeline, two_sided, engine) !=
      0) {
    return 1;
  }
  const Plan& plan = engine->plan();
  // Back to back with changing sizes: one round, then up to a dozen; both
  // sides of the 64-byte gate of the rows' rotation (core/hier/rows.h), also
  // in one call (a last round of 10 bytes).
  const std::size_t sizes[] = {1, 3, 8, 63, 64, 65, 100, 1000, 5000, plan.max_chunk() + 10};
  std::uint64_t pmpi_calls = 0;
  for (int it = 0; it < iterations; ++it) {
    std::size_t bytes = sizes[static_cast<std::size_t>(it) % std::size(sizes)];
    if (mixed && it % 3 == 1) {
      const std::size_t odd = bytes == 5000 ? 1 : bytes + 1000;
      if (mixed_call(*engine, *mixed, rank, n, it / 3, bytes, odd, &pmpi_calls) != 0) return 1;
      continue;
    }
    const bool mismatched = odd_rank >= 0 && it % 3 == 1;
    if (mismatched && rank == odd_rank) bytes = bytes == 5000 ? 1 : bytes + 1000;
    std::vector<unsigned char> send(n * bytes), recv(n * bytes, 0);
    shm::test::fill_send(send, rank, n, it, bytes);
    const Status st = engine->run(send.data(), recv.data(), bytes);
    if (mismatched) {
      FT_CHECK_STATUS(st, Status::size_mismatch);
      continue;
    }
    if (fail_node >= 0 && st != Status::ok) {
      // After a failure the engine stays broken.
      FT_CHECK_STATUS(engine->run(send.data(), recv.data(), bytes), Status::broken);
      return 42;  // the expected way out
    }
    FT_CHECK_STATUS(st, Status::ok);
    FT_CHECK(shm::test::check_recv(recv, rank, n, it, bytes));
  }
  return 0;
}

class HierTest : public ::testing::TestWithParam<Case> {};

TEST_P(HierTest, MatchesAlltoallAcrossLayoutsSizesAndRounds) {
  const Case& c = GetParam();
  const NodeMap map(c.node_of);
  Mailboxes boxes(map.nodes(), 1 << 20);
  ASSERT_TRUE(boxes.ok());
  std::vector<int> numbered(c.node_of.size());
  for (std::size_t r = 0; r < numbered.size(); ++r) numbered[r] = map.node_of(static_cast<int>(r));
  const auto res = shm::test::run_forked_nodes(numbered, [&](ForkBootstrap& boot, int rank) {
    return run_rank(boot, rank, c, boxes, -1, 0, 28);
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// The same with pipelined rounds (docs/hier.md "Pipelined rounds"): every rank
// stages round r+1 while round r is exchanged, so a rank that overwrote an
// in-area section a slower peer still reads (its own-node blocks) would
// corrupt that peer's result.
TEST_P(HierTest, PipelinedRoundsMatchAlltoall) {
  const Case& c = GetParam();
  const NodeMap map(c.node_of);
  Mailboxes boxes(map.nodes(), 1 << 20);
  ASSERT_TRUE(boxes.ok());
  std::vector<int> numbered(c.node_of.size());
  for (std::size_t r = 0; r < numbered.size(); ++r) numbered[r] = map.node_of(static_cast<int>(r));
  const auto res = shm::test::run_forked_nodes(numbered, [&](ForkBootstrap& boot, int rank) {
    return run_rank(boot, rank, c, boxes, -1, 0, 28, true);
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 0);
}

// What the engine puts in each message (docs/hier.md, Layout), checked byte
// by byte against the definition on every round of run_rank's sizes: the
// rows rotated by source from 64-byte chunks, in member order below.
TEST(HierLayout, MessagesCarryRowsRotatedBySourceFrom64Bytes) {
  for (const Case& c : {Case{"blocks_of_3", {0, 0, 0, 1, 1, 1}, {}, true},
                        Case{"irregular", {7, 7, 7, 3, 5, 5}, {}, true},
                        Case{"round_robin", {0, 1, 0, 1, 0}, {}, true}}) {
    const NodeMap map(c.node_of);
    std::vector<int> numbered(c.node_of.size());
    for (std::size_t r = 0; r < numbered.size(); ++r) {
      numbered[r] = map.node_of(static_cast<int>(r));
    }
    for (const bool pipeline : {false, true}) {
      Mailboxes boxes(map.nodes(), 1 << 20);  // fresh: sequence numbers start anew
      ASSERT_TRUE(boxes.ok());
      const auto res = shm::test::run_forked_nodes(numbered, [&](ForkBootstrap& boot, int rank) {
        return run_rank(boot, rank, c, boxes, -1, 0, 20, pipeline);
      });
      EXPECT_FALSE(res.hung) << c.name;
      for (int code : res.exit_codes) EXPECT_EQ(code, 0) << c.name << " pipeline " << pipeline;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, HierTest,
    ::testing::Values(Case{"blocks_of_2", {0, 0, 1, 1}, {}},
                      Case{"round_robin", {0, 1, 0, 1, 0}, {}},
                      Case{"irregular", {7, 7, 7, 3, 5, 5}, {}}, Case{"singles", {0, 1, 2}, {}},
                      Case{"scattered", {0, 1, 1, 0, 2, 1, 2}, {}}, Case{"one_node", {4, 4, 4}, {}},
                      // Several leaders per node share the remote nodes.
                      Case{"two_leaders", {0, 0, 0, 1, 1, 1, 2, 2}, {1, 1, 0, 1, 0, 1, 1, 1}},
                      Case{"three_leaders_rr", {0, 1, 2, 0, 1, 2, 0, 1}, {1, 1, 1, 1, 0, 1, 1, 1}},
                      // A leader per rail (MLXA2A_LEADERS=rails), paired by rail;
                      // then nodes whose rails differ (node 1's one rank is on
                      // rail 1, node 2's leader on rail 0: no rail in common).
                      Case{"rails", {0, 0, 1, 1, 2, 2, 3, 3}, {2, 3, 2, 3, 2, 3, 2, 3}},
                      Case{"rails_mixed", {0, 0, 1, 2, 2}, {2, 3, 3, 2, 0}}),
    [](const auto& info) { return std::string(info.param.name); });

// From 4 KiB per block a rank copies its own block straight from its send
// buffer to its receive buffer (hier_alltoall.cc own_block_direct): one copy
// of it instead of two, so a call copies 2 n chunk - chunk bytes per round of
// such chunks and 2 n chunk below (node_copy_counters, per process). Every
// layout's rows and columns split around the own block, rotated and not,
// serial and pipelined, a call whose last round is below the gate; every
// byte checked.
TEST(HierOwnBlock, CopiedOnceStraightFromSendToRecv) {
  constexpr std::size_t kStage = 64 * 1024;  // chunks up to 8-16 KiB
  const Case cases[] = {Case{"blocks_of_2", {0, 0, 1, 1}, {}},
                        Case{"round_robin", {0, 1, 0, 1, 0}, {}},
                        Case{"irregular", {7, 7, 7, 3, 5, 5}, {}},
                        Case{"two_leaders", {0, 0, 0, 1, 1, 1, 2, 2}, {1, 1, 0, 1, 0, 1, 1, 1}}};
  for (const bool pipeline : {false, true}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name);
      const NodeMap map(c.node_of, c.leads);
      Mailboxes boxes(map.nodes(), 1 << 20);
      ASSERT_TRUE(boxes.ok());
      std::vector<int> numbered(c.node_of.size());
      for (std::size_t r = 0; r < numbered.size(); ++r) {
        numbered[r] = map.node_of(static_cast<int>(r));
      }
      const auto res = shm::test::run_forked_nodes(numbered, [&](ForkBootstrap& boot, int rank) {
        const int n = static_cast<int>(c.node_of.size());
        std::unique_ptr<HierAlltoall> engine;
        if (make_engine(boot, rank, c, map, boxes, -1, 0, pipeline, true, engine, kStage) != 0) {
          return 1;
        }
        const std::size_t max = engine->plan().max_chunk();
        const std::size_t sizes[] = {4095, 4096, 5000, max, max + 4100, 2 * max + 100};
        for (int it = 0; it < static_cast<int>(std::size(sizes)); ++it) {
          const std::size_t bytes = sizes[it];
          std::vector<unsigned char> send(n * bytes), recv(n * bytes, 0);
          shm::test::fill_send(send, rank, n, it, bytes);
          std::size_t want = 0;
          for (std::size_t off = 0; off < bytes; off += max) {
            const std::size_t chunk = std::min(max, bytes - off);
            want += 2 * static_cast<std::size_t>(n) * chunk - (chunk >= 4096 ? chunk : 0);
          }
          auto& copied = node_copy_counters().copied;
          const std::uint64_t before = copied.load();
          FT_CHECK_STATUS(engine->run(send.data(), recv.data(), bytes), Status::ok);
          FT_CHECK(copied.load() - before == want);
          FT_CHECK(shm::test::check_recv(recv, rank, n, it, bytes));
        }
        return 0;
      });
      EXPECT_FALSE(res.hung);
      for (int code : res.exit_codes) EXPECT_EQ(code, 0) << c.name << " pipeline " << pipeline;
    }
  }
}

// A leader whose exchange fails takes its node down with it, and the other
// nodes' exchanges fail too (poisoned mailboxes): every rank ends the call
// with an error and nobody hangs.
TEST(HierFaults, TransportFailureEndsTheCallEverywhere) {
  const Case c{"fault", {0, 0, 1, 1, 1}, {}};
  Mailboxes boxes(2, 1 << 20);
  ASSERT_TRUE(boxes.ok());
  const auto res = shm::test::run_forked_nodes(c.node_of, [&](ForkBootstrap& boot, int rank) {
    return run_rank(boot, rank, c, boxes, 1, 5, 28);
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 42);
}

// Pipelined: a failure in a later round of a multi-round call (exchange 9
// is the 5000-byte call's second round) still ends the call everywhere.
TEST(HierFaults, TransportFailureEndsAPipelinedCallEverywhere) {
  const Case c{"fault", {0, 0, 1, 1, 1}, {}};
  Mailboxes boxes(2, 1 << 20);
  ASSERT_TRUE(boxes.ok());
  const auto res = shm::test::run_forked_nodes(c.node_of, [&](ForkBootstrap& boot, int rank) {
    return run_rank(boot, rank, c, boxes, 1, 9, 28, true);
  });
  EXPECT_FALSE(res.hung);
  for (int code : res.exit_codes) EXPECT_EQ(code, 42);
}

// Sizes that differ across ranks (docs/hier.md): a non-leader, a node's
// leader, a node's only rank, a second leader; every rank of every node gets
// size_mismatch in the same call and the next correct calls work.
TEST(HierMismatch, EveryRankFailsThenTheEngineWorks) {
  for (const bool pipeline : {false, true}) {
    SCOPED_TRACE(pipeline ? "pipelined" : "serial");
    for (const OddCase& k : odd_rank_cases()) {
      SCOPED_TRACE(k.c.name);
      const NodeMap map(k.c.node_of, k.c.leads);
      Mailboxes boxes(map.nodes(), 1 << 20);
      ASSERT_TRUE(boxes.ok());
      const auto res =
          shm::test::run_forked_nodes(k.c.node_of, [&](ForkBootstrap& boot, int rank) {
            return run_rank(boot, rank, k.c, boxes, -1, 0, 21, pipeline, k.odd);
          });
      EXPECT_FALSE(res.hung);
      for (int code : res.exit_codes) EXPECT_EQ(code, 0);
    }
  }
}

// A rank sent to PMPI beside a check call while its peers are in the engine:
// a non-leader, a leader, a whole node, a node's only rank, a second leader;
// the engine ranks get peer_in_pmpi from that call (both modes), everyone
// meets in the stand-in PMPI call, and the calls in between are right.
TEST(HierMixed, EngineRanksJoinARankInPmpiThenTheEngineWorks) {
  // Serial and pipelined; a two-sided transport (a leader in PMPI skips its
  // node barrier) and, serial only, a one-sided one (it keeps it).
  for (const int mode : {0, 1, 2}) {
    const bool pipeline = mode == 1, two_sided = mode != 2;
    SCOPED_TRACE(pipeline ? "pipelined" : two_sided ? "serial" : "serial, one-sided");
    const struct {
      Case c;
      unsigned pmpi_ranks;
    } cases[] = {{{"non_leader", {0, 0, 1, 1}, {}}, 1u << 3},
                 {{"leader", {0, 0, 1, 1}, {}}, 1u << 2},
                 {{"whole_node", {0, 0, 1, 1}, {}}, (1u << 2) | (1u << 3)},
                 {{"single", {0, 1, 2}, {}}, 1u << 1},
                 {{"second_leader", {0, 0, 0, 1, 1, 1, 2, 2}, {1, 1, 0, 1, 0, 1, 1, 1}}, 1u << 1}};
    for (const auto& k : cases) {
      SCOPED_TRACE(k.c.name);
      const NodeMap map(k.c.node_of, k.c.leads);
      Mailboxes boxes(map.nodes(), 1 << 20);
      ASSERT_TRUE(boxes.ok());
      void* mem = mmap(nullptr, sizeof(PmpiStandIn), PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
      ASSERT_NE(mem, MAP_FAILED);
      const Mixed mx{new (mem) PmpiStandIn, k.pmpi_ranks};
      const auto res =
          shm::test::run_forked_nodes(k.c.node_of, [&](ForkBootstrap& boot, int rank) {
            return run_rank(boot, rank, k.c, boxes, -1, 0, 45, pipeline, -1, &mx, two_sided);
          });
      EXPECT_FALSE(res.hung);
      for (int code : res.exit_codes) EXPECT_EQ(code, 0);
      munmap(mem, sizeof(PmpiStandIn));
    }
  }
}

TEST(HierPlan, NodeMapNumbersNodesByLowestRank) {
  const std::vector<int> ids = {9, 4, 4, 9, 1, 4};
  const NodeMap m(ids);
  ASSERT_EQ(m.nodes(), 3);
  EXPECT_EQ(m.members(0), (std::vector<int>{0, 3}));
  EXPECT_EQ(m.members(1), (std::vector<int>{1, 2, 5}));
  EXPECT_EQ(m.members(2), (std::vector<int>{4}));
  EXPECT_EQ(m.index_in_node(5), 2);
  EXPECT_EQ(m.ranks_before(2), 5);
  EXPECT_EQ(m.member_step(0), 3);
  EXPECT_EQ(m.member_step(1), 0);  // 1, 2, 5: irregular
  EXPECT_EQ(m.member_step(2), 1);
  EXPECT_EQ(m.largest_node(), 3);
}

TEST(HierPlan, ChunksAreEqualOnEveryRankAndLineSized) {
  const std::vector<int> ids = {0, 0, 0, 1, 2, 2, 2, 2};
  const NodeMap m(ids);
  for (int r = 0; r < m.size(); ++r) {
    const Plan p(m, r, 131072);
    EXPECT_EQ(p.max_chunk(), 16384u);
    EXPECT_EQ(p.area_bytes(),
              static_cast<std::size_t>(m.node_size(m.node_of(r))) * 8 * 16384 + 8 * sizeof(Header));
    const int local = m.node_size(m.node_of(r));
    EXPECT_EQ(p.area_bytes() + HierAlltoall::publish_bytes(local),
              HierAlltoall::area_bytes(8, local, 131072));
    EXPECT_EQ(p.rounds(16384), 1u);
    EXPECT_EQ(p.rounds(16385), 2u);
  }
  EXPECT_EQ(Plan(m, 0, 1000).max_chunk(), 64u);  // 125 bytes per peer: one line
  EXPECT_EQ(Plan(m, 0, 8).max_chunk(), 64u);     // never below one line
  const Plan p(m, 4, 131072);                    // node 2 of 4 ranks, after 4 ranks
  EXPECT_EQ(p.section(2, 100), Plan::header_bytes(8) + 4u * 100 * 4);
  EXPECT_EQ(sizeof(Header), 24u);  // bytes per peer, flags, message bytes
  EXPECT_EQ(Plan::header_bytes(8), 8 * sizeof(Header));
  EXPECT_EQ(p.header(2), 2 * sizeof(Header));
  EXPECT_EQ(p.message_bytes(0, 100), 4u * 3 * 100);
  EXPECT_TRUE(p.leader());
  EXPECT_FALSE(Plan(m, 5, 131072).leader());
}

TEST(HierPlan, LeadersSplitRemoteNodesAndAgreeOnPartners) {
  // Node 0: ranks 0-3, leaders 0 and 2; node 1: rank 4; node 2: ranks 5-7, all lead.
  const std::vector<int> ids = {0, 0, 0, 0, 1, 2, 2, 2};
  const std::vector<int> leads = {0, 0, 1, 0, 0, 1, 1, 1};  // rank 0 leads anyway
  const NodeMap m(ids, leads);
  EXPECT_EQ(m.leaders(0), (std::vector<int>{0, 2}));
  EXPECT_EQ(m.leaders(1), (std::vector<int>{0}));
  EXPECT_EQ(m.leaders(2), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(Plan(m, 2, 4096).leader_index(), 1);
  EXPECT_EQ(Plan(m, 3, 4096).leader_index(), -1);
  // Every pair of nodes is served by exactly one leader on each side, and the
  // two sides name each other.
  for (int k = 0; k < m.nodes(); ++k) {
    for (int mm = 0; mm < m.nodes(); ++mm) {
      if (k == mm) continue;
      const Plan pk(m, m.members(k)[0], 4096), pm(m, m.members(mm)[0], 4096);
      EXPECT_EQ(pk.partner(mm), pm.handled_by(k)) << k << " " << mm;
      EXPECT_EQ(pm.partner(k), pk.handled_by(mm)) << k << " " << mm;
    }
  }
}

TEST(HierPlan, LeadersOfANodeServeEvenSharesOfItsRemoteNodes) {
  // 3 nodes x 2 ranks, both ranks lead, and 5 nodes x 3 ranks, every rank
  // leads: each leader serves floor or ceil((N-1)/leaders) remote nodes, on
  // every node (by m mod leaders, node 1 of 3 gave both of its remote nodes,
  // 0 and 2, to leader 0 and left leader 1 idle).
  for (const int nodes : {3, 5}) {
    const int per = nodes == 3 ? 2 : 3;
    std::vector<int> ids, leads;
    for (int k = 0; k < nodes; ++k) {
      for (int i = 0; i < per; ++i) {
        ids.push_back(k);
        leads.push_back(1);
      }
    }
    const NodeMap m(ids, leads);
    const int lo = (nodes - 1) / per, hi = (nodes - 1 + per - 1) / per;
    for (int r = 0; r < m.size(); ++r) {
      const Plan p(m, r, 4096);
      int served = 0;
      for (int mm = 0; mm < nodes; ++mm) served += mm != p.node() && p.handled_by(mm) == p.leader_index();
      EXPECT_GE(served, lo) << nodes << " nodes, rank " << r;
      EXPECT_LE(served, hi) << nodes << " nodes, rank " << r;
    }
  }
}

// Rails (docs/hier-transports.md, "Every rail"): a pair of nodes is served
// on both ends by the leaders of one rail, the same on both, and each
// leader serves an even share of its node's partners: (N-1)/H rounded
// either way when N is even; one more or less when N is odd (a triangle has
// no 2-edge-colouring). (a + b) mod H gave node 1 of 3 both partners on rail 1.
TEST(HierPlan, RailLeadersPairByRailAndShareEvenly) {
  for (const int rails : {2, 4}) {
    for (const int nodes : {2, 3, 4, 5, 6, 8, 9, 16}) {
      std::vector<int> ids, leads;
      for (int k = 0; k < nodes; ++k) {
        for (int j = 0; j < rails; ++j) {
          ids.push_back(k);
          leads.push_back(2 + j);
        }
      }
      const NodeMap m(ids, leads);
      ASSERT_TRUE(m.railed(0));
      for (int a = 0; a < nodes; ++a) {
        const Plan pa(m, m.members(a)[0], 4096);
        std::vector<int> served(static_cast<std::size_t>(rails), 0);
        for (int b = 0; b < nodes; ++b) {
          if (a == b) continue;
          const Plan pb(m, m.members(b)[0], 4096);
          EXPECT_EQ(pa.handled_by(b), pb.partner(a)) << a << " " << b;
          EXPECT_EQ(m.rail(a, pa.handled_by(b)), m.rail(b, pa.partner(b))) << a << " " << b;
          EXPECT_EQ(Plan::rail_round(a, b, nodes), Plan::rail_round(b, a, nodes));
          ++served[static_cast<std::size_t>(pa.handled_by(b))];
        }
        const int lo = (nodes - 1) / rails, hi = (nodes - 1 + rails - 1) / rails;
        const int slack = nodes % 2;
        for (int v : served) {
          EXPECT_GE(v, lo - slack) << rails << " rails, " << nodes << " nodes, node " << a;
          EXPECT_LE(v, hi + slack) << rails << " rails, " << nodes << " nodes, node " << a;
        }
      }
    }
  }
  // Nodes that share only some rails meet on a shared one; none shared: the
  // split of MLXA2A_LEADERS=N, still one leader each side naming the other.
  const std::vector<int> ids = {0, 0, 1, 2, 2}, leads = {2, 3, 3, 2, 0};
  const NodeMap m(ids, leads);
  const Plan p0(m, 0, 4096), p1(m, 2, 4096), p2(m, 3, 4096);
  EXPECT_EQ(m.rail(0, p0.handled_by(1)), 1);
  EXPECT_EQ(p0.handled_by(1), p1.partner(0));
  EXPECT_EQ(p1.handled_by(2), p2.partner(1));
  EXPECT_EQ(p2.handled_by(1), p1.partner(2));
}

}  // namespace
}  // namespace mlxa2a::hier
