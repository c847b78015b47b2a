// MPI's collectives over a communicator, each one a schedule (CAR graph)
// built by a named algorithm that a selection table picks by (collective,
// bytes, ranks). Blocking, nonblocking (I...) and persistent (...Init, then
// Request::Start) forms; kInPlace where MPI allows MPI_IN_PLACE; any
// datatype (non-contiguous ones travel packed) and any operator
// (non-commutative ones get an algorithm that keeps rank order).
//
//   std::vector<double> x(n, world.rank()), sum(n);
//   CARTAGE_CHECK_OK(cartage::Allreduce(world, x.data(), sum.data(), n, dbl, cartage::Op(cartage::OpKind::kSum)));
//
// Every rank calls the same collectives in the same order (as in MPI).
// CARTAGE_COLLECTIVES="allreduce=ring,bcast=binomial" overrides the table;
// `cartage info` prints it.
#ifndef CARTAGE_COLLECTIVES_INCLUDE_CARTAGE_COLLECTIVES_H_
#define CARTAGE_COLLECTIVES_INCLUDE_CARTAGE_COLLECTIVES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cartage/cartage.h"
#include "cartage/schedule.h"

namespace cartage {

namespace internal {
inline const char in_place_marker = 0;
}  // namespace internal
// MPI_IN_PLACE: as the send buffer, the data is taken from (and the result
// left in) the receive buffer.
inline const void* const kInPlace = &internal::in_place_marker;

enum class Collective : uint8_t {
  kBarrier, kBcast, kReduce, kAllreduce, kGather, kScatter, kAllgather, kAlltoall, kCount
};
// "barrier", "bcast", ...
const char* CollectiveName(Collective c);

// One call of a collective. `count` is the element count of the whole
// buffer for bcast, reduce and allreduce, and per rank for gather,
// scatter, allgather and alltoall.
struct CollectiveCall {
  Collective kind = Collective::kBarrier;
  const void* send = nullptr;  // or kInPlace
  void* recv = nullptr;
  int64_t count = 0;
  Datatype type = Datatype::Basic(BasicType::kByte);
  std::optional<Op> op;    // reduce, allreduce
  int root = 0;            // bcast, reduce, gather, scatter
  std::string algorithm;   // empty: the selection table's choice
};

// An algorithm: a named schedule builder for one collective.
struct AlgorithmInfo {
  Collective collective;
  const char* name;
  const char* summary;
  bool commutative_only;  // needs a commutative operator
};
// Every algorithm, by collective.
const std::vector<AlgorithmInfo>& Algorithms();
// The algorithm the selection table (and CARTAGE_COLLECTIVES) picks.
std::string SelectAlgorithm(Collective c, uint64_t bytes, int ranks, bool commutative = true);
// The selection table as text (for `cartage info`).
std::string DescribeSelection();

// Builds the schedule of one call: to run on `comm`, or (rank, size, no
// buffers) to render. Errors name the collective, the algorithm and the
// argument.
absl::StatusOr<std::shared_ptr<Schedule>> BuildCollective(const Comm& comm, const CollectiveCall& call);
absl::StatusOr<std::shared_ptr<Schedule>> BuildCollective(int rank, int size, const CollectiveCall& call);

// Runs a call: blocking, nonblocking, or persistent (bound to `req`; each
// req->Start() runs it again).
absl::Status RunCollective(const Comm& comm, const CollectiveCall& call);
absl::Status StartCollective(const Comm& comm, const CollectiveCall& call, Request* req);
absl::Status InitCollective(const Comm& comm, const CollectiveCall& call, Request* req);

// The MPI forms.
absl::Status Barrier(const Comm& comm);
absl::Status Ibarrier(const Comm& comm, Request* req);
absl::Status Bcast(const Comm& comm, void* buf, int64_t count, const Datatype& type, int root);
absl::Status Ibcast(const Comm& comm, void* buf, int64_t count, const Datatype& type, int root, Request* req);
absl::Status Reduce(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                    const Op& op, int root);
absl::Status Ireduce(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                     const Op& op, int root, Request* req);
absl::Status Allreduce(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                       const Op& op);
absl::Status Iallreduce(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                        const Op& op, Request* req);
absl::Status Gather(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type, int root);
absl::Status Scatter(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                     int root);
absl::Status Allgather(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type);
absl::Status Iallgather(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                        Request* req);
absl::Status Alltoall(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type);
absl::Status Ialltoall(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                       Request* req);

}  // namespace cartage

#endif  // CARTAGE_COLLECTIVES_INCLUDE_CARTAGE_COLLECTIVES_H_
