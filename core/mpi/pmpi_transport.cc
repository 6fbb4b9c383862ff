#include "core/mpi/pmpi_transport.h"

#include <sched.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/arch.h"
#include "core/hier/phases.h"
#include "core/mpi/runtime.h"

namespace mlxa2a::core::mpi {

namespace {

// Any tags: the communicator is private. A round's parity picks one, so a
// partner's pieces of the next call can never match a receive of this one
// that a mismatch left unmatched (settle() cancels it; the partner cannot
// get two calls ahead, it waits for our next message).
constexpr int kTag = 0x6d78;
int tag_of(const hier::Message& m) noexcept { return kTag + (m.parity & 1); }
// Pieces of `bytes` data bytes, at least one (the header goes in any case).
std::size_t pieces_of(std::size_t bytes, std::size_t piece) noexcept {
  return bytes <= piece ? 1 : (bytes + piece - 1) / piece;
}
constexpr int kHeadBytes = static_cast<int>(sizeof(hier::Header));
// Sends of header + data up to this many data bytes are copied into one
// contiguous buffer: a contiguous send is cheaper than a two-block type's in
// every MPI (MPICH over UCX packs a non-contiguous send through a generic
// datatype: ~2,900 instructions against ~700 for two contiguous sends at
// 8 B, callgrind), and copying a few KiB costs less than either. Receives
// keep the type (the header's slot is fixed); the signatures are the same.
constexpr std::size_t kBounceMax = 8192;

std::atomic<std::uint64_t> g_sends{0};     // PMPI_Isend calls
std::atomic<std::uint64_t> g_messages{0};  // hier::Messages sent (partner-rounds)

// Room for every small first piece's copy of header + data (kBounceMax).
std::size_t bounce_bytes(std::span<const hier::Message> messages, std::size_t piece) noexcept {
  std::size_t bounce = 0;
  for (const hier::Message& m : messages) {
    const std::size_t first = m.bytes < piece ? m.bytes : piece;
    if (m.head_send && first > 0 && first <= kBounceMax) bounce += sizeof(hier::Header) + first;
  }
  return bounce;
}

}  // namespace

LeaderMessageCounts leader_message_counts() noexcept {
  return {g_sends.load(std::memory_order_relaxed), g_messages.load(std::memory_order_relaxed)};
}

PmpiLeaderTransport::PmpiLeaderTransport(OwnedComm leaders, std::vector<int> first_rank,
                                       bool oversubscribed, std::size_t piece)
    : comm_(std::move(leaders)),
      first_rank_(std::move(first_rank)),
      piece_(piece < 64 ? 64 : piece),
      spin_(oversubscribed) {
  PMPI_Comm_set_errhandler(comm_.get(), MPI_ERRORS_RETURN);
}

PmpiLeaderTransport::~PmpiLeaderTransport() {
  if (Runtime::instance().state() == State::Finalised) {
    comm_.abandon();
    types_.abandon();
    return;
  }
  abandon_posted();  // before the areas they point into go
}

Status PmpiLeaderTransport::exchange(std::span<const hier::Message> messages) noexcept {
  if (Status st = post(messages); st != Status::ok) return st;
  return complete();
}

Status PmpiLeaderTransport::post(std::span<const hier::Message> messages) noexcept {
  // A previous call that failed between its post and its completion (a
  // local rank's failure ended it) left requests behind; waiting for them
  // could wait forever, so they are cancelled and released.
  abandon_posted();
  try {
    std::size_t pieces = 0;
    for (const hier::Message& m : messages) pieces += pieces_of(m.bytes, piece_);
    requests_.reserve(2 * pieces);
    incoming_.reserve(messages.size());
    // Room for every small send's copy, before any send points into it.
    if (const std::size_t bounce = bounce_bytes(messages, piece_); bounce_.size() < bounce) {
      bounce_.resize(bounce);
    }
    // Receives first, so that an eager message finds its buffer posted.
    std::size_t bounce_at = 0;  // next free byte of bounce_
    if (!post_side(messages, false, bounce_at) || !post_side(messages, true, bounce_at)) {
      abandon_posted();
      return Status::transport_failed;
    }
  } catch (...) {  // allocation of the request list
    abandon_posted();
    return Status::transport_failed;
  }
  // One test now: an MPI that progresses only inside its calls gets its
  // eager sends and the first rendezvous steps under way before the caller
  // turns to other work (the next round's fan-in).
  int done = 0;
  if (PMPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                   MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
    abandon_posted();
    return Status::transport_failed;
  }
  // Completed requests are null now; complete() settles the pieces.
  (void)done;
  return Status::ok;
}

// Posts every message's receives (send = false) or sends: its bytes in
// pieces of piece_, the header in the first piece's message (docs/hier.md
// "Header inside the data message"). A receive's last piece takes up to
// recv_capacity (at most a piece), so that a partner called with another
// size (an erroneous program) sends no piece longer than its buffer; if it
// sends another number of pieces, settle() evens them out, and the engine
// finds the mismatch in the headers (core/hier/transport.h).
bool PmpiLeaderTransport::post_side(std::span<const hier::Message> messages, bool send,
                                   std::size_t& bounce_at) {
  for (const hier::Message& m : messages) {
    const int peer = first_rank_[static_cast<std::size_t>(m.node)] + m.leader;
    const int tag = tag_of(m);
    if (!send && m.head_recv) {
      incoming_.push_back(Incoming{requests_.size(), pieces_of(m.bytes, piece_), m.head_recv,
                                   m.recv, m.recv_capacity, peer, tag, false});
    }
    // At least one data message, also for 0 bytes (a check call's): the
    // partner may be in a real round, which posts one (core/hier/transport.h).
    for (std::size_t at = 0; at == 0 || at < m.bytes; at += piece_) {
      std::size_t len = m.bytes - at < piece_ ? m.bytes - at : piece_;
      if (!send && at + len == m.bytes && m.recv_capacity > m.bytes) {
        const std::size_t room = m.recv_capacity - at;
        len = room < piece_ ? room : piece_;
      }
      char* data = send ? const_cast<char*>(m.send) + at : m.recv + at;
      void* buf = data;
      int count = static_cast<int>(len);
      MPI_Datatype type = MPI_BYTE;
      if (at == 0 && m.head_send) {
        void* head = send ? const_cast<hier::Header*>(m.head_send) : m.head_recv;
        if (len == 0) {  // the header alone: same signature as a 0-byte data block
          buf = head;
          count = kHeadBytes;
        } else if (send && len <= kBounceMax) {
          char* b = bounce_.data() + bounce_at;
          std::memcpy(b, head, sizeof(hier::Header));
          std::memcpy(b + sizeof(hier::Header), data, len);
          bounce_at += sizeof(hier::Header) + len;
          buf = b;
          count = static_cast<int>(sizeof(hier::Header) + len);
        } else {
          buf = MPI_BOTTOM;
          count = 1;
          type = types_.get(head, data, len);
          if (type == MPI_DATATYPE_NULL) return false;
        }
      }
      MPI_Request& r = requests_.emplace_back(MPI_REQUEST_NULL);
      const int rc = send ? PMPI_Isend(buf, count, type, peer, tag, comm_.get(), &r)
                          : PMPI_Irecv(buf, count, type, peer, tag, comm_.get(), &r);
      if (rc != MPI_SUCCESS) return false;
      if (send) g_sends.fetch_add(1, std::memory_order_relaxed);
    }
    if (send) g_messages.fetch_add(1, std::memory_order_relaxed);
  }
  return true;
}

Status PmpiLeaderTransport::complete() noexcept {
  if (requests_.empty()) return Status::ok;
  // Test rather than wait: an MPI that spins inside MPI_Waitall keeps the core
  // from the very peers it waits for when ranks outnumber cores. Each test
  // progresses the MPI; between tests, spin for as long as recent exchanges
  // took (NetSpin), then yield.
  const std::uint64_t start = hier::phases::now_ns();
  const std::uint64_t budget = spin_.budget_ns();
  std::uint64_t polled = start;  // when the last poll began
  for (;;) {
    int done = 0;
    if (PMPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                     MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
      abandon_posted();
      return Status::transport_failed;
    }
    const std::uint64_t now = hier::phases::now_ns();
    const std::uint64_t waited = now - start;
    const std::uint64_t poll_ns = now - polled;
    polled = now;
    if (done) {
      requests_.clear();
      if (!settle(true)) {
        abandon_posted();
        return Status::transport_failed;
      }
      if (!requests_.empty()) continue;  // a longer partner's further pieces
      spin_.observe(waited);
      incoming_.clear();
      return Status::ok;
    }
    if (waited < budget) {
      cpu_relax();
    } else {
      // Not on the fast path: a partner that sends fewer pieces than we
      // expect is found here, where the wait yields anyway.
      if (!settle(false)) {
        abandon_posted();
        return Status::transport_failed;
      }
      // Not when the MPI's poll already gave the core away (NetSpin).
      if (hier::NetSpin::yield_after(poll_ns)) sched_yield();
      polled = hier::phases::now_ns();
    }
  }
}

bool PmpiLeaderTransport::settle(bool all_done) noexcept {
  for (Incoming& in : incoming_) {
    if (in.settled) continue;
    if (!all_done) {
      // Only a message of several pieces can wait for pieces that never come.
      if (in.pieces < 2) continue;
      int arrived = 0;
      if (PMPI_Request_get_status(requests_[in.first], &arrived, MPI_STATUS_IGNORE) !=
          MPI_SUCCESS) {
        return false;
      }
      if (!arrived) continue;
    }
    in.settled = true;
    const std::size_t bytes = in.head->message_bytes;
    const std::size_t sent = pieces_of(bytes, piece_);
    // Receives no piece will match (none when all completed).
    for (std::size_t k = sent; !all_done && k < in.pieces; ++k) {
      if (PMPI_Cancel(&requests_[in.first + k]) != MPI_SUCCESS) return false;
    }
    if (sent > in.pieces) {
      try {
        requests_.reserve(requests_.size() + (sent - in.pieces));
      } catch (...) {
        return false;
      }
    }
    for (std::size_t k = in.pieces; k < sent; ++k) {  // pieces no receive matches yet
      const std::size_t at = k * piece_;
      const std::size_t len = bytes - at < piece_ ? bytes - at : piece_;
      if (at + len > in.capacity) return false;
      MPI_Request& r = requests_.emplace_back(MPI_REQUEST_NULL);  // reserved above
      if (PMPI_Irecv(in.recv + at, static_cast<int>(len), MPI_BYTE, in.peer, in.tag, comm_.get(),
                     &r) != MPI_SUCCESS) {
        return false;
      }
    }
  }
  return true;
}

void PmpiLeaderTransport::abandon_posted() noexcept {
  // The call has failed (the engine stops using this team's exchange):
  // receives not yet matched are cancelled so that no late message lands in
  // an area the team may reuse or unmap; the rest are released to MPI.
  for (MPI_Request& r : requests_) {
    if (r == MPI_REQUEST_NULL) continue;
    PMPI_Cancel(&r);
    PMPI_Request_free(&r);
  }
  // A freed send may still read its copy: the next post() writes elsewhere.
  if (!requests_.empty() && !bounce_.empty()) retired_bounce_ = std::move(bounce_);
  bounce_.clear();
  requests_.clear();
  incoming_.clear();
}

}  // namespace mlxa2a::core::mpi
