// mlxa2a::rcache — process-wide unmap events, delivered into per-cache rings.
//
// Whatever mechanism sees an unmap (our libc patches, or libucm's event API) calls
// publish_unmap() *before* the memory goes away. That function is async-signal-safe:
// no locks, no allocation, no call back into any cache. Each RegCache owns an EventSink;
// the cache drains it under its own mutex on its next call, which is where
// deregistration happens (never inside the hook: ibv_dereg_mr may take locks, allocate,
// or unmap memory itself).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "rcache/options.h"

namespace mlxa2a::rcache::detail {

class EventSink {
 public:
  static constexpr uint64_t kRing = 4096;

  // Hook side, any thread, any context.
  void push(uintptr_t start, uintptr_t end) noexcept;
  [[nodiscard]] bool wants(uintptr_t start, uintptr_t end) const noexcept {
    return start < hi_.load(std::memory_order_acquire) &&
           lo_.load(std::memory_order_acquire) < end;
  }

  // Cache side. pending() is the lock-free check on the hit path (two plain loads).
  [[nodiscard]] bool pending() const noexcept {
    return head_.load(std::memory_order_acquire) != tail_.load(std::memory_order_relaxed);
  }
  // Under the owner's mutex: calls fn(start, end) per event. Returns false when events
  // were lost (ring overflow): the caller must then treat every region as unmapped.
  template <class Fn>
  [[nodiscard]] bool drain(Fn&& fn);
  // Under the owner's mutex, *before* registering [start, end): from then on hooks
  // forward events touching that range. Only grows until reset_span().
  void widen_span(uintptr_t start, uintptr_t end) noexcept;
  void reset_span() noexcept;

 private:
  bool wait_slot(uint64_t index) noexcept;

  struct Slot {
    std::atomic<uint64_t> seq{0};  // index + 1 once the slot holds event `index`
    std::atomic<uintptr_t> start{0};
    std::atomic<uintptr_t> end{0};
  };
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
  std::atomic<bool> overflow_{false};
  alignas(64) std::atomic<uintptr_t> lo_{UINTPTR_MAX};
  std::atomic<uintptr_t> hi_{0};
  Slot ring_[kRing];
};

template <class Fn>
bool EventSink::drain(Fn&& fn) {
  const uint64_t head = head_.load(std::memory_order_acquire);
  uint64_t i = tail_.load(std::memory_order_relaxed);
  bool ok = !overflow_.exchange(false, std::memory_order_acq_rel);
  for (; ok && i != head; ++i) {
    if (!wait_slot(i)) { ok = false; break; }
    Slot& s = ring_[i % kRing];
    fn(s.start.load(std::memory_order_relaxed), s.end.load(std::memory_order_relaxed));
  }
  if (!ok) overflow_.store(false, std::memory_order_relaxed);
  tail_.store(head, std::memory_order_release);
  return ok;
}

// Called by the hooks. Range is [start, end).
void publish_unmap(uintptr_t start, uintptr_t end) noexcept;

// Connects a sink to the mechanism chosen by `mode`, installing it on first use
// (process-wide, never uninstalled). Returns an error message, empty on success.
// Thread-safe. `*effective` receives the mechanism actually used.
[[nodiscard]] std::string subscribe(EventSink* sink, Invalidation mode, Invalidation* effective);
// After return no hook touches the sink any more.
void unsubscribe(EventSink* sink) noexcept;

// Bumped whenever an installed mechanism was found broken (our patch overwritten by
// someone else): events may have been lost, so caches flush. check_mechanisms() does
// the (cheap) integrity check; caches call it on their slow path.
uint64_t mechanism_epoch() noexcept;
void check_mechanisms() noexcept;
// False if the sink's mechanism was lost and no replacement exists: caches stop caching.
bool mechanism_ok(Invalidation effective) noexcept;

}  // namespace mlxa2a::rcache::detail
