/* MPI_Pack / MPI_Unpack throughput of vector types, the peer of
 * bench/pack_compare.cc: the same types (blocks of 8 B, 64 B and 1 KiB of
 * doubles, stride twice the block, 1 MiB of data), the same timing loop
 * (pack_harness.h). Built by bench/run-pack.sh with mpicc.mpich and
 * mpicc.openmpi when they are installed.
 *
 * usage: mpi_pack SYSTEM_NAME [REPS] */
#include <mpi.h>
#include <string.h>

#include "pack_harness.h"

#define PACKED_BYTES (1L << 20)

struct ctx {
  MPI_Datatype type;
  void* user;
  void* packed;
};

static void do_pack(void* p) {
  struct ctx* c = (struct ctx*)p;
  int position = 0;
  MPI_Pack(c->user, 1, c->type, c->packed, (int)PACKED_BYTES, &position, MPI_COMM_SELF);
}

static void do_unpack(void* p) {
  struct ctx* c = (struct ctx*)p;
  int position = 0;
  MPI_Unpack(c->packed, (int)PACKED_BYTES, &position, c->user, 1, c->type, MPI_COMM_SELF);
}

int main(int argc, char** argv) {
  const char* system = argc > 1 ? argv[1] : "mpi";
  const int reps = argc > 2 ? atoi(argv[2]) : 7;
  static const long blocks[] = {8, 64, 1024};
  size_t b;
  MPI_Init(&argc, &argv);
  for (b = 0; b < sizeof(blocks) / sizeof(blocks[0]); ++b) {
    const long block = blocks[b];
    const int doubles = (int)(block / 8);
    const int count = (int)(PACKED_BYTES / block);
    struct ctx c;
    MPI_Type_vector(count, doubles, 2 * doubles, MPI_DOUBLE, &c.type);
    MPI_Type_commit(&c.type);
    c.user = pack_harness_alloc(2 * PACKED_BYTES);
    c.packed = pack_harness_alloc(PACKED_BYTES);
    pack_harness_run(system, "pack", block, PACKED_BYTES, reps, do_pack, &c);
    pack_harness_run(system, "unpack", block, PACKED_BYTES, reps, do_unpack, &c);
    free(c.user);
    free(c.packed);
    MPI_Type_free(&c.type);
  }
  MPI_Finalize();
  return 0;
}
