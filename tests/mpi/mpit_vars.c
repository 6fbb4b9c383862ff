/* MPI_T with and without mlxa2a (docs/mpit.md): a lister and a writer.
 * Without the shim it only checks that MPI_T works. With it (environment
 * MPIT_EXPECT_MLXA2A=1, set by the runner for the shim's run):
 *   - the MPI's own control and performance variables keep their indices
 *     and names (compared with PMPI_T_*, the MPI's own view);
 *   - mlxa2a's switches are control variables after them, with types and
 *     scopes as documented, found by MPI_T_cvar_get_index;
 *   - mlxa2a's counters are performance variables: the calls counted by path
 *     match the calls made, a reset starts them from 0, start is refused;
 *   - MLXA2A_COLL_TRACE written to "none" leaves the next calls untraced but
 *     counted (the CALLS line excludes them, so the runner's trace count
 *     checks the write),
 *     a bad value and a read-only switch are refused.
 * Prints CALLS <rank> <calls made with tracing on> and RESULT PASS|FAIL. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                                \
  do {                                                  \
    if (!(cond)) {                                      \
      ++failures;                                       \
      fprintf(stderr, "mpit_vars: FAIL %s: ", #cond);   \
      fprintf(stderr, __VA_ARGS__);                     \
      fputc('\n', stderr);                              \
    }                                                   \
  } while (0)

static void cvar_name(int i, int own, char* name, int len, int* scope, MPI_Datatype* dt) {
  int verbosity, bind;
  MPI_T_enum e;
  int rc = own ? PMPI_T_cvar_get_info(i, name, &len, &verbosity, dt, &e, NULL, NULL, &bind, scope)
               : MPI_T_cvar_get_info(i, name, &len, &verbosity, dt, &e, NULL, NULL, &bind, scope);
  if (rc != MPI_SUCCESS) snprintf(name, 8, "<%d>", rc);
}

static void pvar_name(int i, int own, char* name, int len, int* var_class) {
  int verbosity, bind, ro, cont, atomic;
  MPI_Datatype dt;
  MPI_T_enum e;
  int rc = own ? PMPI_T_pvar_get_info(i, name, &len, &verbosity, var_class, &dt, &e, NULL, NULL,
                                      &bind, &ro, &cont, &atomic)
               : MPI_T_pvar_get_info(i, name, &len, &verbosity, var_class, &dt, &e, NULL, NULL,
                                     &bind, &ro, &cont, &atomic);
  if (rc != MPI_SUCCESS) snprintf(name, 8, "<%d>", rc);
}

/* The MPI's own variables are where they were; returns how many are ours. */
static int compare_lists(int expect_ours) {
  int view = 0, own = 0, ours = 0;
  char a[256], b[256];
  int scope, cls;
  MPI_Datatype dt;
  MPI_T_cvar_get_num(&view);
  PMPI_T_cvar_get_num(&own);
  for (int i = 0; i < own; ++i) {
    cvar_name(i, 0, a, sizeof a, &scope, &dt);
    cvar_name(i, 1, b, sizeof b, &scope, &dt);
    CHECK(strcmp(a, b) == 0, "cvar %d is %s, the MPI's own is %s", i, a, b);
    CHECK(strncmp(a, "MLXA2A_", 7) != 0, "cvar %d (%s) among the MPI's own", i, a);
  }
  for (int i = own; i < view; ++i) {
    cvar_name(i, 0, a, sizeof a, &scope, &dt);
    CHECK(strncmp(a, "MLXA2A_", 7) == 0, "cvar %d after the MPI's own is %s", i, a);
    ++ours;
  }
  MPI_T_pvar_get_num(&view);
  PMPI_T_pvar_get_num(&own);
  for (int i = 0; i < own; ++i) {
    pvar_name(i, 0, a, sizeof a, &cls);
    pvar_name(i, 1, b, sizeof b, &cls);
    CHECK(strcmp(a, b) == 0, "pvar %d is %s, the MPI's own is %s", i, a, b);
  }
  for (int i = own; i < view; ++i) {
    pvar_name(i, 0, a, sizeof a, &cls);
    CHECK(strncmp(a, "mlxa2a_", 7) == 0, "pvar %d after the MPI's own is %s", i, a);
    CHECK(cls == MPI_T_PVAR_CLASS_COUNTER, "pvar %s class %d", a, cls);
  }
  CHECK(expect_ours ? ours > 20 : ours == 0, "%d MLXA2A_ control variables", ours);
  printf("MPIT cvars=%d ours=%d pvars=%d own_pvars=%d\n", view, ours, view, own);
  return ours;
}

