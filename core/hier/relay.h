// The leaders' second path: a two-sided channel (PMPI point-to-point in
// core/mpi) that carries a leader's message when its one-sided transport
// could not (docs/hier.md, "Failure transparency"). A transport that writes
// by RDMA hands it the message whose write failed, was never posted, or
// whose queue pair died; the partner's transport takes it from here instead
// of from its out-area's write and counts it as that arrival. Nothing else
// changes: the call completes with the same bytes in the same places.
//
// Contract
// * Members are the transport's: the team's leaders, numbered as in its
//   GroupBootstrap (leader j of node m is member first_rank[m] + j).
// * send(): starts a notice and then `notice.bytes` bytes from `data` to
//   `member`. The bytes are copied first: the sender's staging area is
//   refilled two rounds later, and a partner that already had the message
//   (its RDMA write landed after all) takes the copy only at its next call.
//   Completed sends are reaped by later calls; one transport, one thread.
// * next(): a notice that arrived from any member, non-blocking; the caller
//   must then receive() its bytes from the same member (in arrival order),
//   into its place, or into nothing (dst == nullptr: a duplicate).
// * Errors are Status codes (the MPI's own failure): the call then fails as
//   it would have without the relay.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/hier/transport.h"
#include "core/status.h"

namespace mlxa2a::hier {

struct RelayNotice {
  static constexpr std::uint32_t kMagic = 0x6d6c7231;  // "mlr1"
  std::uint32_t magic = kMagic;
  std::uint32_t parity = 0;
  // kMessage: bytes follow. kAbort: the sender's transport failed beyond
  // repair (its completion queue or device): the receiver fails its call
  // too instead of waiting for messages that will not come (no bytes).
  static constexpr std::uint32_t kMessage = 0, kAbort = 1;
  std::uint32_t kind = kMessage;
  std::uint32_t pad = 0;
  // The sender's count of messages to this partner at this parity, this one
  // included: the receiver takes it only if it has fewer from the sender
  // (the RDMA write may have landed after all: an ACK lost, retries out).
  std::uint64_t seq = 0;
  std::uint64_t offset = 0;  // where the bytes go in the receiver's out-area
  std::uint64_t bytes = 0;
  std::uint64_t head_offset = 0;  // where `head` goes, when has_head
  std::uint64_t has_head = 0;
  Header head;
};

class Relay {
 public:
  virtual ~Relay() = default;
  [[nodiscard]] virtual Status send(int member, const RelayNotice& notice,
                                    const char* data) noexcept = 0;
  [[nodiscard]] virtual Status next(int* member, RelayNotice* notice, bool* got) noexcept = 0;
  [[nodiscard]] virtual Status receive(int member, char* dst, std::size_t bytes) noexcept = 0;
};

}  // namespace mlxa2a::hier
