// The leaders' second path (docs/hier.md "Failure transparency"): a
// two-sided channel (PMPI, core/mpi) for a message whose RDMA write failed,
// was never posted, or whose QP died; the partner takes it from here as that
// arrival, with the same bytes for the same places.
//
// Contract
// * Members: the team's leaders as in the transport's GroupBootstrap (leader j
//   of node m is member first_rank[m] + j).
// * send(): a notice, then notice.bytes from `data`, copied first: the staging
//   area is refilled two rounds later, and a partner whose write landed after
//   all takes the copy only at its next call. One thread.
// * next(): a notice from any member, non-blocking; then receive() its bytes
//   from that member, in arrival order, into place or (dst null) nowhere.
// * Errors: the MPI's; the call fails as it would without the relay.
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
  // kAbort: the sender's CQ or device failed; the receiver fails its call
  // too instead of waiting for messages that will not come (no bytes).
  static constexpr std::uint32_t kMessage = 0, kAbort = 1;
  std::uint32_t kind = kMessage;
  std::uint32_t pad = 0;
  // Messages to this partner at this parity, this one included: taken only
  // if the receiver has fewer (the write may have landed after all).
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
