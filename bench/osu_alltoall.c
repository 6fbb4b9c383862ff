/*
 * osu_alltoall-compatible MPI_Alltoall latency benchmark.
 *
 * Written for mlxa2a so that with/without-mlxa2a comparisons run where the OSU
 * micro-benchmarks are not installed. It follows the semantics of OSU 7.x
 * osu_alltoall (no OSU code is used):
 *   - options -m [MIN:]MAX, -i ITER, -x WARMUP, -f, -c, -u, -M, -h, -v;
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
 *     run stops at the first failing size and exits non-zero.
 * Output columns and widths are those of OSU 7.x, so existing parsers work.
 *
 * Thread safety: single-threaded MPI program (MPI_Init).
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_TITLE "OSU MPI All-to-All Personalized Exchange Latency Test"
#define BENCH_NAME "osu_alltoall"
#define COL_FIELD_WIDTH 18 /* OSU's configure sets 18 */
#define COL_SIZE_WIDTH 10
#define COL_ITER_WIDTH 12
#define PRECISION 2

enum {
    DEFAULT_ITERS_SMALL = 1000,
    DEFAULT_WARMUP_SMALL = 100,
    DEFAULT_ITERS_LARGE = 100,
    DEFAULT_WARMUP_LARGE = 10,
    DEFAULT_VALIDATION_WARMUP = 5,
    LARGE_MESSAGE_BYTES = 8192,
    DEFAULT_MAX_BYTES = 1 << 20,
    /* Bytes checked after the receive region; one page before it keeps the
     * receive buffer page-aligned like OSU's. */
    GUARD_BYTES = 4096,
    MAX_REPORTED_ERRORS = 5,
};
#define DEFAULT_MEM_LIMIT ((size_t)512 * 1024 * 1024)
#define GUARD_VALUE 0xA5

struct options {
    size_t min_bytes;
    size_t max_bytes;
    size_t iters_small, iters_large;
    size_t warmup_small, warmup_large;
    size_t validation_warmup;
    size_t mem_limit;
    int full;
    int validate;
    int thread_cpu;
};

enum parse_result { PARSE_OK, PARSE_HELP, PARSE_VERSION, PARSE_BAD };

struct bad_usage {
    char opt;
    const char *arg;
    const char *what;
};

static void print_help(void)
{
    printf("Usage: %s [options]\n"
           "MPI_Alltoall latency (osu_alltoall-compatible, mlxa2a bench/).\n"
           "Options:\n"
           "  -h, --help              print this help\n"
           "  -v, --version           print version info\n"
           "  -f, --full              also print min/max latency over ranks and "
           "iterations\n"
           "  -m, --message-size      [MIN:]MAX bytes per peer; MIN: and :MAX "
           "also work\n"
           "                          (default %d:%d, sizes double)\n"
           "  -i, --iterations        ITER timed iterations (default %d, %d "
           "above %d bytes)\n"
           "  -x, --warmup            ITER warm-up iterations (default %d, %d "
           "above %d bytes)\n"
           "  -c, --validation        check every received byte after every "
           "call\n"
           "  -u, --validation-warmup ITER untimed calls per iteration with -c "
           "(default %d)\n"
           "  -M, --mem-limit         SIZE max bytes per buffer per process "
           "(default %zu)\n"
           "  -T, --thread-cpu        (not OSU) per size, also print the calling "
           "threads' CPU\n"
           "                          time inside MPI_Alltoall, summed over "
           "ranks and all calls\n"
           "                          (warm-up included): \"# thread-cpu BYTES "
           "CALLS NS\"\n",
           BENCH_NAME, 1, DEFAULT_MAX_BYTES, DEFAULT_ITERS_SMALL,
           DEFAULT_ITERS_LARGE, LARGE_MESSAGE_BYTES, DEFAULT_WARMUP_SMALL,
           DEFAULT_WARMUP_LARGE, LARGE_MESSAGE_BYTES, DEFAULT_VALIDATION_WARMUP,
           DEFAULT_MEM_LIMIT);
    fflush(stdout);
}

/* The calling thread's CPU time in ns (-T): a fake NIC's progress thread
 * or an MPI progress thread is not counted. */
