// CPU-specific one-liners shared by every engine's wait loops.
#pragma once

#include <atomic>

namespace mlxa2a {

// One spin-wait hint: `pause` on x86, `yield` on Arm (both tell the core a
// sibling hyperthread may run; neither is a memory barrier).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

}  // namespace mlxa2a
