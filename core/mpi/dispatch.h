// The dispatcher: the one place an intercepted call is routed. shim/ packs each
// entry point's arguments and calls these; they never throw and they call only
// PMPI_* (or an engine).
//
// Contract for alltoall(): the result and the error class are those PMPI would
// give for the same arguments. Arguments that cannot be inspected safely
// (MPI_COMM_NULL, MPI_DATATYPE_NULL, negative counts) go to PMPI untouched so that
// PMPI raises the error exactly as without mlxa2a.
#pragma once

#include <mpi.h>

#include <cstdint>

#include "core/mpi/runtime.h"
#include "core/mpi/stacking.h"

namespace mlxa2a::core::mpi {

struct AlltoallArgs {
  const void* sendbuf;
  std::int64_t sendcount;
  MPI_Datatype sendtype;
  void* recvbuf;
  std::int64_t recvcount;
  MPI_Datatype recvtype;
  MPI_Comm comm;
  bool large_count;   // called as MPI_Alltoall_c (MPI_Count counts)
  const char* entry;  // the entry point's name, for the trace
};

int alltoall(const AlltoallArgs& args) noexcept;  // inline, below
// The call as the MPI library serves it: PMPI_Alltoall (PMPI_Alltoall_c for
// large counts) with args' arguments, untouched. Neither counted nor traced.
int pmpi_alltoall(const AlltoallArgs& args) noexcept;  // inline, below

// Calls alltoall() handed to PMPI and to the shared-memory engine, counted on
// the calling thread whatever the switches say (one increment per call).
// MLXA2A_COLL_STATS prints them at MPI_Finalize; tests compare them between
// traced and untraced runs, since tracing must never change a decision.
struct PathCounts {
  std::uint64_t pmpi = 0;
  std::uint64_t shm = 0;
  std::uint64_t rdma = 0;  // hierarchical calls whose leaders exchanged over RDMA
  // Measured selection (docs/tune.md): trial calls (also counted above by the
  // path they took), agreements and the time spent in them.
  std::uint64_t trials = 0;
  std::uint64_t agreements = 0;
  double agreement_seconds = 0;
};
PathCounts thread_path_counts() noexcept;

namespace detail {
// This thread's counts. initial-exec as ReentryGuard's (runtime.h).
inline constinit thread_local PathCounts t_counts __attribute__((tls_model("initial-exec")));
// Every call but a nested one or a pass-through (core/mpi/dispatch.cc).
int dispatch_alltoall(const AlltoallArgs& args) noexcept;
[[gnu::cold]] int pmpi_alltoall_c(const AlltoallArgs& args) noexcept;
}  // namespace detail

inline int pmpi_alltoall(const AlltoallArgs& a) noexcept {
  // Never PMPI_Alltoall by name: the shim defines it (core/mpi/stacking.h).
#ifdef MLXA2A_HAVE_LARGE_COUNT
  if (a.large_count) [[unlikely]] return detail::pmpi_alltoall_c(a);
#endif
  return mpi_own().alltoall(a.sendbuf, static_cast<int>(a.sendcount), a.sendtype, a.recvbuf,
                            static_cast<int>(a.recvcount), a.recvtype, a.comm);
}

// A nested call (ReentryGuard, runtime.h) or a pass-through (pass_through())
// is served inline, without the dispatcher: callgrind counted 166
// instructions added per pass-through call when every call went through it,
// 48 after (bench/results/fallthrough.md). The entry adapter (core/mpi/abi.cc)
// asks served_inline() before it builds the arguments, so that the inline
// path keeps them in registers.
inline bool served_inline() noexcept { return ReentryGuard::nested() || pass_through(); }
// Precondition: served_inline().
inline int serve_inline(const AlltoallArgs& a) noexcept {
  if (ReentryGuard::nested()) return pmpi_alltoall(a);
  // What the dispatcher would do with no trace, no timer and every size to
  // PMPI (or mlxa2a inactive): count the call and hand it on.
  ReentryGuard guard;
  ++detail::t_counts.pmpi;
  return pmpi_alltoall(a);
}

inline int alltoall(const AlltoallArgs& a) noexcept {
  return served_inline() ? serve_inline(a) : detail::dispatch_alltoall(a);
}
int comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) noexcept;

// Lifecycle: call the PMPI function, then let the runtime initialise.
int init(int* argc, char*** argv) noexcept;
int init_thread(int* argc, char*** argv, int required, int* provided) noexcept;
int finalize() noexcept;
// For wrappers that call the MPI library's own entry point (Fortran): run the
// runtime's initialisation after it returned rc.
void after_init(int rc) noexcept;

}  // namespace mlxa2a::core::mpi
