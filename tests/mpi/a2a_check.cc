// a2a_check: calls MPI_Alltoall the ways applications do and checks every result
// against the value each peer sent, computed from a formula (no collective is
// trusted for the reference). Run under mpirun with or without mlxa2a; prints
//   CALLS <rank> <n>       MPI_Alltoall calls this rank made (for trace checks)
//   ERRCLASS <case> <cls>  error classes for invalid arguments (rank 0)
//   RESULT PASS|FAIL       (rank 0, after an allreduce of failures)
// Usage: a2a_check [--init-thread] [--quick] [--repeat N] [--sizes B,B,...]
//   --repeat N  runs the MPI_COMM_WORLD battery N times (default 1), so that
//               measured selection (MLXA2A_TUNE_SAMPLES) reaches decisions
//               on it; every repetition checks its results as the first.
//   --sizes     the bytes per peer of every battery's contiguous calls,
//               instead of the quick or full list
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

int g_calls = 0;
int g_failures = 0;
int g_world_rank = 0;
std::vector<std::size_t> g_sizes;  // --sizes

#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      if (g_failures++ < 10) {                                   \
        std::fprintf(stderr, "rank %d: FAIL %s:%d: ", g_world_rank, __FILE__, __LINE__); \
        std::fprintf(stderr, __VA_ARGS__);                       \
        std::fputc('\n', stderr);                                \
      }                                                          \
    }                                                            \
  } while (0)

int a2a(const void* s, int sc, MPI_Datatype st, void* r, int rc, MPI_Datatype rt, MPI_Comm c) {
  ++g_calls;
  return MPI_Alltoall(s, sc, st, r, rc, rt, c);
}

// The byte rank `src` sends to rank `dst` at offset i of the block, call `iter`.
unsigned char pattern(int src, int dst, std::size_t i, int iter) {
  return static_cast<unsigned char>(src * 131 + dst * 31 + i * 7 + iter * 13 + 1);
}

struct Comm {
  MPI_Comm comm;
  int rank, size;
  explicit Comm(MPI_Comm c) : comm(c) {
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
  }
};

// Contiguous bytes, any size; optionally in place; fresh buffers each call.
void bytes_case(const Comm& c, std::size_t n, bool in_place, int iter, const char* what) {
  std::vector<unsigned char> send(n * c.size), recv(n * c.size + 64, 0xEE);
  for (int p = 0; p < c.size; ++p) {
    for (std::size_t i = 0; i < n; ++i) send[p * n + i] = pattern(c.rank, p, i, iter);
  }
  if (in_place) std::memcpy(recv.data(), send.data(), send.size());
  const int rc = a2a(in_place ? MPI_IN_PLACE : send.data(), static_cast<int>(n), MPI_BYTE,
                     recv.data(), static_cast<int>(n), MPI_BYTE, c.comm);
  CHECK(rc == MPI_SUCCESS, "%s: rc=%d", what, rc);
  for (int p = 0; p < c.size; ++p) {
    for (std::size_t i = 0; i < n; ++i) {
      const unsigned char want = pattern(p, c.rank, i, iter);
      CHECK(recv[p * n + i] == want, "%s n=%zu from %d byte %zu: got %d want %d", what, n, p, i,
            recv[p * n + i], want);
      if (recv[p * n + i] != want) return;
    }
  }
  for (std::size_t i = n * c.size; i < recv.size(); ++i) {
    CHECK(recv[i] == 0xEE, "%s n=%zu: write past the receive buffer at %zu", what, n, i);
  }
}

// MPI_Alltoall_c (MPI 4 large counts), where the MPI provides it.
void large_count_case(const Comm& c, int iter) {
#if MPI_VERSION >= 4
  const MPI_Count n = 6;
  std::vector<unsigned char> send(n * c.size), recv(n * c.size, 0xEE);
  for (int p = 0; p < c.size; ++p) {
    for (MPI_Count i = 0; i < n; ++i) send[p * n + i] = pattern(c.rank, p, i, iter);
  }
  ++g_calls;
  CHECK(MPI_Alltoall_c(send.data(), n, MPI_BYTE, recv.data(), n, MPI_BYTE, c.comm) == MPI_SUCCESS,
        "MPI_Alltoall_c rc");
  for (int p = 0; p < c.size; ++p) {
    for (MPI_Count i = 0; i < n; ++i) {
      CHECK(recv[p * n + i] == pattern(p, c.rank, i, iter), "MPI_Alltoall_c from %d byte %lld", p,
            static_cast<long long>(i));
    }
  }
#else
  (void)c;
  (void)iter;
#endif
}

