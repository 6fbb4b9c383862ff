/* A library that uses MPI, so that fake_app linked against it needs MPI only
 * indirectly (as a Fortran program needs libmpi through libmpi_mpifh). */
#include <mpi.h>

__attribute__((visibility("default"))) int fake_mpi_user_initialized(void)
{
    int flag = 0;
    MPI_Initialized(&flag);
    return flag;
}
