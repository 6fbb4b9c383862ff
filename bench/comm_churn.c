/* Communicator churn (issues 11 and 24): what one "create a communicator, run
 * its first MPI_Alltoall, free it" cycle costs, with and without mlxa2a.
 *   comm_churn [--cycles N] [--kind dup|split|create|split_type] [--count C]
 *              [--no-parent-call | --parent-calls N]
 * dup:        MPI_Comm_dup(MPI_COMM_WORLD)
 * split:      MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank) (every rank,
 *             reversed order, so a derived team must translate ranks)
 * create:     MPI_Comm_create(MPI_COMM_WORLD, world's group)
 * split_type: MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED)
 * then one MPI_Alltoall of C ints per peer (default 1) and MPI_Comm_free.
 * By default MPI_COMM_WORLD runs one alltoall first (with mlxa2a it then has
 * a team, as in a program that also calls alltoall on world);
 * --no-parent-call skips it: the general case of libraries and solvers that
 * call alltoall only on communicators of their own. --parent-calls N: world
 * runs N alltoalls first (enough for measured selection to decide their size
 * class, which later communicators of the same processes then share:
 * docs/tune.md "Shared decisions"). Prints, on rank 0, the
 * mean time per cycle over all cycles and the median and minimum over 10
 * batches, in microseconds. A benchmark, not a test: run it side by side
 * (with, without) on a quiet machine. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

enum Kind { kDup, kSplit, kCreate, kSplitType };
static const char* const kKindNames[] = {"dup", "split", "create", "split_type"};

static void make_comm(enum Kind kind, int rank, int size, MPI_Group world, MPI_Comm* c) {
  switch (kind) {
    case kDup: MPI_Comm_dup(MPI_COMM_WORLD, c); break;
    case kSplit: MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, c); break;
    case kCreate: MPI_Comm_create(MPI_COMM_WORLD, world, c); break;
    case kSplitType:
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, c);
      break;
  }
}

int main(int argc, char** argv) {
  int cycles = 10000, count = 1, parent_call = 1;
  enum Kind kind = kDup;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--cycles") && i + 1 < argc) cycles = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--count") && i + 1 < argc) count = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-parent-call")) parent_call = 0;
    else if (!strcmp(argv[i], "--parent-calls") && i + 1 < argc) parent_call = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--kind") && i + 1 < argc) {
      const char* k = argv[++i];
      int found = 0;
      for (int j = 0; j < 4; ++j) {
        if (!strcmp(k, kKindNames[j])) {
          kind = (enum Kind)j;
          found = 1;
        }
      }
      if (!found) {
        fprintf(stderr, "comm_churn: unknown --kind %s (dup, split, create, split_type)\n", k);
        return 2;
      }
    } else {
      fprintf(stderr, "comm_churn: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Group world;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  const size_t n = (size_t)size * (size_t)count;
  int* s = calloc(n, sizeof(int));
  int* r = calloc(n, sizeof(int));
  for (int i = 0; i < parent_call; ++i) {
    MPI_Alltoall(s, count, MPI_INT, r, count, MPI_INT, MPI_COMM_WORLD);
  }
  enum { kBatches = 10 };
  const int per_batch = cycles / kBatches > 0 ? cycles / kBatches : 1;
  double per[kBatches], total = 0;
  int bad = 0;
  for (int b = 0; b < kBatches; ++b) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < per_batch; ++i) {
      MPI_Comm c;
      make_comm(kind, rank, size, world, &c);
      int csize = 0;
      MPI_Comm_size(c, &csize);
      s[0] = i;
      bad |= csize > size || MPI_Alltoall(s, count, MPI_INT, r, count, MPI_INT, c) != MPI_SUCCESS;
      MPI_Comm_free(&c);
    }
    const double dt = MPI_Wtime() - t0;
    total += dt;
    per[b] = dt / per_batch * 1e6;
  }
  qsort(per, kBatches, sizeof per[0], cmp);
  if (rank == 0) {
    char parent[40] = "";
    if (parent_call != 1) snprintf(parent, sizeof parent, " parent-calls=%d", parent_call);
    printf("%s+alltoall+free np=%d cycles=%d count=%d%s: mean %.2f us median %.2f us min %.2f us%s\n",
           kKindNames[kind], size, per_batch * kBatches, count, parent, total / (per_batch * kBatches) * 1e6,
           per[kBatches / 2], per[0], bad ? " (SOME CALLS FAILED)" : "");
  }
  MPI_Group_free(&world);
  free(s);
  free(r);
  MPI_Finalize();
  return bad;
}
