// a2a_rdma: what the RDMA leader exchange promises beyond correct results,
// checked under virtual nodes and fakeverbs by tests/mpi/run_mpi_test.py:
//   counts  MPI_COMM_WORLD, a duplicate of it and the even/odd halves
//           (MPI_Comm_split), 10 one-round calls each; the runner checks the
//           writes per call (M(M-1) per communicator of M nodes) and the QPs
//           created (the duplicate and the half whose leaders are world's
//           leaders create none) from MLXA2A_COLL_STATS.
//   fault   MPI_ERRORS_RETURN, 8 calls; with A2A_EXPECT_ERROR=1 (set for
//           the run with mlxa2a and a FAKEVERBS_FAULT) every rank must see
//           MPI_ERR_OTHER on one or more calls and none on the last two;
//           every call that succeeds must deliver the right data (the team
//           stopped using RDMA: containment); nothing may hang. With
//           A2A_EXPECT_ERROR=last the fault hits the last call: errors, and
//           a clean MPI_Finalize with the agreement still pending. Without
//           it, no error.
//   leak N  one call on MPI_COMM_WORLD, then N cycles of MPI_Comm_split
//           (even/odd halves), one call on the half, MPI_Comm_free: the
//           runner checks from MLXA2A_COLL_STATS that QPs were created once
//           (reused by every later half) and that only world's MRs are live
//           at finalize, whatever N (tests/mpi/meson.build; 10,000 by hand,
//           bench/results/multi-node.md).
// Prints the lines run_mpi_test.py reads: CALLS <rank> <n>, RESULT PASS|FAIL.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int g_calls = 0;
int g_world_rank = 0;

unsigned char byte(int src, int dst, int k, int salt) {
  return static_cast<unsigned char>(src * 31 + dst * 7 + k + salt * 13 + 1);
}

// One call of `bytes` per peer; returns the MPI error code and counts wrong bytes.
int call(MPI_Comm comm, int bytes, int salt, int* wrong) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<unsigned char> send(static_cast<std::size_t>(bytes) * size), recv(send.size(), 0);
  for (int p = 0; p < size; ++p) {
    for (int k = 0; k < bytes; ++k) send[static_cast<std::size_t>(p) * bytes + k] = byte(rank, p, k, salt);
  }
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

int counts() {
  int wrong = 0, failed = 0;
  MPI_Comm dup = MPI_COMM_NULL, half = MPI_COMM_NULL;
  for (int i = 0; i < 10; ++i) failed |= call(MPI_COMM_WORLD, 8, i, &wrong) != MPI_SUCCESS;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  for (int i = 0; i < 10; ++i) failed |= call(dup, 8, 20 + i, &wrong) != MPI_SUCCESS;
  MPI_Comm_split(MPI_COMM_WORLD, g_world_rank % 2, g_world_rank, &half);
  for (int i = 0; i < 10; ++i) failed |= call(half, 8, 40 + i, &wrong) != MPI_SUCCESS;
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  return failed || wrong;
}

int fault() {
  const char* expect = std::getenv("A2A_EXPECT_ERROR");
  // "last": the fault hits the last call; only a clean finalize is asked.
  const bool last = expect && std::strcmp(expect, "last") == 0;
  const bool want_error = last || (expect && std::strcmp(expect, "1") == 0);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  constexpr int kCalls = 8;
  int errors = 0, other = 0, first_error = -1, last_error = -1, wrong_after = 0;
  for (int i = 0; i < kCalls; ++i) {
    int wrong = 0;  // counted only for calls that succeed
    const int rc = call(MPI_COMM_WORLD, 16, i, &wrong);
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

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  const bool is_fault = argc > 1 && std::strcmp(argv[1], "fault") == 0;
  const bool is_leak = argc > 2 && std::strcmp(argv[1], "leak") == 0;
  const int failed = is_fault ? fault() : is_leak ? leak(std::atoi(argv[2])) : counts();
  std::printf("CALLS %d %d\n", g_world_rank, g_calls);
  std::fflush(stdout);
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (g_world_rank == 0) std::printf("RESULT %s\n", any ? "FAIL" : "PASS");
  MPI_Finalize();
  return 0;
}
