// The leaders' inter-node exchange: per round one message to and one from
// each other node's leader it serves (docs/hier-transports.md). Implemented
// by core/mpi/pmpi_transport.h and core/mlx5/rdma_transport.h.
//
// Contract
// * Creation (collective over the leaders) gets this node's StageAreas, fixed
//   for the team's life: a one-sided transport registers them once and
//   publishes the out-areas' keys, so calls need no handshake.
// * exchange() is called by every leader, equally often on every node, with
//   a Message per remote node it handles, in Plan::target order; it returns
//   once every message was sent (buffer reusable) and received in full, or
//   an error (the engine then fails the call on its node).
// * send lies in the in-area, recv in the out-area of the round's parity;
//   remote_offset is in the *partner's* out-area (Plan::remote_section).
// * Sizes are symmetric in a correct program. A partner of another size may
//   send another length (<= recv_capacity): the exchange still completes and
//   the engine finds the mismatch in the Headers.
// * With a relay (set_relay()), a failed write is not an error: the message
//   goes through the relay (docs/hier.md "Failure transparency").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/status.h"

namespace mlxa2a::hier {

class Relay;  // core/hier/relay.h

// Index: parity (the stage's call sequence & 1).
struct StageAreas {
  char* in[2] = {nullptr, nullptr};
  char* out[2] = {nullptr, nullptr};
  std::size_t bytes = 0;
  const char* pages = "4k";
};

// Zero-copy (docs/zerocopy.md): a rank's send buffer as its leader's NIC
// reads it, published in the in-area trailer.
struct GatherSource {
  std::uint64_t addr = 0;    // NIC address of the buffer's first byte: the user's pointer
  std::uint32_t lkey = 0;    // key of the registration covering the buffer
  std::uint32_t staged = 0;  // 1: not registered; its rows were copied into the in-area
  std::int32_t pid = 0;      // the rank's process: a relayed message reads its bytes (CMA)
  std::uint32_t pad = 0;
};

// A zero-copy message: the section's layout, block [a][b] read from source
// a's buffer at dest_ranks[b] * bytes_per_peer + offset; a staged source's
// row is in the section (Message::send) as usual.
struct Gather {
  std::span<const GatherSource> sources;  // the node's ranks, local order
  std::span<const int> dest_ranks;        // the remote node's members (team ranks)
  std::size_t bytes_per_peer = 0;
  std::size_t offset = 0;
  std::size_t chunk = 0;
};

// Goes with every message (docs/hier.md "Sizes that differ") to a fixed
// place (Plan::header) in the partner's out-area, so it arrives intact
// whatever size the partner expects.
struct Header {
  std::uint64_t bytes_per_peer = 0;
  std::uint64_t flags = 0;  // kOtherSize | kWentPmpi | kAllTrial
  // Message::bytes on the sender: a transport that cuts messages into pieces
  // learns how many come from a partner of another size.
  std::uint64_t message_bytes = 0;
  static constexpr std::uint64_t kOtherSize = 1;
  static constexpr std::uint64_t kWentPmpi = 2;
  static constexpr std::uint64_t kAllTrial = 4;  // whole node in a pmpi trial
};

struct Message {
  int node;                   // the remote node (NodeMap numbering)
  int leader;                 // which of its leaders (index in NodeMap::leaders(node))
  const char* send;           // bytes to its leader (in this node's in-area)
  char* recv;                 // bytes from its leader land here (this node's out-area)
  // Both directions. 0 in a check call, but the message still goes: one data
  // message per partner and round whatever its length, so a real round matches.
  std::size_t bytes;
  std::size_t remote_offset;  // where `send` lands in the partner's out-area
  int parity;                 // which areas (0/1) this round uses, on both ends
  const Gather* gather = nullptr;  // non-null only when the transport gathers()
  // The Header goes head_send -> head_remote_offset (partner's out-area), the
  // partner's lands in head_recv; moved before or with the data, completed alike.
  const Header* head_send = nullptr;
  Header* head_recv = nullptr;
  std::size_t head_remote_offset = 0;
  // Bytes from recv to the out-area's end: a two-sided transport accepts up
  // to this many, so a partner of another size ends the call with a verdict,
  // not a transport error (one-sided writes stay inside: chunk <= max_chunk).
  std::size_t recv_capacity = 0;
};

class LeaderTransport {
 public:
  virtual ~LeaderTransport() = default;
  [[nodiscard]] virtual Status exchange(std::span<const Message> messages) noexcept = 0;
  // exchange() in two halves (default: all in post()): until complete(), send
  // bytes stay unchanged and recv bytes unread. One exchange posted at a time;
  // messages need not outlive post().
  [[nodiscard]] virtual Status post(std::span<const Message> messages) noexcept {
    return exchange(messages);
  }
  [[nodiscard]] virtual Status complete() noexcept { return Status::ok; }
  virtual const char* name() const noexcept = 0;  // "pmpi" or "rdma", static
  virtual bool gathers() const noexcept { return false; }  // takes a Gather
  // Partners' bytes land here only through receives this leader posts, never
  // by a partner's own writes: a leader beside PMPI may then skip its node
  // barrier (docs/hier.md "Without the node barrier"). false: the safe default.
  virtual bool two_sided() const noexcept { return false; }
  // A second path (core/hier/relay.h) for what a one-sided transport's
  // writes cannot carry: one that uses it takes it (moves it out, true).
  // Set once, before the first exchange, on every leader alike.
  virtual bool set_relay(std::unique_ptr<Relay>& relay) noexcept {
    (void)relay;
    return false;
  }
};

}  // namespace mlxa2a::hier
