/* Cost of MPI_Comm_split + MPI_Comm_free, to measure what mlxa2a adds when it
 * derives the child's team from the parent's (issue 4: target <= 10%).
 *   comm_split_bench [--iters N] [--warm]
 * --warm first runs one MPI_Alltoall on MPI_COMM_WORLD, so that (with the shim
 * preloaded) the parent has a team and every split derives one; without it
 * the parent has none and the shim only traces. Prints the median and the
 * minimum over 7 batches of the mean time per split+free, in microseconds, on
 * rank 0 (the minimum is the steadier on a shared machine: noise only adds). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  int iters = 2000, warm = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters = atoi(argv[++i]);
    if (!strcmp(argv[i], "--warm")) warm = 1;
  }
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (warm) {
    int* s = calloc((size_t)size, sizeof(int));
    int* r = calloc((size_t)size, sizeof(int));
    MPI_Alltoall(s, 1, MPI_INT, r, 1, MPI_INT, MPI_COMM_WORLD);
    free(s);
    free(r);
  }
  enum { kBatches = 7 };
  double per[kBatches];
  for (int b = 0; b < kBatches; ++b) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
      MPI_Comm sub;
      MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &sub);
      MPI_Comm_free(&sub);
    }
    per[b] = (MPI_Wtime() - t0) / iters * 1e6;
  }
  qsort(per, kBatches, sizeof per[0], cmp);
  if (rank == 0) {
    printf("split+free median %.2f us min %.2f us (np=%d, %s)\n", per[kBatches / 2], per[0], size,
           warm ? "parent has a team" : "parent has no team");
  }
  MPI_Finalize();
  return 0;
}
