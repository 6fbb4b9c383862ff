// A team's agreed capabilities and the size ranges in which the fixed rules
// (core/plan/decide.cc) route its calls to an engine.
//
// Every field must be identical on all ranks of the communicator (agreed with
// one allreduce per team), so that no two ranks ever take different routes.
#pragma once

#include <cstdint>

namespace mlxa2a::core {

// What a team can run, agreed by all of its ranks.
struct Capabilities {
  bool shm = false;   // every rank of the communicator is on one node
  // The hierarchical engine's leaders exchange over RDMA (core/mlx5), agreed
  // at set-up by every rank. Served as path rdma.
  bool rdma = false;
  int nodes = 0;      // nodes the team spans (0: unknown, no team)
  // Several nodes, and the hierarchical engine (shared-memory fan-in/fan-out,
  // leaders exchange over PMPI) is up on every rank. Served as path shm.
  bool hier = false;
  // In auto mode, shm serves bytes per peer in [shm_auto_from, shm_auto_limit)
  // only: outside, PMPI is known to beat it on this team's layout (see
  // set_auto_ranges). Set from agreed values only; an explicit shm rule in
  // MLXA2A_TUNE overrides them.
  std::uint64_t shm_auto_from = 0;
  std::uint64_t shm_auto_limit = UINT64_MAX;
  // In auto mode, the hierarchical engine serves bytes per peer below this.
  std::uint64_t hier_auto_limit = 0;
  // With rdma: every node shares one PD among its ranks and each rank has a
  // registration cache on it, so the leaders' writes may read the ranks' send
  // buffers (path zcopy, docs/zerocopy.md). Agreed at set-up by every rank.
  bool zcopy = false;
};

// Sets caps' auto-mode ranges from the team's layout: size ranks, nodes taken
// from caps, `oversubscribed` (a node's ranks outnumber its cores) and whether
// the MPI's own alltoall is known to win large blocks then (Open MPI yes,
// MPICH no: it spins). Every input must be equal on all ranks of the team.
void set_auto_ranges(Capabilities& caps, int size, bool oversubscribed,
                     bool pmpi_wins_oversubscribed);

}  // namespace mlxa2a::core
