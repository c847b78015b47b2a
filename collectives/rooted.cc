// Rooted and tree-shaped algorithms: barrier, bcast, reduce, gather, scatter.

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "collectives/algorithms.h"

namespace cartage::alg {

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

// Linear: a message to every other rank and one from each, all at once;
// one round of n - 1 messages each way (for ranks outnumbering cores, where
// each round a rank waits through is a trip through the scheduler).
absl::Status BarrierLinear(Ctx& c) {
  for (int s = 1; s < c.n; ++s) {
    c.b.Send(Buf{}, 0, (c.r + s) % c.n);
    c.b.Recv(Buf{}, 0, (c.r - s + c.n) % c.n);
  }
  return absl::OkStatus();
}

// Star: every other rank tells rank 0, which answers each once it has heard
// from all. Two rounds, but two messages a rank (2(n - 1) at rank 0) where
// linear has 2(n - 1) at every rank: where several ranks share each CPU, a
// call costs the messages' work, not its rounds (cartage-bench barrier).
absl::Status BarrierStar(Ctx& c) {
  if (c.r != 0) {
    c.b.Send(Buf{}, 0, 0);
    c.b.Recv(Buf{}, 0, 0);
    return absl::OkStatus();
  }
  std::vector<VertexId> heard;
  for (int i = 1; i < c.n; ++i) heard.push_back(c.b.Recv(Buf{}, 0, i));
  if (heard.empty()) return absl::OkStatus();
  const VertexId all = c.b.Fence(heard);
  for (int i = 1; i < c.n; ++i) c.b.Send(Buf{}, 0, i, {all});
  return absl::OkStatus();
}

// ---- bcast ---------------------------------------------------------------------

// Bcast as seed 002's scatter blocks over the packed buffer: a rank receives
// from its parent and forwards to its children. A piece larger than
// kForwardChunk travels in chunks, so a rank forwards chunk k while chunk
// k+1 arrives (the xfer layer cuts and pipelines; USE_SEGMENT_BUF by its
// policy, the buffer being contiguous: chunks land in place and leave from
// there).
constexpr uint64_t kForwardChunk = 64 << 10;

namespace {

Segment Whole(const Ctx& c) {
  return Segment::Of(c.recv, static_cast<int64_t>(c.Bytes(c.count)), Datatype::Basic(datatype::BasicType::kByte));
}

// Receives from `parent` (kNoPeer at the root) and passes it on to
// `children` in order.
absl::Status BcastTree(Ctx& c, int parent, const std::vector<int>& children, uint64_t chunk) {
  Xfer x = Xfer::ScatterInit(c.b, parent, XferOptions{.chunk_bytes = chunk, .buffer = std::nullopt});
  const Segment all = Whole(c);
  std::size_t i = 0;  // the root's data is in place already: it only sends
  if (parent != kNoPeer && children.empty()) {
    CARTAGE_RETURN_IF_ERROR(x.RecvMopOp(all, std::nullopt));
  } else if (parent != kNoPeer) {
    CARTAGE_RETURN_IF_ERROR(x.RecvMopForwardOp(all, std::nullopt, children[i++]));
  }
  for (; i < children.size(); ++i) CARTAGE_RETURN_IF_ERROR(x.SendOp(all, children[i]));
  return x.Start().status();
}

}  // namespace

// Binomial tree rooted at `root`: receive from the parent, then send to the
// children, farthest first; pipelined in chunks where ranks forward (n > 2)
// and every rank has a CPU. Where ranks outnumber CPUs each piece goes whole:
// a chunk's rendezvous waits for its peer to be scheduled, so fewer
// messages win (cartage-bench bcast 1 MiB, 4 ranks on 2 CPUs).
absl::Status BcastBinomial(Ctx& c) {
  const int vr = (c.r - c.root + c.n) % c.n;
  int parent = kNoPeer;
  int mask = 1;
  for (; mask < c.n; mask <<= 1) {
    if ((vr & mask) != 0) {
      parent = (vr - mask + c.root) % c.n;
      break;
    }
  }
  std::vector<int> children;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < c.n) children.push_back((vr + mask + c.root) % c.n);
  }
  return BcastTree(c, parent, children, c.n > 2 && !c.oversubscribed ? kForwardChunk : 0);
}

