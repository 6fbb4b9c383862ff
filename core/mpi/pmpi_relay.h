// hier::Relay over PMPI point-to-point on a private communicator of the
// team's leaders (docs/hier.md, "Failure transparency"): what an RDMA leader
// sends this way when its write could not be trusted.
//
// Contract
// * Owns the communicator (the leaders' split, ordered like the RDMA
//   transport's members), errors returned as codes (MPI_ERRORS_RETURN).
// * A notice goes with tag kNoticeTag, its bytes right after with
//   kDataTag, in pieces of at most 1 GiB (MPI counts are int); the MPI keeps
//   one sender's messages on one tag in order, so next()/receive() pair them.
// * Nothing is sent in a call without a failure: the communicator sits idle
//   and costs only its creation (the leaders' split the RDMA transport's
//   set-up used, kept instead of freed).
// * Destruction: sends a partner never took (a duplicate of a write that
//   landed, the partner's team gone) are released to the MPI and their
//   buffers kept (rare, small) rather than waited for.
#pragma once

#include <mpi.h>

#include <deque>
#include <vector>

#include "core/hier/relay.h"
#include "core/mpi/topology.h"

namespace mlxa2a::core::mpi {

class PmpiRelay final : public hier::Relay {
 public:
  explicit PmpiRelay(OwnedComm leaders);
  ~PmpiRelay() override;
  PmpiRelay(const PmpiRelay&) = delete;
  PmpiRelay& operator=(const PmpiRelay&) = delete;

  Status send(int member, const hier::RelayNotice& notice, const char* data) noexcept override;
  Status next(int* member, hier::RelayNotice* notice, bool* got) noexcept override;
  Status receive(int member, char* dst, std::size_t bytes) noexcept override;

  static constexpr int kNoticeTag = 0x3a01;
  static constexpr int kDataTag = 0x3a02;

 private:
  struct Outgoing {
    hier::RelayNotice notice;
    std::vector<char> data;  // the bytes' copy
    std::vector<MPI_Request> requests;
  };
  // Drops the sends that completed (oldest first). false on an MPI error.
  bool reap() noexcept;

  OwnedComm comm_;
  std::deque<Outgoing> out_;
  std::vector<char> discard_;  // a duplicate's bytes land here
};

}  // namespace mlxa2a::core::mpi
