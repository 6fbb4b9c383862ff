// a2a_rdma: what the RDMA leader exchange promises beyond correct results,
// checked under virtual nodes and fakeverbs by tests/mpi/run_mpi_test.py:
//   counts [B]  MPI_COMM_WORLD, a duplicate of it and the even/odd halves
//           (MPI_Comm_split), 10 calls of B bytes per peer each (default 8:
//           one round); the runner checks the writes per call (M(M-1) per
//           communicator of M nodes) and the QPs created (the duplicate and
//           the half whose leaders are world's leaders create none), or the
//           staging rounds, from MLXA2A_COLL_STATS.
//   fault   MPI_ERRORS_RETURN, 8 calls; with A2A_EXPECT_ERROR=1 (set for
//           the run with mlxa2a and a FAKEVERBS_FAULT) every rank must see
//           MPI_ERR_OTHER on one or more calls and none on the last two;
//           every call that succeeds must deliver the right data (the team
//           stopped using RDMA: containment); nothing may hang. With
//           A2A_EXPECT_ERROR=last the fault hits the last call: errors, and
//           a clean MPI_Finalize with the agreement still pending. Without
//           it, no error.
//   fault-churn  fault on a duplicate of MPI_COMM_WORLD, freed; then a
//           second duplicate, 4 calls that must be right: its engine is a
//           new one (the runner counts "engine: new"), never the contained
//           one from the pool.
//   leak N  one call on MPI_COMM_WORLD, then N cycles of MPI_Comm_split
//           (even/odd halves), one call on the half, MPI_Comm_free: the
//           runner checks from MLXA2A_COLL_STATS that QPs were created once
//           (reused by every later half) and that only world's MRs are live
//           at finalize, whatever N (tests/mpi/meson.build; 10,000 by hand,
//           bench/results/multi-node.md).
//   sizes   scripts/hwcheck's range: 1 B to 1 MiB per peer (odd sizes too)
//           on MPI_COMM_WORLD and a duplicate, each checked; sizes whose
//           send+receive buffers would pass 256 MiB per rank are left out
//           (rank 0 prints "LARGEST <bytes per peer>").
//   kill    scripts/hwcheck's induced fault: every rank prints
//           "PID <rank> <host> <pid>", 3 calls on MPI_COMM_WORLD, then the
//           last rank SIGKILLs itself while the others go on calling (errors
//           returned) until a call fails; the launcher or MLXA2A_NET_TIMEOUT
//           must end the job, and hwcheck then looks for what the printed
//           pids left behind. A2A_LEAVE_SEGMENT=1: the dying rank first
//           leaves /dev/shm/mlxa2a-<uid>-<pid>-0-hwcheck-leftover, a leftover
//           hwcheck must report (its test); as root owned by uid 65534, which
//           other jobs' stale-segment sweep leaves alone.
//   fork N  scripts/hwcheck's fork check: N calls of 4 KiB per peer on
//           MPI_COMM_WORLD from the same buffers, each followed by system()
//           (a fork and exec, as a job's helper script would); with
//           zero-copy forced the leaders' registrations of the send buffer
//           outlive the forks, and every call must still deliver the right
//           data.
// Any mode: A2A_SKEW_RANK=R A2A_SKEW_MS=S makes world rank R sleep S ms
// before its first MPI_Alltoall, or before its call number A2A_SKEW_CALL
// (0-based; hwcheck's skew check: a rank arriving later than any time-out
// must not fail the call; from call 1 on, the RDMA set-up of the first call
// is done and the others wait on the network, not in a set-up collective).
// Prints the lines run_mpi_test.py reads: CALLS <rank> <n>, RESULT PASS|FAIL.
#include <mpi.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_calls = 0;
int g_world_rank = 0;

unsigned char byte(int src, int dst, int k, int salt) {
  return static_cast<unsigned char>(src * 31 + dst * 7 + k + salt * 13 + 1);
}

