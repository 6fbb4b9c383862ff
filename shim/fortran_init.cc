// Fortran MPI_INIT / MPI_INIT_THREAD. Some Fortran bindings initialise MPI with
// PMPI_Init directly (Open MPI's mpif.h, `use mpi` and `use mpi_f08`; MPICH's
// `use mpi_f08`), bypassing our C MPI_Init; without these wrappers mlxa2a would
// never see initialisation and would have to stand aside. Each wrapper calls the
// library's own Fortran entry point, then lets the runtime initialise.
// In mpi_f08 ierror is optional (a null pointer when absent); it is only passed on.
#include <mpi.h>

#include "core/mpi/abi.h"
#include "core/mpi/lifecycle.h"
#include "shim/fortran.h"

namespace {

using InitFn = void (*)(MPI_Fint*);
using InitThreadFn = void (*)(MPI_Fint*, MPI_Fint*, MPI_Fint*);

void after_fortran_init() {
  if (!mlxa2a::core::mpi::family_ok()) return;
  int initialised = 0;
  PMPI_Initialized(&initialised);
  mlxa2a::core::mpi::after_init(initialised ? MPI_SUCCESS : MPI_ERR_OTHER);
}

}  // namespace

#define MLXA2A_FORTRAN_INIT(sym)                                              \
  MLXA2A_EXPORT void sym(MPI_Fint* ierr) {                                    \
    static const auto next = mlxa2a::shim::next_symbol<InitFn>(#sym);         \
    next(ierr);                                                               \
    after_fortran_init();                                                     \
  }

#define MLXA2A_FORTRAN_INIT_THREAD(sym)                                                \
  MLXA2A_EXPORT void sym(MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierr) {     \
    static const auto next = mlxa2a::shim::next_symbol<InitThreadFn>(#sym);            \
    next(required, provided, ierr);                                                    \
    after_fortran_init();                                                              \
  }

#if defined(MLXA2A_FAMILY_OMPI)
MLXA2A_FORTRAN_INIT(mpi_init)
MLXA2A_FORTRAN_INIT(mpi_init_)
MLXA2A_FORTRAN_INIT(mpi_init__)
MLXA2A_FORTRAN_INIT(MPI_INIT)
MLXA2A_FORTRAN_INIT_THREAD(mpi_init_thread)
MLXA2A_FORTRAN_INIT_THREAD(mpi_init_thread_)
MLXA2A_FORTRAN_INIT_THREAD(mpi_init_thread__)
MLXA2A_FORTRAN_INIT_THREAD(MPI_INIT_THREAD)
#endif
// Both families name their mpi_f08 entry points this way.
MLXA2A_FORTRAN_INIT(mpi_init_f08_)
MLXA2A_FORTRAN_INIT_THREAD(mpi_init_thread_f08_)
