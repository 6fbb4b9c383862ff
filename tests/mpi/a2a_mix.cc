// a2a_mix: staged and zero-copy calls mixed on one communicator (issue 24).
// For MPI_COMM_WORLD, a duplicate and the even/odd halves, every size of
// --sizes is called at every buffer offset of --offsets from one page-aligned
// arena per communicator (reused, as an application reuses its buffers: the
// registration cache then sees the same pages at other offsets), in the
// order of --order:
//   sizes    for each offset, the sizes in turn (small and large alternate,
//            so staged and zero-copy calls alternate under a threshold);
//   offsets  for each size, the offsets in turn;
//   repeat   each (size, offset) several times in a row (the order a
//            tuning run tries its candidates in, one per call).
// Guard bytes before and after both buffers must stay untouched and the send
// buffer unchanged; every received byte must be the sender's.
// Prints CALLS <rank> <n> and RESULT PASS|FAIL (tests/mpi/run_mpi_test.py);
// each wrong call is described on stderr (A2A_MIX_VERBOSE=1: each arena too).
#include <mpi.h>
#include <sys/mman.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr std::size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xA5;
int g_calls = 0;
int g_world_rank = 0;

std::vector<std::size_t> parse_list(const char* s) {
  std::vector<std::size_t> out;
  for (const char* p = s; *p != '\0';) {
    char* end = nullptr;
    out.push_back(std::strtoull(p, &end, 10));
    if (end == p) {
      std::fprintf(stderr, "a2a_mix: bad list %s\n", s);
      std::exit(2);
    }
    p = *end == ',' ? end + 1 : end;
  }
  return out;
}

unsigned char byte(int src, int dst, std::size_t k, int call) {
  return static_cast<unsigned char>(src * 131 + dst * 29 + k * 7 + (k >> 8) + call * 17 + 1);
}

