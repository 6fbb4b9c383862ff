// The leaders' inter-node exchange, as the hierarchical alltoall needs it:
// one message to and one from every other node's leader per round.
//
// Contract
// * exchange() is called by every leader of each node, the same number of
//   times on every node, with one Message per remote node it handles (in node
//   order; Plan::handled_by), addressed to the partner leader there. It
//   returns once every message of this call has been sent (its send buffer
//   may be reused) and received in full.
// * Message sizes are symmetric: what this leader sends to node m is exactly
//   as long as what it receives from node m.
// * Implementations: PMPI point-to-point on a private communicator
//   (core/mpi/leader_transport.h); later RDMA writes (core/mlx5).
// * Errors: a Status other than ok; the engine then fails the call on its
//   node (shm::Status::transport_failed).
#pragma once

#include <cstddef>
#include <span>

#include "core/shm/status.h"

namespace mlxa2a::hier {

struct Message {
  int node;           // the remote node (NodeMap numbering)
  int leader;         // which of its leaders (index in NodeMap::leaders(node))
  const char* send;   // bytes to its leader
  char* recv;         // bytes from its leader land here
  std::size_t bytes;  // both directions
};

class LeaderTransport {
 public:
  virtual ~LeaderTransport() = default;
  [[nodiscard]] virtual shm::Status exchange(std::span<const Message> messages) noexcept = 0;
};

}  // namespace mlxa2a::hier
