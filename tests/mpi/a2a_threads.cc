// a2a_threads: MPI_THREAD_MULTIPLE — several threads of every rank call
// MPI_Alltoall at the same time, each on its own communicator (a dup of
// MPI_COMM_WORLD, a split, a split of the dup), so teams are created, derived
// and used concurrently. Checks every byte; prints CALLS and RESULT lines as
// a2a_check does (tests/mpi/run_mpi_test.py).
//
// A2A_THREADS=T A2A_COMMS=C (issue 39, item 5): T threads each rotating over
// C duplicates of MPI_COMM_WORLD of their own (every team spans the nodes),
// and every call's begin and end time recorded: the run fails unless, on
// every rank, some two threads' calls were in flight at the same time.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <utility>
#include <vector>

namespace {

std::atomic<int> g_calls{0};
std::atomic<int> g_failures{0};

using Clock = std::chrono::steady_clock;
using Span = std::pair<Clock::time_point, Clock::time_point>;  // one call's begin, end
std::vector<std::vector<Span>> g_spans;  // per thread (each writes its own)

unsigned char pattern(int src, int dst, std::size_t i, int iter, int thread) {
  return static_cast<unsigned char>(src * 131 + dst * 31 + i * 7 + iter * 13 + thread * 57 + 1);
}

int env_int(const char* name, int dflt) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : dflt;
}

// Pairs of calls of different threads whose [begin, end] intersect.
long overlapping_pairs() {
  long n = 0;
  for (std::size_t a = 0; a < g_spans.size(); ++a)
    for (std::size_t b = a + 1; b < g_spans.size(); ++b)
      for (const Span& x : g_spans[a])
        for (const Span& y : g_spans[b]) n += x.first < y.second && y.first < x.second;
  return n;
}

void worker(const std::vector<MPI_Comm>& comms, int thread, int iterations) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comms[0], &rank);
  MPI_Comm_size(comms[0], &size);
  const std::size_t sizes[] = {1, 3, 8, 64, 100, 1024, 4096, 40000};
  for (int it = 0; it < iterations; ++it) {
    const MPI_Comm comm = comms[static_cast<std::size_t>(it) % comms.size()];
    const std::size_t n = sizes[static_cast<std::size_t>(it + thread) % std::size(sizes)];
    const bool in_place = it % 5 == 3;
    std::vector<unsigned char> send(n * size), recv(n * size);
    for (int d = 0; d < size; ++d)
      for (std::size_t i = 0; i < n; ++i) {
        (in_place ? recv : send)[d * n + i] = pattern(rank, d, i, it, thread);
      }
    ++g_calls;
    const Clock::time_point begin = Clock::now();
    const int rc = MPI_Alltoall(in_place ? MPI_IN_PLACE : send.data(), static_cast<int>(n),
                                MPI_BYTE, recv.data(), static_cast<int>(n), MPI_BYTE, comm);
    g_spans[static_cast<std::size_t>(thread)].emplace_back(begin, Clock::now());
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
  // The communicators, made here (creation is collective and must be in the
  // same order on every rank); their teams are built by the threads.
  const int n_threads = env_int("A2A_THREADS", 0);
  std::vector<std::vector<MPI_Comm>> comms;
  std::vector<MPI_Comm> made;
  if (n_threads > 0) {  // T threads x C duplicates of MPI_COMM_WORLD each
    const int per = std::max(1, env_int("A2A_COMMS", 1));
    comms.resize(static_cast<std::size_t>(n_threads));
    for (auto& c : comms)
      for (int k = 0; k < per; ++k) {
        made.emplace_back();
        MPI_Comm_dup(MPI_COMM_WORLD, &made.back());
        c.push_back(made.back());
      }
  } else {  // a dup of MPI_COMM_WORLD, a split, a split of the dup
    MPI_Comm dup, half, dup_half;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
    MPI_Comm_split(dup, rank < 2 ? 0 : 1, -rank, &dup_half);
    made = {dup, half, dup_half};
    for (MPI_Comm c : made) comms.push_back({c});
  }
  g_spans.resize(comms.size());
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < comms.size(); ++t)
    threads.emplace_back(worker, std::cref(comms[t]), static_cast<int>(t), 60);
  for (std::thread& t : threads) t.join();
  for (auto it = made.rbegin(); it != made.rend(); ++it) MPI_Comm_free(&*it);
  if (n_threads > 0) {
    const long pairs = overlapping_pairs();
    std::printf("OVERLAP %d %ld\n", rank, pairs);
    if (pairs == 0 && g_failures++ == 0) {
      std::fprintf(stderr, "rank %d: no two threads' calls were in flight at once\n", rank);
    }
  }
  int failures = 0, mine = g_failures.load();
  MPI_Allreduce(&mine, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::printf("CALLS %d %d\n", rank, g_calls.load());
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) std::printf("RESULT %s\n", failures ? "FAIL" : "PASS");
  MPI_Finalize();
  return failures ? 1 : 0;
}
