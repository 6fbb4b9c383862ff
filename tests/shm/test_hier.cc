// The hierarchical alltoall (core/hier) across several forked "nodes": each
// node has its own NodeStage, and the leaders exchange through a fake
// transport in shared memory, so the engine's fan-in, leader messages, rounds
// and fan-out are checked without MPI (the MPI transport is covered by the
// virtual-node tests in tests/mpi).
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "core/hier/hier_alltoall.h"
#include "core/hier/plan.h"
#include "tests/shm/fork_team.h"
#include "tests/shm/pattern.h"

namespace mlxa2a::hier {
namespace {

using shm::Status;
using shm::test::ForkBootstrap;

// One mailbox per ordered pair of nodes, in memory shared by all forks.
struct Mailbox {
  std::atomic<std::uint64_t> sent{0};
  std::atomic<std::uint64_t> taken{0};
  int from_leader = -1;  // written before `sent`: which leader sent, and to
  int to_leader = -1;    // which leader of the receiving node it is addressed
  std::size_t remote_offset = 0;  // where the sender says it lands (one-sided transports)
  int parity = -1;
  std::size_t bytes = 0;               // the message's length (differs for erroneous sizes)
  Header head;                         // the message's header
  std::size_t head_remote_offset = 0;  // where the sender says the header lands
};

class Mailboxes {
 public:
  Mailboxes(int nodes, std::size_t capacity)
      : nodes_(nodes), stride_(sizeof(Mailbox) + capacity), capacity_(capacity) {
    bytes_ = static_cast<std::size_t>(nodes) * nodes * stride_ + 64;
    mem_ = static_cast<char*>(
        mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (mem_ == MAP_FAILED) mem_ = nullptr;
    if (!mem_) return;
    poison_ = new (mem_) std::atomic<std::uint32_t>(0);
    for (int i = 0; i < nodes * nodes; ++i) new (box_mem(i)) Mailbox;
  }
  ~Mailboxes() {
    if (mem_) munmap(mem_, bytes_);
  }
  bool ok() const { return mem_ != nullptr; }
  Mailbox& box(int from, int to) {
    return *reinterpret_cast<Mailbox*>(box_mem(from * nodes_ + to));
  }
  char* data(int from, int to) { return box_mem(from * nodes_ + to) + sizeof(Mailbox); }
  std::size_t capacity() const { return capacity_; }
  std::atomic<std::uint32_t>& poison() { return *poison_; }

 private:
  char* box_mem(int i) { return mem_ + 64 + static_cast<std::size_t>(i) * stride_; }
  int nodes_;
  std::size_t stride_;
  std::size_t capacity_;
  std::size_t bytes_ = 0;
  char* mem_ = nullptr;
  std::atomic<std::uint32_t>* poison_ = nullptr;
};

// Sends every message into its mailbox, then collects the replies. A node
// set to fail at call `fail_at` poisons all mailboxes instead, which makes
// every leader's exchange fail (as an MPI error handler returning would).
class FakeTransport final : public LeaderTransport {
 public:
  // layout: check every message against the section layout (layout_ok).
  // two_sided: a partner's bytes land in our out-area only in our own
  // exchange (they do: each side copies its mailbox in); false makes the
  // engine treat it as one-sided (RDMA) and keep a check's node barrier.
  FakeTransport(Mailboxes& boxes, int node, int leader, std::uint64_t fail_at,
                const StageAreas& areas, const NodeMap* layout = nullptr,
                bool two_sided = true)
      : boxes_(boxes),
        node_(node),
        leader_(leader),
        fail_at_(fail_at),
        areas_(areas),
        layout_(layout),
        two_sided_(two_sided) {}
  const char* name() const noexcept override { return "fake"; }
  bool two_sided() const noexcept override { return two_sided_; }