void typed_case(const Comm& c, int count, int iter) {
  std::vector<double> send(count * c.size), recv(count * c.size, -1.0);
  for (int p = 0; p < c.size; ++p) {
    for (int i = 0; i < count; ++i) send[p * count + i] = c.rank * 1e6 + p * 1e3 + i + iter;
  }
  CHECK(a2a(send.data(), count, MPI_DOUBLE, recv.data(), count, MPI_DOUBLE, c.comm) ==
            MPI_SUCCESS, "double rc");
  for (int p = 0; p < c.size; ++p) {
    for (int i = 0; i < count; ++i) {
      CHECK(recv[p * count + i] == p * 1e6 + c.rank * 1e3 + i + iter, "double from %d [%d]", p, i);
    }
  }
}

// Predefined types other than the common C scalars, each called three times
// in a row (the repeat path records named types that tile from offset 0, not
// padded pairs such as MPI_DOUBLE_INT): fresh values every call.
struct DoubleInt {
  double d;
  int i;
};

template <class T, class Make, class Same>
void named_case(const Comm& c, MPI_Datatype type, int count, int iter, const char* what,
                Make make, Same same) {
  for (int call = 0; call < 3; ++call) {
    const int tag = iter * 3 + call;
    std::vector<T> send(count * c.size), recv(count * c.size);
    for (int p = 0; p < c.size; ++p)
      for (int i = 0; i < count; ++i) send[p * count + i] = make(c.rank, p, i, tag);
    CHECK(a2a(send.data(), count, type, recv.data(), count, type, c.comm) == MPI_SUCCESS,
          "%s rc", what);
    for (int p = 0; p < c.size; ++p)
      for (int i = 0; i < count; ++i)
        CHECK(same(recv[p * count + i], make(p, c.rank, i, tag)), "%s call %d from %d [%d]",
              what, call, p, i);
  }
}

void named_types_case(const Comm& c, int iter) {
  auto value = [](int src, int dst, int i, int tag) { return src * 1000 + dst * 37 + i * 3 + tag; };
  named_case<short>(
      c, MPI_SHORT, 5, iter, "MPI_SHORT",
      [&](int s, int d, int i, int t) { return static_cast<short>(value(s, d, i, t)); },
      [](short a, short b) { return a == b; });
  struct TwoInt {
    int a, b;
  };
  named_case<TwoInt>(
      c, MPI_2INT, 3, iter, "MPI_2INT",
      [&](int s, int d, int i, int t) { return TwoInt{value(s, d, i, t), -value(s, d, i, t)}; },
      [](const TwoInt& x, const TwoInt& y) { return x.a == y.a && x.b == y.b; });
  named_case<DoubleInt>(
      c, MPI_DOUBLE_INT, 3, iter, "MPI_DOUBLE_INT",
      [&](int s, int d, int i, int t) { return DoubleInt{value(s, d, i, t) + 0.5, value(s, d, i, t)}; },
      [](const DoubleInt& x, const DoubleInt& y) { return x.d == y.d && x.i == y.i; });
  named_case<int>(
      c, MPI_INTEGER, 4, iter, "MPI_INTEGER", [&](int s, int d, int i, int t) { return value(s, d, i, t); },
      [](int a, int b) { return a == b; });
}

