// The leaders' inter-node exchange, as the hierarchical alltoall needs it:
// one message to and one from every other node's leader per round.
//
// Contract
// * Creation (implementation-specific, collective over the team's leaders)
//   hands the transport this node's StageAreas: the fan-in and fan-out areas
//   of both parities, fixed for the team's life. A one-sided transport
//   (RDMA, core/mlx5) registers them once and publishes the out-areas'
//   addresses and keys to its partners; a two-sided one (PMPI) ignores them.
// * exchange() is called by every leader of each node, the same number of
//   times on every node, with one Message per remote node it handles
//   (Plan::handled_by), from the next node on, cyclically (node k's leaders
//   start at node k+1: no incast), addressed to the partner leader there. It
//   returns once every message of this call has been sent (its send buffer
//   may be reused) and received in full.
// * A Message's send lies in the in-area and its recv in the out-area of the
//   round's parity; remote_offset is where the bytes land in the *partner's*
//   out-area of that parity (the partner's layout differs from ours,
//   docs/hier.md), so a one-sided transport needs no per-call handshake.
// * Message sizes are symmetric: what this leader sends to node m is exactly
//   as long as what it receives from node m — in a correct program. A partner
//   called with another size may send a message of another length (at most
//   recv_capacity); the transport completes the exchange all the same and the
//   engine finds the mismatch in the Headers.
// * Implementations: PMPI point-to-point on a private communicator
//   (core/mpi/pmpi_transport.h), RDMA writes (core/mlx5/rdma_transport.h).
// * Errors: a Status other than ok; the engine then fails the call on its
//   node (Status::transport_failed). With a relay (set_relay()) a failed
//   write is not one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/status.h"