static double thread_cpu_ns(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) {
        return 0.0;
    }
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Parses a non-negative decimal; returns 0 on success. */
static int parse_size(const char *text, size_t *out)
{
    char *end = NULL;
    unsigned long long v;

    if (text == NULL || *text == '\0' || *text == '-') {
        return -1;
    }
    errno = 0;
    v = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0') {
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

/* "MAX", "MIN:MAX", "MIN:" or ":MAX", as OSU accepts. */
static int parse_message_sizes(const char *text, struct options *o)
{
    const char *colon = strchr(text, ':');
    char min_text[32];
    size_t len;

    if (colon == NULL) {
        return parse_size(text, &o->max_bytes);
    }
    if (strchr(colon + 1, ':') != NULL) {
        return -1;
    }
    len = (size_t)(colon - text);
    if (len >= sizeof(min_text)) {
        return -1;
    }
    memcpy(min_text, text, len);
    min_text[len] = '\0';
    if (len > 0 && (parse_size(min_text, &o->min_bytes) || o->min_bytes == 0)) {
        return -1;
    }
    if (colon[1] != '\0' && parse_size(colon + 1, &o->max_bytes)) {
        return -1;
    }
    return len == 0 && colon[1] == '\0' ? -1 : 0;
}

static enum parse_result parse_options(int argc, char **argv, struct options *o,
                                       struct bad_usage *bad)
{
    static const struct option long_opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'v'},
        {"full", no_argument, NULL, 'f'},
        {"message-size", required_argument, NULL, 'm'},
        {"iterations", required_argument, NULL, 'i'},
        {"warmup", required_argument, NULL, 'x'},
        {"validation", no_argument, NULL, 'c'},
        {"validation-warmup", required_argument, NULL, 'u'},
        {"mem-limit", required_argument, NULL, 'M'},
        {"thread-cpu", no_argument, NULL, 'T'},
        {NULL, 0, NULL, 0},
    };
    size_t v = 0;
    int c;

    o->min_bytes = 1;
    o->max_bytes = DEFAULT_MAX_BYTES;
    o->iters_small = DEFAULT_ITERS_SMALL;
    o->iters_large = DEFAULT_ITERS_LARGE;
    o->warmup_small = DEFAULT_WARMUP_SMALL;
    o->warmup_large = DEFAULT_WARMUP_LARGE;
    o->validation_warmup = DEFAULT_VALIDATION_WARMUP;
    o->mem_limit = DEFAULT_MEM_LIMIT;
    o->full = 0;
    o->validate = 0;
    o->thread_cpu = 0;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:hvfm:i:x:cu:M:T", long_opts, NULL)) !=
           -1) {
        bad->opt = (char)c;
        bad->arg = optarg;
        switch (c) {
        case 'h':
            return PARSE_HELP;
        case 'v':
            return PARSE_VERSION;
        case 'f':
            o->full = 1;
            break;
        case 'c':
            o->validate = 1;
            break;
        case 'T':
            o->thread_cpu = 1;
            break;
        case 'm':
            if (parse_message_sizes(optarg, o)) {
                bad->what = "Invalid Message Size";
                return PARSE_BAD;
            }
            break;
        case 'i':
            if (parse_size(optarg, &v) || v < 1) {
                bad->what = "Invalid Number of Iterations";
                return PARSE_BAD;
            }
            o->iters_small = o->iters_large = v;
            break;
        case 'x':
            if (parse_size(optarg, &v)) {
                bad->what = "Invalid Number of Warmup Iterations";
                return PARSE_BAD;
            }
            o->warmup_small = o->warmup_large = v;
            break;
        case 'u':
            if (parse_size(optarg, &v)) {
                bad->what = "Invalid Number of Validation Warmup Iterations";
                return PARSE_BAD;
            }
            o->validation_warmup = v;
            break;
        case 'M':
            if (parse_size(optarg, &v) || v == 0) {
                bad->what = "Invalid Memory Limit";
                return PARSE_BAD;
            }
            o->mem_limit = v;
            break;
        case ':':
            bad->opt = (char)optopt;
            bad->arg = NULL;
            bad->what = "Missing argument for option";
            return PARSE_BAD;
        default:
            bad->opt = (char)optopt;
            bad->arg = NULL;
            bad->what = "Invalid Option";
            return PARSE_BAD;
        }
    }
    if (optind < argc) {
        bad->opt = '?';
        bad->arg = argv[optind];
        bad->what = "Unexpected argument";
        return PARSE_BAD;
    }
    if (o->max_bytes < o->min_bytes) {
        bad->opt = 'm';
        bad->arg = NULL;
        bad->what = "Invalid Message Size (MIN > MAX)";
        return PARSE_BAD;
    }
    return PARSE_OK;
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

