#include "core/mpi/leader_transport.h"

#include <sched.h>

#include <cstddef>

#include "core/arch.h"
#include "core/mpi/runtime.h"

namespace mlxa2a::core::mpi {

namespace {

constexpr std::size_t kPiece = std::size_t{1} << 30;  // bytes per MPI message at most
constexpr int kTag = 0x6d78;                          // any tag: the communicator is private
constexpr int kHeadTag = kTag + 1;                    // the messages' hier::Header
constexpr int kHeadBytes = static_cast<int>(sizeof(hier::Header));

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
  // Posts every message's receives (send = false) or sends: its header, then
  // its bytes in pieces. A receive's last piece takes up to recv_capacity, so
  // that a partner called with another size (an erroneous program) sends no
  // message longer than its buffer: the engine finds the mismatch in the
  // headers (core/hier/transport.h). Messages of more than one piece on
  // either side with such a partner are not covered (docs/hier.md).
  auto post = [&](bool send) {
    for (const hier::Message& m : messages) {
      const int peer = first_rank_[static_cast<std::size_t>(m.node)] + m.leader;
      if (m.head_send) {
        MPI_Request& r = requests_.emplace_back(MPI_REQUEST_NULL);
        const int rc =
            send ? PMPI_Isend(m.head_send, kHeadBytes, MPI_BYTE, peer, kHeadTag,
                              comm_.get(), &r)
                 : PMPI_Irecv(m.head_recv, kHeadBytes, MPI_BYTE, peer, kHeadTag,
                              comm_.get(), &r);
        if (rc != MPI_SUCCESS) return false;
      }
      for (std::size_t at = 0; at < m.bytes; at += kPiece) {
        std::size_t len = m.bytes - at < kPiece ? m.bytes - at : kPiece;
        if (!send && at + len == m.bytes && m.recv_capacity > m.bytes) {
          const std::size_t room = m.recv_capacity - at;
          len = room < kPiece ? room : kPiece;
        }
        MPI_Request& r = requests_.emplace_back(MPI_REQUEST_NULL);
        const int n = static_cast<int>(len);
        const int rc = send ? PMPI_Isend(m.send + at, n, MPI_BYTE, peer, kTag, comm_.get(), &r)
                            : PMPI_Irecv(m.recv + at, n, MPI_BYTE, peer, kTag, comm_.get(), &r);
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