  Status exchange(std::span<const Message> messages) noexcept override {
    const std::uint64_t seq = ++calls_;
    if (seq == fail_at_) {
      boxes_.poison().store(1, std::memory_order_release);
      return Status::transport_failed;
    }
    if (layout_ && !layout_ok(messages)) return Status::invalid_argument;
    for (const Message& m : messages) {
      if (m.bytes > boxes_.capacity() || m.node == node_) return Status::invalid_argument;
      Mailbox& b = boxes_.box(node_, m.node);
      if (!wait([&] { return b.taken.load(std::memory_order_acquire) == seq - 1; })) {
        return Status::transport_failed;
      }
      std::memcpy(boxes_.data(node_, m.node), m.send, m.bytes);
      if (!m.head_send) return Status::invalid_argument;  // the engine always sends one
      b.bytes = m.bytes;
      b.head = *m.head_send;
      b.head_remote_offset = m.head_remote_offset;
      b.from_leader = leader_;
      b.to_leader = m.leader;
      b.remote_offset = m.remote_offset;
      b.parity = m.parity;
      // What a one-sided transport relies on: the message is the area's
      // bytes of this round's parity (the areas handed over at creation).
      if (m.parity < 0 || m.parity > 1 || m.send < areas_.in[m.parity] ||
          m.send + m.bytes > areas_.in[m.parity] + areas_.bytes) {
        return Status::invalid_argument;
      }
      b.sent.store(seq, std::memory_order_release);
    }
    for (const Message& m : messages) {
      Mailbox& b = boxes_.box(m.node, node_);
      if (!wait([&] { return b.sent.load(std::memory_order_acquire) >= seq; })) {
        return Status::transport_failed;
      }
      // Both ends must agree on who talks to whom (Plan::handled_by/partner).
      if (b.from_leader != m.leader || b.to_leader != leader_) return Status::invalid_argument;
      // The sender's idea of where its bytes land must be where the engine
      // reads them here: same parity, remote_offset into our out-area.
      // A sender of another size (an erroneous call) writes elsewhere, as a
      // one-sided transport would, but inside the area.
      char* const lands = areas_.out[m.parity] + b.remote_offset;
      if (b.parity != m.parity || (b.bytes == m.bytes && m.recv != lands) ||
          b.remote_offset + b.bytes > areas_.bytes ||
          reinterpret_cast<char*>(m.head_recv) != areas_.out[m.parity] + b.head_remote_offset) {
        return Status::invalid_argument;
      }
      std::memcpy(lands, boxes_.data(m.node, node_), b.bytes);
      *m.head_recv = b.head;
      b.taken.store(seq, std::memory_order_release);
    }
    return Status::ok;
  }

 private:
  template <class Ready>
  bool wait(Ready ready) {
    while (!ready()) {
      if (boxes_.poison().load(std::memory_order_acquire) != 0) return false;
      sched_yield();
    }
    return true;
  }
  // The section layout by definition (docs/hier.md, Layout): row a holds
  // this node's local source a's blocks for node m's members b, at slot
  // (a + b) % L_m of the row from 64-byte chunks (rows rotated by source), at
  // slot b below. Follows run_rank's calls (pattern bytes, iteration = call
  // number) round by round: one leader per node, correct calls only.
  bool layout_ok(std::span<const Message> messages) {
    const std::vector<int>& src = layout_->members(node_);
    std::size_t chunk = 0, bytes = 0;
    for (const Message& m : messages) {
      const std::vector<int>& dst = layout_->members(m.node);
      const std::size_t lm = dst.size();
      chunk = m.bytes / (src.size() * lm);
      bytes = m.head_send->bytes_per_peer;
      const bool rotated = chunk >= 64 && lm > 1;
      const auto* p = reinterpret_cast<const unsigned char*>(m.send);
      for (std::size_t a = 0; a < src.size(); ++a) {
        for (std::size_t slot = 0; slot < lm; ++slot) {
          const std::size_t b = rotated ? (slot + lm - a % lm) % lm : slot;
          for (std::size_t i = 0; i < chunk; ++i) {
            const unsigned char want = shm::test::pattern_byte(src[a], dst[b], call_, off_ + i);
            if (p[(a * lm + slot) * chunk + i] != want) {
              std::fprintf(stderr, "node %d -> %d, %zu B per peer at %zu: row %zu slot %zu\n",
                           node_, m.node, bytes, off_, a, slot);
              return false;
            }
          }
        }
      }
    }
    off_ += chunk;
    if (off_ >= bytes) off_ = 0, ++call_;
    return true;
  }

