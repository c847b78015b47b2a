// Exchange algorithms, where every rank ends with a result: allreduce,
// allgather, alltoall.

#include <algorithm>
#include <vector>

#include "absl/strings/str_format.h"
#include "collectives/algorithms.h"

namespace cartage::alg {

// ---- allreduce -----------------------------------------------------------------

// Recursive doubling (MPICH's): the first 2*rem ranks pair up so that a power
// of two take part, partners exchange and reduce, then the pairs' odd ranks
// hand the result back. Keeps rank order for non-commutative operators.
// Not in place, the input is never copied into the accumulator (recv): the
// first exchange sends it from the send buffer, the partner's vector
// arrives straight in recv, and the input is reduced into it from where it
// lies. Later exchanges go through a temporary.
absl::Status AllreduceRecursiveDoubling(Ctx& c) {
  const uint64_t bytes = c.Bytes(c.count);
  if (c.n == 1) return OneRank(c, bytes);
  const Buf acc = c.recv;
  int pof2 = 1;
  while (pof2 * 2 <= c.n) pof2 *= 2;
  const int rem = c.n - pof2;
  bool fresh = !c.in_place;  // acc holds nothing yet: the input is in the send buffer
  Buf tmp;  // made by the first exchange that needs it
  VertexId last = -1;  // the last step that read or wrote acc
  // One exchange's receive and reduce with `peer`, after `after`: the
  // peer's vector on the left if it is the lower rank.
  auto take = [&](int peer, std::vector<VertexId> after) {
    if (fresh) {
      fresh = false;
      VertexId got = c.b.Recv(acc, bytes, peer);
      return c.Reduce(c.send, acc, c.count, {got}, /*in_is_left=*/c.r < peer);
    }
    VertexId got = c.b.Recv(c.TempOnce(&tmp, bytes), bytes, peer, Deps({last}));
    after.push_back(got);
    return c.Reduce(tmp, acc, c.count, after, /*in_is_left=*/peer < c.r);
  };
  int newrank;
  if (c.r < 2 * rem) {
    if (c.r % 2 == 0) {
      last = c.b.Send(c.in_place ? acc : c.send, bytes, c.r + 1);
      newrank = -1;
    } else {
      last = take(c.r - 1, {});
      newrank = c.r / 2;
    }
  } else {
    newrank = c.r - rem;
  }
  if (newrank >= 0) {
    for (int mask = 1; mask < pof2; mask <<= 1) {
      const int newdst = newrank ^ mask;
      const int dst = newdst < rem ? newdst * 2 + 1 : newdst + rem;
      // Fresh, the send reads the input and the reduce writes acc: neither waits for the other.
      VertexId s = fresh ? c.b.Send(c.send, bytes, dst) : c.b.Send(acc, bytes, dst, Deps({last}));
      last = take(dst, fresh ? std::vector<VertexId>{} : std::vector<VertexId>{s});
    }
  }
  if (c.r < 2 * rem) {
    if (c.r % 2 == 1) {
      c.b.Send(acc, bytes, c.r - 1, Deps({last}));
    } else {
      c.b.Recv(acc, bytes, c.r + 1, Deps({last}));  // the whole result: no copy of the input needed
    }
  }
  return absl::OkStatus();
}

// Linear: every rank sends its vector to every other and reduces all n in
// rank order, x0 op (x1 op (... op x(n-1))), so every rank computes the
// same result bit for bit, and non-commutative operators work. One round of
// n - 1 messages each way: for small vectors, where the number of rounds a
// rank waits through costs more than the messages (ranks outnumbering cores:
// every wait is a trip through the scheduler).
absl::Status AllreduceLinear(Ctx& c) {
  const int n = c.n;
  const uint64_t bytes = c.Bytes(c.count);
  if (n == 1) return OneRank(c, bytes);
  const Buf tmp = c.b.Temp(bytes * static_cast<uint64_t>(n));
  auto slot = [&](int i) { return tmp + bytes * static_cast<uint64_t>(i); };
  // In place, the accumulator (recv) holds this rank's vector: keep a copy.
  Buf own = c.send;
  VertexId saved = -1;
  if (c.in_place) {
    own = slot(c.r);
    saved = c.b.Copy(c.recv, own, bytes);
  }
  // The reduction starts from the top rank's vector, which arrives straight
  // in recv; at the top rank itself, not in place, the next one down does
  // and this rank's own is reduced into it. Either way nothing is copied.
  const int top = n - 1;
  const int into_recv = c.r != top ? top : (c.in_place ? -1 : top - 1);  // whose vector arrives in recv
  std::vector<VertexId> got(static_cast<std::size_t>(n), -1);
  for (int s = 1; s < n; ++s) {
    const int to = (c.r + s) % n;
    const int from = (c.r - s + n) % n;
    c.b.Send(own, bytes, to, Deps({saved}));
    got[static_cast<std::size_t>(from)] =
        from == into_recv ? c.b.Recv(c.recv, bytes, from, Deps({saved})) : c.b.Recv(slot(from), bytes, from);
  }
  auto at = [&](int i) { return i == c.r ? own : slot(i); };
  VertexId last = saved;  // in place at the top rank, recv holds its vector
  int i = top - 1;        // the next vector to reduce in, on the left
  if (into_recv == top) {
    last = got[static_cast<std::size_t>(top)];
  } else if (into_recv == top - 1) {
    last = c.Reduce(own, c.recv, c.count, Deps({got[static_cast<std::size_t>(top - 1)]}), /*in_is_left=*/false);
    --i;
  }
  for (; i >= 0; --i) {
    last = c.Reduce(at(i), c.recv, c.count, Deps({last, got[static_cast<std::size_t>(i)]}));  // x_i on the left
  }
  return absl::OkStatus();
}

// Star: every rank sends its vector to rank 0, which reduces all n in rank
// order, x0 op (x1 op (... op x(n-1))) as the linear one does, and sends
// the result back to each. Two messages a rank and no reduction but at
// rank 0 (see BarrierStar).
absl::Status AllreduceStar(Ctx& c) {
  const int n = c.n;
  const uint64_t bytes = c.Bytes(c.count);
  if (n == 1) return OneRank(c, bytes);
  if (c.r != 0) {
    const VertexId sent = c.b.Send(c.in_place ? c.recv : c.send, bytes, 0);
    // In place the result lands where the vector leaves from: after it left.
    c.b.Recv(c.recv, bytes, 0, Deps({c.in_place ? sent : -1}));
    return absl::OkStatus();
  }
  // Slots for ranks 1 .. n-2 (x(n-1) arrives straight in recv), and in place
  // one more for x0.
  const Buf tmp = c.b.Temp(bytes * static_cast<uint64_t>(n - 2 + (c.in_place ? 1 : 0)));
  auto slot = [&](int i) { return tmp + bytes * static_cast<uint64_t>(i - 1); };
  Buf own = c.send;
  VertexId saved = -1;
  if (c.in_place) {  // recv holds x0, and x(n-1) arrives there: keep a copy
    own = slot(n - 1);
    saved = c.b.Copy(c.recv, own, bytes);
  }
  VertexId last = c.b.Recv(c.recv, bytes, n - 1, Deps({saved}));
  std::vector<VertexId> got(static_cast<std::size_t>(n), -1);
  for (int i = 1; i < n - 1; ++i) got[static_cast<std::size_t>(i)] = c.b.Recv(slot(i), bytes, i);
  for (int i = n - 2; i >= 1; --i) last = c.Reduce(slot(i), c.recv, c.count, Deps({last, got[static_cast<std::size_t>(i)]}));
  last = c.Reduce(own, c.recv, c.count, Deps({last}));
  for (int i = 1; i < n; ++i) c.b.Send(c.recv, bytes, i, {last});
  return absl::OkStatus();
}

// Ring: a reduce-scatter (n - 1 steps, each rank ends up owning one reduced
// part) and an allgather of the parts (n - 1 steps). Bandwidth-optimal;
// commutative operators only.
// Not in place, the input is never copied into recv: the reduce-scatter
// sends this rank's own part from the send buffer, each part arrives
// straight in recv, and the input's part is reduced into it from where it
// lies (recv's parts are written once each there, and this rank's own part
// only by the allgather).
absl::Status AllreduceRing(Ctx& c) {
  const int n = c.n;
  const uint64_t bytes = c.Bytes(c.count);
  if (n == 1) return OneRank(c, bytes);
  auto part = [&](int i) { return PartStart(c.count, ((i % n) + n) % n, n); };
  auto elems = [&](int i) {
    const int j = ((i % n) + n) % n;
    return PartStart(c.count, j + 1, n) - PartStart(c.count, j, n);
  };
  const int right = (c.r + 1) % n;
  const int left = (c.r - 1 + n) % n;
  const int64_t max_part = (c.count + n - 1) / n;
  const Buf tmp = c.in_place ? c.b.Temp(c.Bytes(max_part) * static_cast<uint64_t>(n - 1)) : Buf{};
  std::vector<VertexId> rs_sends;
  VertexId reduced = -1;
  for (int s = 0; s < n - 1; ++s) {
    const int out = c.r - s;
    const int in = c.r - s - 1;
    const Buf from = s == 0 && !c.in_place ? c.send : c.recv;  // step 0 sends this rank's own part
    VertexId sv = c.b.Send(c.At(from, part(out), 1), c.Bytes(elems(out)), right, Deps({reduced}));
    c.b.Note(sv, absl::StrFormat("reduce-scatter %d", s));
    rs_sends.push_back(sv);
    VertexId got;
    if (c.in_place) {  // recv's part holds the input: the partner's goes through a temporary
      const Buf slot = tmp + c.Bytes(max_part) * static_cast<uint64_t>(s);
      got = c.b.Recv(slot, c.Bytes(elems(in)), left);
      reduced = c.Reduce(slot, c.At(c.recv, part(in), 1), elems(in), Deps({got, reduced}));
    } else {  // the received part is on the left, as in place
      got = c.b.Recv(c.At(c.recv, part(in), 1), c.Bytes(elems(in)), left);
      reduced = c.Reduce(c.At(c.send, part(in), 1), c.At(c.recv, part(in), 1), elems(in), Deps({got, reduced}),
                         /*in_is_left=*/false);
    }
    c.b.Note(got, absl::StrFormat("reduce-scatter %d", s));
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
  // allgatherv's ring with n equal blocks (on a copy: BuildCollective
  // unpacks the caller's rblk, which allgather leaves empty).
  Ctx v = c;
  for (int i = 0; i < c.n; ++i) v.rblk.push_back({c.At(c.recv, i, c.count), c.count, Buf{}});
  return AllgathervRing(v);
}

// Linear: this rank's block goes straight to every other rank, all at once;
// one round (see AllreduceLinear).
absl::Status AllgatherLinear(Ctx& c) {
  const int n = c.n;
  const uint64_t block = c.Bytes(c.count);
  const Buf mine = c.At(c.recv, c.r, c.count);
  const Buf own = c.in_place ? mine : c.send;
  if (!c.in_place) c.b.Copy(c.send, mine, block);
  for (int s = 1; s < n; ++s) {
    const int to = (c.r + s) % n;
    const int from = (c.r - s + n) % n;
    c.b.Send(own, block, to);
    c.b.Recv(c.At(c.recv, from, c.count), block, from);
  }
  return absl::OkStatus();
}

// Bruck: ceil(log2 n) rounds; round k sends the blocks gathered so far to
// rank - k and receives as many from rank + k into a rotated buffer, which
// is rotated back at the end. Any rank count.
absl::Status AllgatherBruck(Ctx& c) {
  const int n = c.n;
  const uint64_t block = c.Bytes(c.count);
  if (n == 1) return OneRank(c, block);
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

namespace {

// Where an alltoall's blocks to send lie. In place they are in recv, which
// the receives overwrite: they go from a copy, `*saved` (every send and
// receive waits for it), and this rank's own block stays where it is. Not in
// place, its own block is copied across beside the exchanges (which neither
// read nor write it) and `*saved` is -1.
Buf AlltoallInput(Ctx& c, VertexId* saved) {
  const uint64_t block = c.Bytes(c.count);
  if (c.in_place) {
    const Buf src = c.b.Temp(block * static_cast<uint64_t>(c.n));
    *saved = c.b.Copy(c.recv, src, block * static_cast<uint64_t>(c.n));
    return src;
  }
  c.b.Copy(c.At(c.send, c.r, c.count), c.At(c.recv, c.r, c.count), block);
  *saved = -1;
  return c.send;
}

}  // namespace

// Pairwise exchange: step s sends to r + s and receives from r - s (with a
// power of two, partner r ^ s both ways); each step waits for the previous.
absl::Status AlltoallPairwise(Ctx& c) {
  const int n = c.n;
  const uint64_t block = c.Bytes(c.count);
  VertexId prev = -1;
  const Buf src = AlltoallInput(c, &prev);
  const bool pof2 = (n & (n - 1)) == 0;
  for (int s = 1; s < n; ++s) {
    const int to = pof2 ? (c.r ^ s) : (c.r + s) % n;
    const int from = pof2 ? (c.r ^ s) : (c.r - s + n) % n;
    VertexId sv = c.b.Send(c.At(src, to, c.count), block, to, Deps({prev}));
    VertexId got = c.b.Recv(c.At(c.recv, from, c.count), block, from, Deps({prev}));
    c.b.Note(sv, absl::StrFormat("step %d", s));
    c.b.Note(got, absl::StrFormat("step %d", s));
    if (s + 1 < n) prev = c.b.Fence({sv, got});  // one step at a time; the last needs no fence
  }
  return absl::OkStatus();
}

// Linear (Open MPI's basic linear): every send and receive posted at once;
// one round (see AllreduceLinear).
absl::Status AlltoallLinear(Ctx& c) {
  const int n = c.n;
  const uint64_t block = c.Bytes(c.count);
  VertexId saved = -1;
  const Buf src = AlltoallInput(c, &saved);
  for (int s = 1; s < n; ++s) {
    const int to = (c.r + s) % n;
    const int from = (c.r - s + n) % n;
    c.b.Send(c.At(src, to, c.count), block, to, Deps({saved}));
    c.b.Recv(c.At(c.recv, from, c.count), block, from, Deps({saved}));
  }
  return absl::OkStatus();
}

// Star: every rank sends its n blocks to rank 0 as row r of an n x n
// matrix; rank 0 transposes the matrix with one pack (a strided type that
// walks it column by column) and sends each rank its column, n blocks,
// straight into its receive buffer (see BarrierStar). Rank 0's own column
// is copied last. (Sending each rank the whole matrix instead, for it to
// take its column, is slower: cartage-bench alltoall.)
absl::Status AlltoallStar(Ctx& c) {
  const int n = c.n;
  const uint64_t block = c.Bytes(c.count);
  const uint64_t row = block * static_cast<uint64_t>(n);
  const Buf src = c.in_place ? c.recv : c.send;
  if (n == 1) return OneRank(c, block);
  if (c.r != 0) {
    const VertexId sent = c.b.Send(src, row, 0);
    // In place the column lands where the row leaves from: after it left.
    c.b.Recv(c.recv, row, 0, Deps({c.in_place ? sent : -1}));
    return absl::OkStatus();
  }
  const Datatype byte = Datatype::Basic(datatype::BasicType::kByte);
  const auto b = static_cast<int64_t>(block);
  CARTAGE_ASSIGN_OR_RETURN(const Datatype column, Datatype::Vector(n, b, static_cast<int64_t>(row), byte));
  CARTAGE_ASSIGN_OR_RETURN(const Datatype columns, Datatype::Hvector(n, 1, b, column));
  const Buf m = c.b.Temp(row * static_cast<uint64_t>(n));   // row i: rank i's blocks
  const Buf mt = c.b.Temp(row * static_cast<uint64_t>(n));  // row j: the blocks for rank j
  std::vector<VertexId> have = {c.b.Copy(src, m, row)};
  for (int i = 1; i < n; ++i) have.push_back(c.b.Recv(m + row * static_cast<uint64_t>(i), row, i));
  const VertexId packed = c.b.Pack(m, 1, columns, mt, have);
  for (int j = 1; j < n; ++j) c.b.Send(mt + row * static_cast<uint64_t>(j), row, j, {packed});
  c.b.Copy(mt, c.recv, row, {packed});
  return absl::OkStatus();
}

// Star: every rank's block to rank 0, which sends all n blocks back to each
// (see BarrierStar). In place, a rank's block comes back into the place it
// left from unchanged, and only after rank 0 has all of it.
absl::Status AllgatherStar(Ctx& c) {
  const int n = c.n;
  const uint64_t block = c.Bytes(c.count);
  const Buf mine = c.At(c.recv, c.r, c.count);
  const Buf own = c.in_place ? mine : c.send;
  if (n == 1) return OneRank(c, block);
  if (c.r != 0) {
    c.b.Send(own, block, 0);
    c.b.Recv(c.recv, block * static_cast<uint64_t>(n), 0);
    return absl::OkStatus();
  }
  std::vector<VertexId> have;
  if (!c.in_place) have.push_back(c.b.Copy(c.send, mine, block));
  for (int i = 1; i < n; ++i) have.push_back(c.b.Recv(c.At(c.recv, i, c.count), block, i));
  const VertexId all = c.b.Fence(have);
  for (int i = 1; i < n; ++i) c.b.Send(c.recv, block * static_cast<uint64_t>(n), i, {all});
  return absl::OkStatus();
}

// Rabenseifner: a recursive-halving reduce-scatter, then a recursive-
// doubling allgather of the reduced parts; 2 log2 n steps, each rank sending
// about twice the buffer in all. Any n (folded); commutative operators only.
// Not in place, the input is never copied into recv: the first step that
// reads it reads the send buffer, and the partner's half arrives in recv.
absl::Status AllreduceRabenseifner(Ctx& c) {
  const uint64_t bytes = c.Bytes(c.count);
  if (c.n == 1) return OneRank(c, bytes);
  const Buf* input = c.in_place ? nullptr : &c.send;
  const Buf tmp = c.b.Temp(bytes);
  const Fold f = MakeFold(c.r, c.n);
  std::vector<VertexId> v = FoldIn(c, f, c.recv, tmp, c.count, {}, input);
  if (f.newrank >= 0) {
    std::vector<int64_t> start(static_cast<std::size_t>(f.pof2) + 1);
    for (int i = 0; i <= f.pof2; ++i) start[static_cast<std::size_t>(i)] = PartStart(c.count, i, f.pof2);
    v = HalvingReduceScatter(c, f, c.recv, tmp, start, v, c.r < 2 * f.rem ? nullptr : input);
    v = DoublingAllgather(c, f, c.recv, start, v, v);
  }
  if (c.r < 2 * f.rem) {  // the pairs: the odd one hands the result back
    VertexId x = c.r % 2 == 1 ? c.b.Send(c.recv, bytes, c.r - 1, v) : c.b.Recv(c.recv, bytes, c.r + 1, v);
    c.b.Note(x, "unfold");
  }
  return absl::OkStatus();
}

// Recursive doubling: log2 n exchanges, each of everything gathered so far.
// Any n: a pair's even rank gives its block to the odd one first and gets
// the whole result from it last.
// Not in place, a rank outside the fold sends its block from the send
// buffer in the first round, beside the copy into recv.
absl::Status AllgatherRecursiveDoubling(Ctx& c) {
  const uint64_t block = c.Bytes(c.count);
  std::vector<VertexId> v;
  if (!c.in_place) v.push_back(c.b.Copy(c.send, c.At(c.recv, c.r, c.count), block));
  if (c.n == 1) return absl::OkStatus();
  const Fold f = MakeFold(c.r, c.n);
  std::vector<int64_t> start(static_cast<std::size_t>(f.pof2) + 1);
  for (int i = 0; i <= f.pof2; ++i) start[static_cast<std::size_t>(i)] = int64_t{f.First(i)} * c.count;
  if (c.r >= 2 * f.rem && !c.in_place) {  // this rank's block is its own new rank's: send it from the input
    DoublingAllgather(c, f, c.recv, start, v, {}, &c.send);
    return absl::OkStatus();
  }
  const uint64_t all = block * static_cast<uint64_t>(c.n);
  if (f.newrank < 0) {
    VertexId s = c.b.Send(c.At(c.recv, c.r, c.count), block, c.r + 1, v);
    c.b.Note(s, "fold");
    VertexId got = c.b.Recv(c.recv, all, c.r + 1, {s});
    c.b.Note(got, "unfold");
    return absl::OkStatus();
  }
  if (c.r < 2 * f.rem) {
    VertexId got = c.b.Recv(c.At(c.recv, c.r - 1, c.count), block, c.r - 1);
    c.b.Note(got, "fold");
    v.push_back(got);
  }
  v = DoublingAllgather(c, f, c.recv, start, v, v);
  if (c.r < 2 * f.rem) c.b.Note(c.b.Send(c.recv, all, c.r - 1, v), "unfold");
  return absl::OkStatus();
}

// Bruck: rotate the blocks up by r; in round k send the blocks whose index
// has bit k to rank r + k and take the same from r - k (ceil(log2 n) rounds
// of about n/2 blocks, packed by copies); rotate back. For small blocks
// with many ranks.
absl::Status AlltoallBruck(Ctx& c) {
  const int n = c.n;
  const uint64_t block = c.Bytes(c.count);
  const Buf src = c.in_place ? c.recv : c.send;
  const Buf tmp = c.b.Temp(block * static_cast<uint64_t>(n));
  std::vector<VertexId> have;
  for (int i = 0; i < n; ++i) have.push_back(c.b.Copy(c.At(src, (c.r + i) % n, c.count), c.At(tmp, i, c.count), block));
  for (int k = 1; k < n; k <<= 1) {
    std::vector<int> idx;
    for (int i = 0; i < n; ++i) {
      if ((i & k) != 0) idx.push_back(i);
    }
    const uint64_t bytes = block * idx.size();
    const Buf out = c.b.Temp(bytes);
    const Buf in = c.b.Temp(bytes);
    std::vector<VertexId> packed;
    for (std::size_t j = 0; j < idx.size(); ++j) {
      packed.push_back(c.b.Copy(c.At(tmp, idx[j], c.count), out + block * j, block, have));
    }
    VertexId s = c.b.Send(out, bytes, (c.r + k) % n, packed);
    VertexId got = c.b.Recv(in, bytes, (c.r - k + n) % n);
    c.b.Note(s, absl::StrFormat("round %d", k));
    c.b.Note(got, absl::StrFormat("round %d", k));
    std::vector<VertexId> after = packed;
    after.push_back(got);
    have.clear();
    for (std::size_t j = 0; j < idx.size(); ++j) {
      have.push_back(c.b.Copy(in + block * j, c.At(tmp, idx[j], c.count), block, after));
    }
    have.push_back(s);
  }
  // tmp block i came from rank r - i.
  for (int i = 0; i < n; ++i) c.b.Copy(c.At(tmp, i, c.count), c.At(c.recv, (c.r - i + n) % n, c.count), block, have);
  return absl::OkStatus();
}

// ---- the v forms ---------------------------------------------------------------

// Ring allgatherv: step s passes block r - s to the right and takes block
// r - s - 1 from the left, each of its own size. Not in place, the first
// step sends this rank's block from the send buffer, beside its copy into
// recv (the ring never sends it again).
absl::Status AllgathervRing(Ctx& c) {
  const int n = c.n;
  auto blk = [&](int i) -> const Block& { return c.rblk[static_cast<std::size_t>(((i % n) + n) % n)]; };
  if (!c.in_place) c.b.Copy(c.send, blk(c.r).at, c.Bytes(blk(c.r)));
  VertexId prev = -1;
  for (int s = 0; s < n - 1; ++s) {
    const Buf from = s == 0 && !c.in_place ? c.send : blk(c.r - s).at;
    c.b.Send(from, c.Bytes(blk(c.r - s)), (c.r + 1) % n, Deps({prev}));
    prev = c.b.Recv(blk(c.r - s - 1).at, c.Bytes(blk(c.r - s - 1)), (c.r - 1 + n) % n);
  }
  return absl::OkStatus();
}

// Pairwise alltoallv: as AlltoallPairwise, with per-rank blocks.
absl::Status AlltoallvPairwise(Ctx& c) {
  const int n = c.n;
  std::vector<Block> src = c.sblk;
  VertexId prev = -1;
  const Block& own_in = c.sblk[static_cast<std::size_t>(c.r)];
  const Block& own_out = c.rblk[static_cast<std::size_t>(c.r)];
  if (c.in_place) {  // the data to send is in recv, which the receives overwrite: copy it out first
    int64_t total = 0;
    for (const Block& b : c.rblk) total += b.elems;
    const Buf tmp = c.b.Temp(c.Bytes(total));
    std::vector<VertexId> copies;
    int64_t at = 0;
    for (std::size_t i = 0; i < src.size(); ++i) {
      src[i].at = tmp + c.Bytes(at);
      if (i != static_cast<std::size_t>(c.r)) copies.push_back(c.b.Copy(c.rblk[i].at, src[i].at, c.Bytes(c.rblk[i])));
      at += c.rblk[i].elems;
    }
    prev = copies.empty() ? -1 : c.b.Fence(copies);
  } else {  // BuildCollective checked that the two counts agree
    prev = c.b.Copy(own_in.at, own_out.at, c.Bytes(own_in));
  }
  const bool pof2 = (n & (n - 1)) == 0;
  for (int s = 1; s < n; ++s) {
    const int to = pof2 ? (c.r ^ s) : (c.r + s) % n;
    const int from = pof2 ? (c.r ^ s) : (c.r - s + n) % n;
    const Block& out = src[static_cast<std::size_t>(to)];
    const Block& in = c.rblk[static_cast<std::size_t>(from)];
    VertexId sv = c.b.Send(out.at, c.Bytes(out), to, Deps({prev}));
    VertexId got = c.b.Recv(in.at, c.Bytes(in), from, Deps({prev}));
    c.b.Note(sv, absl::StrFormat("step %d", s));
    c.b.Note(got, absl::StrFormat("step %d", s));
    prev = c.b.Fence({sv, got});
  }
  return absl::OkStatus();
}

}  // namespace cartage::alg
