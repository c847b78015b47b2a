// The algorithms: one schedule builder each, registered by name per
// collective; the selection table; and the calls that build and run them.
//
// Every builder works on packed buffers (`Ctx::send`, `Ctx::recv`): the user's
// own memory for a contiguous type, else temporaries that a pack vertex fills
// first and an unpack vertex empties last (BuildCollective). Counts are in
// elements of the call's type; blocks are cut at element boundaries.
#include "cartage/collectives.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace cartage {

namespace {

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

std::vector<VertexId> Deps(std::initializer_list<VertexId> ids) {
  std::vector<VertexId> out;
  for (VertexId v : ids) {
    if (v >= 0) out.push_back(v);
  }
  return out;
}

// The first element of part i of `count` elements cut into n parts.
int64_t PartStart(int64_t count, int i, int n) { return count * i / n; }

// ---- barrier -------------------------------------------------------------------

// Round k: tell rank + 2^k, hear from rank - 2^k; a round's send waits for
// the previous round's receive. ceil(log2 n) rounds.
absl::Status BarrierDissemination(Ctx& c) {
  VertexId heard = -1;
  for (int k = 1; k < c.n; k <<= 1) {
    VertexId s = c.b.Send(Buf{}, 0, (c.r + k) % c.n, Deps({heard}));
    c.b.Note(s, absl::StrFormat("round %d", k));
    heard = c.b.Recv(Buf{}, 0, (c.r - k + c.n) % c.n);
    c.b.Note(heard, absl::StrFormat("round %d", k));
  }
  return absl::OkStatus();
}

// ---- bcast ---------------------------------------------------------------------

// Binomial tree rooted at `root`: receive from the parent, then send to the
// children, farthest first.
absl::Status BcastBinomial(Ctx& c) {
  const int vr = (c.r - c.root + c.n) % c.n;
  const uint64_t bytes = c.Bytes(c.count);
  VertexId got = -1;
  int mask = 1;
  for (; mask < c.n; mask <<= 1) {
    if ((vr & mask) != 0) {
      got = c.b.Recv(c.recv, bytes, (vr - mask + c.root) % c.n);
      break;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < c.n) c.b.Send(c.recv, bytes, (vr + mask + c.root) % c.n, Deps({got}));
  }
  return absl::OkStatus();
}

// A chain root -> root+1 -> ... in chunks: a rank forwards chunk k while
// chunk k+1 arrives (every receive is posted at once).
absl::Status BcastChain(Ctx& c) {
  constexpr uint64_t kChunkBytes = 64 << 10;
  const int vr = (c.r - c.root + c.n) % c.n;
  const int64_t per = std::max<int64_t>(1, static_cast<int64_t>(kChunkBytes / std::max<uint64_t>(c.es, 1)));
  const int64_t chunks = std::max<int64_t>(1, (c.count + per - 1) / per);
  for (int64_t k = 0; k < chunks; ++k) {
    const int64_t first = k * per;
    const int64_t elems = std::min(per, c.count - first);
    const Buf at = c.At(c.recv, first, 1);
    VertexId got = -1;
    if (vr > 0) {
      got = c.b.Recv(at, c.Bytes(elems), (vr - 1 + c.root) % c.n);
      c.b.Chunk(got, static_cast<int>(k));
    }
    if (vr + 1 < c.n) {  // forwards what the receive brought in: a buffer dependency
      VertexId s = c.b.Send(at, c.Bytes(elems), (vr + 1 + c.root) % c.n);
      c.b.Chunk(s, static_cast<int>(k));
      if (got >= 0) c.b.Depend(got, s, EdgeKind::kBuffer);
    }
  }
  return absl::OkStatus();
}

// Van de Geijn: a binomial scatter of n parts, then a ring allgather of them.
absl::Status BcastScatterAllgather(Ctx& c) {
  const int n = c.n;
  const int vr = (c.r - c.root + n) % n;
  auto abs_rank = [&](int v) { return (v + c.root) % n; };
  auto part = [&](int i) { return PartStart(c.count, i, n); };  // relative rank i's part
  auto span_bytes = [&](int from, int to) { return c.Bytes(part(std::min(to, n)) - part(from)); };
  // Scatter: a rank receives the parts of its subtree [vr, vr + size).
  VertexId got = -1;
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if ((vr & mask) != 0) {
      got = c.b.Recv(c.At(c.recv, part(vr), 1), span_bytes(vr, vr + mask), abs_rank(vr - mask));
      c.b.Note(got, "scatter");
      break;
    }
  }
  std::vector<VertexId> scatter_sends;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < n) {
      VertexId s = c.b.Send(c.At(c.recv, part(vr + mask), 1), span_bytes(vr + mask, vr + 2 * mask),
                            abs_rank(vr + mask), Deps({got}));
      c.b.Note(s, "scatter");
      scatter_sends.push_back(s);
    }
  }
  // Ring allgather: step s sends part vr - s to the right, receives part
  // vr - s - 1 from the left (receives wait for the scatter's sends, which
  // may read the same part).
  VertexId prev = got;
  std::vector<VertexId> recv_after = scatter_sends;
  if (got >= 0) recv_after.push_back(got);
  for (int s = 0; s < n - 1; ++s) {
    const int out = ((vr - s) % n + n) % n;
    const int in = ((vr - s - 1) % n + n) % n;
    VertexId sv = c.b.Send(c.At(c.recv, part(out), 1), span_bytes(out, out + 1), abs_rank((vr + 1) % n), Deps({prev}));
    c.b.Note(sv, absl::StrFormat("ring %d", s));
    prev = c.b.Recv(c.At(c.recv, part(in), 1), span_bytes(in, in + 1), abs_rank((vr - 1 + n) % n), recv_after);
    c.b.Note(prev, absl::StrFormat("ring %d", s));
  }
  return absl::OkStatus();
}

