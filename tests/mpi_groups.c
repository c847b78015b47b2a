/* The MPI binding's groups, intercommunicators, attributes, buffered
 * sends, packing, user operators and persistent collectives, each checked
 * for exact values. Runs on 4 ranks (mpi_groups). */
#define CHECK_PROGRAM "mpi_groups"
#include "mpi_check.h"

#include <mpi.h>
#include <stdio.h>
#include <string.h>

static void Groups(int rank) {
  MPI_Group world, odd, even, both, none;
  CHECK_OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
  int range[1][3] = {{1, 3, 2}};
  CHECK_OK(MPI_Group_range_incl(world, 1, range, &odd));
  CHECK_OK(MPI_Group_range_excl(world, 1, range, &even));
  int n = 0, r = 0;
  CHECK_OK(MPI_Group_size(odd, &n));
  CHECK_OK(MPI_Group_rank(odd, &r));
  CHECK(n == 2 && r == (rank % 2 == 1 ? rank / 2 : MPI_UNDEFINED));
  CHECK_OK(MPI_Group_union(even, odd, &both));
  int cmp = -1;
  CHECK_OK(MPI_Group_compare(both, world, &cmp));
  CHECK(cmp == MPI_SIMILAR); /* 0 2 1 3 against 0 1 2 3 */
  CHECK_OK(MPI_Group_intersection(even, odd, &none));
  CHECK(none == MPI_GROUP_EMPTY);
  const int from[2] = {0, 1};
  int to[2] = {-5, -5};
  CHECK_OK(MPI_Group_translate_ranks(odd, 2, from, both, to));
  CHECK(to[0] == 2 && to[1] == 3);

  /* A communicator of the odd ranks, in reverse order, made by them alone. */
  const int reversed[2] = {1, 0};
  MPI_Group rev;
  CHECK_OK(MPI_Group_incl(odd, 2, reversed, &rev));
  MPI_Comm c = MPI_COMM_NULL;
  if (rank % 2 == 1) {
    CHECK_OK(MPI_Comm_create_group(MPI_COMM_WORLD, rev, 5, &c));
    CHECK_OK(MPI_Comm_rank(c, &r));
    CHECK(r == (rank == 3 ? 0 : 1));
    int sum = 0;
    CHECK_OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == 4);
    CHECK_OK(MPI_Comm_free(&c));
  }
  /* Then one from the even group by every rank (MPI_Comm_create). */
  CHECK_OK(MPI_Comm_create(MPI_COMM_WORLD, even, &c));
  CHECK((c == MPI_COMM_NULL) == (rank % 2 == 1));
  if (c != MPI_COMM_NULL) {
    CHECK_OK(MPI_Comm_compare(c, MPI_COMM_WORLD, &cmp));
    CHECK(cmp == MPI_UNEQUAL);
    CHECK_OK(MPI_Comm_free(&c));
  }
  MPI_Group* groups[] = {&world, &odd, &even, &both, &none, &rev};
  for (int i = 0; i < 6; ++i) CHECK_OK(MPI_Group_free(groups[i]));
}

static void Intercomms(int rank) {
  /* Evens and odds, joined; each sends its world rank to the remote rank of
   * its own local rank, then the two are merged with the odds first. */
  MPI_Comm half, inter, merged;
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
  CHECK_OK(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 7, &inter));
  int flag = 0, n = 0, local = 0;
  CHECK_OK(MPI_Comm_test_inter(inter, &flag));
  CHECK_OK(MPI_Comm_remote_size(inter, &n));
  CHECK_OK(MPI_Comm_rank(inter, &local));
  CHECK(flag == 1 && n == 2 && local == rank / 2);
  int got = -1;
  MPI_Status st;
  CHECK_OK(MPI_Sendrecv(&rank, 1, MPI_INT, local, 1, &got, 1, MPI_INT, MPI_ANY_SOURCE, 1, inter, &st));
  CHECK(got == (rank ^ 1) && st.MPI_SOURCE == local);
  CHECK_OK(MPI_Intercomm_merge(inter, rank % 2 == 0, &merged));
  int r = -1;
  CHECK_OK(MPI_Comm_rank(merged, &r));
  CHECK(r == (rank % 2 == 1 ? rank / 2 : 2 + rank / 2));
  MPI_Comm* comms[] = {&merged, &inter, &half};
  for (int i = 0; i < 3; ++i) CHECK_OK(MPI_Comm_free(comms[i]));
}

static int g_copies = 0, g_deletes = 0;
static int CopyPlusOne(MPI_Comm comm, int keyval, void* extra, void* in, void* out, int* flag) {
  (void)comm;
  (void)keyval;
  (void)extra;
  *(long*)out = (long)in + 1;
  *flag = 1;
  ++g_copies;
  return MPI_SUCCESS;
}
static int CountDelete(MPI_Comm comm, int keyval, void* value, void* extra) {
  (void)comm;
  (void)keyval;
  (void)value;
  (void)extra;
  ++g_deletes;
  return MPI_SUCCESS;
}

static void Attributes(void) {
  int key = MPI_KEYVAL_INVALID;
  CHECK_OK(MPI_Comm_create_keyval(CopyPlusOne, CountDelete, &key, NULL));
  MPI_Comm a, b;
  CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &a));
  CHECK_OK(MPI_Comm_set_attr(a, key, (void*)41L));
  CHECK_OK(MPI_Comm_dup(a, &b));
  void* v = NULL;
  int flag = 0;
  CHECK_OK(MPI_Comm_get_attr(b, key, &v, &flag));
  CHECK(flag == 1 && (long)v == 42 && g_copies == 1);
  CHECK_OK(MPI_Comm_set_attr(b, key, (void*)7L)); /* replaces: the old value's delete runs */
  CHECK(g_deletes == 1);
  CHECK_OK(MPI_Comm_free(&b));
  CHECK_OK(MPI_Comm_free(&a));
  CHECK(g_deletes == 3);
  CHECK_OK(MPI_Comm_free_keyval(&key));
  CHECK(key == MPI_KEYVAL_INVALID);
}

