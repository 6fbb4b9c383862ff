/* peer_compare: MPI_Alltoall (mlxa2a's when the shim is preloaded, else the
 * MPI's own) against MPI Advance's node-aware alltoalls (github.com/
 * mpi-advance/locality_aware), side by side in one run.
 *
 * Why one process: on a shared, loaded machine two separate runs see
 * different loads; here every size alternates the algorithms round by round
 * (each round starts with another one), and the table gives each one's
 * median over the rounds.
 *
 * MPI Advance is never linked or built with mlxa2a: it is dlopen()ed from
 * the library named by --mpiadv PATH or $MLXA2A_BENCH_MPIADV (a
 * liblocality_aware.so built for the same MPI family). Without one, only
 * MPI_Alltoall is timed. Its algorithms are looked up by their C names and
 * called with the MPI_Alltoall arguments plus an MPIL_Comm made once by
 * MPIL_Comm_init (its node split is made at the first call of each, outside
 * the timing: every size runs warm-up calls first). They exchange by
 * point-to-point (and MPI_Gather/Scatter), which mlxa2a does not intercept,
 * so preloading the shim leaves them as they are.
 *
 * Usage: peer_compare [-m MIN:MAX] [-i ITERS] [-x WARMUP] [-r ROUNDS]
 *                     [--mpiadv LIB] [-a NAME,...]
 * Output (rank 0): "# peer_compare ..." header lines, then per size
 * "SIZE  t_1 t_2 ..." in microseconds per call (the mean over ranks of
 * each rank's average, as osu_alltoall), medians over rounds, and the
 * column "mpiadv_best" (the smallest MPI Advance median at that size).
 * Every algorithm's result is checked at every size; a wrong byte aborts. */
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*mpil_a2a_fn)(const void*, int, MPI_Datatype, void*, int, MPI_Datatype, void*);
typedef int (*mpil_comm_init_fn)(void**, MPI_Comm);
typedef int (*mpil_comm_free_fn)(void**);

enum { kMaxAlgos = 8, kMaxRounds = 64 };

/* MPI Advance's node-aware alltoalls (library/include/collective/alltoall.h). */
static const char* const kMpiadvNames[] = {
    "alltoall_node_aware_pairwise",   "alltoall_node_aware_nonblocking",
    "alltoall_hierarchical_pairwise", "alltoall_hierarchical_nonblocking",
    "alltoall_locality_aware_nonblocking"};

struct algo {
  const char* name;  /* column title */
  mpil_a2a_fn fn;    /* NULL: MPI_Alltoall */
  double t[kMaxRounds];
};

struct opts {
  size_t min, max;
  int iters, warmup, rounds;
  const char* lib;
  const char* only; /* comma list of column names, or NULL */
};

static int rank_, size_;

static void die(const char* what) {
  if (rank_ == 0) fprintf(stderr, "peer_compare: %s\n", what);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

static void parse(int argc, char** argv, struct opts* o) {
  o->min = 1;
  o->max = 65536;
  o->iters = 200;
  o->warmup = 20;
  o->rounds = 5;
  o->lib = getenv("MLXA2A_BENCH_MPIADV");
  o->only = NULL;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) die("every option takes a value");
    ++i;
    if (!strcmp(a, "-m")) {
      if (sscanf(v, "%zu:%zu", &o->min, &o->max) != 2 || o->min == 0 || o->min > o->max)
        die("-m MIN:MAX, 1 <= MIN <= MAX");
    } else if (!strcmp(a, "-i")) {
      o->iters = atoi(v);
    } else if (!strcmp(a, "-x")) {
      o->warmup = atoi(v);
    } else if (!strcmp(a, "-r")) {
      o->rounds = atoi(v);
    } else if (!strcmp(a, "--mpiadv")) {
      o->lib = v;
    } else if (!strcmp(a, "-a")) {
      o->only = v;
    } else {
      die("unknown option (see the comment at the top of bench/peer_compare.c)");
    }
  }
  if (o->iters < 1 || o->warmup < 1 || o->rounds < 1 || o->rounds > kMaxRounds)
    die("-i and -x at least 1, -r from 1 to 64");
}

