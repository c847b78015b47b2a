// The registry of algorithms, the selection table and its overrides.
#include <cstdlib>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "collectives/algorithms.h"

namespace cartage {
namespace alg {

const std::vector<Algorithm>& Registry() {
  static const auto* kAll = new std::vector<Algorithm>{
      {{Collective::kBarrier, "dissemination", "ceil(log2 n) rounds of one message each way", false},
       &BarrierDissemination},
      {{Collective::kBcast, "binomial", "binomial tree; log2 n steps of the whole buffer", false}, &BcastBinomial},
      {{Collective::kBcast, "scatter_allgather", "binomial scatter of n parts, then a ring allgather", false},
       &BcastScatterAllgather},
      {{Collective::kBcast, "chain", "pipelined chain in 64 KiB chunks", false}, &BcastChain},
      {{Collective::kReduce, "binomial", "binomial tree; rank order kept for non-commutative operators", false},
       &ReduceBinomial},
      {{Collective::kAllreduce, "recursive_doubling", "log2 n exchanges of the whole buffer (+2 if n is not a power of 2)",
        false},
       &AllreduceRecursiveDoubling},
      {{Collective::kAllreduce, "ring", "ring reduce-scatter then ring allgather; 2(n-1) steps of 1/n", true},
       &AllreduceRing},
      {{Collective::kGather, "binomial", "binomial tree; subtrees' blocks travel together", false}, &GatherBinomial},
      {{Collective::kScatter, "binomial", "binomial tree; subtrees' blocks travel together", false},
       &ScatterBinomial},
      {{Collective::kAllgather, "ring", "n-1 steps of one block", false}, &AllgatherRing},
      {{Collective::kAllgather, "bruck", "ceil(log2 n) rounds, any n, then a rotation", false}, &AllgatherBruck},
      {{Collective::kAlltoall, "pairwise", "n-1 exchange steps, one partner each", false}, &AlltoallPairwise},
  };
  return *kAll;
}

const Algorithm* Find(Collective c, absl::string_view name) {
  for (const Algorithm& a : Registry()) {
    if (a.info.collective == c && name == a.info.name) return &a;
  }
  return nullptr;
}

}  // namespace alg

namespace {

using alg::Algorithm;
using alg::Find;
using alg::Registry;

// CARTAGE_COLLECTIVES="allreduce=ring,bcast=chain": per-collective overrides.
const absl::flat_hash_map<std::string, std::string>& Overrides() {
  static const auto* kMap = [] {
    auto* m = new absl::flat_hash_map<std::string, std::string>();
    if (const char* env = std::getenv("CARTAGE_COLLECTIVES")) {
      for (absl::string_view item : absl::StrSplit(env, ',', absl::SkipEmpty())) {
        std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
        (*m)[kv.first] = kv.second;
      }
    }
    return m;
  }();
  return *kMap;
}

// The built-in table: (collective, bytes, ranks) -> algorithm.
std::string TableChoice(Collective c, uint64_t bytes, int ranks, bool commutative) {
  switch (c) {
    case Collective::kBarrier: return "dissemination";
    case Collective::kBcast:
      if (bytes < (64u << 10) || ranks <= 2) return "binomial";
      return ranks >= 4 ? "scatter_allgather" : "chain";
    case Collective::kReduce: return "binomial";
    case Collective::kAllreduce:
      return commutative && ranks > 2 && bytes >= (64u << 10) ? "ring" : "recursive_doubling";
    case Collective::kGather: return "binomial";
    case Collective::kScatter: return "binomial";
    case Collective::kAllgather: return bytes * static_cast<uint64_t>(ranks) < (80u << 10) ? "bruck" : "ring";
    case Collective::kAlltoall: return "pairwise";
    case Collective::kCount: break;
  }
  return "";
}

}  // namespace

const char* CollectiveName(Collective c) {
  static constexpr const char* kNames[] = {"barrier", "bcast",  "reduce",    "allreduce",
                                           "gather",  "scatter", "allgather", "alltoall"};
  return c < Collective::kCount ? kNames[static_cast<int>(c)] : "?";
}

const std::vector<AlgorithmInfo>& Algorithms() {
  static const auto* kInfo = [] {
    auto* v = new std::vector<AlgorithmInfo>();
    for (const Algorithm& a : Registry()) v->push_back(a.info);
    return v;
  }();
  return *kInfo;
}

std::string SelectAlgorithm(Collective c, uint64_t bytes, int ranks, bool commutative) {
  auto it = Overrides().find(CollectiveName(c));
  if (it != Overrides().end()) {
    const Algorithm* a = Find(c, it->second);
    if (a != nullptr && (commutative || !a->info.commutative_only)) return it->second;
  }
  return TableChoice(c, bytes, ranks, commutative);
}

std::string DescribeSelection() {
  std::string out =
      "collective selection (bytes: the call's whole buffer; per rank for allgather and alltoall)\n"
      "  barrier    dissemination\n"
      "  bcast      binomial below 64 KiB or with 2 ranks; scatter_allgather from 4 ranks; else chain\n"
      "  reduce     binomial\n"
      "  allreduce  ring from 64 KiB with more than 2 ranks and a commutative op; else recursive_doubling\n"
      "  gather     binomial\n"
      "  scatter    binomial\n"
      "  allgather  bruck while ranks x bytes < 80 KiB; else ring\n"
      "  alltoall   pairwise\n"
      "override: CARTAGE_COLLECTIVES=\"allreduce=ring,bcast=chain\"";
  for (const auto& [coll, algo] : Overrides()) absl::StrAppend(&out, "\n  now set: ", coll, "=", algo);
  out += "\nalgorithms:\n";
  for (const AlgorithmInfo& a : Algorithms()) {
    absl::StrAppendFormat(&out, "  %-10s %-19s %s%s\n", CollectiveName(a.collective), a.name, a.summary,
                          a.commutative_only ? " (commutative operators only)" : "");
  }
  return out;
}

}  // namespace cartage
