/* The MPI binding's collectives whose two sides differ in type,
 * MPI_Alltoallw, collectives on an intercommunicator in every mode
 * (blocking, nonblocking, persistent), MPI_Comm_idup, and Cartesian
 * topologies with a neighbourhood collective, each checked for exact values.
 * Runs on 4 ranks (mpi_collectives). */
#define CHECK_PROGRAM "mpi_collectives"
#include "mpi_check.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

enum { kGap = -7 };

/* Gather: each rank sends 4 ints; the root receives 2 elements of a
 * vector type (two ints, one apart) from each, so every third int of its
 * buffer is a gap that must stay. Then the same the other way round
 * (scatter from the vector layout into plain ints), nonblocking. */
static void TwoTypes(int rank, int size) {
  MPI_Datatype pair;
  CHECK_OK(MPI_Type_vector(2, 1, 2, MPI_INT, &pair));
  CHECK_OK(MPI_Type_commit(&pair));
  int mine[4], all[4 * 3 * 2];
  for (int i = 0; i < 4; ++i) mine[i] = rank * 100 + i;
  for (int i = 0; i < 24; ++i) all[i] = kGap;
  CHECK_OK(MPI_Gather(mine, 4, MPI_INT, all, 2, pair, 1, MPI_COMM_WORLD));
  if (rank == 1) {
    for (int r = 0; r < size; ++r) {
      const int* b = all + r * 6; /* 2 elements of extent 3 ints */
      CHECK(b[0] == r * 100 && b[1] == kGap && b[2] == r * 100 + 1);
      CHECK(b[3] == r * 100 + 2 && b[4] == kGap && b[5] == r * 100 + 3);
    }
  }
  /* Scatter back from that layout: rank r gets its 4 ints again. */
  int back[4] = {kGap, kGap, kGap, kGap};
  MPI_Request req;
  CHECK_OK(MPI_Iscatter(all, 2, pair, back, 4, MPI_INT, 1, MPI_COMM_WORLD, &req));
  CHECK_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
  for (int i = 0; i < 4; ++i) CHECK(back[i] == rank * 100 + i);
  /* Allgather of one int as MPI_INT into a contiguous type of one int. */
  MPI_Datatype one;
  CHECK_OK(MPI_Type_contiguous(1, MPI_INT, &one));
  CHECK_OK(MPI_Type_commit(&one));
  int ranks[4] = {kGap, kGap, kGap, kGap};
  CHECK_OK(MPI_Allgather(&rank, 1, MPI_INT, ranks, 1, one, MPI_COMM_WORLD));
  for (int r = 0; r < size; ++r) CHECK(ranks[r] == r);
  /* A signature that does not match is an error, not a silent copy. */
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  CHECK(MPI_Allgather(&rank, 1, MPI_INT, ranks, 1, pair, MPI_COMM_WORLD) != MPI_SUCCESS);
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  CHECK_OK(MPI_Type_free(&one));
  CHECK_OK(MPI_Type_free(&pair));
}

/* Alltoallw: rank r sends rank j (j + 1) ints, as plain ints to even ranks
 * and as a contiguous type of (j + 1) ints to odd ones, at byte
 * displacements; it receives each rank's block in reverse rank order. */
static void Alltoallw(int rank, int size) {
  MPI_Datatype block[4], ints[4];
  int scounts[4], sdispls[4], rcounts[4], rdispls[4];
  int sendbuf[16], recvbuf[24];
  for (int i = 0; i < 24; ++i) recvbuf[i] = kGap;
  int at = 0;
  for (int j = 0; j < size; ++j) {
    CHECK_OK(MPI_Type_contiguous(j + 1, MPI_INT, &block[j]));
    CHECK_OK(MPI_Type_commit(&block[j]));
    ints[j] = MPI_INT;
    scounts[j] = j % 2 == 0 ? j + 1 : 1;
    sdispls[j] = at * (int)sizeof(int);
    for (int m = 0; m <= j; ++m) sendbuf[at + m] = rank * 1000 + j * 10 + m;
    at += j + 1;
  }
  /* Receive rank j's block (rank + 1 ints) in reverse order, after a gap. */
  at = 1;
  for (int j = size - 1; j >= 0; --j) {
    rcounts[j] = rank + 1;
    rdispls[j] = at * (int)sizeof(int);
    at += rank + 2;
  }
  MPI_Datatype stypes[4];
  for (int j = 0; j < size; ++j) stypes[j] = j % 2 == 0 ? ints[j] : block[j];
  MPI_Request req;
  CHECK_OK(MPI_Ialltoallw(sendbuf, scounts, sdispls, stypes, recvbuf, rcounts, rdispls, ints, MPI_COMM_WORLD, &req));
  CHECK_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
  CHECK(recvbuf[0] == kGap);
  for (int j = 0; j < size; ++j) {
    const int* b = recvbuf + rdispls[j] / (int)sizeof(int);
    for (int m = 0; m <= rank; ++m) CHECK(b[m] == j * 1000 + rank * 10 + m);
    if (j > 0) CHECK(b[rank + 1] == kGap);
  }
  for (int j = 0; j < size; ++j) CHECK_OK(MPI_Type_free(&block[j]));
}

