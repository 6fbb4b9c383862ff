// a2a_threads: MPI_THREAD_MULTIPLE — several threads of every rank call
// MPI_Alltoall at the same time, each on its own communicator (a dup of
// MPI_COMM_WORLD, a split, a split of the dup), so teams are created, derived
// and used concurrently. Checks every byte; prints CALLS and RESULT lines as
// a2a_check does (tests/mpi/run_mpi_test.py).
#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

namespace {

std::atomic<int> g_calls{0};
std::atomic<int> g_failures{0};

unsigned char pattern(int src, int dst, std::size_t i, int iter, int thread) {
  return static_cast<unsigned char>(src * 131 + dst * 31 + i * 7 + iter * 13 + thread * 57 + 1);
}

void worker(MPI_Comm comm, int thread, int iterations) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::size_t sizes[] = {1, 3, 8, 64, 100, 1024, 4096, 40000};
  for (int it = 0; it < iterations; ++it) {
    const std::size_t n = sizes[static_cast<std::size_t>(it + thread) % std::size(sizes)];
    const bool in_place = it % 5 == 3;
    std::vector<unsigned char> send(n * size), recv(n * size);
    for (int d = 0; d < size; ++d)
      for (std::size_t i = 0; i < n; ++i) {
        (in_place ? recv : send)[d * n + i] = pattern(rank, d, i, it, thread);
      }
    ++g_calls;
    const int rc = MPI_Alltoall(in_place ? MPI_IN_PLACE : send.data(), static_cast<int>(n),
                                MPI_BYTE, recv.data(), static_cast<int>(n), MPI_BYTE, comm);
    bool ok = rc == MPI_SUCCESS;
    for (int s = 0; s < size && ok; ++s)
      for (std::size_t i = 0; i < n && ok; ++i) ok = recv[s * n + i] == pattern(s, rank, i, it, thread);
    if (!ok && g_failures++ < 5) {
      std::fprintf(stderr, "thread %d iter %d bytes %zu: wrong result (rc %d)\n", thread, it, n, rc);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (provided < MPI_THREAD_MULTIPLE) {
    if (rank == 0) std::printf("RESULT FAIL: MPI_THREAD_MULTIPLE not provided (%d)\n", provided);
    MPI_Finalize();
    return 1;
  }
  // One communicator per thread, made here (creation is collective and must
  // be in the same order on every rank); their teams are built by the threads.
  MPI_Comm dup, half, dup_half;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
  MPI_Comm_split(dup, rank < 2 ? 0 : 1, -rank, &dup_half);
  const MPI_Comm comms[] = {dup, half, dup_half};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) threads.emplace_back(worker, comms[t], t, 60);
  for (std::thread& t : threads) t.join();
  MPI_Comm_free(&dup_half);
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  int failures = 0, mine = g_failures.load();
  MPI_Allreduce(&mine, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::printf("CALLS %d %d\n", rank, g_calls.load());
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::printf("RESULT %s\n", failures ? "FAIL" : "PASS");
  MPI_Finalize();
  return failures ? 1 : 0;
}
