#include "core/shm/wait.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bit>
#include <chrono>
#include <climits>
#include <ctime>

#include "core/shm/segment.h"
#include "core/wait_cpu.h"

namespace mlxa2a::shm {

namespace {
// An oversubscribed rank spins only this much: the peer it waits for is most
// likely queued behind it on the same core.
constexpr std::uint32_t kOversubscribedSpin = 16;
// Yields before a sleeping wait sleeps: a writer that is running (or about
// to) gets a few turns of the core first; a longer wait (the network) sleeps.
constexpr std::uint32_t kYieldsBeforeSleep = 8;

// The futex word of a 64-bit flag: its low 32 bits, where they lie. The
// flags only grow, so a changed low half is a changed flag.
std::uint32_t* futex_word(const std::atomic<std::uint64_t>& flag) noexcept {
  static_assert(sizeof(std::atomic<std::uint64_t>) == 8 &&
                std::atomic<std::uint64_t>::is_always_lock_free);
  char* p = reinterpret_cast<char*>(const_cast<std::atomic<std::uint64_t>*>(&flag));
  return reinterpret_cast<std::uint32_t*>(p + (std::endian::native == std::endian::big ? 4 : 0));
}

// Not FUTEX_PRIVATE_FLAG: the flags live in memory shared between processes.
void futex_sleep(const std::atomic<std::uint64_t>& flag, std::uint64_t seen) noexcept {
  const timespec ms{0, 1000000};
  // EAGAIN (the flag moved), EINTR and ETIMEDOUT all mean: look again.
  (void)::syscall(SYS_futex, futex_word(flag), FUTEX_WAIT, static_cast<std::uint32_t>(seen), &ms,
                  nullptr, 0);
}
std::atomic<std::uint32_t> g_spin_budget{spin_budget::kCeiling};

}  // namespace

namespace spin_budget {

std::uint32_t next(std::uint32_t budget, std::uint64_t yield_ns, bool ready_after) noexcept {
  if (yield_ns < kGaveCoreNs) return budget >= kCeiling / 2 ? kCeiling : budget * 2;
  if (ready_after) return budget / 2 <= kFloor ? kFloor : budget / 2;
  return budget;
}

std::uint32_t current() noexcept { return g_spin_budget.load(std::memory_order_relaxed); }

void reset() noexcept { g_spin_budget.store(kCeiling, std::memory_order_relaxed); }

}  // namespace spin_budget

Waiter::Waiter(const Options& opt, const std::atomic<std::uint32_t>* failed)
    : spin_(opt.oversubscribed && opt.spin_iterations > kOversubscribedSpin
                ? kOversubscribedSpin
                : opt.spin_iterations),
      sleep_(opt.oversubscribed),
      timeout_ms_(opt.timeout_ms),
      abort_(opt.abort_requested),
      failed_(failed) {}

int Waiter::wake(const std::atomic<std::uint64_t>& flag) const noexcept {
  if (!sleep_) return 0;
  const long woken =
      ::syscall(SYS_futex, futex_word(flag), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
  return woken > 0 ? static_cast<int>(woken) : 0;
}

Status Waiter::wait_slow(const std::atomic<std::uint64_t>& flag, std::uint64_t target, int pid,
                         const CallProbe* probe, bool sleep) const noexcept {
  struct Ctx {
    const std::atomic<std::uint64_t>* flag;
    std::uint64_t target;
  } ctx{&flag, target};
  return wait_impl(
      [](const void* c) noexcept {
        const Ctx& x = *static_cast<const Ctx*>(c);
        return x.flag->load(std::memory_order_acquire) >= x.target;
      },
      &ctx, pid, probe, sleep ? &flag : nullptr);
}

Status Waiter::wait_until(Ready ready, const void* ctx, int pid,
                          const CallProbe* probe) const noexcept {
  return wait_impl(ready, ctx, pid, probe, nullptr);
}

Status Waiter::wait_impl(Ready ready, const void* ctx, int pid, const CallProbe* probe,
                         const std::atomic<std::uint64_t>* sleep_on) const noexcept {
  const core::wait_cpu::Scope accounted;  // MLXA2A_COLL_STATS: CPU spent waiting
  const std::uint32_t budget = g_spin_budget.load(std::memory_order_relaxed);
  const std::uint32_t spin = spin_ < budget ? spin_ : budget;
  for (std::uint32_t i = 0; i < spin; ++i) {
    cpu_relax();
    if (ready(ctx)) return Status::ok;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_check = start;
  for (std::uint32_t yields = 0;; ++yields) {
    if (sleep_on != nullptr && yields >= kYieldsBeforeSleep) {
      // The value the flag had when last found not ready (wait_slow's ready
      // is `flag >= target`): a store since then makes the futex return.
      const std::uint64_t seen = sleep_on->load(std::memory_order_acquire);
      if (ready(ctx)) return Status::ok;
      futex_sleep(*sleep_on, seen);
    } else if (yields == 0) {
      // The first yield tells whether this core is shared (spin_budget).
      ::sched_yield();
      const auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start);
      const bool now_ready = ready(ctx);
      g_spin_budget.store(
          spin_budget::next(budget, static_cast<std::uint64_t>(took.count()), now_ready),
          std::memory_order_relaxed);
      if (now_ready) return Status::ok;
    } else {
      ::sched_yield();
    }
    if (ready(ctx)) return Status::ok;
    if (failed_ != nullptr && failed_->load(std::memory_order_relaxed) != 0)
      return Status::peer_failed;
    if (probe != nullptr && probe->word != nullptr && probe->mismatched())
      return Status::size_mismatch;
    const Clock::time_point now = Clock::now();
    if (now - last_check >= std::chrono::milliseconds(1)) {
      last_check = now;
      if (pid > 0 && !process_alive(pid)) {
        // The peer may have made us ready just before exiting, or failed
        // the call and then exited (a leader whose transport failed marks
        // the node failed, returns its error and its program may end): its
        // flag was set before it died, so it is the cause, not a crash.
        if (ready(ctx)) return Status::ok;
        if (failed_ != nullptr && failed_->load(std::memory_order_acquire) != 0) {
          return Status::peer_failed;
        }
        return Status::peer_dead;
      }
      if (abort_) {
        bool stop = true;
        try {
          stop = abort_();
        } catch (...) {  // a throwing callback must not cross run(); treat as abort
        }
        if (stop) return Status::aborted;
      }
    }
    if (timeout_ms_ != 0 && now - start >= std::chrono::milliseconds(timeout_ms_))
      return Status::timeout;
  }
}

}  // namespace mlxa2a::shm
