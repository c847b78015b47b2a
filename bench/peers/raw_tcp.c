/* raw-tcp: the floor a TCP method is measured against. Two processes (a
 * fork), pinned to CPUs 0 and 1 like `cartage run --bind`, one loopback TCP
 * connection with TCP_NODELAY, no runtime at all:
 *
 *   raw-tcp pingpong  non-blocking sockets polled in a busy loop (send and
 *                     recv with MSG_DONTWAIT, retried until the whole message
 *                     is through): one-way latency = round trip / 2, in
 *                     microseconds
 *   raw-tcp blocking  the same with blocking send and recv (what a runtime
 *                     that sleeps in the kernel pays)
 *   raw-tcp bw        a window of 64 messages written back to back, then a
 *                     4-byte ack (the receiver reads them straight into its
 *                     buffer), busy-polled as above: MB/s, 1 MB = 10^6 B
 *
 * Sizes, iterations, warm-up and repetitions match cartage-bench; the output
 * is the same JSON lines (median, min, max over repetitions).
 * usage: raw-tcp pingpong|blocking|bw [reps] */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const size_t kSizes[] = {0, 8, 64, 1024, 8192, 65536, 1048576, 4194304};
enum { kWindow = 64 };

static double Now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void Die(const char* what) {
  perror(what);
  exit(1);
}

static void Pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)sched_setaffinity(0, sizeof(set), &set);
}

static int g_spin = 1;

static void SendAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL | (g_spin ? MSG_DONTWAIT : 0));
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      Die("send");
    }
    p += k;
    n -= (size_t)k;
  }
}

static void RecvAll(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t k = recv(fd, p, n, g_spin ? MSG_DONTWAIT : 0);
    if (k < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      Die("recv");
    }
    if (k == 0) {
      fprintf(stderr, "raw-tcp: peer closed\n");
      exit(1);
    }
    p += k;
    n -= (size_t)k;
  }
}

static int Iterations(int pingpong, size_t bytes) {
  if (pingpong) return bytes <= 8192 ? 20000 : bytes <= 65536 ? 2000 : bytes <= (1 << 20) ? 300 : 60;
  return bytes <= 8192 ? 300 : bytes <= 65536 ? 60 : bytes <= (1 << 20) ? 10 : 4;
}

/* One repetition; returns seconds. */
static double Run(int fd, int rank, int pingpong, char* buf, size_t bytes, int iters) {
  char sync = 's';
  if (rank == 0) {
    SendAll(fd, &sync, 1);
    RecvAll(fd, &sync, 1);
  } else {
    RecvAll(fd, &sync, 1);
    SendAll(fd, &sync, 1);
  }
  double start = Now();
  for (int i = 0; i < iters; ++i) {
    if (pingpong) {
      if (rank == 0) {
        SendAll(fd, buf, bytes);
        RecvAll(fd, buf, bytes);
      } else {
        RecvAll(fd, buf, bytes);
        SendAll(fd, buf, bytes);
      }
    } else {
      int ack = 0;
      for (int k = 0; k < kWindow; ++k) {
        if (rank == 0) SendAll(fd, buf, bytes);
        else RecvAll(fd, buf, bytes);
      }
      if (rank == 0) RecvAll(fd, (char*)&ack, sizeof(ack));
      else SendAll(fd, (const char*)&ack, sizeof(ack));
    }
  }
  return Now() - start;
}

static int Cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char** argv) {
  if (argc < 2 || (strcmp(argv[1], "pingpong") && strcmp(argv[1], "blocking") && strcmp(argv[1], "bw"))) {
    fprintf(stderr, "usage: raw-tcp pingpong|blocking|bw [reps]\n");
    return 2;
  }
  const int pingpong = strcmp(argv[1], "bw") != 0;
  g_spin = strcmp(argv[1], "blocking") != 0;
  const int reps = argc > 2 ? atoi(argv[2]) : 5;
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (lfd < 0 || bind(lfd, (struct sockaddr*)&a, sizeof(a)) || listen(lfd, 1)) Die("listen");
  socklen_t len = sizeof(a);
  getsockname(lfd, (struct sockaddr*)&a, &len);
  fflush(stdout);
  pid_t child = fork();
  if (child < 0) Die("fork");
  const int rank = child == 0 ? 1 : 0;
  int fd;
  if (rank == 1) {
    close(lfd);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr*)&a, sizeof(a))) Die("connect");
  } else {
    fd = accept(lfd, NULL, NULL);
    if (fd < 0) Die("accept");
    close(lfd);
  }
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  Pin(rank);
  char* buf = malloc(4194304 + 1);
  memset(buf, 'x', 4194304 + 1);
  double samples[64];
  for (size_t s = 0; s < sizeof(kSizes) / sizeof(kSizes[0]); ++s) {
    const size_t bytes = kSizes[s];
    const int iters = Iterations(pingpong, bytes);
    (void)Run(fd, rank, pingpong, buf, bytes, iters / 5 > 0 ? iters / 5 : 1);  /* warm-up */
    for (int r = 0; r < reps && r < 64; ++r) {
      const double secs = Run(fd, rank, pingpong, buf, bytes, iters);
      samples[r] = pingpong ? secs * 1e6 / (2.0 * iters) : (double)bytes * kWindow * iters / secs / 1e6;
    }
    if (rank != 0) continue;
    const int n = reps < 64 ? reps : 64;
    qsort(samples, (size_t)n, sizeof(double), Cmp);
    const double median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
    printf("{\"test\":\"%s\",\"size\":%zu,\"%s\":%.6g,\"min\":%.6g,\"max\":%.6g,\"reps\":%d,\"method\":\"raw-tcp\"}\n",
           pingpong ? "pingpong" : "bw", bytes, pingpong ? "median_us" : "median_MBps", median, samples[0],
           samples[n - 1], n);
    fflush(stdout);
  }
  free(buf);
  close(fd);
  if (rank == 0) waitpid(child, NULL, 0);
  (void)g_spin;
  return 0;
}
