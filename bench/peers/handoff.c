/* handoff-probe: the placement probe bench/compare runs before and after
 * every sample. Two threads, pinned to CPU 0 and CPU 1, ping-pong a flag in
 * one cache line; the one-way hand-off time says how the VM placed its two
 * vCPUs at that moment (on this machine kind about 60 ns "near" or about
 * 190 ns "far", which moves small-message latency about 3x; see
 * bench/README.md, "Placement").
 *
 * Prints one JSON line: {"handoff_ns": median, "min": ..., "max": ...} over
 * `reps` runs of 20,000 round trips (default 5).
 * usage: handoff-probe [reps] */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kRounds = 20000 };

static _Alignas(64) _Atomic uint64_t g_flag;

static void Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  /* With fewer CPUs the probe still runs, unpinned (and says little). */
  (void)pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Spins until the flag reads `want`, yielding now and then: if the two
 * threads end up on one CPU (fewer CPUs, or other jobs running), a pure spin
 * would cost a whole time slice per hand-off. */
static void Await(uint64_t want) {
  for (int spins = 0; atomic_load_explicit(&g_flag, memory_order_acquire) != want;) {
    if (++spins >= 4096) {
      sched_yield();
      spins = 0;
    }
  }
}

/* The responder: answers every odd value with the next even one. */
static void* Responder(void* arg) {
  const uint64_t total = *(const uint64_t*)arg;
  Pin(1);
  for (uint64_t want = 1; want < total; want += 2) {
    Await(want);
    atomic_store_explicit(&g_flag, want + 1, memory_order_release);
  }
  return NULL;
}

static int CompareDoubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 5;
  if (reps < 1 || reps > 1000) {
    fprintf(stderr, "usage: handoff-probe [reps 1..1000]\n");
    return 2;
  }
  uint64_t total = 2ull * kRounds * (uint64_t)reps + 1;
  pthread_t responder;
  if (pthread_create(&responder, NULL, Responder, &total) != 0) {
    perror("handoff-probe: pthread_create");
    return 1;
  }
  Pin(0);
  double* ns = calloc((size_t)reps, sizeof(double));
  uint64_t value = 0;
  for (int r = 0; r < reps; ++r) {
    const double start = Now();
    for (int i = 0; i < kRounds; ++i) {
      atomic_store_explicit(&g_flag, ++value, memory_order_release);
      ++value;
      Await(value);
    }
    ns[r] = (Now() - start) * 1e9 / (2.0 * kRounds);
  }
  pthread_join(responder, NULL);
  qsort(ns, (size_t)reps, sizeof(double), CompareDoubles);
  printf("{\"handoff_ns\":%.1f,\"min\":%.1f,\"max\":%.1f,\"reps\":%d}\n", ns[reps / 2], ns[0], ns[reps - 1], reps);
  free(ns);
  return 0;
}
