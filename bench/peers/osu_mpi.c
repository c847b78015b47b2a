/* osu-mpi: the MPI side of bench/compare. OSU methodology, with the same
 * tests, sizes, iteration counts and JSON lines as cartage-bench, so that
 * one table can hold both:
 *
 *   pingpong   ranks 0 and 1; one-way latency = round trip / 2 (µs)
 *   bw         window of 64 MPI_Isend, then a 4-byte ack (MB/s, 10^6 B)
 *   bibw       both ranks send a window of 64 and receive one (MB/s, both
 *              directions counted, as osu_bibw does)
 *   rate       the bw window with 8-byte messages (messages/s)
 *   match_posted[_any]
 *              the receiver posts N receives (tags 0..N-1, source 0 or
 *              MPI_ANY_SOURCE), then the sender sends tags N-1..0: each
 *              arrival's match is the last of the posted queue (µs/message)
 *   match_unexpected[_any]
 *              the sender sends tags 0..N-1 before any receive is posted;
 *              the receiver then receives tags N-1..0 (µs/message)
 *   put_lat get_lat acc_lat
 *              one-sided, as osu_put_latency, osu_get_latency and
 *              osu_acc_latency with a lock: rank 0 locks rank 1's window
 *              (MPI_Win_allocate), puts (gets, accumulates doubles) and
 *              unlocks (µs an epoch)
 *   put_bw     the same with a window of 64 puts an epoch (MB/s)
 *   barrier bcast allreduce allgather alltoall
 *              every rank; the per-call time of each rank averaged over the
 *              ranks (osu_* do the same); bcast from rank 0, allreduce is a
 *              sum of doubles; sizes are bytes per rank
 *
 * Each size: a warm-up, then --reps (-r) timed repetitions; the median with
 * min and max. Point-to-point tests run cartage-bench's fixed iteration
 * counts; collectives calibrate theirs so that a repetition takes about
 * -T seconds (oversubscribed MPICH takes milliseconds per call).
 * "DONE" is printed before MPI_Finalize, which does not always return when
 * MPICH over UCX tcp is oversubscribed.
 *
 * usage: mpirun -n 2 osu-mpi TEST [-s 8,65536,...] [-r 5] [-T 0.05] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kWindow = 64, kControlTag = 32000 };

static int g_rank, g_size;

static int CompareDoubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static int IsTest(const char* test, const char* name) { return strcmp(test, name) == 0; }

static int IsCollective(const char* t) {
  return IsTest(t, "barrier") || IsTest(t, "bcast") || IsTest(t, "allreduce") || IsTest(t, "allgather") ||
         IsTest(t, "alltoall");
}

static int IsMatching(const char* t) { return strncmp(t, "match_", 6) == 0; }

static int IsRma(const char* t) {
  return IsTest(t, "put_lat") || IsTest(t, "get_lat") || IsTest(t, "acc_lat") || IsTest(t, "put_bw");
}

/* cartage-bench's Iterations(), so both sides run the same loops. */
static int Iterations(const char* test, size_t bytes) {
  if (IsTest(test, "pingpong")) return bytes <= 8192 ? 20000 : bytes <= 65536 ? 2000 : bytes <= (1 << 20) ? 300 : 60;
  if (IsRma(test) && !IsTest(test, "put_bw")) {
    return bytes <= 8192 ? 5000 : bytes <= 65536 ? 1000 : bytes <= (1 << 20) ? 100 : 30;
  }
  return bytes <= 8192 ? 300 : bytes <= 65536 ? 60 : bytes <= (1 << 20) ? 10 : 4;
}

static void Sync(void) {
  if (g_rank > 1) return;
  const int peer = 1 - g_rank;
  MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, kControlTag, NULL, 0, MPI_BYTE, peer, kControlTag, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
}

/* A message buffer that starts on a page, as OSU's do (and cartage-bench's):
 * a heap buffer's offset within a page moves with every allocation made
 * before it, and copy speeds with it. */
