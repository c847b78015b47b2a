// The registry of algorithms, the selection table and its overrides.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "collectives/algorithms.h"

namespace cartage {
namespace alg {

const std::vector<Algorithm>& Registry() {
  static const std::vector<Algorithm>* const kAll = [] {
    auto* all = new std::vector<Algorithm>{
      {{Collective::kBarrier, "dissemination", "ceil(log2 n) rounds of one message each way", false},
       &BarrierDissemination},
      {{Collective::kBarrier, "linear", "one round: a message to and from every other rank", false}, &BarrierLinear},
      {{Collective::kBarrier, "star", "every rank to rank 0 and back: two messages a rank", false}, &BarrierStar},
      {{Collective::kBcast, "binomial", "binomial tree; log2 n steps, in 64 KiB chunks where ranks forward", false},
       &BcastBinomial},
      {{Collective::kBcast, "binomial_near", "binomial tree grown by doubling: the root's first child is root+1", false},
       &BcastBinomialNear},
      {{Collective::kBcast, "scatter_allgather", "binomial scatter of n parts, then a ring allgather", false},
       &BcastScatterAllgather},
      {{Collective::kBcast, "chain", "pipelined chain in 64 KiB chunks", false}, &BcastChain},
      {{Collective::kBcast, "linear", "the root sends to every other rank; nobody forwards", false}, &BcastLinear},
      {{Collective::kReduce, "binomial", "binomial tree; rank order kept for non-commutative operators", false},
       &ReduceBinomial},
      {{Collective::kAllreduce, "recursive_doubling", "log2 n exchanges of the whole buffer (+2 if n is not a power of 2)",
        false},
       &AllreduceRecursiveDoubling},
      {{Collective::kAllreduce, "ring", "ring reduce-scatter then ring allgather; 2(n-1) steps of 1/n", true},
       &AllreduceRing},
      {{Collective::kAllreduce, "linear", "one round: every vector to every rank, reduced in rank order there", false},
       &AllreduceLinear},
      {{Collective::kAllreduce, "star", "every vector to rank 0, reduced there in rank order, the result sent back", false},
       &AllreduceStar},
      {{Collective::kGather, "binomial", "binomial tree; subtrees' blocks travel together", false}, &GatherBinomial},
      {{Collective::kScatter, "binomial", "binomial tree; subtrees' blocks travel together", false},
       &ScatterBinomial},
      {{Collective::kAllgather, "ring", "n-1 steps of one block", false}, &AllgatherRing},
      {{Collective::kAllgather, "bruck", "ceil(log2 n) rounds, any n, then a rotation", false}, &AllgatherBruck},
      {{Collective::kAllgather, "linear", "one round: this rank's block to every other rank", false}, &AllgatherLinear},
      {{Collective::kAllgather, "star", "every block to rank 0, which sends all n to every rank", false}, &AllgatherStar},
      {{Collective::kAlltoall, "pairwise", "n-1 exchange steps, one partner each", false}, &AlltoallPairwise},
      {{Collective::kAlltoall, "linear", "one round: every block sent and received at once", false}, &AlltoallLinear},
      {{Collective::kAlltoall, "star", "every rank's blocks to rank 0, which sends each rank its column", false}, &AlltoallStar},
      {{Collective::kReduce, "reduce_scatter_gather", "Rabenseifner: recursive-halving reduce-scatter, then a gather",
        true},
       &ReduceScatterGather},
      {{Collective::kAllreduce, "rabenseifner",
        "recursive-halving reduce-scatter, then recursive-doubling allgather; 2 log2 n steps", true},
       &AllreduceRabenseifner},
      {{Collective::kAllgather, "recursive_doubling", "log2 n exchanges of all gathered so far (+2 if n is not a power of 2)",
        false},
       &AllgatherRecursiveDoubling},
      {{Collective::kAlltoall, "bruck", "ceil(log2 n) rounds of about n/2 blocks; for small blocks", false},
       &AlltoallBruck},
      {{Collective::kGatherv, "linear", "every rank sends its block straight to the root", false}, &GathervLinear},
      {{Collective::kScatterv, "linear", "the root sends every rank its block", false}, &ScattervLinear},
      {{Collective::kAllgatherv, "ring", "n-1 steps, each passing one block of its own size", false},
       &AllgathervRing},
      {{Collective::kAlltoallv, "pairwise", "n-1 exchange steps, one partner each", false}, &AlltoallvPairwise},
      {{Collective::kReduceScatter, "recursive_halving", "log2 n halving steps (+2 if n is not a power of 2)", true},
       &ReduceScatterHalving},
      {{Collective::kReduceScatter, "ring", "n-1 steps of one part each", true}, &ReduceScatterRing},
      {{Collective::kReduceScatter, "reduce_then_scatter", "binomial reduce to rank 0 in rank order, then a scatter",
        false},
       &ReduceScatterReduceThenScatter},
      {{Collective::kReduceScatterBlock, "recursive_halving", "log2 n halving steps (+2 if n is not a power of 2)",
        true},
       &ReduceScatterHalving},
      {{Collective::kReduceScatterBlock, "ring", "n-1 steps of one part each", true}, &ReduceScatterRing},
      {{Collective::kReduceScatterBlock, "reduce_then_scatter",
        "binomial reduce to rank 0 in rank order, then a scatter", false},
       &ReduceScatterReduceThenScatter},
      {{Collective::kScan, "recursive_doubling", "ceil(log2 n) exchanges of partial reductions", false},
       &ScanRecursiveDoubling},
      {{Collective::kExscan, "recursive_doubling", "ceil(log2 n) exchanges of partial reductions", false},
       &ExscanRecursiveDoubling},
  };
    // Each collective's algorithms together, in the order they are listed here.
    std::stable_sort(all->begin(), all->end(),
                     [](const Algorithm& a, const Algorithm& b) { return a.info.collective < b.info.collective; });
    return all;
  }();
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

// The built-in table, in the table file's own format. `bytes` is the call's
// whole buffer for bcast, reduce, allreduce, reduce_scatter(_block), scan
// and exscan, one rank's block for the others (the average for allgatherv,
// 0 for the v forms whose counts differ by rank); `total` is bytes x ranks.
// Which rules win was measured with cartage-bench and bench/compare on 2
// CPUs (2 to 16 ranks) and on 16 CPUs (4 to 16 ranks); collectives/README.md
// says why each family wins where it does. Past 16 ranks the rules are the
// textbook choices, unmeasured.
constexpr int kBuiltinFirstLine = __LINE__ + 1;  // the table's first line in this file
constexpr const char kBuiltinTable[] = R"(# collective          algorithm              conditions
barrier               star                   ranks=-17 crowded
barrier               linear                 ranks=3-17 oversubscribed
barrier               dissemination
bcast                 linear                 bytes=-2K ranks=3-17 oversubscribed
bcast                 binomial_near          ranks=5- oversubscribed
bcast                 binomial_near          bytes=65537- ranks=4-5 oversubscribed
bcast                 binomial               bytes=-64K
bcast                 binomial               ranks=-3
bcast                 binomial               oversubscribed
bcast                 chain                  ranks=-17
bcast                 scatter_allgather
reduce                reduce_scatter_gather  bytes=64K- ranks=3-
reduce                binomial
allreduce             star                   bytes=-128K ranks=-17 crowded
allreduce             linear                 bytes=-8K ranks=3-17 oversubscribed
allreduce             recursive_doubling     bytes=-128K oversubscribed
allreduce             recursive_doubling     bytes=-64K
allreduce             recursive_doubling     bytes=-128K ranks=-5
allreduce             recursive_doubling     ranks=-3
allreduce             rabenseifner           pof2
allreduce             ring
allreduce             recursive_doubling
gather                binomial
scatter               binomial
allgather             star                   bytes=-4K ranks=-17 crowded
allgather             linear                 ranks=3-17 oversubscribed
allgather             recursive_doubling     total=-80K pof2
allgather             bruck                  total=-80K
allgather             linear                 ranks=3-17
allgather             ring
alltoall              star                   bytes=-257 ranks=-17 crowded
alltoall              linear                 ranks=3-17
alltoall              bruck                  bytes=-257 ranks=3-
alltoall              pairwise
gatherv               linear
scatterv              linear
allgatherv            ring
alltoallv             pairwise
reduce_scatter        recursive_halving      bytes=-512K
reduce_scatter        ring
reduce_scatter        reduce_then_scatter
reduce_scatter_block  recursive_halving      bytes=-512K
reduce_scatter_block  ring
reduce_scatter_block  reduce_then_scatter
scan                  recursive_doubling
exscan                recursive_doubling
)";

const std::vector<SelectionRule>& BuiltinRules() {
  static const auto* kRules = [] {
    auto* rules = new std::vector<SelectionRule>(*ParseSelectionFile(kBuiltinTable, "built-in"));
    // Each rule names its line of this file, where a reader finds it.
    for (SelectionRule& r : *rules) {
      int n = 0;
      if (absl::SimpleAtoi(absl::string_view(r.source).substr(r.source.find(':') + 1), &n)) {
        r.source = absl::StrCat("collectives/select.cc:", kBuiltinFirstLine + n - 1);
      }
    }
    return rules;
  }();
  return *kRules;
}

absl::StatusOr<uint64_t> ParseSize(absl::string_view s) {
  uint64_t scale = 1;
  if (!s.empty() && (s.back() == 'K' || s.back() == 'M' || s.back() == 'G')) {
    scale = s.back() == 'K' ? (uint64_t{1} << 10) : s.back() == 'M' ? (uint64_t{1} << 20) : (uint64_t{1} << 30);
    s.remove_suffix(1);
  }
  uint64_t v = 0;
  if (s.empty() || !absl::SimpleAtoi(s, &v)) return absl::InvalidArgumentError(absl::StrCat("'", s, "' is not a size"));
  return v * scale;
}

// "LO-HI", either end optional: [LO, HI).
absl::Status ParseRange(absl::string_view text, uint64_t* lo, uint64_t* hi) {
  const std::size_t dash = text.find('-');
  if (dash == absl::string_view::npos) return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not LO-HI"));
  const absl::string_view a = text.substr(0, dash), b = text.substr(dash + 1);
  if (!a.empty()) {
    CARTAGE_ASSIGN_OR_RETURN(*lo, ParseSize(a));
  }
  if (!b.empty()) {
    CARTAGE_ASSIGN_OR_RETURN(*hi, ParseSize(b));
  }
  if (*lo >= *hi) return absl::InvalidArgumentError(absl::StrCat("'", text, "' is empty"));
  return absl::OkStatus();
}

bool Matches(const SelectionRule& rule, uint64_t bytes, int ranks, bool commutative, bool oversubscribed,
             bool crowded) {
  const auto n = static_cast<uint64_t>(ranks);
  if (bytes < rule.min_bytes || bytes >= rule.max_bytes) return false;
  if (n < rule.min_ranks || n >= rule.max_ranks) return false;
  const uint64_t total = bytes * n;
  if (total < rule.min_total || total >= rule.max_total) return false;
  if (rule.pof2 && (ranks & (ranks - 1)) != 0) return false;
  if (rule.oversubscribed && !oversubscribed) return false;
  if (rule.crowded && !crowded) return false;
  const Algorithm* a = Find(rule.collective, rule.algorithm);
  return a != nullptr && (commutative || !a->info.commutative_only);
}

std::string Conditions(const SelectionRule& r) {
  std::string out;
  auto range = [&](const char* name, uint64_t lo, uint64_t hi) {
    if (lo == 0 && hi == UINT64_MAX) return;
    absl::StrAppend(&out, out.empty() ? "" : " ", name, "=", lo == 0 ? "" : absl::StrCat(lo), "-",
                    hi == UINT64_MAX ? "" : absl::StrCat(hi));
  };
  range("bytes", r.min_bytes, r.max_bytes);
  range("ranks", r.min_ranks, r.max_ranks);
  range("total", r.min_total, r.max_total);
  if (r.pof2) absl::StrAppend(&out, out.empty() ? "" : " ", "pof2");
  if (r.oversubscribed) absl::StrAppend(&out, out.empty() ? "" : " ", "oversubscribed");
  if (r.crowded) absl::StrAppend(&out, out.empty() ? "" : " ", "crowded");
  return out;
}

}  // namespace

absl::StatusOr<std::vector<SelectionRule>> ParseSelectionFile(absl::string_view text, absl::string_view name) {
  std::vector<SelectionRule> rules;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_no;
    line = line.substr(0, line.find('#'));
    std::vector<absl::string_view> words = absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (words.empty()) continue;
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrFormat("collective selection file %s:%d: %s", name, line_no, why));
    };
    if (words.size() < 2) return bad("a rule is COLLECTIVE ALGORITHM [bytes=LO-HI] [ranks=LO-HI] [total=LO-HI] [pof2] [oversubscribed] [crowded]");
    SelectionRule rule;
    std::optional<Collective> c = CollectiveByName(words[0]);
    if (!c.has_value()) return bad(absl::StrCat("no collective '", words[0], "'"));
    rule.collective = *c;
    rule.algorithm = std::string(words[1]);
    if (Find(*c, rule.algorithm) == nullptr) {
      std::string names;
      for (const Algorithm& a : Registry()) {
        if (a.info.collective == *c) absl::StrAppend(&names, names.empty() ? "" : ", ", a.info.name);
      }
      return bad(absl::StrFormat("%s has no algorithm '%s' (there are: %s)", words[0], rule.algorithm, names));
    }
    for (std::size_t i = 2; i < words.size(); ++i) {
      absl::string_view w = words[i];
      absl::Status s;
      if (w == "pof2") {
        rule.pof2 = true;
      } else if (w == "oversubscribed") {
        rule.oversubscribed = true;
      } else if (w == "crowded") {
        rule.crowded = true;
      } else if (absl::ConsumePrefix(&w, "bytes=")) {
        s = ParseRange(w, &rule.min_bytes, &rule.max_bytes);
      } else if (absl::ConsumePrefix(&w, "ranks=")) {
        s = ParseRange(w, &rule.min_ranks, &rule.max_ranks);
      } else if (absl::ConsumePrefix(&w, "total=")) {
        s = ParseRange(w, &rule.min_total, &rule.max_total);
      } else {
        s = absl::InvalidArgumentError(absl::StrCat("'", w, "' is none of bytes=, ranks=, total=, pof2, oversubscribed, crowded"));
      }
      if (!s.ok()) return bad(std::string(s.message()));
    }
    rule.source = absl::StrCat(name, ":", line_no);
    rules.push_back(std::move(rule));
  }
  return rules;
}