static int wanted(const struct opts* o, const char* name) {
  if (!o->only) return 1;
  const size_t n = strlen(name);
  for (const char* p = o->only; (p = strstr(p, name)) != NULL; p += n) {
    if ((p == o->only || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
  }
  return 0;
}

static int call(const struct algo* a, const char* s, char* r, int n, void* xcomm) {
  if (!a->fn) return MPI_Alltoall(s, n, MPI_BYTE, r, n, MPI_BYTE, MPI_COMM_WORLD);
  return a->fn(s, n, MPI_BYTE, r, n, MPI_BYTE, xcomm);
}

static unsigned char pattern(int src, int dst, size_t k) {
  return (unsigned char)(src * 131 + dst * 17 + (int)(k % 251) + 1);
}

static void fill(char* s, size_t n) {
  for (int d = 0; d < size_; ++d)
    for (size_t k = 0; k < n; ++k) s[(size_t)d * n + k] = (char)pattern(rank_, d, k);
}

static void verify(const struct algo* a, const char* r, size_t n) {
  for (int src = 0; src < size_; ++src)
    for (size_t k = 0; k < n; ++k)
      if ((unsigned char)r[(size_t)src * n + k] != pattern(src, rank_, k)) {
        fprintf(stderr, "peer_compare: rank %d: %s wrong byte from %d at size %zu\n", rank_,
                a->name, src, n);
        MPI_Abort(MPI_COMM_WORLD, 3);
      }
}

/* One timed block of one algorithm: mean over ranks of the per-call average. */
static double timed(const struct algo* a, const char* s, char* r, int n, int iters, void* x) {
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  for (int i = 0; i < iters; ++i)
    if (call(a, s, r, n, x) != MPI_SUCCESS) die("an alltoall failed");
  double mine = (MPI_Wtime() - t0) / iters, sum = 0;
  MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return sum / size_;
}

static int cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(const double* t, int n) {
  double v[kMaxRounds];
  memcpy(v, t, (size_t)n * sizeof *v);
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Times every algorithm at size n for o->rounds rounds, round k starting
 * with algorithm k mod count; prints the medians. */
static void run_size(struct algo* al, int na, int first_mpiadv, size_t n, const struct opts* o,
                     void* x) {
  char* s = malloc(n * (size_t)size_);
  char* r = malloc(n * (size_t)size_);
  if (!s || !r) die("out of memory");
  fill(s, n);
  for (int a = 0; a < na; ++a) {
    memset(r, 0, n * (size_t)size_);
    for (int i = 0; i < o->warmup; ++i)
      if (call(&al[a], s, r, (int)n, x) != MPI_SUCCESS) die("an alltoall failed");
    verify(&al[a], r, n);
  }
  for (int k = 0; k < o->rounds; ++k)
    for (int j = 0; j < na; ++j) {
      struct algo* a = &al[(k + j) % na];
      a->t[k] = timed(a, s, r, (int)n, o->iters, x);
    }
  if (rank_ == 0) {
    double best = 0;
    printf("%-8zu", n);
    for (int a = 0; a < na; ++a) {
      const double m = median(al[a].t, o->rounds) * 1e6;
      if (a >= first_mpiadv && (best == 0 || m < best)) best = m;
      printf(" %20.2f", m);
    }
    if (first_mpiadv < na) printf(" %20.2f", best);
    printf("\n");
    fflush(stdout);
  }
  free(s);
  free(r);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  struct opts o;
  parse(argc, argv, &o);
  if (o.max > (size_t)2147483647) die("sizes must fit an int");

  struct algo al[kMaxAlgos];
  int na = 0;
  if (wanted(&o, "mpi")) al[na++] = (struct algo){.name = "mpi", .fn = NULL};
  const int first_mpiadv = na;
  void* lib = NULL;
  void* xcomm = NULL;
  mpil_comm_free_fn comm_free = NULL;
  if (o.lib && *o.lib) {
    lib = dlopen(o.lib, RTLD_NOW | RTLD_GLOBAL);
    if (!lib) die(dlerror());
    mpil_comm_init_fn init = (mpil_comm_init_fn)dlsym(lib, "MPIL_Comm_init");
    comm_free = (mpil_comm_free_fn)dlsym(lib, "MPIL_Comm_free");
    if (!init || !comm_free) die("no MPIL_Comm_init/MPIL_Comm_free in the MPI Advance library");
    if (init(&xcomm, MPI_COMM_WORLD) != MPI_SUCCESS) die("MPIL_Comm_init failed");
    for (size_t i = 0; i < sizeof kMpiadvNames / sizeof *kMpiadvNames && na < kMaxAlgos; ++i) {
      const char* short_name = kMpiadvNames[i] + strlen("alltoall_");
      if (!wanted(&o, short_name)) continue;
      mpil_a2a_fn f = (mpil_a2a_fn)dlsym(lib, kMpiadvNames[i]);
      if (f) al[na++] = (struct algo){.name = short_name, .fn = f};
    }
  }
  if (na == 0) die("nothing to time");
  if (rank_ == 0) {
    printf("# peer_compare: %d ranks, %d rounds x %d calls (warm-up %d), us per call, medians\n",
           size_, o.rounds, o.iters, o.warmup);
    printf("# MPI Advance: %s\n", lib ? o.lib : "not loaded (--mpiadv LIB)");
    printf("%-8s", "# size");
    for (int a = 0; a < na; ++a) printf(" %20.20s", al[a].name);
    if (first_mpiadv < na) printf(" %20s", "mpiadv_best");
    printf("\n");
  }
  for (size_t n = o.min; n <= o.max; n *= 2) run_size(al, na, first_mpiadv, n, &o, xcomm);
  if (xcomm) comm_free(&xcomm);
  MPI_Finalize();
  /* The library stays loaded: MPI may still hold its callbacks. */
  return 0;
}