// Non-contiguous send type (every other int) received as contiguous ints, and
// the reverse: type signatures match, layouts do not.
void vector_case(const Comm& c, int blocks, int iter) {
  MPI_Datatype strided;
  MPI_Type_vector(blocks, 1, 2, MPI_INT, &strided);
  MPI_Type_commit(&strided);
  MPI_Aint lb, extent;
  MPI_Type_get_extent(strided, &lb, &extent);
  const std::size_t ints_per_elem = static_cast<std::size_t>(extent) / sizeof(int);
  std::vector<int> sparse(ints_per_elem * c.size + 1, -7), dense(blocks * c.size, -1);
  for (int p = 0; p < c.size; ++p) {
    for (int b = 0; b < blocks; ++b) sparse[p * ints_per_elem + 2 * b] = c.rank * 10000 + p * 100 + b + iter;
  }
  CHECK(a2a(sparse.data(), 1, strided, dense.data(), blocks, MPI_INT, c.comm) == MPI_SUCCESS,
        "vector rc");
  for (int p = 0; p < c.size; ++p) {
    for (int b = 0; b < blocks; ++b) {
      CHECK(dense[p * blocks + b] == p * 10000 + c.rank * 100 + b + iter, "vector->dense %d %d", p, b);
    }
  }
  // Reverse: dense out, strided in; the gaps must stay untouched.
  std::vector<int> back(ints_per_elem * c.size + 1, -7);
  for (int p = 0; p < c.size; ++p) {
    for (int b = 0; b < blocks; ++b) dense[p * blocks + b] = c.rank * 10000 + p * 100 + b + iter;
  }
  CHECK(a2a(dense.data(), blocks, MPI_INT, back.data(), 1, strided, c.comm) == MPI_SUCCESS,
        "dense->vector rc");
  for (int p = 0; p < c.size; ++p) {
    for (int b = 0; b < blocks; ++b) {
      CHECK(back[p * ints_per_elem + 2 * b] == p * 10000 + c.rank * 100 + b + iter,
            "dense->vector %d %d", p, b);
      if (b + 1 < blocks) CHECK(back[p * ints_per_elem + 2 * b + 1] == -7, "gap written");
    }
  }
  MPI_Type_free(&strided);
}

// In place with a derived type whose extent has a gap (resized).
void in_place_resized_case(const Comm& c, int iter) {
  MPI_Datatype padded;
  MPI_Type_create_resized(MPI_INT, 0, 2 * sizeof(int), &padded);
  MPI_Type_commit(&padded);
  std::vector<int> buf(2 * c.size * 3);
  for (int p = 0; p < c.size; ++p) {
    for (int k = 0; k < 3; ++k) {
      buf[2 * (p * 3 + k)] = c.rank * 1000 + p * 10 + k + iter;
      buf[2 * (p * 3 + k) + 1] = -5;
    }
  }
  CHECK(a2a(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf.data(), 3, padded, c.comm) == MPI_SUCCESS,
        "in-place resized rc");
  for (int p = 0; p < c.size; ++p) {
    for (int k = 0; k < 3; ++k) {
      CHECK(buf[2 * (p * 3 + k)] == p * 1000 + c.rank * 10 + k + iter, "in-place resized %d %d", p, k);
      CHECK(buf[2 * (p * 3 + k) + 1] == -5, "in-place resized gap written");
    }
  }
  MPI_Type_free(&padded);
}

void battery(const Comm& c, bool quick, int iter) {
  const std::size_t sizes_full[] = {0, 1, 3, 8, 17, 64, 100, 1024, 4096, 65536, 262144, 1048576};
  const std::size_t sizes_quick[] = {0, 1, 3, 64, 4096};
  if (!g_sizes.empty()) {
    for (std::size_t n : g_sizes) bytes_case(c, n, false, iter, "bytes");
  } else if (quick) {
    for (std::size_t n : sizes_quick) bytes_case(c, n, false, iter, "bytes");
  } else {
    for (std::size_t n : sizes_full) bytes_case(c, n, false, iter, "bytes");
  }
  bytes_case(c, 5, true, iter, "bytes in place");
  bytes_case(c, 4096, true, iter, "bytes in place");
  typed_case(c, 7, iter);
  named_types_case(c, iter);
  large_count_case(c, iter);
  vector_case(c, 5, iter);
  in_place_resized_case(c, iter);
}

// A correct program that needs MPI progress inside MPI_Alltoall: rank 0 has a
// large (rendezvous) send pending while it enters the alltoall, and rank 1
// receives it before entering. An engine that waits for rank 1 without
// driving MPI's progress engine deadlocks here.
void progress_case(const Comm& c) {
  if (c.size < 2) return;
  const std::size_t n = 4 << 20;
  std::vector<char> big(n, static_cast<char>(c.rank + 1));
  MPI_Request req = MPI_REQUEST_NULL;
  if (c.rank == 0) MPI_Isend(big.data(), static_cast<int>(n), MPI_BYTE, 1, 77, c.comm, &req);
  if (c.rank == 1) {
    MPI_Recv(big.data(), static_cast<int>(n), MPI_BYTE, 0, 77, c.comm, MPI_STATUS_IGNORE);
    CHECK(big[0] == 1 && big[n - 1] == 1, "progress: payload");
  }
  bytes_case(c, 8, false, 5, "progress");
  MPI_Wait(&req, MPI_STATUS_IGNORE);
}

