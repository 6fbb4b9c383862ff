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

int alltoall(const AlltoallArgs& args) noexcept;
// The call as the MPI library serves it: PMPI_Alltoall (PMPI_Alltoall_c for
// large counts) with args' arguments, untouched. Neither counted nor traced.
int pmpi_alltoall(const AlltoallArgs& args) noexcept;

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
int comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) noexcept;

// Lifecycle: call the PMPI function, then let the runtime initialise.
int init(int* argc, char*** argv) noexcept;
int init_thread(int* argc, char*** argv, int required, int* provided) noexcept;
int finalize() noexcept;
// For wrappers that call the MPI library's own entry point (Fortran): run the
// runtime's initialisation after it returned rc.
void after_init(int rc) noexcept;

}  // namespace mlxa2a::core::mpi
