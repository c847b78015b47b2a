// The MPI binding's collectives: each checks its arguments where MPI says
// they are significant, then makes one call of cartage/collectives.h.
// cartage's collectives take one datatype and count for both sides; an MPI
// call whose two sides name different (predefined) types or counts where
// both are significant is refused with MPI_ERR_ARG, naming them.
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "cartage/collectives.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

// Runs `call` with a request for it: blocking (`request` null: `call` gets
// none) or nonblocking (a new request slot's, completed by MPI_Wait).
template <class Call>
int RunCall(MPI_Comm comm, const char* fn, MPI_Request* request, Call call) {
  if (request == nullptr) return FromStatus(comm, fn, call(nullptr));
  Slot* slot = NewSlot(request);
  slot->comm = comm;
  if (const absl::Status st = call(&slot->req); !st.ok()) {
    FreeSlot(request);
    return FromStatus(comm, fn, st);
  }
  return MPI_SUCCESS;
}

int CheckRoot(MPI_Comm comm, const char* fn, int root, const Args& a) {
  if (root >= 0 && root < a.comm->size()) return MPI_SUCCESS;
  return Error(comm, fn, MPI_ERR_ROOT,
               absl::StrFormat("root %d: no such rank in a communicator of %d", root, a.comm->size()));
}

enum class Reduce { kReduce, kAllreduce, kScan, kExscan };

// Reduce, Allreduce, Scan and Exscan: their checks, MPI_IN_PLACE, the call.
int Reduction(Reduce what, const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              int root, MPI_Comm comm, const char* fn, MPI_Request* request = nullptr) {
  Args a;
  if (int rc = Check(comm, fn, count, datatype, 0, 0, false, &a); rc != MPI_SUCCESS) return rc;
  const std::optional<OpKind> kind = OpOf(op);
  if (!kind.has_value()) {
    return Error(comm, fn, MPI_ERR_OP,
                 absl::StrFormat("operator 0x%08x is not a predefined reduction", static_cast<unsigned>(op)));
  }
  if (what == Reduce::kReduce) {
    if (int rc = CheckRoot(comm, fn, root, a); rc != MPI_SUCCESS) return rc;
  }
  const Op reduction(*kind);
  const void* send = sendbuf == MPI_IN_PLACE ? kInPlace : sendbuf;
  const Comm& c = *a.comm;
  return RunCall(comm, fn, request, [&](Request* r) {
    switch (what) {
      case Reduce::kReduce:
        return r != nullptr ? Ireduce(c, send, recvbuf, count, *a.type, reduction, root, r)
                            : cartage::Reduce(c, send, recvbuf, count, *a.type, reduction, root);
      case Reduce::kAllreduce:
        return r != nullptr ? Iallreduce(c, send, recvbuf, count, *a.type, reduction, r)
                            : Allreduce(c, send, recvbuf, count, *a.type, reduction);
      case Reduce::kScan: return Scan(c, send, recvbuf, count, *a.type, reduction);
      case Reduce::kExscan: break;
    }
    return Exscan(c, send, recvbuf, count, *a.type, reduction);
  });
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

int DoBarrier(MPI_Comm comm, MPI_Request* request, const char* fn) {
  int rc = MPI_SUCCESS;
  const Comm* c = CommOf(comm, fn, &rc);
  if (c == nullptr) return rc;
  return RunCall(comm, fn, request, [&](Request* r) { return r != nullptr ? Ibarrier(*c, r) : Barrier(*c); });
}

int DoBcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request,
            const char* fn) {
  Args a;
  if (int rc = Check(comm, fn, count, datatype, 0, 0, false, &a); rc != MPI_SUCCESS) return rc;
  if (int rc = CheckRoot(comm, fn, root, a); rc != MPI_SUCCESS) return rc;
  return RunCall(comm, fn, request, [&](Request* r) {
    return r != nullptr ? Ibcast(*a.comm, buffer, count, *a.type, root, r) : Bcast(*a.comm, buffer, count, *a.type, root);
  });
}

