// The call's vocabulary: one intercepted MPI_Alltoall's arguments, the call as
// the MPI library serves it, and the per-thread counts of the paths calls took.
// It sits on core/mpi's lowest floors (docs/ARCHITECTURE.md) so that what reads
// a call - the engine call, the job report, MPI_T, the runtime's stats lines -
// does not include the dispatcher (core/mpi/dispatch.h), which routes it.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

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

// What can be read off a call before it is routed (core/mpi/dispatch.cc).
// Why PMPI must judge arguments that cannot be inspected safely (null
// handles, negative counts, MPI_IN_PLACE as the receive buffer, aliased
// buffers); nullptr when they can.
const char* invalid_argument(const AlltoallArgs& a) noexcept;
// The receive signature's bytes per peer into *bytes; why PMPI decides
// instead when it cannot be known.
const char* receive_bytes(const AlltoallArgs& a, std::uint64_t* bytes) noexcept;
// Whether this rank's send signature carries bytes per peer, as its receive
// signature does; when not, *send_bytes: the send size per peer when known,
// else bytes + 1 (a value no correct peer announces). Rank-local.
bool sizes_match(const AlltoallArgs& a, std::uint64_t bytes, std::uint64_t* send_bytes) noexcept;
// Contiguous buffers of plain named types, separate: the engine takes them
// as they are, and a later call with the same signature may repeat the
// decision (CommState::Repeat).
bool plain_call(const AlltoallArgs& a, std::uint64_t bytes) noexcept;
// The communicator's name for traces ("comm#<f2c>" when it has none).
std::string comm_label(MPI_Comm comm);

namespace detail {
// This thread's counts. initial-exec as ReentryGuard's (runtime.h).
inline constinit thread_local PathCounts t_counts __attribute__((tls_model("initial-exec")));
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

}  // namespace mlxa2a::core::mpi
