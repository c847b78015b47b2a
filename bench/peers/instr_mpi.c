/* instr-mpi: bench/instr_probe.cc over MPI, for bench/run-instructions.sh:
 * the same rounds, sleeps and counted calls (instr_send, instr_recv,
 * instr_isend, instr_irecv, instr_post, instr_complete, instr_barrier) and
 * the same page the ranks share to know a message is there, so callgrind
 * counts the same work in each system.
 *
 * usage: mpirun -n 2 instr-mpi [rounds, default 200] [sleep_us, the later
 *        barrier rank's pause, default 2000] */
#include <fcntl.h>
#include <mpi.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* The counted calls, kept out of line and uncloned so callgrind can name them. */
__attribute__((noipa)) int instr_send(const char* buf, int peer) {
  return MPI_Send(buf, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
}
__attribute__((noipa)) int instr_recv(char* buf, int peer) {
  return MPI_Recv(buf, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}
__attribute__((noipa)) int instr_isend(const char* buf, int peer) {
  MPI_Request r;
  MPI_Isend(buf, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &r);
  return MPI_Wait(&r, MPI_STATUS_IGNORE);
}
__attribute__((noipa)) int instr_irecv(char* buf, int peer) {
  MPI_Request r;
  MPI_Irecv(buf, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &r);
  return MPI_Wait(&r, MPI_STATUS_IGNORE);
}
/* A receive posted before its message comes: the post, then the wait that finds it. */
__attribute__((noipa)) int instr_post(char* buf, int peer, MPI_Request* r) {
  return MPI_Irecv(buf, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, r);
}
__attribute__((noipa)) int instr_complete(MPI_Request* r) { return MPI_Wait(r, MPI_STATUS_IGNORE); }
__attribute__((noipa)) int instr_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD); }

/* The page the two ranks share (instr_probe.cc's SharePage). */
static _Atomic uint64_t* SharePage(int me) {
  char name[64] = {0};
  int fd = -1;
  if (me == 0) {
    snprintf(name, sizeof(name), "/cartage-instr-mpi-%d", (int)getpid());
    fd = shm_open(name, O_CREAT | O_RDWR | O_EXCL, 0600);
    if (fd >= 0 && ftruncate(fd, 4096) != 0) {
      close(fd);
      fd = -1;
    }
    if (fd < 0) name[0] = '\0';
    MPI_Send(name, sizeof(name), MPI_CHAR, 1, 1, MPI_COMM_WORLD);
    MPI_Recv(NULL, 0, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (fd >= 0) shm_unlink(name);
  } else {
    MPI_Recv(name, sizeof(name), MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (name[0] != '\0') fd = shm_open(name, O_RDWR, 0);
    MPI_Send(NULL, 0, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
  }
  if (fd < 0) return NULL;
  void* page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return page == MAP_FAILED ? NULL : (_Atomic uint64_t*)page;
}

static void AwaitAtLeast(_Atomic uint64_t* word, uint64_t want) {
  while (atomic_load_explicit(word, memory_order_acquire) < want) sched_yield();
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  const int rounds = argc > 1 ? atoi(argv[1]) : 200;
  const int sleep_us = argc > 2 ? atoi(argv[2]) : 2000;
  enum { kWarmUp = 20 };
  int me, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2 || rounds < 1 || sleep_us < 1) {
    if (me == 0) fprintf(stderr, "usage: mpirun -n 2 instr-mpi [rounds >= 1] [sleep_us >= 1]\n");
    MPI_Finalize();
    return 2;
  }
  const int peer = 1 - me;
  _Atomic uint64_t* page = SharePage(me);
  if (page == NULL) {
    fprintf(stderr, "instr-mpi: rank %d cannot share a page with rank %d\n", me, peer);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  _Atomic uint64_t* sent = page;         /* [rank]: messages sent */
  _Atomic uint64_t* entered = page + 8;  /* [rank]: 1 + the round whose barrier it entered first */
  _Atomic uint64_t* posted = page + 16;  /* [rank]: receives posted first */
  char out[8] = {'c', 'a', 'r', 't', 'a', 'g', 'e', (char)me};
  char in[8] = {0};
  uint64_t received = 0;
  uint64_t peer_posted = 0;
  for (int r = 0; r < kWarmUp + rounds; ++r) {
    const int counted = r >= kWarmUp;
    for (int blocking = 1; blocking >= 0; --blocking) {
      for (int from = 0; from < 2; ++from) {
        if (me == from) {
          if (!counted) MPI_Send(out, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
          else if (blocking) instr_send(out, peer);
          else instr_isend(out, peer);
          atomic_fetch_add_explicit(&sent[me], 1, memory_order_release);
        } else {
          AwaitAtLeast(&sent[peer], ++received);
          in[7] = 0;
          if (!counted) MPI_Recv(in, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
          else if (blocking) instr_recv(in, peer);
          else instr_irecv(in, peer);
          if (in[7] != (char)peer) {
            fprintf(stderr, "instr-mpi: rank %d got a wrong message in round %d\n", me, r);
            MPI_Abort(MPI_COMM_WORLD, 1);
          }
        }
      }
    }
    for (int from = 0; from < 2; ++from) {
      if (me == from) {
        AwaitAtLeast(&posted[peer], ++peer_posted);
        MPI_Send(out, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD);
        atomic_fetch_add_explicit(&sent[me], 1, memory_order_release);
      } else {
        MPI_Request req;
        in[7] = 0;
        if (counted) instr_post(in, peer, &req);
        else MPI_Irecv(in, 8, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &req);
        atomic_fetch_add_explicit(&posted[me], 1, memory_order_release);
        AwaitAtLeast(&sent[peer], ++received);
        if (counted) instr_complete(&req);
        else MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (in[7] != (char)peer) {
          fprintf(stderr, "instr-mpi: rank %d got a wrong posted message in round %d\n", me, r);
          MPI_Abort(MPI_COMM_WORLD, 1);
        }
      }
    }
    if (me == r % 2) {
      AwaitAtLeast(&entered[peer], (uint64_t)r + 1);
      usleep((useconds_t)sleep_us);
      if (counted) instr_barrier();
      else MPI_Barrier(MPI_COMM_WORLD);
    } else {
      atomic_store_explicit(&entered[me], (uint64_t)r + 1, memory_order_release);
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  printf("instr-mpi rank %d: %d sends, %d receives of each kind, %d barriers counted\n", me, rounds, rounds,
         rounds / 2 + (me == 0 ? rounds % 2 : 0));
  MPI_Finalize();
  return 0;
}
