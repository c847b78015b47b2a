// Reductions whose result differs by rank: reduce_scatter(_block) (rank i
// keeps part i, [parts[i], parts[i+1]) of the reduced vector), scan and
// exscan (prefixes in rank order).
#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "collectives/algorithms.h"

namespace cartage::alg {

namespace {
int64_t PartElems(const Ctx& c, int i) {
  const auto k = static_cast<std::size_t>(((i % c.n) + c.n) % c.n);
  return c.parts[k + 1] - c.parts[k];
}
Buf PartAt(const Ctx& c, Buf base, int i) {
  return base + c.Bytes(c.parts[static_cast<std::size_t>(((i % c.n) + c.n) % c.n)]);
}
}  // namespace

// Ring: n - 1 steps; in step s a rank sends its running sum of part
// r - s - 1 to the right, takes the left's of part r - s - 2 and adds its
// own input to it; after the last step it holds part r reduced over every
// rank. Each step moves one part. Commutative operators only.
absl::Status ReduceScatterRing(Ctx& c) {
  const int n = c.n;
  if (n == 1) return OneRank(c, c.Bytes(PartElems(c, 0)));
  int64_t max_part = 0;
  for (int i = 0; i < n; ++i) max_part = std::max(max_part, PartElems(c, i));
  const Buf slots = c.b.Temp(c.Bytes(max_part) * static_cast<uint64_t>(n - 1));
  auto slot = [&](int s) { return slots + c.Bytes(max_part) * static_cast<uint64_t>(s); };
  const int right = (c.r + 1) % n, left = (c.r - 1 + n) % n;
  std::vector<VertexId> done;
  VertexId reduced = -1;
  for (int s = 0; s < n - 1; ++s) {
    const int out = c.r - s - 1, in = c.r - s - 2;
    const Buf what = s == 0 ? PartAt(c, c.send, out) : slot(s - 1);
    VertexId sv = c.b.Send(what, c.Bytes(PartElems(c, out)), right, Deps({reduced}));
    VertexId got = c.b.Recv(slot(s), c.Bytes(PartElems(c, in)), left);
    c.b.Note(sv, absl::StrFormat("step %d", s));
    c.b.Note(got, absl::StrFormat("step %d", s));
    reduced = c.Reduce(PartAt(c, c.send, in), slot(s), PartElems(c, in), Deps({got, reduced}));
    done.push_back(sv);
  }
  done.push_back(reduced);  // in place, recv is the input the sends and reductions read
  c.b.Copy(slot(n - 2), c.recv, c.Bytes(PartElems(c, c.r)), done);
  return absl::OkStatus();
}

// Recursive halving (MPICH's for commutative operators): the butterfly's
// halving over the new ranks, each of which stands for one or two parts;
// then a pair's odd rank passes the even one its part. log2 n steps. The
// input is read where it lies, never copied into the accumulator.
absl::Status ReduceScatterHalving(Ctx& c) {
  const int n = c.n;
  const int64_t total = c.parts[static_cast<std::size_t>(n)];
  if (n == 1) return OneRank(c, c.Bytes(total));
  const Buf acc = c.b.Temp(c.Bytes(total));
  const Buf tmp = c.b.Temp(c.Bytes(total));
  const Fold f = MakeFold(c.r, n);
  std::vector<VertexId> v = FoldIn(c, f, acc, tmp, total, {}, &c.send);  // the input is read where it lies
  if (f.newrank < 0) {
    c.b.Note(c.b.Recv(c.recv, c.Bytes(PartElems(c, c.r)), c.r + 1, v), "unfold");
    return absl::OkStatus();
  }
  std::vector<int64_t> start(static_cast<std::size_t>(f.pof2) + 1);
  for (int i = 0; i <= f.pof2; ++i) start[static_cast<std::size_t>(i)] = c.parts[static_cast<std::size_t>(f.First(i))];
  v = HalvingReduceScatter(c, f, acc, tmp, start, v, c.r < 2 * f.rem ? nullptr : &c.send);
  if (c.r < 2 * f.rem) c.b.Note(c.b.Send(PartAt(c, acc, c.r - 1), c.Bytes(PartElems(c, c.r - 1)), c.r - 1, v), "unfold");
  c.b.Copy(PartAt(c, acc, c.r), c.recv, c.Bytes(PartElems(c, c.r)), v);
  return absl::OkStatus();
}

// Any operator: a binomial reduce to rank 0 (which keeps rank order), then
// rank 0 sends every rank its part.
absl::Status ReduceScatterReduceThenScatter(Ctx& c) {
  const int n = c.n;
  const int64_t total = c.parts[static_cast<std::size_t>(n)];
  const std::size_t first = c.b.vertices().size();
  Ctx reduce = c;
  reduce.count = total;
  reduce.root = 0;
  reduce.in_place = false;
  reduce.recv = c.r == 0 ? c.b.Temp(c.Bytes(total)) : Buf{};
  CARTAGE_RETURN_IF_ERROR(ReduceBinomial(reduce));
  const std::vector<VertexId> reduced = SinksSince(c.b, first);
  if (c.r != 0) {
    c.b.Note(c.b.Recv(c.recv, c.Bytes(PartElems(c, c.r)), 0, reduced), "scatter");
    return absl::OkStatus();
  }
  for (int i = 1; i < n; ++i) c.b.Note(c.b.Send(PartAt(c, reduce.recv, i), c.Bytes(PartElems(c, i)), i, reduced), "scatter");
  c.b.Copy(reduce.recv, c.recv, c.Bytes(PartElems(c, 0)), reduced);
  return absl::OkStatus();
}

// ---- scan and exscan -----------------------------------------------------------

// Recursive doubling (MPICH's): in step k ranks r and r ^ 2^k swap the
// reductions of the blocks of ranks they have covered so far; the lower
// one's is the left operand. ceil(log2 n) steps, any operator.
// `exclusive`: rank r's result leaves out its own input (rank 0 gets none).
absl::Status ScanDoubling(Ctx& c, bool exclusive) {
  const uint64_t bytes = c.Bytes(c.count);
  std::vector<VertexId> deps;
  if (!exclusive && !c.in_place) deps.push_back(c.b.Copy(c.send, c.recv, bytes));
  if (c.n == 1) return absl::OkStatus();
  const Buf partial = c.b.Temp(bytes);
  const Buf tmp = c.b.Temp(bytes);
  deps.push_back(c.b.Copy(c.send, partial, bytes));
  bool have_result = !exclusive;
  for (int mask = 1; mask < c.n; mask <<= 1) {
    const int dst = c.r ^ mask;
    if (dst >= c.n) continue;
    VertexId s = c.b.Send(partial, bytes, dst, deps);
    VertexId got = c.b.Recv(tmp, bytes, dst, deps);
    c.b.Note(s, absl::StrFormat("step %d", mask));
    c.b.Note(got, absl::StrFormat("step %d", mask));
    std::vector<VertexId> both = {s, got};
    if (dst < c.r) {  // theirs comes first in rank order
      VertexId p = c.Reduce(tmp, partial, c.count, both);
      VertexId res = have_result ? c.Reduce(tmp, c.recv, c.count, both) : c.b.Copy(tmp, c.recv, bytes, both);
      have_result = true;
      deps = {p, res};
    } else {
      deps = {c.Reduce(tmp, partial, c.count, both, /*in_is_left=*/false)};
    }
  }
  return absl::OkStatus();
}

absl::Status ScanRecursiveDoubling(Ctx& c) { return ScanDoubling(c, /*exclusive=*/false); }
absl::Status ExscanRecursiveDoubling(Ctx& c) { return ScanDoubling(c, /*exclusive=*/true); }

}  // namespace cartage::alg