static void Buffered(int rank) {
  /* Rank 0 bsends three messages before rank 1 posts a receive; detach
   * waits until they are gone. */
  static char space[3 * (sizeof(int) * 4 + MPI_BSEND_OVERHEAD)];
  CHECK_OK(MPI_Buffer_attach(space, sizeof(space)));
  int msg[4];
  if (rank == 0) {
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 4; ++j) msg[j] = 10 * i + j;
      CHECK_OK(MPI_Bsend(msg, 4, MPI_INT, 1, 3, MPI_COMM_WORLD));
    }
    static int big[100];
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Bsend(big, 100, MPI_INT, 1, 3, MPI_COMM_WORLD); /* larger than the whole buffer */
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_BUFFER);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  }
  CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
  if (rank == 1) {
    for (int i = 0; i < 3; ++i) {
      CHECK_OK(MPI_Recv(msg, 4, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
      CHECK(msg[0] == 10 * i && msg[3] == 10 * i + 3);
    }
  }
  void* back = NULL;
  int n = 0;
  CHECK_OK(MPI_Buffer_detach(&back, &n));
  CHECK(back == space && n == (int)sizeof(space));
}

static void Packing(void) {
  /* Every other int of 6, packed, then unpacked contiguous. */
  int in[6] = {0, 1, 2, 3, 4, 5}, out[3] = {0, 0, 0};
  MPI_Datatype strided;
  CHECK_OK(MPI_Type_vector(3, 1, 2, MPI_INT, &strided));
  CHECK_OK(MPI_Type_commit(&strided));
  char buf[64];
  int pos = 0, size = 0;
  CHECK_OK(MPI_Pack_size(1, strided, MPI_COMM_WORLD, &size));
  CHECK(size == 3 * (int)sizeof(int));
  CHECK_OK(MPI_Pack(in, 1, strided, buf, sizeof(buf), &pos, MPI_COMM_WORLD));
  CHECK(pos == size);
  pos = 0;
  CHECK_OK(MPI_Unpack(buf, sizeof(buf), &pos, out, 3, MPI_INT, MPI_COMM_WORLD));
  CHECK(out[0] == 0 && out[1] == 2 && out[2] == 4);
  MPI_Status st;
  CHECK_OK(MPI_Status_set_elements(&st, MPI_INT, 5));
  int count = 0;
  CHECK_OK(MPI_Get_elements(&st, strided, &count));
  CHECK(count == 5);
  CHECK_OK(MPI_Get_count(&st, strided, &count));
  CHECK(count == MPI_UNDEFINED);
  CHECK_OK(MPI_Type_free(&strided));
}

/* A user operator, associative and not commutative: digits written one
 * after the other, each element (value, 10^digits). */
static void Digits(void* in, void* inout, int* len, MPI_Datatype* type) {
  CHECK(*type == MPI_2INT);
  const int* a = in;
  int* b = inout;
  for (int i = 0; i < *len; ++i) {
    b[2 * i] = a[2 * i] * b[2 * i + 1] + b[2 * i];
    b[2 * i + 1] *= a[2 * i + 1];
  }
}

static void Reductions(int rank, int size) {
  MPI_Op digits;
  CHECK_OK(MPI_Op_create(Digits, 0, &digits));
  int commute = 1;
  CHECK_OK(MPI_Op_commutative(digits, &commute));
  CHECK(commute == 0);
  const int mine[2] = {rank + 1, 10};
  int all[2] = {0, 0};
  /* The ranks' digits in rank order. */
  CHECK_OK(MPI_Allreduce(mine, all, 1, MPI_2INT, digits, MPI_COMM_WORLD));
  CHECK(all[0] == 1234 && all[1] == 10000);
  /* Reduce_scatter_block of sums: rank r gets sum over ranks of (r + rank). */
  int send[4], got = -1;
  for (int i = 0; i < size; ++i) send[i] = i + rank;
  CHECK_OK(MPI_Reduce_scatter_block(send, &got, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(got == 4 * rank + 6);
  /* A persistent allreduce, started three times with new values. */
  int value = 0, total = 0;
  MPI_Request req;
  CHECK_OK(MPI_Allreduce_init(&value, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req));
  for (int run = 0; run < 3; ++run) {
    value = rank * run;
    CHECK_OK(MPI_Start(&req));
    CHECK_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
    CHECK(total == 6 * run && req != MPI_REQUEST_NULL);
  }
  CHECK_OK(MPI_Request_free(&req));
  int local[2] = {5, 10};
  const int incoming[2] = {3, 10};
  CHECK_OK(MPI_Reduce_local(incoming, local, 1, MPI_2INT, digits));
  CHECK(local[0] == 35 && local[1] == 100);
  CHECK_OK(MPI_Op_free(&digits));
  CHECK(digits == MPI_OP_NULL);
}

int main(int argc, char** argv) {
  CHECK_OK(MPI_Init(&argc, &argv));
  int rank = -1, size = 0;
  CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  g_rank = rank;
  CHECK(size == 4);
  Groups(rank);
  Intercomms(rank);
  Attributes();
  Buffered(rank);
  Packing();
  Reductions(rank, size);
  CHECK_OK(MPI_Finalize());
  printf("mpi_groups: rank %d of %d: every check passed\n", rank, size);
  return 0;
}
