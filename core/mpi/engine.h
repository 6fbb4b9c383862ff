// Engine: what a Team runs one MPI_Alltoall on, and the one factory that
// builds it (docs/ARCHITECTURE.md, "Engines").
//
// Engines
// * LocalEngine: a communicator of one rank; the exchange is a copy.
// * ShmEngine (core/mpi/shm_engine.h): every rank on one node; the
//   shared-memory alltoall (core/shm/node_alltoall.h).
// * HierEngine (core/mpi/hier_engine.h): several nodes; shared-memory fan-in
//   and fan-out around a leaders' exchange (core/hier) over a LeaderTransport
//   chosen at set-up: RDMA (core/mlx5) where every leader has it, else PMPI;
//   with the zero-copy variant where every node shares a PD.
//
// Contract
// * make_engine() is the only place that decides which engine a team gets;
//   it is collective as the chosen engine's create() (see each header) and
//   returns nullptr when that engine is not available (the hierarchical one
//   agrees on it; a single-node team's Allgather follows its set-up).
// * EngineSettings is a copy of the switches engines use, taken when the
//   team is created: engine code never reads the process-wide Runtime.
// * run() is collective over the team (every rank, same bytes_per_peer, same
//   route); contiguous buffers of size() blocks, not overlapping. A route
//   the engine cannot take runs as its default. Never throws.
// * Callers see Engine, its optional abilities (sizes(), containment(),
//   pooling(): null when it lacks one) and its EngineProps, never a
//   concrete engine.
// * Not thread-safe: a team's collective calls are serialised by MPI's rules.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/config/leaders.h"
#include "core/config/net.h"
#include "core/config/shm.h"
#include "core/shm/options.h"
#include "core/status.h"
#include "core/route/route.h"
#include "rcache/options.h"

namespace mlxa2a::core::config {
struct Settings;
}

namespace mlxa2a::core::mpi {

// What an idle engine is kept under in the pool (core/mpi/engine_pool.h): the
// processes of its communicator, in its rank order, and what else its set-up
// depended on. Only a communicator whose key is equal on every rank may take
// it (then its ranks are the processes the engine was built for, each at its
// own rank). Empty world_ranks: never pooled.
struct PoolKey {
  std::vector<int> world_ranks;  // MPI_COMM_WORLD rank of each team rank
  std::vector<int> node_ids;     // the team's node map (multi-node teams)
  bool oversubscribed = false;
  bool operator==(const PoolKey&) const = default;
};

// What an engine's set-up settled, for the decision, the measured selection
// and traces: plain data, fixed once the engine is built (agreed on every rank
// unless marked as this rank's). Callers read these, never the concrete engine.
struct EngineProps {
  enum class Kind : std::uint8_t {
    local,  // one rank: a copy
    node,   // every rank on one node: the shared-memory alltoall
    hier,   // several nodes: fan-in, leaders' exchange, fan-out
  } kind = Kind::local;
  // node: line mode serves bytes per peer up to line_max; CMA may serve
  // (every rank can read every peer: agreed) and is on by
  // MLXA2A_SHM_CMA_THRESHOLD (cma_enabled).
  std::size_t line_max = 0;
  bool cma_usable = false;
  bool cma_enabled = false;
  // hier: the leaders exchange over RDMA, the zero-copy path is up; why not
  // ("" when they are); the leaders of this rank's node (this rank's).
  bool rdma = false;
  bool zcopy = false;
  std::string rdma_why;
  std::string zcopy_why;
  // hier, on a leader whose team exchanges over RDMA: "rc", or "dc" when RC
  // would exceed the QP budget (core/mlx5/dc_transport.h).
  std::string transport;
  int leaders_here = 0;
  std::size_t stage_bytes = 0;  // hier: staging bytes per rank and round (the slot)
  // hier, on a leader: the nodes it sends to, in its order ("2,0").
  std::string targets;
};

// The switches engines read, copied from config::Settings at team creation.
struct EngineSettings {
  config::ShmSwitches shm;  // MLXA2A_SHM_*, whole (core/config/shm.h)
  // Hierarchical engine.
  config::LeaderPolicy leaders;  // MLXA2A_LEADERS
  config::NetSwitches net;       // MLXA2A_NET_*, whole (core/config/net.h)
  rcache::Options rcache;        // zero-copy's registration cache

  static EngineSettings from(const config::Settings& s);
};

// The size agreement for mixed decisions (docs/shm.md "Mixed decisions"),
// of engines that compare every rank's size in each call they take part in
// (the single-node and hierarchical ones; Engine::sizes()).
// check_sizes() is a call that moves nothing, in place of a run() peers may
// be in: ok when every rank announced the same size, size_mismatch (every
// rank alike), or (hierarchical) peer_in_pmpi when a rank went to PMPI
// beside it. Collective like run().
class SizeAgreement {
 public:
  [[nodiscard]] virtual Status check_sizes(std::size_t bytes_per_peer) noexcept = 0;
  // A call this rank serves through PMPI while peers may be in the engine:
  // call(ctx) is its PMPI_Alltoall and runs at most once. By default
  // check_sizes() first, calling only when it returned ok; the hierarchical
  // engine always calls, inside a check round that tells engine peers to
  // join PMPI (HierAlltoall::check), and returns ok or its failure.
  [[nodiscard]] virtual Status beside_pmpi(std::size_t announced, void (*call)(void*),
                                                void* ctx) noexcept {
    const Status st = check_sizes(announced);
    if (st == Status::ok) call(ctx);
    return st;
  }
  // beside_pmpi() for a pmpi trial of measured selection, which also says
  // whether the call matched: ok only when every rank of the team was in
  // the same trial with `announced`, size_mismatch when not (alike on every
  // trial rank; the caller records no trial). The hierarchical engine's
  // check round tells it after PMPI (HierAlltoall::trial); by default
  // beside_pmpi(), whose check_sizes() tells it before.
  [[nodiscard]] virtual Status trial_beside_pmpi(std::size_t announced, void (*call)(void*),
                                                 void* ctx) noexcept {
    return beside_pmpi(announced, call, ctx);
  }
  // After a size_mismatch: agree on a restart point (collective over comm;
  // may be no communication at all). false if that failed.
  [[nodiscard]] virtual bool resync(MPI_Comm comm) noexcept = 0;

