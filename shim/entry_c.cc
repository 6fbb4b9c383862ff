// C entry points. Each wrapper packs its arguments and calls the dispatcher;
// nothing else belongs here (see docs/ARCHITECTURE.md). Handles are taken
// ABI-neutrally (core/mpi/abi.h explains why), so <mpi.h> is not included.
#include <cstdint>

#include "core/mpi/abi.h"

#define MLXA2A_EXPORT extern "C" __attribute__((visibility("default")))

namespace mpi = mlxa2a::core::mpi;
using mpi::RawHandle;

MLXA2A_EXPORT int MPI_Init(int* argc, char*** argv) { return mpi::init_entry(argc, argv); }

MLXA2A_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  return mpi::init_thread_entry(argc, argv, required, provided);
}

MLXA2A_EXPORT int MPI_Finalize(void) { return mpi::finalize_entry(); }

MLXA2A_EXPORT int MPI_Alltoall(const void* sendbuf, int sendcount, RawHandle sendtype,
                               void* recvbuf, int recvcount, RawHandle recvtype, RawHandle comm) {
  return mpi::alltoall_entry({sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                              false, "MPI_Alltoall"});
}

#ifdef MLXA2A_HAVE_LARGE_COUNT
MLXA2A_EXPORT int MPI_Alltoall_c(const void* sendbuf, std::int64_t sendcount, RawHandle sendtype,
                                 void* recvbuf, std::int64_t recvcount, RawHandle recvtype,
                                 RawHandle comm) {
  return mpi::alltoall_entry({sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                              true, "MPI_Alltoall_c"});
}
#endif

MLXA2A_EXPORT int MPI_Comm_split(RawHandle comm, int color, int key, void* newcomm) {
  return mpi::comm_split_entry(comm, color, key, newcomm);
}