// ---- reduce --------------------------------------------------------------------

// Binomial tree: receive each child's partial result and reduce it in, then
// send to the parent. A non-commutative operator is reduced on a tree rooted
// at rank 0 (rank order is then subtree order) and the result sent to root.
absl::Status ReduceBinomial(Ctx& c) {
  const bool ordered = !c.op->commutative();
  const int vroot = ordered ? 0 : c.root;
  const int vr = (c.r - vroot + c.n) % c.n;
  const uint64_t bytes = c.Bytes(c.count);
  // The accumulator: the result buffer where this rank is the root of both.
  const bool acc_is_recv = c.r == c.root && c.r == vroot;
  Buf acc = acc_is_recv ? c.recv : c.b.Temp(bytes);
  VertexId last = -1;
  if (!(acc_is_recv && c.in_place)) last = c.b.Copy(c.send, acc, bytes);
  const VertexId loaded = last;
  Buf tmp = c.b.Temp(bytes);
  for (int mask = 1; mask < c.n; mask <<= 1) {
    if ((vr & mask) == 0) {
      const int child = vr | mask;
      if (child >= c.n) continue;
      VertexId got = c.b.Recv(tmp, bytes, (child + vroot) % c.n, Deps({last}));  // tmp free again
      // Rank order: a child's subtree holds higher ranks, so it is the right operand.
      last = c.Reduce(tmp, acc, c.count, Deps({got, last}), /*in_is_left=*/!ordered);
    } else {
      last = c.b.Send(acc, bytes, (vr - mask + vroot) % c.n, Deps({last}));
      break;
    }
  }
  if (vroot != c.root) {
    if (c.r == vroot) c.b.Send(acc, bytes, c.root, Deps({last}));
    if (c.r == c.root) c.b.Recv(c.recv, bytes, vroot, Deps({loaded}));  // in place: recv was read first
  }
  return absl::OkStatus();
}

// ---- allreduce -----------------------------------------------------------------

