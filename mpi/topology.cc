// The MPI binding's Cartesian topologies: MPI_Dims_create, MPI_Cart_* and
// MPI_Topo_test, and the neighbourhood collectives on them. A Cartesian
// communicator is a communicator (MPI_Comm_split of the old one; ranks
// keep their order, as MPI allows) whose slot holds its grid, row-major. A
// neighbourhood collective is one schedule on it, so it runs blocking or
// nonblocking as any collective does.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cartage/collectives.h"
#include "mpi/collectives.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

// The Cartesian communicator `comm`'s slot, or null with an error of `fn`.
const CommSlot* CartOf(MPI_Comm comm, const char* fn, int* rc) {
  if (CommOf(comm, fn, rc) == nullptr) return nullptr;
  const CommSlot* slot = CommSlotOf(comm);
  if (slot->cart) return slot;
  *rc = Error(comm, fn, MPI_ERR_TOPOLOGY,
              absl::StrFormat("communicator 0x%08x has no Cartesian topology", static_cast<unsigned>(comm)));
  return nullptr;
}

std::vector<int> CoordsOf(const CommSlot& slot, int rank) {
  std::vector<int> coords(slot.dims.size());
  for (std::size_t i = slot.dims.size(); i-- > 0;) {
    coords[i] = rank % slot.dims[i];
    rank /= slot.dims[i];
  }
  return coords;
}

// The rank at `coords`, periodic dimensions wrapped; -1 off a
// non-periodic edge.
int RankAt(const CommSlot& slot, std::vector<int> coords) {
  int rank = 0;
  for (std::size_t i = 0; i < slot.dims.size(); ++i) {
    int c = coords[i];
    if (slot.periods[i]) {
      c = ((c % slot.dims[i]) + slot.dims[i]) % slot.dims[i];
    } else if (c < 0 || c >= slot.dims[i]) {
      return -1;
    }
    rank = rank * slot.dims[i] + c;
  }
  return rank;
}

// MPI_Cart_shift's pair for `rank`: the ranks `disp` back and forward along
// `dim` (MPI_PROC_NULL off an edge).
void Shift(const CommSlot& slot, int rank, int dim, int disp, int* source, int* dest) {
  std::vector<int> coords = CoordsOf(slot, rank);
  const int at = coords[static_cast<std::size_t>(dim)];
  coords[static_cast<std::size_t>(dim)] = at + disp;
  *dest = RankAt(slot, coords);
  coords[static_cast<std::size_t>(dim)] = at - disp;
  *source = RankAt(slot, coords);
  if (*dest < 0) *dest = MPI_PROC_NULL;
  if (*source < 0) *source = MPI_PROC_NULL;
}

// A neighbourhood alltoall (`each`: a block for each neighbour) or
// allgather (one block for all) on a Cartesian communicator. The
// neighbours are, dimension by dimension, the one back then the one
// forward; a receive from the one forward is posted first, as that
// neighbour's first message to this rank is the one it sends back.
int Neighbors(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
              MPI_Datatype recvtype, MPI_Comm comm, bool each, const How& how) {
  int rc = MPI_SUCCESS;
  const CommSlot* slot = CartOf(comm, how.fn, &rc);
  if (slot == nullptr) return rc;
  Args s, r;
  if (rc = Check(comm, how.fn, sendcount, sendtype, kCollective, 0, false, &s); rc != MPI_SUCCESS) return rc;
  if (rc = Check(comm, how.fn, recvcount, recvtype, kCollective, 0, false, &r); rc != MPI_SUCCESS) return rc;
  const Comm& c = *slot->comm;
  ScheduleBuilder b(c, absl::StrCat(each ? "neighbor_alltoall" : "neighbor_allgather", "/cartesian"));
  const int64_t send_block = int64_t{sendcount} * s.type->extent();
  const int64_t recv_block = int64_t{recvcount} * r.type->extent();
  auto* out = static_cast<std::byte*>(recvbuf);
  const auto* in = static_cast<const std::byte*>(sendbuf);
  for (std::size_t d = 0; d < slot->dims.size(); ++d) {
    int back = MPI_PROC_NULL, forward = MPI_PROC_NULL;
    Shift(*slot, c.rank(), static_cast<int>(d), 1, &back, &forward);
    const int64_t k = 2 * static_cast<int64_t>(d);  // back's block; forward's is k + 1
    if (forward != MPI_PROC_NULL) RecvTyped(b, out + (k + 1) * recv_block, recvcount, *r.type, forward);
    if (back != MPI_PROC_NULL) RecvTyped(b, out + k * recv_block, recvcount, *r.type, back);
    if (back != MPI_PROC_NULL) SendTyped(b, in + (each ? k * send_block : 0), sendcount, *s.type, back);
    if (forward != MPI_PROC_NULL) SendTyped(b, in + (each ? (k + 1) * send_block : 0), sendcount, *s.type, forward);
  }
  if (b.vertices().empty()) b.Fence();
  absl::StatusOr<std::shared_ptr<Schedule>> built = b.Build();
  if (!built.ok()) return FromStatus(comm, how.fn, built.status());
  return RunSchedule(comm, how, *built);
}

}  // namespace