// A2A_SKEW_RANK / A2A_SKEW_MS / A2A_SKEW_CALL: that world rank arrives late
// at that call.
void skew_before_call() {
  const char* rank = std::getenv("A2A_SKEW_RANK");
  const char* ms = std::getenv("A2A_SKEW_MS");
  const char* at = std::getenv("A2A_SKEW_CALL");
  if (!rank || !ms || std::atoi(rank) != g_world_rank || g_calls != (at ? std::atoi(at) : 0)) return;
  const long total = std::atol(ms);
  timespec ts{total / 1000, (total % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

// One call of `bytes` per peer from `send` into `recv` (each bytes * size);
// returns the MPI error code and counts wrong bytes.
int call_with(MPI_Comm comm, int bytes, int salt, int* wrong, std::vector<unsigned char>& send,
              std::vector<unsigned char>& recv) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  for (int p = 0; p < size; ++p) {
    for (int k = 0; k < bytes; ++k) send[static_cast<std::size_t>(p) * bytes + k] = byte(rank, p, k, salt);
  }
  skew_before_call();
  ++g_calls;
  const int rc = MPI_Alltoall(send.data(), bytes, MPI_BYTE, recv.data(), bytes, MPI_BYTE, comm);
  if (rc != MPI_SUCCESS) return rc;
  for (int p = 0; p < size; ++p) {
    for (int k = 0; k < bytes; ++k) {
      *wrong += recv[static_cast<std::size_t>(p) * bytes + k] != byte(p, rank, k, salt);
    }
  }
  return rc;
}

// The same with buffers of its own.
int call(MPI_Comm comm, int bytes, int salt, int* wrong) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::vector<unsigned char> send(static_cast<std::size_t>(bytes) * size), recv(send.size(), 0);
  return call_with(comm, bytes, salt, wrong, send, recv);
}

int counts(int bytes) {
  int wrong = 0, failed = 0;
  MPI_Comm dup = MPI_COMM_NULL, half = MPI_COMM_NULL;
  for (int i = 0; i < 10; ++i) failed |= call(MPI_COMM_WORLD, bytes, i, &wrong) != MPI_SUCCESS;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  for (int i = 0; i < 10; ++i) failed |= call(dup, bytes, 20 + i, &wrong) != MPI_SUCCESS;
  MPI_Comm_split(MPI_COMM_WORLD, g_world_rank % 2, g_world_rank, &half);
  for (int i = 0; i < 10; ++i) failed |= call(half, bytes, 40 + i, &wrong) != MPI_SUCCESS;
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  return failed || wrong;
}

int fault(MPI_Comm comm) {
  const char* expect = std::getenv("A2A_EXPECT_ERROR");
  // "last": the fault hits the last call; only a clean finalize is asked.
  const bool last = expect && std::strcmp(expect, "last") == 0;
  const bool want_error = last || (expect && std::strcmp(expect, "1") == 0);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  constexpr int kCalls = 8;
  int errors = 0, other = 0, first_error = -1, last_error = -1, wrong_after = 0;
  for (int i = 0; i < kCalls; ++i) {
    int wrong = 0;  // counted only for calls that succeed
    const int rc = call(comm, 16, i, &wrong);
    if (rc != MPI_SUCCESS) {
      int cls = 0;
      MPI_Error_class(rc, &cls);
      ++errors;
      other += cls == MPI_ERR_OTHER;
      if (first_error < 0) first_error = i;
      last_error = i;
    } else {
      wrong_after += wrong;
    }
  }
  std::fprintf(stderr, "rank %d: %d errors (%d MPI_ERR_OTHER) at calls %d-%d, %d wrong bytes\n",
               g_world_rank, errors, other, first_error, last_error, wrong_after);
  if (!want_error) return errors != 0 || wrong_after != 0;
  // Errors (not necessarily consecutive: a rank whose call succeeded fails
  // its next engine call instead), none on the last two: the team recovered.
  return !(errors > 0 && other == errors && (last || last_error < kCalls - 2) && wrong_after == 0);
}

int leak(int cycles) {
  int wrong = 0, failed = 0;
  failed |= call(MPI_COMM_WORLD, 8, 0, &wrong) != MPI_SUCCESS;
  for (int i = 0; i < cycles; ++i) {
    MPI_Comm half = MPI_COMM_NULL;
    MPI_Comm_split(MPI_COMM_WORLD, g_world_rank % 2, g_world_rank, &half);
    failed |= call(half, 8, i + 1, &wrong) != MPI_SUCCESS;
    MPI_Comm_free(&half);
  }
  return failed || wrong;
}

int sizes() {
  int size = 1, wrong = 0, failed = 0, largest = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  constexpr long kMaxPerRank = 256L << 20;  // send + receive
  int salt = 0;
  for (int bytes : {1, 7, 64, 1000, 4096, 65536, 262144, 1 << 20}) {
    if (2L * bytes * size > kMaxPerRank) break;
    largest = bytes;
    failed |= call(MPI_COMM_WORLD, bytes, ++salt, &wrong) != MPI_SUCCESS;
    failed |= call(dup, bytes, ++salt, &wrong) != MPI_SUCCESS;
  }
  MPI_Comm_free(&dup);
  if (g_world_rank == 0) std::printf("LARGEST %d\n", largest);
  return failed || wrong;
}

// Forks between calls that reuse their buffers (registered, with zero-copy,
// by the leaders' registration caches).
int fork_between(int calls) {
  int size = 1, wrong = 0, failed = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  constexpr int kBytes = 4096;
  std::vector<unsigned char> send(static_cast<std::size_t>(kBytes) * size), recv(send.size(), 0);
  for (int i = 0; i < calls; ++i) {
    failed |= call_with(MPI_COMM_WORLD, kBytes, i, &wrong, send, recv) != MPI_SUCCESS;
    failed |= std::system("true") != 0;
  }
  if (wrong) std::fprintf(stderr, "rank %d: %d wrong bytes after forks\n", g_world_rank, wrong);
  return failed || wrong;
}

void die_with_leftover() {
  const char* leave = std::getenv("A2A_LEAVE_SEGMENT");
  if (leave && std::strcmp(leave, "1") == 0) {
    const std::string name = "/mlxa2a-" + std::to_string(getuid()) + "-" +
                             std::to_string(getpid()) + "-0-hwcheck-leftover";
    const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    // Owned by another user where we may (root), so that no other mlxa2a job
    // sweeps it as its own stale segment before hwcheck looks (segment.h).
    if (fd >= 0 && fchown(fd, 65534, 65534) != 0 && getuid() == 0) std::perror("fchown");
    if (fd >= 0) close(fd);
  }
  raise(SIGKILL);
}

int kill_one() {
  int size = 1, wrong = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::printf("PID %d %s %d\n", g_world_rank, host, static_cast<int>(getpid()));
  std::fflush(stdout);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int failed = 0;
  for (int i = 0; i < 3; ++i) failed |= call(MPI_COMM_WORLD, 64, i, &wrong) != MPI_SUCCESS;
  if (g_world_rank == size - 1) die_with_leftover();
  for (int i = 0; i < 100 && call(MPI_COMM_WORLD, 64, 3 + i, &wrong) == MPI_SUCCESS; ++i) {
  }
  return failed || wrong;
}

}  // namespace

