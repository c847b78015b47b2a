/* MPI-4 sessions through the binding, without MPI_Init: two sessions open
 * at once, their process sets, a communicator from each set's group, data
 * over both, and the runtime stopped only when the last session ends.
 * Run on 3 ranks. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_PROGRAM "mpi_sessions"
#include "mpi_check.h"

int main(void) {
  int flag = -1;
  MPI_Session a = MPI_SESSION_NULL, b = MPI_SESSION_NULL;
  MPI_Info want;
  CHECK_OK(MPI_Info_create(&want));
  CHECK_OK(MPI_Info_set(want, "thread_level", "MPI_THREAD_MULTIPLE"));
  CHECK_OK(MPI_Session_init(want, MPI_ERRORS_RETURN, &a));
  CHECK_OK(MPI_Session_init(MPI_INFO_NULL, MPI_ERRORS_RETURN, &b));
  CHECK_OK(MPI_Info_free(&want));
  CHECK(a != MPI_SESSION_NULL && b != MPI_SESSION_NULL && a != b);
  CHECK_OK(MPI_Initialized(&flag)); /* sessions are not the world model */
  CHECK(flag == 0);

  MPI_Info got;
  char value[MPI_MAX_INFO_VAL];
  CHECK_OK(MPI_Session_get_info(a, &got));
  CHECK_OK(MPI_Info_get(got, "thread_level", MPI_MAX_INFO_VAL - 1, value, &flag));
  CHECK(flag == 1 && strcmp(value, "MPI_THREAD_MULTIPLE") == 0);
  CHECK_OK(MPI_Info_free(&got));

  /* The process sets: their names (length first), sizes and groups. */
  int n = 0, len = 0;
  CHECK_OK(MPI_Session_get_num_psets(a, MPI_INFO_NULL, &n));
  CHECK(n == 2);
  CHECK_OK(MPI_Session_get_nth_pset(a, MPI_INFO_NULL, 0, &len, NULL));
  CHECK(len == (int)strlen("mpi://WORLD") + 1);
  char name[32];
  len = sizeof name;
  CHECK_OK(MPI_Session_get_nth_pset(a, MPI_INFO_NULL, 0, &len, name));
  CHECK(strcmp(name, "mpi://WORLD") == 0);
  len = 5; /* too short: cut, and still terminated */
  CHECK_OK(MPI_Session_get_nth_pset(a, MPI_INFO_NULL, 1, &len, name));
  CHECK(strcmp(name, "mpi:") == 0 && len == (int)strlen("mpi://SELF") + 1);
  CHECK_OK(MPI_Session_get_pset_info(a, "mpi://WORLD", &got));
  CHECK_OK(MPI_Info_get(got, "mpi_size", MPI_MAX_INFO_VAL - 1, value, &flag));
  CHECK(flag == 1 && atoi(value) == 3);
  CHECK_OK(MPI_Info_free(&got));
  MPI_Group world, self;
  CHECK_OK(MPI_Group_from_session_pset(a, "mpi://WORLD", &world));
  CHECK_OK(MPI_Group_from_session_pset(b, "mpi://self", &self));
  int size = 0, rank = -1;
  CHECK_OK(MPI_Group_size(world, &size));
  CHECK_OK(MPI_Group_rank(world, &rank));
  CHECK(size == 3 && rank >= 0 && rank < 3);
  g_rank = rank;
  CHECK_OK(MPI_Group_size(self, &size));
  CHECK(size == 1);
  /* A name that is no process set is an error the session's caller sees. */
  MPI_Group none = MPI_GROUP_NULL;
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int cls = 0;
  CHECK_OK(MPI_Error_class(MPI_Group_from_session_pset(a, "mpi://NOWHERE", &none), &cls));
  CHECK(cls == MPI_ERR_ARG && none == MPI_GROUP_NULL);

  /* Communicators from the groups, named by strings; data over each. */
  MPI_Comm wc, sc;
  CHECK_OK(MPI_Comm_create_from_group(world, "org.cartage.test.world", MPI_INFO_NULL, MPI_ERRORS_RETURN, &wc));
  CHECK_OK(MPI_Comm_create_from_group(self, "org.cartage.test.self", MPI_INFO_NULL, MPI_ERRORS_RETURN, &sc));
  int r = -1, s = 0;
  CHECK_OK(MPI_Comm_rank(wc, &r));
  CHECK_OK(MPI_Comm_size(wc, &s));
  CHECK(r == rank && s == 3);
  int sum = 0;
  CHECK_OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, wc));
  CHECK(sum == 0 + 1 + 2);
  int ring = -1;
  CHECK_OK(MPI_Sendrecv(&rank, 1, MPI_INT, (rank + 1) % 3, 5, &ring, 1, MPI_INT, (rank + 2) % 3, 5, wc,
                        MPI_STATUS_IGNORE));
  CHECK(ring == (rank + 2) % 3);
  CHECK_OK(MPI_Comm_size(sc, &s));
  CHECK(s == 1);
  CHECK_OK(MPI_Comm_free(&sc));
  CHECK_OK(MPI_Group_free(&self));
  CHECK_OK(MPI_Group_free(&world));

  /* Ending one session leaves the other's communicator working. */
  CHECK_OK(MPI_Session_finalize(&b));
  CHECK(b == MPI_SESSION_NULL);
  CHECK_OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_MAX, wc));
  CHECK(sum == 2);
  CHECK_OK(MPI_Comm_free(&wc));
  CHECK_OK(MPI_Session_finalize(&a));
  CHECK_OK(MPI_Finalized(&flag));
  CHECK(flag == 0);
  printf("mpi_sessions: rank %d of 3: every check passed\n", rank);
  return 0;
}