static void check_cvar(const char* name, int want_scope, MPI_Datatype want_dt) {
  int idx = -1, scope = -1;
  char got[256];
  MPI_Datatype dt;
  CHECK(MPI_T_cvar_get_index(name, &idx) == MPI_SUCCESS, "get_index(%s)", name);
  cvar_name(idx, 0, got, sizeof got, &scope, &dt);
  CHECK(strcmp(got, name) == 0, "index of %s names %s", name, got);
  CHECK(scope == want_scope, "%s scope %d, expected %d", name, scope, want_scope);
  CHECK(dt == want_dt, "%s has another datatype", name);
}

static void alltoall(int n) {
  int* s = calloc(n, sizeof(int));
  int* r = calloc(n, sizeof(int));
  MPI_Alltoall(s, 1, MPI_INT, r, 1, MPI_INT, MPI_COMM_WORLD);
  free(s);
  free(r);
}

static unsigned long long sum_calls(MPI_T_pvar_session ses, MPI_T_pvar_handle* h) {
  unsigned long long total = 0, v = 0;
  for (int i = 0; i < 3; ++i) {
    CHECK(MPI_T_pvar_read(ses, h[i], &v) == MPI_SUCCESS, "pvar_read %d", i);
    total += v;
  }
  return total;
}

/* Counters: calls by path add up to the calls made; reset; start refused.
   path: the counter every call goes to (0 pmpi, 1 shm). */
static int check_pvars(int n, int path) {
  const char* names[3] = {"mlxa2a_calls_pmpi", "mlxa2a_calls_shm", "mlxa2a_calls_rdma"};
  MPI_T_pvar_session ses;
  MPI_T_pvar_handle h[3];
  int calls = 0, count = 0;
  CHECK(MPI_T_pvar_session_create(&ses) == MPI_SUCCESS, "session_create");
  for (int i = 0; i < 3; ++i) {
    int idx = -1;
    CHECK(MPI_T_pvar_get_index(names[i], MPI_T_PVAR_CLASS_COUNTER, &idx) == MPI_SUCCESS,
          "pvar_get_index(%s)", names[i]);
    CHECK(MPI_T_pvar_handle_alloc(ses, idx, NULL, &h[i], &count) == MPI_SUCCESS && count == 1,
          "pvar_handle_alloc(%s)", names[i]);
  }
  CHECK(MPI_T_pvar_start(ses, h[1]) == MPI_T_ERR_PVAR_NO_STARTSTOP, "start of a counter");
  CHECK(MPI_T_pvar_reset(ses, MPI_T_PVAR_ALL_HANDLES) == MPI_SUCCESS, "reset all");
  for (int i = 0; i < 5; ++i, ++calls) alltoall(n);
  CHECK(sum_calls(ses, h) == 5, "5 calls counted as %llu", sum_calls(ses, h));
  CHECK(MPI_T_pvar_reset(ses, h[path]) == MPI_SUCCESS, "reset");
  alltoall(n);
  ++calls;
  unsigned long long one = 0;
  MPI_T_pvar_read(ses, h[path], &one);
  CHECK(one == 1, "one %s call after reset reads %llu", names[path], one);
  for (int i = 0; i < 3; ++i) MPI_T_pvar_handle_free(ses, &h[i]);
  CHECK(h[0] == MPI_T_PVAR_HANDLE_NULL, "freed handle not null");
  CHECK(MPI_T_pvar_session_free(&ses) == MPI_SUCCESS, "session_free");
  return calls;
}

/* Calls k alltoalls; returns how many the path counters counted. */
static unsigned long long counted_calls(int n, int k) {
  const char* names[3] = {"mlxa2a_calls_pmpi", "mlxa2a_calls_shm", "mlxa2a_calls_rdma"};
  MPI_T_pvar_session ses;
  MPI_T_pvar_handle h[3];
  int count = 0;
  CHECK(MPI_T_pvar_session_create(&ses) == MPI_SUCCESS, "session_create");
  for (int i = 0; i < 3; ++i) {
    int idx = -1;
    CHECK(MPI_T_pvar_get_index(names[i], MPI_T_PVAR_CLASS_COUNTER, &idx) == MPI_SUCCESS,
          "pvar_get_index(%s)", names[i]);
    CHECK(MPI_T_pvar_handle_alloc(ses, idx, NULL, &h[i], &count) == MPI_SUCCESS, "alloc");
  }
  const unsigned long long before = sum_calls(ses, h);
  for (int i = 0; i < k; ++i) alltoall(n);
  const unsigned long long counted = sum_calls(ses, h) - before;
  for (int i = 0; i < 3; ++i) MPI_T_pvar_handle_free(ses, &h[i]);
  MPI_T_pvar_session_free(&ses);
  return counted;
}

