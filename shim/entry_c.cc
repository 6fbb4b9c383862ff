// C entry points. Each wrapper packs its arguments and calls the dispatcher;
// nothing else belongs here (see docs/ARCHITECTURE.md).
#include <mpi.h>

#include "core/mpi/dispatch.h"

#define MLXA2A_EXPORT extern "C" __attribute__((visibility("default")))

namespace dispatch = mlxa2a::core::mpi;

MLXA2A_EXPORT int MPI_Init(int* argc, char*** argv) { return dispatch::init(argc, argv); }

MLXA2A_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  return dispatch::init_thread(argc, argv, required, provided);
}

MLXA2A_EXPORT int MPI_Finalize(void) { return dispatch::finalize(); }

MLXA2A_EXPORT int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype,
                               void* recvbuf, int recvcount, MPI_Datatype recvtype,
                               MPI_Comm comm) {
  return dispatch::alltoall({sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                             false, "MPI_Alltoall"});
}

#if MPI_VERSION >= 4
MLXA2A_EXPORT int MPI_Alltoall_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                                 void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype,
                                 MPI_Comm comm) {
  return dispatch::alltoall({sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                             true, "MPI_Alltoall_c"});
}
#endif

MLXA2A_EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  return dispatch::comm_split(comm, color, key, newcomm);
}