// Recursive doubling (MPICH's): the first 2*rem ranks pair up so that a power
// of two take part, partners exchange and reduce, then the pairs' odd ranks
// hand the result back. Keeps rank order for non-commutative operators.
absl::Status AllreduceRecursiveDoubling(Ctx& c) {
  const uint64_t bytes = c.Bytes(c.count);
  VertexId last = -1;
  if (!c.in_place) last = c.b.Copy(c.send, c.recv, bytes);
  if (c.n == 1) return absl::OkStatus();
  const Buf acc = c.recv;
  const Buf tmp = c.b.Temp(bytes);
  int pof2 = 1;
  while (pof2 * 2 <= c.n) pof2 *= 2;
  const int rem = c.n - pof2;
  int newrank;
  if (c.r < 2 * rem) {
    if (c.r % 2 == 0) {
      last = c.b.Send(acc, bytes, c.r + 1, Deps({last}));
      newrank = -1;
    } else {
      VertexId got = c.b.Recv(tmp, bytes, c.r - 1);
      last = c.Reduce(tmp, acc, c.count, Deps({got, last}));  // the lower rank is on the left
      newrank = c.r / 2;
    }
  } else {
    newrank = c.r - rem;
  }
  if (newrank >= 0) {
    for (int mask = 1; mask < pof2; mask <<= 1) {
      const int newdst = newrank ^ mask;
      const int dst = newdst < rem ? newdst * 2 + 1 : newdst + rem;
      VertexId s = c.b.Send(acc, bytes, dst, Deps({last}));
      VertexId got = c.b.Recv(tmp, bytes, dst, Deps({last}));
      last = c.Reduce(tmp, acc, c.count, Deps({s, got}), /*in_is_left=*/dst < c.r);
    }
  }
  if (c.r < 2 * rem) {
    if (c.r % 2 == 1) {
      c.b.Send(acc, bytes, c.r - 1, Deps({last}));
    } else {
      c.b.Recv(acc, bytes, c.r + 1, Deps({last}));
    }
  }
  return absl::OkStatus();
}

// Ring: a reduce-scatter (n - 1 steps, each rank ends up owning one reduced
// part) and an allgather of the parts (n - 1 steps). Bandwidth-optimal;
// commutative operators only.
absl::Status AllreduceRing(Ctx& c) {
  const int n = c.n;
  const uint64_t bytes = c.Bytes(c.count);
  VertexId last = -1;
  if (!c.in_place) last = c.b.Copy(c.send, c.recv, bytes);
  if (n == 1) return absl::OkStatus();
  auto part = [&](int i) { return PartStart(c.count, ((i % n) + n) % n, n); };
  auto elems = [&](int i) {
    const int j = ((i % n) + n) % n;
    return PartStart(c.count, j + 1, n) - PartStart(c.count, j, n);
  };
  const int right = (c.r + 1) % n;
  const int left = (c.r - 1 + n) % n;
  const int64_t max_part = (c.count + n - 1) / n;
  const Buf tmp = c.b.Temp(c.Bytes(max_part) * static_cast<uint64_t>(n - 1));
  std::vector<VertexId> rs_sends;
  VertexId reduced = last;
  for (int s = 0; s < n - 1; ++s) {
    const int out = c.r - s;
    const int in = c.r - s - 1;
    VertexId sv = c.b.Send(c.At(c.recv, part(out), 1), c.Bytes(elems(out)), right, Deps({reduced}));
    c.b.Note(sv, absl::StrFormat("reduce-scatter %d", s));
    rs_sends.push_back(sv);
    const Buf slot = tmp + c.Bytes(max_part) * static_cast<uint64_t>(s);
    VertexId got = c.b.Recv(slot, c.Bytes(elems(in)), left);
    c.b.Note(got, absl::StrFormat("reduce-scatter %d", s));
    reduced = c.Reduce(slot, c.At(c.recv, part(in), 1), elems(in), Deps({got, last, reduced}));
  }
  VertexId prev = reduced;
  for (int s = 0; s < n - 1; ++s) {
    const int out = c.r - s + 1;
    const int in = c.r - s;
    VertexId sv = c.b.Send(c.At(c.recv, part(out), 1), c.Bytes(elems(out)), right, Deps({prev}));
    c.b.Note(sv, absl::StrFormat("allgather %d", s));
    std::vector<VertexId> after = rs_sends;  // a part sent earlier is overwritten
    after.push_back(reduced);
    prev = c.b.Recv(c.At(c.recv, part(in), 1), c.Bytes(elems(in)), left, after);
    c.b.Note(prev, absl::StrFormat("allgather %d", s));
  }
  return absl::OkStatus();
}

// ---- allgather -----------------------------------------------------------------

// Ring: step s passes block r - s to the right and takes block r - s - 1
// from the left.
absl::Status AllgatherRing(Ctx& c) {
  const int n = c.n;
  VertexId prev = -1;
  if (!c.in_place) prev = c.b.Copy(c.send, c.At(c.recv, c.r, c.count), c.Bytes(c.count));
  const uint64_t bytes = c.Bytes(c.count);
  for (int s = 0; s < n - 1; ++s) {
    const int out = ((c.r - s) % n + n) % n;
    const int in = ((c.r - s - 1) % n + n) % n;
    c.b.Send(c.At(c.recv, out, c.count), bytes, (c.r + 1) % n, Deps({prev}));
    prev = c.b.Recv(c.At(c.recv, in, c.count), bytes, (c.r - 1 + n) % n);
  }
  return absl::OkStatus();
}

