#include "core/mpi/pmpi_relay.h"

#include <algorithm>

#include "core/log.h"
#include "core/mpi/runtime.h"

namespace mlxa2a::core::mpi {

namespace {

constexpr std::size_t kPiece = std::size_t{1} << 30;

int piece_len(std::size_t bytes, std::size_t at) {
  return static_cast<int>(std::min(kPiece, bytes - at));
}

}  // namespace

PmpiRelay::PmpiRelay(OwnedComm leaders) : comm_(std::move(leaders)) {
  PMPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN);
}

PmpiRelay::~PmpiRelay() {
  if (Runtime::instance().state() == State::Finalised) {
    comm_.abandon();  // MPI_Finalize freed it
    return;
  }
  if (!reap() || !out_.empty()) {
    for (Outgoing& o : out_) {
      for (MPI_Request& r : o.requests) {
        if (r != MPI_REQUEST_NULL) PMPI_Request_free(&r);
      }
    }
    // The MPI may still read them: kept for the process's life.
    new std::deque<Outgoing>(std::move(out_));
  }
}

bool PmpiRelay::reap() noexcept {
  while (!out_.empty()) {
    std::vector<MPI_Request>& reqs = out_.front().requests;
    int flag = 0;
    if (PMPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &flag, MPI_STATUSES_IGNORE) !=
        MPI_SUCCESS) {
      return false;
    }
    if (!flag) return true;
    out_.pop_front();
  }
  return true;
}

Status PmpiRelay::send(int member, const hier::RelayNotice& notice, const char* data) noexcept {
  if (!reap()) return Status::transport_failed;
  try {
    Outgoing& o = out_.emplace_back();
    o.notice = notice;
    o.data.assign(data, data + notice.bytes);
    o.requests.reserve(2 + notice.bytes / kPiece);
    MPI_Request r;
    if (PMPI_Isend(&o.notice, sizeof(hier::RelayNotice), MPI_BYTE, member, kNoticeTag,
                   comm_.get(), &r) != MPI_SUCCESS) {
      return Status::transport_failed;
    }
    o.requests.push_back(r);
    for (std::size_t at = 0; at < notice.bytes; at += kPiece) {
      if (PMPI_Isend(o.data.data() + at, piece_len(notice.bytes, at), MPI_BYTE, member, kDataTag,
                     comm_.get(), &r) != MPI_SUCCESS) {
        return Status::transport_failed;
      }
      o.requests.push_back(r);
    }
  } catch (...) {  // allocation only
    return Status::transport_failed;
  }
  return Status::ok;
}

Status PmpiRelay::next(int* member, hier::RelayNotice* notice, bool* got) noexcept {
  int flag = 0;
  MPI_Status st;
  *got = false;
  if (!reap()) return Status::transport_failed;
  if (PMPI_Iprobe(MPI_ANY_SOURCE, kNoticeTag, comm_.get(), &flag, &st) != MPI_SUCCESS) {
    return Status::transport_failed;
  }
  if (!flag) return Status::ok;
  if (PMPI_Recv(notice, sizeof(hier::RelayNotice), MPI_BYTE, st.MPI_SOURCE, kNoticeTag,
                comm_.get(), MPI_STATUS_IGNORE) != MPI_SUCCESS ||
      notice->magic != hier::RelayNotice::kMagic) {
    MLXA2A_LOG(Error, "relay: a malformed notice from leader %d", st.MPI_SOURCE);
    return Status::transport_failed;
  }
  *member = st.MPI_SOURCE;
  *got = true;
  return Status::ok;
}

Status PmpiRelay::receive(int member, char* dst, std::size_t bytes) noexcept {
  for (std::size_t at = 0; at < bytes; at += kPiece) {
    char* to = dst;
    if (to == nullptr) {
      try {
        discard_.resize(std::min(kPiece, bytes));
      } catch (...) {
        return Status::transport_failed;
      }
      to = discard_.data();
    } else {
      to += at;
    }
    if (PMPI_Recv(to, piece_len(bytes, at), MPI_BYTE, member, kDataTag, comm_.get(),
                  MPI_STATUS_IGNORE) != MPI_SUCCESS) {
      return Status::transport_failed;
    }
  }
  return Status::ok;
}

}  // namespace mlxa2a::core::mpi