// The same binomial tree grown by doubling: in step i the ranks that have
// the data (relative ranks below 2^i) send it to the ranks 2^i further on.
// A rank receives from its parent, then sends to its children nearest
// first, which is the largest subtree first. Where the launcher pins ranks
// that outnumber the CPUs round-robin, relative neighbours run on
// different CPUs: the first hops cross to the other CPUs and the later ones
// run on every CPU at once, where binomial's first hops (n/2 away) stay on
// the root's CPU (cartage-bench bcast). Pieces are chunked as binomial's.
absl::Status BcastBinomialNear(Ctx& c) {
  const int vr = (c.r - c.root + c.n) % c.n;
  int parent = kNoPeer;
  int first = 1;  // the distance to the first child: past vr's highest bit
  if (vr > 0) {
    const int high = 1 << (31 - __builtin_clz(static_cast<unsigned>(vr)));
    parent = (vr - high + c.root) % c.n;
    first = high << 1;
  }
  std::vector<int> children;
  for (int mask = first; mask < c.n && vr + mask < c.n; mask <<= 1) children.push_back((vr + mask + c.root) % c.n);
  return BcastTree(c, parent, children, c.n > 2 && !c.oversubscribed ? kForwardChunk : 0);
}

// A chain root -> root+1 -> ... in chunks: a rank forwards chunk k while
// chunk k+1 arrives (every receive is posted at once).
absl::Status BcastChain(Ctx& c) {
  const int vr = (c.r - c.root + c.n) % c.n;
  std::vector<int> next;
  if (vr + 1 < c.n) next.push_back((vr + 1 + c.root) % c.n);
  return BcastTree(c, vr == 0 ? kNoPeer : (vr - 1 + c.root) % c.n, next, kForwardChunk);
}

