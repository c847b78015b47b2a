// The MPI binding's collective calls: each blocking one, its nonblocking
// form and its persistent one (MPI-4's *_init, run by MPI_Start; its info
// is checked and its hints not taken) are one call of collectives.cc's
// with a `How`.
#include "mpi/collectives.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {

extern "C" {

// ---- Barrier, Bcast ----------------------------------------------------------------

int PMPI_Barrier(MPI_Comm comm) { return DoBarrier(comm, Blocking("MPI_Barrier")); }
int PMPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  return DoBarrier(comm, Nonblocking("MPI_Ibarrier", request));
}
int PMPI_Barrier_init(MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Barrier_init"); rc != MPI_SUCCESS) return rc;
  return DoBarrier(comm, Persistent("MPI_Barrier_init", request));
}

int PMPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  return DoBcast(buffer, count, datatype, root, comm, Blocking("MPI_Bcast"));
}
int PMPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request* request) {
  return DoBcast(buffer, count, datatype, root, comm, Nonblocking("MPI_Ibcast", request));
}
int PMPI_Bcast_init(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info,
                    MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Bcast_init"); rc != MPI_SUCCESS) return rc;
  return DoBcast(buffer, count, datatype, root, comm, Persistent("MPI_Bcast_init", request));
}

// ---- Reductions --------------------------------------------------------------------

int PMPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                MPI_Comm comm) {
  return Reduction(Collective::kReduce, sendbuf, recvbuf, count, datatype, op, root, comm, Blocking("MPI_Reduce"));
}
int PMPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                 MPI_Comm comm, MPI_Request* request) {
  return Reduction(Collective::kReduce, sendbuf, recvbuf, count, datatype, op, root, comm,
                   Nonblocking("MPI_Ireduce", request));
}
int PMPI_Reduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root,
                     MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Reduce_init"); rc != MPI_SUCCESS) return rc;
  return Reduction(Collective::kReduce, sendbuf, recvbuf, count, datatype, op, root, comm,
                   Persistent("MPI_Reduce_init", request));
}

int PMPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return Reduction(Collective::kAllreduce, sendbuf, recvbuf, count, datatype, op, 0, comm,
                   Blocking("MPI_Allreduce"));
}
int PMPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                    MPI_Request* request) {
  return Reduction(Collective::kAllreduce, sendbuf, recvbuf, count, datatype, op, 0, comm,
                   Nonblocking("MPI_Iallreduce", request));
}
int PMPI_Allreduce_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Allreduce_init"); rc != MPI_SUCCESS) return rc;
  return Reduction(Collective::kAllreduce, sendbuf, recvbuf, count, datatype, op, 0, comm,
                   Persistent("MPI_Allreduce_init", request));
}

int PMPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return Reduction(Collective::kScan, sendbuf, recvbuf, count, datatype, op, 0, comm, Blocking("MPI_Scan"));
}
int PMPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
               MPI_Request* request) {
  return Reduction(Collective::kScan, sendbuf, recvbuf, count, datatype, op, 0, comm,
                   Nonblocking("MPI_Iscan", request));
}
int PMPI_Scan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                   MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Scan_init"); rc != MPI_SUCCESS) return rc;
  return Reduction(Collective::kScan, sendbuf, recvbuf, count, datatype, op, 0, comm,
                   Persistent("MPI_Scan_init", request));
}

int PMPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  return Reduction(Collective::kExscan, sendbuf, recvbuf, count, datatype, op, 0, comm, Blocking("MPI_Exscan"));
}
int PMPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                 MPI_Request* request) {
  return Reduction(Collective::kExscan, sendbuf, recvbuf, count, datatype, op, 0, comm,
                   Nonblocking("MPI_Iexscan", request));
}
int PMPI_Exscan_init(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                     MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Exscan_init"); rc != MPI_SUCCESS) return rc;
  return Reduction(Collective::kExscan, sendbuf, recvbuf, count, datatype, op, 0, comm,
                   Persistent("MPI_Exscan_init", request));
}

int PMPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                              MPI_Comm comm) {
  return Reduction(Collective::kReduceScatterBlock, sendbuf, recvbuf, recvcount, datatype, op, 0, comm,
                   Blocking("MPI_Reduce_scatter_block"));
}
int PMPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op,
                               MPI_Comm comm, MPI_Request* request) {
  return Reduction(Collective::kReduceScatterBlock, sendbuf, recvbuf, recvcount, datatype, op, 0, comm,
                   Nonblocking("MPI_Ireduce_scatter_block", request));
}
int PMPI_Reduce_scatter_block_init(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype datatype,
                                   MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Reduce_scatter_block_init"); rc != MPI_SUCCESS) return rc;
  return Reduction(Collective::kReduceScatterBlock, sendbuf, recvbuf, recvcount, datatype, op, 0, comm,
                   Persistent("MPI_Reduce_scatter_block_init", request));
}

int PMPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                        MPI_Comm comm) {
  return DoReduceScatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, Blocking("MPI_Reduce_scatter"));
}
int PMPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype,
                         MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return DoReduceScatter(sendbuf, recvbuf, recvcounts, datatype, op, comm,
                         Nonblocking("MPI_Ireduce_scatter", request));
}
int PMPI_Reduce_scatter_init(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype,
                             MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Reduce_scatter_init"); rc != MPI_SUCCESS) return rc;
  return DoReduceScatter(sendbuf, recvbuf, recvcounts, datatype, op, comm,
                         Persistent("MPI_Reduce_scatter_init", request));
}

// ---- Gather, scatter and their all- forms ---------------------------------------------

int PMPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return DoRooted(Collective::kGather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                  Blocking("MPI_Gather"));
}
int PMPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return DoRooted(Collective::kGather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                  Nonblocking("MPI_Igather", request));
}
int PMPI_Gather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                     MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Gather_init"); rc != MPI_SUCCESS) return rc;
  return DoRooted(Collective::kGather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                  Persistent("MPI_Gather_init", request));
}

int PMPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return DoRooted(Collective::kScatter, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                  Blocking("MPI_Scatter"));
}
int PMPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return DoRooted(Collective::kScatter, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                  Nonblocking("MPI_Iscatter", request));
}
int PMPI_Scatter_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                      MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Scatter_init"); rc != MPI_SUCCESS) return rc;
  return DoRooted(Collective::kScatter, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm,
                  Persistent("MPI_Scatter_init", request));
}

int PMPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm) {
  return DoAllToAll(Collective::kAllgather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                    Blocking("MPI_Allgather"));
}
int PMPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                    MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return DoAllToAll(Collective::kAllgather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                    Nonblocking("MPI_Iallgather", request));
}
int PMPI_Allgather_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                        MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Allgather_init"); rc != MPI_SUCCESS) return rc;
  return DoAllToAll(Collective::kAllgather, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                    Persistent("MPI_Allgather_init", request));
}

int PMPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  return DoAllToAll(Collective::kAlltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                    Blocking("MPI_Alltoall"));
}
int PMPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return DoAllToAll(Collective::kAlltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                    Nonblocking("MPI_Ialltoall", request));
}
int PMPI_Alltoall_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                       MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Alltoall_init"); rc != MPI_SUCCESS) return rc;
  return DoAllToAll(Collective::kAlltoall, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm,
                    Persistent("MPI_Alltoall_init", request));
}

// ---- The v-forms -------------------------------------------------------------------------

int PMPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return DoGatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
                   Blocking("MPI_Gatherv"));
}
int PMPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                  const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return DoGatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
                   Nonblocking("MPI_Igatherv", request));
}
int PMPI_Gatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                      const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm,
                      MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Gatherv_init"); rc != MPI_SUCCESS) return rc;
  return DoGatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm,
                   Persistent("MPI_Gatherv_init", request));
}

int PMPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                  void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return DoScatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
                    Blocking("MPI_Scatterv"));
}
int PMPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                   void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return DoScatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
                    Nonblocking("MPI_Iscatterv", request));
}
int PMPI_Scatterv_init(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                       void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info,
                       MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Scatterv_init"); rc != MPI_SUCCESS) return rc;
  return DoScatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm,
                    Persistent("MPI_Scatterv_init", request));
}

int PMPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                    const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return DoAllgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                      Blocking("MPI_Allgatherv"));
}
int PMPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                     const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                     MPI_Request* request) {
  return DoAllgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                      Nonblocking("MPI_Iallgatherv", request));
}
int PMPI_Allgatherv_init(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                         const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                         MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Allgatherv_init"); rc != MPI_SUCCESS) return rc;
  return DoAllgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm,
                      Persistent("MPI_Allgatherv_init", request));
}

int PMPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm) {
  return DoAlltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                     Blocking("MPI_Alltoallv"));
}
int PMPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                    void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request* request) {
  return DoAlltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                     Nonblocking("MPI_Ialltoallv", request));
}
int PMPI_Alltoallv_init(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                        void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                        MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Alltoallv_init"); rc != MPI_SUCCESS) return rc;
  return DoAlltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                     Persistent("MPI_Alltoallv_init", request));
}