absl::StatusOr<const std::vector<SelectionRule>*> SelectionFileRules() {
  static const auto* kRules = [] {
    auto* out = new absl::StatusOr<std::vector<SelectionRule>>(std::vector<SelectionRule>{});
    const char* path = std::getenv("CARTAGE_COLLECTIVES_FILE");
    if (path == nullptr || *path == '\0') return out;
    std::ifstream in(path);
    if (!in) {
      *out = absl::NotFoundError(absl::StrFormat("collective selection file %s (CARTAGE_COLLECTIVES_FILE): %s", path,
                                                 std::strerror(errno)));
      return out;
    }
    std::stringstream text;
    text << in.rdbuf();
    *out = ParseSelectionFile(text.str(), path);
    return out;
  }();
  if (!kRules->ok()) return kRules->status();
  return &**kRules;
}

const char* CollectiveName(Collective c) {
  static constexpr const char* kNames[] = {
      "barrier", "bcast",   "reduce",     "allreduce", "gather",         "scatter",
      "allgather", "alltoall", "gatherv", "scatterv", "allgatherv", "alltoallv",
      "reduce_scatter", "reduce_scatter_block", "scan", "exscan"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<std::size_t>(Collective::kCount));
  return c < Collective::kCount ? kNames[static_cast<int>(c)] : "?";
}

