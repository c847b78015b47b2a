// The MPI binding's collectives (collectives.cc), as its entry points
// (collective_calls.cc) call them: each checks its arguments where MPI says
// they are significant, then runs the call blocking, nonblocking or
// persistent as `How` says; on an intercommunicator, intercoll.cc's.
#ifndef CARTAGE_MPI_COLLECTIVES_H_
#define CARTAGE_MPI_COLLECTIVES_H_

#include <cstdint>
#include <memory>

#include "cartage/collectives.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {

enum class Mode : uint8_t { kBlocking, kNonblocking, kPersistent };

// How a call was made: its name, mode and (not blocking) request.
struct How {
  const char* fn;
  Mode mode = Mode::kBlocking;
  MPI_Request* request = nullptr;
};

constexpr How Blocking(const char* fn) { return How{fn, Mode::kBlocking, nullptr}; }
constexpr How Nonblocking(const char* fn, MPI_Request* r) { return How{fn, Mode::kNonblocking, r}; }
constexpr How Persistent(const char* fn, MPI_Request* r) { return How{fn, Mode::kPersistent, r}; }

// The reductions with one count: Reduce, Allreduce, Scan, Exscan, Reduce_scatter_block.
int Reduction(Collective kind, const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              int root, MPI_Comm comm, const How& how);
int DoReduceScatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                    MPI_Comm comm, const How& how);
int DoBarrier(MPI_Comm comm, const How& how);
int DoBcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, const How& how);
// Gather and Scatter; Allgather and Alltoall.
int DoRooted(Collective kind, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
             int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, const How& how);
int DoAllToAll(Collective kind, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, MPI_Comm comm, const How& how);
int DoGatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
              const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, const How& how);
int DoScatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
               void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, const How& how);
int DoAllgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, MPI_Comm comm, const How& how);
int DoAlltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                const How& how);
// Runs a schedule the binding built (an intercommunicator's or a
// neighbourhood collective) as `how` says.
int RunSchedule(MPI_Comm comm, const How& how, const std::shared_ptr<Schedule>& s);
int DoAlltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                void* recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                MPI_Comm comm, const How& how);

}  // namespace cartage::mpi_binding

#endif  // CARTAGE_MPI_COLLECTIVES_H_
