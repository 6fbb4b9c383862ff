/* Option parsing for bench/osu_alltoall.c (see osu_options.h). */
#define _GNU_SOURCE
#include "osu_options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    DEFAULT_ITERS_SMALL = 1000,
    DEFAULT_WARMUP_SMALL = 100,
    DEFAULT_ITERS_LARGE = 100,
    DEFAULT_WARMUP_LARGE = 10,
    DEFAULT_VALIDATION_WARMUP = 5,
    LARGE_MESSAGE_BYTES = 8192,
    DEFAULT_MAX_BYTES = 1 << 20,
};
#define DEFAULT_MEM_LIMIT ((size_t)512 * 1024 * 1024)

void print_help(const char *name)
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
           "  -T, --type              TYPE: mpi_char (default), mpi_int, "
           "mpi_float or all;\n"
           "                          sizes stay in bytes\n"
           "  -z, --tail-lat          print the P50, P90 and P99 of the "
           "per-iteration latency\n"
           "                          (mean over ranks); -zP1,P2,.. (attached) "
           "names up to %d\n"
           "                          whole percentiles from 1 to 100\n"
           "  -C, --thread-cpu        (not OSU) per size, also print the calling "
           "threads' CPU\n"
           "                          time inside MPI_Alltoall, summed over "
           "ranks and all calls\n"
           "                          (warm-up included): \"# thread-cpu BYTES "
           "CALLS NS\"\n",
           name, 1, DEFAULT_MAX_BYTES, DEFAULT_ITERS_SMALL, DEFAULT_ITERS_LARGE,
           LARGE_MESSAGE_BYTES, DEFAULT_WARMUP_SMALL, DEFAULT_WARMUP_LARGE,
           LARGE_MESSAGE_BYTES, DEFAULT_VALIDATION_WARMUP, DEFAULT_MEM_LIMIT,
           MAX_PERCENTILES);
    fflush(stdout);
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

/* -z alone: OSU's P50, P90, P99; -zA,B,...: those, in that order. */
static int parse_percentiles(const char *text, struct options *o)
{
    static const int osu_default[] = {50, 90, 99};
    char buf[128];
    char *save = NULL;

    o->n_percentiles = 0;
    if (text == NULL) {
        for (int i = 0; i < 3; i++) {
            o->percentiles[o->n_percentiles++] = osu_default[i];
        }
        return 0;
    }
    if (strlen(text) >= sizeof(buf)) {
        return -1;
    }
    strcpy(buf, text);
    for (char *tok = strtok_r(buf, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        size_t p = 0;
        if (parse_size(tok, &p) || p < 1 || p > 100 ||
            o->n_percentiles == MAX_PERCENTILES) {
            return -1;
        }
        o->percentiles[o->n_percentiles++] = (int)p;
    }
    return o->n_percentiles > 0 ? 0 : -1;
}

static int parse_datatypes(const char *text, struct options *o)
{
    o->n_datatypes = 1;
    if (strcasecmp(text, "mpi_char") == 0) {
        o->datatypes[0] = DT_CHAR;
    } else if (strcasecmp(text, "mpi_int") == 0) {
        o->datatypes[0] = DT_INT;
    } else if (strcasecmp(text, "mpi_float") == 0) {
        o->datatypes[0] = DT_FLOAT;
    } else if (strcasecmp(text, "all") == 0) {
        o->n_datatypes = 3;
        o->datatypes[0] = DT_CHAR;
        o->datatypes[1] = DT_INT;
        o->datatypes[2] = DT_FLOAT;
    } else {
        return -1;
    }
    return 0;
}

static void set_defaults(struct options *o)
{
    memset(o, 0, sizeof(*o));
    o->min_bytes = 1;
    o->max_bytes = DEFAULT_MAX_BYTES;
    o->iters_small = DEFAULT_ITERS_SMALL;
    o->iters_large = DEFAULT_ITERS_LARGE;
    o->warmup_small = DEFAULT_WARMUP_SMALL;
    o->warmup_large = DEFAULT_WARMUP_LARGE;
    o->validation_warmup = DEFAULT_VALIDATION_WARMUP;
    o->mem_limit = DEFAULT_MEM_LIMIT;
    o->n_datatypes = 1;
    o->datatypes[0] = DT_CHAR;
}

/* One option with an argument; returns the complaint or NULL. */
static const char *take_argument(int c, const char *arg, struct options *o)
{
    size_t v = 0;

    switch (c) {
    case 'm':
        return parse_message_sizes(arg, o) ? "Invalid Message Size" : NULL;
    case 'i':
        if (parse_size(arg, &v) || v < 1) {
            return "Invalid Number of Iterations";
        }
        o->iters_small = o->iters_large = v;
        return NULL;
    case 'x':
        if (parse_size(arg, &v)) {
            return "Invalid Number of Warmup Iterations";
        }
        o->warmup_small = o->warmup_large = v;
        return NULL;
    case 'u':
        if (parse_size(arg, &v)) {
            return "Invalid Number of Validation Warmup Iterations";
        }
        o->validation_warmup = v;
        return NULL;
    case 'M':
        if (parse_size(arg, &v) || v == 0) {
            return "Invalid Memory Limit";
        }
        o->mem_limit = v;
        return NULL;
    case 'T':
        return parse_datatypes(arg, o) ? "Invalid Datatype" : NULL;
    case 'z':
        return parse_percentiles(arg, o)
                   ? "Percentiles must be whole numbers from 1 to 100"
                   : NULL;
    default:
        return "Invalid Option";
    }
}

enum parse_result parse_options(int argc, char **argv, struct options *o,
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
        {"type", required_argument, NULL, 'T'},
        {"tail-lat", optional_argument, NULL, 'z'},
        {"thread-cpu", no_argument, NULL, 'C'},
        {NULL, 0, NULL, 0},
    };
    int c;

    set_defaults(o);
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:hvfm:i:x:cu:M:T:z::C", long_opts,
                            NULL)) != -1) {
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
        case 'C':
            o->thread_cpu = 1;
            break;
        case ':':
            bad->opt = (char)optopt;
            bad->arg = NULL;
            bad->what = "Missing argument for option";
            return PARSE_BAD;
        case '?':
            bad->opt = (char)optopt;
            bad->arg = NULL;
            bad->what = "Invalid Option";
            return PARSE_BAD;
        default:
            bad->what = take_argument(c, optarg, o);
            if (bad->what != NULL) {
                return PARSE_BAD;
            }
            break;
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
