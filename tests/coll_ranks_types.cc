// Collectives whose two sides differ in type (CollectiveCall::recv_type)
// and alltoallv with a type per rank (alltoallw), every algorithm of every
// collective that moves blocks: each block's integers must land exactly
// where the receive side's layout puts them, and the gaps of a
// non-contiguous layout keep their sentinel.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/coll_ranks.h"

namespace cartage::test::coll {
namespace {

constexpr int32_t kGap = 0x7eadbeef;

// A side's layout of a block of `pairs` pairs of integers: contiguous
// elements of `ints` integers each (1 or 2), or one element a pair whose
// two integers lie at offsets 0 and 2 (a vector: extent 3 integers, the
// middle one a gap).
struct PairLayout {
  bool gapped;
  int ints;  // contiguous layouts: integers an element
  Datatype type;
  int64_t Elems(int64_t pairs) const { return gapped ? pairs : 2 * pairs / ints; }
  // Where integer m of a block starting at element `at` lies, in integers.
  int64_t Slot(int64_t at, int64_t m) const { return gapped ? 3 * (at + m / 2) + 2 * (m % 2) : at * ints + m; }
};

int32_t Value(int from, int to, int64_t m) { return from * 1000000 + to * 10000 + static_cast<int32_t>(m); }

// One block of a buffer: `pairs` pairs from rank `from` meant for `to`, at
// element `at` of `lay` (or, alltoallw, at integer `at` when `bytes_at`).
struct PairBlock {
  const PairLayout* lay;
  int64_t at;
  int64_t pairs;
  int from, to;
  bool bytes_at = false;
  int64_t First() const { return bytes_at ? at : lay->Slot(at, 0); }
  int64_t SlotOf(int64_t m) const { return bytes_at ? at + lay->Slot(0, m) : lay->Slot(at, m); }
  int64_t End() const { return pairs == 0 ? 0 : SlotOf(2 * pairs - 1) + 1; }
};

std::vector<int32_t> Fill(const std::vector<PairBlock>& blocks, bool values) {
  int64_t span = 1;
  for (const PairBlock& b : blocks) span = std::max(span, b.End());
  std::vector<int32_t> buf(static_cast<std::size_t>(span), kGap);
  for (const PairBlock& b : blocks) {
    for (int64_t m = 0; values && m < 2 * b.pairs; ++m) buf[static_cast<std::size_t>(b.SlotOf(m))] = Value(b.from, b.to, m);
  }
  return buf;
}

// The v forms' blocks: some empty.
int64_t Pairs(int64_t k, int a, int b) { return (a + b) % 3 == 1 ? 0 : k + (a + b) % 3; }

void Run(const Comm& w, Collective kind, const std::string& algo, const PairLayout& s, const PairLayout& r, int64_t k,
         bool nonblocking) {
  const int n = w.size();
  const int me = w.rank();
  const int root = 1 % n;
  const bool at_root = me == root;
  const bool v = Varying(kind);
  const bool gathers = kind == Collective::kGather || kind == Collective::kGatherv;
  const bool all_gathers = kind == Collective::kAllgather || kind == Collective::kAllgatherv;
  const bool scatters = kind == Collective::kScatter || kind == Collective::kScatterv;
  // What each rank sends to `to` (gathers: one block for everyone, `to` 99).
  auto pairs = [&](int from, int to) {
    if (!v) return k;
    if (kind == Collective::kAlltoallv) return Pairs(k, from, to);
    return Pairs(k, scatters ? to : from, 0);
  };
  std::vector<PairBlock> send, recv;
  std::vector<int64_t> send_counts, send_displs, recv_counts, recv_displs;
  int64_t at = 0;
  const bool sends = !(scatters && !at_root);
  const bool receives = !(gathers && !at_root);
  const int send_blocks = sends ? (gathers || all_gathers ? 1 : n) : 0;
  for (int j = 0; j < send_blocks; ++j) {
    const int to = gathers || all_gathers ? 99 : j;
    const int64_t p = pairs(me, j);
    send.push_back({&s, at, p, me, to});
    send_counts.push_back(s.Elems(p));
    send_displs.push_back(at);
    at += s.Elems(p) + (v ? 1 : 0);  // the v forms leave an element between blocks
  }
  at = 0;
  const int recv_blocks = receives ? (scatters ? 1 : n) : 0;
  for (int i = 0; i < recv_blocks; ++i) {
    const int from = scatters ? root : i;
    const int to = gathers || all_gathers ? 99 : me;
    const int64_t p = pairs(from, me);
    recv.push_back({&r, at, p, from, to});
    recv_counts.push_back(r.Elems(p));
    recv_displs.push_back(at);
    at += r.Elems(p) + (v ? 1 : 0);
  }
  std::vector<int32_t> in = Fill(send, true);
  std::vector<int32_t> out = Fill(recv, false);
  const std::vector<int32_t> want = Fill(recv, true);
  CollectiveCall call;
  call.kind = kind;
  call.algorithm = algo;
  call.root = root;
  call.send = in.data();
  call.recv = out.data();
  call.type = s.type;
  call.recv_type = r.type;
  call.count = s.Elems(k);
  call.recv_count = r.Elems(k);
  if (kind == Collective::kGatherv || kind == Collective::kAllgatherv) call.count = send_counts[0];
  if (kind == Collective::kScatterv) call.count = recv_counts[0];
  if (v) {
    if (kind != Collective::kGatherv && kind != Collective::kAllgatherv && sends) {
      call.send_counts = send_counts;
      call.send_displs = send_displs;
    }
    if (kind != Collective::kScatterv && receives) {
      call.recv_counts = recv_counts;
      call.recv_displs = recv_displs;
    }
  }
  const std::string what = absl::StrFormat("%s/%s %s -> %s, %d pairs%s", CollectiveName(kind), algo,
                                           s.type.name(), r.type.name(), k, nonblocking ? " nonblocking" : "");
  if (nonblocking) {
    Request req;
    KIT_OK(StartCollective(w, call, &req));
    KIT_OK(req.Wait());
  } else {
    KIT_OK(RunCollective(w, call));
  }
  for (std::size_t x = 0; x < want.size(); ++x) {
    KIT_EXPECT(out[x] == want[x], "%s: integer %d of the receive buffer is %d, expected %d", what, x, out[x], want[x]);
  }
}

// Alltoallw: the block to rank j laid out as plain integers or pairs by
// (me + j) parity, received by the other parity, at byte displacements.
void RunW(const Comm& w, const PairLayout& a, const PairLayout& b, int64_t k) {
  const int n = w.size();
  const int me = w.rank();
  std::vector<PairBlock> send, recv;
  std::vector<int64_t> send_counts, send_displs, recv_counts, recv_displs;
  std::vector<Datatype> send_types, recv_types;
  int64_t at = 1;  // in integers: a gap first
  for (int j = 0; j < n; ++j) {
    const PairLayout& lay = (me + j) % 2 == 0 ? a : b;
    const int64_t p = Pairs(k, me, j);
    send.push_back({&lay, at, p, me, j, true});
    send_counts.push_back(lay.Elems(p));
    send_displs.push_back(at * 4);
    send_types.push_back(lay.type);
    at = std::max(at, send.back().End()) + 2;
  }
  at = 3;
  for (int i = n; i-- > 0;) {  // in reverse rank order
    const PairLayout& lay = (me + i) % 2 == 0 ? b : a;
    const int64_t p = Pairs(k, i, me);
    recv.insert(recv.begin(), {&lay, at, p, i, me, true});
    at = std::max(at, recv.front().End()) + 1;
  }
  for (const PairBlock& blk : recv) {
    recv_counts.push_back(blk.lay->Elems(blk.pairs));
    recv_displs.push_back(blk.at * 4);
    recv_types.push_back(blk.lay->type);
  }
  std::vector<int32_t> in = Fill(send, true);
  std::vector<int32_t> out = Fill(recv, false);
  const std::vector<int32_t> want = Fill(recv, true);
  KIT_OK(Alltoallw(w, in.data(), send_counts, send_displs, send_types, out.data(), recv_counts, recv_displs,
                   recv_types));
  for (std::size_t x = 0; x < want.size(); ++x) {
    KIT_EXPECT(out[x] == want[x], "alltoallw, %d pairs: integer %d of the receive buffer is %d, expected %d", k, x,
               out[x], want[x]);
  }
}

}  // namespace

void TwoTypes(const Comm& w) {
  const Datatype i32 = Datatype::Basic(BasicType::kInt32);
  const PairLayout ints{false, 1, i32};
  const PairLayout pairs{true, 0, *Datatype::Vector(2, 1, 2, i32)};
  const PairLayout pair_block{false, 2, *Datatype::Contiguous(2, i32)};  // contiguous, but not the same type
  const struct {
    const PairLayout* send;
    const PairLayout* recv;
  } sides[] = {{&ints, &pairs}, {&pairs, &ints}, {&ints, &pair_block}};
  for (const AlgorithmInfo& a : cartage::Algorithms()) {
    const Collective k = a.collective;
    const bool moves_blocks = k == Collective::kGather || k == Collective::kScatter || k == Collective::kAllgather ||
                              k == Collective::kAlltoall || k == Collective::kGatherv || k == Collective::kScatterv ||
                              k == Collective::kAllgatherv || k == Collective::kAlltoallv;
    if (!moves_blocks) continue;
    for (const auto& side : sides) {
      for (int64_t pairs_per_block : {int64_t{1}, int64_t{7}, int64_t{3000}}) {
        Run(w, k, a.name, *side.send, *side.recv, pairs_per_block, /*nonblocking=*/false);
      }
      Run(w, k, a.name, *side.send, *side.recv, 5, /*nonblocking=*/true);
    }
  }
  for (int64_t pairs_per_block : {int64_t{1}, int64_t{6}, int64_t{2000}}) RunW(w, ints, pairs, pairs_per_block);
}

}  // namespace cartage::test::coll