std::optional<Collective> CollectiveByName(absl::string_view name) {
  for (int k = 0; k < static_cast<int>(Collective::kCount); ++k) {
    if (name == CollectiveName(static_cast<Collective>(k))) return static_cast<Collective>(k);
  }
  return std::nullopt;
}

bool Reduces(Collective c) {
  return c == Collective::kReduce || c == Collective::kAllreduce || c == Collective::kReduceScatter ||
         c == Collective::kReduceScatterBlock || c == Collective::kScan || c == Collective::kExscan;
}
bool Rooted(Collective c) {
  return c == Collective::kBcast || c == Collective::kReduce || c == Collective::kGather ||
         c == Collective::kScatter || c == Collective::kGatherv || c == Collective::kScatterv;
}
bool Varying(Collective c) {
  return c == Collective::kGatherv || c == Collective::kScatterv || c == Collective::kAllgatherv ||
         c == Collective::kAlltoallv || c == Collective::kReduceScatter;
}

const std::vector<AlgorithmInfo>& Algorithms() {
  static const auto* kInfo = [] {
    auto* v = new std::vector<AlgorithmInfo>();
    for (const Algorithm& a : Registry()) v->push_back(a.info);
    return v;
  }();
  return *kInfo;
}

std::string SelectAlgorithm(Collective c, uint64_t bytes, int ranks, bool commutative, bool oversubscribed,
                            bool crowded) {
  auto it = Overrides().find(CollectiveName(c));
  if (it != Overrides().end()) {
    const Algorithm* a = Find(c, it->second);
    if (a != nullptr && (commutative || !a->info.commutative_only)) return it->second;
  }
  if (absl::StatusOr<const std::vector<SelectionRule>*> file = SelectionFileRules(); file.ok()) {
    for (const SelectionRule& r : **file) {
      if (r.collective == c && Matches(r, bytes, ranks, commutative, oversubscribed, crowded)) return r.algorithm;
    }
  }
  for (const SelectionRule& r : BuiltinRules()) {
    if (r.collective == c && Matches(r, bytes, ranks, commutative, oversubscribed, crowded)) return r.algorithm;
  }
  return "";
}

