/*
 * Test double for test_mlxa2a_run.sh: a program whose only interesting
 * property is which MPI library it needs (DT_NEEDED). It never calls MPI
 * unless asked (so it also runs without a launcher), and prints what
 * mlxa2a-run gave it: LD_PRELOAD, and whether the fake shim's constructor ran
 * in this very process (not merely in a launcher it inherited from).
 *
 * Variants, chosen by the build: FAKE_APP_MPI (links an MPI directly),
 * FAKE_APP_VIA_LIB (reaches MPI only through libfake_mpi_user.so), neither
 * (no MPI at all).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef FAKE_APP_MPI
#include <mpi.h>
#endif
#ifdef FAKE_APP_VIA_LIB
int fake_mpi_user_initialized(void);
#endif

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--touch-mpi") == 0) {
#if defined(FAKE_APP_MPI)
        int flag = 0;
        MPI_Initialized(&flag);
        return flag;
#elif defined(FAKE_APP_VIA_LIB)
        return fake_mpi_user_initialized();
#endif
    }
    const char *preload = getenv("LD_PRELOAD");
    const char *shim_pid = getenv("MLXA2A_FAKE_SHIM_PID");
    int in_me = shim_pid != NULL && atol(shim_pid) == (long)getpid();
    printf("preload=%s shim=%s\n", preload ? preload : "",
           in_me ? "loaded" : "absent");
    return 0;
}