/* (a, b) -> a * 10 + b, which is not commutative: shows the rank order. */
static void Digits(void* in, void* inout, int* len, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *len; ++i) ((int*)inout)[i] = ((int*)in)[i] * 10 + ((int*)inout)[i];
}

/* Evens and odds joined: collectives from one group to the other. */
static void Intercomm(int rank) {
  MPI_Comm half, inter;
  const int low = rank % 2 == 0; /* evens are group A */
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
  CHECK_OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, low ? 1 : 0, 9, &inter));
  int local = -1;
  CHECK_OK(MPI_Comm_rank(inter, &local));
  MPI_Request reqs[5];

  /* Ibcast from A's rank 1 to B; Iallreduce with the ordered operator;
   * Ireduce_scatter_block; Ibarrier; Ialltoall: all in flight at once. */
  int word = low && local == 1 ? 4242 : -1;
  const int root = low ? (local == 1 ? MPI_ROOT : MPI_PROC_NULL) : 1;
  CHECK_OK(MPI_Ibcast(&word, 1, MPI_INT, root, inter, &reqs[0]));
  MPI_Op digits;
  CHECK_OK(MPI_Op_create(Digits, 0, &digits));
  const int digit = rank + 1; /* A: 1, 3; B: 2, 4 */
  int folded = -1;
  CHECK_OK(MPI_Iallreduce(&digit, &folded, 1, MPI_INT, digits, inter, &reqs[1]));
  int vec[2] = {rank, rank * 10}, part = -1;
  CHECK_OK(MPI_Ireduce_scatter_block(vec, &part, 1, MPI_INT, MPI_SUM, inter, &reqs[2]));
  CHECK_OK(MPI_Ibarrier(inter, &reqs[3]));
  int to_each[2] = {rank * 10, rank * 10 + 1}, from_each[2] = {-1, -1};
  CHECK_OK(MPI_Ialltoall(to_each, 1, MPI_INT, from_each, 1, MPI_INT, inter, &reqs[4]));
  CHECK_OK(MPI_Waitall(5, reqs, MPI_STATUSES_IGNORE));
  CHECK(word == (low ? (local == 1 ? 4242 : -1) : 4242));
  /* A receives B's digits in rank order (2 then 4), B receives A's (1, 3). */
  CHECK(folded == (low ? 24 : 13));
  /* B's ranks 1 and 3 sum to {4, 40}: A's rank `local` gets element local; A's 0 + 2 to B. */
  CHECK(part == (low ? (local == 0 ? 4 : 40) : (local == 0 ? 2 : 20)));
  /* Remote rank r sent me its element `local`. */
  const int other = low ? 1 : 0;
  for (int r = 0; r < 2; ++r) CHECK(from_each[r] == (2 * r + other) * 10 + local);

  /* A persistent gather of B's ranks at A's rank 0, started twice. */
  int got[2] = {-1, -1}, sent = rank;
  const int groot = low ? (local == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
  MPI_Request p;
  CHECK_OK(MPI_Gather_init(&sent, 1, MPI_INT, got, 1, MPI_INT, groot, inter, MPI_INFO_NULL, &p));
  for (int round = 0; round < 2; ++round) {
    sent = rank + round * 100;
    CHECK_OK(MPI_Start(&p));
    CHECK_OK(MPI_Wait(&p, MPI_STATUS_IGNORE));
    if (groot == MPI_ROOT) CHECK(got[0] == 1 + round * 100 && got[1] == 3 + round * 100);
  }
  CHECK_OK(MPI_Request_free(&p));
  CHECK_OK(MPI_Op_free(&digits));
  CHECK_OK(MPI_Comm_free(&inter));

  /* The same two groups joined from groups alone (MPI-4): a sum of the other group's ranks. */
  MPI_Group world, evens, odds;
  const int even_ranks[2] = {0, 2}, odd_ranks[2] = {1, 3};
  CHECK_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  CHECK_OK(MPI_Group_incl(world, 2, even_ranks, &evens));
  CHECK_OK(MPI_Group_incl(world, 2, odd_ranks, &odds));
  CHECK_OK(MPI_Intercomm_create_from_groups(low ? evens : odds, 1, low ? odds : evens, 1, "mpi_collectives",
                                            MPI_INFO_NULL, MPI_ERRORS_RETURN, &inter));
  int theirs = -1;
  CHECK_OK(MPI_Allreduce(&rank, &theirs, 1, MPI_INT, MPI_SUM, inter));
  CHECK(theirs == (low ? 1 + 3 : 0 + 2));
  MPI_Errhandler handler;
  CHECK_OK(MPI_Comm_get_errhandler(inter, &handler));
  CHECK(handler == MPI_ERRORS_RETURN);
  MPI_Group* groups[] = {&world, &evens, &odds};
  for (int i = 0; i < 3; ++i) CHECK_OK(MPI_Group_free(groups[i]));
  CHECK_OK(MPI_Comm_free(&inter));
  CHECK_OK(MPI_Comm_free(&half));
}