static void print_header(const struct options *o)
{
    printf("\n# %s (mlxa2a osu-compatible)\n", BENCH_TITLE);
    printf("# Datatype: MPI_CHAR.\n");
    printf("%-*s%*s", COL_SIZE_WIDTH, "# Size", COL_FIELD_WIDTH, "Avg Latency(us)");
    if (o->full) {
        printf("%*s%*s%*s", COL_FIELD_WIDTH, "Min Latency(us)", COL_FIELD_WIDTH,
               "Max Latency(us)", COL_ITER_WIDTH, "Iterations");
    }
    if (o->validate) {
        printf("%*s", COL_FIELD_WIDTH, "Validation");
    }
    printf("\n");
    fflush(stdout);
}

static void print_row(const struct options *o, size_t bytes, double avg,
                      double min, double max, size_t iters, int errors)
{
    printf("%-*zu%*.*f", COL_SIZE_WIDTH, bytes, COL_FIELD_WIDTH, PRECISION, avg);
    if (o->full) {
        printf("%*.*f%*.*f%*zu", COL_FIELD_WIDTH, PRECISION, min, COL_FIELD_WIDTH,
               PRECISION, max, COL_ITER_WIDTH, iters);
    }
    if (o->validate) {
        printf("%*s", COL_FIELD_WIDTH, errors ? "Fail" : "Pass");
    }
    printf("\n");
    fflush(stdout);
}

static void fail_alloc(int rank, MPI_Comm comm)
{
    fprintf(stderr, "%s: rank %d: could not allocate the buffers\n", BENCH_NAME,
            rank);
    MPI_Abort(comm, EXIT_FAILURE);
}

