#include "core/mpi/build_info.h"

#include <mpi.h>

#include <cstring>

#include "core/version/version.h"

#define MLXA2A_STR2(x) #x
#define MLXA2A_STR(x) MLXA2A_STR2(x)

// From the MPI's own header, so the line says what mpi.h this shim was
// compiled against (not what happens to be loaded at run time).
#if defined(MLXA2A_FAMILY_OMPI)
#define MLXA2A_BUILT_MPI                                                                \
  "Open MPI " MLXA2A_STR(OMPI_MAJOR_VERSION) "." MLXA2A_STR(OMPI_MINOR_VERSION) "." \
      MLXA2A_STR(OMPI_RELEASE_VERSION) " (libmpi.so.40)"
#elif defined(MLXA2A_FAMILY_MPICH)
#define MLXA2A_BUILT_MPI "MPICH " MPICH_VERSION " (libmpich.so.12)"
#else
#error "build with MLXA2A_FAMILY_OMPI or MLXA2A_FAMILY_MPICH"
#endif

// One string literal: contiguous in .rodata, so `strings` shows it whole.
extern "C" __attribute__((visibility("default"), used)) const char mlxa2a_build_info[] =
    MLXA2A_WHAT_MARKER MLXA2A_VERSION_LINE ", built for " MLXA2A_BUILT_MPI
    ", MPI standard " MLXA2A_STR(MPI_VERSION) "." MLXA2A_STR(MPI_SUBVERSION) ", " MLXA2A_BUILD_LINE;

namespace mlxa2a::core::mpi {

const char* shim_build_info() {
  return mlxa2a_build_info + std::strlen(core::version::kWhatMarker);
}

}  // namespace mlxa2a::core::mpi
