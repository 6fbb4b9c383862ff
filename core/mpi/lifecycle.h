// The MPI life cycle as mlxa2a sees it: MPI_Init (and _thread) start the
// runtime after the MPI library's own, MPI_Finalize lets the library run
// mlxa2a's clean-up (the MPI_COMM_SELF delete callback), MPI_Comm_split
// derives the child's team from the parent's (core/mpi/comm_state.h).
// shim/ and the entry adapter (core/mpi/abi.cc) call these; they never throw.
#pragma once

#include <mpi.h>

namespace mlxa2a::core::mpi {

int comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) noexcept;

// Lifecycle: call the PMPI function, then let the runtime initialise.
int init(int* argc, char*** argv) noexcept;
int init_thread(int* argc, char*** argv, int required, int* provided) noexcept;
int finalize() noexcept;
// For wrappers that call the MPI library's own entry point (Fortran): run the
// runtime's initialisation after it returned rc.
void after_init(int rc) noexcept;

}  // namespace mlxa2a::core::mpi
