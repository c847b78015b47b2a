// Internal to collectives/: what an algorithm's schedule builder builds
// from, and the builders, which the registry (select.cc) names.
//
// Every builder works on packed buffers (`Ctx::send`, `Ctx::recv`): the user's
// own memory for a contiguous type, else temporaries that a pack vertex fills
// first and an unpack vertex empties last (BuildCollective). Counts are in
// elements of the call's type; blocks are cut at element boundaries.
#ifndef CARTAGE_COLLECTIVES_ALGORITHMS_H_
#define CARTAGE_COLLECTIVES_ALGORITHMS_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cartage/collectives.h"
#include "cartage/schedule.h"
#include "cartage/xfer.h"

namespace cartage::alg {

// One rank's block of a v form's side: where it lies packed, how many
// elements, and where its elements lie in the user's buffer.
struct Block {
  Buf at;
  int64_t elems = 0;
  Buf layout;
};

// What a builder builds from.
struct Ctx {
  ScheduleBuilder& b;
  int r;
  int n;
  Buf send;  // packed input (== recv when in place)
  Buf recv;  // packed output
  bool in_place;
  int64_t count;  // elements: the whole buffer, or per rank (see CollectiveCall)
  Datatype type;
  uint64_t es;  // packed bytes per element
  std::optional<Op> op;
  int root;
  std::vector<Block> sblk, rblk;  // v forms: rank i's block of the send / receive side
  std::vector<int64_t> parts;     // reduce_scatter(_block): rank i's part is [parts[i], parts[i+1]) elements
  // The job's ranks outnumber the host's CPUs (Comm::Oversubscribed; false
  // where a schedule is built for rendering): a rank runs only while others
  // wait, so pipelines whose stages must run at once do not pay.
  bool oversubscribed;

  uint64_t Bytes(const Block& blk) const { return Bytes(blk.elems); }