/* MLXA2A_COLL_TRACE written to none and back; the calls between are untraced,
   the one after traced again (under MLXA2A_TUNE=pmpi the first runs as a
   pass-through, core/mpi/runtime.h, which the second write must end).
   Returns the traced calls made. */
static int check_writes(int n) {
  int idx = -1, count = 0;
  char text[4096];
  MPI_T_cvar_handle h, ro;
  CHECK(MPI_T_cvar_get_index("MLXA2A_COLL_TRACE", &idx) == MPI_SUCCESS, "index");
  CHECK(MPI_T_cvar_handle_alloc(idx, NULL, &h, &count) == MPI_SUCCESS, "alloc");
  CHECK(count >= 8 && count <= (int)sizeof text, "count %d", count);
  CHECK(MPI_T_cvar_read(h, text) == MPI_SUCCESS && strcmp(text, "info") == 0, "read %s", text);
  CHECK(MPI_T_cvar_write(h, "none") == MPI_SUCCESS, "write none");
  /* Untraced (under MLXA2A_TUNE=pmpi: the shim's pass-through fast path,
     core/mpi/abi.h), still counted once each. */
  const unsigned long long counted = counted_calls(n, 3);
  CHECK(counted == 3, "3 untraced calls counted as %llu", counted);
  CHECK(MPI_T_cvar_read(h, text) == MPI_SUCCESS && strcmp(text, "none") == 0, "read %s", text);
  CHECK(MPI_T_cvar_write(h, "loud") == MPI_T_ERR_INVALID, "a bad value is refused");
  CHECK(MPI_T_cvar_write(h, "info") == MPI_SUCCESS, "write info");
  alltoall(n);
  CHECK(MPI_T_cvar_handle_free(&h) == MPI_SUCCESS && h == MPI_T_CVAR_HANDLE_NULL, "free");
  CHECK(MPI_T_cvar_get_index("MLXA2A_TUNE", &idx) == MPI_SUCCESS, "index");
  CHECK(MPI_T_cvar_handle_alloc(idx, NULL, &ro, &count) == MPI_SUCCESS, "alloc");
  CHECK(MPI_T_cvar_write(ro, "0-inf:pmpi") == MPI_T_ERR_CVAR_SET_NEVER, "read-only written");
  MPI_T_cvar_handle_free(&ro);
  return 1;
}

int main(int argc, char** argv) {
  int provided, rank, n, calls = 0;
  const int ours = getenv("MPIT_EXPECT_MLXA2A") != NULL;
  CHECK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS, "MPI_T_init_thread");
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  compare_lists(ours);
  if (ours) {
    check_cvar("MLXA2A_COLL_TRACE", MPI_T_SCOPE_LOCAL, MPI_CHAR);
    check_cvar("MLXA2A_TUNE", MPI_T_SCOPE_READONLY, MPI_CHAR);
    check_cvar("MLXA2A_ENABLE", MPI_T_SCOPE_READONLY, MPI_INT);
    check_cvar("MLXA2A_SHM_SLOT_SIZE", MPI_T_SCOPE_READONLY, MPI_UNSIGNED_LONG_LONG);
    const char* path = getenv("MPIT_PATH");
    calls += check_pvars(n, path && strcmp(path, "pmpi") == 0 ? 0 : 1);
    calls += check_writes(n);
  } else {
    for (; calls < 7; ++calls) alltoall(n);
    alltoall(n);
  }
  /* The runner compares CALLS across both runs and, with the shim, with the
     trace: the call check_writes() makes with tracing written off is left out
     of it in both runs. */
  printf("CALLS %d %d\n", rank, calls);
  int all = 0;
  MPI_Allreduce(&failures, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0) printf("RESULT %s\n", all ? "FAIL" : "PASS");
  MPI_T_finalize();  /* before MPI_Finalize: Open MPI 4.1 crashes in it after */
  MPI_Finalize();
  return all ? 1 : 0;
}