namespace {

// Why `rule` does not match, in words; empty when it does.
std::string WhyNot(const SelectionRule& rule, uint64_t bytes, int ranks, bool commutative, bool oversubscribed,
                   bool crowded) {
  const auto n = static_cast<uint64_t>(ranks);
  auto outside = [](const char* what, uint64_t x, uint64_t lo, uint64_t hi) {
    return absl::StrFormat("%s %d not in %s-%s", what, x, lo == 0 ? "" : absl::StrCat(lo),
                           hi == UINT64_MAX ? "" : absl::StrCat(hi));
  };
  if (bytes < rule.min_bytes || bytes >= rule.max_bytes) return outside("bytes", bytes, rule.min_bytes, rule.max_bytes);
  if (n < rule.min_ranks || n >= rule.max_ranks) return outside("ranks", n, rule.min_ranks, rule.max_ranks);
  if (bytes * n < rule.min_total || bytes * n >= rule.max_total) {
    return outside("total", bytes * n, rule.min_total, rule.max_total);
  }
  if (rule.pof2 && (ranks & (ranks - 1)) != 0) return absl::StrFormat("%d ranks is no power of two", ranks);
  if (rule.oversubscribed && !oversubscribed) return "not oversubscribed";
  if (rule.crowded && !crowded) return "not crowded";
  const Algorithm* a = Find(rule.collective, rule.algorithm);
  if (a == nullptr) return "no such algorithm";
  if (!commutative && a->info.commutative_only) return "the operator is not commutative";
  return "";
}

}  // namespace

