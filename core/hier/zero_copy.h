// The rank side of the hierarchical engine's zero-copy rounds
// (docs/zerocopy.md): how a rank makes its send buffer readable by its
// leader's NIC, and the process-wide counters of what was copied on the node
// and what the leaders' writes read straight from the ranks' buffers.
//
// Contract
// * SendRegistration::acquire() registers [p, p + len) (or finds it cached)
//   and fills *out with the NIC address of p itself - never a region's start -
//   and its key. The registration is held until release(), which the engine
//   calls only after the leaders' writes reading the buffer completed (the
//   call's last wait_released). false: refused (out of pinnable memory,
//   ...); the rank then stages its blocks as usual for that call.
// * One SendRegistration per rank and team; used only inside the team's
//   collective calls (no thread safety needed). Implemented over the
//   registration cache on the node's shared PD (core/mlx5/zcopy_sender.h).
// * Counters: relaxed atomics, any thread; read for MLXA2A_COLL_STATS.
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
