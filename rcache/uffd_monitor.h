// mlxa2a::rcache — strict invalidation through userfaultfd (opt-in).
//
// The libc hooks cannot see unmaps issued by raw system calls. The kernel can: a range
// registered with a userfaultfd reports UFFD_EVENT_UNMAP (munmap, brk shrink, MAP_FIXED
// over it), UFFD_EVENT_REMAP (mremap) and UFFD_EVENT_REMOVE (madvise DONTNEED/FREE/REMOVE),
// however they were issued, and the unmapping thread waits until the event is read. We
// register in write-protect mode and never write-protect anything, so no page fault is
// ever routed to us: only the events. One process-wide descriptor, one monitor thread
// that forwards every event to publish_unmap().
//
// Costs: every unmap of a watched range blocks for a round trip to the monitor thread
// (~10x a hooked munmap); registrations are never removed (a watched VMA stays watched
// until unmapped). Limits: ranges the kernel refuses (file mappings other than shmem,
// ranges already registered by another userfaultfd) are left to the hooks; the event is
// read before it is published, so a thread racing to reuse the address within
// microseconds may still hit once.
#pragma once

#include <cstdint>
#include <string>

namespace mlxa2a::rcache::detail {

// Opens the descriptor and starts the monitor (once per process). Error message or empty.
[[nodiscard]] std::string start_uffd_monitor();
// Watches the pages covering [start, end). False when the kernel refuses the range.
bool uffd_watch(uintptr_t start, uintptr_t end) noexcept;

}  // namespace mlxa2a::rcache::detail