// Bruck: ceil(log2 n) rounds; round k sends the blocks gathered so far to
// rank - k and receives as many from rank + k into a rotated buffer, which
// is rotated back at the end. Any rank count.
absl::Status AllgatherBruck(Ctx& c) {
  const int n = c.n;
  const uint64_t block = c.Bytes(c.count);
  if (n == 1) {
    if (!c.in_place) c.b.Copy(c.send, c.recv, block);
    return absl::OkStatus();
  }
  const Buf tmp = c.b.Temp(block * static_cast<uint64_t>(n));
  VertexId last = c.b.Copy(c.in_place ? c.At(c.recv, c.r, c.count) : c.send, tmp, block);
  std::vector<VertexId> round_deps = {last};
  for (int k = 1; k < n; k <<= 1) {
    const int blocks = std::min(k, n - k);
    VertexId s = c.b.Send(tmp, block * static_cast<uint64_t>(blocks), (c.r - k + n) % n, round_deps);
    VertexId got = c.b.Recv(tmp + block * static_cast<uint64_t>(k), block * static_cast<uint64_t>(blocks),
                            (c.r + k) % n, round_deps);
    c.b.Note(s, absl::StrFormat("round %d", k));
    c.b.Note(got, absl::StrFormat("round %d", k));
    round_deps = {s, got};
  }
  // tmp block i holds rank (r + i) % n's: two runs.
  const int head = n - c.r;  // blocks i < head go to r + i
  c.b.Copy(tmp, c.At(c.recv, c.r, c.count), block * static_cast<uint64_t>(head), round_deps);
  if (c.r > 0) c.b.Copy(tmp + block * static_cast<uint64_t>(head), c.recv, block * static_cast<uint64_t>(c.r), round_deps);
  return absl::OkStatus();
}

// ---- alltoall ------------------------------------------------------------------

// Pairwise exchange: step s sends to r + s and receives from r - s (with a
// power of two, partner r ^ s both ways); each step waits for the previous.
absl::Status AlltoallPairwise(Ctx& c) {
  const int n = c.n;
  const uint64_t block = c.Bytes(c.count);
  Buf src = c.send;
  VertexId prev = -1;
  if (c.in_place) {  // the data to send is in recv, which the receives overwrite
    src = c.b.Temp(block * static_cast<uint64_t>(n));
    prev = c.b.Copy(c.recv, src, block * static_cast<uint64_t>(n));
  } else {
    prev = c.b.Copy(c.At(src, c.r, c.count), c.At(c.recv, c.r, c.count), block);
  }
  const bool pof2 = (n & (n - 1)) == 0;
  if (c.in_place) prev = c.b.Copy(c.At(src, c.r, c.count), c.At(c.recv, c.r, c.count), block, Deps({prev}));
  for (int s = 1; s < n; ++s) {
    const int to = pof2 ? (c.r ^ s) : (c.r + s) % n;
    const int from = pof2 ? (c.r ^ s) : (c.r - s + n) % n;
    VertexId sv = c.b.Send(c.At(src, to, c.count), block, to, Deps({prev}));
    VertexId got = c.b.Recv(c.At(c.recv, from, c.count), block, from, Deps({prev}));
    c.b.Note(sv, absl::StrFormat("step %d", s));
    c.b.Note(got, absl::StrFormat("step %d", s));
    prev = c.b.Fence({sv, got});
  }
  return absl::OkStatus();
}

// ---- gather / scatter ----------------------------------------------------------

