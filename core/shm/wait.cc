#include "core/shm/wait.h"

#include <sched.h>

#include <chrono>

#include "core/shm/segment.h"

namespace mlxa2a::shm {

namespace {
// An oversubscribed rank spins only this much: the peer it waits for is most
// likely queued behind it on the same core.
constexpr std::uint32_t kOversubscribedSpin = 16;
}  // namespace

Waiter::Waiter(const Options& opt, const std::atomic<std::uint32_t>* failed)
    : spin_(opt.oversubscribed && opt.spin_iterations > kOversubscribedSpin
                ? kOversubscribedSpin
                : opt.spin_iterations),
      timeout_ms_(opt.timeout_ms),
      abort_(opt.abort_requested),
      failed_(failed) {}

Status Waiter::wait_slow(const std::atomic<std::uint64_t>& flag, std::uint64_t target, int pid,
                         const CallProbe* probe) const noexcept {
  struct Ctx {
    const std::atomic<std::uint64_t>* flag;
    std::uint64_t target;
  } ctx{&flag, target};
  return wait_until(
      [](const void* c) noexcept {
        const Ctx& x = *static_cast<const Ctx*>(c);
        return x.flag->load(std::memory_order_acquire) >= x.target;
      },
      &ctx, pid, probe);
}

Status Waiter::wait_until(Ready ready, const void* ctx, int pid,
                          const CallProbe* probe) const noexcept {
  for (std::uint32_t i = 0; i < spin_; ++i) {
    cpu_relax();
    if (ready(ctx)) return Status::ok;
  }
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point last_check = start;
  for (;;) {
    ::sched_yield();
    if (ready(ctx)) return Status::ok;
    if (failed_ != nullptr && failed_->load(std::memory_order_relaxed) != 0)
      return Status::peer_failed;
    if (probe != nullptr && probe->word != nullptr && probe->mismatched())
      return Status::size_mismatch;
    const Clock::time_point now = Clock::now();
    if (now - last_check >= std::chrono::milliseconds(1)) {
      last_check = now;
      if (pid > 0 && !process_alive(pid)) {
        // The peer may have made us ready just before exiting.
        if (ready(ctx)) return Status::ok;
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
