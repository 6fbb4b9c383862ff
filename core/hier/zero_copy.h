// The rank side of zero-copy rounds (docs/zerocopy.md) and the copy counters.
//
// Contract
// * acquire() registers [p, p + len) (or finds it cached) and gives the NIC
//   address of p itself, never a region's start, and its key; held until
//   release(), which the engine calls only once the leaders' writes reading
//   it completed. false: refused; the rank stages its blocks for that call.
// * One per rank and team, used only inside its collective calls
//   (core/mlx5/zcopy_sender.h). Counters: relaxed atomics, any thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/hier/transport.h"

namespace mlxa2a::hier {

class SendRegistration {
 public:
  virtual ~SendRegistration() = default;
  virtual bool acquire(const void* p, std::size_t len, GatherSource* out) noexcept = 0;
  virtual void release() noexcept = 0;
};

struct NodeCopyCounters {
  std::atomic<std::uint64_t> copied{0};     // bytes this process copied in fan-in and fan-out
  std::atomic<std::uint64_t> zero_copy{0};  // bytes of its send buffers leaders read directly
  std::atomic<std::uint64_t> staged_fallbacks{0};  // zero-copy calls whose registration was refused
};
NodeCopyCounters& node_copy_counters() noexcept;

}  // namespace mlxa2a::hier
