/* The checks of the binding's C test programs: a failed one names the
 * program (CHECK_PROGRAM, defined before this header), the rank and the
 * line, and aborts the job. */
#ifndef CARTAGE_TESTS_MPI_CHECK_H_
#define CARTAGE_TESTS_MPI_CHECK_H_

#include <mpi.h>
#include <stdio.h>

static int g_rank = -1; /* set once MPI_Init returned */

#define CHECK(cond)                                                                              \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      fprintf(stderr, "%s: rank %d: line %d: %s\n", CHECK_PROGRAM, g_rank, __LINE__, #cond);     \
      MPI_Abort(MPI_COMM_WORLD, 2);                                                              \
    }                                                                                            \
  } while (0)
#define CHECK_OK(call) CHECK((call) == MPI_SUCCESS)

#endif /* CARTAGE_TESTS_MPI_CHECK_H_ */
