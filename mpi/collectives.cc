// The MPI binding's collectives: each checks its arguments where MPI says
// they are significant, then makes one call of cartage/collectives.h.
// cartage's collectives take one datatype and count for both sides; an MPI
// call whose two sides name different (predefined) types or counts where
// both are significant is refused with MPI_ERR_ARG, naming them.
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "cartage/collectives.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

enum class Reduce { kReduce, kAllreduce, kScan, kExscan };

// Reduce, Allreduce, Scan and Exscan: their checks, MPI_IN_PLACE, the call.
int Reduction(Reduce what, const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              int root, MPI_Comm comm, const char* fn) {
  Args a;
  if (int rc = Check(comm, fn, count, datatype, 0, 0, false, &a); rc != MPI_SUCCESS) return rc;
  const std::optional<OpKind> kind = OpOf(op);
  if (!kind.has_value()) {
    return Error(comm, fn, MPI_ERR_OP,
                 absl::StrFormat("operator 0x%08x is not a predefined reduction", static_cast<unsigned>(op)));
  }
  if (what == Reduce::kReduce && (root < 0 || root >= a.comm->size())) {
    return Error(comm, fn, MPI_ERR_ROOT,
                 absl::StrFormat("root %d: no such rank in a communicator of %d", root, a.comm->size()));
  }
  const Op reduction(*kind);
  const void* send = sendbuf == MPI_IN_PLACE ? kInPlace : sendbuf;
  const Comm& c = *a.comm;
  absl::Status st;
  switch (what) {
    case Reduce::kReduce: st = cartage::Reduce(c, send, recvbuf, count, *a.type, reduction, root); break;
    case Reduce::kAllreduce: st = Allreduce(c, send, recvbuf, count, *a.type, reduction); break;
    case Reduce::kScan: st = Scan(c, send, recvbuf, count, *a.type, reduction); break;
    case Reduce::kExscan: st = Exscan(c, send, recvbuf, count, *a.type, reduction); break;
  }
  return FromStatus(comm, fn, st);
}

// The one (count, type) a gather, scatter, allgather or alltoall moves,
// from the sides significant on this rank (both must then agree).
struct Side {
  int count;
  MPI_Datatype type;
  bool significant;
};
int Signature(MPI_Comm comm, const char* fn, Side send, Side recv, Args* a, int* count) {
  const Side& one = send.significant ? send : recv;
  if (int rc = Check(comm, fn, one.count, one.type, 0, 0, false, a); rc != MPI_SUCCESS) return rc;
  *count = one.count;
  if (!send.significant || !recv.significant) return MPI_SUCCESS;
  Args other;
  if (int rc = Check(comm, fn, recv.count, recv.type, 0, 0, false, &other); rc != MPI_SUCCESS) return rc;
  if (other.type != a->type || recv.count != send.count) {
    return Error(comm, fn, MPI_ERR_ARG,
                 absl::StrFormat("sends %d of datatype 0x%08x but receives %d of 0x%08x: the binding takes one "
                                 "type and count for both sides",
                                 send.count, static_cast<unsigned>(send.type), recv.count,
                                 static_cast<unsigned>(recv.type)));
  }
  return MPI_SUCCESS;
}

int CheckRoot(MPI_Comm comm, const char* fn, int root, const Args& a) {
  if (root >= 0 && root < a.comm->size()) return MPI_SUCCESS;
  return Error(comm, fn, MPI_ERR_ROOT,
               absl::StrFormat("root %d: no such rank in a communicator of %d", root, a.comm->size()));
}

}  // namespace

extern "C" {

int PMPI_Barrier(MPI_Comm comm) {
  int rc = MPI_SUCCESS;
  const Comm* c = CommOf(comm, "MPI_Barrier", &rc);
  if (c == nullptr) return rc;
  return FromStatus(comm, "MPI_Barrier", Barrier(*c));
}

int PMPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  Args a;
  if (int rc = Check(comm, "MPI_Bcast", count, datatype, 0, 0, false, &a); rc != MPI_SUCCESS) return rc;
  if (int rc = CheckRoot(comm, "MPI_Bcast", root, a); rc != MPI_SUCCESS) return rc;
  return FromStatus(comm, "MPI_Bcast", Bcast(*a.comm, buffer, count, *a.type, root));
}

int PMPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm) {
  return Reduction(Reduce::kReduce, sendbuf, recvbuf, count, datatype, op, root, comm, "MPI_Reduce");
}

int PMPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return Reduction(Reduce::kAllreduce, sendbuf, recvbuf, count, datatype, op, 0, comm, "MPI_Allreduce");
}

int PMPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return Reduction(Reduce::kScan, sendbuf, recvbuf, count, datatype, op, 0, comm, "MPI_Scan");
}

int PMPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return Reduction(Reduce::kExscan, sendbuf, recvbuf, count, datatype, op, 0, comm, "MPI_Exscan");
}

int PMPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  int rc = MPI_SUCCESS;
  const Comm* c = CommOf(comm, "MPI_Gather", &rc);
  if (c == nullptr) return rc;
  const bool at_root = c->rank() == root;
  const bool in_place = at_root && sendbuf == MPI_IN_PLACE;
  Args a;
  int count = 0;
  rc = Signature(comm, "MPI_Gather", {sendcount, sendtype, !in_place}, {recvcount, recvtype, at_root}, &a, &count);
  if (rc != MPI_SUCCESS) return rc;
  if (rc = CheckRoot(comm, "MPI_Gather", root, a); rc != MPI_SUCCESS) return rc;
  return FromStatus(comm, "MPI_Gather",
                    Gather(*c, in_place ? kInPlace : sendbuf, recvbuf, count, *a.type, root));
}

int PMPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm) {
  int rc = MPI_SUCCESS;
  const Comm* c = CommOf(comm, "MPI_Scatter", &rc);
  if (c == nullptr) return rc;
  const bool at_root = c->rank() == root;
  const bool in_place = at_root && recvbuf == MPI_IN_PLACE;
  Args a;
  int count = 0;
  rc = Signature(comm, "MPI_Scatter", {sendcount, sendtype, at_root}, {recvcount, recvtype, !in_place}, &a, &count);
  if (rc != MPI_SUCCESS) return rc;
  if (rc = CheckRoot(comm, "MPI_Scatter", root, a); rc != MPI_SUCCESS) return rc;
  return FromStatus(comm, "MPI_Scatter",
                    Scatter(*c, sendbuf, in_place ? const_cast<void*>(kInPlace) : recvbuf, count, *a.type, root));
}

int PMPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm) {
  const bool in_place = sendbuf == MPI_IN_PLACE;
  Args a;
  int count = 0;
  if (int rc = Signature(comm, "MPI_Allgather", {sendcount, sendtype, !in_place}, {recvcount, recvtype, true}, &a,
                         &count);
      rc != MPI_SUCCESS) {
    return rc;
  }
  return FromStatus(comm, "MPI_Allgather",
                    Allgather(*a.comm, in_place ? kInPlace : sendbuf, recvbuf, count, *a.type));
}

int PMPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  const bool in_place = sendbuf == MPI_IN_PLACE;
  Args a;
  int count = 0;
  if (int rc = Signature(comm, "MPI_Alltoall", {sendcount, sendtype, !in_place}, {recvcount, recvtype, true}, &a,
                         &count);
      rc != MPI_SUCCESS) {
    return rc;
  }
  return FromStatus(comm, "MPI_Alltoall", Alltoall(*a.comm, in_place ? kInPlace : sendbuf, recvbuf, count, *a.type));
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Barrier);
CARTAGE_MPI_ALIAS(MPI_Bcast);
CARTAGE_MPI_ALIAS(MPI_Reduce);
CARTAGE_MPI_ALIAS(MPI_Allreduce);
CARTAGE_MPI_ALIAS(MPI_Scan);
CARTAGE_MPI_ALIAS(MPI_Exscan);
CARTAGE_MPI_ALIAS(MPI_Gather);
CARTAGE_MPI_ALIAS(MPI_Scatter);
CARTAGE_MPI_ALIAS(MPI_Allgather);
CARTAGE_MPI_ALIAS(MPI_Alltoall);
