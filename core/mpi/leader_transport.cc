#include "core/mpi/leader_transport.h"

#include <sched.h>

#include <cstddef>

#include "core/arch.h"
#include "core/mpi/runtime.h"

namespace mlxa2a::core::mpi {

namespace {

constexpr std::size_t kPiece = std::size_t{1} << 30;  // bytes per MPI message at most
constexpr int kTag = 0x6d78;                          // any tag: the communicator is private

}  // namespace

MpiLeaderTransport::MpiLeaderTransport(OwnedComm leaders, std::vector<int> first_rank,
                                       bool oversubscribed)
    : comm_(std::move(leaders)),
      first_rank_(std::move(first_rank)),
      oversubscribed_(oversubscribed) {
  PMPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN);
}

MpiLeaderTransport::~MpiLeaderTransport() {
  if (Runtime::instance().state() == State::Finalised) comm_.abandon();
}

Status MpiLeaderTransport::exchange(std::span<const hier::Message> messages) noexcept {
  // Posts every message's receives (send = false) or sends, in pieces.
  auto post = [&](bool send) {
    for (const hier::Message& m : messages) {
      const int peer = first_rank_[static_cast<std::size_t>(m.node)] + m.leader;
      for (std::size_t at = 0; at < m.bytes; at += kPiece) {
        const int len = static_cast<int>(m.bytes - at < kPiece ? m.bytes - at : kPiece);
        MPI_Request& r = requests_.emplace_back(MPI_REQUEST_NULL);
        const int rc = send ? PMPI_Isend(m.send + at, len, MPI_BYTE, peer, kTag, comm_.get(), &r)
                            : PMPI_Irecv(m.recv + at, len, MPI_BYTE, peer, kTag, comm_.get(), &r);
        if (rc != MPI_SUCCESS) return false;
      }
    }
    return true;
  };
  try {
    requests_.clear();
    // Receives first, so that an eager message finds its buffer posted.
    if (!post(false) || !post(true)) return Status::transport_failed;
  } catch (...) {  // allocation of the request list
    return Status::transport_failed;
  }
  // Test rather than wait: an MPI that spins inside MPI_Waitall keeps the core
  // from the very peers it waits for when ranks outnumber cores.
  const unsigned spins = oversubscribed_ ? 4 : 2000;
  for (unsigned i = 0;; ++i) {
    int done = 0;
    if (PMPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                     MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
      return Status::transport_failed;
    }
    if (done) return Status::ok;
    if (i < spins) {
      cpu_relax();
    } else {
      sched_yield();
    }
  }
}

}  // namespace mlxa2a::core::mpi