// Binomial: a rank gathers its subtree's blocks (relative ranks [vr, vr +
// size)) in a buffer, then sends them to its parent in one message. The root
// rotates them into rank order unless it is rank 0.
absl::Status GatherBinomial(Ctx& c) {
  const int n = c.n;
  const int vr = (c.r - c.root + n) % n;
  const uint64_t block = c.Bytes(c.count);
  const bool direct = c.r == c.root && c.root == 0;
  int subtree = 1;
  while (subtree < n && (vr & subtree) == 0) subtree <<= 1;
  subtree = std::min(subtree, n - vr);
  const Buf buf = direct ? c.recv : c.b.Temp(block * static_cast<uint64_t>(subtree));
  VertexId last = -1;
  if (!(direct && c.in_place)) last = c.b.Copy(c.in_place ? c.At(c.recv, c.r, c.count) : c.send, buf, block);
  std::vector<VertexId> have = Deps({last});
  for (int mask = 1; mask < n; mask <<= 1) {
    if ((vr & mask) != 0) {
      c.b.Send(buf, block * static_cast<uint64_t>(subtree), (vr - mask + c.root) % n, have);
      return absl::OkStatus();
    }
    const int child = vr + mask;
    if (child >= n) continue;
    const int blocks = std::min(mask, n - child);
    have.push_back(c.b.Recv(buf + block * static_cast<uint64_t>(mask), block * static_cast<uint64_t>(blocks),
                            (child + c.root) % n));
  }
  if (!direct) {  // the root: relative block i is rank (i + root) % n's
    const int head = n - c.root;
    c.b.Copy(buf, c.At(c.recv, c.root, c.count), block * static_cast<uint64_t>(head), have);
    c.b.Copy(buf + block * static_cast<uint64_t>(head), c.recv, block * static_cast<uint64_t>(c.root), have);
  }
  return absl::OkStatus();
}

// Binomial: the reverse of GatherBinomial.
absl::Status ScatterBinomial(Ctx& c) {
  const int n = c.n;
  const int vr = (c.r - c.root + n) % n;
  const uint64_t block = c.Bytes(c.count);
  int subtree = 1;
  while (subtree < n && (vr & subtree) == 0) subtree <<= 1;
  subtree = std::min(subtree, n - vr);
  const bool direct = c.r == c.root && c.root == 0;
  const Buf buf = direct ? c.send : c.b.Temp(block * static_cast<uint64_t>(subtree));
  VertexId have = -1;
  if (c.r == c.root && !direct) {  // rotate into relative order
    const int head = n - c.root;
    VertexId a = c.b.Copy(c.At(c.send, c.root, c.count), buf, block * static_cast<uint64_t>(head));
    VertexId b = c.b.Copy(c.send, buf + block * static_cast<uint64_t>(head), block * static_cast<uint64_t>(c.root));
    have = c.b.Fence({a, b});
  }
  int mask = 1;
  for (; mask < n; mask <<= 1) {
    if ((vr & mask) != 0) {
      have = c.b.Recv(buf, block * static_cast<uint64_t>(subtree), (vr - mask + c.root) % n);
      break;
    }
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    const int child = vr + mask;
    if (child >= n) continue;
    const int blocks = std::min(mask, n - child);
    c.b.Send(buf + block * static_cast<uint64_t>(mask), block * static_cast<uint64_t>(blocks), (child + c.root) % n,
             Deps({have}));
  }
  if (!(c.r == c.root && c.in_place)) c.b.Copy(buf, c.recv, block, Deps({have}));
  return absl::OkStatus();
}

// ---- registry and selection ----------------------------------------------------

struct Algorithm {
  AlgorithmInfo info;
  absl::Status (*build)(Ctx&);
};

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

