// Waiting for a sequence flag written by another process: spin (a running
// peer arrives within microseconds), then yield (a descheduled peer needs
// our core), checking the peer's pid, the failure flag, timeout and abort
// so no wait lasts forever (docs/shm.md, "Waiting and failure": measurements).
// * Sleeping (wait_geq_sleeping/wake): when oversubscribed, a waiter that
//   yielded kYieldsBeforeSleep times futex-waits on the flag's low 32 bits
//   (at most 1 ms at a time, so the checks go on): a yielding waiter stays
//   runnable and costs the writer on its core a context switch per turn.
// * Spin budget (process-wide): a first yield that returns at once doubles
//   it, one that gave the core away (>= kGaveCoreNs) before the flag was set
//   halves it, so ranks sharing a core hand it over quickly.
//
// Contract: one Waiter per NodeAlltoall (not shared between threads). The flag
// load is an acquire, pairing with the writer's release store, so everything
// written before the flag is visible after wait_geq() returns Status::ok.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>

#include "core/arch.h"
#include "core/shm/options.h"
#include "core/shm/status.h"

namespace mlxa2a::shm {

// The peer's CallInfo (layout.h), checked while yielding: a peer in the same
// call with another size never writes what we wait for (size_mismatch).
struct CallProbe {
  const std::atomic<std::uint64_t>* word = nullptr;  // the peer's; null: no probe
  std::uint64_t mine = 0;                            // layout::call_word of this call
  // The peer is in this call (same call number) with another size.
  bool mismatched() const noexcept {
    const std::uint64_t w = word->load(std::memory_order_acquire);
    return (w >> 32) == (mine >> 32) && w != mine;
  }
};

class Waiter {
 public:
  // `failed`: node-wide, set by any rank whose run() fails (-> peer_failed).
  Waiter(const Options& opt, const std::atomic<std::uint32_t>* failed);

  // Returns once flag >= target. `pid`: the process expected to advance it,
  // checked about every millisecond (<= 0: not checked).
  Status wait_geq(const std::atomic<std::uint64_t>& flag, std::uint64_t target, int pid,
                  const CallProbe* probe = nullptr) const noexcept {
    if (flag.load(std::memory_order_acquire) >= target) return Status::ok;
    return wait_slow(flag, target, pid, probe);
  }

  // For a flag whose every store is followed by wake(flag): may sleep.
  Status wait_geq_sleeping(const std::atomic<std::uint64_t>& flag, std::uint64_t target,
                           int pid) const noexcept {
    if (flag.load(std::memory_order_acquire) >= target) return Status::ok;
    return wait_slow(flag, target, pid, nullptr, sleep_);
  }

  // After a store to `flag`: one system call when oversubscribed, else
  // nothing. Returns how many it woke (tests).
  int wake(const std::atomic<std::uint64_t>& flag) const noexcept;

  // The same wait for any condition; ready() must do the acquire that pairs
  // with the writer's release.
  using Ready = bool (*)(const void* ctx) noexcept;
  Status wait_until(Ready ready, const void* ctx, int pid,
                    const CallProbe* probe = nullptr) const noexcept;

 private:
  Status wait_slow(const std::atomic<std::uint64_t>& flag, std::uint64_t target, int pid,
                   const CallProbe* probe, bool sleep = false) const noexcept;
  // wait_until's body; `sleep_on` (may be null) is the flag to sleep on.
  Status wait_impl(Ready ready, const void* ctx, int pid, const CallProbe* probe,
                   const std::atomic<std::uint64_t>* sleep_on) const noexcept;

  std::uint32_t spin_;
  bool sleep_;  // oversubscribed: wait_geq_sleeping may sleep, wake() wakes
  std::uint32_t timeout_ms_;
  std::function<bool()> abort_;
  const std::atomic<std::uint32_t>* failed_;
};

// The process-wide spin budget (above). Thread-safe (relaxed atomics).
namespace spin_budget {
inline constexpr std::uint32_t kFloor = 16;
inline constexpr std::uint32_t kCeiling = 1u << 16;
inline constexpr std::uint64_t kGaveCoreNs = 1000;
// After a wait whose first yield took yield_ns (ready_after: the condition
// was true right after it).
std::uint32_t next(std::uint32_t budget, std::uint64_t yield_ns, bool ready_after) noexcept;
// The current budget; a wait spins min(this, Options::spin_iterations).
std::uint32_t current() noexcept;
// Tests: back to kCeiling.
void reset() noexcept;
}  // namespace spin_budget

using ::mlxa2a::cpu_relax;  // core/arch.h

}  // namespace mlxa2a::shm
