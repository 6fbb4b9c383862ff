// Waiting for a sequence flag written by another process.
//
// Why this shape: on this class of machine a `pause` costs ~20 ns, sched_yield
// ~0.6 us and a context switch ~1.8 us. A peer that is running arrives within
// a few microseconds, so we spin first; a peer that is descheduled needs our
// core, so we then yield - at once when ranks outnumber cores. A wait never
// lasts forever: the peer's pid, a node-wide failure flag, an optional timeout
// and an optional abort callback are checked while yielding.
//
// Sleeping (wait_geq_sleeping / wake): a waiter that only yields stays
// runnable, so on a core it shares with the writer (ranks outnumber cores)
// every one of its turns is a context switch the writer sits through - while
// the writer itself waits for the network (the hierarchical engine's leader).
// When the writer wakes the flag after each store, an oversubscribed waiter
// that has yielded kYieldsBeforeSleep times sleeps on the flag instead
// (futex on its low 32 bits, shared between processes; at most 1 ms at a time
// so that every check above goes on). Not oversubscribed: no sleeping, and
// wake() is free.
//
// Spin budget: how long a waiter spins adapts, process-wide, to whether this
// core is its own. The first sched_yield of a wait is timed: one that returns
// at once (~0.3 us: nobody else wanted the core) doubles the budget; one that
// gave the core away (>= 1 us) and after which the flag was set - the peer,
// or whoever the awaited peer waited for, ran meanwhile, likely on this core -
// halves it, down to a handful of iterations. So ranks alone on their cores
// spin up to Options::spin_iterations as before, and ranks that share a core
// with each other or with other work (another job, a build, a daemon) hand it
// over after a fraction of a microsecond instead of burning ~20 us of pauses
// per wait (Open MPI np=2 at 4 B with one core busy elsewhere: 12 us per call
// spinning 2000, the MPI alone 0.9 us).
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

// What a waiter compares while it waits long for a peer: the peer's
// CallInfo (layout.h). A peer in the same call with another size will never
// write what we wait for; the wait then ends with Status::size_mismatch.
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
  // `failed` is a node-wide flag any rank sets when its run() fails, so that
  // the others stop waiting for it (they return Status::peer_failed).
  Waiter(const Options& opt, const std::atomic<std::uint32_t>* failed);

  // Returns once flag >= target. `pid` is the process expected to advance the
  // flag, checked for liveness about every millisecond; <= 0 skips the check.
  // `probe`, when given, is checked while yielding (CallProbe).
  Status wait_geq(const std::atomic<std::uint64_t>& flag, std::uint64_t target, int pid,
                  const CallProbe* probe = nullptr) const noexcept {
    if (flag.load(std::memory_order_acquire) >= target) return Status::ok;
    return wait_slow(flag, target, pid, probe);
  }

  // wait_geq for a flag whose every store is followed by wake(flag): may
  // sleep when oversubscribed (above). Same results as wait_geq.
  Status wait_geq_sleeping(const std::atomic<std::uint64_t>& flag, std::uint64_t target,
                           int pid) const noexcept {
    if (flag.load(std::memory_order_acquire) >= target) return Status::ok;
    return wait_slow(flag, target, pid, nullptr, sleep_);
  }

  // After a store to `flag`: wakes the processes sleeping on it in
  // wait_geq_sleeping(). One system call when oversubscribed, else nothing.
  // Returns how many it woke (tests).
  int wake(const std::atomic<std::uint64_t>& flag) const noexcept;

  // The same wait for any condition: returns once ready(ctx) is true, with
  // the same spin, yield, liveness and abort rules. ready() must do the
  // acquire that pairs with the writer's release.
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
// A first yield at least this long gave the core to another task.
inline constexpr std::uint64_t kGaveCoreNs = 1000;
// The budget after a wait that yielded: its first yield took yield_ns, and the
// awaited condition was true right after it (ready_after).
std::uint32_t next(std::uint32_t budget, std::uint64_t yield_ns, bool ready_after) noexcept;
// The current budget; a wait spins min(this, Options::spin_iterations).
std::uint32_t current() noexcept;
// Tests: back to kCeiling.
void reset() noexcept;
}  // namespace spin_budget

using ::mlxa2a::cpu_relax;  // core/arch.h

}  // namespace mlxa2a::shm
