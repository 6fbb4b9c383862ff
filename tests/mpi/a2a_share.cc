// a2a_share: what one communicator decided, the next of the same processes
// knows (issue 40 item 4, docs/tune.md "Shared decisions"). MPI_COMM_WORLD
// calls a few sizes until measured selection decides them; then many dups
// and splits of the same processes (named share-dup-N, share-split-N: the
// split reverses the rank order) call the same sizes, and halves of world
// (named half: another layout) call them too. Every result is checked.
// The trace tells which call was a trial: run with MLXA2A_TUNE_SAMPLES and
// MLXA2A_DEBUG_TUNE_TIMES (tests/mpi/meson.build checks share-* take no
// trial, half does). --threads: MPI_Init_thread(MPI_THREAD_MULTIPLE) (then
// nothing is shared). Prints what tests/mpi/run_mpi_test.py reads:
//   CALLS <rank> <n>   RESULT PASS|FAIL
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_calls = 0;
int g_failures = 0;

// One alltoall of `bytes` per peer on comm, checked.
void call(MPI_Comm comm, int bytes) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<unsigned char> send(static_cast<std::size_t>(bytes) * size), recv(send.size());
  for (int p = 0; p < size; ++p) {
    for (int i = 0; i < bytes; ++i) send[p * bytes + i] = static_cast<unsigned char>(rank * 31 + p * 7 + i);
  }
  if (MPI_Alltoall(send.data(), bytes, MPI_BYTE, recv.data(), bytes, MPI_BYTE, comm) !=
      MPI_SUCCESS) {
    ++g_failures;
  }
  ++g_calls;
  for (int p = 0; p < size; ++p) {
    for (int i = 0; i < bytes; ++i) {
      if (recv[p * bytes + i] != static_cast<unsigned char>(p * 31 + rank * 7 + i)) {
        if (g_failures++ < 5) std::fprintf(stderr, "FAIL: wrong byte from %d at %d\n", p, i);
        break;
      }
    }
  }
}

constexpr int kSizes[] = {64, 4096};

void calls(MPI_Comm comm, int each) {
  for (int n = 0; n < each; ++n) {
    for (int bytes : kSizes) call(comm, bytes);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const bool threads = argc > 1 && std::strcmp(argv[1], "--threads") == 0;
  int provided = 0;
  if (threads) MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  else MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // Enough calls for every class to decide with MLXA2A_TUNE_SAMPLES=1.
  calls(MPI_COMM_WORLD, 40);
  for (int i = 0; i < 6; ++i) {
    MPI_Comm dup = MPI_COMM_NULL, split = MPI_COMM_NULL;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_set_name(dup, ("share-dup-" + std::to_string(i)).c_str());
    calls(dup, 3);
    MPI_Comm_split(dup, 0, size - rank, &split);
    MPI_Comm_set_name(split, ("share-split-" + std::to_string(i)).c_str());
    calls(split, 3);
    MPI_Comm_free(&split);
    MPI_Comm_free(&dup);
  }
  // Another layout: halves of world (alternate ranks) tune on their own.
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  MPI_Comm_set_name(half, "half");
  calls(half, 40);
  MPI_Comm_free(&half);
  std::printf("CALLS %d %d\n", rank, g_calls);
  int bad = 0;
  MPI_Allreduce(&g_failures, &bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) std::printf("RESULT %s\n", bad == 0 ? "PASS" : "FAIL");
  MPI_Finalize();
  return bad == 0 ? 0 : 1;
}
