// Internal to collectives/: what an algorithm's schedule builder builds
// from, and the builders, which the registry (select.cc) names.
//
// Every builder works on packed buffers (`Ctx::send`, `Ctx::recv`): the user's
// own memory for a contiguous type, else temporaries that a pack vertex fills
// first and an unpack vertex empties last (BuildCollective). Counts are in
// elements of the call's type; blocks are cut at element boundaries.
#ifndef CARTAGE_COLLECTIVES_ALGORITHMS_H_
#define CARTAGE_COLLECTIVES_ALGORITHMS_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "cartage/collectives.h"
#include "cartage/schedule.h"

namespace cartage::alg {

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

  uint64_t Bytes(int64_t elems) const { return static_cast<uint64_t>(elems) * es; }
  // Block i of `per`-element blocks.
  Buf At(Buf base, int64_t i, int64_t per) const { return base + Bytes(i * per); }
  VertexId Reduce(Buf in, Buf inout, int64_t elems, std::vector<VertexId> after, bool in_is_left = true) {
    return b.Reduce(in, inout, elems, type, *op, after, in_is_left);
  }
};

inline std::vector<VertexId> Deps(std::initializer_list<VertexId> ids) {
  std::vector<VertexId> out;
  for (VertexId v : ids) {
    if (v >= 0) out.push_back(v);
  }
  return out;
}

// The first element of part i of `count` elements cut into n parts.
inline int64_t PartStart(int64_t count, int i, int n) { return count * i / n; }

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
absl::Status BcastBinomial(Ctx& c);
absl::Status BcastChain(Ctx& c);
absl::Status BcastScatterAllgather(Ctx& c);
absl::Status ReduceBinomial(Ctx& c);
absl::Status GatherBinomial(Ctx& c);
absl::Status ScatterBinomial(Ctx& c);
absl::Status AllreduceRecursiveDoubling(Ctx& c);
absl::Status AllreduceRing(Ctx& c);
absl::Status AllgatherRing(Ctx& c);
absl::Status AllgatherBruck(Ctx& c);
absl::Status AlltoallPairwise(Ctx& c);

}  // namespace cartage::alg

#endif  // CARTAGE_COLLECTIVES_ALGORITHMS_H_
