/*
 * osu_alltoall-compatible MPI_Alltoall latency benchmark.
 *
 * Written for mlxa2a so that with/without-mlxa2a comparisons run where the OSU
 * micro-benchmarks are not installed. It follows the semantics of OSU 7.x
 * osu_alltoall (no OSU code is used):
 *   - options -m [MIN:]MAX, -i ITER, -x WARMUP, -f, -c, -u, -M, -T TYPE,
 *     -z[P,..], -h, -v with OSU 7.4's letters and meanings (osu_options.h);
 *     ours (-C) use letters OSU leaves free;
 *   - defaults 1000 timed + 100 warm-up iterations; messages larger than
 *     8192 bytes use 100 + 10 (an explicit -i / -x applies to both ranges);
 *   - sizes double from MIN (default 1) to MAX (default 1 MiB), capped so
 *     that MAX * ranks stays under the memory limit (-M, default 512 MiB);
 *   - per size: barrier; per iteration: time only the MPI_Alltoall call,
 *     then barrier; a rank's latency is its mean over the timed iterations;
 *     rank 0 prints the mean over ranks and, with -f, the min/max over ranks;
 *   - with -c every received byte is checked after every call (a pattern that
 *     depends on sender, receiver, iteration and offset), plus guard bytes
 *     around the receive buffer; a "Validation" column reads Pass/Fail, the
 *     run stops at the first failing size and exits non-zero;
 *   - with -z, per size the P50/P90/P99 (or -zP,..) of the per-iteration
 *     latency, each iteration's latency being its mean over ranks (OSU's
 *     definition), in columns after the others;
 *   - with -T, the MPI_INT/MPI_FLOAT runs send bytes/4 elements per peer and
 *     skip sizes below one element, as OSU does.
 * Output columns and widths are those of OSU 7.x, so existing parsers work.
 *
 * Thread safety: single-threaded MPI program (MPI_Init).
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "osu_options.h"

#define BENCH_TITLE "OSU MPI All-to-All Personalized Exchange Latency Test"
#define BENCH_NAME "osu_alltoall"
#define COL_FIELD_WIDTH 18 /* OSU's configure sets 18 */
#define COL_SIZE_WIDTH 10
#define COL_ITER_WIDTH 12
#define PRECISION 2

enum {
    LARGE_MESSAGE_BYTES = 8192,
    /* Bytes checked after the receive region; one page before it keeps the
     * receive buffer page-aligned like OSU's. */
    GUARD_BYTES = 4096,
    MAX_REPORTED_ERRORS = 5,
};
#define GUARD_VALUE 0xA5

/* Buffers and identity shared by every size of a run. */
struct run {
    MPI_Comm comm;
    int rank, nranks;
    uint8_t *sendbuf, *recvbuf, *scratch;
    double *lat_us;   /* this rank's latency per timed iteration (-z) */
    double *lat_sum;  /* rank 0: the same summed over ranks (-z) */
    size_t local_wrong, reported;
};

/* What one size measured, as rank 0 prints it. */
struct size_result {
    double avg, min, max;
    double tail[MAX_PERCENTILES];
    size_t iters;
    int errors;
};

/* The calling thread's CPU time in ns (-C): a fake NIC's progress thread
 * or an MPI progress thread is not counted. */
static double thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
        return 0.0;
    }
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static MPI_Datatype mpi_type(enum bench_datatype t)
{
    return t == DT_INT ? MPI_INT : t == DT_FLOAT ? MPI_FLOAT : MPI_CHAR;
}

static const char *type_name(enum bench_datatype t)
{
    return t == DT_INT ? "MPI_INT" : t == DT_FLOAT ? "MPI_FLOAT" : "MPI_CHAR";
}

static size_t type_size(enum bench_datatype t)
{
    return t == DT_INT ? sizeof(int) : t == DT_FLOAT ? sizeof(float) : 1;
}

