// Team: one intracommunicator's node map, agreed capabilities and Engine
// (core/mpi/engine.h; docs/ARCHITECTURE.md step 3).
//
// Contract
// * create() is collective over comm, at the same (first engine) call on
//   every rank, and never throws: it ends with ONE PMPI_Allgather of (node
//   id, set-up failed), so every rank gets the same map and caps even when
//   set-up failed somewhere; a multi-node team then builds its engine (agreed,
//   core/mpi/hier_engine.h). One rank: no MPI call at all.
// * derive() builds a split or dup child from an ancestor's Origin with no
//   communication (PMPI_Group_translate_ranks): a split only restricts the
//   node partition, so any ancestor gives the same team. What needs the
//   child's own collective (a segment, the hierarchical engine, or a pooled
//   engine, core/mpi/engine_pool.h) comes at complete_setup(), which every
//   rank reaches at the same call.
// * Engines get the switches as EngineSettings, copied at set-up: they never
//   read the Runtime.
// * CommState owns the Team; at its delete callback a healthy derived engine
//   goes to the pool, any other is destroyed (its segment name was unlinked at
//   set-up: nothing stays in /dev/shm).
// * No locking: MPI serialises a communicator's collective calls.
// * After a failed RDMA run() the engine's containment (core/mpi/containment.h)
//   serves later calls through contained_call().
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/mpi/engine.h"
#include "core/selection.h"

namespace mlxa2a::core::mpi {

// The MPI_COMM_WORLD ranks of comm's members in comm's rank order; empty
// when a member is not in MPI_COMM_WORLD (spawned or connected processes) or
// on an MPI error. Local.
std::vector<int> world_ranks_of(MPI_Comm comm, int size);

class Team {
 public:
  static std::unique_ptr<Team> create(MPI_Comm comm, const config::Settings& settings) noexcept;
  // What derive() needs of an ancestor's team; a copy, so it may outlive it.
  struct Origin {
    std::vector<int> node_ids;  // per ancestor rank: its node's first rank
    bool oversubscribed = false;
    bool rdma = false;  // its leaders exchanged over RDMA
  };
  // false when this team's node map is not usable (its set-up failed) or the
  // copy could not be allocated.
  bool split_origin(Origin* out) const noexcept;
  // The Origin of comm without a team: create()'s node discovery and its one
  // agreement (PMPI_Allgather of node id and failure), no engine. Collective
  // over comm; false on every rank when it failed on any. rdma is tentative
  // (true where the map has several nodes): derived teams re-select after
  // complete_setup() agreed on it.
  static bool discover(MPI_Comm comm, const config::Settings& settings, Origin* out) noexcept;
  // child must be a subset of the group of the communicator that origin came
  // from (parent_group). nullptr on an MPI error or allocation failure.
  static std::unique_ptr<Team> derive(const Origin& parent, MPI_Group parent_group,
                                      MPI_Comm child) noexcept;
  // Collective over comm when setup_pending(); false if the engine could not
  // be built (then caps().shm / caps().hier is false on every rank).
  bool complete_setup(MPI_Comm comm, const config::Settings& settings) noexcept;
  bool setup_pending() const { return setup_pending_; }
  // Whether complete_setup() took its engine from the pool (engine_pool.h).
  bool reused_engine() const { return reused_; }
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  const Capabilities& caps() const { return caps_; }
  int size() const { return size_; }
  // The team's engine; nullptr when caps().shm and caps().hier are both false
  // (selection then never routes a call to it).
  Engine* engine() const noexcept { return engine_.get(); }
  // What the engine's set-up settled; nullptr without an engine.
  const EngineProps* engine_props() const noexcept {
    return engine_ ? &engine_->props() : nullptr;
  }
  // Whether the engine is of this kind.
  bool engine_is(EngineProps::Kind k) const noexcept {
    return engine_ && engine_->props().kind == k;
  }
  bool oversubscribed() const { return oversubscribed_; }
  // Why the leaders do not exchange over RDMA ("" when they do).
  const std::string& rdma_why() const { return rdma_why_; }
  // Why the team has no zero-copy path ("" when caps().zcopy).
  const std::string& zcopy_why() const { return zcopy_why_; }
  // Ranks on the team's largest node (0 when the node map is unknown).
  int ranks_per_node() const noexcept;

  // After a size_mismatch (every rank gets it in the same call): agrees on
  // the engine's restart point so correct calls work afterwards. Collective.
  // False if MPI failed; the engine is then abandoned (later calls fail
  // instead of waiting).
  [[nodiscard]] bool resync(MPI_Comm comm) noexcept;
  // Whether the engine compares every rank's size in each call: then a 0-byte
  // call still enters run(), and a call this rank serves through PMPI runs
  // beside the engine's check (SizeAgreement::beside_pmpi), so a peer with
  // another size, or in the engine, is found rather than left waiting.
  bool compares_sizes() const noexcept { return engine_ && engine_->sizes(); }
  // The engine's size agreement (engine.h); nullptr unless compares_sizes().
  SizeAgreement* sizes() const noexcept { return engine_ ? engine_->sizes() : nullptr; }
  // Size mismatches resync() agreed on (alike on every rank): tells a failed
  // call that every rank saw from a local failure.
  std::uint64_t resyncs() const noexcept { return resyncs_; }
  // Whether the engine failed on some rank (RDMA teams; containment.h).
  bool contained() const noexcept {
    const EngineContainment* c = engine_ ? engine_->containment() : nullptr;
    return c && c->contained();
  }
  // Its containment (contained(): there is one).
  EngineContainment* containment() const noexcept { return engine_->containment(); }

  // Rank-local scratch space for packing MPI_IN_PLACE and non-contiguous data;
  // grows on demand and is kept for the next call. nullptr if allocation failed.
  char* scratch(int which, std::size_t bytes) noexcept;

 private:
  Team() = default;
  // Builds engine_ through make_engine and records what it tells; caps_
  // follow. node_comm: this rank's node in team rank order.
  void build_engine(MPI_Comm comm, MPI_Comm node_comm, int local_rank, int local_size,
                    const config::Settings& settings) noexcept;
  // A derived team's engine from the pool (engine_pool.h): sets pool_key_,
  // then one PMPI_Allreduce when the pool is on. true: engine_ is an idle
  // engine of a freed communicator of the same processes, on every rank.
  bool adopt_pooled(MPI_Comm comm, const config::Settings& settings) noexcept;
  // engine_ = e, and what it tells about the team (caps_, reasons).
  void adopt(std::unique_ptr<Engine> e) noexcept;

  Capabilities caps_;
  int size_ = 1;
  bool oversubscribed_ = false;
  bool setup_pending_ = false;     // derived team without its engine yet
  std::uint64_t resyncs_ = 0;
  bool reused_ = false;
  std::vector<int> node_ids_;      // per rank: its node's first rank; empty if unknown
  std::string rdma_why_;
  std::string zcopy_why_;
  std::unique_ptr<Engine> engine_;
  PoolKey pool_key_;  // derived teams: where engine_ goes when the team is gone
  struct Buffer {
    std::unique_ptr<char[]> data;
    std::size_t size = 0;
  };
  Buffer scratch_[2];
};

}  // namespace mlxa2a::core::mpi
