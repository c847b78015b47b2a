/* The MPI binding from C, as an MPI program uses it: every call checked for
 * the exact bytes, statuses and error classes MPI defines. Runs on 3 ranks
 * (mpi_binding_test); with the argument "fatal", rank 0 sends to a rank
 * that does not exist under the default MPI_ERRORS_ARE_FATAL, and the job
 * must end naming the call (mpi_binding_fatal_test). */
#include <mpi.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static int g_rank = -1;

#define CHECK(cond)                                                                 \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      fprintf(stderr, "mpi_binding: rank %d: line %d: %s\n", g_rank, __LINE__, #cond); \
      MPI_Abort(MPI_COMM_WORLD, 2);                                                 \
    }                                                                               \
  } while (0)
#define CHECK_OK(call) CHECK((call) == MPI_SUCCESS)

/* An error code's class and whether its text holds `want`. */
static void ExpectError(int rc, int cls, const char* want) {
  int got = -1;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  CHECK(rc != MPI_SUCCESS);
  CHECK_OK(MPI_Error_class(rc, &got));
  CHECK_OK(MPI_Error_string(rc, text, &len));
  if (got != cls || strstr(text, want) == NULL) {
    fprintf(stderr, "mpi_binding: rank %d: error class %d (want %d), text \"%s\" (want \"%s\")\n", g_rank, got, cls,
            text, want);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  CHECK((int)strlen(text) == len);
}

static void PointToPoint(int rank, int size) {
  /* Rank 0 sends each other rank its own ints; they answer to any source. */
  if (rank == 0) {
    for (int r = 1; r < size; ++r) {
      int data[5];
      for (int i = 0; i < 5; ++i) data[i] = 100 * r + i;
      CHECK_OK(MPI_Send(data, 5, MPI_INT, r, 7, MPI_COMM_WORLD));
    }
    int seen = 0;
    for (int k = 1; k < size; ++k) {
      long answer = 0;
      MPI_Status st;
      st.MPI_ERROR = MPI_ERR_DIMS; /* as MPI: a call that completes one operation leaves it */
      /* Tag 8: a rank done with this part may already send its ring message here. */
      CHECK_OK(MPI_Recv(&answer, 1, MPI_LONG, MPI_ANY_SOURCE, 8, MPI_COMM_WORLD, &st));
      CHECK(st.MPI_SOURCE >= 1 && st.MPI_SOURCE < size && st.MPI_TAG == 8 && st.MPI_ERROR == MPI_ERR_DIMS);
      CHECK(answer == 1000L * st.MPI_SOURCE + 4);
      seen |= 1 << st.MPI_SOURCE;
    }
    CHECK(seen == ((1 << size) - 2));
  } else {
    int data[8] = {0};
    MPI_Status st;
    int count = -1;
    CHECK_OK(MPI_Recv(data, 8, MPI_INT, 0, 7, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 7);
    CHECK_OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 5);
    CHECK_OK(MPI_Get_count(&st, MPI_DOUBLE, &count));
    CHECK(count == MPI_UNDEFINED); /* 20 bytes are not whole doubles */
    for (int i = 0; i < 5; ++i) CHECK(data[i] == 100 * rank + i);
    CHECK(data[5] == 0);
    long answer = 1000L * rank + 4;
    CHECK_OK(MPI_Send(&answer, 1, MPI_LONG, 0, 8, MPI_COMM_WORLD));
  }

  /* A ring of Isend and Irecv: 1,000 doubles to the right, received with
   * MPI_ANY_TAG (the left neighbour's next messages come after it). */
  double out[1000], in[1000];
  for (int i = 0; i < 1000; ++i) out[i] = rank * 0.5 + i;
  MPI_Request reqs[2];
  MPI_Status sts[2];
  CHECK_OK(MPI_Irecv(in, 1000, MPI_DOUBLE, (rank + size - 1) % size, MPI_ANY_TAG, MPI_COMM_WORLD, &reqs[0]));
  CHECK_OK(MPI_Isend(out, 1000, MPI_DOUBLE, (rank + 1) % size, 3, MPI_COMM_WORLD, &reqs[1]));
  CHECK_OK(MPI_Waitall(2, reqs, sts));
  CHECK(reqs[0] == MPI_REQUEST_NULL && reqs[1] == MPI_REQUEST_NULL);
  CHECK(sts[0].MPI_SOURCE == (rank + size - 1) % size && sts[0].MPI_TAG == 3);
  for (int i = 0; i < 1000; ++i) CHECK(in[i] == ((rank + size - 1) % size) * 0.5 + i);

  /* A synchronous send completes only once matched: Issend tested, then Ssend. */
  if (rank == 1) {
    const char msg[] = "synchronous";
    MPI_Request r;
    int flag = 0;
    CHECK_OK(MPI_Issend(msg, (int)sizeof(msg), MPI_CHAR, 2, 5, MPI_COMM_WORLD, &r));
    while (!flag) CHECK_OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
    CHECK(r == MPI_REQUEST_NULL);
    CHECK_OK(MPI_Ssend(msg, (int)sizeof(msg), MPI_CHAR, 2, 6, MPI_COMM_WORLD));
  } else if (rank == 2) {
    char got[32] = {0};
    CHECK_OK(MPI_Recv(got, 32, MPI_CHAR, 1, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(strcmp(got, "synchronous") == 0);
    memset(got, 0, sizeof(got));
    CHECK_OK(MPI_Recv(got, 32, MPI_CHAR, 1, 6, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(strcmp(got, "synchronous") == 0);
  }

  /* MPI_PROC_NULL: nothing moves, the status says so. */
  int x = 42, y = 7;
  MPI_Status st;
  CHECK_OK(MPI_Sendrecv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, &y, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
  CHECK(y == 7 && st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG);
  /* Sendrecv around the ring. */
  CHECK_OK(MPI_Sendrecv(&rank, 1, MPI_INT, (rank + 1) % size, 9, &y, 1, MPI_INT, (rank + size - 1) % size, 9,
                        MPI_COMM_WORLD, &st));
  CHECK(y == (rank + size - 1) % size && st.MPI_SOURCE == y);
}

static void Collectives(int rank, int size) {
  CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
  char text[16] = {0};
  if (rank == 2) strcpy(text, "from rank two");
  CHECK_OK(MPI_Bcast(text, 16, MPI_CHAR, 2, MPI_COMM_WORLD));
  CHECK(strcmp(text, "from rank two") == 0);

  int mine[3] = {rank, rank * rank, 1}, sum[3] = {0};
  CHECK_OK(MPI_Allreduce(mine, sum, 3, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(sum[0] == size * (size - 1) / 2 && sum[1] == (size - 1) * size * (2 * size - 1) / 6 && sum[2] == size);
  double v = 1.5 * rank, max = 0;
  CHECK_OK(MPI_Reduce(&v, rank == 1 ? &max : NULL, 1, MPI_DOUBLE, MPI_MAX, 1, MPI_COMM_WORLD)); /* only the root's counts */
  if (rank == 1) CHECK(max == 1.5 * (size - 1));
  struct {
    double value;
    int index;
  } pair = {rank == 1 ? -3.0 : (double)rank, rank}, least = {0, -1};
  CHECK_OK(MPI_Allreduce(&pair, &least, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD));
  CHECK(least.value == -3.0 && least.index == 1);
  long in_place = rank + 1;
  CHECK_OK(MPI_Allreduce(MPI_IN_PLACE, &in_place, 1, MPI_LONG, MPI_PROD, MPI_COMM_WORLD));
  CHECK(in_place == 6); /* 3 ranks: 1 * 2 * 3 */
}

static void SelfAndErrors(int rank, int size) {
  int n = 0, r = -1;
  CHECK_OK(MPI_Comm_size(MPI_COMM_SELF, &n));
  CHECK_OK(MPI_Comm_rank(MPI_COMM_SELF, &r));
  CHECK(n == 1 && r == 0);
  unsigned short a = 0xbeef, b = 0;
  MPI_Request req;
  CHECK_OK(MPI_Irecv(&b, 1, MPI_UNSIGNED_SHORT, 0, 1, MPI_COMM_SELF, &req));
  CHECK_OK(MPI_Send(&a, 1, MPI_UNSIGNED_SHORT, 0, 1, MPI_COMM_SELF));
  CHECK_OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
  CHECK(b == 0xbeef);

  MPI_Errhandler h = MPI_ERRHANDLER_NULL;
  CHECK_OK(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &h));
  CHECK(h == MPI_ERRORS_ARE_FATAL);
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  int v = 0;
  ExpectError(MPI_Send(&v, 1, MPI_INT, 99, 0, MPI_COMM_WORLD), MPI_ERR_RANK, "MPI_Send: rank 99: no such rank");
  ExpectError(MPI_Send(&v, 1, MPI_INT, 0, -5, MPI_COMM_WORLD), MPI_ERR_TAG, "tag -5");
  ExpectError(MPI_Send(&v, -1, MPI_INT, 0, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "negative count");
  ExpectError(MPI_Send(&v, 1, (MPI_Datatype)0x4c0007ff, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE, "0x4c0007ff");
  ExpectError(MPI_Send(&v, 1, MPI_INT, size, 0, MPI_COMM_WORLD), MPI_ERR_RANK, "rank 3: no such rank");
  ExpectError(MPI_Send(&v, 1, MPI_INT, 0, 0, (MPI_Comm)0x44000077), MPI_ERR_COMM, "communicator 0x44000077");
  MPI_Request bogus = (MPI_Request)0xac0fffff;
  ExpectError(MPI_Wait(&bogus, MPI_STATUS_IGNORE), MPI_ERR_REQUEST, "not an active request");
  ExpectError(MPI_Allreduce(&v, &n, 1, MPI_INT, (MPI_Op)0x58000077, MPI_COMM_WORLD), MPI_ERR_OP, "operator");
  /* Truncation: 16 ints into a buffer of 4, with cartage's account of it. */
  if (rank == 0) {
    int many[16] = {0};
    CHECK_OK(MPI_Send(many, 16, MPI_INT, 1, 11, MPI_COMM_WORLD));
  } else if (rank == 1) {
    int few[4];
    MPI_Status st;
    ExpectError(MPI_Recv(few, 4, MPI_INT, 0, 11, MPI_COMM_WORLD, &st), MPI_ERR_TRUNCATE,
                "message of 64 bytes truncated to the 16-byte receive buffer");
  }
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

static void CommunicatorsAndMore(int rank, int size) {
  /* Split into evens and odds (rank 1 alone), keys reversing the order;
   * color MPI_UNDEFINED joins none. */
  MPI_Comm half = MPI_COMM_NULL, none = MPI_COMM_WORLD, dup = MPI_COMM_NULL;
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half));
  int hr = -1, hs = 0;
  CHECK_OK(MPI_Comm_rank(half, &hr));
  CHECK_OK(MPI_Comm_size(half, &hs));
  CHECK(hs == (rank % 2 == 0 ? 2 : 1));
  CHECK(hr == (rank == 0 ? 1 : 0)); /* evens: rank 2 (key -2) first, then rank 0 */
  CHECK_OK(MPI_Comm_split(MPI_COMM_WORLD, rank == 1 ? 0 : MPI_UNDEFINED, 0, &none));
  CHECK(rank == 1 ? none != MPI_COMM_NULL : none == MPI_COMM_NULL);
  if (none != MPI_COMM_NULL) CHECK_OK(MPI_Comm_free(&none));
  CHECK(none == MPI_COMM_NULL);
  /* A duplicate: its own traffic, the parent's error handler. */
  CHECK_OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
  CHECK(dup != MPI_COMM_WORLD && dup != MPI_COMM_NULL);
  if (rank == 0) {
    const int a = 1, b = 2;
    CHECK_OK(MPI_Send(&a, 1, MPI_INT, 1, 4, dup));
    CHECK_OK(MPI_Send(&b, 1, MPI_INT, 1, 4, MPI_COMM_WORLD));
  } else if (rank == 1) {
    int got = 0;
    MPI_Status st;
    /* The world's message does not match a receive on the duplicate. */
    CHECK_OK(MPI_Recv(&got, 1, MPI_INT, 0, 4, MPI_COMM_WORLD, &st));
    CHECK(got == 2);
    /* Probe first, then receive what it saw. */
    CHECK_OK(MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &st));
    int n = 0;
    CHECK_OK(MPI_Get_count(&st, MPI_INT, &n));
    CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 4 && n == 1);
    int flag = 0;
    CHECK_OK(MPI_Iprobe(0, 4, dup, &flag, &st));
    CHECK(flag == 1);
    CHECK_OK(MPI_Recv(&got, 1, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, dup, MPI_STATUS_IGNORE));
    CHECK(got == 1);
    CHECK_OK(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, dup, &flag, &st));
    CHECK(flag == 0);
  }
  CHECK_OK(MPI_Comm_free(&dup));
  CHECK(dup == MPI_COMM_NULL);
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_Comm world = MPI_COMM_WORLD;
  ExpectError(MPI_Comm_free(&world), MPI_ERR_COMM, "are not freed");
  ExpectError(MPI_Barrier(dup), MPI_ERR_COMM, "not a communicator");
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));

  /* Waitany over a null request, one from MPI_PROC_NULL and a real one;
   * then Testall until the rest are done. */
  MPI_Request reqs[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int from_left = -1, index = -1;
  CHECK_OK(MPI_Irecv(&from_left, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &reqs[1]));
  CHECK_OK(MPI_Waitany(3, reqs, &index, MPI_STATUS_IGNORE));
  CHECK(index == 1 && reqs[1] == MPI_REQUEST_NULL);
  CHECK_OK(MPI_Irecv(&from_left, 1, MPI_INT, (rank + size - 1) % size, 12, MPI_COMM_WORLD, &reqs[2]));
  CHECK_OK(MPI_Isend(&rank, 1, MPI_INT, (rank + 1) % size, 12, MPI_COMM_WORLD, &reqs[0]));
  MPI_Status sts[3];
  int all = 0;
  while (!all) CHECK_OK(MPI_Testall(3, reqs, &all, sts));
  CHECK(reqs[0] == MPI_REQUEST_NULL && reqs[2] == MPI_REQUEST_NULL);
  CHECK(from_left == (rank + size - 1) % size && sts[2].MPI_SOURCE == from_left && sts[2].MPI_TAG == 12);
  CHECK_OK(MPI_Waitany(3, reqs, &index, MPI_STATUS_IGNORE));
  CHECK(index == MPI_UNDEFINED);

  /* Gather, scatter, allgather, alltoall, scan and exscan, exact values. */
  int mine[2] = {rank * 10, rank * 10 + 1}, gathered[6] = {0};
  CHECK_OK(MPI_Gather(mine, 2, MPI_INT, gathered, 2, MPI_INT, 2, MPI_COMM_WORLD));
  if (rank == 2) {
    for (int i = 0; i < 6; ++i) CHECK(gathered[i] == (i / 2) * 10 + i % 2);
  }
  short parts[3] = {7, 8, 9}, part = -1;
  CHECK_OK(MPI_Scatter(parts, 1, MPI_SHORT, &part, 1, MPI_SHORT, 0, MPI_COMM_WORLD));
  CHECK(part == 7 + rank);
  long all_ranks[3] = {-1, -1, -1};
  all_ranks[rank] = 100 + rank;
  CHECK_OK(MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all_ranks, 1, MPI_LONG, MPI_COMM_WORLD));
  for (int i = 0; i < 3; ++i) CHECK(all_ranks[i] == 100 + i);
  int out[3], in[3];
  for (int i = 0; i < 3; ++i) out[i] = rank * 3 + i; /* to rank i */
  CHECK_OK(MPI_Alltoall(out, 1, MPI_INT, in, 1, MPI_INT, MPI_COMM_WORLD));
  for (int i = 0; i < 3; ++i) CHECK(in[i] == i * 3 + rank);
  int prefix = 0, before = -7;
  const int one = rank + 1;
  CHECK_OK(MPI_Scan(&one, &prefix, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  CHECK(prefix == (rank + 1) * (rank + 2) / 2);
  CHECK_OK(MPI_Exscan(&one, &before, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  if (rank > 0) CHECK(before == rank * (rank + 1) / 2);
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  /* Sides of different types whose bytes agree: two ints each, received as one long each. */
  long as_long[3] = {0};
  CHECK_OK(MPI_Allgather(mine, 2, MPI_INT, as_long, 1, MPI_LONG, MPI_COMM_WORLD));
  for (int r = 0; r < size; ++r) {
    const int want[2] = {r * 10, r * 10 + 1};
    CHECK(memcmp(&as_long[r], want, sizeof(want)) == 0);
  }
  /* Whose bytes do not: refused on every rank, naming both sides. */
  ExpectError(MPI_Allgather(mine, 2, MPI_INT, gathered, 1, MPI_SHORT, MPI_COMM_WORLD), MPI_ERR_ARG,
              "(8 bytes) but a block received 1 of");
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  CHECK_OK(MPI_Comm_free(&half));
}

static void Datatypes(int rank, int size) {
  /* Column 1 of a 4x3 matrix of doubles, sent as a vector, received flat. */
  MPI_Datatype column = MPI_DATATYPE_NULL;
  CHECK_OK(MPI_Type_vector(4, 1, 3, MPI_DOUBLE, &column));
  MPI_Aint lb = -1, extent = -1;
  CHECK_OK(MPI_Type_get_extent(column, &lb, &extent));
  CHECK(lb == 0 && extent == (3 * 3 + 1) * 8);
  int tsize = 0;
  CHECK_OK(MPI_Type_size(column, &tsize));
  CHECK(tsize == 32);
  double m[4][3], flat[4] = {0};
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) m[r][c] = r * 10 + c;
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  ExpectError(MPI_Send(&m[0][1], 1, column, 0, 0, MPI_COMM_WORLD), MPI_ERR_TYPE, "is not committed");
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  CHECK_OK(MPI_Type_commit(&column));
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  MPI_Status st;
  CHECK_OK(MPI_Sendrecv(&m[0][1], 1, column, right, 20, flat, 4, MPI_DOUBLE, left, 20, MPI_COMM_WORLD, &st));
  for (int r = 0; r < 4; ++r) CHECK(flat[r] == r * 10 + 1);
  int n = 0;
  CHECK_OK(MPI_Get_count(&st, column, &n));
  CHECK(n == 1);

  /* A struct {int; double[2]} with a gap, resized to its C size; two of them. */
  struct Rec {
    int id;
    double v[2];
  } out[2] = {{rank, {rank + 0.25, rank + 0.5}}, {rank + 100, {-1.0, -2.0}}}, in[2];
  const int blocks[2] = {1, 2};
  const MPI_Aint disps[2] = {offsetof(struct Rec, id), offsetof(struct Rec, v)};
  const MPI_Datatype types[2] = {MPI_INT, MPI_DOUBLE};
  MPI_Datatype rec = MPI_DATATYPE_NULL, recs = MPI_DATATYPE_NULL;
  CHECK_OK(MPI_Type_create_struct(2, blocks, disps, types, &rec));
  CHECK_OK(MPI_Type_create_resized(rec, 0, sizeof(struct Rec), &recs));
  CHECK_OK(MPI_Type_free(&rec));
  CHECK(rec == MPI_DATATYPE_NULL);
  CHECK_OK(MPI_Type_commit(&recs));
  CHECK_OK(MPI_Type_size(recs, &tsize));
  CHECK(tsize == 4 + 16);
  MPI_Aint tlb = -1, textent = -1;
  CHECK_OK(MPI_Type_get_true_extent(recs, &tlb, &textent));
  CHECK(tlb == 0 && textent == (MPI_Aint)sizeof(struct Rec));
  memset(in, 0, sizeof(in));
  MPI_Request reqs[2];
  CHECK_OK(MPI_Irecv(in, 2, recs, left, 21, MPI_COMM_WORLD, &reqs[0]));
  CHECK_OK(MPI_Isend(out, 2, recs, right, 21, MPI_COMM_WORLD, &reqs[1]));
  CHECK_OK(MPI_Type_free(&recs)); /* the operations under way keep their layout */
  CHECK_OK(MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE));
  CHECK(in[0].id == left && in[0].v[0] == left + 0.25 && in[0].v[1] == left + 0.5);
  CHECK(in[1].id == left + 100 && in[1].v[0] == -1.0 && in[1].v[1] == -2.0);

  /* Indexed blocks of ints, and a reduction over a contiguous type of doubles. */
  int src[10], dst[10] = {0};
  for (int i = 0; i < 10; ++i) src[i] = rank * 100 + i;
  const int lens[3] = {2, 1, 3}, at[3] = {0, 4, 6};
  MPI_Datatype picks = MPI_DATATYPE_NULL, pair = MPI_DATATYPE_NULL, dup = MPI_DATATYPE_NULL;
  CHECK_OK(MPI_Type_indexed(3, lens, at, MPI_INT, &picks));
  CHECK_OK(MPI_Type_commit(&picks));
  CHECK_OK(MPI_Sendrecv(src, 1, picks, right, 22, dst, 1, picks, left, 22, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
  const int expect[10] = {1, 1, 0, 0, 1, 0, 1, 1, 1, 0};
  for (int i = 0; i < 10; ++i) CHECK(dst[i] == (expect[i] ? left * 100 + i : 0));
  CHECK_OK(MPI_Type_contiguous(2, MPI_DOUBLE, &pair));
  CHECK_OK(MPI_Type_dup(pair, &dup)); /* a duplicate of an uncommitted type is not committed either */
  CHECK_OK(MPI_Type_commit(&pair));
  CHECK_OK(MPI_Type_commit(&dup));
  double mine[4] = {rank, 1, 2 * rank, 0.5}, sum[4] = {0};
  CHECK_OK(MPI_Allreduce(mine, sum, 2, dup, MPI_SUM, MPI_COMM_WORLD));
  CHECK(sum[0] == size * (size - 1) / 2.0 && sum[1] == size && sum[2] == size * (size - 1) && sum[3] == 0.5 * size);
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  MPI_Datatype predefined = MPI_INT;
  ExpectError(MPI_Type_free(&predefined), MPI_ERR_TYPE, "is predefined");
  ExpectError(MPI_Type_vector(-1, 1, 1, MPI_INT, &pair), MPI_ERR_COUNT, "negative count -1");
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  CHECK_OK(MPI_Type_free(&picks));
  CHECK_OK(MPI_Type_free(&pair));
  CHECK_OK(MPI_Type_free(&dup));
  CHECK_OK(MPI_Type_free(&column));
}

static void Persistent(int rank, int size) {
  /* A persistent ring: the same two requests started five times, the
   * buffer changed between runs. */
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  int out = 0, in = -1;
  MPI_Request reqs[2];
  CHECK_OK(MPI_Recv_init(&in, 1, MPI_INT, left, 30, MPI_COMM_WORLD, &reqs[0]));
  CHECK_OK(MPI_Send_init(&out, 1, MPI_INT, right, 30, MPI_COMM_WORLD, &reqs[1]));
  MPI_Status st;
  CHECK_OK(MPI_Wait(&reqs[0], &st)); /* not started: completes at once, with MPI's empty status */
  CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG && reqs[0] != MPI_REQUEST_NULL);
  for (int run = 0; run < 5; ++run) {
    out = rank * 1000 + run;
    CHECK_OK(MPI_Startall(2, reqs));
    MPI_Status sts[2];
    CHECK_OK(MPI_Waitall(2, reqs, sts));
    CHECK(reqs[0] != MPI_REQUEST_NULL && reqs[1] != MPI_REQUEST_NULL); /* kept, inactive */
    CHECK(in == left * 1000 + run && sts[0].MPI_SOURCE == left && sts[0].MPI_TAG == 30);
  }
  CHECK_OK(MPI_Request_free(&reqs[0]));
  CHECK_OK(MPI_Request_free(&reqs[1]));
  CHECK(reqs[0] == MPI_REQUEST_NULL && reqs[1] == MPI_REQUEST_NULL);

  /* A receive nobody sends to, cancelled: it completes, marked cancelled. */
  int never = 0, flag = 0;
  MPI_Request r;
  CHECK_OK(MPI_Irecv(&never, 1, MPI_INT, left, 31, MPI_COMM_WORLD, &r));
  CHECK_OK(MPI_Cancel(&r));
  CHECK_OK(MPI_Wait(&r, &st));
  CHECK_OK(MPI_Test_cancelled(&st, &flag));
  CHECK(flag == 1 && never == 0);
  /* A send freed while under way still arrives. */
  CHECK_OK(MPI_Isend(&rank, 1, MPI_INT, right, 32, MPI_COMM_WORLD, &r));
  CHECK_OK(MPI_Request_free(&r));
  CHECK(r == MPI_REQUEST_NULL);
  int got = -1;
  CHECK_OK(MPI_Recv(&got, 1, MPI_INT, left, 32, MPI_COMM_WORLD, &st));
  CHECK(got == left);
  CHECK_OK(MPI_Test_cancelled(&st, &flag));
  CHECK(flag == 0);
}

static void MoreDatatypes(void) {
  /* A distributed array: 2 x 3 processes over a 4 x 6 grid of ints, rows
   * by block, columns cyclic(2); each process's type picks its own cells. */
  int grid[4][6], gsizes[2] = {4, 6}, distribs[2] = {MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC};
  int dargs[2] = {MPI_DISTRIBUTE_DFLT_DARG, 2}, psizes[2] = {2, 3};
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) grid[i][j] = 10 * i + j;
  for (int p = 0; p < 6; ++p) {
    MPI_Datatype d;
    CHECK_OK(MPI_Type_create_darray(6, p, 2, gsizes, distribs, dargs, psizes, MPI_ORDER_C, MPI_INT, &d));
    CHECK_OK(MPI_Type_commit(&d));
    MPI_Aint lb = -1, extent = 0;
    int bytes = 0, pos = 0, packed[24];
    CHECK_OK(MPI_Type_get_extent(d, &lb, &extent));
    CHECK_OK(MPI_Type_size(d, &bytes));
    CHECK(lb == 0 && extent == (MPI_Aint)sizeof grid && bytes == 4 * (int)sizeof(int)); /* 2 rows x 2 columns */
    CHECK_OK(MPI_Pack(grid, 1, d, packed, sizeof packed, &pos, MPI_COMM_SELF));
    const int pr = p / 3, pc = p % 3; /* row-major process grid */
    for (int k = 0; k < 4; ++k) CHECK(packed[k] == 10 * (2 * pr + k / 2) + 2 * pc + k % 2);
    /* What made it, as MPI_Type_get_contents tells it. */
    int ints[16], combiner = 0, ni = 0, na = 0, nd = 0;
    MPI_Aint addrs[1];
    MPI_Datatype types[1];
    CHECK_OK(MPI_Type_get_envelope(d, &ni, &na, &nd, &combiner));
    CHECK(combiner == MPI_COMBINER_DARRAY && ni == 4 * 2 + 4 && na == 0 && nd == 1);
    CHECK_OK(MPI_Type_get_contents(d, 16, 1, 1, ints, addrs, types));
    CHECK(ints[0] == 6 && ints[1] == p && ints[2] == 2 && ints[3] == 4 && ints[4] == 6 && ints[11] == MPI_ORDER_C &&
          types[0] == MPI_INT);
    CHECK_OK(MPI_Type_free(&d));
  }
  /* get_contents hands out a made part the program frees; the part lives
   * on inside the type made from it after the program frees its handle. */
  MPI_Datatype vec, outer, part[1];
  int ints[3];
  MPI_Aint none[1];
  CHECK_OK(MPI_Type_vector(2, 1, 3, MPI_DOUBLE, &vec));
  CHECK_OK(MPI_Type_contiguous(2, vec, &outer));
  CHECK_OK(MPI_Type_free(&vec));
  CHECK_OK(MPI_Type_get_contents(outer, 3, 0, 1, ints, none, part));
  CHECK(ints[0] == 2);
  CHECK_OK(MPI_Type_get_contents(part[0], 3, 0, 1, ints, none, &vec));
  CHECK(ints[0] == 2 && ints[1] == 1 && ints[2] == 3 && vec == MPI_DOUBLE);
  CHECK_OK(MPI_Type_free(&part[0]));
  MPI_Aint extent = 0;
  CHECK_OK(MPI_Type_extent(outer, &extent)); /* MPI-1's name */
  CHECK(extent == 2 * 4 * (MPI_Aint)sizeof(double));
  CHECK_OK(MPI_Type_free(&outer));

  /* MPI-1's bound markers set the bounds a struct's data would not. */
  int lens[3] = {1, 1, 1};
  MPI_Aint displs[3] = {-8, 0, 40};
  MPI_Datatype parts[3] = {MPI_LB, MPI_INT, MPI_UB}, marked;
  CHECK_OK(MPI_Type_create_struct(3, lens, displs, parts, &marked));
  MPI_Aint lb = 0, ub = 0;
  CHECK_OK(MPI_Type_lb(marked, &lb));
  CHECK_OK(MPI_Type_ub(marked, &ub));
  CHECK(lb == -8 && ub == 40);
  CHECK_OK(MPI_Type_free(&marked));

  /* external32: big-endian, a C long as 4 bytes, x87's long double as IEEE quad. */
  long longs[2] = {1, -2};
  unsigned char ext[32];
  MPI_Aint pos = 0, need = 0;
  CHECK_OK(MPI_Pack_external_size("external32", 2, MPI_LONG, &need));
  CHECK(need == 8);
  CHECK_OK(MPI_Pack_external("external32", longs, 2, MPI_LONG, ext, sizeof ext, &pos));
  const unsigned char want[8] = {0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe};
  CHECK(pos == 8 && memcmp(ext, want, 8) == 0);
  long back[2] = {0, 0};
  pos = 0;
  CHECK_OK(MPI_Unpack_external("external32", ext, 8, &pos, back, 2, MPI_LONG));
  CHECK(back[0] == 1 && back[1] == -2);
  long double quads[2] = {1.0L, -2.5L}, quads_back[2] = {0, 0};
  pos = 0;
  CHECK_OK(MPI_Pack_external("external32", quads, 2, MPI_LONG_DOUBLE, ext, sizeof ext, &pos));
  CHECK(pos == 32 && ext[0] == 0x3f && ext[1] == 0xff && ext[2] == 0 && ext[16] == 0xc0 && ext[17] == 0x00 &&
        ext[18] == 0x40);
  pos = 0;
  CHECK_OK(MPI_Unpack_external("external32", ext, 32, &pos, quads_back, 2, MPI_LONG_DOUBLE));
  CHECK(quads_back[0] == 1.0L && quads_back[1] == -2.5L);
  MPI_Datatype match;
  CHECK_OK(MPI_Type_match_size(MPI_TYPECLASS_REAL, 8, &match));
  CHECK(match == MPI_REAL8);
}

/* A generalized request's functions: they count their calls in its state. */
struct Greq {
  int queried, freed, cancelled;
};
static int GreqQuery(void* extra, MPI_Status* st) {
  ((struct Greq*)extra)->queried++;
  st->MPI_SOURCE = 7;
  st->MPI_TAG = 8;
  MPI_Status_set_cancelled(st, 0);
  MPI_Status_set_elements(st, MPI_INT, 3);
  return MPI_SUCCESS;
}
static int GreqFree(void* extra) {
  ((struct Greq*)extra)->freed++;
  return MPI_SUCCESS;
}
static int GreqCancel(void* extra, int complete) {
  ((struct Greq*)extra)->cancelled += complete ? 10 : 1;
  return MPI_SUCCESS;
}

static void MoreRequests(int rank, int size) {
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  /* MPI_Isendrecv around the ring: one request for both halves; its
   * status is the receive's. Waitany sees it among plain requests. */
  int out[2] = {rank, rank * 10}, in[2] = {-1, -1}, plain = -1, index = -1;
  MPI_Request r[2];
  CHECK_OK(MPI_Irecv(&plain, 1, MPI_INT, left, 41, MPI_COMM_WORLD, &r[0]));
  CHECK_OK(MPI_Isendrecv(out, 2, MPI_INT, right, 40, in, 2, MPI_INT, left, 40, MPI_COMM_WORLD, &r[1]));
  MPI_Status st;
  CHECK_OK(MPI_Waitany(2, r, &index, &st));
  CHECK(index == 1 && r[1] == MPI_REQUEST_NULL && st.MPI_SOURCE == left && st.MPI_TAG == 40);
  CHECK(in[0] == left && in[1] == left * 10);
  CHECK_OK(MPI_Barrier(MPI_COMM_WORLD)); /* tag 41 is sent only once every Waitany has returned */
  CHECK_OK(MPI_Send(&rank, 1, MPI_INT, right, 41, MPI_COMM_WORLD));
  CHECK_OK(MPI_Wait(&r[0], &st));
  CHECK(plain == left);
  /* _replace: what is sent is the buffer as it was when the call was made. */
  int buf[3] = {rank, rank + 1, rank + 2};
  CHECK_OK(MPI_Isendrecv_replace(buf, 3, MPI_INT, right, 42, left, 42, MPI_COMM_WORLD, &r[0]));
  int done = 0;
  while (!done) CHECK_OK(MPI_Test(&r[0], &done, &st));
  CHECK(buf[0] == left && buf[1] == left + 1 && buf[2] == left + 2 && st.MPI_SOURCE == left);
  /* With MPI_PROC_NULL on both sides it completes with the empty status. */
  CHECK_OK(MPI_Isendrecv(out, 1, MPI_INT, MPI_PROC_NULL, 0, in, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &r[0]));
  CHECK_OK(MPI_Wait(&r[0], &st));
  CHECK(st.MPI_SOURCE == MPI_PROC_NULL && in[0] == left);

  /* Persistent buffered and synchronous sends, three runs each; the
   * buffered one is complete as soon as it starts. */
  static char attached[4096];
  CHECK_OK(MPI_Buffer_attach(attached, sizeof attached));
  int b = 0, s = 0, gotb = -1, gots = -1;
  CHECK_OK(MPI_Bsend_init(&b, 1, MPI_INT, right, 43, MPI_COMM_WORLD, &r[0]));
  CHECK_OK(MPI_Ssend_init(&s, 1, MPI_INT, right, 44, MPI_COMM_WORLD, &r[1]));
  for (int run = 0; run < 3; ++run) {
    b = rank * 100 + run;
    s = rank * 1000 + run;
    CHECK_OK(MPI_Start(&r[0]));
    CHECK_OK(MPI_Test(&r[0], &done, MPI_STATUS_IGNORE));
    CHECK(done == 1 && r[0] != MPI_REQUEST_NULL);
    b = -5; /* the message left with the value it had at the start */
    CHECK_OK(MPI_Start(&r[1]));
    CHECK_OK(MPI_Recv(&gotb, 1, MPI_INT, left, 43, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_OK(MPI_Recv(&gots, 1, MPI_INT, left, 44, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK_OK(MPI_Wait(&r[1], MPI_STATUS_IGNORE));
    CHECK(gotb == left * 100 + run && gots == left * 1000 + run);
  }
  CHECK_OK(MPI_Request_free(&r[0]));
  CHECK_OK(MPI_Request_free(&r[1]));
  void* detached = NULL;
  int detached_size = 0;
  CHECK_OK(MPI_Buffer_detach(&detached, &detached_size));
  CHECK(detached == attached && detached_size == (int)sizeof attached);

  /* A generalized request: not complete until the program says so; its
   * query function gives the status, its free function runs once. */
  struct Greq g = {0, 0, 0};
  CHECK_OK(MPI_Grequest_start(GreqQuery, GreqFree, GreqCancel, &g, &r[0]));
  CHECK_OK(MPI_Test(&r[0], &done, &st));
  CHECK(done == 0 && g.queried == 0);
  CHECK_OK(MPI_Cancel(&r[0]));
  CHECK(g.cancelled == 1);
  CHECK_OK(MPI_Grequest_complete(r[0]));
  int count = -1;
  CHECK_OK(MPI_Wait(&r[0], &st));
  CHECK_OK(MPI_Get_count(&st, MPI_INT, &count));
  CHECK(r[0] == MPI_REQUEST_NULL && g.queried == 1 && g.freed == 1 && st.MPI_SOURCE == 7 && st.MPI_TAG == 8 &&
        count == 3);

  /* Large counts: MPI_Count forms, and a status of more than 2^31 elements. */
  MPI_Count n = 0;
  CHECK_OK(MPI_Status_set_elements_x(&st, MPI_CHAR, (MPI_Count)3 << 31));
  CHECK_OK(MPI_Get_elements_x(&st, MPI_CHAR, &n));
  CHECK(n == (MPI_Count)3 << 31);
  CHECK_OK(MPI_Get_count(&st, MPI_CHAR, &count));
  CHECK(count == MPI_UNDEFINED);
  CHECK_OK(MPI_Send_c(out, (MPI_Count)2, MPI_INT, right, 45, MPI_COMM_WORLD));
  CHECK_OK(MPI_Recv_c(in, (MPI_Count)2, MPI_INT, left, 45, MPI_COMM_WORLD, &st));
  CHECK_OK(MPI_Get_count_c(&st, MPI_INT, &n));
  CHECK(n == 2 && in[0] == left && in[1] == left * 10);

  /* Added error classes and codes can be deleted, and their numbers come back. */
  int cls = 0, code = 0, again = 0, len = 0;
  char text[MPI_MAX_ERROR_STRING];
  CHECK_OK(MPI_Add_error_class(&cls));
  CHECK_OK(MPI_Add_error_code(cls, &code));
  CHECK_OK(MPI_Add_error_string(code, "a code of the program's"));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int err = MPIX_Delete_error_class(cls), err_class = 0; /* it still has a code */
  CHECK_OK(MPI_Error_class(err, &err_class));
  CHECK(err_class == MPI_ERR_ARG);
  CHECK_OK(MPIX_Delete_error_string(code));
  CHECK_OK(MPI_Error_string(code, text, &len));
  CHECK(len == 0);
  CHECK_OK(MPIX_Delete_error_code(code));
  CHECK_OK(MPI_Error_class(MPIX_Delete_error_code(code), &err_class));
  CHECK(err_class == MPI_ERR_ARG);
  CHECK_OK(MPIX_Delete_error_class(cls));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  CHECK_OK(MPI_Add_error_class(&again));
  CHECK(again == cls);
}

static void Nonblocking(int rank, int size) {
  /* Every nonblocking collective in flight at once, then one Waitall;
   * each must come out exactly as its blocking form would. */
  MPI_Request reqs[6];
  double bval = rank == 1 ? 2.5 : 0.0;
  int one = rank + 1, sum = 0, prod = 0, ag[3] = {0}, a2a_out[3], a2a_in[3];
  for (int i = 0; i < 3; ++i) a2a_out[i] = 10 * rank + i;
  CHECK_OK(MPI_Ibarrier(MPI_COMM_WORLD, &reqs[0]));
  CHECK_OK(MPI_Ibcast(&bval, 1, MPI_DOUBLE, 1, MPI_COMM_WORLD, &reqs[1]));
  CHECK_OK(MPI_Iallreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &reqs[2]));
  CHECK_OK(MPI_Ireduce(&one, &prod, 1, MPI_INT, MPI_PROD, 0, MPI_COMM_WORLD, &reqs[3]));
  CHECK_OK(MPI_Iallgather(&one, 1, MPI_INT, ag, 1, MPI_INT, MPI_COMM_WORLD, &reqs[4]));
  CHECK_OK(MPI_Ialltoall(a2a_out, 1, MPI_INT, a2a_in, 1, MPI_INT, MPI_COMM_WORLD, &reqs[5]));
  CHECK_OK(MPI_Waitall(6, reqs, MPI_STATUSES_IGNORE));
  for (int i = 0; i < 6; ++i) CHECK(reqs[i] == MPI_REQUEST_NULL);
  CHECK(bval == 2.5 && sum == size * (size + 1) / 2);
  if (rank == 0) CHECK(prod == 6);
  for (int i = 0; i < size; ++i) CHECK(ag[i] == i + 1 && a2a_in[i] == 10 * i + rank);

  /* The v-forms: rank r contributes r + 1 values r*10, r*10+1, ... */
  int mine[3], counts[3], displs[3], all[6], total = 0;
  for (int i = 0; i < rank + 1; ++i) mine[i] = rank * 10 + i;
  for (int r = 0; r < size; ++r) {
    counts[r] = r + 1;
    displs[r] = total;
    total += r + 1;
  }
  memset(all, 0, sizeof(all));
  CHECK_OK(MPI_Gatherv(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, 1, MPI_COMM_WORLD));
  if (rank == 1) {
    for (int r = 0, k = 0; r < size; ++r)
      for (int i = 0; i < r + 1; ++i, ++k) CHECK(all[k] == r * 10 + i);
  }
  memset(all, 0, sizeof(all));
  CHECK_OK(MPI_Allgatherv(mine, rank + 1, MPI_INT, all, counts, displs, MPI_INT, MPI_COMM_WORLD));
  for (int r = 0, k = 0; r < size; ++r)
    for (int i = 0; i < r + 1; ++i, ++k) CHECK(all[k] == r * 10 + i);
  int part[3] = {-1, -1, -1};
  CHECK_OK(MPI_Scatterv(all, counts, displs, MPI_INT, part, rank + 1, MPI_INT, 2, MPI_COMM_WORLD));
  for (int i = 0; i < rank + 1; ++i) CHECK(part[i] == rank * 10 + i);
  /* Alltoallv: rank r sends j + 1 values to rank j, each 100*r + j. */
  int sout[6], sc[3], sd[3], rin[9], rc[3], rd[3], off = 0;
  for (int j = 0; j < size; ++j) {
    sc[j] = j + 1;
    sd[j] = off;
    for (int i = 0; i < j + 1; ++i) sout[off + i] = 100 * rank + j;
    off += j + 1;
    rc[j] = rank + 1;
    rd[j] = 3 * j;
  }
  memset(rin, 0, sizeof(rin));
  CHECK_OK(MPI_Alltoallv(sout, sc, sd, MPI_INT, rin, rc, rd, MPI_INT, MPI_COMM_WORLD));
  for (int j = 0; j < size; ++j)
    for (int i = 0; i < 3; ++i) CHECK(rin[3 * j + i] == (i < rank + 1 ? 100 * j + rank : 0));
}

static void AttributesAndReplace(int rank, int size) {
  int* tag_ub = NULL;
  int* universe = NULL;
  int flag = 0;
  CHECK_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
  CHECK(flag == 1 && *tag_ub >= 32767); /* MPI's least upper bound */
  CHECK_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_UNIVERSE_SIZE, &universe, &flag));
  CHECK(flag == 1 && *universe == size);
  CHECK_OK(MPI_Send(&rank, 1, MPI_INT, MPI_PROC_NULL, *tag_ub, MPI_COMM_WORLD)); /* the bound itself is a tag */
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  ExpectError(MPI_Comm_get_attr(MPI_COMM_WORLD, 0x12345, &tag_ub, &flag), MPI_ERR_KEYVAL, "keyval 0x00012345");
  CHECK_OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
  char version[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  CHECK_OK(MPI_Get_library_version(version, &len));
  CHECK(len == (int)strlen(version) && strstr(version, "cartage") == version);

  /* Sendrecv_replace around the ring, with a strided type: every other int. */
  int data[6];
  for (int i = 0; i < 6; ++i) data[i] = rank * 100 + i;
  MPI_Datatype every_other = MPI_DATATYPE_NULL;
  CHECK_OK(MPI_Type_vector(3, 1, 2, MPI_INT, &every_other));
  CHECK_OK(MPI_Type_commit(&every_other));
  MPI_Status st;
  const int right = (rank + 1) % size, left = (rank + size - 1) % size;
  CHECK_OK(MPI_Sendrecv_replace(data, 1, every_other, right, 40, left, 40, MPI_COMM_WORLD, &st));
  for (int i = 0; i < 6; ++i) CHECK(data[i] == (i % 2 == 0 ? left : rank) * 100 + i);
  CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 40);
  CHECK_OK(MPI_Type_free(&every_other));
}

int main(int argc, char** argv) {
  int flag = 1;
  CHECK_OK(MPI_Initialized(&flag));
  CHECK(flag == 0);
  CHECK_OK(MPI_Init(&argc, &argv));
  CHECK_OK(MPI_Initialized(&flag));
  CHECK(flag == 1);
  int rank = -1, size = 0;
  CHECK_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  CHECK_OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  g_rank = rank;
  if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
    if (rank == 0) MPI_Send(&rank, 1, MPI_INT, 99, 0, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD); /* the others wait here until the job ends */
    fprintf(stderr, "mpi_binding: rank %d: still running after a fatal error\n", rank);
    return 3;
  }
  CHECK(size == 3);
  const double t0 = MPI_Wtime();
  PointToPoint(rank, size);
  Collectives(rank, size);
  SelfAndErrors(rank, size);
  CommunicatorsAndMore(rank, size);
  Datatypes(rank, size);
  Persistent(rank, size);
  MoreRequests(rank, size);
  MoreDatatypes();
  Nonblocking(rank, size);
  AttributesAndReplace(rank, size);
  CHECK(MPI_Wtime() >= t0 && MPI_Wtick() > 0);
  char host[MPI_MAX_PROCESSOR_NAME];
  int len = 0;
  CHECK_OK(MPI_Get_processor_name(host, &len));
  CHECK(len > 0 && (int)strlen(host) == len);
  CHECK_OK(MPI_Barrier(MPI_COMM_WORLD));
  CHECK_OK(MPI_Finalize());
  CHECK_OK(MPI_Finalized(&flag));
  CHECK(flag == 1);
  printf("mpi_binding: rank %d of %d: every check passed\n", rank, size);
  return 0;
}
