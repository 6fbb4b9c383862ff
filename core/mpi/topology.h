// Topology: which ranks of a communicator share a node.
//
// Contract
// * node_of_comm() is collective over comm (every rank calls it at the same
//   point): PMPI_Comm_split_type(MPI_COMM_TYPE_SHARED), then, when virtual
//   nodes are configured (MLXA2A_DEBUG_NODE_SIZE, tests only), a PMPI_Comm_split
//   of that by virtual node, and one PMPI_Allreduce of affinity masks on the
//   real node. No other communication.
// * The returned node communicator is owned by the NodeComm (freed by its
//   destructor, which is local). Teams keep it only during their set-up.
// * Errors: false when an MPI call failed on this rank; the caller must still
//   take part in the team's agreement so that no rank waits forever.
#pragma once

#include <mpi.h>

#include "core/config/node_layout.h"

namespace mlxa2a::core::mpi {

// The single owner of a communicator mlxa2a created.
class OwnedComm {
 public:
  OwnedComm() = default;
  explicit OwnedComm(MPI_Comm c) : comm_(c) {}
  ~OwnedComm() { reset(); }
  OwnedComm(OwnedComm&& o) noexcept : comm_(o.comm_) { o.comm_ = MPI_COMM_NULL; }
  OwnedComm& operator=(OwnedComm&& o) noexcept;
  OwnedComm(const OwnedComm&) = delete;
  OwnedComm& operator=(const OwnedComm&) = delete;

  MPI_Comm get() const { return comm_; }
  MPI_Comm* out() { reset(); return &comm_; }
  void reset() noexcept;
  // Gives up ownership without freeing (MPI_Finalize is tearing it down).
  void abandon() noexcept { comm_ = MPI_COMM_NULL; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

struct NodeComm {
  OwnedComm comm;            // this rank's (virtual) node within the communicator
  int local_rank = 0;
  int local_size = 1;
  // Ranks of this job on the real node outnumber the cores they may run on
  // (union of the affinity masks of the node's ranks in this communicator, and
  // the launcher's local rank count when it exports one). Equal on all ranks
  // of the real node.
  bool oversubscribed = false;
};

[[nodiscard]] bool node_of_comm(MPI_Comm comm, const config::NodeLayout& layout, NodeComm* out);

// The NUMA domain (numa = true) or processor package this process is bound
// to, as hwloc's logical index; -1 when it is not bound within one (unbound,
// bound across several, or hwloc failed). Local; the topology is read once
// per process and kind.
int cpu_domain(bool numa);

}  // namespace mlxa2a::core::mpi