// Linear: the root sends to every other rank in turn (root+1 first); the
// others only receive. As many messages as a tree, but nobody forwards: no
// rank waits to be scheduled before the ones after it can have their piece.
absl::Status BcastLinear(Ctx& c) {
  if (c.r != c.root) return BcastTree(c, c.root, {}, 0);
  std::vector<int> children;
  for (int s = 1; s < c.n; ++s) children.push_back((c.root + s) % c.n);
  return BcastTree(c, kNoPeer, children, 0);
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
// The input is read where it lies: a leaf sends it from there, and a parent
// receives its first child's result straight in the accumulator and
// reduces the input into it (only the root of both, in place, keeps its
// input in the accumulator, recv).
absl::Status ReduceBinomial(Ctx& c) {
  const uint64_t bytes = c.Bytes(c.count);
  if (c.n == 1) return OneRank(c, bytes);
  const bool ordered = !c.op->commutative();
  const int vroot = ordered ? 0 : c.root;
  const int vr = (c.r - vroot + c.n) % c.n;
  // The accumulator: the result buffer where this rank is the root of both.
  const bool acc_is_recv = c.r == c.root && c.r == vroot;
  Buf acc = acc_is_recv ? c.recv : Buf{};  // else a temporary, made if this rank has children
  Buf tmp;
  bool fresh = !(acc_is_recv && c.in_place);  // the input is still only in the send buffer
  VertexId read_input = -1;                   // what read it there
  VertexId last = -1;
  for (int mask = 1; mask < c.n; mask <<= 1) {
    if ((vr & mask) == 0) {
      const int child = vr | mask;
      if (child >= c.n) continue;
      const int from = (child + vroot) % c.n;
      // Rank order: a child's subtree holds higher ranks, so it is the right operand.
      if (fresh) {
        if (!acc_is_recv) acc = c.b.Temp(bytes);
        VertexId got = c.b.Recv(acc, bytes, from);
        last = read_input = c.Reduce(c.send, acc, c.count, {got}, /*in_is_left=*/ordered);
        fresh = false;
      } else {
        VertexId got = c.b.Recv(c.TempOnce(&tmp, bytes), bytes, from, Deps({last}));  // tmp free again
        last = c.Reduce(tmp, acc, c.count, Deps({got, last}), /*in_is_left=*/!ordered);
      }
    } else {
      last = c.b.Send(fresh ? c.send : acc, bytes, (vr - mask + vroot) % c.n, Deps({last}));
      if (fresh) read_input = last;
      break;
    }
  }
  if (vroot != c.root) {
    if (c.r == vroot) c.b.Send(acc, bytes, c.root, Deps({last}));
    if (c.r == c.root) c.b.Recv(c.recv, bytes, vroot, Deps({read_input}));  // in place: recv was read first
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

// Rabenseifner's reduce: a recursive-halving reduce-scatter leaves each
// new rank one reduced part, and a binomial gather (on the butterfly's own
// pairs, relabelled so that the root's new rank is 0) brings the parts to
// the root. Commutative operators only. The input is read where it lies,
// never copied into the accumulator.
absl::Status ReduceScatterGather(Ctx& c) {
  const uint64_t bytes = c.Bytes(c.count);
  if (c.n == 1) return OneRank(c, bytes);
  const Buf acc = c.b.Temp(bytes);
  const Buf tmp = c.b.Temp(bytes);
  const Fold f = MakeFold(c.r, c.n);
  std::vector<VertexId> v = FoldIn(c, f, acc, tmp, c.count, {}, &c.send);  // the input is read where it lies
  const int nroot = f.NewRankOf(c.root);
  if (f.newrank >= 0) {
    std::vector<int64_t> start(static_cast<std::size_t>(f.pof2) + 1);
    for (int i = 0; i <= f.pof2; ++i) start[static_cast<std::size_t>(i)] = PartStart(c.count, i, f.pof2);
    const std::vector<VertexId> halving =
        HalvingReduceScatter(c, f, acc, tmp, start, v, c.r < 2 * f.rem ? nullptr : &c.send);
    std::vector<VertexId> have = halving;
    const int vr = f.newrank ^ nroot;
    bool sent = false;
    for (int mask = 1; mask < f.pof2; mask <<= 1) {
      const int base = f.newrank & ~(mask - 1);  // this rank holds parts [base, base + mask)
      const int partner = f.Rank(f.newrank ^ mask);
      if ((vr & mask) != 0) {
        const int64_t lo = start[static_cast<std::size_t>(base)];
        VertexId s = c.b.Send(acc + c.Bytes(lo), c.Bytes(start[static_cast<std::size_t>(base + mask)] - lo), partner,
                              have);
        c.b.Note(s, absl::StrFormat("gather %d", mask));
        sent = true;
        break;
      }
      const int theirs = base ^ mask;
      const int64_t lo = start[static_cast<std::size_t>(theirs)];
      VertexId got = c.b.Recv(acc + c.Bytes(lo), c.Bytes(start[static_cast<std::size_t>(theirs + mask)] - lo),
                              partner, halving);
      c.b.Note(got, absl::StrFormat("gather %d", mask));
      have.push_back(got);
    }
    if (!sent) {  // the root's new rank: the whole result
      if (f.Rank(nroot) == c.root) {
        c.b.Copy(acc, c.recv, bytes, have);
      } else {
        c.b.Send(acc, bytes, c.root, have);
      }
    }
  }
  if (c.r == c.root && f.newrank < 0) c.b.Recv(c.recv, bytes, f.Rank(nroot), v);  // after the fold read recv
  return absl::OkStatus();
}

// ---- the v forms: one message per rank, straight to or from the root ------------

// Linear gatherv (MPICH's choice too: the blocks differ in size, so a tree
// would forward uneven, unknown amounts): every rank sends its block to the
// root, which receives each into place. Zero-sized blocks travel too, so a
// rank and the root that disagree about a size get an error, not a hang.
absl::Status GathervLinear(Ctx& c) {
  if (c.r != c.root) {
    c.b.Send(c.send, c.Bytes(c.count), c.root);
    return absl::OkStatus();
  }
  for (int i = 0; i < c.n; ++i) {
    const Block& blk = c.rblk[static_cast<std::size_t>(i)];
    if (i == c.r) {
      if (!c.in_place) c.b.Copy(c.send, blk.at, c.Bytes(blk));
      continue;
    }
    c.b.Recv(blk.at, c.Bytes(blk), i);
  }
  return absl::OkStatus();
}

// Linear scatterv: the reverse.
absl::Status ScattervLinear(Ctx& c) {
  if (c.r != c.root) {
    c.b.Recv(c.recv, c.Bytes(c.count), c.root);
    return absl::OkStatus();
  }
  for (int i = 0; i < c.n; ++i) {
    const Block& blk = c.sblk[static_cast<std::size_t>(i)];
    if (i == c.r) {
      if (!c.in_place) c.b.Copy(blk.at, c.recv, c.Bytes(blk));
      continue;
    }
    c.b.Send(blk.at, c.Bytes(blk), i);
  }
  return absl::OkStatus();
}

}  // namespace cartage::alg
