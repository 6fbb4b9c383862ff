// Team: what mlxa2a knows about one intracommunicator to run engines on it —
// its node map, the agreed capabilities, and its engine: the shared-memory
// alltoall when the communicator lies on one node, the hierarchical one
// (shared-memory fan-in/fan-out, leaders over PMPI) when it spans several.
//
// Contract
// * Team::create() is collective over comm: every rank calls it at the same
//   alltoall call (the first one on comm that may use an engine). It always
//   ends with ONE PMPI_Allgather over comm of (node id, set-up failed) that
//   gives every rank the whole node map and the same caps even when set-up
//   failed on some rank; it never throws. A multi-node team then builds its
//   hierarchical engine, collectively: the node's staging segment over the
//   node communicator, a leaders' communicator (PMPI_Comm_split), and ONE
//   PMPI_Allreduce that agrees whether that worked everywhere (and whether
//   every node shares its leader's PD for zero-copy: the node's ranks set
//   that up collectively over the node communicator first,
//   docs/zerocopy.md). The node
//   communicator used for set-up is freed before it returns. A communicator
//   of one rank makes no MPI call at all.
// * Team::derive() builds the team of a communicator made by MPI_Comm_split
//   from an ancestor's Origin (a copy of its node map, taken once with
//   split_origin()) and the ancestor's group, without communication
//   (PMPI_Group_translate_ranks): node map, node count and caps follow from
//   the ancestor's map. Any ancestor gives the same team: a split only
//   restricts the node partition. A single-node
//   child still needs its shared-memory segment: complete_setup() creates it,
//   collectively over the child communicator itself (which then *is* the node
//   communicator), at the child's first call that selects shm. A multi-node
//   child builds its hierarchical engine there too (its node communicator is
//   a PMPI_Comm_split of the child by the derived node ids). Every rank of
//   the child derives alike (the parent's team exists on all its ranks or on
//   none), so every rank reaches complete_setup() at the same call.
// * Ownership: CommState owns the Team; the comm keyval's delete callback
//   destroys it, which unmaps the shared-memory segment (its name was already
//   unlinked during set-up, so nothing is left in /dev/shm).
// * Thread safety: none needed — a Team is used only by collective calls on its
//   communicator, which MPI requires to be serialised.
// * Containment: when a run() (or abandon()) of a team whose leaders exchange
//   over RDMA fails, the team starts an agreement with all its ranks
//   (core/mpi/containment.h); every later call the selection sends to its
//   engine then goes through contained_call() instead.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config/switches.h"
#include "core/hier/hier_alltoall.h"
#include "core/mpi/engine_pool.h"
#include "core/mpi/containment.h"
#include "core/selection.h"
#include "core/shm/node_alltoall.h"
#include "core/tune/candidate.h"

namespace mlxa2a::core::mpi {

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
  // child must be a subset of the group of the communicator that origin came
  // from (parent_group). nullptr on an MPI error or allocation failure.
  static std::unique_ptr<Team> derive(const Origin& parent, MPI_Group parent_group,
                                      MPI_Comm child) noexcept;
  // Collective over comm when setup_pending(); false if the engine could not
  // be built (then caps().shm / caps().hier is false on every rank).
  bool complete_setup(MPI_Comm comm) noexcept;
  bool setup_pending() const { return setup_pending_; }
  // Whether complete_setup() took its engine from the pool (engine_pool.h).
  bool reused_engine() const { return reused_; }
  ~Team();
  Team(const Team&) = delete;
  Team& operator=(const Team&) = delete;

  const Capabilities& caps() const { return caps_; }
  int size() const { return size_; }
  // The node's shared-memory engine; nullptr when the communicator has one rank
  // (the engine is then a local copy) or caps().shm is false.
  shm::NodeAlltoall* node_alltoall() const { return shm_.get(); }
  // The hierarchical engine; nullptr unless caps().hier.
  hier::HierAlltoall* hier_alltoall() const { return hier_.get(); }
  bool oversubscribed() const { return oversubscribed_; }
  // Why the leaders do not exchange over RDMA ("" when they do).
  const std::string& rdma_why() const { return rdma_why_; }
  // Why the team has no zero-copy path ("" when caps().zcopy).
  const std::string& zcopy_why() const { return zcopy_why_; }
  // Ranks on the team's largest node (0 when the node map is unknown).
  int ranks_per_node() const noexcept;