void error_cases(const Comm& c) {
  int buf[64] = {};
  auto report = [&](const char* what, int rc) {
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
    if (c.rank == 0) std::printf("ERRCLASS %s %d\n", what, cls);
  };
  report("comm_null", a2a(buf, 1, MPI_INT, buf + 32, 1, MPI_INT, MPI_COMM_NULL));
  report("negative_count", a2a(buf, -1, MPI_INT, buf + 32, -1, MPI_INT, c.comm));
  report("null_datatype", a2a(buf, 1, MPI_DATATYPE_NULL, buf + 32, 1, MPI_DATATYPE_NULL, c.comm));
}

// Teams of split communicators are derived at their first alltoall from an
// ancestor's group and node map: a child of a communicator that never ran
// an alltoall (still pending itself), children whose parent is freed before
// their first alltoall (one of a duplicate, whose team Team::create built),
// and a grandchild freed unused. (MPI_COMM_WORLD's state, which holds the
// origin of every split of it, is deleted inside MPI_Finalize, after the
// origins' groups were freed: every run checks that path.)
void lazy_derivation_case(const Comm& world) {
  MPI_Comm pending, grandchild;
  MPI_Comm_split(MPI_COMM_WORLD, world.rank % 2, -world.rank, &pending);
  MPI_Comm_split(pending, 0, world.rank, &grandchild);
  MPI_Comm_free(&pending);
  battery(Comm(grandchild), true, 6);
  MPI_Comm_free(&grandchild);

  MPI_Comm dup, child, unused;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  bytes_case(Comm(dup), 4, false, 7, "dup");
  MPI_Comm_split(dup, world.rank % 3 == 0, world.rank, &child);
  MPI_Comm_free(&dup);
  bytes_case(Comm(child), 9, false, 8, "child of a freed duplicate");
  MPI_Comm_split(child, 0, world.size - world.rank, &unused);
  MPI_Comm_free(&child);
  MPI_Comm_free(&unused);
}

}  // namespace