// fault on a duplicate of MPI_COMM_WORLD, which is then freed; a second
// duplicate must get a new engine (a contained one never goes to the pool)
// and its calls must be right.
int fault_churn() {
  MPI_Comm first = MPI_COMM_NULL, second = MPI_COMM_NULL;
  int wrong = 0;
  // World's state first, so that its duplicates are derived teams (pooled).
  int failed = call(MPI_COMM_WORLD, 16, 70, &wrong) != MPI_SUCCESS;
  MPI_Comm_dup(MPI_COMM_WORLD, &first);
  failed |= fault(first);
  MPI_Comm_free(&first);
  MPI_Comm_dup(MPI_COMM_WORLD, &second);
  for (int i = 0; i < 4; ++i) failed |= call(second, 16, 60 + i, &wrong) != MPI_SUCCESS;
  MPI_Comm_free(&second);
  return failed || wrong;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  const char* mode = argc > 1 ? argv[1] : "counts";
  const bool is_leak = argc > 2 && std::strcmp(mode, "leak") == 0;
  const bool is_fork = argc > 2 && std::strcmp(mode, "fork") == 0;
  const int failed = std::strcmp(mode, "kill") == 0          ? kill_one()
                     : std::strcmp(mode, "sizes") == 0       ? sizes()
                     : std::strcmp(mode, "fault") == 0       ? fault(MPI_COMM_WORLD)
                     : std::strcmp(mode, "fault-churn") == 0 ? fault_churn()
                     : is_leak                               ? leak(std::atoi(argv[2]))
                     : is_fork                               ? fork_between(std::atoi(argv[2]))
                     : argc > 2 && !std::strcmp(mode, "counts") ? counts(std::atoi(argv[2]))
                                                                : counts(8);
  std::printf("CALLS %d %d\n", g_world_rank, g_calls);
  std::fflush(stdout);
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (g_world_rank == 0) std::printf("RESULT %s\n", any ? "FAIL" : "PASS");
  MPI_Finalize();
  return 0;
}