static char* PageBuffer(size_t bytes) {
  const size_t page = 4096;
  void* p = NULL;
  if (posix_memalign(&p, page, bytes > 0 ? bytes : 1) != 0) {
    fprintf(stderr, "osu_mpi: cannot allocate %zu bytes\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

/* One timed repetition of a point-to-point test between ranks 0 and 1:
 * seconds on this rank's clock. */
static double RunP2p(const char* test, char* sbuf, char* rbuf, size_t bytes, int iters) {
  const int peer = 1 - g_rank;
  const int n = (int)bytes;
  MPI_Request reqs[2 * kWindow];
  Sync();
  const double start = MPI_Wtime();
  if (IsTest(test, "pingpong")) {
    for (int i = 0; i < iters; ++i) {
      if (g_rank == 0) {
        MPI_Send(sbuf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(rbuf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Recv(rbuf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(sbuf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD);
      }
    }
  } else if (IsTest(test, "bibw")) {
    for (int i = 0; i < iters; ++i) {
      for (int w = 0; w < kWindow; ++w) MPI_Irecv(rbuf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &reqs[w]);
      for (int w = 0; w < kWindow; ++w) MPI_Isend(sbuf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &reqs[kWindow + w]);
      MPI_Waitall(2 * kWindow, reqs, MPI_STATUSES_IGNORE);
    }
  } else { /* bw, rate */
    int ack = 0;
    for (int i = 0; i < iters; ++i) {
      for (int w = 0; w < kWindow; ++w) {
        if (g_rank == 0) {
          MPI_Isend(sbuf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD, &reqs[w]);
        } else {
          MPI_Irecv(rbuf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &reqs[w]);
        }
      }
      MPI_Waitall(kWindow, reqs, MPI_STATUSES_IGNORE);
      if (g_rank == 0) {
        MPI_Recv(&ack, 1, MPI_INT, 1, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else {
        MPI_Send(&ack, 1, MPI_INT, 0, 4, MPI_COMM_WORLD);
      }
    }
  }
  return MPI_Wtime() - start;
}

/* One repetition of a matching test with a queue of `depth`: µs per message,
 * on the receiver (rank 1); rank 0 returns 0. */
/* One timed repetition of a one-sided test: rank 0 locks rank 1's window
 * and puts (gets, accumulates) in each epoch; rank 1 makes progress in a
 * receive until rank 0 is done. Seconds on this rank's clock. */
static double RunRma(const char* test, MPI_Win win, char* sbuf, char* rbuf, size_t bytes, int iters) {
  const int n = (int)bytes;
  Sync();
  const double start = MPI_Wtime();
  if (g_rank == 0) {
    for (int i = 0; i < iters; ++i) {
      MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win);
      if (IsTest(test, "put_lat")) {
        MPI_Put(sbuf, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
      } else if (IsTest(test, "get_lat")) {
        MPI_Get(rbuf, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
      } else if (IsTest(test, "acc_lat")) {
        MPI_Accumulate(sbuf, n / 8, MPI_DOUBLE, 1, 0, n / 8, MPI_DOUBLE, MPI_SUM, win);
      } else {
        for (int w = 0; w < kWindow; ++w) MPI_Put(sbuf, n, MPI_BYTE, 1, 0, n, MPI_BYTE, win);
      }
      MPI_Win_unlock(1, win);
    }
    MPI_Send(NULL, 0, MPI_BYTE, 1, kControlTag + 3, MPI_COMM_WORLD);
  } else {
    MPI_Recv(NULL, 0, MPI_BYTE, 0, kControlTag + 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  }
  return MPI_Wtime() - start;
}

static double RunMatching(const char* test, int depth, MPI_Request* reqs, double* bufs) {
  const int any = strstr(test, "_any") != NULL;
  const int source = any ? MPI_ANY_SOURCE : 0;
  double start = 0;
  Sync();
  if (strncmp(test, "match_posted", 12) == 0) {
    if (g_rank == 1) {
      for (int t = 0; t < depth; ++t) MPI_Irecv(&bufs[t], 1, MPI_DOUBLE, source, t, MPI_COMM_WORLD, &reqs[t]);
      start = MPI_Wtime();
      MPI_Send(NULL, 0, MPI_BYTE, 0, kControlTag + 1, MPI_COMM_WORLD);
      MPI_Waitall(depth, reqs, MPI_STATUSES_IGNORE);
    } else {
      MPI_Recv(NULL, 0, MPI_BYTE, 1, kControlTag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      for (int t = depth - 1; t >= 0; --t) MPI_Send(&bufs[t], 1, MPI_DOUBLE, 1, t, MPI_COMM_WORLD);
    }
  } else { /* match_unexpected[_any] */
    if (g_rank == 1) {
      MPI_Recv(NULL, 0, MPI_BYTE, 0, kControlTag + 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      start = MPI_Wtime();
      for (int t = depth - 1; t >= 0; --t) MPI_Irecv(&bufs[t], 1, MPI_DOUBLE, source, t, MPI_COMM_WORLD, &reqs[t]);
      MPI_Waitall(depth, reqs, MPI_STATUSES_IGNORE);
    } else {
      for (int t = 0; t < depth; ++t) MPI_Send(&bufs[t], 1, MPI_DOUBLE, 1, t, MPI_COMM_WORLD);
      MPI_Send(NULL, 0, MPI_BYTE, 1, kControlTag + 1, MPI_COMM_WORLD);
    }
  }
  return g_rank == 1 ? (MPI_Wtime() - start) * 1e6 / depth : 0;
}

/* One repetition of a collective: this rank's seconds for `iters` calls. The
 * test is told apart once, before the clock starts: the loop times the
 * collective, not string comparisons (cartage-bench does the same). */
static double RunCollective(const char* test, char* sbuf, char* rbuf, size_t bytes, int iters) {
  const int n = (int)bytes;
  const int kind = IsTest(test, "barrier") ? 0 : IsTest(test, "bcast") ? 1 : IsTest(test, "allreduce") ? 2
                 : IsTest(test, "allgather") ? 3 : 4;
  MPI_Barrier(MPI_COMM_WORLD);
  const double start = MPI_Wtime();
  for (int i = 0; i < iters; ++i) {
    switch (kind) {
      case 0: MPI_Barrier(MPI_COMM_WORLD); break;
      case 1: MPI_Bcast(sbuf, n, MPI_BYTE, 0, MPI_COMM_WORLD); break;
      case 2: MPI_Allreduce(sbuf, rbuf, n / (int)sizeof(double), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD); break;
      case 3: MPI_Allgather(sbuf, n, MPI_BYTE, rbuf, n, MPI_BYTE, MPI_COMM_WORLD); break;
      default: MPI_Alltoall(sbuf, n, MPI_BYTE, rbuf, n, MPI_BYTE, MPI_COMM_WORLD); break;
    }
  }
  return MPI_Wtime() - start;
}

/* Doubles a collective's iteration count from 1 until a run takes at least a
 * fifth of `target` seconds on rank 0, then scales it to `target`; every rank
 * gets rank 0's answer. The runs double as the warm-up. */
static int CalibrateCollective(const char* test, char* sbuf, char* rbuf, size_t bytes, double target) {
  int iters = 1;
  for (;;) {
    double secs = RunCollective(test, sbuf, rbuf, bytes, iters);
    MPI_Bcast(&secs, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (secs >= target / 5 || iters >= (1 << 24)) {
      const double per_call = secs / iters;
      const double want = target / (per_call > 0 ? per_call : 1e-9);
      return want < 1 ? 1 : want > (1 << 24) ? (1 << 24) : (int)want;
    }
    iters *= 2;
  }
}

static void Report(const char* test, size_t size, const char* key, double* values, int reps, int extra_iters) {
  qsort(values, (size_t)reps, sizeof(double), CompareDoubles);
  printf("{\"test\":\"%s\",\"size\":%zu,\"%s\":%.6g,\"min\":%.6g,\"max\":%.6g,\"reps\":%d,\"ranks\":%d,"
         "\"iterations\":%d}\n",
         test, size, key, values[reps / 2], values[0], values[reps - 1], reps, g_size, extra_iters);
  fflush(stdout);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  const char* test = argc > 1 ? argv[1] : "";
  const char* sizes_arg = NULL;
  int reps = 5;
  double target = 0.05;
  for (int i = 2; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "-s") == 0) sizes_arg = argv[i + 1];
    else if (strcmp(argv[i], "-r") == 0) reps = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "-T") == 0) target = atof(argv[i + 1]);
  }
  const int known = IsTest(test, "pingpong") || IsTest(test, "bw") || IsTest(test, "bibw") || IsTest(test, "rate") ||
                    IsMatching(test) || IsCollective(test) || IsRma(test);
  if (!known || reps < 1 || (!IsCollective(test) && g_size < 2)) {
    if (g_rank == 0) fprintf(stderr, "usage: mpirun -n 2 osu-mpi TEST [-s sizes] [-r reps] [-T seconds]\n");
    MPI_Finalize();
    return 2;
  }
  size_t sizes[64];
  int nsizes = 0;
  if (sizes_arg != NULL) {
    char* copy = strdup(sizes_arg);
    for (char* tok = strtok(copy, ","); tok != NULL && nsizes < 64; tok = strtok(NULL, ",")) {
      sizes[nsizes++] = strtoull(tok, NULL, 10);
    }
    free(copy);
  } else if (IsTest(test, "rate")) {
    sizes[nsizes++] = 8;
  } else if (IsMatching(test)) {
    sizes[nsizes++] = 1000;
    sizes[nsizes++] = 10000;
  } else if (IsTest(test, "barrier")) {
    sizes[nsizes++] = 0;
  } else {
    const size_t defaults[] = {8, 64, 1024, 8192, 65536, 1 << 20, 4 << 20};
    if (IsTest(test, "pingpong")) sizes[nsizes++] = 0;
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); ++i) sizes[nsizes++] = defaults[i];
  }
  double* values = calloc((size_t)reps, sizeof(double));
  for (int s = 0; s < nsizes; ++s) {
    const size_t bytes = sizes[s];
    const size_t per_rank = IsTest(test, "allgather") || IsTest(test, "alltoall") ? bytes * (size_t)g_size : bytes;
    char* sbuf = PageBuffer(per_rank);
    char* rbuf = PageBuffer(per_rank);
    memset(sbuf, 'x', per_rank > 0 ? per_rank : 1);
    memset(rbuf, 0, per_rank > 0 ? per_rank : 1);
    if (IsCollective(test)) {
      const int iters = CalibrateCollective(test, sbuf, rbuf, bytes, target);
      for (int r = 0; r < reps; ++r) {
        const double mine = RunCollective(test, sbuf, rbuf, bytes, iters) * 1e6 / iters;
        double sum = 0;
        MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        values[r] = sum / g_size;
      }
      if (g_rank == 0) Report(test, bytes, "median_us", values, reps, iters);
    } else if (IsMatching(test)) {
      const int depth = (int)bytes;
      if (depth < 1 || depth >= kControlTag) {
        if (g_rank == 0) fprintf(stderr, "osu-mpi: queue length %d out of range\n", depth);
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      MPI_Request* reqs = malloc(sizeof(MPI_Request) * (size_t)depth);
      double* bufs = calloc((size_t)depth, sizeof(double));
      if (g_rank <= 1) {
        (void)RunMatching(test, depth, reqs, bufs); /* warm-up */
        for (int r = 0; r < reps; ++r) values[r] = RunMatching(test, depth, reqs, bufs);
        /* the receiver (rank 1) measured; rank 0 reports */
        if (g_rank == 1) MPI_Send(values, reps, MPI_DOUBLE, 0, kControlTag + 2, MPI_COMM_WORLD);
        if (g_rank == 0) {
          MPI_Recv(values, reps, MPI_DOUBLE, 1, kControlTag + 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          Report(test, bytes, "median_us", values, reps, 1);
        }
      }
      free(reqs);
      free(bufs);
    } else if (IsRma(test)) {
      MPI_Win win;
      void* base = NULL;
      MPI_Win_allocate((MPI_Aint)(bytes > 8 ? bytes : 8), 1, MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
      const int iters = Iterations(test, bytes);
      if (g_rank <= 1) {
        (void)RunRma(test, win, sbuf, rbuf, bytes, iters / 5 > 0 ? iters / 5 : 1); /* warm-up */
        for (int r = 0; r < reps; ++r) {
          const double secs = RunRma(test, win, sbuf, rbuf, bytes, iters);
          values[r] = IsTest(test, "put_bw") ? (double)bytes * kWindow * iters / secs / 1e6 : secs * 1e6 / iters;
        }
        if (g_rank == 0) Report(test, bytes, IsTest(test, "put_bw") ? "median_MBps" : "median_us", values, reps, iters);
      }
      MPI_Win_free(&win);
    } else if (g_rank <= 1) {
      const int iters = Iterations(test, bytes);
      (void)RunP2p(test, sbuf, rbuf, bytes, iters / 5 > 0 ? iters / 5 : 1); /* warm-up */
      for (int r = 0; r < reps; ++r) {
        const double secs = RunP2p(test, sbuf, rbuf, bytes, iters);
        if (IsTest(test, "pingpong")) values[r] = secs * 1e6 / (2.0 * iters);
        else if (IsTest(test, "bw")) values[r] = (double)bytes * kWindow * iters / secs / 1e6;
        else if (IsTest(test, "bibw")) values[r] = 2.0 * (double)bytes * kWindow * iters / secs / 1e6;
        else values[r] = (double)kWindow * iters / secs;
      }
      if (g_rank == 0) {
        const char* key = IsTest(test, "pingpong") ? "median_us" : IsTest(test, "rate") ? "median_msgs_per_s"
                                                                                         : "median_MBps";
        Report(test, bytes, key, values, reps, iters);
      }
    }
    free(sbuf);
    free(rbuf);
  }
  free(values);
  if (g_rank == 0) {
    printf("DONE\n");
    fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