  // One alltoall through this team's engine (see NodeAlltoall::run and
  // HierAlltoall::run): contiguous buffers of size() blocks of bytes_per_peer,
  // not overlapping. Collective; only when caps().shm or caps().hier.
  [[nodiscard]] shm::Status run(const char* send, char* recv, std::size_t bytes_per_peer) noexcept;
  // run() through one engine path (measured selection, docs/tune.md): line,
  // copy or cma on the single-node engine, hier on the hierarchical one. Every
  // rank must pass the same candidate; one the team cannot take runs as run()
  // (zcopy without caps().zcopy: the staged hierarchical engine).
  [[nodiscard]] shm::Status run(const char* send, char* recv, std::size_t bytes_per_peer,
                                tuning::Candidate path) noexcept;
  // For a rank that cannot take part in a run() its peers have entered.
  void abandon() noexcept;
  // After run() returned shm::Status::size_mismatch - which every rank of the
  // team then gets in the same call (NodeAlltoall's contract) - agrees on the
  // engine's restart point with one PMPI_Allreduce over comm, so that correct
  // calls work afterwards. Collective. False if MPI failed; the engine is then
  // abandoned (later calls report an error instead of waiting).
  [[nodiscard]] bool resync(MPI_Comm comm) noexcept;
  // Whether the engine compares every rank's size in each call it takes part
  // in (the single-node engine): then a 0-byte call still enters run(), and a
  // call served elsewhere (PMPI, chosen by measured selection) calls
  // check_sizes() first, so that a peer called with another size is found
  // rather than left waiting for.
  bool compares_sizes() const noexcept { return shm_ != nullptr; }
  // NodeAlltoall::check_sizes; only when compares_sizes(). Collective.
  [[nodiscard]] shm::Status check_sizes(std::size_t bytes_per_peer) noexcept {
    return shm_->check_sizes(bytes_per_peer);
  }
  // How many size mismatches resync() has agreed on (every rank alike): a
  // caller tells by it whether a failed call was a mismatch, which every rank
  // saw, rather than a local failure.
  std::uint64_t resyncs() const noexcept { return resyncs_; }
  // Whether the engine failed on some rank (RDMA teams; containment.h).
  bool contained() const noexcept { return containment_.engaged(); }
  // For a call routed to the engine once contained(): true to serve it
  // through PMPI, false to fail it at once (a peer failed it). Collective in
  // that it may wait for every rank's failure; bytes as for run().
  bool contained_call(std::size_t bytes) noexcept;
  const std::string& contained_why() const noexcept { return containment_.why(); }

  // Rank-local scratch space for packing MPI_IN_PLACE and non-contiguous data;
  // grows on demand and is kept for the next call. nullptr if allocation failed.
  char* scratch(int which, std::size_t bytes) noexcept;

 private:
  Team() = default;
  // Builds hier_ (collective over comm; node_comm holds this rank's node, in
  // team rank order) and agrees on the outcome; false if it failed anywhere.
  bool setup_hier(MPI_Comm comm, MPI_Comm node_comm, std::size_t stage_bytes) noexcept;
  // A leader's half of the RDMA transport's set-up, collective over the
  // leaders' communicator; false (rdma_why_ says why) if it failed here.
  bool try_rdma(MPI_Comm leaders, const hier::NodeMap& map, int rank,
                const shm::NodeStage* stage, const std::vector<int>& first_rank,
                std::unique_ptr<hier::LeaderTransport>* out) noexcept;
  // Zero-copy's set-up, collective over node_comm (every rank of the node,
  // whatever failed before): the node's shared PD and this rank's cache.
  // leader: the node's leader's local rank; rdma_ok: on the leader, whether
  // its RDMA transport is up. false (zcopy_why_ says why) if unavailable.
  bool try_zcopy(MPI_Comm node_comm, const hier::NodeMap& map, int rank, int leader,
                 bool rdma_ok) noexcept;

  // After a failed engine call on an RDMA team: agree, then no engine.
  void contain(shm::Status st) noexcept;

  Capabilities caps_;
  int size_ = 1;
  std::uint64_t engine_calls_ = 0;  // hierarchical runs, alike on every rank
  Containment containment_;
  bool oversubscribed_ = false;
  bool setup_pending_ = false;     // derived single-node team without its segment yet
  std::uint64_t resyncs_ = 0;
  bool reused_ = false;
  EnginePool::Members pool_key_;  // where shm_ goes when the team is gone (empty: nowhere)
  std::vector<int> node_ids_;      // per rank: its node's first rank; empty if unknown
  std::string rdma_why_;
  std::string zcopy_why_;
  std::uint32_t rdma_gather_sge_ = 0;  // leader: SGEs per WR its RDMA transport's QPs take
  std::unique_ptr<shm::NodeAlltoall> shm_;
  std::unique_ptr<hier::HierAlltoall> hier_;
  // This rank's zero-copy registrations (core/mlx5/zcopy_sender.h); only with caps_.zcopy.
  std::unique_ptr<hier::SendRegistration> zcopy_;
  struct Buffer {
    std::unique_ptr<char[]> data;
    std::size_t size = 0;
  };
  Buffer scratch_[2];
};

}  // namespace mlxa2a::core::mpi
