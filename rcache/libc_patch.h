// mlxa2a::rcache — our own unmap hooks: libc entry points patched in place.
//
// Why patch code rather than interpose symbols: glibc calls its own munmap/mremap/
// madvise/brk through hidden aliases (free() of a large block -> __munmap, realloc ->
// __mremap, heap trim -> __sbrk -> __brk), which never go through the PLT, so an
// LD_PRELOAD'ed `munmap` never sees them. Overwriting the first bytes of each libc
// function with a jump to our replacement catches every caller. The replacements
// publish the event, then issue the system call themselves.
#pragma once

#include <string>

namespace mlxa2a::rcache::detail {

// Installs the patches once per process (x86_64 glibc only). Thread-safe with respect to
// other callers; must not race with other threads *executing* the patched functions
// (call it early: the first RegCache is normally created during MPI_Init / first call).
// Returns an error message, empty on success. Refuses (error) when a function already
// starts with a jump, i.e. someone (libucm's bistro hooks) patched it first.
[[nodiscard]] std::string install_libc_patches();
// True while every patch we installed is still in place.
[[nodiscard]] bool libc_patches_intact() noexcept;

}  // namespace mlxa2a::rcache::detail