const Algorithm* Find(Collective c, absl::string_view name) {
  for (const Algorithm& a : Registry()) {
    if (a.info.collective == c && name == a.info.name) return &a;
  }
  return nullptr;
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

namespace {

// How many elements the send and receive buffers hold on this rank (0: not used).
std::pair<int64_t, int64_t> BufferElements(const CollectiveCall& call, int rank, int n) {
  const int64_t c = call.count;
  const bool root = rank == call.root;
  switch (call.kind) {
    case Collective::kBarrier: return {0, 0};
    case Collective::kBcast: return {0, c};
    case Collective::kReduce: return {c, root ? c : 0};
    case Collective::kAllreduce: return {c, c};
    case Collective::kGather: return {c, root ? c * n : 0};
    case Collective::kScatter: return {root ? c * n : 0, c};
    case Collective::kAllgather: return {c, c * n};
    case Collective::kAlltoall: return {c * n, c * n};
    case Collective::kCount: break;
  }
  return {0, 0};
}

absl::StatusOr<std::shared_ptr<Schedule>> Build(ScheduleBuilder& b, const CollectiveCall& call, bool runnable) {
  const int n = b.size();
  const int r = b.rank();
  const char* coll = CollectiveName(call.kind);
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrFormat("%s (rank %d of %d): %s", coll, r, n, why));
  };
  if (call.kind >= Collective::kCount) return bad("no such collective");
  if (call.count < 0) return bad(absl::StrFormat("negative count %d", call.count));
  const bool rooted = call.kind == Collective::kBcast || call.kind == Collective::kReduce ||
                      call.kind == Collective::kGather || call.kind == Collective::kScatter;
  if (rooted && (call.root < 0 || call.root >= n)) {
    return bad(absl::StrFormat("root %d is not a rank of a communicator of %d", call.root, n));
  }
  const bool reduces = call.kind == Collective::kReduce || call.kind == Collective::kAllreduce;
  if (reduces && !call.op.has_value()) return bad("no reduction operator");
  if (reduces && call.count > 0) {
    if (absl::Status s = call.op->Check(call.type); !s.ok()) return bad(std::string(s.message()));
  }
  const bool in_place = call.send == kInPlace;
  if (in_place && (call.kind == Collective::kBcast || call.kind == Collective::kScatter ||
                   call.kind == Collective::kBarrier || (call.kind == Collective::kReduce && r != call.root) ||
                   (call.kind == Collective::kGather && r != call.root))) {
    return bad("kInPlace is not allowed here (MPI allows it at the root of reduce and gather, and in allreduce, "
               "allgather and alltoall)");
  }
  const uint64_t es = static_cast<uint64_t>(call.type.size());
  const auto [send_elems, recv_elems] = BufferElements(call, r, n);
  const uint64_t whole = static_cast<uint64_t>(call.count) * es;
  const bool commutative = !call.op.has_value() || call.op->commutative();
  const std::string algo =
      call.algorithm.empty() ? SelectAlgorithm(call.kind, whole, n, commutative) : call.algorithm;
  const Algorithm* a = Find(call.kind, algo);
  if (a == nullptr) {
    std::string names;
    for (const AlgorithmInfo& i : Algorithms()) {
      if (i.collective == call.kind) absl::StrAppend(&names, names.empty() ? "" : ", ", i.name);
    }
    return bad(absl::StrFormat("no algorithm '%s' (there are: %s)", algo, names));
  }
  if (a->info.commutative_only && !commutative) {
    return bad(absl::StrFormat("algorithm %s needs a commutative operator", algo));
  }
  if (runnable) {
    if (send_elems > 0 && !in_place && call.send == nullptr) return bad("null send buffer");
    if (recv_elems > 0 && call.recv == nullptr) return bad("null receive buffer");
  }

  // Non-contiguous types travel packed: pack first, unpack last.
  const bool packed = !call.type.contiguous() && call.kind != Collective::kBarrier;
  Buf send = Buf::User(in_place ? call.recv : call.send, in_place ? "recv" : "send");
  Buf recv = Buf::User(call.recv, "recv");
  VertexId pack = -1;
  if (packed) {
    recv = recv_elems > 0 ? b.Temp(static_cast<uint64_t>(recv_elems) * es) : Buf{};
    const bool root_bcast = call.kind == Collective::kBcast && r == call.root;
    if (in_place || root_bcast) {
      send = recv;
      const int64_t elems = recv_elems;
      if (elems > 0) pack = b.Pack(Buf::User(call.recv, "recv"), elems, call.type, recv);
    } else if (send_elems > 0) {
      send = b.Temp(static_cast<uint64_t>(send_elems) * es);
      pack = b.Pack(Buf::User(call.send, "send"), send_elems, call.type, send);
    }
  }
  const std::size_t first = b.vertices().size();
  Ctx c{b, r, n, send, recv, in_place, call.count, call.type, es, call.op, call.root};
  if (call.kind == Collective::kBcast) c.send = c.recv;
  CARTAGE_RETURN_IF_ERROR(a->build(c));
  if (packed) {
    std::vector<bool> has_succ(b.vertices().size(), false);
    for (std::size_t v = first; v < b.vertices().size(); ++v) {
      if (pack >= 0 && b.vertices()[v].after.empty()) b.Depend(pack, static_cast<VertexId>(v));
      for (const Edge& e : b.vertices()[v].after) has_succ[static_cast<std::size_t>(e.from)] = true;
    }
    const bool unpacks = recv_elems > 0 && !(call.kind == Collective::kBcast && r == call.root);
    if (unpacks) {
      std::vector<VertexId> sinks;
      for (std::size_t v = first; v < has_succ.size(); ++v) {
        if (!has_succ[v]) sinks.push_back(static_cast<VertexId>(v));
      }
      if (sinks.empty() && pack >= 0) sinks.push_back(pack);
      b.Unpack(recv, recv_elems, call.type, Buf::User(call.recv, "recv"), sinks);
    }
  }
  absl::StatusOr<std::shared_ptr<Schedule>> s = b.Build();
  if (!s.ok()) return absl::Status(s.status().code(), absl::StrCat(coll, "/", algo, ": ", s.status().message()));
  return s;
}

