/* The timing loop shared by cartage's pack benchmark (bench/pack_compare.cc)
 * and the MPI peer (bench/peers/mpi_pack.c), so both measure alike: three
 * warm-up calls, iterations calibrated to about 20 ms per repetition, `reps`
 * timed repetitions, the median with min and max in GB/s of packed bytes;
 * buffers from pack_harness_alloc.
 * Plain C so that mpicc compiles it too. */
#ifndef CARTAGE_BENCH_PEERS_PACK_HARNESS_H_
#define CARTAGE_BENCH_PEERS_PACK_HARNESS_H_

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

typedef void (*pack_harness_fn)(void* ctx);

/* Buffers for both sides alike: 2 MiB aligned, huge pages asked for, touched
 * (page placement otherwise makes whole launches differ by 1.4x here). */
static void* pack_harness_alloc(size_t bytes) {
  void* p = NULL;
  bytes = (bytes + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1); /* whole huge pages */
  if (posix_memalign(&p, (size_t)2 << 20, bytes) != 0) abort();
  madvise(p, bytes, MADV_HUGEPAGE);
  memset(p, 1, bytes);
  return p;
}

static double pack_harness_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int pack_harness_cmp(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

/* Prints one JSON line: {"system":..,"case":..,"block":..,"bytes":..,"median_GBps":..,"min_GBps":..,"max_GBps":..} */
static void pack_harness_run(const char* system, const char* what, long block, long bytes, int reps,
                             pack_harness_fn fn, void* ctx) {
  double* v = (double*)malloc(sizeof(double) * (size_t)reps);
  long iters = 1;
  int i;
  long k;
  for (i = 0; i < 3; ++i) fn(ctx);
  for (;;) { /* calibrate: double until one repetition takes >= 20 ms */
    const double t0 = pack_harness_now();
    for (k = 0; k < iters; ++k) fn(ctx);
    if (pack_harness_now() - t0 >= 0.02 || iters >= (1L << 30)) break;
    iters *= 2;
  }
  for (i = 0; i < reps; ++i) {
    const double t0 = pack_harness_now();
    for (k = 0; k < iters; ++k) fn(ctx);
    v[i] = (double)bytes * (double)iters / (pack_harness_now() - t0) / 1e9;
  }
  qsort(v, (size_t)reps, sizeof(double), pack_harness_cmp);
  printf("{\"system\":\"%s\",\"case\":\"%s\",\"block\":%ld,\"bytes\":%ld,\"median_GBps\":%.3f,\"min_GBps\":%.3f,"
         "\"max_GBps\":%.3f}\n",
         system, what, block, bytes, v[reps / 2], v[0], v[reps - 1]);
  fflush(stdout);
  free(v);
}

#endif /* CARTAGE_BENCH_PEERS_PACK_HARNESS_H_ */