std::string ExplainSelection(Collective c, uint64_t bytes, int ranks, bool commutative, bool oversubscribed,
                             bool crowded) {
  std::string out = absl::StrFormat("%s of %d bytes on %d ranks%s%s: ", CollectiveName(c), bytes, ranks,
                                    oversubscribed ? (crowded ? ", crowded" : ", oversubscribed") : "",
                                    commutative ? "" : ", non-commutative");
  auto it = Overrides().find(CollectiveName(c));
  if (it != Overrides().end()) {
    const Algorithm* a = Find(c, it->second);
    if (a != nullptr && (commutative || !a->info.commutative_only)) {
      return absl::StrCat(out, it->second, " (CARTAGE_COLLECTIVES)");
    }
    absl::StrAppend(&out, "[CARTAGE_COLLECTIVES's ", it->second, " does not apply] ");
  }
  std::vector<const SelectionRule*> rules;
  if (absl::StatusOr<const std::vector<SelectionRule>*> file = SelectionFileRules(); file.ok()) {
    for (const SelectionRule& r : **file) rules.push_back(&r);
  }
  for (const SelectionRule& r : BuiltinRules()) rules.push_back(&r);
  std::string passed;
  for (const SelectionRule* r : rules) {
    if (r->collective != c) continue;
    const std::string why = WhyNot(*r, bytes, ranks, commutative, oversubscribed, crowded);
    if (why.empty()) {
      absl::StrAppend(&out, r->algorithm, " (rule ", r->source, r->source.empty() ? "" : " ", Conditions(*r), ")");
      if (!passed.empty()) absl::StrAppend(&out, "; passed over: ", passed);
      return out;
    }
    absl::StrAppend(&passed, passed.empty() ? "" : ", ", r->algorithm, " at ", r->source, " (", why, ")");
  }
  return absl::StrCat(out, "no rule matches; passed over: ", passed);
}