/* MPI_Comm_idup on two communicators that share every rank, started in
 * one order on even ranks and the other on odd ones (a blocking dup would
 * deadlock), with an allreduce of the parent still in flight; then an
 * intercommunicator's. Each copy must carry traffic of its own. */
static void Idup(int rank, int size) {
  MPI_Comm a, b, copy_a = MPI_COMM_NULL, copy_b = MPI_COMM_NULL;
  CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &b)); /* reversed */
  int rb = -1; /* b takes the slot a freed intercommunicator had: none of its groups may stay */
  CHECK_OK(MPI_Comm_rank(b, &rb));
  CHECK(rb == size - 1 - rank);
  MPI_Request reqs[3];
  int one = 1, total = 0;
  CHECK_OK(MPI_Iallreduce(&one, &total, 1, MPI_INT, MPI_SUM, a, &reqs[2]));
  if (rank % 2 == 0) {
    CHECK_OK(MPI_Comm_idup(a, &copy_a, &reqs[0]));
    CHECK_OK(MPI_Comm_idup(b, &copy_b, &reqs[1]));
  } else {
    CHECK_OK(MPI_Comm_idup(b, &copy_b, &reqs[1]));
    CHECK_OK(MPI_Comm_idup(a, &copy_a, &reqs[0]));
  }
  CHECK(copy_a == MPI_COMM_NULL && copy_b == MPI_COMM_NULL); /* set when their requests complete */
  CHECK_OK(MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE));
  CHECK(total == size && copy_a != MPI_COMM_NULL && copy_b != MPI_COMM_NULL && copy_a != copy_b);
  int r = -1, cmp = -1;
  CHECK_OK(MPI_Comm_rank(copy_b, &r));
  CHECK(r == size - 1 - rank);
  CHECK_OK(MPI_Comm_compare(copy_a, a, &cmp));
  CHECK(cmp == MPI_CONGRUENT);
  /* The same tag on the three: each message arrives on its own. */
  const int to = (rank + 1) % size, from = (rank + size - 1) % size;
  int got[3] = {-1, -1, -1};
  MPI_Comm comms[3] = {a, copy_a, copy_b};
  for (int i = 0; i < 3; ++i) CHECK_OK(MPI_Irecv(&got[i], 1, MPI_INT, MPI_ANY_SOURCE, 5, comms[i], &reqs[i]));
  for (int i = 2; i >= 0; --i) {
    const int word = rank * 10 + i;
    const int dest = i == 2 ? size - 1 - to : to; /* copy_b's ranks are reversed */
    CHECK_OK(MPI_Send(&word, 1, MPI_INT, dest, 5, comms[i]));
  }
  CHECK_OK(MPI_Waitall(3, reqs, MPI_STATUSES_IGNORE));
  for (int i = 0; i < 3; ++i) CHECK(got[i] == from * 10 + i);

  /* An intercommunicator's copy, and a collective on it. */
  MPI_Comm half, inter, inter_copy = MPI_COMM_NULL;
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
  CHECK_OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 11, &inter));
  CHECK_OK(MPI_Comm_idup(inter, &inter_copy, &reqs[0]));
  CHECK_OK(MPI_Wait(&reqs[0], MPI_STATUS_IGNORE));
  int remote = 0, sum = 0;
  CHECK_OK(MPI_Comm_remote_size(inter_copy, &remote));
  CHECK(remote == 2);
  CHECK_OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, inter_copy));
  CHECK(sum == (rank % 2 == 0 ? 1 + 3 : 0 + 2)); /* the other group's ranks */
  MPI_Comm* all[] = {&inter_copy, &inter, &half, &copy_a, &copy_b, &a, &b};
  for (int i = 0; i < 7; ++i) CHECK_OK(MPI_Comm_free(all[i]));
}