std::string ScheduleName(const CollectiveCall& call, int n) {
  const uint64_t whole = static_cast<uint64_t>(call.count) * static_cast<uint64_t>(call.type.size());
  const bool commutative = !call.op.has_value() || call.op->commutative();
  const std::string algo = call.algorithm.empty() ? SelectAlgorithm(call.kind, whole, n, commutative) : call.algorithm;
  return absl::StrCat(CollectiveName(call.kind), "/", algo);
}

}  // namespace

absl::StatusOr<std::shared_ptr<Schedule>> BuildCollective(const Comm& comm, const CollectiveCall& call) {
  ScheduleBuilder b(comm, ScheduleName(call, comm.size()));
  return Build(b, call, /*runnable=*/true);
}

absl::StatusOr<std::shared_ptr<Schedule>> BuildCollective(int rank, int size, const CollectiveCall& call) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: rank %d of %d", CollectiveName(call.kind), rank, size));
  }
  ScheduleBuilder b(rank, size, ScheduleName(call, size));
  return Build(b, call, /*runnable=*/false);
}

namespace {

// Blocking calls reuse the schedule of an earlier call that differs only in
// its buffers (same communicator, collective, count, type, operator, root,
// algorithm, in place or not), rebound to the new buffers: building costs
// more than a small collective takes to run. Every rank makes the same
// calls, so every rank hits or misses alike, and a reused schedule keeps its
// sequence number (its tags): the runs of one schedule are ordered on every
// link, as a persistent request's are. Nonblocking calls always build anew
// (two of them may be in flight at once).
// What makes two calls the same schedule (the buffers aside). Only what
// every rank passes alike: whether the root alone passes kInPlace is not in
// it (a rank-dependent key would let one rank reuse a schedule, and its
// tags, while another builds a new one).
struct CacheKey {
  uint32_t context;
  int size;
  CollectiveCall call;  // send and recv are not compared
  // Whether a call on (context, size) is this key; compares in place, so a
  // hit copies nothing.
  bool Matches(uint32_t ctx, int n, const CollectiveCall& b) const {
    const CollectiveCall& a = call;
    const bool same_op = a.op.has_value() == b.op.has_value() &&
                         (!a.op.has_value() || (a.op->kind() == b.op->kind() && a.op->fn() == b.op->fn() &&
                                                a.op->context() == b.op->context() &&
                                                a.op->commutative() == b.op->commutative()));
    return context == ctx && size == n && a.kind == b.kind && a.count == b.count && a.root == b.root && same_op &&
           a.type.size() == b.type.size() && a.type.extent() == b.type.extent() &&
           a.type.true_lb() == b.type.true_lb() && a.algorithm == b.algorithm && a.type.name() == b.type.name();
  }
};

class ScheduleCache {
 public:
  struct Entry {
    CacheKey key;
    bool in_place;
    std::shared_ptr<Schedule> schedule;
  };
  // The entry for `key`, made the most recent; null if none.
  Entry* Find(uint32_t context, int size, const CollectiveCall& call) {
    for (std::size_t i = entries_.size(); i-- > 0;) {  // the most recent first
      if (entries_[i].key.Matches(context, size, call)) {
        std::rotate(entries_.begin() + static_cast<std::ptrdiff_t>(i),
                    entries_.begin() + static_cast<std::ptrdiff_t>(i) + 1, entries_.end());
        return &entries_.back();
      }
    }
    return nullptr;
  }
  void Add(CacheKey key, bool in_place, std::shared_ptr<Schedule> s) {
    if (entries_.size() == kCapacity) entries_.erase(entries_.begin());  // the least recently used
    entries_.push_back({std::move(key), in_place, std::move(s)});
  }

 private:
  static constexpr std::size_t kCapacity = 16;
  std::vector<Entry> entries_;
};

}  // namespace

