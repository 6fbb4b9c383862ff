/* Test-only preload for MPICH runs (tests/mpi/run_mpi_test.py --idle-yield).
 *
 * Why: MPICH 4.0 ch4:ucx waits by polling ucp_worker_progress() without ever
 * giving up the CPU. With more ranks than cores (CI has 2) a waiting rank
 * burns its whole time slice while the rank it waits for is not running, so
 * MPICH's own collectives (the reference runs, the PMPI fall-through, the
 * hierarchical engine's PMPI leaders) take 5-10x longer than the work.
 * Open MPI yields by itself when oversubscribed (mpi_yield_when_idle).
 *
 * What: wraps ucp_worker_progress() and calls sched_yield() when a poll found
 * nothing to do; the poll itself and its result are unchanged, so MPICH
 * behaves the same but for when it gets the CPU. It defines no MPI_* or
 * PMPI_* symbol, so it sits beside mlxa2a and other PMPI tools without
 * changing their order. MPICH only: Open MPI's UCX component may open libucp
 * privately, where RTLD_NEXT would not find it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

typedef unsigned (*progress_fn)(void *worker);

__attribute__((visibility("default"))) unsigned ucp_worker_progress(void *worker);

unsigned ucp_worker_progress(void *worker) {
  /* Every rank thread resolves the same pointer: a benign, idempotent store. */
  static progress_fn real;
  progress_fn fn = __atomic_load_n(&real, __ATOMIC_RELAXED);
  if (!fn) {
    fn = (progress_fn)dlsym(RTLD_NEXT, "ucp_worker_progress");
    if (!fn) {
      fputs("mpich_idle_yield: no ucp_worker_progress after this library\n", stderr);
      abort();
    }
    __atomic_store_n(&real, fn, __ATOMIC_RELAXED);
  }
  unsigned events = fn(worker);
  if (events == 0) sched_yield();
  return events;
}
