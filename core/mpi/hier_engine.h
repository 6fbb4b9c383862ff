// HierEngine: the engine of a team spread over several nodes — the
// hierarchical alltoall (core/hier/hier_alltoall.h) with its leaders'
// transport, the zero-copy variant and RDMA containment. Built only by
// make_engine (core/mpi/engine.h).
//
// Contract
// * create() is collective over req.comm: one PMPI_Allgather that agrees on
//   the leaders, on whether RDMA is attempted (every leader offers a port)
//   and so on the staging slot (MLXA2A_SHM_SLOT_SIZE for RDMA leaders, which
//   pin it; MLXA2A_NET_PMPI_SLOT_SIZE for PMPI leaders), the node's staging
//   segment over req.node_comm, a leaders' communicator (PMPI_Comm_split), the RDMA
//   transport's set-up among the leaders (core/mlx5/rdma_transport.h), the
//   zero-copy set-up over the node communicator when MLXA2A_NET_ZCOPY_THRESHOLD
//   is not 0 (docs/zerocopy.md), and PMPI_Allreduces that agree on the outcome:
//   every rank gets an engine or none does, and all agree on the transport
//   (RDMA where every leader has it, else PMPI: LeaderTransport,
//   core/hier/transport.h) and on zero-copy. Every step runs on every rank
//   whatever failed before, so no rank skips a collective its peers are in.
// * The engine may outlive its team in the pool (core/mpi/engine_pool.h) and
//   serve a later communicator of the same processes: set-up agrees on its
//   pool_id(); everything it owns was made from its first communicator's
//   group and serves any communicator of that group.
// * RDMA teams arm a Containment (core/mpi/containment.h): a failed or
//   abandoned run() starts its agreement, and contained()/contained_call()
//   then serve later calls. With PMPI leaders a failure leaves the engine
//   broken (docs/hier.md, "Errors").
// * Engine calls are numbered alike on every rank (0-byte runs are not
//   calls: they return at once everywhere); a check call (check_sizes,
//   beside_pmpi) is one. On a contained team a check ends as
//   contained_call() says (ok: PMPI judges the sizes; else the call fails).
#pragma once

#include <memory>
#include <string>

#include "core/collective_setup.h"
#include "core/hier/hier_alltoall.h"
#include "core/hier/zero_copy.h"
#include "core/mpi/containment.h"
#include "core/mpi/engine.h"

namespace mlxa2a::core::mpi {

class HierEngine final : public Engine,
                         public SizeAgreement,
                         public EngineContainment,
                         public EnginePooling {
 public:
  static std::unique_ptr<HierEngine> create(const EngineRequest& req,
                                            const EngineSettings& s) noexcept;
  ~HierEngine() override;

  Status run(const char* send, char* recv, std::size_t bytes) noexcept override;
  Status run(const char* send, char* recv, std::size_t bytes,
                  Route path) noexcept override;
  Route default_route(std::size_t bytes) const noexcept override;
  void abandon() noexcept override;
  // After a size_mismatch every rank stopped after the same round
  // (HierAlltoall's contract): stages and transports are in step, nothing to
  // agree on, no MPI call.
  bool resync(MPI_Comm) noexcept override { return true; }
  // Check calls (HierAlltoall::check), numbered and contained like run().
  Status check_sizes(std::size_t bytes) noexcept override;
  Status beside_pmpi(std::size_t announced, void (*call)(void*),
                          void* ctx) noexcept override;
  Status trial_beside_pmpi(std::size_t announced, void (*call)(void*),
                           void* ctx) noexcept override;
  bool contained() const noexcept override { return containment_.engaged(); }
  bool contained_call(std::size_t bytes) noexcept override;
  const std::string& contained_why() const noexcept override { return containment_.why(); }
  // The pool (core/mpi/engine_pool.h): the id agreed at set-up; healthy when
  // neither the stage nor the transport failed and no containment is engaged.
  std::uint64_t pool_id() const noexcept override { return pool_id_; }
  bool poolable() const noexcept override {
    return hier_ && hier_->healthy() && !containment_.engaged();
  }
  void rebind(const shm::Options& opt) noexcept override {
    if (hier_) hier_->rebind(opt);
  }

 private:
  // One engine call (zcopy: null = staged): numbered, contained on failure.
  Status run_counted(const char* send, char* recv, std::size_t bytes,
                          hier::SendRegistration* zcopy) noexcept;
  // The status of a numbered call, containing it when it failed.
  Status counted(Status st) noexcept;
  // beside_pmpi() and trial_beside_pmpi(): a check round with PMPI inside.
  Status pmpi_inside(std::size_t announced, bool trial, void (*call)(void*), void* ctx) noexcept;
  explicit HierEngine(const EngineSettings& s);
  // create()'s body; false if it failed on any rank. Its steps, each run on
  // every rank whatever failed before (core/collective_setup.h):
  struct Setup;
  bool setup(const EngineRequest& req) noexcept;
  bool agree_leaders(Setup& s);
  bool make_stage(Setup& s);
  bool split_leaders(Setup& s);
  void try_transports(Setup& s);
  Status rdma_attempts(Setup& s);
  SetupOutcome agree_transports(Setup& s, const SetupOutcome& here);
  bool build(Setup& s);
  bool finish(bool ok) noexcept;
  // A leader's say before the stage is made: whether this process offers an
  // RDMA port (verbs loaded, a usable port; no collective). false: rdma_why_
  // says why.
  bool rdma_offered() noexcept;
  // A leader's half of the RDMA transport's set-up, collective over the
  // leaders' communicator; not ok (rdma_why_ says why) if it failed here,
  // Status::contended if another team's set-up held a pair it needs.
  Status try_rdma(MPI_Comm leaders, const hier::NodeMap& map, int rank, bool oversubscribed,
                const shm::NodeStage* stage, const std::vector<int>& first_rank,
                std::unique_ptr<hier::LeaderTransport>* out) noexcept;
  // Zero-copy's set-up, collective over node_comm (every rank of the node,
  // whatever failed before): the node's shared PD and this rank's cache.
  // leader: the node's leader's local rank; rdma_ok: on the leader, whether
  // its RDMA transport is up. false (zcopy_why_ says why) if unavailable.
  bool try_zcopy(MPI_Comm node_comm, const hier::NodeMap& map, int rank, int leader,
                 bool rdma_ok) noexcept;
  // After a failed engine call on an RDMA team: agree, then no engine.
  void contain(Status st) noexcept;

  const EngineSettings settings_;
  // Declared first, so destroyed last: after the engine and its transport.
  Containment containment_;
  std::unique_ptr<hier::HierAlltoall> hier_;
  // This rank's zero-copy registrations (core/mlx5/zcopy_sender.h); only
  // with zcopy_on_. Destroyed before the engine, as before the split.
  std::unique_ptr<hier::SendRegistration> zcopy_;
  std::uint64_t engine_calls_ = 0;  // alike on every rank
  std::uint64_t pool_id_ = 0;       // agreed at set-up, alike on every rank
  std::size_t stage_bytes_ = 0;     // staging bytes per rank and round, agreed
  bool rdma_ = false;
  bool zcopy_on_ = false;
  std::string rdma_why_;
  std::string zcopy_why_;
  bool dc_ = false;  // leader: its RDMA transport is DC (over the RC QP budget)
  std::uint32_t rdma_gather_sge_ = 0;  // leader: SGEs per WR its RDMA transport's QPs take
};

}  // namespace mlxa2a::core::mpi
