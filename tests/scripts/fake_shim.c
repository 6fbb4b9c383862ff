/*
 * Stands in for libmlxa2a-<family>.so in test_mlxa2a_run.sh: when preloaded
 * it records the pid of the process it was loaded into, so fake_app can tell
 * that LD_PRELOAD reached the rank itself.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void fake_shim_loaded(void)
{
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    setenv("MLXA2A_FAKE_SHIM_PID", pid, 1);
}