int PMPI_Alltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                   void* recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                   MPI_Comm comm) {
  return DoAlltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm,
                     Blocking("MPI_Alltoallw"));
}
int PMPI_Ialltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                    void* recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                    MPI_Comm comm, MPI_Request* request) {
  return DoAlltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm,
                     Nonblocking("MPI_Ialltoallw", request));
}
int PMPI_Alltoallw_init(const void* sendbuf, const int sendcounts[], const int sdispls[],
                        const MPI_Datatype sendtypes[], void* recvbuf, const int recvcounts[], const int rdispls[],
                        const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Alltoallw_init"); rc != MPI_SUCCESS) return rc;
  return DoAlltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm,
                     Persistent("MPI_Alltoallw_init", request));
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Barrier);
CARTAGE_MPI_ALIAS(MPI_Ibarrier);
CARTAGE_MPI_ALIAS(MPI_Barrier_init);
CARTAGE_MPI_ALIAS(MPI_Bcast);
CARTAGE_MPI_ALIAS(MPI_Ibcast);
CARTAGE_MPI_ALIAS(MPI_Bcast_init);
CARTAGE_MPI_ALIAS(MPI_Reduce);
CARTAGE_MPI_ALIAS(MPI_Ireduce);
CARTAGE_MPI_ALIAS(MPI_Reduce_init);
CARTAGE_MPI_ALIAS(MPI_Allreduce);
CARTAGE_MPI_ALIAS(MPI_Iallreduce);
CARTAGE_MPI_ALIAS(MPI_Allreduce_init);
CARTAGE_MPI_ALIAS(MPI_Scan);
CARTAGE_MPI_ALIAS(MPI_Iscan);
CARTAGE_MPI_ALIAS(MPI_Scan_init);
CARTAGE_MPI_ALIAS(MPI_Exscan);
CARTAGE_MPI_ALIAS(MPI_Iexscan);
CARTAGE_MPI_ALIAS(MPI_Exscan_init);
CARTAGE_MPI_ALIAS(MPI_Reduce_scatter_block);
CARTAGE_MPI_ALIAS(MPI_Ireduce_scatter_block);
CARTAGE_MPI_ALIAS(MPI_Reduce_scatter_block_init);
CARTAGE_MPI_ALIAS(MPI_Reduce_scatter);
CARTAGE_MPI_ALIAS(MPI_Ireduce_scatter);
CARTAGE_MPI_ALIAS(MPI_Reduce_scatter_init);
CARTAGE_MPI_ALIAS(MPI_Gather);
CARTAGE_MPI_ALIAS(MPI_Igather);
CARTAGE_MPI_ALIAS(MPI_Gather_init);
CARTAGE_MPI_ALIAS(MPI_Scatter);
CARTAGE_MPI_ALIAS(MPI_Iscatter);
CARTAGE_MPI_ALIAS(MPI_Scatter_init);
CARTAGE_MPI_ALIAS(MPI_Allgather);
CARTAGE_MPI_ALIAS(MPI_Iallgather);
CARTAGE_MPI_ALIAS(MPI_Allgather_init);
CARTAGE_MPI_ALIAS(MPI_Alltoall);
CARTAGE_MPI_ALIAS(MPI_Ialltoall);
CARTAGE_MPI_ALIAS(MPI_Alltoall_init);
CARTAGE_MPI_ALIAS(MPI_Gatherv);
CARTAGE_MPI_ALIAS(MPI_Igatherv);
CARTAGE_MPI_ALIAS(MPI_Gatherv_init);
CARTAGE_MPI_ALIAS(MPI_Scatterv);
CARTAGE_MPI_ALIAS(MPI_Iscatterv);
CARTAGE_MPI_ALIAS(MPI_Scatterv_init);
CARTAGE_MPI_ALIAS(MPI_Allgatherv);
CARTAGE_MPI_ALIAS(MPI_Iallgatherv);
CARTAGE_MPI_ALIAS(MPI_Allgatherv_init);
CARTAGE_MPI_ALIAS(MPI_Alltoallv);
CARTAGE_MPI_ALIAS(MPI_Ialltoallv);
CARTAGE_MPI_ALIAS(MPI_Alltoallv_init);
CARTAGE_MPI_ALIAS(MPI_Alltoallw);
CARTAGE_MPI_ALIAS(MPI_Ialltoallw);
CARTAGE_MPI_ALIAS(MPI_Alltoallw_init);