int main(int argc, char **argv)
{
    MPI_Comm comm = MPI_COMM_WORLD;
    struct options o;
    struct bad_usage bad = {0, NULL, NULL};
    enum parse_result parsed = parse_options(argc, argv, &o, &bad);
    int rank = 0, nranks = 0;

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);

    if (parsed != PARSE_OK) {
        if (rank == 0) {
            if (parsed == PARSE_BAD) {
                if (bad.arg != NULL) {
                    fprintf(stderr, "%s [-%c %s]\n\n", bad.what, bad.opt,
                            bad.arg);
                } else {
                    fprintf(stderr, "%s [-%c]\n\n", bad.what, bad.opt);
                }
                fflush(stderr);
                print_help();
            } else if (parsed == PARSE_HELP) {
                print_help();
            } else {
                printf("# %s (mlxa2a osu-compatible, OSU 7.x output format)\n",
                       BENCH_TITLE);
            }
        }
        MPI_Finalize();
        return parsed == PARSE_BAD ? EXIT_FAILURE : EXIT_SUCCESS;
    }
    if (nranks < 2) {
        if (rank == 0) {
            fprintf(stderr, "This test requires at least two processes\n");
        }
        MPI_Finalize();
        return EXIT_FAILURE;
    }
    if (o.max_bytes > o.mem_limit / (size_t)nranks) {
        o.max_bytes = o.mem_limit / (size_t)nranks;
        if (rank == 0) {
            fprintf(stderr,
                    "Warning! Limiting max message size to: %zu. Increase -M, "
                    "--mem-limit for higher message sizes.\n",
                    o.max_bytes);
        }
    }
    if (o.max_bytes > (size_t)INT_MAX) {
        o.max_bytes = (size_t)INT_MAX;
    }

    size_t region = o.max_bytes * (size_t)nranks;
    uint8_t *sendbuf = page_alloc(region > 0 ? region : 1);
    uint8_t *recv_alloc = page_alloc(region + 2 * (size_t)GUARD_BYTES);
    uint8_t *recvbuf = recv_alloc + GUARD_BYTES;
    /* Validation warm-up calls write here, not into the checked buffer. */
    uint8_t *scratch = o.validate ? page_alloc(region > 0 ? region : 1) : NULL;
    if (sendbuf == NULL || recv_alloc == NULL || (o.validate && !scratch)) {
        fail_alloc(rank, comm);
    }
    /* Touch every page before timing, as OSU's buffer initialisation does. */
    memset(sendbuf, 1, region);
    memset(recv_alloc, 0, region + 2 * (size_t)GUARD_BYTES);

    if (rank == 0) {
        print_header(&o);
    }

    size_t iters = o.iters_small, warmup = o.warmup_small;
    size_t local_wrong = 0, reported = 0, failed_size = 0;
    int errors = 0;
    for (size_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= 2) {
        int count = (int)bytes;
        double total = 0.0;
        double cpu_ns = 0.0; /* this thread's CPU inside MPI_Alltoall (-T) */

        /* Like OSU, once past the threshold the large-message counts stay. */
        if (bytes > LARGE_MESSAGE_BYTES) {
            iters = o.iters_large;
            warmup = o.warmup_large;
        }
        MPI_Barrier(comm);
        for (size_t i = 0; i < iters + warmup; i++) {
            if (o.validate) {
                fill_send(sendbuf, bytes, rank, nranks, i);
                poison_recv(recvbuf, bytes, rank, nranks, i);
                for (size_t w = 0; w < o.validation_warmup; w++) {
                    MPI_Barrier(comm);
                    MPI_Alltoall(sendbuf, count, MPI_CHAR, scratch, count,
                                 MPI_CHAR, comm);
                }
                MPI_Barrier(comm);
            }
            double c0 = o.thread_cpu ? thread_cpu_ns() : 0.0;
            double t0 = MPI_Wtime();
            MPI_Alltoall(sendbuf, count, MPI_CHAR, recvbuf, count, MPI_CHAR,
                         comm);
            double t1 = MPI_Wtime();
            if (o.thread_cpu) {
                cpu_ns += thread_cpu_ns() - c0;
            }
            MPI_Barrier(comm);
            if (o.validate) {
                local_wrong +=
                    check_recv(recvbuf, bytes, rank, nranks, i, &reported);
            }
            if (i >= warmup) {
                total += t1 - t0;
            }
        }

        double mine = total * 1e6 / (double)iters;
        double min = 0.0, max = 0.0, sum = 0.0;
        MPI_Reduce(&mine, &min, 1, MPI_DOUBLE, MPI_MIN, 0, comm);
        MPI_Reduce(&mine, &max, 1, MPI_DOUBLE, MPI_MAX, 0, comm);
        MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, comm);
        if (o.validate) {
            int local = local_wrong > 0;
            MPI_Allreduce(&local, &errors, 1, MPI_INT, MPI_SUM, comm);
        }
        if (rank == 0) {
            print_row(&o, bytes, sum / nranks, min, max, iters, errors);
        }
        if (o.thread_cpu) {
            double cpu_sum = 0.0;
            MPI_Reduce(&cpu_ns, &cpu_sum, 1, MPI_DOUBLE, MPI_SUM, 0, comm);
            if (rank == 0) {
                printf("# thread-cpu %zu %zu %.0f\n", bytes,
                       (iters + warmup) * (size_t)nranks, cpu_sum);
                fflush(stdout);
            }
        }
        MPI_Barrier(comm);
        if (errors != 0) {
            failed_size = bytes;
            break;
        }
        if (bytes > o.max_bytes / 2) {
            break; /* next doubling would overflow or pass MAX */
        }
    }

    free(scratch);
    free(recv_alloc);
    free(sendbuf);
    MPI_Finalize();

    if (errors != 0) {
        if (rank == 0) {
            printf("DATA VALIDATION ERROR: %s exited with status %d on message "
                   "size %zu.\n",
                   argv[0], EXIT_FAILURE, failed_size);
            fflush(stdout);
        }
        return EXIT_FAILURE;
    }
    return EXIT_SUCCESS;
}