/* Value of byte `offset` of the block that rank `src` sends to rank `dst` in
 * timed-or-warm-up iteration `iter`. A misplaced block, a shifted byte or a
 * stale buffer from an earlier iteration all read as a different value. */
static inline uint8_t pattern_byte(int src, int dst, size_t iter, size_t offset)
{
    uint32_t h = (uint32_t)src * 0x9E3779B1u;
    h ^= (uint32_t)dst * 0x85EBCA77u + (h >> 15);
    h ^= (uint32_t)iter * 0xC2B2AE3Du + (h >> 13);
    h ^= h >> 16;
    return (uint8_t)(h + (uint32_t)offset + (uint32_t)(offset >> 8));
}

static void fill_send(uint8_t *buf, size_t bytes, int rank, int nranks,
                      size_t iter)
{
    for (int peer = 0; peer < nranks; peer++) {
        uint8_t *block = buf + (size_t)peer * bytes;
        for (size_t k = 0; k < bytes; k++) {
            block[k] = pattern_byte(rank, peer, iter, k);
        }
    }
}

/* Receive bytes get the complement of what must arrive, so a call that
 * writes nothing fails; guards get GUARD_VALUE. */
static void poison_recv(uint8_t *buf, size_t bytes, int rank, int nranks,
                        size_t iter)
{
    memset(buf - GUARD_BYTES, GUARD_VALUE, GUARD_BYTES);
    for (int peer = 0; peer < nranks; peer++) {
        uint8_t *block = buf + (size_t)peer * bytes;
        for (size_t k = 0; k < bytes; k++) {
            block[k] = (uint8_t)~pattern_byte(peer, rank, iter, k);
        }
    }
    memset(buf + (size_t)nranks * bytes, GUARD_VALUE, GUARD_BYTES);
}

/* Returns the number of wrong bytes (received data and guards); describes the
 * first few on stderr. */
static size_t check_recv(const uint8_t *buf, size_t bytes, int rank, int nranks,
                         size_t iter, size_t *reported)
{
    size_t wrong = 0;
    const uint8_t *tail = buf + (size_t)nranks * bytes;

    for (int peer = 0; peer < nranks; peer++) {
        const uint8_t *block = buf + (size_t)peer * bytes;
        for (size_t k = 0; k < bytes; k++) {
            uint8_t want = pattern_byte(peer, rank, iter, k);
            if (block[k] == want) {
                continue;
            }
            ++wrong;
            if (*reported < MAX_REPORTED_ERRORS) {
                ++*reported;
                fprintf(stderr,
                        "%s: rank %d: size %zu iteration %zu: byte %zu of the "
                        "block from rank %d is 0x%02x, expected 0x%02x\n",
                        BENCH_NAME, rank, bytes, iter, k, peer, block[k], want);
            }
        }
    }
    for (size_t k = 0; k < GUARD_BYTES; k++) {
        int front_bad = (buf - GUARD_BYTES)[k] != GUARD_VALUE;
        int back_bad = tail[k] != GUARD_VALUE;
        if (!front_bad && !back_bad) {
            continue;
        }
        wrong += (size_t)(front_bad + back_bad);
        if (*reported < MAX_REPORTED_ERRORS) {
            ++*reported;
            fprintf(stderr,
                    "%s: rank %d: size %zu iteration %zu: guard byte %s the "
                    "receive buffer overwritten\n",
                    BENCH_NAME, rank, bytes, iter,
                    front_bad ? "before" : "after");
        }
    }
    return wrong;
}

static void *page_alloc(size_t bytes)
{
    void *p = NULL;
    long page = sysconf(_SC_PAGESIZE);

    if (posix_memalign(&p, page > 0 ? (size_t)page : 4096, bytes) != 0) {
        return NULL;
    }
    return p;
}

