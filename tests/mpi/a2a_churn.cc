// Communicator churn (issue 11, item 4): cycles of MPI_Comm_dup or
// MPI_Comm_split (reversed order) + MPI_Alltoall + MPI_Comm_free, each call's
// data checked, with several communicators alive at once and sizes that take
// every engine path. With mlxa2a a freed communicator's engine serves the next
// one of the same ranks (engine pool); the runner counts the reuses in the
// trace (--expect-trace). Prints the runner's CALLS/RESULT lines.
//   a2a_churn [cycles] [no-parent]
// no-parent: MPI_COMM_WORLD never calls MPI_Alltoall (issue 24: libraries
// and solvers call it only on communicators of their own), and each cycle
// also makes an MPI_Comm_create and an MPI_Comm_split_type communicator; with
// mlxa2a every one derives its team from world's node map found at MPI_Init
// (the runner forbids a team "built" by discovery per communicator).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int g_calls = 0;
int g_failures = 0;

// One alltoall of `count` ints per peer on comm, checked.
void checked(MPI_Comm comm, int count, int cycle) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::size_t n = static_cast<std::size_t>(count) * size;
  std::vector<int> send(n), recv(n, -1);
  for (int p = 0; p < size; ++p)
    for (int i = 0; i < count; ++i) send[static_cast<std::size_t>(p) * count + i] = rank * 7919 + p * 31 + i + cycle;
  ++g_calls;
  const int rc = MPI_Alltoall(send.data(), count, MPI_INT, recv.data(), count, MPI_INT, comm);
  int wrong = rc != MPI_SUCCESS;
  for (int p = 0; p < size && !wrong; ++p)
    for (int i = 0; i < count; ++i)
      wrong += recv[static_cast<std::size_t>(p) * count + i] != p * 7919 + rank * 31 + i + cycle;
  if (wrong) {
    std::printf("rank %d cycle %d: %d ints per peer: rc=%d, wrong data\n", rank, cycle, count, rc);
    ++g_failures;
  }
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int cycles = argc > 1 ? std::atoi(argv[1]) : 50;
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const bool no_parent = argc > 2 && std::strcmp(argv[2], "no-parent") == 0;
  if (!no_parent) checked(MPI_COMM_WORLD, 1, 0);
  MPI_Group world = MPI_GROUP_NULL;
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  const int counts[] = {1, 50, 3000, 40000};  // line, copy, several rounds
  for (int c = 0; c < cycles; ++c) {
    MPI_Comm dup = MPI_COMM_NULL, split = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    checked(dup, counts[c % 4], c);
    MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &split);
    checked(split, counts[(c + 1) % 4], c);
    checked(dup, 2, c);  // both alive
    MPI_Comm_free(&dup);
    checked(split, 1, c);
    MPI_Comm_free(&split);
    if (no_parent) {
      MPI_Comm created = MPI_COMM_NULL, shared = MPI_COMM_NULL;
      MPI_Comm_create(MPI_COMM_WORLD, world, &created);
      checked(created, counts[(c + 2) % 4], c);
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared);
      checked(shared, counts[(c + 3) % 4], c);
      MPI_Comm_free(&created);
      MPI_Comm_free(&shared);
    }
  }
  MPI_Group_free(&world);
  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::printf("CALLS %d %d\n", rank, g_calls);
  if (rank == 0) std::printf("RESULT %s\n", failures ? "FAIL" : "PASS");
  MPI_Finalize();
  return 0;
}