  Mailboxes& boxes_;
  int node_;
  int leader_;
  std::uint64_t fail_at_;
  StageAreas areas_;
  const NodeMap* layout_;
  bool two_sided_;
  std::uint64_t calls_ = 0;
  int call_ = 0;         // layout_ok: run_rank's call number and
  std::size_t off_ = 0;  // the round's offset in its blocks
};

struct Case {
  const char* name;
  std::vector<int> node_of;     // node id per rank
  std::vector<int> leads = {};  // per rank, 1 = leads; empty: first rank of each node
  bool check_layout = false;    // FakeTransport checks every message's layout
};

constexpr std::size_t kStagePerRank = 4096;  // small: large sizes need rounds

// Mixed decisions (docs/hier.md "A rank sent to PMPI"): a stand-in for
// PMPI_Alltoall, in memory shared by the forks, that returns only once every
// rank of the team has entered it (as the MPI's collective would).
struct PmpiStandIn {
  std::atomic<std::uint64_t> entered{0};
};

struct Mixed {
  PmpiStandIn* pmpi;    // shared
  unsigned pmpi_ranks;  // bits: the ranks the rules send to PMPI in a mixed call
};

struct StandInCall {
  PmpiStandIn* shared;
  std::uint64_t want;  // entries of every rank so far, this one included
  int calls = 0;       // how often this rank entered it in this call
};

void enter_pmpi(void* p) {
  auto* c = static_cast<StandInCall*>(p);
  ++c->calls;
  c->shared->entered.fetch_add(1, std::memory_order_acq_rel);
  while (c->shared->entered.load(std::memory_order_acquire) < c->want) sched_yield();
}

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

// This rank's engine over a FakeTransport (fails at exchange fail_at on node
// fail_node); 0 when made. map: c's, outliving the engine (the transport
// checks layouts against it).
int make_engine(ForkBootstrap& boot, int rank, const Case& c, const NodeMap& map, Mailboxes& boxes,
                int fail_node, std::uint64_t fail_at, bool pipeline, bool two_sided,
                std::unique_ptr<HierAlltoall>& engine) {
  const int n = static_cast<int>(c.node_of.size());
  const Plan plan(map, rank, kStagePerRank);
  const int node = map.node_of(rank);
  shm::Options opt;
  opt.oversubscribed = true;
  opt.timeout_ms = 20000;
  const std::size_t area = HierAlltoall::area_bytes(n, boot.local_size(), kStagePerRank);
  std::unique_ptr<shm::NodeStage> stage;
  FT_CHECK_STATUS(shm::NodeStage::create(boot, opt, area, area, stage), Status::ok);
  std::unique_ptr<LeaderTransport> transport;
  if (plan.leader()) {
    transport = std::make_unique<FakeTransport>(
        boxes, node, plan.leader_index(), node == fail_node ? fail_at : 0,
        HierAlltoall::areas_of(*stage), c.check_layout ? &map : nullptr, two_sided);
  }
  FT_CHECK_STATUS(HierAlltoall::create(c.node_of, c.leads, rank, kStagePerRank, std::move(stage),
                                       std::move(transport), engine),
                  Status::ok);
  FT_CHECK(engine->plan().local_rank() == boot.local_rank());
  engine->set_pipeline(pipeline);
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
                      Case{"three_leaders_rr", {0, 1, 2, 0, 1, 2, 0, 1}, {1, 1, 1, 1, 0, 1, 1, 1}}),
    [](const auto& info) { return std::string(info.param.name); });

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
    const struct {
      Case c;
      int odd;
    } cases[] = {{{"non_leader", {0, 0, 1, 1}, {}}, 3},
                 {{"leader", {0, 0, 1, 1}, {}}, 2},
                 {{"single", {0, 1, 2}, {}}, 1},
                 {{"second_leader", {0, 0, 0, 1, 1, 1, 2, 2}, {1, 1, 0, 1, 0, 1, 1, 1}}, 1}};
    for (const auto& k : cases) {
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
    const struct {
      Case c;
      int odd;
    } cases[] = {{{"non_leader", {0, 0, 1, 1}, {}}, 3},
                 {{"leader", {0, 0, 1, 1}, {}}, 2},
                 {{"single", {0, 1, 2}, {}}, 1},
                 {{"second_leader", {0, 0, 0, 1, 1, 1, 2, 2}, {1, 1, 0, 1, 0, 1, 1, 1}}, 1}};
    for (const auto& k : cases) {
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

}  // namespace
}  // namespace mlxa2a::hier
