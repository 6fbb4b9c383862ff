// The shim's own build description: one line naming mlxa2a's version and git
// describe, the MPI (family, version, soname) whose mpi.h it was compiled
// against, and whether the RDMA engine (verbs) is in. Exported as the C symbol
// `mlxa2a_build_info` (a NUL-terminated string that starts with the "@(#)"
// marker; shim/*.map), so it is visible to dlsym, `strings` and mlxa2a_info -V.
// Logged once, by world rank 0, at MLXA2A_LOG_LEVEL=info during MPI_Init.
#pragma once

namespace mlxa2a::core::mpi {

// The line without the marker; static storage, any thread.
const char* shim_build_info();

}  // namespace mlxa2a::core::mpi