extern "C" {

int PMPI_Dims_create(int nnodes, int ndims, int dims[]) {
  const char* fn = "MPI_Dims_create";
  if (nnodes < 1 || ndims < 0) {
    return Error(MPI_COMM_WORLD, fn, MPI_ERR_ARG, absl::StrFormat("%d nodes in %d dimensions", nnodes, ndims));
  }
  int left = nnodes;
  int free_dims = 0;
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] < 0) return Error(MPI_COMM_WORLD, fn, MPI_ERR_DIMS, absl::StrFormat("dims[%d] = %d", i, dims[i]));
    if (dims[i] == 0) {
      ++free_dims;
    } else if (left % dims[i] != 0) {
      return Error(MPI_COMM_WORLD, fn, MPI_ERR_DIMS,
                   absl::StrFormat("%d nodes do not divide by the dimensions given", nnodes));
    } else {
      left /= dims[i];
    }
  }
  if (free_dims == 0) {
    if (left == 1) return MPI_SUCCESS;
    return Error(MPI_COMM_WORLD, fn, MPI_ERR_DIMS, absl::StrFormat("the dimensions given do not make %d", nnodes));
  }
  // The prime factors, largest first, each to the free dimension that is
  // smallest so far: as close to one another as they can be, then in
  // non-increasing order.
  std::vector<int> primes;
  for (int p = 2; p * p <= left; ++p) {
    while (left % p == 0) {
      primes.push_back(p);
      left /= p;
    }
  }
  if (left > 1) primes.push_back(left);
  std::vector<int> made(static_cast<std::size_t>(free_dims), 1);
  for (auto p = primes.rbegin(); p != primes.rend(); ++p) *std::min_element(made.begin(), made.end()) *= *p;
  std::sort(made.begin(), made.end(), [](int a, int b) { return a > b; });
  std::size_t next = 0;
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] == 0) dims[i] = made[next++];
  }
  return MPI_SUCCESS;
}

int PMPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder,
                     MPI_Comm* comm_cart) {
  (void)reorder;  // ranks keep their order, as MPI allows
  const char* fn = "MPI_Cart_create";
  int rc = MPI_SUCCESS;
  const Comm* c = IntraOf(comm_old, fn, &rc);
  if (c == nullptr) return rc;
  if (ndims < 0) return Error(comm_old, fn, MPI_ERR_DIMS, absl::StrFormat("%d dimensions", ndims));
  int64_t cells = 1;
  for (int i = 0; i < ndims; ++i) {
    if (dims[i] <= 0) return Error(comm_old, fn, MPI_ERR_DIMS, absl::StrFormat("dims[%d] = %d", i, dims[i]));
    cells *= dims[i];
  }
  if (cells > c->size()) {
    return Error(comm_old, fn, MPI_ERR_TOPOLOGY,
                 absl::StrFormat("a grid of %d cells on a communicator of %d", cells, c->size()));
  }
  const int rank = c->rank();
  if (rc = PMPI_Comm_split(comm_old, rank < cells ? 0 : MPI_UNDEFINED, rank, comm_cart); rc != MPI_SUCCESS) return rc;
  if (*comm_cart == MPI_COMM_NULL) return MPI_SUCCESS;
  CommSlot* slot = CommSlotOf(*comm_cart);
  slot->cart = true;
  slot->dims.assign(dims, dims + ndims);
  slot->periods.clear();
  for (int i = 0; i < ndims; ++i) slot->periods.push_back(periods[i] != 0);
  return MPI_SUCCESS;
}

int PMPI_Cart_map(MPI_Comm comm, int ndims, const int dims[], const int periods[], int* newrank) {
  (void)periods;
  int rc = MPI_SUCCESS;
  const Comm* c = IntraOf(comm, "MPI_Cart_map", &rc);
  if (c == nullptr) return rc;
  int64_t cells = 1;
  for (int i = 0; i < ndims; ++i) cells *= dims[i];
  *newrank = c->rank() < cells ? c->rank() : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

int PMPI_Topo_test(MPI_Comm comm, int* status) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Topo_test", &rc) == nullptr) return rc;
  *status = CommSlotOf(comm)->cart ? MPI_CART : MPI_UNDEFINED;
  return MPI_SUCCESS;
}

int PMPI_Cartdim_get(MPI_Comm comm, int* ndims) {
  int rc = MPI_SUCCESS;
  const CommSlot* slot = CartOf(comm, "MPI_Cartdim_get", &rc);
  if (slot == nullptr) return rc;
  *ndims = static_cast<int>(slot->dims.size());
  return MPI_SUCCESS;
}

