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
#include <climits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
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
  kBarrier, kBcast, kReduce, kAllreduce, kGather, kScatter, kAllgather, kAlltoall,
  kGatherv, kScatterv, kAllgatherv, kAlltoallv, kReduceScatter, kReduceScatterBlock, kScan, kExscan,
  kCount
};
// "barrier", "bcast", ..., "reduce_scatter_block", "scan", "exscan".
const char* CollectiveName(Collective c);
// By name; nullopt if none.
std::optional<Collective> CollectiveByName(absl::string_view name);
// Whether the collective reduces (takes an operator), has a root, or takes
// per-rank counts (the v forms and reduce_scatter).
bool Reduces(Collective c);
bool Rooted(Collective c);
bool Varying(Collective c);

// One call of a collective. `count` is, in elements of `type`:
//   bcast, reduce, allreduce, scan, exscan: the whole buffer;
//   gather, scatter, allgather, alltoall, reduce_scatter_block: one rank's block;
//   gatherv, allgatherv: what this rank sends; scatterv: what it receives;
//   alltoallv, reduce_scatter: unused (the counts below say it all).
// The v forms take per-rank counts and displacements (in extents of `type`;
// empty displacements: the blocks lie one after another in rank order):
//   gatherv (recv_* at the root), allgatherv: recv_counts, recv_displs;
//   scatterv (at the root): send_counts, send_displs;
//   alltoallv: both; reduce_scatter: recv_counts (rank i's share of the
//   reduced vector, which is their sum long).
// The two sides of the collectives that move blocks (gather, scatter,
// allgather, alltoall and their v forms) may differ in type, as in MPI
// (sendtype, recvtype): `recv_type` is then the receive side's, and
// everything on that side counts in it (`recv_count` a fixed-shape call's
// receive block, scatterv's `count`, recv_counts and recv_displs); the
// bytes each block carries must agree. alltoallv with `send_types` and
// `recv_types` (n each) is MPI's alltoallw: rank i's blocks are laid out by
// send_types[i] and recv_types[i], and the displacements are in bytes.
struct CollectiveCall {
  Collective kind = Collective::kBarrier;
  const void* send = nullptr;  // or kInPlace
  void* recv = nullptr;
  int64_t count = 0;
  Datatype type = Datatype::Basic(BasicType::kByte);
  std::optional<Op> op;    // the reducing collectives
  int root = 0;            // the rooted collectives
  std::string algorithm;   // empty: the selection table's choice
  std::vector<int64_t> send_counts, send_displs, recv_counts, recv_displs;
  std::optional<Datatype> recv_type;  // the receive side's, where it differs
  int64_t recv_count = 0;             // with recv_type: a fixed-shape call's receive block
  std::vector<Datatype> send_types, recv_types;  // alltoallv as alltoallw
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
// The algorithm the selection table picks for a call of `bytes` (the
// whole buffer for the whole-buffer collectives, one rank's block for the
// others, the average block for the v forms). Overrides, first match wins:
// CARTAGE_COLLECTIVES="allreduce=ring,bcast=chain" (whatever the size), then
// the rules of the table file CARTAGE_COLLECTIVES_FILE (see
// LoadSelectionFile), then the built-in table. `oversubscribed`: the job's
// ranks outnumber the host's CPUs (Comm::Oversubscribed); `crowded`: three
// or more a CPU (Comm::Crowded).
std::string SelectAlgorithm(Collective c, uint64_t bytes, int ranks, bool commutative = true,
                            bool oversubscribed = false, bool crowded = false);
// The selection table as text (for `cartage info`), overrides included.
std::string DescribeSelection();
// Why SelectAlgorithm picks what it picks, in one line: the algorithm, the
// override or rule (file:line) that chose it, and each rule of the
// collective it passed over, with the condition that failed.
// CARTAGE_COLL_EXPLAIN=1 prints it (to standard error) for the first call
// of each distinct shape, =all for every call.
std::string ExplainSelection(Collective c, uint64_t bytes, int ranks, bool commutative = true,
                             bool oversubscribed = false, bool crowded = false);

// A selection rule: `collective` calls with min_bytes <= bytes < max_bytes,
// min_ranks <= ranks < max_ranks, min_total <= bytes x ranks < max_total
// (and ranks a power of two if pof2, the job oversubscribed if
// oversubscribed, and crowded if crowded) use `algorithm`, unless it needs a
// commutative operator and the call's is not.
struct SelectionRule {
  Collective collective = Collective::kBarrier;
  std::string algorithm;
  uint64_t min_bytes = 0, max_bytes = UINT64_MAX;
  uint64_t min_ranks = 0, max_ranks = UINT64_MAX;
  uint64_t min_total = 0, max_total = UINT64_MAX;
  bool pof2 = false;
  bool oversubscribed = false;  // only where the job's ranks outnumber the host's CPUs
  bool crowded = false;         // only where they are three or more a CPU
  std::string source;  // "FILE:LINE"
};
// Parses a selection table file: one rule a line, first match wins,
//   COLLECTIVE ALGORITHM [bytes=LO-HI] [ranks=LO-HI] [total=LO-HI] [pof2] [oversubscribed] [crowded]
// (LO <= x < HI; LO or HI may be empty; sizes may end in K, M or G); `#`
// starts a comment. `cartage info` prints the built-in table in this format.
// Errors name the file, the line and what is wrong (an unknown collective
// or algorithm, a bad range).
absl::StatusOr<std::vector<SelectionRule>> ParseSelectionFile(absl::string_view text, absl::string_view name);
// The rules in force: CARTAGE_COLLECTIVES_FILE's, read once (an unreadable
// or malformed file is an error every collective call reports), or none.
absl::StatusOr<const std::vector<SelectionRule>*> SelectionFileRules();

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
// The v forms: counts and displacements per rank, in elements and extents.
absl::Status Gatherv(const Comm& comm, const void* send, int64_t send_count, void* recv,
                     absl::Span<const int64_t> recv_counts, absl::Span<const int64_t> recv_displs,
                     const Datatype& type, int root);
absl::Status Scatterv(const Comm& comm, const void* send, absl::Span<const int64_t> send_counts,
                      absl::Span<const int64_t> send_displs, void* recv, int64_t recv_count, const Datatype& type,
                      int root);
absl::Status Allgatherv(const Comm& comm, const void* send, int64_t send_count, void* recv,
                        absl::Span<const int64_t> recv_counts, absl::Span<const int64_t> recv_displs,
                        const Datatype& type);
absl::Status Alltoallv(const Comm& comm, const void* send, absl::Span<const int64_t> send_counts,
                       absl::Span<const int64_t> send_displs, void* recv, absl::Span<const int64_t> recv_counts,
                       absl::Span<const int64_t> recv_displs, const Datatype& type);
// MPI's alltoallw: rank i's blocks are send_counts[i] elements of
// send_types[i] at send_byte_displs[i] bytes into `send`, and the same on
// the receive side.
absl::Status Alltoallw(const Comm& comm, const void* send, absl::Span<const int64_t> send_counts,
                       absl::Span<const int64_t> send_byte_displs, absl::Span<const Datatype> send_types, void* recv,
                       absl::Span<const int64_t> recv_counts, absl::Span<const int64_t> recv_byte_displs,
                       absl::Span<const Datatype> recv_types);
// Reduces the vectors of every rank (sum of recv_counts long) and leaves
// rank i's part (recv_counts[i] elements, in rank order) on rank i.
absl::Status ReduceScatter(const Comm& comm, const void* send, void* recv, absl::Span<const int64_t> recv_counts,
                           const Datatype& type, const Op& op);
absl::Status ReduceScatterBlock(const Comm& comm, const void* send, void* recv, int64_t recv_count,
                                const Datatype& type, const Op& op);
// Inclusive (scan) and exclusive (exscan: rank 0's recv is left alone)
// prefix reductions in rank order.
absl::Status Scan(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type, const Op& op);
absl::Status Exscan(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                    const Op& op);

// MPI_Comm_idup: duplicates of a communicator whose ranks agree on them by
// a nonblocking collective (an allreduce of proposals). Start on every
// rank, complete the request (Wait, Test), then Take. Ranks may start
// others meanwhile, on communicators that share ranks with this one and in
// any order: no two agreements ever take one context.
//
//   cartage::PendingDup dup;  // stays put until the request completes
//   CARTAGE_CHECK_OK(dup.Start(world, 1, &req));
//   ...
//   CARTAGE_CHECK_OK(req.Wait());
//   cartage::Comm copy = *dup.Take(0);
class PendingDup {
 public:
  // `copies` duplicates of `comm`, each on a context of its own.
  absl::Status Start(const Comm& comm, int copies, Request* req);
  // Duplicate `i`, once the request completed.
  absl::StatusOr<Comm> Take(int i) const;

 private:
  std::optional<Comm> comm_;
  std::vector<uint32_t> mine_, agreed_;
};

}  // namespace cartage

#endif  // CARTAGE_COLLECTIVES_INCLUDE_CARTAGE_COLLECTIVES_H_
