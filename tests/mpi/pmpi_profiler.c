/* A minimal PMPI profiler, as mpiP, Score-P or IPM are built: each MPI_X
 * counts the call and passes it to PMPI_X through the dynamic linker. At
 * MPI_Finalize it writes "<name> <calls>" lines to $PROF_REPORT.<world rank>
 * (nothing when PROF_REPORT is unset). The tests preload it before and after
 * mlxa2a (tests/mpi/run_mpi_test.py --preload-before / --preload-after) and
 * require its counts to equal the program's calls.
 * Single-threaded counting is enough: the programs it runs under call these
 * from one thread. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { INIT, INIT_THREAD, ALLTOALL, ALLTOALL_C, COMM_SPLIT, FINALIZE, KINDS };
static const char* const names[KINDS] = {"MPI_Init",         "MPI_Init_thread", "MPI_Alltoall",
                                         "MPI_Alltoall_c",   "MPI_Comm_split",  "MPI_Finalize"};
static unsigned long counts[KINDS];

/* The project builds with -fvisibility=hidden; Open MPI's mpi.h marks its
   declarations visible, MPICH's does not. */
#define EXPORT __attribute__((visibility("default")))

EXPORT int MPI_Init(int* argc, char*** argv) {
  ++counts[INIT];
  return PMPI_Init(argc, argv);
}

EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  ++counts[INIT_THREAD];
  return PMPI_Init_thread(argc, argv, required, provided);
}

EXPORT int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  ++counts[ALLTOALL];
  return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}

#if MPI_VERSION >= 4
EXPORT int MPI_Alltoall_c(const void* sendbuf, MPI_Count sendcount, MPI_Datatype sendtype,
                   void* recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  ++counts[ALLTOALL_C];
  return PMPI_Alltoall_c(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
}
#endif

EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  ++counts[COMM_SPLIT];
  return PMPI_Comm_split(comm, color, key, newcomm);
}

EXPORT int MPI_Finalize(void) {
  ++counts[FINALIZE];
  const char* prefix = getenv("PROF_REPORT");
  int rank = -1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (prefix) {
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", prefix, rank);
    FILE* f = fopen(path, "w");
    if (f) {
      for (int k = 0; k < KINDS; ++k) fprintf(f, "%s %lu\n", names[k], counts[k]);
      fclose(f);
    }
  }
  return PMPI_Finalize();
}
