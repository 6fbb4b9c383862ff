// HierEngine::Setup: what the steps of HierEngine::setup() hand on to each
// other (this rank's view). Private to hier_engine.cc and
// hier_transports.cc, which share the set-up's steps.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/collective_setup.h"
#include "core/hier/plan.h"
#include "core/mpi/hier_engine.h"
#include "core/mpi/topology.h"
#include "core/shm/node_stage.h"

namespace mlxa2a::core::mpi {

// A random number, different in every process and every call (hier_engine.cc).
std::uint64_t pool_proposal() noexcept;

struct HierEngine::Setup {
  explicit Setup(const EngineRequest& r) : req(r) {}
  const EngineRequest& req;
  CollectiveSetup steps;
  int rank = 0, local_rank = 0, local_size = 1;
  bool lead = false;
  bool attempt_rdma = false;  // agreed: every leader offers a port
  std::size_t stage_bytes = 0;  // agreed, for the transport attempted
  std::vector<int> leads;
  std::optional<hier::NodeMap> map;
  std::unique_ptr<shm::NodeStage> stage;
  OwnedComm leaders;           // ordered by node, then by leader index
  std::vector<int> first_rank;  // per node: its first leader's rank in `leaders`
  std::unique_ptr<hier::LeaderTransport> rdma;
  int rdma_failed = 1, zcopy_failed = 1;  // this rank's say (non-leaders: none on RDMA)
};

}  // namespace mlxa2a::core::mpi