namespace mlxa2a::hier {

class Relay;  // core/hier/relay.h

// A node's staging areas as NodeStage maps them: index = parity (the stage's
// call sequence & 1). Every area is `bytes` long.
struct StageAreas {
  char* in[2] = {nullptr, nullptr};
  char* out[2] = {nullptr, nullptr};
  std::size_t bytes = 0;
  // What pages back them (shm::pages_name: "4k", "thp", "hugetlb"), for the
  // fabric summary (MLXA2A_NET_HUGEPAGES).
  const char* pages = "4k";
};

// Zero-copy (docs/zerocopy.md): one local rank's send buffer as its
// leader's NIC reads it, published by the rank in the node's in-area trailer.
struct GatherSource {
  std::uint64_t addr = 0;    // NIC address of the buffer's first byte: the user's pointer
  std::uint32_t lkey = 0;    // key of the registration covering the buffer
  std::uint32_t staged = 0;  // 1: not registered; its rows were copied into the in-area
  std::int32_t pid = 0;      // the rank's process: a relayed message reads its bytes (CMA)
  std::uint32_t pad = 0;
};

// Where a zero-copy message's bytes are: the in-area section's layout (block
// [a][b] = source a's bytes for dest_ranks[b], at slot block_slot() of
// core/hier/rows.h) read from the sources' own buffers at dest_ranks[b] *
// bytes_per_peer + offset, chunk bytes per block; a staged source's row is in
// the section (Message::send) as usual.
struct Gather {
  std::span<const GatherSource> sources;  // the node's ranks, local order
  std::span<const int> dest_ranks;        // the remote node's members (team ranks)
  std::size_t bytes_per_peer = 0;
  std::size_t offset = 0;
  std::size_t chunk = 0;
};

// What a leader tells its partner with every message (docs/hier.md, "Sizes
// that differ"): the call's size on its node, its message's length, whether a rank there called
// with another one and whether a rank there was sent to PMPI_Alltoall (a
// check call, HierAlltoall::check). Sent to a fixed place (Plan::header) in
// the partner's out-area, so it arrives intact whatever size the partner
// expects.
struct Header {
  std::uint64_t bytes_per_peer = 0;
  std::uint64_t flags = 0;  // kOtherSize | kWentPmpi | kAllTrial
  // The data bytes of the message it heads (Message::bytes on the sender):
  // a transport that cuts messages into pieces learns from it how many come
  // from a partner called with another size (core/mpi/pmpi_transport.h).
  std::uint64_t message_bytes = 0;
  static constexpr std::uint64_t kOtherSize = 1;
  static constexpr std::uint64_t kWentPmpi = 2;
  // Every rank of the node is in a pmpi trial of measured selection
  // (HierAlltoall::trial; always with kWentPmpi).
  static constexpr std::uint64_t kAllTrial = 4;
};

struct Message {
  int node;                   // the remote node (NodeMap numbering)
  int leader;                 // which of its leaders (index in NodeMap::leaders(node))
  const char* send;           // bytes to its leader (in this node's in-area)
  char* recv;                 // bytes from its leader land here (this node's out-area)
  // Both directions; 0 in a check call (HierAlltoall::check): the message
  // still goes (a transport sends and receives one data message per
  // partner and round whatever its length, so that a partner in a real
  // round matches it).
  std::size_t bytes;
  std::size_t remote_offset;  // where `send` lands in the partner's out-area
  int parity;                 // which areas (0/1) this round uses, on both ends
  // Zero-copy: the bytes are gathered from the ranks' buffers (only when the
  // transport gathers()); null: they are `send`'s.
  const Gather* gather = nullptr;
  // The Header goes with the message: from head_send (this node's in-area) to
  // head_remote_offset in the partner's out-area of the same parity; the
  // partner's lands in head_recv (this node's out-area). The transport moves
  // it before (or with) the data and completes both alike.
  const Header* head_send = nullptr;
  Header* head_recv = nullptr;
  std::size_t head_remote_offset = 0;
  // Bytes from recv to the out-area's end (>= bytes): a partner called with
  // another size (an erroneous program) may send more than `bytes`; a
  // two-sided transport accepts up to this many so the call can end with a
  // verdict instead of a transport error. (One-sided writes stay inside the
  // area anyway: the partner computes them with its own chunk, which is at
  // most max_chunk.)
  std::size_t recv_capacity = 0;
};

class LeaderTransport {
 public:
  virtual ~LeaderTransport() = default;
  [[nodiscard]] virtual Status exchange(std::span<const Message> messages) noexcept = 0;
  // The exchange in two halves, for pipelined rounds (docs/hier.md
  // "Pipelined rounds"): post() starts it and may return while the bytes
  // still travel (the messages' send bytes must then stay unchanged and the
  // recv bytes unread until complete()); complete() waits for what the last
  // post() started. post() + complete() is exchange(). At most one exchange
  // is posted at a time; messages need not outlive post(). A transport that
  // cannot split does it all in post() (the default).
  [[nodiscard]] virtual Status post(std::span<const Message> messages) noexcept {
    return exchange(messages);
  }
  [[nodiscard]] virtual Status complete() noexcept { return Status::ok; }
  // "pmpi" or "rdma", for traces. Static text.
  virtual const char* name() const noexcept = 0;
  // Whether exchange() takes Messages with a Gather (zero-copy).
  virtual bool gathers() const noexcept { return false; }
  // Whether a partner's bytes land in this node's out-area only through
  // receives this leader posts (PMPI point-to-point), never by a partner's
  // own action (RDMA writes, allowed once the partner has our previous
  // message). A leader beside PMPI then skips its node barrier
  // (HierAlltoall::check, docs/hier.md "A rank sent to PMPI"). false: the
  // safe default.
  virtual bool two_sided() const noexcept { return false; }
  // A second path (core/hier/relay.h) for the messages a one-sided
  // transport's writes cannot carry: a transport that uses one takes it
  // (moves it out, true) and then never fails an exchange for a failed write
  // (docs/hier.md, "Failure transparency"). Set once, before the first
  // exchange, on every leader of the team alike. false: not taken.
  virtual bool set_relay(std::unique_ptr<Relay>& relay) noexcept {
    (void)relay;
    return false;
  }
};

}  // namespace mlxa2a::hier