 protected:
  ~SizeAgreement() = default;
};

// RDMA containment (core/mpi/containment.h), an optional ability: the
// hierarchical engine, engaged only with RDMA leaders after a failure the
// relay could not hide. contained_call(): ok - PMPI judges this call - or
// false when another rank failed it (then it fails here too).
class EngineContainment {
 public:
  virtual bool contained() const noexcept = 0;
  virtual bool contained_call(std::size_t bytes_per_peer) noexcept = 0;
  virtual const std::string& contained_why() const noexcept = 0;

 protected:
  ~EngineContainment() = default;
};

// The pool's hooks (core/mpi/engine_pool.h), an optional ability. pool_id():
// a number naming this engine, equal on every rank of its team and never
// reused by another engine; 0 for one that is never pooled. poolable():
// nothing failed in it as far as this rank can see, so it may serve another
// communicator of the same processes. rebind(): takes opt's abort callback
// (the new communicator's) for later waits. All local.
class EnginePooling {
 public:
  virtual std::uint64_t pool_id() const noexcept = 0;
  virtual bool poolable() const noexcept = 0;
  virtual void rebind(const shm::Options& opt) noexcept = 0;

 protected:
  ~EnginePooling() = default;
};

class Engine {
 public:
  virtual ~Engine() = default;
  Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // The engine's own choice of path for this size.
  [[nodiscard]] virtual Status run(const char* send, char* recv,
                                        std::size_t bytes_per_peer) noexcept = 0;
  // Through one path (measured selection, docs/tune.md): line, copy or cma
  // on the single-node engine; hier, rdma or zcopy on the hierarchical one.
  [[nodiscard]] virtual Status run(const char* send, char* recv, std::size_t bytes_per_peer,
                                        Route path) noexcept = 0;
  // The path run() without a candidate takes for this size (the first
  // candidate of the measured selection). Alike on every rank.
  virtual Route default_route(std::size_t bytes_per_peer) const noexcept = 0;
  // For a rank that cannot take part in a run() its peers have entered.
  virtual void abandon() noexcept = 0;

  // Optional abilities, advertised as data by the concrete engine when it is
  // built (as UCX interfaces advertise theirs in uct_iface_attr): null when
  // the engine lacks one. The size agreement (SizeAgreement above) of
  // engines that compare sizes; containment; the pool's hooks.
  SizeAgreement* sizes() const noexcept { return abilities_.sizes; }
  EngineContainment* containment() const noexcept { return abilities_.containment; }
  EnginePooling* pooling() const noexcept { return abilities_.pooling; }

  // What set-up settled (EngineProps).
  const EngineProps& props() const noexcept { return props_; }

  // Whether the team took this engine from the pool.
  bool reused() const noexcept { return reused_; }
  void mark_reused() noexcept { reused_ = true; }

 protected:
  struct Abilities {
    SizeAgreement* sizes = nullptr;
    EngineContainment* containment = nullptr;
    EnginePooling* pooling = nullptr;
  };
  EngineProps props_;      // set by the concrete engine when it is built
  Abilities abilities_;    // likewise

 private:
  bool reused_ = false;
};

// What make_engine needs to know about the team; all of it agreed or equal
// on every rank (node_ids), or this rank's own (local_*).
struct EngineRequest {
  MPI_Comm comm = MPI_COMM_NULL;       // the team's communicator
  MPI_Comm node_comm = MPI_COMM_NULL;  // this rank's node, team rank order
  int size = 1;                        // ranks in comm
  int local_rank = 0;                  // in node_comm
  int local_size = 1;
  bool oversubscribed = false;
  const std::vector<int>* node_ids = nullptr;  // per rank: its node's first rank (several nodes)
  int nodes = 1;
};

// While a rank waits in an engine it makes no MPI call, yet a peer may need
// this rank's MPI progress to reach the alltoall (e.g. it waits in MPI_Recv
// for a rendezvous message this rank MPI_Isend'ed before the alltoall - a
// correct MPI program). Waiters call this about once per millisecond while
// yielding; PMPI_Iprobe drives the MPI library's progress engine without
// receiving anything. Always false (never asks the wait to stop).
bool drive_mpi_progress(MPI_Comm comm) noexcept;

// The shared-memory engine's options for a team (abort callback: drives
// comm's MPI progress while a rank waits).
shm::Options shm_options(const config::ShmSwitches& s, MPI_Comm comm, bool oversubscribed);

// The team's engine: LocalEngine for one rank, ShmEngine for one node,
// HierEngine for several. nullptr (alike on every rank) when set-up failed.
std::unique_ptr<Engine> make_engine(const EngineRequest& req, const EngineSettings& s) noexcept;

}  // namespace mlxa2a::core::mpi