// One page-aligned arena with room for the largest call at the largest
// offset and guards on both sides, mapped where the previous arena of its kind
// was (a hint): every communicator's calls then reuse the same addresses with
// new pages, as an application freeing and reallocating its buffers does, and
// a registration cache that missed the unmap hands out the old pages.
struct Arena {
  unsigned char* base = nullptr;
  std::size_t bytes = 0;
  Arena(std::size_t n, void** hint) : bytes((n + 4095) & ~std::size_t{4095}) {
    void* p = mmap(*hint, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    base = static_cast<unsigned char*>(p);
    *hint = p;
  }
  ~Arena() { munmap(base, bytes); }
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
};

bool guards_ok(const unsigned char* p, std::size_t n) {
  for (std::size_t i = 0; i < kGuard; ++i) {
    if (p[-1 - static_cast<long>(i)] != kGuardByte || p[n + i] != kGuardByte) return false;
  }
  return true;
}

void set_guards(unsigned char* p, std::size_t n) {
  std::memset(p - kGuard, kGuardByte, kGuard);
  std::memset(p + n, kGuardByte, kGuard);
}

// Returns the number of wrong calls (0 or 1) and reports one.
int call(MPI_Comm comm, const char* name, Arena& sa, Arena& ra, std::size_t bytes,
         std::size_t offset) {
  int rank = 0, size = 0;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const std::size_t n = bytes * static_cast<std::size_t>(size);
  unsigned char* send = sa.base + kGuard + offset;
  unsigned char* recv = ra.base + kGuard + offset;
  const int id = g_calls++;
  set_guards(send, n);
  set_guards(recv, n);
  for (int p = 0; p < size; ++p) {
    for (std::size_t k = 0; k < bytes; ++k) send[p * bytes + k] = byte(rank, p, k, id);
  }
  std::memset(recv, 0, n);
  const int rc = MPI_Alltoall(send, static_cast<int>(bytes), MPI_BYTE, recv,
                              static_cast<int>(bytes), MPI_BYTE, comm);
  std::size_t wrong = 0, first = n;
  for (int p = 0; p < size; ++p) {
    for (std::size_t k = 0; k < bytes; ++k) {
      if (recv[p * bytes + k] != byte(p, rank, k, id)) {
        if (wrong++ == 0) first = p * bytes + k;
      }
    }
  }
  bool send_ok = true;
  for (int p = 0; p < size && send_ok; ++p) {
    for (std::size_t k = 0; k < bytes; ++k) {
      if (send[p * bytes + k] != byte(rank, p, k, id)) {
        send_ok = false;
        break;
      }
    }
  }
  const bool guards = guards_ok(send, n) && guards_ok(recv, n);
  if (rc == MPI_SUCCESS && wrong == 0 && send_ok && guards) return 0;
  std::fprintf(stderr,
               "a2a_mix: rank %d %s call %d bytes %zu offset %zu: rc %d, %zu wrong bytes "
               "(first at %zu: block %zu byte %zu)%s%s\n",
               g_world_rank, name, id, bytes, offset, rc, wrong, first,
               bytes ? first / bytes : 0, bytes ? first % bytes : 0,
               send_ok ? "" : ", send buffer changed", guards ? "" : ", guard bytes overwritten");
  return 1;
}

int battery(MPI_Comm comm, const char* name, const std::vector<std::size_t>& sizes,
            const std::vector<std::size_t>& offsets, const std::string& order, int repeat) {
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::size_t max_size = 0, max_off = 0;
  for (std::size_t s : sizes) max_size = s > max_size ? s : max_size;
  for (std::size_t o : offsets) max_off = o > max_off ? o : max_off;
  const std::size_t need = max_size * static_cast<std::size_t>(size) + max_off + 2 * kGuard;
  static void* send_hint = nullptr;
  static void* recv_hint = nullptr;
  Arena sa(need, &send_hint), ra(need, &recv_hint);
  if (std::getenv("A2A_MIX_VERBOSE")) {
    std::fprintf(stderr, "a2a_mix: rank %d %s arenas send %p recv %p (%zu bytes)\n", g_world_rank,
                 name, static_cast<void*>(sa.base), static_cast<void*>(ra.base), need);
  }
  int bad = 0;
  if (order == "offsets") {
    for (std::size_t s : sizes)
      for (std::size_t o : offsets) bad += call(comm, name, sa, ra, s, o);
  } else if (order == "repeat") {
    for (std::size_t o : offsets)
      for (std::size_t s : sizes)
        for (int r = 0; r < repeat; ++r) bad += call(comm, name, sa, ra, s, o);
  } else {
    for (std::size_t o : offsets)
      for (std::size_t s : sizes) bad += call(comm, name, sa, ra, s, o);
  }
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::size_t> sizes = {1, 4095, 4096, 4097, 65536, 262144};
  std::vector<std::size_t> offsets = {0, 5, 10};
  std::string order = "sizes";
  int repeat = 4;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--sizes") && i + 1 < argc) sizes = parse_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--offsets") && i + 1 < argc) offsets = parse_list(argv[++i]);
    else if (!std::strcmp(argv[i], "--order") && i + 1 < argc) order = argv[++i];
    else if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "a2a_mix: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int bad = battery(MPI_COMM_WORLD, "world", sizes, offsets, order, repeat);
  MPI_Comm dup, half;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  bad += battery(dup, "dup", sizes, offsets, order, repeat);
  MPI_Comm_split(MPI_COMM_WORLD, g_world_rank % 2, g_world_rank, &half);
  bad += battery(half, "half", sizes, offsets, order, repeat);
  bad += battery(MPI_COMM_WORLD, "world-again", sizes, offsets, order, repeat);
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  int all_bad = 0;
  MPI_Allreduce(&bad, &all_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::printf("CALLS %d %d\n", g_world_rank, g_calls);
  if (g_world_rank == 0) std::printf("RESULT %s\n", all_bad == 0 ? "PASS" : "FAIL");
  MPI_Finalize();
  return 0;
}
