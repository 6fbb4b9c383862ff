/*
 * a2a_loop: N back-to-back MPI_Alltoall calls of one size, nothing else, so
 * that callgrind's instruction counts of two runs (N and 3N calls) give the
 * instructions per call: (I(3N) - I(N)) / 2N (bench/results/fallthrough.md,
 * single-node.md).
 *
 *   a2a_loop ITERS [INTS_PER_PEER] [self|world] [time]
 *
 * INTS_PER_PEER with a trailing "B" (e.g. "1B") counts MPI_BYTEs instead of
 * ints, for sizes below one int (bench/instruction_budget.py's 1 B case).
 * With "time", rank 0 prints the wall time per call of the loop (after a
 * barrier; no barrier between calls, unlike osu_alltoall), for comparison
 * with bench/handoff_floor's back-to-back rounds.
 * Defaults: 1 int per peer on MPI_COMM_SELF (the fall-through case with
 * MLXA2A_TUNE=pmpi). Exit status 0, or 2 on bad usage or a failed call.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  const long iters = argc > 1 ? atol(argv[1]) : 0;
  const int count = argc > 2 ? atoi(argv[2]) : 1;
  const int bytes = argc > 2 && argv[2][strlen(argv[2]) - 1] == 'B';
  const MPI_Datatype type = bytes ? MPI_BYTE : MPI_INT;
  const int world = argc > 3 && strcmp(argv[3], "world") == 0;
  if (iters <= 0 || count <= 0) {
    fprintf(stderr, "usage: a2a_loop ITERS [INTS_PER_PEER[B]] [self|world] [time]\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const MPI_Comm comm = world ? MPI_COMM_WORLD : MPI_COMM_SELF;
  int size = 1;
  MPI_Comm_size(comm, &size);
  const size_t n = (size_t)size * (size_t)count;  /* ints: enough for bytes too */
  int *send = calloc(n, sizeof *send), *recv = calloc(n, sizeof *recv);
  const int timed = argc > 4 && strcmp(argv[4], "time") == 0;
  int rc = MPI_SUCCESS, rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (timed) MPI_Barrier(comm);
  const double t0 = MPI_Wtime();
  for (long i = 0; i < iters && rc == MPI_SUCCESS; ++i) {
    rc = MPI_Alltoall(send, count, type, recv, count, type, comm);
  }
  if (timed && rank == 0) {
    printf("a2a_loop: %.3f us per call\n", (MPI_Wtime() - t0) * 1e6 / (double)iters);
  }
  free(send);
  free(recv);
  MPI_Finalize();
  return rc == MPI_SUCCESS ? 0 : 2;
}