// Allgather and Alltoall: one signature, MPI_IN_PLACE, then the call.
int DoAllToAll(bool alltoall, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request, const char* fn) {
  const bool in_place = sendbuf == MPI_IN_PLACE;
  Args a;
  int count = 0;
  if (int rc = Signature(comm, fn, {sendcount, sendtype, !in_place}, {recvcount, recvtype, true}, &a, &count);
      rc != MPI_SUCCESS) {
    return rc;
  }
  const void* send = in_place ? kInPlace : sendbuf;
  return RunCall(comm, fn, request, [&](Request* r) {
    if (alltoall) {
      return r != nullptr ? Ialltoall(*a.comm, send, recvbuf, count, *a.type, r)
                          : Alltoall(*a.comm, send, recvbuf, count, *a.type);
    }
    return r != nullptr ? Iallgather(*a.comm, send, recvbuf, count, *a.type, r)
                        : Allgather(*a.comm, send, recvbuf, count, *a.type);
  });
}

// The one type a v-form moves, from the sides significant on this rank.
int OneType(MPI_Comm comm, const char* fn, MPI_Datatype sendtype, bool send_sig, MPI_Datatype recvtype,
            bool recv_sig, Args* a) {
  if (int rc = Check(comm, fn, 0, send_sig ? sendtype : recvtype, 0, 0, false, a); rc != MPI_SUCCESS) return rc;
  if (!send_sig || !recv_sig) return MPI_SUCCESS;
  Args other;
  if (int rc = Check(comm, fn, 0, recvtype, 0, 0, false, &other); rc != MPI_SUCCESS) return rc;
  if (other.type == a->type) return MPI_SUCCESS;
  return Error(comm, fn, MPI_ERR_ARG,
               absl::StrFormat("sends datatype 0x%08x but receives 0x%08x: the binding takes one type for both sides",
                               static_cast<unsigned>(sendtype), static_cast<unsigned>(recvtype)));
}

// A rank-indexed int array as cartage's counts (empty where not significant).
std::vector<int64_t> PerRank(const int* values, int n) {
  return values == nullptr ? std::vector<int64_t>() : std::vector<int64_t>(values, values + n);
}

}  // namespace

extern "C" {

int PMPI_Barrier(MPI_Comm comm) { return DoBarrier(comm, nullptr, "MPI_Barrier"); }

int PMPI_Ibarrier(MPI_Comm comm, MPI_Request* request) { return DoBarrier(comm, request, "MPI_Ibarrier"); }

int PMPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return DoBcast(buffer, count, datatype, root, comm, nullptr, "MPI_Bcast");
}

int PMPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request) {
  return DoBcast(buffer, count, datatype, root, comm, request, "MPI_Ibcast");
}

int PMPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm) {
  return Reduction(Reduce::kReduce, sendbuf, recvbuf, count, datatype, op, root, comm, "MPI_Reduce");
}

int PMPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                 MPI_Comm comm, MPI_Request* request) {
  return Reduction(Reduce::kReduce, sendbuf, recvbuf, count, datatype, op, root, comm, "MPI_Ireduce", request);
}

int PMPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return Reduction(Reduce::kAllreduce, sendbuf, recvbuf, count, datatype, op, 0, comm, "MPI_Allreduce");
}

int PMPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                    MPI_Request* request) {
  return Reduction(Reduce::kAllreduce, sendbuf, recvbuf, count, datatype, op, 0, comm, "MPI_Iallreduce", request);
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
  return DoAllToAll(false, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, nullptr, "MPI_Allgather");
}

int PMPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return DoAllToAll(false, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, "MPI_Iallgather");
}

int PMPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  return DoAllToAll(true, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, nullptr, "MPI_Alltoall");
}

int PMPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return DoAllToAll(true, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request, "MPI_Ialltoall");
}

int PMPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  int rc = MPI_SUCCESS;
  const Comm* c = CommOf(comm, "MPI_Gatherv", &rc);
  if (c == nullptr) return rc;
  const bool at_root = c->rank() == root;
  const bool in_place = at_root && sendbuf == MPI_IN_PLACE;
  Args a;
  if (rc = OneType(comm, "MPI_Gatherv", sendtype, !in_place, recvtype, at_root, &a); rc != MPI_SUCCESS) return rc;
  if (rc = CheckRoot(comm, "MPI_Gatherv", root, a); rc != MPI_SUCCESS) return rc;
  const int n = at_root ? c->size() : 0;
  return FromStatus(comm, "MPI_Gatherv", Gatherv(*c, in_place ? kInPlace : sendbuf, in_place ? 0 : sendcount, recvbuf,
                                                 PerRank(recvcounts, n), PerRank(displs, n), *a.type, root));
}

int PMPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                  void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  int rc = MPI_SUCCESS;
  const Comm* c = CommOf(comm, "MPI_Scatterv", &rc);
  if (c == nullptr) return rc;
  const bool at_root = c->rank() == root;
  const bool in_place = at_root && recvbuf == MPI_IN_PLACE;
  Args a;
  if (rc = OneType(comm, "MPI_Scatterv", sendtype, at_root, recvtype, !in_place, &a); rc != MPI_SUCCESS) return rc;
  if (rc = CheckRoot(comm, "MPI_Scatterv", root, a); rc != MPI_SUCCESS) return rc;
  const int n = at_root ? c->size() : 0;
  return FromStatus(comm, "MPI_Scatterv",
                    Scatterv(*c, sendbuf, PerRank(sendcounts, n), PerRank(displs, n),
                             in_place ? const_cast<void*>(kInPlace) : recvbuf, in_place ? 0 : recvcount, *a.type, root));
}

int PMPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  const bool in_place = sendbuf == MPI_IN_PLACE;
  Args a;
  if (int rc = OneType(comm, "MPI_Allgatherv", sendtype, !in_place, recvtype, true, &a); rc != MPI_SUCCESS) return rc;
  const int n = a.comm->size();
  return FromStatus(comm, "MPI_Allgatherv",
                    Allgatherv(*a.comm, in_place ? kInPlace : sendbuf, in_place ? 0 : sendcount, recvbuf,
                               PerRank(recvcounts, n), PerRank(displs, n), *a.type));
}

int PMPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  const bool in_place = sendbuf == MPI_IN_PLACE;
  Args a;
  if (int rc = OneType(comm, "MPI_Alltoallv", sendtype, !in_place, recvtype, true, &a); rc != MPI_SUCCESS) return rc;
  const int n = a.comm->size();
  return FromStatus(comm, "MPI_Alltoallv",
                    Alltoallv(*a.comm, in_place ? kInPlace : sendbuf, PerRank(in_place ? nullptr : sendcounts, n),
                              PerRank(in_place ? nullptr : sdispls, n), recvbuf, PerRank(recvcounts, n),
                              PerRank(rdispls, n), *a.type));
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Barrier);
CARTAGE_MPI_ALIAS(MPI_Ibarrier);
CARTAGE_MPI_ALIAS(MPI_Bcast);
CARTAGE_MPI_ALIAS(MPI_Ibcast);
CARTAGE_MPI_ALIAS(MPI_Reduce);
CARTAGE_MPI_ALIAS(MPI_Ireduce);
CARTAGE_MPI_ALIAS(MPI_Allreduce);
CARTAGE_MPI_ALIAS(MPI_Iallreduce);
CARTAGE_MPI_ALIAS(MPI_Scan);
CARTAGE_MPI_ALIAS(MPI_Exscan);
CARTAGE_MPI_ALIAS(MPI_Gather);
CARTAGE_MPI_ALIAS(MPI_Scatter);
CARTAGE_MPI_ALIAS(MPI_Allgather);
CARTAGE_MPI_ALIAS(MPI_Iallgather);
CARTAGE_MPI_ALIAS(MPI_Alltoall);
CARTAGE_MPI_ALIAS(MPI_Ialltoall);
CARTAGE_MPI_ALIAS(MPI_Gatherv);
CARTAGE_MPI_ALIAS(MPI_Scatterv);
CARTAGE_MPI_ALIAS(MPI_Allgatherv);
CARTAGE_MPI_ALIAS(MPI_Alltoallv);
