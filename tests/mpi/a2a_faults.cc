// a2a_faults: failure transparency (docs/hier.md, "Failure transparency").
// Errors stay fatal (MPI_ERRORS_ARE_FATAL, as in most programs): every call
// must return MPI_SUCCESS with the right bytes, whatever fakeverbs injects
// (FAKEVERBS_FAULT, set by the runner) and however late a rank comes.
//   A2A_CALLS=N          calls on MPI_COMM_WORLD (24)
//   A2A_SIZES=a,b,...    bytes per peer, in turn (16,5000,40000: one round and
//                        several with a 16K staging slot and 4 ranks)
//   A2A_LATE_RANK=r      this rank sleeps A2A_LATE_MS (3000) before calls 1
//                        and 5: its partners wait for it far past any keep-alive
// Odd calls run MPI_IN_PLACE. A duplicate of MPI_COMM_WORLD runs every third
// call alongside (a team of its own on the same queue pairs).
// Prints CALLS <rank> <n> and, on rank 0, RESULT PASS|FAIL (run_mpi_test.py).
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_calls = 0;

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::vector<int> sizes() {
  std::vector<int> out;
  std::string list = std::getenv("A2A_SIZES") ? std::getenv("A2A_SIZES") : "16,5000,40000";
  for (std::size_t at = 0; at < list.size();) {
    out.push_back(std::atoi(list.c_str() + at));
    const std::size_t comma = list.find(',', at);
    at = comma == std::string::npos ? list.size() : comma + 1;
  }
  return out;
}

unsigned char byte(int src, int dst, int k, int salt) {
  return static_cast<unsigned char>(src * 31 + dst * 7 + k * 3 + salt * 13 + 1);
}

// One call; the number of wrong bytes (the MPI aborts on an error).
int call(MPI_Comm comm, int bytes, int salt, bool in_place) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::size_t n = static_cast<std::size_t>(bytes) * static_cast<std::size_t>(size);
  std::vector<unsigned char> send(n), recv(n, 0xee);
  std::vector<unsigned char>& src = in_place ? recv : send;
  for (int p = 0; p < size; ++p) {
    for (int k = 0; k < bytes; ++k) src[static_cast<std::size_t>(p) * bytes + k] = byte(rank, p, k, salt);
  }
  ++g_calls;
  const int rc = MPI_Alltoall(in_place ? MPI_IN_PLACE : send.data(), bytes, MPI_BYTE, recv.data(),
                              bytes, MPI_BYTE, comm);
  if (rc != MPI_SUCCESS) return 1 << 20;  // only under MPI_ERRORS_RETURN
  int wrong = 0;
  for (int p = 0; p < size; ++p) {
    for (int k = 0; k < bytes; ++k) {
      wrong += recv[static_cast<std::size_t>(p) * bytes + k] != byte(p, rank, k, salt);
    }
  }
  return wrong;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int calls = env_int("A2A_CALLS", 24);
  const int late_rank = env_int("A2A_LATE_RANK", -1);
  const int late_ms = env_int("A2A_LATE_MS", 3000);
  const std::vector<int> list = sizes();
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  int wrong = 0;
  for (int c = 0; c < calls; ++c) {
    if (rank == late_rank && (c == 1 || c == 5)) usleep(static_cast<useconds_t>(late_ms) * 1000u);
    const int bytes = list[static_cast<std::size_t>(c) % list.size()];
    const int w = call(MPI_COMM_WORLD, bytes, c, c % 2 == 1);
    if (w) std::fprintf(stderr, "rank %d: call %d (%d B) %d wrong bytes\n", rank, c, bytes, w);
    wrong += w;
    if (c % 3 == 2) wrong += call(dup, bytes, 100 + c, false);
  }
  MPI_Comm_free(&dup);
  std::printf("CALLS %d %d\n", rank, g_calls);
  std::fflush(stdout);
  int any = 0;
  MPI_Allreduce(&wrong, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf("RESULT %s\n", any ? "FAIL" : "PASS");
  MPI_Finalize();
  return 0;
}