absl::Status RunCollective(const Comm& comm, const CollectiveCall& call) {
  static auto* cache = new ScheduleCache();
  const bool in_place = call.send == kInPlace;
  ScheduleCache::Entry* hit = cache->Find(comm.context(), comm.size(), call);
  if (hit == nullptr) {
    CARTAGE_ASSIGN_OR_RETURN(std::shared_ptr<Schedule> s, BuildCollective(comm, call));
    cache->Add(CacheKey{comm.context(), comm.size(), call}, in_place, s);
    return s->Run();
  }
  if (hit->in_place != in_place) {
    // This rank's part changed shape (the root switched to or from kInPlace):
    // rebuild it under the same sequence number, as the other ranks reuse theirs.
    ScheduleBuilder b(comm, ScheduleName(call, comm.size()));
    b.UseSequence(hit->schedule->sequence());
    CARTAGE_ASSIGN_OR_RETURN(hit->schedule, Build(b, call, /*runnable=*/true));
    hit->in_place = in_place;
    return hit->schedule->Run();
  }
  hit->schedule->RebindUser("send", in_place ? call.recv : call.send);
  hit->schedule->RebindUser("recv", call.recv);
  return hit->schedule->Run();
}

absl::Status StartCollective(const Comm& comm, const CollectiveCall& call, Request* req) {
  CARTAGE_ASSIGN_OR_RETURN(std::shared_ptr<Schedule> s, BuildCollective(comm, call));
  return s->Start(req);
}

absl::Status InitCollective(const Comm& comm, const CollectiveCall& call, Request* req) {
  CARTAGE_ASSIGN_OR_RETURN(std::shared_ptr<Schedule> s, BuildCollective(comm, call));
  return s->Bind(req);
}

namespace {
CollectiveCall Call(Collective k, const void* send, void* recv, int64_t count, const Datatype& type,
                    std::optional<Op> op, int root) {
  CollectiveCall c;
  c.kind = k;
  c.send = send;
  c.recv = recv;
  c.count = count;
  c.type = type;
  c.op = op;
  c.root = root;
  return c;
}
}  // namespace

absl::Status Barrier(const Comm& comm) { return RunCollective(comm, CollectiveCall{}); }
absl::Status Ibarrier(const Comm& comm, Request* req) { return StartCollective(comm, CollectiveCall{}, req); }
absl::Status Bcast(const Comm& comm, void* buf, int64_t count, const Datatype& type, int root) {
  return RunCollective(comm, Call(Collective::kBcast, buf, buf, count, type, std::nullopt, root));
}
absl::Status Ibcast(const Comm& comm, void* buf, int64_t count, const Datatype& type, int root, Request* req) {
  return StartCollective(comm, Call(Collective::kBcast, buf, buf, count, type, std::nullopt, root), req);
}
absl::Status Reduce(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                    const Op& op, int root) {
  return RunCollective(comm, Call(Collective::kReduce, send, recv, count, type, op, root));
}
absl::Status Ireduce(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                     const Op& op, int root, Request* req) {
  return StartCollective(comm, Call(Collective::kReduce, send, recv, count, type, op, root), req);
}
absl::Status Allreduce(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                       const Op& op) {
  return RunCollective(comm, Call(Collective::kAllreduce, send, recv, count, type, op, 0));
}
absl::Status Iallreduce(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                        const Op& op, Request* req) {
  return StartCollective(comm, Call(Collective::kAllreduce, send, recv, count, type, op, 0), req);
}
absl::Status Gather(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type, int root) {
  return RunCollective(comm, Call(Collective::kGather, send, recv, count, type, std::nullopt, root));
}
absl::Status Scatter(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                     int root) {
  return RunCollective(comm, Call(Collective::kScatter, send, recv, count, type, std::nullopt, root));
}
absl::Status Allgather(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type) {
  return RunCollective(comm, Call(Collective::kAllgather, send, recv, count, type, std::nullopt, 0));
}
absl::Status Iallgather(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                        Request* req) {
  return StartCollective(comm, Call(Collective::kAllgather, send, recv, count, type, std::nullopt, 0), req);
}
absl::Status Alltoall(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type) {
  return RunCollective(comm, Call(Collective::kAlltoall, send, recv, count, type, std::nullopt, 0));
}
absl::Status Ialltoall(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                       Request* req) {
  return StartCollective(comm, Call(Collective::kAlltoall, send, recv, count, type, std::nullopt, 0), req);
}

}  // namespace cartage
