// The leaders' exchange of the hierarchical alltoall over PMPI point-to-point.
//
// Contract
// * Owns a private communicator holding exactly the team's leaders, ordered
//   by node, then by leader index (so leader j of node m is rank
//   first_rank[m] + j), where no message of ours can match a receive of the
//   application's.
// * post(): per remote node, its message cut into pieces of at most `piece`
//   data bytes (MLXA2A_NET_PMPI_PIECE: below the MPI's eager limit, so no
//   piece waits for a rendezvous handshake; docs/hier-transports.md), one
//   PMPI_Irecv and one PMPI_Isend per piece, all in flight at once; the
//   hier::Header travels in the first piece (small sends copied into one
//   buffer, larger ones and every receive a two-block datatype,
//   HeadedTypes); then one PMPI_Testall to start them. The tag is the round's
//   parity, so pieces of consecutive calls never match each other's
//   receives. complete(): tests for completion, yielding the core between
//   tests when the node is oversubscribed; a partner called with another
//   size (an erroneous program) sends another number of pieces, which the
//   first piece's Header tells: complete() then receives the surplus or
//   cancels the receives that no piece will match (Pieces below);
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

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/hier/net_spin.h"
#include "core/hier/transport.h"
#include "core/mpi/headed_types.h"
#include "core/mpi/topology.h"

namespace mlxa2a::core::mpi {

// Process-wide, for MLXA2A_COLL_STATS ("stats phases:" line): MPI sends the
// PMPI leader transports posted, and the messages (partner and round) they
// carried; sends - messages is what went as extra MPI messages (pieces
// beyond a message's first, MLXA2A_NET_PMPI_PIECE). Relaxed atomics, any
// thread.
struct LeaderMessageCounts {
  std::uint64_t sends = 0;
  std::uint64_t messages = 0;
};
LeaderMessageCounts leader_message_counts() noexcept;

class PmpiLeaderTransport final : public hier::LeaderTransport {
 public:
  // piece: data bytes per MPI message at most (>= 64), alike on every leader.
  PmpiLeaderTransport(OwnedComm leaders, std::vector<int> first_rank, bool oversubscribed,
                     std::size_t piece);
  ~PmpiLeaderTransport() override;
  PmpiLeaderTransport(const PmpiLeaderTransport&) = delete;
  PmpiLeaderTransport& operator=(const PmpiLeaderTransport&) = delete;
  Status exchange(std::span<const hier::Message> messages) noexcept override;
  Status post(std::span<const hier::Message> messages) noexcept override;
  Status complete() noexcept override;
  const char* name() const noexcept override { return "pmpi"; }
  // Partners' bytes land only in the receives post() makes.
  bool two_sided() const noexcept override { return true; }

 private:
  // A posted message's receives (requests_[first .. first + pieces)), until
  // its Header said how many pieces its sender sends (settle()).
  struct Incoming {
    std::size_t first = 0;
    std::size_t pieces = 0;
    const hier::Header* head = nullptr;  // arrives with the first piece
    char* recv = nullptr;
    std::size_t capacity = 0;  // bytes from recv that may be written
    int peer = 0;
    int tag = 0;
    bool settled = false;
  };
  OwnedComm comm_;
  std::vector<int> first_rank_;  // per node: its leader 0's rank in comm_
  std::size_t piece_;            // data bytes per MPI message at most
  hier::NetSpin spin_;  // complete()'s spin budget, from its recent waits
  // post()'s half for every receive (send = false) or every send; false on
  // an MPI error. Throws only allocation (bounce_ is sized before).
  bool post_side(std::span<const hier::Message> messages, bool send, std::size_t& bounce_at);
  // Matches each Incoming's receives to its sender's pieces once its Header
  // is in: posts receives for pieces beyond ours, cancels ours beyond the
  // sender's. all_done: every request completed (and requests_ is empty);
  // else only messages whose first piece has arrived. false on an MPI error
  // or a message longer than its room.
  bool settle(bool all_done) noexcept;
  // Cancels what is still posted after an MPI error and releases it.
  void abandon_posted() noexcept;
  std::vector<Incoming> incoming_;
  std::vector<MPI_Request> requests_;  // posted and not yet complete
  HeadedTypes types_;                  // header + first data piece, per message
  // Small sends' header + data, copied contiguous (pmpi_transport.cc,
  // kBounceMax); valid until the next post(), which comes after complete().
  std::vector<char> bounce_;
  std::vector<char> retired_bounce_;  // of an abandoned post (abandon_posted)
};

}  // namespace mlxa2a::core::mpi
