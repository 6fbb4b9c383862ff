// What the zero-copy path does when the application forks (MPI programs call
// system(), popen(), ...), decided once per process from the verbs library's
// ibv_is_fork_initialized (man ibv_fork_init):
//
// * IBV_FORK_UNNEEDED: the kernel (>= 5.13 with rdma-core >= 35) keeps pages
//   pinned by an MR with the parent at fork; nothing to do.
// * IBV_FORK_ENABLED (the MPI, RDMAV_FORK_SAFE or the application called
//   ibv_fork_init): rdma-core marks every MR MADV_DONTFORK; the parent keeps
//   its pages, the child has none of them; nothing to do.
// * IBV_FORK_DISABLED, or a library without the call: fork makes the
//   parent's registered pages copy-on-write; the parent's next write moves it
//   to a new page while its cached MR still names the old one, now the
//   child's - stale bytes sent. So the parent flushes its registration cache
//   at the first zero-copy call after a fork (pthread_atfork parent handler:
//   a generation count) and registers again, with LOCAL_WRITE, the pages it
//   has then.
//
// mlxa2a never calls ibv_fork_init itself: MADV_DONTFORK on page-rounded
// user buffers would take neighbouring heap data away from a child that does
// not exec. A child calling MPI_Alltoall is not supported (its verbs objects
// are the parent's). Thread safety: all functions are; the generation is one
// relaxed atomic load on the zero-copy path.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/mlx5/verbs.h"

namespace mlxa2a::mlx5 {

// Installs the fork handler (once per process) and returns whether a fork
// must flush registrations (the DISABLED / unknown cases above).
bool watch_forks(const Verbs& v) noexcept;

namespace detail {
extern std::atomic<std::uint64_t> g_forks;
}
// Forks this process has made since watch_forks() was first called.
inline std::uint64_t fork_generation() noexcept {
  return detail::g_forks.load(std::memory_order_relaxed);
}

}  // namespace mlxa2a::mlx5
