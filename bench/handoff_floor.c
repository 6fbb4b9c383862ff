/*
 * handoff_floor: the cheapest synchronisation any shared-memory alltoall
 * among N processes of this host can do, measured, so that alltoall
 * latencies can be read against the host rather than against a number
 * measured somewhere else.
 *
 * N processes (forked, no MPI) share one anonymous mapping with one 128-byte
 * line per process. Each round every process publishes the round number in
 * its own line (release store) and waits until every other line shows that
 * round (acquire loads): exactly the flag traffic of one mlxa2a copy-path
 * call, without the call overhead or any data. A waiting process spins up to
 * --spin `pause` instructions, then calls sched_yield() (what mlxa2a does
 * when ranks outnumber cores; use --spin 16 for that case).
 *
 * Prints one line: "handoff_floor: N processes, S spins: X.XXX us per round
 * (median of R runs of I rounds)". Exit status 0 on success, 2 on bad usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { kLine = 128, kMaxProcs = 256, kMaxRuns = 99 };

struct shared {
  _Alignas(kLine) _Atomic uint64_t start; /* run r starts when start >= r */
  _Alignas(kLine) _Atomic uint64_t ready; /* processes ready for the run */
  _Alignas(kLine) unsigned char flags[kMaxProcs][kLine];
};

static _Atomic uint64_t *flag_of(struct shared *s, int p) {
  return (_Atomic uint64_t *)(void *)s->flags[p];
}

static void relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield" ::: "memory");
#endif
}

static void wait_geq(_Atomic uint64_t *f, uint64_t target, long spin) {
  long i = 0;
  while (atomic_load_explicit(f, memory_order_acquire) < target) {
    if (i++ < spin) relax();
    else sched_yield();
  }
}

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* One process's part of `runs` runs of `iters` rounds. Process 0 returns the
 * per-round time of each run in us_per_round. */
static void play(struct shared *s, int me, int n, long iters, int runs, long spin,
                 double *us_per_round) {
  uint64_t round = 0;
  for (int r = 1; r <= runs; ++r) {
    atomic_fetch_add_explicit(&s->ready, 1, memory_order_acq_rel);
    if (me == 0) {
      while (atomic_load_explicit(&s->ready, memory_order_acquire) < (uint64_t)(r * n)) sched_yield();
      atomic_store_explicit(&s->start, (uint64_t)r, memory_order_release);
    }
    wait_geq(&s->start, (uint64_t)r, 0);
    const double t0 = now_us();
    for (long i = 0; i < iters; ++i) {
      ++round;
      atomic_store_explicit(flag_of(s, me), round, memory_order_release);
      for (int k = 1; k < n; ++k) wait_geq(flag_of(s, (me + k) % n), round, spin);
    }
    if (me == 0) us_per_round[r - 1] = (now_us() - t0) / (double)iters;
  }
}

static int cmp_double(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static int usage(const char *prog) {
  fprintf(stderr,
          "Usage: %s [-n PROCS] [-i ROUNDS] [-r RUNS] [-s SPINS]\n"
          "  -n  processes, 2..%d (default 2)\n"
          "  -i  rounds per run (default 200000 / PROCS^2)\n"
          "  -r  runs; the median is printed (default 5, at most %d)\n"
          "  -s  pause iterations before sched_yield (default 2000; 16 = mlxa2a's\n"
          "      setting when ranks outnumber cores)\n",
          prog, kMaxProcs, kMaxRuns);
  return 2;
}

static int parse_long(const char *text, long lo, long hi, long *out) {
  char *end = NULL;
  errno = 0;
  const long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

int main(int argc, char **argv) {
  long n = 2, iters = 0, runs = 5, spin = 2000;
  int opt;
  while ((opt = getopt(argc, argv, "n:i:r:s:h")) != -1) {
    int ok = 1;
    switch (opt) {
      case 'n': ok = parse_long(optarg, 2, kMaxProcs, &n); break;
      case 'i': ok = parse_long(optarg, 1, 1000000000L, &iters); break;
      case 'r': ok = parse_long(optarg, 1, kMaxRuns, &runs); break;
      case 's': ok = parse_long(optarg, 0, 1000000000L, &spin); break;
      default: return usage(argv[0]);
    }
    if (!ok) {
      fprintf(stderr, "%s: bad value '%s' for -%c\n", argv[0], optarg, opt);
      return usage(argv[0]);
    }
  }
  if (optind != argc) return usage(argv[0]);
  if (iters == 0) iters = 200000 / (n * n) > 0 ? 200000 / (n * n) : 1;

  struct shared *s = mmap(NULL, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (s == MAP_FAILED) {
    perror("handoff_floor: mmap");
    return 1;
  }
  memset(s, 0, sizeof *s);
  pid_t pids[kMaxProcs] = {0};
  for (int p = 1; p < n; ++p) {
    pids[p] = fork();
    if (pids[p] < 0) {
      perror("handoff_floor: fork");
      for (int q = 1; q < p; ++q) kill(pids[q], SIGKILL);
      return 1;
    }
    if (pids[p] == 0) {
      play(s, p, (int)n, iters, (int)runs, spin, NULL);
      _exit(0);
    }
  }
  double per_round[kMaxRuns];
  play(s, 0, (int)n, iters, (int)runs, spin, per_round);
  int failed = 0;
  for (int p = 1; p < n; ++p) {
    int st = 0;
    if (waitpid(pids[p], &st, 0) != pids[p] || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
  }
  if (failed) {
    fprintf(stderr, "handoff_floor: a child process failed\n");
    return 1;
  }
  qsort(per_round, (size_t)runs, sizeof per_round[0], cmp_double);
  const double median = runs % 2 ? per_round[runs / 2]
                                 : (per_round[runs / 2 - 1] + per_round[runs / 2]) / 2;
  printf("handoff_floor: %ld processes, %ld spins: %.3f us per round (median of %ld runs of %ld rounds)\n",
         n, spin, median, runs, iters);
  return 0;
}