  uint64_t Bytes(int64_t elems) const { return static_cast<uint64_t>(elems) * es; }
  // Block i of `per`-element blocks.
  Buf At(Buf base, int64_t i, int64_t per) const { return base + Bytes(i * per); }
  // `*t`, made a `bytes`-byte temporary the first time it is asked for.
  Buf TempOnce(Buf* t, uint64_t bytes) {
    if (!t->is_temp()) *t = b.Temp(bytes);
    return *t;
  }
  VertexId Reduce(Buf in, Buf inout, int64_t elems, std::vector<VertexId> after, bool in_is_left = true) {
    return b.Reduce(in, inout, elems, type, *op, after, in_is_left);
  }
};

// One rank: the result is its input, copied into recv unless in place.
inline absl::Status OneRank(Ctx& c, uint64_t bytes) {
  if (!c.in_place) c.b.Copy(c.send, c.recv, bytes);
  return absl::OkStatus();
}

// Gather, scatter, allgather and alltoall: the fixed-shape collectives
// that move blocks, whose sides (and ranks) may lay a block out by
// different types as long as its bytes agree.
inline bool FixedBlocks(Collective k) {
  return k == Collective::kGather || k == Collective::kScatter || k == Collective::kAllgather ||
         k == Collective::kAlltoall;
}

inline std::vector<VertexId> Deps(std::initializer_list<VertexId> ids) {
  std::vector<VertexId> out;
  for (VertexId v : ids) {
    if (v >= 0) out.push_back(v);
  }
  return out;
}

// The first element of part i of `count` elements cut into n parts.
inline int64_t PartStart(int64_t count, int i, int n) { return count * i / n; }

// The vertices of [first, end) that nothing waits for: what a later phase
// of a composed schedule waits for.
std::vector<VertexId> SinksSince(const ScheduleBuilder& b, std::size_t first);

// ---- the butterfly steps (butterfly.cc) that recursive halving and
// doubling algorithms share, for any rank count: with n not a power of two,
// the first 2*rem ranks (rem = n - pof2) pair up, the even one of a pair
// hands its data to the odd one (FoldIn) and sits out, so that pof2 "new
// ranks" take part; new rank i stands for ranks [First(i), First(i + 1)).
struct Fold {
  int pof2 = 1;
  int rem = 0;
  int newrank = -1;  // -1: this rank sits out
  // The rank that takes part for new rank `nr`, and the first rank it stands for.
  int Rank(int nr) const { return nr < rem ? 2 * nr + 1 : nr + rem; }
  int First(int nr) const { return nr < rem ? 2 * nr : nr + rem; }
  // The new rank of rank r (of a pair, the odd one's).
  int NewRankOf(int r) const { return r < 2 * rem ? r / 2 : r - rem; }
};
Fold MakeFold(int r, int n);
// `input`, where FoldIn and HalvingReduceScatter take one, is where this
// rank's vector lies while acc holds nothing yet (a send buffer): the first
// step that reads the vector reads it there, and the partner's data arrives
// straight in acc, so that the vector is never copied into acc. Without
// one, acc holds the vector (once `after` is done).
//
// A pair's even rank sends `elems` of its vector to the odd one, which
// reduces them into its own acc (through tmp). Returns what later steps
// wait for. The odd rank's halving then takes no input: its vector is in acc.
std::vector<VertexId> FoldIn(Ctx& c, const Fold& f, Buf acc, Buf tmp, int64_t elems, std::vector<VertexId> after,
                             const Buf* input = nullptr);
// Recursive halving reduce-scatter over the new ranks: new rank i ends with
// the elements [start[i], start[i+1]) of acc reduced over every rank
// (commutative operators). Returns every vertex it made.
std::vector<VertexId> HalvingReduceScatter(Ctx& c, const Fold& f, Buf acc, Buf tmp, const std::vector<int64_t>& start,
                                           const std::vector<VertexId>& after, const Buf* input = nullptr);
// Recursive doubling allgather over the new ranks: new rank i brings
// [start[i], start[i+1]) of acc, and all of acc ends up everywhere.
// Returns every vertex it made. Sends wait for `after`; receives (which
// write only blocks this rank does not hold) for `recv_after`. `first_from`,
// when given, is where this rank's own block lies before it reaches acc:
// the first send takes it from there, waiting for nothing.
std::vector<VertexId> DoublingAllgather(Ctx& c, const Fold& f, Buf acc, const std::vector<int64_t>& start,
                                        const std::vector<VertexId>& after, const std::vector<VertexId>& recv_after,
                                        const Buf* first_from = nullptr);

// An algorithm: its description and its schedule builder.
struct Algorithm {
  AlgorithmInfo info;
  absl::Status (*build)(Ctx&);
};
// Every algorithm (select.cc), and one by collective and name (null: none).
const std::vector<Algorithm>& Registry();
const Algorithm* Find(Collective c, absl::string_view name);

// The builders.
absl::Status BarrierDissemination(Ctx& c);
absl::Status BarrierLinear(Ctx& c);
absl::Status BarrierStar(Ctx& c);
absl::Status BcastBinomial(Ctx& c);
absl::Status BcastBinomialNear(Ctx& c);
absl::Status BcastChain(Ctx& c);
absl::Status BcastLinear(Ctx& c);
absl::Status BcastScatterAllgather(Ctx& c);
absl::Status ReduceBinomial(Ctx& c);
absl::Status GatherBinomial(Ctx& c);
absl::Status ScatterBinomial(Ctx& c);
absl::Status AllreduceRecursiveDoubling(Ctx& c);
absl::Status AllreduceRing(Ctx& c);
absl::Status AllreduceLinear(Ctx& c);
absl::Status AllreduceStar(Ctx& c);
absl::Status AllgatherRing(Ctx& c);
absl::Status AllgatherBruck(Ctx& c);
absl::Status AllgatherLinear(Ctx& c);
absl::Status AllgatherStar(Ctx& c);
absl::Status AlltoallPairwise(Ctx& c);
absl::Status AlltoallLinear(Ctx& c);
absl::Status AlltoallStar(Ctx& c);
absl::Status ReduceScatterGather(Ctx& c);
absl::Status AllreduceRabenseifner(Ctx& c);
absl::Status AllgatherRecursiveDoubling(Ctx& c);
absl::Status AlltoallBruck(Ctx& c);
absl::Status GathervLinear(Ctx& c);
absl::Status ScattervLinear(Ctx& c);
absl::Status AllgathervRing(Ctx& c);
absl::Status AlltoallvPairwise(Ctx& c);
absl::Status ReduceScatterRing(Ctx& c);
absl::Status ReduceScatterHalving(Ctx& c);
absl::Status ReduceScatterReduceThenScatter(Ctx& c);
absl::Status ScanRecursiveDoubling(Ctx& c);
absl::Status ExscanRecursiveDoubling(Ctx& c);

// A runnable schedule of `call` on `comm` (collectives.cc); under `sequence`
// if given (a rebuild that must keep the number the other ranks' schedules
// have: the blocking calls' cache, calls.cc), else the communicator's next.
absl::StatusOr<std::shared_ptr<Schedule>> BuildOn(const Comm& comm, const CollectiveCall& call,
                                                  std::optional<uint32_t> sequence);

// CARTAGE_COLL_EXPLAIN: unset or 0, nothing; 1, each distinct call shape's
// choice once (as its schedule is built); all, every call's.
enum class Explain { kOff, kFirst, kAll };
Explain ExplainMode();
// Prints `why` for rank `rank` on standard error.
void PrintExplanation(int rank, const std::string& why);

}  // namespace cartage::alg

#endif  // CARTAGE_COLLECTIVES_ALGORITHMS_H_
