// The leaders' exchange of the hierarchical alltoall over PMPI point-to-point.
//
// Contract
// * Owns a private communicator holding exactly the team's leaders, ordered
//   by node, then by leader index (so leader j of node m is rank
//   first_rank[m] + j), where no message of ours can match a receive of the
//   application's.
// * post(): one PMPI_Irecv and one PMPI_Isend per remote node, the
//   hier::Header and the data in one message (small sends copied into one
//   buffer, larger ones and every receive a two-block datatype, HeadedTypes; messages over 1 GiB are cut into pieces so every count fits
//   an int, the header goes with the first) and one PMPI_Testall to start them; complete(): tests for completion,
//   yielding the core between tests when the node is oversubscribed;
//   exchange() = post() + complete(). Between the two, pipelined rounds fill
//   the next in-area (docs/hier.md "Pipelined rounds"): small messages
//   travel eagerly meanwhile, large ones progress as far as the MPI moves
//   them without being called. Errors come back as codes (MPI_ERRORS_RETURN
//   on the private communicator) and end the call with
//   Status::transport_failed; what was posted is then cancelled/released.
// * Destruction frees the communicator (local in the MPIs we support), except
//   inside MPI_Finalize (a communicator the application never freed), where
//   MPI frees it itself.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "core/hier/net_spin.h"
#include "core/hier/transport.h"
#include "core/mpi/headed_types.h"
#include "core/mpi/topology.h"

namespace mlxa2a::core::mpi {

// Process-wide, for MLXA2A_COLL_STATS ("stats phases:" line): MPI sends the
// PMPI leader transports posted, and the messages (partner and round) they
// carried; sends - messages is what went as extra MPI messages (pieces of
// messages over 1 GiB). Relaxed atomics, any thread.
struct LeaderMessageCounts {
  std::uint64_t sends = 0;
  std::uint64_t messages = 0;
};
LeaderMessageCounts leader_message_counts() noexcept;

class MpiLeaderTransport final : public hier::LeaderTransport {
 public:
  MpiLeaderTransport(OwnedComm leaders, std::vector<int> first_rank, bool oversubscribed);
  ~MpiLeaderTransport() override;
  MpiLeaderTransport(const MpiLeaderTransport&) = delete;
  MpiLeaderTransport& operator=(const MpiLeaderTransport&) = delete;
  Status exchange(std::span<const hier::Message> messages) noexcept override;
  Status post(std::span<const hier::Message> messages) noexcept override;
  Status complete() noexcept override;
  const char* name() const noexcept override { return "pmpi"; }

 private:
  OwnedComm comm_;
  std::vector<int> first_rank_;  // per node: its leader 0's rank in comm_
  hier::NetSpin spin_;  // complete()'s spin budget, from its recent waits
  // post()'s half for every receive (send = false) or every send; false on
  // an MPI error. Throws only allocation (bounce_ is sized before).
  bool post_side(std::span<const hier::Message> messages, bool send, std::size_t& bounce_at);
  // Cancels what is still posted after an MPI error and releases it.
  void abandon_posted() noexcept;
  std::vector<MPI_Request> requests_;  // posted and not yet complete
  HeadedTypes types_;                  // header + first data piece, per message
  // Small sends' header + data, copied contiguous (leader_transport.cc,
  // kBounceMax); valid until the next post(), which comes after complete().
  std::vector<char> bounce_;
  std::vector<char> retired_bounce_;  // of an abandoned post (abandon_posted)
};

}  // namespace mlxa2a::core::mpi