/* A 2 x 2 grid, periodic in its first dimension only: coordinates,
 * shifts, a row of it, and a neighbourhood alltoall with exact blocks. */
static void Cartesian(int rank, int size) {
  int dims[2] = {0, 0};
  CHECK_OK(MPI_Dims_create(size, 2, dims));
  CHECK(dims[0] == 2 && dims[1] == 2);
  int three[3] = {0, 3, 0};
  CHECK_OK(MPI_Dims_create(12, 3, three)); /* 12 / 3 = 4 left for two: 2 x 2 */
  CHECK(three[0] == 2 && three[1] == 3 && three[2] == 2);
  const int periods[2] = {1, 0};
  MPI_Comm grid, row;
  CHECK_OK(MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid));
  int topo = -1, coords[2] = {-1, -1};
  CHECK_OK(MPI_Topo_test(grid, &topo));
  CHECK(topo == MPI_CART);
  CHECK_OK(MPI_Cart_coords(grid, rank, 2, coords));
  CHECK(coords[0] == rank / 2 && coords[1] == rank % 2);
  int back = -1, forward = -1;
  CHECK_OK(MPI_Cart_shift(grid, 0, 1, &back, &forward)); /* periodic: both exist */
  CHECK(back == (rank + 2) % 4 && forward == (rank + 2) % 4);
  CHECK_OK(MPI_Cart_shift(grid, 1, 1, &back, &forward)); /* not: one is off the edge */
  CHECK(back == (rank % 2 == 1 ? rank - 1 : MPI_PROC_NULL) && forward == (rank % 2 == 0 ? rank + 1 : MPI_PROC_NULL));
  /* Blocks 0 and 1 go back and forward along dimension 0, 2 and 3 along 1. */
  int out[4], in[4] = {-1, -1, -1, -1};
  for (int k = 0; k < 4; ++k) out[k] = rank * 10 + k;
  MPI_Request req;
  CHECK_OK(MPI_Ineighbor_alltoall(out, 1, MPI_INT, in, 1, MPI_INT, grid, &req));
  CHECK_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
  const int across = (rank + 2) % 4; /* back and forward along 0: what it sends forward, then back */
  CHECK(in[0] == across * 10 + 1 && in[1] == across * 10 + 0);
  CHECK(in[2] == (rank % 2 == 1 ? (rank - 1) * 10 + 3 : -1) && in[3] == (rank % 2 == 0 ? (rank + 1) * 10 + 2 : -1));
  const int keep[2] = {0, 1};
  CHECK_OK(MPI_Cart_sub(grid, keep, &row));
  int r = -1, n = 0, ndims = 0;
  CHECK_OK(MPI_Comm_rank(row, &r));
  CHECK_OK(MPI_Comm_size(row, &n));
  CHECK_OK(MPI_Cartdim_get(row, &ndims));
  CHECK(r == rank % 2 && n == 2 && ndims == 1);
  CHECK_OK(MPI_Comm_free(&row));
  CHECK_OK(MPI_Comm_free(&grid));
}

int main(int argc, char** argv) {
  CHECK_OK(MPI_Init(&argc, &argv));
  int rank = -1, size = 0;
  CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  g_rank = rank;
  CHECK(size == 4);
  TwoTypes(rank, size);
  Alltoallw(rank, size);
  Intercomm(rank);
  Idup(rank, size);
  Cartesian(rank, size);
  CHECK_OK(MPI_Finalize());
  printf("mpi_collectives: rank %d of %d: every check passed\n", rank, size);
  return 0;
}
