// Shared by the hierarchical alltoall's forked tests (test_hier.cc,
// test_hier_pmpi.cc): a leader transport through shared-memory mailboxes,
// a stand-in for PMPI_Alltoall, and one rank's engine over them.
#pragma once

#include <sched.h>
#include <sys/mman.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "core/hier/hier_alltoall.h"
#include "core/hier/plan.h"
#include "tests/shm/fork_team.h"
#include "tests/shm/pattern.h"

namespace mlxa2a::hier::fake {

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
  int nodes() const { return nodes_; }

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
    if (!cyclic_from_next(messages)) return Status::invalid_argument;
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
  // The transport contract's order (core/hier/transport.h): from the next
  // node on, cyclically, so that no node is every leader's first target.
  bool cyclic_from_next(std::span<const Message> messages) const {
    const int n = boxes_.nodes();
    int last = 0;
    for (const Message& m : messages) {
      const int distance = ((m.node - node_) % n + n) % n;  // 1 .. n-1 for another node
      if (distance <= last) return false;
      last = distance;
    }
    return true;
  }

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

// A layout and the rank in it that behaves differently (another size, or
// outside the trial): a non-leader, a node's leader, a node's only rank, a
// second leader.
struct OddCase {
  Case c;
  int odd;
};
inline const std::vector<OddCase>& odd_rank_cases() {
  static const std::vector<OddCase> cases = {
      {{"non_leader", {0, 0, 1, 1}, {}}, 3},
      {{"leader", {0, 0, 1, 1}, {}}, 2},
      {{"single", {0, 1, 2}, {}}, 1},
      {{"second_leader", {0, 0, 0, 1, 1, 1, 2, 2}, {1, 1, 0, 1, 0, 1, 1, 1}}, 1}};
  return cases;
}

// Mixed decisions (docs/hier.md "A rank sent to PMPI"): a stand-in for
// PMPI_Alltoall, in memory shared by the forks, that returns only once every
// rank of the team has entered it (as the MPI's collective would).
struct PmpiStandIn {
  std::atomic<std::uint64_t> entered{0};
};

struct StandInCall {
  PmpiStandIn* shared;
  std::uint64_t want;  // entries of every rank so far, this one included
  int calls = 0;       // how often this rank entered it in this call
};

inline void enter_pmpi(void* p) {
  auto* c = static_cast<StandInCall*>(p);
  ++c->calls;
  c->shared->entered.fetch_add(1, std::memory_order_acq_rel);
  while (c->shared->entered.load(std::memory_order_acquire) < c->want) sched_yield();
}

// This rank's engine over a FakeTransport (fails at exchange fail_at on node
// fail_node); 0 when made. map: c's, outliving the engine (the transport
// checks layouts against it).
inline int make_engine(ForkBootstrap& boot, int rank, const Case& c, const NodeMap& map, Mailboxes& boxes,
                int fail_node, std::uint64_t fail_at, bool pipeline, bool two_sided,
                std::unique_ptr<HierAlltoall>& engine,
                std::size_t stage_per_rank = kStagePerRank) {
  const int n = static_cast<int>(c.node_of.size());
  const Plan plan(map, rank, stage_per_rank);
  const int node = map.node_of(rank);
  shm::Options opt;
  opt.oversubscribed = true;
  opt.timeout_ms = 20000;
  const std::size_t area = HierAlltoall::area_bytes(n, boot.local_size(), stage_per_rank);
  std::unique_ptr<shm::NodeStage> stage;
  FT_CHECK_STATUS(shm::NodeStage::create(boot, opt, area, area, stage), Status::ok);
  std::unique_ptr<LeaderTransport> transport;
  if (plan.leader()) {
    transport = std::make_unique<FakeTransport>(
        boxes, node, plan.leader_index(), node == fail_node ? fail_at : 0,
        HierAlltoall::areas_of(*stage), c.check_layout ? &map : nullptr, two_sided);
  }
  FT_CHECK_STATUS(HierAlltoall::create(c.node_of, c.leads, rank, stage_per_rank, std::move(stage),
                                       std::move(transport), engine),
                  Status::ok);
  FT_CHECK(engine->plan().local_rank() == boot.local_rank());
  engine->set_pipeline(pipeline);
  return 0;
}

}  // namespace mlxa2a::hier::fake