int main(int argc, char** argv) {
  bool init_thread = false, quick = false;
  int repeat = 1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--init-thread")) init_thread = true;
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = std::atoi(argv[++i]);
    if (!std::strcmp(argv[i], "--sizes") && i + 1 < argc) {
      for (const char* p = argv[++i]; *p != '\0';) {
        char* end = nullptr;
        g_sizes.push_back(std::strtoull(p, &end, 10));
        if (end == p || (*end != ',' && *end != '\0')) {
          std::fprintf(stderr, "a2a_check: bad --sizes %s\n", argv[i]);
          return 2;
        }
        p = *end == ',' ? end + 1 : end;
      }
    }
  }
  if (init_thread) {
    int provided = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  } else {
    MPI_Init(&argc, &argv);
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const Comm world(MPI_COMM_WORLD);
  g_world_rank = world.rank;

  // iter 0 first, then 5, 6, ...: the sub-communicators below use 1-4.
  for (int r = 0; r < repeat; ++r) battery(world, quick, r == 0 ? 0 : 4 + r);

  // Sub-communicators: odd/even, reversed keys, and MPI_UNDEFINED for rank 0.
  MPI_Comm halves, reversed, without0;
  MPI_Comm_split(MPI_COMM_WORLD, world.rank % 2, world.rank, &halves);
  MPI_Comm_split(MPI_COMM_WORLD, 0, world.size - world.rank, &reversed);
  MPI_Comm_split(MPI_COMM_WORLD, world.rank == 0 ? MPI_UNDEFINED : 1, 0, &without0);
  CHECK((world.rank == 0) == (without0 == MPI_COMM_NULL), "MPI_UNDEFINED colour");
  battery(Comm(halves), true, 1);
  battery(Comm(reversed), true, 2);
  if (without0 != MPI_COMM_NULL) battery(Comm(without0), true, 3);

  // Neighbouring pairs: with virtual nodes (MLXA2A_DEBUG_NODE_SIZE) most of
  // them sit inside one node while the world spans several.
  MPI_Comm pairs;
  MPI_Comm_split(MPI_COMM_WORLD, world.rank / 2, world.rank, &pairs);
  battery(Comm(pairs), true, 4);
  MPI_Comm_free(&pairs);

  // Many communicators alive at once, interleaved with other collectives.
  std::vector<MPI_Comm> alive;
  for (int k = 0; k < 6; ++k) {
    MPI_Comm sub;
    MPI_Comm_split(k % 2 ? halves : MPI_COMM_WORLD, k, (world.rank * 7 + k) % world.size, &sub);
    alive.push_back(sub);
  }
  for (int round = 0; round < 3; ++round) {
    for (MPI_Comm sub : alive) {
      bytes_case(Comm(sub), 16 + round, false, round, "many alive");
      int one = 1, sum = 0;
      MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, sub);
      CHECK(sum == Comm(sub).size, "allreduce between alltoalls");
    }
  }
  for (MPI_Comm& sub : alive) MPI_Comm_free(&sub);

  // Split/free churn: handles are reused by MPI; state must not leak across.
  for (int k = 0; k < (quick ? 10 : 40); ++k) {
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, (world.rank + k) % 3, k, &sub);
    bytes_case(Comm(sub), 1 + k % 5, k % 2 == 0, k, "churn");
    MPI_Comm_free(&sub);
  }

  // Repeated signatures take the dispatcher's repeat path (CommState::Repeat).
  // Freed handles come back for communicators of other sizes and teams, so a
  // stale record would run the wrong team; in-place and other counts on the
  // same communicator must not match it.
  for (int k = 0; k < (quick ? 6 : 20); ++k) {
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, k % 2 ? (world.rank + k) % 2 : 0, world.rank, &sub);
    const Comm c(sub);
    bytes_case(c, 8, false, 3 * k, "repeat");
    bytes_case(c, 8, false, 3 * k + 1, "repeat (second call)");
    bytes_case(c, 8, true, 3 * k + 2, "repeat, in place");
    bytes_case(c, 9, false, 3 * k, "repeat, other count");
    bytes_case(c, 8, false, 3 * k + 1, "repeat (after other count)");
    MPI_Comm_free(&sub);
  }

  // Row and column communicators of a 2-D Cartesian grid (MPI_Cart_sub, as
  // pencil FFT codes build them): the MPI splits internally, not through our
  // MPI_Comm_split, so their teams are built at their first alltoall.
  {
    int dims[2] = {0, 0}, periods[2] = {0, 0};
    MPI_Dims_create(world.size, 2, dims);
    MPI_Comm grid, rows, cols;
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &grid);
    int keep_row[2] = {0, 1}, keep_col[2] = {1, 0};
    MPI_Cart_sub(grid, keep_row, &rows);
    MPI_Cart_sub(grid, keep_col, &cols);
    for (int k = 0; k < 3; ++k) {
      bytes_case(Comm(rows), 16, false, k, "cart rows");
      bytes_case(Comm(cols), 16, false, k, "cart cols");
      typed_case(Comm(grid), 3, k);
    }
    MPI_Comm_free(&rows);
    MPI_Comm_free(&cols);
    MPI_Comm_free(&grid);
  }

  lazy_derivation_case(world);
  progress_case(world);
  error_cases(world);

  MPI_Comm_free(&halves);
  MPI_Comm_free(&reversed);
  if (without0 != MPI_COMM_NULL) MPI_Comm_free(&without0);

  int failures = 0;
  MPI_Allreduce(&g_failures, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  std::printf("CALLS %d %d\n", world.rank, g_calls);
  std::fflush(stdout);
  MPI_Barrier(MPI_COMM_WORLD);
  if (world.rank == 0) std::printf("RESULT %s\n", failures ? "FAIL" : "PASS");
  // Out before MPI_Finalize: a launcher may have to end a job that hangs in
  // there (scripts/cluster, MPICH over UCX tcp).
  std::fflush(stdout);
  MPI_Finalize();
  return failures ? 1 : 0;
}
