/*
 * memcpy_loop: ITERS copies of BYTES bytes with the C library's memcpy, from
 * and to buffers allocated as bench/a2a_loop allocates its own (calloc), so
 * that callgrind counts glibc's memcpy instructions per byte on this machine
 * (bench/per_byte.py: the "memcpy-equivalent" the engine is measured in).
 *
 *   memcpy_loop ITERS BYTES
 *
 * Collect with --toggle-collect=copy_once: only the copies are counted.
 * Exit status 0, or 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Through a volatile pointer and out of line: the compiler can neither drop
 * the copies nor replace memcpy with its own moves. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

__attribute__((noinline)) void copy_once(char *dst, const char *src, size_t n) {
  copy_fn(dst, src, n);
}

int main(int argc, char **argv) {
  const long iters = argc > 2 ? atol(argv[1]) : 0;
  const long bytes = argc > 2 ? atol(argv[2]) : 0;
  if (iters <= 0 || bytes <= 0) {
    fprintf(stderr, "usage: memcpy_loop ITERS BYTES\n");
    return 2;
  }
  char *src = calloc((size_t)bytes, 1), *dst = calloc((size_t)bytes, 1);
  if (!src || !dst) return 2;
  memset(src, 1, (size_t)bytes);
  for (long i = 0; i < iters; ++i) copy_once(dst, src, (size_t)bytes);
  const int ok = dst[bytes - 1] == 1;
  free(src);
  free(dst);
  return ok ? 0 : 2;
}