static void print_header(const struct options *o, enum bench_datatype t)
{
    printf("# Datatype: %s.\n", type_name(t));
    printf("%-*s%*s", COL_SIZE_WIDTH, "# Size", COL_FIELD_WIDTH, "Avg Latency(us)");
    if (o->full) {
        printf("%*s%*s%*s", COL_FIELD_WIDTH, "Min Latency(us)", COL_FIELD_WIDTH,
               "Max Latency(us)", COL_ITER_WIDTH, "Iterations");
    }
    if (o->validate) {
        printf("%*s", COL_FIELD_WIDTH, "Validation");
    }
    for (int k = 0; k < o->n_percentiles; k++) {
        char title[32];
        snprintf(title, sizeof(title), "P%d Tail Lat(us)", o->percentiles[k]);
        printf("%*s", COL_FIELD_WIDTH, title);
    }
    printf("\n");
    fflush(stdout);
}

static void print_row(const struct options *o, size_t bytes,
                      const struct size_result *r)
{
    printf("%-*zu%*.*f", COL_SIZE_WIDTH, bytes, COL_FIELD_WIDTH, PRECISION,
           r->avg);
    if (o->full) {
        printf("%*.*f%*.*f%*zu", COL_FIELD_WIDTH, PRECISION, r->min,
               COL_FIELD_WIDTH, PRECISION, r->max, COL_ITER_WIDTH, r->iters);
    }
    if (o->validate) {
        printf("%*s", COL_FIELD_WIDTH, r->errors ? "Fail" : "Pass");
    }
    for (int k = 0; k < o->n_percentiles; k++) {
        printf("%*.*f", COL_FIELD_WIDTH, PRECISION, r->tail[k]);
    }
    printf("\n");
    fflush(stdout);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* -z: each iteration's latency averaged over ranks, sorted; percentile P
 * is element round(iters * P / 100) - 1 (OSU 7.4's choice). */
static void tail_latencies(const struct options *o, struct run *run,
                           size_t iters, struct size_result *res)
{
    if (o->n_percentiles == 0) {
        return;
    }
    MPI_Reduce(run->lat_us, run->lat_sum, (int)iters, MPI_DOUBLE, MPI_SUM, 0,
               run->comm);
    if (run->rank != 0) {
        return;
    }
    qsort(run->lat_sum, iters, sizeof(double), cmp_double);
    for (int k = 0; k < o->n_percentiles; k++) {
        long idx = (long)(((double)iters * o->percentiles[k]) / 100.0 + 0.5) - 1;
        idx = idx < 0 ? 0 : idx >= (long)iters ? (long)iters - 1 : idx;
        res->tail[k] = run->lat_sum[idx] / run->nranks;
    }
}

/* Runs warm-up + timed calls of one size; returns this thread's CPU ns
 * inside MPI_Alltoall when -C is on. */
static double time_calls(const struct options *o, struct run *run,
                         size_t bytes, enum bench_datatype t, size_t iters,
                         size_t warmup, double *total)
{
    int count = (int)(bytes / type_size(t));
    MPI_Datatype dt = mpi_type(t);
    double cpu_ns = 0.0;

    for (size_t i = 0; i < iters + warmup; i++) {
        if (o->validate) {
            fill_send(run->sendbuf, bytes, run->rank, run->nranks, i);
            poison_recv(run->recvbuf, bytes, run->rank, run->nranks, i);
            for (size_t w = 0; w < o->validation_warmup; w++) {
                MPI_Barrier(run->comm);
                MPI_Alltoall(run->sendbuf, count, dt, run->scratch, count, dt,
                             run->comm);
            }
            MPI_Barrier(run->comm);
        }
        double c0 = o->thread_cpu ? thread_cpu_ns() : 0.0;
        double t0 = MPI_Wtime();
        MPI_Alltoall(run->sendbuf, count, dt, run->recvbuf, count, dt,
                     run->comm);
        double t1 = MPI_Wtime();
        if (o->thread_cpu) {
            cpu_ns += thread_cpu_ns() - c0;
        }
        MPI_Barrier(run->comm);
        if (o->validate) {
            run->local_wrong += check_recv(run->recvbuf, bytes, run->rank,
                                           run->nranks, i, &run->reported);
        }
        if (i >= warmup) {
            *total += t1 - t0;
            run->lat_us[i - warmup] = (t1 - t0) * 1e6;
        }
    }
    return cpu_ns;
}

/* One size: time it, reduce over ranks, print on rank 0. Returns the number
 * of ranks that saw wrong data (so far, with -c). */
static int measure_size(const struct options *o, struct run *run,
                        size_t bytes, enum bench_datatype t, size_t iters,
                        size_t warmup)
{
    struct size_result res = {.iters = iters};
    double total = 0.0;

    MPI_Barrier(run->comm);
    double cpu_ns = time_calls(o, run, bytes, t, iters, warmup, &total);
    double mine = total * 1e6 / (double)iters, sum = 0.0;
    MPI_Reduce(&mine, &res.min, 1, MPI_DOUBLE, MPI_MIN, 0, run->comm);
    MPI_Reduce(&mine, &res.max, 1, MPI_DOUBLE, MPI_MAX, 0, run->comm);
    MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, run->comm);
    res.avg = sum / run->nranks;
    tail_latencies(o, run, iters, &res);
    if (o->validate) {
        int local = run->local_wrong > 0;
        MPI_Allreduce(&local, &res.errors, 1, MPI_INT, MPI_SUM, run->comm);
    }
    if (run->rank == 0) {
        print_row(o, bytes, &res);
    }
    if (o->thread_cpu) {
        double cpu_sum = 0.0;
        MPI_Reduce(&cpu_ns, &cpu_sum, 1, MPI_DOUBLE, MPI_SUM, 0, run->comm);
        if (run->rank == 0) {
            printf("# thread-cpu %zu %zu %.0f\n", bytes,
                   (iters + warmup) * (size_t)run->nranks, cpu_sum);
            fflush(stdout);
        }
    }
    MPI_Barrier(run->comm);
    return res.errors;
}

/* All sizes of one datatype; returns the failing size or 0. */
static size_t run_datatype(const struct options *o, struct run *run,
                           enum bench_datatype t)
{
    size_t iters = o->iters_small, warmup = o->warmup_small;

    if (run->rank == 0) {
        print_header(o, t);
    }
    for (size_t bytes = o->min_bytes; bytes <= o->max_bytes; bytes *= 2) {
        /* Like OSU, once past the threshold the large-message counts stay. */
        if (bytes > LARGE_MESSAGE_BYTES) {
            iters = o->iters_large;
            warmup = o->warmup_large;
        }
        /* Whole elements only; a size below one element is skipped. */
        size_t elems = bytes / type_size(t);
        if (elems > 0 &&
            measure_size(o, run, elems * type_size(t), t, iters, warmup)) {
            return bytes;
        }
        if (bytes > o->max_bytes / 2) {
            break; /* next doubling would overflow or pass MAX */
        }
    }
    return 0;
}

static void fail_alloc(int rank, MPI_Comm comm)
{
    fprintf(stderr, "%s: rank %d: could not allocate the buffers\n", BENCH_NAME,
            rank);
    MPI_Abort(comm, EXIT_FAILURE);
}

/* Allocates and touches the buffers (as OSU's initialisation does). */
static void setup_run(const struct options *o, struct run *run)
{
    size_t region = o->max_bytes * (size_t)run->nranks;
    size_t iters = o->iters_small > o->iters_large ? o->iters_small
                                                   : o->iters_large;
    uint8_t *recv_alloc = page_alloc(region + 2 * (size_t)GUARD_BYTES);

    run->sendbuf = page_alloc(region > 0 ? region : 1);
    run->recvbuf = recv_alloc ? recv_alloc + GUARD_BYTES : NULL;
    /* Validation warm-up calls write here, not into the checked buffer. */
    run->scratch = o->validate ? page_alloc(region > 0 ? region : 1) : NULL;
    run->lat_us = calloc(iters, sizeof(double));
    run->lat_sum = calloc(iters, sizeof(double));
    if (!run->sendbuf || !recv_alloc || (o->validate && !run->scratch) ||
        !run->lat_us || !run->lat_sum) {
        fail_alloc(run->rank, run->comm);
    }
    memset(run->sendbuf, 1, region);
    memset(recv_alloc, 0, region + 2 * (size_t)GUARD_BYTES);
}

static void free_run(struct run *run)
{
    free(run->lat_sum);
    free(run->lat_us);
    free(run->scratch);
    free(run->recvbuf ? run->recvbuf - GUARD_BYTES : NULL);
    free(run->sendbuf);
}

/* Rank 0 answers -h, -v and bad usage; returns the exit status. */
static int report_parse(enum parse_result parsed, const struct bad_usage *bad,
                        int rank)
{
    if (rank != 0) {
        return parsed == PARSE_BAD ? EXIT_FAILURE : EXIT_SUCCESS;
    }
    if (parsed == PARSE_BAD) {
        if (bad->arg != NULL) {
            fprintf(stderr, "%s [-%c %s]\n\n", bad->what, bad->opt, bad->arg);
        } else {
            fprintf(stderr, "%s [-%c]\n\n", bad->what, bad->opt);
        }
        fflush(stderr);
        print_help(BENCH_NAME);
        return EXIT_FAILURE;
    }
    if (parsed == PARSE_HELP) {
        print_help(BENCH_NAME);
    } else {
        printf("# %s (mlxa2a osu-compatible, OSU 7.x output format)\n",
               BENCH_TITLE);
    }
    return EXIT_SUCCESS;
}

/* Caps MAX as OSU does (-M and the int count); 0 when the run can go on. */
static int check_limits(struct options *o, int rank, int nranks)
{
    if (nranks < 2) {
        if (rank == 0) {
            fprintf(stderr, "This test requires at least two processes\n");
        }
        return -1;
    }
    if (o->max_bytes > o->mem_limit / (size_t)nranks) {
        o->max_bytes = o->mem_limit / (size_t)nranks;
        if (rank == 0) {
            fprintf(stderr,
                    "Warning! Limiting max message size to: %zu. Increase -M, "
                    "--mem-limit for higher message sizes.\n",
                    o->max_bytes);
        }
    }
    if (o->max_bytes > (size_t)INT_MAX) {
        o->max_bytes = (size_t)INT_MAX;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    struct bad_usage bad = {0, NULL, NULL};
    enum parse_result parsed = parse_options(argc, argv, &o, &bad);
    struct run run = {.comm = MPI_COMM_WORLD};
    size_t failed_size = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(run.comm, &run.rank);
    MPI_Comm_size(run.comm, &run.nranks);
    if (parsed != PARSE_OK || check_limits(&o, run.rank, run.nranks) != 0) {
        int status = parsed != PARSE_OK ? report_parse(parsed, &bad, run.rank)
                                        : EXIT_FAILURE;
        MPI_Finalize();
        return status;
    }
    setup_run(&o, &run);
    if (run.rank == 0) {
        printf("\n# %s (mlxa2a osu-compatible)\n", BENCH_TITLE);
    }
    for (int k = 0; k < o.n_datatypes && failed_size == 0; k++) {
        failed_size = run_datatype(&o, &run, o.datatypes[k]);
    }
    free_run(&run);
    MPI_Finalize();

    if (failed_size != 0) {
        if (run.rank == 0) {
            printf("DATA VALIDATION ERROR: %s exited with status %d on message "
                   "size %zu.\n",
                   argv[0], EXIT_FAILURE, failed_size);
            fflush(stdout);
        }
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
