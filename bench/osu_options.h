/*
 * Command-line options of the osu_alltoall-compatible benchmark.
 *
 * Letters mean what they mean in OSU 7.4's osu_alltoall (-h -v -f -m -i -x
 * -M -c -u -T -z); options of our own use letters OSU does not define
 * (-C, --thread-cpu), so a command line written for OSU runs unchanged here
 * and one written for us never means something else to OSU.
 *
 * parse_options() needs no MPI and prints nothing; the caller reports.
 */
#ifndef MLXA2A_BENCH_OSU_OPTIONS_H
#define MLXA2A_BENCH_OSU_OPTIONS_H

#include <stddef.h>

enum {
    MAX_PERCENTILES = 8,  /* -z50,90,99,...: at most this many */
    MAX_DATATYPES = 3,    /* -T all: MPI_CHAR, MPI_INT, MPI_FLOAT */
};

/* The MPI datatypes -T selects (OSU's names); the caller maps them. */
enum bench_datatype { DT_CHAR, DT_INT, DT_FLOAT };

struct options {
    size_t min_bytes;
    size_t max_bytes;
    size_t iters_small, iters_large;
    size_t warmup_small, warmup_large;
    size_t validation_warmup;
    size_t mem_limit;
    int full;
    int validate;
    int thread_cpu;                        /* -C (ours) */
    int n_percentiles;                     /* -z: 0 = no tail columns */
    int percentiles[MAX_PERCENTILES];      /* in the order given */
    int n_datatypes;                       /* -T: runs, in this order */
    enum bench_datatype datatypes[MAX_DATATYPES];
};

enum parse_result { PARSE_OK, PARSE_HELP, PARSE_VERSION, PARSE_BAD };

/* What was wrong, worded like OSU's messages ("Invalid Option [-q]"). */
struct bad_usage {
    char opt;
    const char *arg;
    const char *what;
};

enum parse_result parse_options(int argc, char **argv, struct options *o,
                                struct bad_usage *bad);
void print_help(const char *name);

#endif