int PMPI_Cart_get(MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]) {
  int rc = MPI_SUCCESS;
  const CommSlot* slot = CartOf(comm, "MPI_Cart_get", &rc);
  if (slot == nullptr) return rc;
  const std::vector<int> mine = CoordsOf(*slot, slot->comm->rank());
  for (std::size_t i = 0; i < slot->dims.size() && static_cast<int>(i) < maxdims; ++i) {
    dims[i] = slot->dims[i];
    periods[i] = slot->periods[i] ? 1 : 0;
    coords[i] = mine[i];
  }
  return MPI_SUCCESS;
}

int PMPI_Cart_coords(MPI_Comm comm, int rank, int maxdims, int coords[]) {
  int rc = MPI_SUCCESS;
  const CommSlot* slot = CartOf(comm, "MPI_Cart_coords", &rc);
  if (slot == nullptr) return rc;
  if (rank < 0 || rank >= slot->comm->size()) {
    return Error(comm, "MPI_Cart_coords", MPI_ERR_RANK,
                 absl::StrFormat("rank %d: no such rank in a communicator of %d", rank, slot->comm->size()));
  }
  const std::vector<int> got = CoordsOf(*slot, rank);
  for (std::size_t i = 0; i < got.size() && static_cast<int>(i) < maxdims; ++i) coords[i] = got[i];
  return MPI_SUCCESS;
}

int PMPI_Cart_rank(MPI_Comm comm, const int coords[], int* rank) {
  int rc = MPI_SUCCESS;
  const CommSlot* slot = CartOf(comm, "MPI_Cart_rank", &rc);
  if (slot == nullptr) return rc;
  *rank = RankAt(*slot, std::vector<int>(coords, coords + slot->dims.size()));
  if (*rank >= 0) return MPI_SUCCESS;
  return Error(comm, "MPI_Cart_rank", MPI_ERR_ARG, "coordinates off the edge of a non-periodic dimension");
}

int PMPI_Cart_shift(MPI_Comm comm, int direction, int disp, int* rank_source, int* rank_dest) {
  int rc = MPI_SUCCESS;
  const CommSlot* slot = CartOf(comm, "MPI_Cart_shift", &rc);
  if (slot == nullptr) return rc;
  if (direction < 0 || direction >= static_cast<int>(slot->dims.size())) {
    return Error(comm, "MPI_Cart_shift", MPI_ERR_ARG,
                 absl::StrFormat("direction %d of a grid of %d dimensions", direction, slot->dims.size()));
  }
  Shift(*slot, slot->comm->rank(), direction, disp, rank_source, rank_dest);
  return MPI_SUCCESS;
}

int PMPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
  int rc = MPI_SUCCESS;
  const CommSlot* slot = CartOf(comm, "MPI_Cart_sub", &rc);
  if (slot == nullptr) return rc;
  // Ranks that share the coordinates of the dimensions dropped share a grid.
  const std::vector<int> mine = CoordsOf(*slot, slot->comm->rank());
  const std::vector<int> dims = slot->dims;
  const std::vector<bool> periods = slot->periods;
  int color = 0;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (!remain_dims[i]) color = color * dims[i] + mine[i];
  }
  if (rc = PMPI_Comm_split(comm, color, slot->comm->rank(), newcomm); rc != MPI_SUCCESS) return rc;
  CommSlot* made = CommSlotOf(*newcomm);
  made->cart = true;
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (remain_dims[i]) {
      made->dims.push_back(dims[i]);
      made->periods.push_back(periods[i]);
    }
  }
  return MPI_SUCCESS;
}

int PMPI_Neighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                           MPI_Datatype recvtype, MPI_Comm comm) {
  return Neighbors(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, true,
                   Blocking("MPI_Neighbor_alltoall"));
}
int PMPI_Ineighbor_alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                            int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return Neighbors(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, true,
                   Nonblocking("MPI_Ineighbor_alltoall", request));
}
int PMPI_Neighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                            int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  return Neighbors(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, false,
                   Blocking("MPI_Neighbor_allgather"));
}
int PMPI_Ineighbor_allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                             int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return Neighbors(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, false,
                   Nonblocking("MPI_Ineighbor_allgather", request));
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Dims_create);
CARTAGE_MPI_ALIAS(MPI_Cart_create);
CARTAGE_MPI_ALIAS(MPI_Cart_map);
CARTAGE_MPI_ALIAS(MPI_Topo_test);
CARTAGE_MPI_ALIAS(MPI_Cartdim_get);
CARTAGE_MPI_ALIAS(MPI_Cart_get);
CARTAGE_MPI_ALIAS(MPI_Cart_coords);
CARTAGE_MPI_ALIAS(MPI_Cart_rank);
CARTAGE_MPI_ALIAS(MPI_Cart_shift);
CARTAGE_MPI_ALIAS(MPI_Cart_sub);
CARTAGE_MPI_ALIAS(MPI_Neighbor_alltoall);
CARTAGE_MPI_ALIAS(MPI_Ineighbor_alltoall);
CARTAGE_MPI_ALIAS(MPI_Neighbor_allgather);
CARTAGE_MPI_ALIAS(MPI_Ineighbor_allgather);
