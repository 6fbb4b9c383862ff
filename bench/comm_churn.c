/* Communicator churn (issue 11, item 4): what one "create a communicator, run
 * its first MPI_Alltoall, free it" cycle costs, with and without mlxa2a.
 *   comm_churn [--cycles N] [--kind dup|split] [--count C]
 * dup:   MPI_Comm_dup(MPI_COMM_WORLD)
 * split: MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank) (every rank, reversed
 *        order, so a derived team must translate ranks)
 * then one MPI_Alltoall of C ints per peer (default 1) and MPI_Comm_free.
 * MPI_COMM_WORLD runs one alltoall first (with mlxa2a it then has a team, as
 * in a real program). Prints, on rank 0, the mean time per cycle over all
 * cycles and the median and minimum over 10 batches, in microseconds. A
 * benchmark, not a test: run it side by side (with, without) on a quiet
 * machine. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  int cycles = 10000, count = 1, split = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--cycles") && i + 1 < argc) cycles = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--count") && i + 1 < argc) count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--kind") && i + 1 < argc) split = !strcmp(argv[++i], "split");
  }
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t n = (size_t)size * (size_t)count;
  int* s = calloc(n, sizeof(int));
  int* r = calloc(n, sizeof(int));
  MPI_Alltoall(s, count, MPI_INT, r, count, MPI_INT, MPI_COMM_WORLD);
  enum { kBatches = 10 };
  const int per_batch = cycles / kBatches > 0 ? cycles / kBatches : 1;
  double per[kBatches], total = 0;
  int bad = 0;
  for (int b = 0; b < kBatches; ++b) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < per_batch; ++i) {
      MPI_Comm c;
      if (split) MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &c);
      else MPI_Comm_dup(MPI_COMM_WORLD, &c);
      s[0] = i;
      bad |= MPI_Alltoall(s, count, MPI_INT, r, count, MPI_INT, c) != MPI_SUCCESS;
      MPI_Comm_free(&c);
    }
    const double dt = MPI_Wtime() - t0;
    total += dt;
    per[b] = dt / per_batch * 1e6;
  }
  qsort(per, kBatches, sizeof per[0], cmp);
  if (rank == 0) {
    printf("%s+alltoall+free np=%d cycles=%d count=%d: mean %.2f us median %.2f us min %.2f us%s\n",
           split ? "split" : "dup", size, per_batch * kBatches, count,
           total / (per_batch * kBatches) * 1e6, per[kBatches / 2], per[0],
           bad ? " (SOME CALLS FAILED)" : "");
  }
  free(s);
  free(r);
  MPI_Finalize();
  return bad;
}