std::string DescribeSelection() {
  std::string out =
      "collective selection, first matching rule wins (bytes: the whole buffer for bcast, reduce, allreduce,\n"
      "reduce_scatter(_block), scan and exscan, one rank's block for the others; total: bytes x ranks;\n"
      "ranges LO-HI are LO <= x < HI; oversubscribed: the job's ranks outnumber the host's CPUs; crowded:\n"
      "they are three or more a CPU)\n"
      "overrides: CARTAGE_COLLECTIVES=\"allreduce=ring,bcast=chain\" (any size), then the rules of the file\n"
      "CARTAGE_COLLECTIVES_FILE (same format as below), then the built-in table\n";
  for (const auto& [coll, algo] : Overrides()) absl::StrAppend(&out, "  now set: ", coll, "=", algo, "\n");
  absl::StatusOr<const std::vector<SelectionRule>*> file = SelectionFileRules();
  std::vector<const SelectionRule*> rules;
  if (!file.ok()) {
    absl::StrAppend(&out, "  ERROR: ", file.status().message(), "\n");
  } else {
    for (const SelectionRule& r : **file) rules.push_back(&r);
  }
  for (const SelectionRule& r : BuiltinRules()) rules.push_back(&r);
  for (const SelectionRule* r : rules) {
    absl::StrAppendFormat(&out, "  %-21s %-22s %-28s %s\n", CollectiveName(r->collective), r->algorithm,
                          Conditions(*r), r->source);
  }
  out += "algorithms:\n";
  for (const AlgorithmInfo& a : Algorithms()) {
    absl::StrAppendFormat(&out, "  %-21s %-22s %s%s\n", CollectiveName(a.collective), a.name, a.summary,
                          a.commutative_only ? " (commutative operators only)" : "");
  }
  return out;
}

}  // namespace cartage
