// C entry points. Each wrapper packs its arguments and calls the dispatcher;
// nothing else belongs here (see docs/ARCHITECTURE.md) but MPI_Alltoall's
// pass-through fast path, which core/mpi/abi.h defines. Handles are taken
// ABI-neutrally (core/mpi/abi.h explains why), so <mpi.h> is not included.
//
// Both names of each function are defined: MPI_X hands a call on to a PMPI
// tool loaded after mlxa2a, PMPI_X serves the calls such tools (before or
// after mlxa2a) pass to the MPI (core/mpi/stacking.h). MPI_Finalize only: its
// work runs inside the MPI's PMPI_Finalize.
#include <cstdint>

#include "core/mpi/abi.h"

#define MLXA2A_EXPORT extern "C" __attribute__((visibility("default")))

namespace mpi = mlxa2a::core::mpi;
using mpi::RawHandle;

// One definition per name: prefix MPI or PMPI, and the abi.h entry it calls.
#define MLXA2A_INIT(prefix, entry)                                                  \
  MLXA2A_EXPORT int prefix##_Init(int* argc, char*** argv) {                        \
    return mpi::entry(argc, argv);                                                  \
  }
#define MLXA2A_INIT_THREAD(prefix, entry)                                           \
  MLXA2A_EXPORT int prefix##_Init_thread(int* argc, char*** argv, int required,     \
                                         int* provided) {                           \
    return mpi::entry(argc, argv, required, provided);                              \
  }
#define MLXA2A_ALLTOALL(prefix, entry)                                                    \
  MLXA2A_EXPORT int prefix##_Alltoall(const void* sendbuf, int sendcount,                 \
                                      RawHandle sendtype, void* recvbuf, int recvcount,   \
                                      RawHandle recvtype, RawHandle comm) {               \
    return mpi::entry({sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,  \
                       false, #prefix "_Alltoall"});                                      \
  }
#define MLXA2A_ALLTOALL_C(prefix, entry)                                                 \
  MLXA2A_EXPORT int prefix##_Alltoall_c(const void* sendbuf, std::int64_t sendcount,     \
                                        RawHandle sendtype, void* recvbuf,               \
                                        std::int64_t recvcount, RawHandle recvtype,      \
                                        RawHandle comm) {                                \
    return mpi::entry({sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, \
                       true, #prefix "_Alltoall_c"});                                    \
  }
#define MLXA2A_COMM_SPLIT(prefix, entry)                                              \
  MLXA2A_EXPORT int prefix##_Comm_split(RawHandle comm, int color, int key,           \
                                        void* newcomm) {                              \
    return mpi::entry(comm, color, key, newcomm);                                     \
  }

MLXA2A_INIT(MPI, init_entry)
MLXA2A_INIT(PMPI, pmpi_init_entry)
MLXA2A_INIT_THREAD(MPI, init_thread_entry)
MLXA2A_INIT_THREAD(PMPI, pmpi_init_thread_entry)
MLXA2A_EXPORT int MPI_Finalize(void) { return mpi::finalize_entry(); }
// MPI_Alltoall first tries the pass-through fast path (core/mpi/abi.h).
MLXA2A_EXPORT int MPI_Alltoall(const void* sendbuf, int sendcount, RawHandle sendtype,
                               void* recvbuf, int recvcount, RawHandle recvtype, RawHandle comm) {
  if (const mpi::RawAlltoallFn fn = mpi::fast_alltoall_fn()) {
    return mpi::fast_alltoall(fn, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  }
  return mpi::alltoall_entry({sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                              false, "MPI_Alltoall"});
}
MLXA2A_ALLTOALL(PMPI, pmpi_alltoall_entry)
#ifdef MLXA2A_HAVE_LARGE_COUNT
MLXA2A_ALLTOALL_C(MPI, alltoall_c_entry)
MLXA2A_ALLTOALL_C(PMPI, pmpi_alltoall_entry)
#endif
MLXA2A_COMM_SPLIT(MPI, comm_split_entry)
MLXA2A_COMM_SPLIT(PMPI, pmpi_comm_split_entry)
