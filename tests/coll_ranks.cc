// The rank side of the collective tests (tests/collectives_test.cc runs each
// mode through `cartage run` at several rank counts). Every result is
// compared byte for byte with a serial reference computed from the inputs,
// which every rank can generate for every other rank; the gaps of
// non-contiguous layouts must keep their sentinel bytes. Rank 0 prints
// "PASS <mode>" when the whole job agrees.
//
// usage: coll_ranks algorithms [COLLECTIVE,...]|persistent|concurrent|selection|xfer|burst|reinit|faults sizes|dead|all
// COLL_RANKS_TRACE=1 prints each call before it runs (to find the one that hangs or crashes).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "datatype/segment_walk.h"
#include "cartage/cartage.h"
#include "tests/rank_check.h"
#include "cartage/collectives.h"
#include "cartage/engine.h"
#include "cartage/xfer.h"

namespace {

using cartage::BasicType;
using cartage::Collective;
using cartage::CollectiveCall;
using cartage::Comm;
using cartage::Datatype;
using cartage::Op;
using cartage::OpKind;
using cartage::Request;
using Bytes = std::vector<unsigned char>;

using cartage::test::g_rank;

// ---- element types, their values and their reference reductions ----------------

// The affine map x -> a x + b (mod P), composed: (f op g)(x) = f(g(x)).
// Associative, not commutative.
constexpr int64_t kP = 1000003;
struct Affine {
  int32_t a, b;
};
Affine Compose(Affine f, Affine g) {
  return {static_cast<int32_t>(int64_t{f.a} * g.a % kP), static_cast<int32_t>((int64_t{f.a} * g.b + f.b) % kP)};
}
void AffineOp(const void* in, void* inout, int64_t count, const Datatype&, void*) {
  const auto* x = static_cast<const Affine*>(in);
  auto* y = static_cast<Affine*>(inout);
  for (int64_t i = 0; i < count; ++i) y[i] = Compose(x[i], y[i]);
}

struct TypeCase {
  const char* name;
  Datatype type;
  std::optional<Op> op;  // for reductions
  // The packed bytes of element `idx` of rank `rank`'s input.
  std::function<void(int rank, int64_t idx, unsigned char* out)> gen;
  // inout = in op inout, one packed element.
  std::function<void(const unsigned char* in, unsigned char* inout)> ref;
};

std::vector<TypeCase> Types() {
  std::vector<TypeCase> t;
  t.push_back({"int32/sum", Datatype::Basic(BasicType::kInt32), Op(OpKind::kSum),
               [](int r, int64_t i, unsigned char* o) {
                 const int32_t v = static_cast<int32_t>((r * 131 + i * 7) % 1000);
                 std::memcpy(o, &v, 4);
               },
               [](const unsigned char* in, unsigned char* io) {
                 int32_t a, b;
                 std::memcpy(&a, in, 4);
                 std::memcpy(&b, io, 4);
                 b += a;
                 std::memcpy(io, &b, 4);
               }});
  t.push_back({"double/max", Datatype::Basic(BasicType::kDouble), Op(OpKind::kMax),
               [](int r, int64_t i, unsigned char* o) {
                 const double v = static_cast<double>((r * 7919 + i * 104729) % 10007) * 0.5;
                 std::memcpy(o, &v, 8);
               },
               [](const unsigned char* in, unsigned char* io) {
                 double a, b;
                 std::memcpy(&a, in, 8);
                 std::memcpy(&b, io, 8);
                 if (a > b) std::memcpy(io, &a, 8);
               }});
  t.push_back({"affine/user-noncommutative", *Datatype::Contiguous(2, Datatype::Basic(BasicType::kInt32)),
               Op::User(&AffineOp, /*commutative=*/false),
               [](int r, int64_t i, unsigned char* o) {
                 const Affine f{static_cast<int32_t>(2 + (r * 37 + i * 11) % 97),
                                static_cast<int32_t>((r * 101 + i * 13) % 991)};
                 std::memcpy(o, &f, 8);
               },
               [](const unsigned char* in, unsigned char* io) {
                 Affine f, g;
                 std::memcpy(&f, in, 8);
                 std::memcpy(&g, io, 8);
                 g = Compose(f, g);
                 std::memcpy(io, &g, 8);
               }});
  // Two int32 three apart: a non-contiguous element (the gap must survive).
  t.push_back({"strided-int32/sum", *Datatype::Vector(2, 1, 2, Datatype::Basic(BasicType::kInt32)),
               Op(OpKind::kSum),
               [](int r, int64_t i, unsigned char* o) {
                 const int32_t v[2] = {static_cast<int32_t>((r * 17 + i) % 500),
                                       static_cast<int32_t>((r * 5 + i * 3) % 700)};
                 std::memcpy(o, v, 8);
               },
               [](const unsigned char* in, unsigned char* io) {
                 int32_t a[2], b[2];
                 std::memcpy(a, in, 8);
                 std::memcpy(b, io, 8);
                 b[0] += a[0];
                 b[1] += a[1];
                 std::memcpy(io, b, 8);
               }});
  return t;
}

// `elems` packed elements of rank `rank`, starting at global index `base`.
Bytes Packed(const TypeCase& t, int rank, int64_t base, int64_t elems) {
  const auto es = static_cast<std::size_t>(t.type.size());
  Bytes out(static_cast<std::size_t>(elems) * es);
  for (int64_t i = 0; i < elems; ++i) t.gen(rank, base + i, &out[static_cast<std::size_t>(i) * es]);
  return out;
}

// The reduction of ranks' elements [base, base + elems) over `ranks`, in order.
Bytes Reduced(const TypeCase& t, const std::vector<int>& ranks, int64_t base, int64_t elems) {
  const auto es = static_cast<std::size_t>(t.type.size());
  Bytes out = Packed(t, ranks.at(0), base, elems);
  for (std::size_t k = 1; k < ranks.size(); ++k) {
    Bytes v = Packed(t, ranks[k], base, elems);
    for (int64_t i = 0; i < elems; ++i) {  // out = out op v
      unsigned char* slot = &v[static_cast<std::size_t>(i) * es];
      t.ref(&out[static_cast<std::size_t>(i) * es], slot);
      std::memcpy(&out[static_cast<std::size_t>(i) * es], slot, es);
    }
  }
  return out;
}

// Blocks of packed elements at displacements (in extents): a buffer's contents.
struct Piece {
  int64_t displ;
  Bytes packed;
};
constexpr unsigned char kSentinel = 0xAB;  // gaps, which must survive
constexpr unsigned char kGarbage = 0x5A;   // what a collective must overwrite

// The layout of `span` elements: sentinel bytes, with the pieces unpacked in.
Bytes Layout(const TypeCase& t, const std::vector<Piece>& pieces, int64_t span) {
  const int64_t bytes = span == 0 ? 0 : (span - 1) * t.type.extent() + t.type.true_extent();
  Bytes out(static_cast<std::size_t>(std::max<int64_t>(bytes, 1)), kSentinel);
  for (const Piece& p : pieces) {
    const int64_t elems = static_cast<int64_t>(p.packed.size()) / t.type.size();
    if (elems == 0) continue;
    cartage::datatype::Unpack(p.packed.data(), elems, t.type, 0, elems * t.type.size(),
                         out.data() - t.type.true_lb() + p.displ * t.type.extent());
  }
  return out;
}

// What one rank's buffers hold before and after a call.
struct Plan {
  std::vector<Piece> send;
  int64_t send_span = 0;
  std::vector<Piece> before;  // the receive buffer before (in place: the input)
  std::vector<Piece> after;   // and after
  int64_t recv_span = 0;
  int64_t compare_span = -1;  // >= 0: only these leading elements are defined afterwards
  bool recv_in_place = false;  // scatter(v)'s root: kInPlace as the receive buffer
};

// The v forms' per-rank counts (some zero: c = 1 gives 0, 1, 1, 0, ...) and
// displacements: blocks in reverse rank order, one element apart.
int64_t VCount(int64_t c, int i) { return c * (i % 3 + 1) / 2; }
std::vector<int64_t> ReverseDispls(const std::vector<int64_t>& counts, int64_t* span) {
  const std::size_t n = counts.size();
  std::vector<int64_t> d(n);
  int64_t at = 1;
  for (std::size_t i = n; i-- > 0;) {
    d[i] = at;
    at += counts[i] + 1;
  }
  *span = at;
  return d;
}
Bytes Filler(const TypeCase& t, int64_t elems) {
  return Bytes(static_cast<std::size_t>(elems * t.type.size()), kGarbage);
}

// The plan of `call` (counts filled in here for the v forms) on rank r of n.
Plan MakePlan(const TypeCase& t, CollectiveCall& call, int r, int n, bool in_place) {
  const int64_t c = call.count;
  const int root = call.root;
  const bool at_root = r == root;
  Plan p;
  std::vector<int> all(static_cast<std::size_t>(n));
  for (int q = 0; q < n; ++q) all[static_cast<std::size_t>(q)] = q;
  auto whole = [&](std::vector<Piece>* side, int64_t* span, Bytes data) {
    *span = static_cast<int64_t>(data.size()) / t.type.size();
    side->push_back({0, std::move(data)});
  };
  // Per-rank blocks at the reverse displacements; `data(i)` is block i.
  auto blocks = [&](std::vector<Piece>* side, int64_t* span, const std::vector<int64_t>& counts,
                    std::vector<int64_t>* displs, const std::function<Bytes(int)>& data) {
    *displs = ReverseDispls(counts, span);
    for (int i = 0; i < n; ++i) side->push_back({(*displs)[static_cast<std::size_t>(i)], data(i)});
  };
  switch (call.kind) {
    case Collective::kBcast:
      whole(&p.after, &p.recv_span, Packed(t, root, 0, c));
      p.before.push_back({0, at_root ? Packed(t, root, 0, c) : Filler(t, c)});
      break;
    case Collective::kReduce:
    case Collective::kAllreduce:
    case Collective::kScan:
    case Collective::kExscan: {
      whole(&p.send, &p.send_span, Packed(t, r, 0, c));
      std::vector<int> upto(all.begin(), all.begin() + (call.kind == Collective::kScan ? r + 1 : call.kind == Collective::kExscan ? r : n));
      const bool result = call.kind == Collective::kReduce ? at_root : !upto.empty();
      const bool has_recv = call.kind != Collective::kReduce || at_root;
      if (!has_recv) break;
      p.recv_span = c;
      p.before.push_back({0, in_place ? Packed(t, r, 0, c) : Filler(t, c)});
      p.after.push_back({0, result ? Reduced(t, upto, 0, c) : p.before[0].packed});  // exscan: rank 0's untouched
      break;
    }
    case Collective::kGather:
    case Collective::kAllgather:
      whole(&p.send, &p.send_span, Packed(t, r, 0, c));
      if (call.kind == Collective::kGather && !at_root) break;
      p.recv_span = c * n;
      for (int q = 0; q < n; ++q) {
        p.after.push_back({q * c, Packed(t, q, 0, c)});
        p.before.push_back({q * c, in_place && q == r ? Packed(t, q, 0, c) : Filler(t, c)});
      }
      break;
    case Collective::kScatter:
      if (at_root) {
        p.send_span = c * n;
        for (int i = 0; i < n; ++i) p.send.push_back({i * c, Packed(t, root, i * c, c)});
      }
      p.recv_in_place = at_root && in_place;
      if (p.recv_in_place) break;
      p.recv_span = c;
      p.before.push_back({0, Filler(t, c)});
      p.after.push_back({0, Packed(t, root, r * c, c)});
      break;
    case Collective::kAlltoall:
      p.send_span = p.recv_span = c * n;
      for (int i = 0; i < n; ++i) {
        p.send.push_back({i * c, Packed(t, r, i * c, c)});
        p.before.push_back({i * c, in_place ? Packed(t, r, i * c, c) : Filler(t, c)});
        p.after.push_back({i * c, Packed(t, i, r * c, c)});
      }
      break;
    case Collective::kGatherv:
    case Collective::kAllgatherv: {
      std::vector<int64_t> counts(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) counts[static_cast<std::size_t>(i)] = VCount(c, i);
      call.count = VCount(c, r);
      whole(&p.send, &p.send_span, Packed(t, r, 0, call.count));
      if (call.kind == Collective::kGatherv && !at_root) {
        call.recv_counts.assign(static_cast<std::size_t>(n), -7);  // insignificant off the root: garbage
        break;
      }
      call.recv_counts = counts;
      blocks(&p.after, &p.recv_span, counts, &call.recv_displs, [&](int q) { return Packed(t, q, 0, VCount(c, q)); });
      blocks(&p.before, &p.recv_span, counts, &call.recv_displs,
             [&](int q) { return in_place && q == r ? Packed(t, q, 0, VCount(c, q)) : Filler(t, VCount(c, q)); });
      break;
    }
    case Collective::kScatterv: {
      std::vector<int64_t> counts(static_cast<std::size_t>(n)), offs(static_cast<std::size_t>(n) + 1, 0);
      for (int i = 0; i < n; ++i) {
        counts[static_cast<std::size_t>(i)] = VCount(c, i);
        offs[static_cast<std::size_t>(i) + 1] = offs[static_cast<std::size_t>(i)] + VCount(c, i);
      }
      call.count = VCount(c, r);
      if (at_root) {
        call.send_counts = counts;
        blocks(&p.send, &p.send_span, counts, &call.send_displs,
               [&](int i) { return Packed(t, root, offs[static_cast<std::size_t>(i)], VCount(c, i)); });
      }
      p.recv_in_place = at_root && in_place;
      if (p.recv_in_place) break;
      p.recv_span = call.count;
      p.before.push_back({0, Filler(t, call.count)});
      p.after.push_back({0, Packed(t, root, offs[static_cast<std::size_t>(r)], call.count)});
      break;
    }
    case Collective::kAlltoallv: {
      // Rank q sends rank i VCount(c, q + 2i) elements (in place: VCount(c, q + i), as MPI needs the
      // counts to match both ways), from its elements [i * 2c, ...).
      auto sc = [&](int q, int i) { return VCount(c, in_place ? q + i : q + 2 * i); };
      std::vector<int64_t> scounts(static_cast<std::size_t>(n)), rcounts(static_cast<std::size_t>(n));
      for (int i = 0; i < n; ++i) {
        scounts[static_cast<std::size_t>(i)] = sc(r, i);
        rcounts[static_cast<std::size_t>(i)] = sc(i, r);
      }
      call.send_counts = scounts;
      call.recv_counts = rcounts;
      blocks(&p.send, &p.send_span, scounts, &call.send_displs, [&](int i) { return Packed(t, r, i * 2 * c, sc(r, i)); });
      blocks(&p.after, &p.recv_span, rcounts, &call.recv_displs, [&](int q) { return Packed(t, q, r * 2 * c, sc(q, r)); });
      blocks(&p.before, &p.recv_span, rcounts, &call.recv_displs,
             [&](int q) { return in_place ? Packed(t, r, q * 2 * c, sc(r, q)) : Filler(t, sc(q, r)); });
      break;
    }
    case Collective::kReduceScatter:
    case Collective::kReduceScatterBlock: {
      const bool v = call.kind == Collective::kReduceScatter;
      std::vector<int64_t> counts(static_cast<std::size_t>(n)), offs(static_cast<std::size_t>(n) + 1, 0);
      for (int i = 0; i < n; ++i) {
        counts[static_cast<std::size_t>(i)] = v ? VCount(c, i) : c;
        offs[static_cast<std::size_t>(i) + 1] = offs[static_cast<std::size_t>(i)] + counts[static_cast<std::size_t>(i)];
      }
      if (v) call.recv_counts = counts;
      const int64_t total = offs[static_cast<std::size_t>(n)];
      const int64_t mine = counts[static_cast<std::size_t>(r)];
      whole(&p.send, &p.send_span, Packed(t, r, 0, total));
      p.recv_span = in_place ? total : mine;
      p.compare_span = mine;
      p.before.push_back({0, in_place ? Packed(t, r, 0, total) : Filler(t, mine)});
      p.after.push_back({0, Reduced(t, all, offs[static_cast<std::size_t>(r)], mine)});
      break;
    }
    default: break;
  }
  return p;
}

bool InPlaceAllowed(Collective k, int r, int root) {
  switch (k) {
    case Collective::kReduce:
    case Collective::kGather:
    case Collective::kGatherv:
    case Collective::kScatter:
    case Collective::kScatterv: return r == root;
    case Collective::kBarrier:
    case Collective::kBcast: return false;
    default: return true;
  }
}

// One call: builds the buffers, runs it (blocking, or nonblocking when
// `nonblocking`), compares the whole receive buffer, gaps included, with
// the reference.
void Check(const Comm& w, const TypeCase& t, CollectiveCall call, bool in_place, bool nonblocking) {
  const int r = w.rank(), n = w.size();
  const Plan p = MakePlan(t, call, r, n, in_place);
  Bytes send = Layout(t, p.send, p.send_span);
  Bytes recv = Layout(t, p.before, p.recv_span);
  const int64_t defined = p.compare_span >= 0 ? p.compare_span : p.recv_span;
  const Bytes want = Layout(t, p.after, defined);
  const bool scatter = call.kind == Collective::kScatter || call.kind == Collective::kScatterv;
  call.send = in_place && !scatter ? cartage::kInPlace : send.data() - t.type.true_lb();
  call.recv = p.recv_in_place ? const_cast<void*>(cartage::kInPlace) : recv.data() - t.type.true_lb();
  const std::string what = absl::StrFormat("%s/%s %s count %d root %d%s%s", cartage::CollectiveName(call.kind),
                                           call.algorithm, t.name, call.count, call.root,
                                           in_place ? " in place" : "", nonblocking ? " nonblocking" : "");
  if (std::getenv("COLL_RANKS_TRACE") != nullptr) std::fprintf(stderr, "rank %d: %s\n", r, what.c_str());
  if (nonblocking) {
    Request req;
    OK(cartage::StartCollective(w, call, &req));
    absl::Status s = req.Wait();
    EXPECT(s.ok(), "%s: %s", what, s.ToString());
  } else {
    absl::Status s = cartage::RunCollective(w, call);
    EXPECT(s.ok(), "%s: %s", what, s.ToString());
  }
  if (defined == 0) return;
  EXPECT(recv.size() >= want.size(), "%s: buffer sizes", what);
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT(recv[i] == want[i], "%s: byte %d is 0x%02x, expected 0x%02x", what, i, recv[i], want[i]);
  }
}

// Every algorithm x type x size x root x (in place or not). Optional
// argument: only the collectives named (comma-separated).
void Algorithms(const Comm& w, const std::string& only) {
  const int n = w.size();
  const std::vector<TypeCase> types = Types();
  const int64_t sizes[] = {0, 1, 37, 40009};  // 40009: not a multiple of any n here; > 64 KiB
  int calls = 0;
  for (const cartage::AlgorithmInfo& a : cartage::Algorithms()) {
    if (!only.empty() && absl::StrCat(",", only, ",").find(absl::StrCat(",", cartage::CollectiveName(a.collective), ",")) ==
                             std::string::npos) {
      continue;
    }
    for (const TypeCase& t : types) {
      const bool reduces = cartage::Reduces(a.collective);
      if (a.collective == Collective::kBarrier && &t != &types[0]) continue;
      if (!reduces && t.op.has_value() && t.op->kind() == OpKind::kUser) continue;  // one data type is enough
      if (a.commutative_only && !t.op->commutative()) continue;
      std::vector<int> roots = {0};
      if (cartage::Rooted(a.collective) && n > 1) roots.push_back(n - 1);
      for (int64_t count : sizes) {
        if (a.collective == Collective::kBarrier && count != 0) continue;
        for (int root : roots) {
          for (int mode = 0; mode < 3; ++mode) {  // blocking, nonblocking, in place (where all ranks may)
            CollectiveCall call;
            call.kind = a.collective;
            call.count = count;
            call.type = t.type;
            if (reduces) call.op = t.op;
            call.root = root;
            call.algorithm = a.name;
            bool in_place = mode == 2;
            if (in_place && !InPlaceAllowed(a.collective, w.rank(), root)) {
              // Rooted in-place: the root alone passes kInPlace.
              if (!cartage::Rooted(a.collective) || a.collective == Collective::kBcast) continue;
              in_place = false;
            }
            if (mode == 1 && count > 37) continue;  // nonblocking: the small sizes suffice
            Check(w, t, call, in_place, mode == 1);
            ++calls;
          }
        }
      }
    }
  }
  if (w.rank() == 0) std::printf("algorithms: %d calls checked on %d ranks\n", calls, n);
}

// A persistent allreduce started 1000 times, its input changing every time;
// and a user-built schedule (the DESIGN example) started as often.
void ExpectNothingLeft(const Comm& w, const char* after);

// An allreduce summing `count` elements of `type` (`alg`: empty, the
// selection table's).
CollectiveCall SumCall(const void* in, void* out, int64_t count, BasicType type, const char* alg = "") {
  CollectiveCall call;
  call.kind = Collective::kAllreduce;
  call.send = in;
  call.recv = out;
  call.count = count;
  call.type = Datatype::Basic(type);
  call.op = Op(OpKind::kSum);
  call.algorithm = alg;
  return call;
}

void Persistent(const Comm& w) {
  const int n = w.size();
  constexpr int64_t kCount = 33;
  std::vector<int32_t> in(kCount), out(kCount);
  const CollectiveCall call = SumCall(in.data(), out.data(), kCount, BasicType::kInt32);
  Request req;
  OK(cartage::InitCollective(w, call, &req));
  EXPECT(req.persistent(), "persistent");
  for (int it = 0; it < 1000; ++it) {
    for (int64_t i = 0; i < kCount; ++i) in[static_cast<std::size_t>(i)] = static_cast<int32_t>(it * 3 + w.rank() + i);
    OK(req.Start());
    OK(req.Wait());
    for (int64_t i = 0; i < kCount; ++i) {
      const int32_t want = static_cast<int32_t>(n * (it * 3 + i) + n * (n - 1) / 2);
      EXPECT(out[static_cast<std::size_t>(i)] == want, "start %d element %d: %d, expected %d", it, i,
             out[static_cast<std::size_t>(i)], want);
    }
  }
  OK(req.Free());

  // Ring step by hand: receive from the left, send to the right, add.
  const int right = (w.rank() + 1) % n, left = (w.rank() + n - 1) % n;
  std::vector<double> x(8), tmp(8);
  cartage::ScheduleBuilder b(w, "ring step");
  const cartage::Buf t = b.Temp(8 * sizeof(double));
  const auto rv = b.Recv(t, 8 * sizeof(double), left);
  const auto sv = b.Send(cartage::Buf::User(x.data(), "x"), 8 * sizeof(double), right);
  b.Reduce(t, cartage::Buf::User(x.data(), "x"), 8, Datatype::Basic(BasicType::kDouble), Op(OpKind::kSum), {rv, sv});
  auto schedule = b.Build();
  OK(schedule.status());
  for (int it = 0; it < 1000; ++it) {
    for (int i = 0; i < 8; ++i) x[static_cast<std::size_t>(i)] = w.rank() * 10 + i + it;
    OK((*schedule)->Run());
    for (int i = 0; i < 8; ++i) {
      const double want = (w.rank() * 10 + i + it) + (left * 10 + i + it);
      EXPECT(x[static_cast<std::size_t>(i)] == want, "ring step %d element %d: %g, expected %g", it, i,
             x[static_cast<std::size_t>(i)], want);
    }
  }

  // A relay down the ranks: receive a partial sum, add this rank's part,
  // copy it out, pass it on. The add and the copy run with the receive
  // (RunsWith): its completion must run both before it releases the send.
  {
    const Datatype i64 = Datatype::Basic(BasicType::kInt64);
    constexpr uint64_t kBytes = 5 * sizeof(int64_t);
    std::vector<int64_t> mine(5), sum(5);
    cartage::ScheduleBuilder rb(w, "relay");
    const cartage::Buf partial = rb.Temp(kBytes);
    const cartage::Buf m = cartage::Buf::User(mine.data(), "mine"), y = cartage::Buf::User(sum.data(), "sum");
    cartage::VertexId add = -1, last = -1;
    if (w.rank() == 0) {
      last = rb.Copy(m, y, kBytes);
    } else {
      const cartage::VertexId got = rb.Recv(partial, kBytes, w.rank() - 1);
      add = rb.Reduce(partial, m, 5, i64, Op(OpKind::kSum), {got});
      last = rb.Copy(m, y, kBytes, {add});
    }
    cartage::VertexId pass = -1;
    if (w.rank() + 1 < n) pass = rb.Send(y, kBytes, w.rank() + 1, {last});
    auto relay = rb.Build();
    OK(relay.status());
    if (w.rank() > 0) {
      EXPECT((*relay)->RunsWith(add) == 0 && (*relay)->RunsWith(last) == 0,
             "relay: the add and the copy run with the receive (vertex 0), not %d and %d", (*relay)->RunsWith(add),
             (*relay)->RunsWith(last));
      // The receive releases nothing but the send, which starts as it ends
      // (ForwardsFrom): it runs alone, as its request's car_recv, whose
      // state its fused steps show too.
      EXPECT((*relay)->RunsAlone(0), "relay: rank %d's receive does not run alone", w.rank());
      EXPECT(pass < 0 || (*relay)->ForwardsFrom(pass) == 0, "relay: rank %d's send starts as %d ends", w.rank(),
             (*relay)->ForwardsFrom(pass));
      EXPECT((*relay)->StateOf(0) == "idle" && (*relay)->StateOf(add) == "idle",
             "relay: before the first run the receive is idle, not %s", (*relay)->StateOf(0));
    }
    for (int it = 0; it < 500; ++it) {
      for (int64_t i = 0; i < 5; ++i) mine[static_cast<std::size_t>(i)] = int64_t{it} * 1000 + w.rank() * 10 + i;
      OK((*relay)->Run());
      const int64_t r1 = w.rank() + 1;
      for (int64_t i = 0; i < 5; ++i) {
        const int64_t want = r1 * (int64_t{it} * 1000 + i) + 10 * r1 * (r1 - 1) / 2;
        EXPECT(sum[static_cast<std::size_t>(i)] == want, "relay run %d element %d: %d, expected %d", it, i,
               sum[static_cast<std::size_t>(i)], want);
      }
    }
    if (w.rank() > 0) {
      EXPECT((*relay)->StateOf(0) == "done" && (*relay)->StateOf(add) == "done" && (*relay)->StateOf(last) == "done",
             "relay: after the runs the receive and its steps are done, not %s, %s, %s", (*relay)->StateOf(0),
             (*relay)->StateOf(add), (*relay)->StateOf(last));
    }
  }

  // A linear allreduce's reduces wait only for its sends and receives,
  // which wait for nothing: the reduces run last (RunsLast), as the run
  // ends, but where one's one predecessor is a receive, whose one
  // successor it is (it then runs with it), and the receives run alone.
  // 300 runs, results checked.
  if (n >= 3) {
    std::vector<int64_t> lin_in(4), lin_out(4);
    auto lin = cartage::BuildCollective(w, SumCall(lin_in.data(), lin_out.data(), 4, BasicType::kInt64, "linear"));
    OK(lin.status());
    std::vector<cartage::VertexId> reduces;
    for (std::size_t v = 0; v < (*lin)->vertices().size(); ++v) {
      const auto id = static_cast<cartage::VertexId>(v);
      if ((*lin)->vertices()[v].kind == cartage::VertexKind::kReduce) {
        reduces.push_back(id);
        EXPECT((*lin)->RunsLast(id) || (*lin)->RunsWith(id) != id,
               "allreduce/linear: reduce %d neither runs last nor with a receive", id);
      } else {
        EXPECT((*lin)->RunsAlone(id), "allreduce/linear: step %d does not run alone", id);
      }
    }
    EXPECT(static_cast<int>(reduces.size()) == n - 1 && (*lin)->StateOf(reduces.front()) == "idle",
           "allreduce/linear: %d reduces, the first %s before any run", reduces.size(),
           reduces.empty() ? "-" : (*lin)->StateOf(reduces.front()));
    for (int it = 0; it < 300; ++it) {
      for (int64_t i = 0; i < 4; ++i) lin_in[static_cast<std::size_t>(i)] = int64_t{it} * 1000 + w.rank() * 7 + i;
      OK((*lin)->Run());
      for (int64_t i = 0; i < 4; ++i) {
        const int64_t want = n * (int64_t{it} * 1000 + i) + 7 * n * (n - 1) / 2;
        EXPECT(lin_out[static_cast<std::size_t>(i)] == want, "allreduce/linear run %d element %d: %d, expected %d", it,
               i, lin_out[static_cast<std::size_t>(i)], want);
      }
    }
    for (cartage::VertexId v : reduces) {
      EXPECT((*lin)->StateOf(v) == "done", "allreduce/linear: reduce %d is %s after the runs", v, (*lin)->StateOf(v));
    }
  }

  // A step that runs last does not run when the run failed before it: rank
  // 0 sends its right neighbour half of what that rank receives. The
  // receiver's run fails naming the receive, its sum stays as it was and
  // its add shows "cancelled"; every other rank adds ("done").
  {
    int64_t mine[2] = {w.rank() + 1, 100 * (w.rank() + 1)}, sum[2] = {-1, -1};
    const Datatype i64 = Datatype::Basic(BasicType::kInt64);
    cartage::ScheduleBuilder cb(w, "closing");
    const cartage::Buf got = cb.Temp(sizeof(mine));
    const cartage::Buf m = cartage::Buf::User(mine, "mine"), y = cartage::Buf::User(sum, "sum");
    const int from = (w.rank() + n - 1) % n, to = (w.rank() + 1) % n;
    const cartage::VertexId send = cb.Send(m, w.rank() == 0 ? sizeof(int64_t) : sizeof(mine), to);
    const cartage::VertexId recv = cb.Recv(got, sizeof(mine), from);
    const cartage::VertexId copy = cb.Copy(m, y, sizeof(mine));
    const cartage::VertexId add = cb.Reduce(got, y, 2, i64, Op(OpKind::kSum), {recv, copy});
    auto closing = cb.Build();
    OK(closing.status());
    EXPECT((*closing)->RunsLast(add) && (*closing)->RunsLast(copy) && (*closing)->RunsAlone(send) &&
               (*closing)->RunsAlone(recv),
           "closing: the add and the copy run last, the send and the receive alone");
    const absl::Status st = (*closing)->Run();
    if (from == 0) {  // rank 1 (rank 0 itself with 1 rank)
      EXPECT(st.code() == absl::StatusCode::kInvalidArgument &&
                 absl::StrContains(st.message(), "closing (rank ") && absl::StrContains(st.message(), "vertex 1") &&
                 absl::StrContains(st.message(), "received 8 bytes, expected 16"),
             "closing on rank %d: %s", w.rank(), st.ToString());
      EXPECT(sum[0] == -1 && sum[1] == -1, "closing on rank %d: the sum was written (%d %d)", w.rank(), sum[0],
             sum[1]);
      EXPECT((*closing)->StateOf(copy) == "cancelled" && (*closing)->StateOf(add) == "cancelled",
             "closing: after the failed run the copy is %s, the add %s", (*closing)->StateOf(copy),
             (*closing)->StateOf(add));
    } else {
      OK(st);
      EXPECT(sum[0] == w.rank() + 1 + from + 1 && sum[1] == 100 * (w.rank() + 1 + from + 1),
             "closing on rank %d: %d %d", w.rank(), sum[0], sum[1]);
      EXPECT((*closing)->StateOf(add) == "done", "closing: after the run the add is %s", (*closing)->StateOf(add));
    }
    OK(cartage::Barrier(w));
    ExpectNothingLeft(w, "the closing schedule");
  }

  // Blocking calls reuse one schedule with the buffers rebound: its sends
  // and receives are prepared again when their buffer moved, and kept when
  // it did not (the temporaries). Three buffer pairs in turn, results checked.
  std::vector<std::vector<int64_t>> ins(3, std::vector<int64_t>(kCount)), outs(3, std::vector<int64_t>(kCount));
  const Datatype i64 = Datatype::Basic(BasicType::kInt64);
  for (int it = 0; it < 300; ++it) {
    const auto k = static_cast<std::size_t>(it % 3);
    for (int64_t i = 0; i < kCount; ++i) ins[k][static_cast<std::size_t>(i)] = int64_t{it} * 1000 + w.rank() * 7 + i;
    OK(cartage::Allreduce(w, ins[k].data(), outs[k].data(), kCount, i64, Op(OpKind::kSum)));
    for (int64_t i = 0; i < kCount; ++i) {
      const int64_t want = n * (int64_t{it} * 1000 + i) + 7 * n * (n - 1) / 2;
      EXPECT(outs[k][static_cast<std::size_t>(i)] == want, "rebound call %d element %d: %d, expected %d", it, i,
             outs[k][static_cast<std::size_t>(i)], want);
    }
  }
  // The same with an alltoall, whose steps count down the run themselves
  // (2 ranks; every step of a linear one): started as they are while their
  // buffers stay, prepared again when they move. Each call's blocks are new.
  constexpr int64_t kBlock = 3;
  const auto block_elems = static_cast<std::size_t>(kBlock * n);
  std::vector<std::vector<int64_t>> a_ins(3, std::vector<int64_t>(block_elems)),
      a_outs(3, std::vector<int64_t>(block_elems));
  for (int it = 0; it < 300; ++it) {
    const auto k = static_cast<std::size_t>(it / 2 % 3);  // each pair twice running, then the next
    for (int q = 0; q < n; ++q) {
      for (int64_t i = 0; i < kBlock; ++i) {
        a_ins[k][static_cast<std::size_t>(q * kBlock + i)] = int64_t{it} * 100000 + w.rank() * 100 + q * 10 + i;
      }
    }
    std::fill(a_outs[k].begin(), a_outs[k].end(), -1);
    OK(cartage::Alltoall(w, a_ins[k].data(), a_outs[k].data(), kBlock, i64));
    for (int q = 0; q < n; ++q) {
      for (int64_t i = 0; i < kBlock; ++i) {
        const int64_t want = int64_t{it} * 100000 + q * 100 + w.rank() * 10 + i;
        const int64_t got = a_outs[k][static_cast<std::size_t>(q * kBlock + i)];
        EXPECT(got == want, "rebound alltoall call %d block %d element %d: %d, expected %d", it, q, i, got, want);
      }
    }
  }
  // The root alone switching to and from kInPlace: the other ranks reuse
  // their schedule, the root rebuilds its part under the same tags.
  for (int it = 0; it < 6; ++it) {
    const bool in_place = it % 2 == 1 && w.rank() == 0;
    std::vector<int64_t> mine(kCount), sum(kCount, -1);
    for (int64_t i = 0; i < kCount; ++i) mine[static_cast<std::size_t>(i)] = int64_t{it} * 100 + w.rank() + i;
    if (in_place) sum = mine;
    OK(cartage::Reduce(w, in_place ? cartage::kInPlace : mine.data(), sum.data(), kCount, i64, Op(OpKind::kSum), 0));
    for (int64_t i = 0; w.rank() == 0 && i < kCount; ++i) {
      const int64_t want = n * (int64_t{it} * 100 + i) + n * (n - 1) / 2;
      EXPECT(sum[static_cast<std::size_t>(i)] == want, "reduce call %d (root %s) element %d: %d, expected %d", it,
             in_place ? "in place" : "not in place", i, sum[static_cast<std::size_t>(i)], want);
    }
  }
  if (w.rank() == 0) std::printf("persistent: 1000 starts of each, 300 rebound blocking calls\n");
}

// Two collectives in flight at once on different communicators, and on one,
// with point-to-point traffic between them.
void Concurrent(const Comm& w) {
  const int n = w.size();
  const Comm d = w.Dup();
  constexpr int64_t kBig = 50000, kSmall = 17;
  std::vector<int32_t> a(kBig), ra(kBig), g(kSmall), rg(kSmall * static_cast<std::size_t>(n)), s(kSmall), rs(kSmall);
  for (int64_t i = 0; i < kBig; ++i) a[static_cast<std::size_t>(i)] = static_cast<int32_t>(w.rank() + i % 100);
  for (int64_t i = 0; i < kSmall; ++i) {
    g[static_cast<std::size_t>(i)] = static_cast<int32_t>(w.rank() * 1000 + i);
    s[static_cast<std::size_t>(i)] = static_cast<int32_t>(w.rank() + 1);
  }
  const Datatype i32 = Datatype::Basic(BasicType::kInt32);
  Request r1, r2, r3, p2p_s, p2p_r;
  OK(cartage::Iallreduce(w, a.data(), ra.data(), kBig, i32, Op(OpKind::kSum), &r1));
  OK(cartage::Iallgather(d, g.data(), rg.data(), kSmall, i32, &r2));
  OK(cartage::Iallreduce(w, s.data(), rs.data(), kSmall, i32, Op(OpKind::kMax), &r3));
  int token = w.rank(), got = -1;
  OK(w.Irecv(&got, sizeof(got), (w.rank() + n - 1) % n, 0, &p2p_r));
  OK(w.Isend(&token, sizeof(token), (w.rank() + 1) % n, 0, &p2p_s));
  OK(cartage::WaitAll({&r3, &p2p_s, &p2p_r, &r2, &r1}));
  for (int64_t i = 0; i < kBig; ++i) {
    const int32_t want = static_cast<int32_t>(n * (i % 100) + n * (n - 1) / 2);
    EXPECT(ra[static_cast<std::size_t>(i)] == want, "allreduce element %d: %d, expected %d", i,
           ra[static_cast<std::size_t>(i)], want);
  }
  for (int q = 0; q < n; ++q) {
    for (int64_t i = 0; i < kSmall; ++i) {
      EXPECT(rg[static_cast<std::size_t>(q * kSmall + i)] == q * 1000 + i, "allgather block %d element %d", q, i);
    }
  }
  for (int64_t i = 0; i < kSmall; ++i) EXPECT(rs[static_cast<std::size_t>(i)] == n, "max element %d", i);
  EXPECT(got == (w.rank() + n - 1) % n, "point-to-point token %d", got);
  // Errors: a bad root and an unknown algorithm are refused on every rank, naming them.
  std::vector<int32_t> buf(4);
  absl::Status bad = cartage::Bcast(w, buf.data(), 4, i32, n);
  EXPECT(bad.code() == absl::StatusCode::kInvalidArgument && bad.message().find("root") != std::string::npos,
         "%s", bad.ToString());
  CollectiveCall call;
  call.kind = Collective::kAllreduce;
  call.send = buf.data();
  call.recv = buf.data() + 2;
  call.count = 2;
  call.type = i32;
  call.op = Op::User(&AffineOp, false);
  call.algorithm = "ring";
  bad = cartage::RunCollective(w, call);
  EXPECT(bad.code() == absl::StatusCode::kInvalidArgument && bad.message().find("commutative") != std::string::npos,
         "%s", bad.ToString());
  call.algorithm = "no_such";
  bad = cartage::RunCollective(w, call);
  EXPECT(bad.message().find("recursive_doubling") != std::string::npos, "%s", bad.ToString());
  OK(cartage::Barrier(w));
  if (w.rank() == 0) std::printf("concurrent: 3 collectives and point-to-point at once\n");
}

// What the selection picks for a small allreduce (CARTAGE_COLLECTIVES_FILE
// may steer it), and that it runs; a broken selection file refuses the call.
void Selection(const Comm& w) {
  const int n = w.size();
  std::vector<int32_t> in(2, w.rank() + 1), out(2);
  auto s = cartage::BuildCollective(w, SumCall(in.data(), out.data(), 2, BasicType::kInt32));
  if (!s.ok()) {  // every rank reads the same file: every rank refuses
    if (w.rank() == 0) std::printf("refused: %s\n", std::string(s.status().message()).c_str());
    std::exit(0);
  }
  if (w.rank() == 0) std::printf("selected %s\n", (*s)->name().c_str());
  OK((*s)->Run());
  EXPECT(out[0] == n * (n + 1) / 2 && out[1] == out[0], "allreduce: %d %d", out[0], out[1]);
}

// ---- faults ----------------------------------------------------------------------

// Nothing of the collectives' traffic is left waiting on this rank. Called
// after a collective of every rank (a barrier, an allreduce), which took
// every message sent to this rank before it; the fence after the look
// (point-to-point, on another context) keeps a faster rank's next
// collective from sending meanwhile.
void ExpectNothingLeft(const Comm& w, const char* after) {
  const auto left = cartage::engine::CollectiveChannel(w).Iprobe(cartage::kAnySource, cartage::kAnyTag);
  EXPECT(left.ok() && !left->has_value(), "after %s: a message of %d bytes from rank %d (tag %d) left unreceived",
         after, left.ok() && left->has_value() ? static_cast<int>((*left)->bytes) : -1,
         left.ok() && left->has_value() ? (*left)->source : -1, left.ok() && left->has_value() ? (*left)->tag : -1);
  constexpr int kFenceTag = 77;
  char token = 0;
  if (w.rank() == 0) {
    for (int r = 1; r < w.size(); ++r) OK(w.Recv(&token, 1, r, kFenceTag));
    for (int r = 1; r < w.size(); ++r) OK(w.Send(&token, 1, r, kFenceTag));
  } else {
    OK(w.Send(&token, 1, 0, kFenceTag));
    OK(w.Recv(&token, 1, 0, kFenceTag));
  }
}

// Ranks that disagree about the count, or a rank that died: every rank's
// call returns (none waits for ever on a message a failed peer will not
// send: its schedule drains) with an error naming the collective and the
// step, and none of the failed runs' messages is left behind.
//   sizes: rank 0 passes half the count of the others, small (eager) to
//          large (rendezvous), to every allreduce algorithm (blocking and
//          nonblocking) and every bcast algorithm; then an agreeing
//          allreduce must be exact;
//   dead:  the last rank exits; the others run every allreduce algorithm
//          (each needs every rank's data: each must fail) and a bcast;
//   all:   every algorithm of every collective, counts c and 2c (below).
void Faults(const Comm& w, const std::string& what) {
  const int n = w.size();
  const Datatype i32 = Datatype::Basic(BasicType::kInt32);
  auto call_of = [&](Collective kind, const char* alg, int64_t count, std::vector<int32_t>& in,
                     std::vector<int32_t>& out) {
    CollectiveCall call;
    call.kind = kind;
    call.send = in.data();
    call.recv = kind == Collective::kBcast ? in.data() : out.data();
    call.count = count;
    call.type = i32;
    if (kind == Collective::kAllreduce) call.op = Op(OpKind::kSum);
    call.algorithm = alg;
    return call;
  };
  const char* kAllreduce[] = {"recursive_doubling", "ring", "rabenseifner", "linear", "star"};
  if (what == "sizes") {
    for (const int64_t base : {int64_t{2} * n, int64_t{4096}, int64_t{1} << 16}) {
      const int64_t count = w.rank() == 0 ? base : 2 * base;
      std::vector<int32_t> in(static_cast<std::size_t>(2 * base), w.rank() + 1), out(in.size(), 0);
      if (n == 2) {
        // Each step of a 2-rank alltoall or allgather runs alone, its CAR
        // counting down the run's completion itself (Schedule::StartAlone):
        // a receive cut short (rank 1) or truncated (rank 0) must still be
        // named by its vertex.
        std::vector<int32_t> all_in(static_cast<std::size_t>(4 * base), 1), all_out(all_in.size(), 0);
        for (const cartage::AlgorithmInfo& a : cartage::Algorithms()) {
          if (a.collective != Collective::kAlltoall && a.collective != Collective::kAllgather) continue;
          const absl::Status s = cartage::RunCollective(w, call_of(a.collective, a.name, count, all_in, all_out));
          const std::string step = absl::StrCat(cartage::CollectiveName(a.collective), "/", a.name, " (rank ",
                                                w.rank(), "): vertex ");
          // Rank 1 expects its peer's block of 2 * base elements, which comes
          // short; from a star's rank 0, whose own receive came too long,
          // nothing (a drain) where both blocks were expected.
          const std::string expected = std::string(a.name) == "star"
                                           ? absl::StrCat("sent nothing where ", 16 * base, " bytes were expected")
                                           : absl::StrCat("expected ", 8 * base);
          EXPECT((s.code() == absl::StatusCode::kOutOfRange || s.code() == absl::StatusCode::kInvalidArgument) &&
                     absl::StrContains(s.message(), step) &&
                     (w.rank() == 0 || absl::StrContains(s.message(), expected)),
                 "%s/%s of %d against %d elements: %s", cartage::CollectiveName(a.collective), a.name, count, base,
                 s.ToString());
        }
      }
      for (const char* alg : kAllreduce) {
        for (const bool nonblocking : {false, true}) {
          const CollectiveCall call = call_of(Collective::kAllreduce, alg, count, in, out);
          Request req;
          absl::Status s;
          if (nonblocking) {
            s = cartage::StartCollective(w, call, &req);
            if (s.ok()) s = req.Wait();
          } else {
            s = cartage::RunCollective(w, call);
          }
          EXPECT(s.code() == absl::StatusCode::kOutOfRange || s.code() == absl::StatusCode::kInvalidArgument,
                 "allreduce/%s of %d against %d elements (%s): %s", alg, count, base,
                 nonblocking ? "nonblocking" : "blocking", s.ToString());
          EXPECT(absl::StrContains(s.message(), absl::StrCat("allreduce/", alg, " (rank ", w.rank(), "): vertex ")),
                 "%s", s.ToString());
        }
      }
      // A bcast whose pieces differ in number (64 KiB chunks) has a different
      // shape on the root: the others wait for chunks it never sends, which
      // no rank can tell from a slow root (as in MPI, an erroneous program).
      if (2 * base * 4 > 64 << 10) continue;
      for (const char* alg : {"binomial", "chain", "scatter_allgather", "linear"}) {
        const absl::Status s = cartage::RunCollective(w, call_of(Collective::kBcast, alg, count, in, out));
        // The root only sends: what it sent was whole. Every other rank
        // received too little, or nothing from a parent that failed.
        EXPECT(w.rank() == 0 || s.code() == absl::StatusCode::kInvalidArgument, "bcast/%s of %d against %d: %s", alg,
               count, base, s.ToString());
      }
      OK(cartage::Barrier(w));
      ExpectNothingLeft(w, "the disagreeing calls");
    }
    std::vector<int32_t> in(8, w.rank() + 1), out(8, 0);
    for (const char* alg : kAllreduce) {
      std::fill(out.begin(), out.end(), 0);
      OK(cartage::RunCollective(w, call_of(Collective::kAllreduce, alg, 8, in, out)));
      for (int32_t v : out) EXPECT(v == n * (n + 1) / 2, "allreduce/%s after the failures: %d", alg, v);
    }
  } else if (what == "dead") {
    if (w.rank() == n - 1) {
      std::fflush(stdout);
      _exit(0);  // gone without finalizing
    }
    std::vector<int32_t> in(4 * static_cast<std::size_t>(n), w.rank() + 1), out(in.size(), 0);
    for (const char* alg : kAllreduce) {
      const absl::Status s =
          cartage::RunCollective(w, call_of(Collective::kAllreduce, alg, static_cast<int64_t>(in.size()), in, out));
      EXPECT(s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kInvalidArgument,
             "allreduce/%s with rank %d dead: %s", alg, n - 1, s.ToString());
    }
    const absl::Status b = cartage::Bcast(w, in.data(), static_cast<int64_t>(in.size()), i32, 0);
    EXPECT(b.ok() || b.code() == absl::StatusCode::kUnavailable || b.code() == absl::StatusCode::kInvalidArgument,
           "bcast with rank %d dead: %s", n - 1, b.ToString());
    std::printf("rank %d: every call returned\n", w.rank());
    std::fflush(stdout);
    std::exit(0);  // no barrier with a dead rank
  } else if (what == "all") {
    // Every algorithm of every collective but barrier, roots 0 and n-1:
    // rank 0 passes count c, the others 2c (buffers laid out for each rank's
    // own view). Each call must return on every rank, at least one rank
    // must say so (a disagreement never passes unnoticed everywhere), and
    // nothing may be left behind.
    const std::vector<TypeCase> types = Types();
    const TypeCase& t = types[0];
    int calls = 0;
    for (const cartage::AlgorithmInfo& a : cartage::Algorithms()) {
      if (a.collective == Collective::kBarrier) continue;
      std::vector<int> roots = {0};
      if (cartage::Rooted(a.collective) && n > 1) roots.push_back(n - 1);
      for (const int64_t c : {int64_t{3}, int64_t{5000}}) {
        for (const int root : roots) {
          CollectiveCall call;
          call.kind = a.collective;
          call.count = w.rank() == 0 ? c : 2 * c;
          call.type = t.type;
          if (cartage::Reduces(a.collective)) call.op = t.op;
          call.root = root;
          call.algorithm = a.name;
          const Plan plan = MakePlan(t, call, w.rank(), n, false);
          Bytes send = Layout(t, plan.send, plan.send_span);
          Bytes recv = Layout(t, plan.before, plan.recv_span);
          call.send = send.data();
          call.recv = plan.recv_in_place ? const_cast<void*>(cartage::kInPlace) : recv.data();
          const absl::Status s = cartage::RunCollective(w, call);
          int32_t failed = s.ok() ? 0 : 1, failures = 0;
          OK(cartage::Allreduce(w, &failed, &failures, 1, Datatype::Basic(BasicType::kInt32), Op(OpKind::kSum)));
          EXPECT(failures > 0, "%s/%s counts %d and %d, root %d: every rank succeeded",
                 cartage::CollectiveName(a.collective), a.name, c, 2 * c, root);
          ExpectNothingLeft(w, absl::StrCat(cartage::CollectiveName(a.collective), "/", a.name).c_str());
          ++calls;
        }
      }
    }
    if (w.rank() == 0) std::printf("faults all: %d disagreeing calls ended on %d ranks\n", calls, n);
  } else {
    EXPECT(false, "faults: unknown case '%s' (sizes, dead or all)", what);
  }
}

// ---- the xfer interface ---------------------------------------------------------

// Chains 0 -> 1 -> ... -> n-1 built from xfer blocks, pipelined in 16 KiB
// chunks, in every buffer mode (and the policy's choice), every type, every
// size; each run twice:
//   bcast:      0 sends; the middle ranks recv_mop_forward (no op); the last recv_mop;
//   accumulate: the same with the op: rank r ends with P0 op Pr;
//   forward:    the middle ranks forward_op (nothing stays there); the last gets P0;
//   reduce:     gather blocks the other way: rank r combines what comes from r+1
//               into its own data and sends that on; rank 0 ends with P0 op ... op Pn-1.
// A burst of large sends (Schedule::SendsSingleCopy): the linear alltoall
// and allgather send every block at once, a binomial bcast's root its
// message to each child. With three or more blocks over 32 KiB, on a path
// with single-copy rendezvous and an eager limit above 32 KiB (shm with CMA
// where ranks outnumber CPUs), each goes single-copy; with 32 KiB blocks,
// fewer peers, or on a bcast's other ranks (each send waits for the
// receive), none does. Every call's bytes are checked, twice over (the
// second run restarts the capped requests).
void Burst(const Comm& w) {
  const int n = w.size();
  const int me = w.rank();
  const absl::StatusOr<cartage::PathInfo> path = w.PathTo((me + 1) % n);
  OK(path.status());
  const bool can = path->single_copy && path->eager_limit > cartage::Schedule::kBurstEagerCap;
  for (const int64_t block : {int64_t{64} << 10, int64_t{32} << 10}) {
    for (const Collective kind : {Collective::kAlltoall, Collective::kAllgather, Collective::kBcast}) {
      const bool bcast = kind == Collective::kBcast;
      const std::size_t blocks = kind == Collective::kAllgather || bcast ? 1 : static_cast<std::size_t>(n);
      Bytes in(blocks * static_cast<std::size_t>(block)), out(static_cast<std::size_t>(n * block));
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(me * 31 + i / block + i);
      CollectiveCall call;
      call.kind = kind;
      call.send = in.data();
      call.recv = bcast ? in.data() : out.data();
      call.count = block;
      call.algorithm = bcast ? "binomial" : "linear";
      absl::StatusOr<std::shared_ptr<cartage::Schedule>> s = cartage::BuildCollective(w, call);
      OK(s.status());
      int sends = 0, single = 0;
      for (std::size_t v = 0; v < (*s)->vertices().size(); ++v) {
        if ((*s)->vertices()[v].kind != cartage::VertexKind::kSend) continue;
        ++sends;
        if ((*s)->SendsSingleCopy(static_cast<cartage::VertexId>(v))) ++single;
      }
      const int start_at_once = bcast ? (me == 0 ? sends : 0) : n - 1;
      const bool burst = can && start_at_once >= static_cast<int>(cartage::Schedule::kBurstSends) &&
                         block > static_cast<int64_t>(cartage::Schedule::kBurstEagerCap);
      EXPECT(single == (burst ? sends : 0), "%s/%s of %d-byte blocks at %d ranks: %d of %d sends single-copy",
             cartage::CollectiveName(kind), call.algorithm, block, n, single, sends);
      for (int run = 0; run < 2; ++run) {
        std::fill(out.begin(), out.end(), 0);
        OK((*s)->Run());
        for (int p = 0; p < n && !bcast; ++p) {
          for (int64_t i = 0; i < block; ++i) {
            // alltoall: peer p's block for me; allgather: peer p's one block.
            const std::size_t j = static_cast<std::size_t>(kind == Collective::kAlltoall ? me * block + i : i);
            const auto want = static_cast<unsigned char>(p * 31 + j / block + j);
            const unsigned char got = out[static_cast<std::size_t>(p * block + i)];
            if (got != want) {
              EXPECT(false, "%s of %d-byte blocks, run %d: byte %d from rank %d is %d, expected %d",
                     cartage::CollectiveName(kind), block, run, i, p, got, want);
              break;
            }
          }
        }
      }
      if (me == 0) {
        std::printf("burst: %s/%s of %lld-byte blocks at %d ranks: %d of %d sends single-copy\n",
                    cartage::CollectiveName(kind), call.algorithm.c_str(), static_cast<long long>(block), n, single,
                    sends);
      }
    }
  }
}

void XferChains(const Comm& w) {
  using cartage::Buf;
  using cartage::BufferMode;
  using cartage::Segment;
  using cartage::Xfer;
  using cartage::XferOptions;
  const int r = w.rank(), n = w.size();
  const std::vector<std::optional<BufferMode>> modes = {std::nullopt, BufferMode::kSenderSupplies,
                                                        BufferMode::kReceiverSupplies, BufferMode::kUseSegment,
                                                        BufferMode::kUseTmp};
  enum Chain { kBcast, kAccumulate, kForward, kReduce };
  const char* kChainName[] = {"bcast", "accumulate", "forward", "reduce"};
  // What the policy reads, and the lending it forces.
  for (int peer = 0; peer < n; ++peer) {
    absl::StatusOr<cartage::PathInfo> path = w.PathTo(peer);
    OK(path.status());
    EXPECT(!path->method.empty() && !path->lends_buffers, "path to %d: %s lends %d", peer, path->method,
           path->lends_buffers);
    absl::StatusOr<std::shared_ptr<std::byte>> lent = w.LendBuffer(peer, 100);
    OK(lent.status());
    std::memset(lent->get(), 0x11, 100);
  }
  EXPECT(absl::StrContains(w.PathTo(n).status().message(), absl::StrFormat("path: no rank %d", n)), "%s",
         w.PathTo(n).status().ToString());
  EXPECT(absl::StrContains(w.LendBuffer(-1, 8).status().message(), "lend buffer: no rank -1"), "%s",
         w.LendBuffer(-1, 8).status().ToString());
  int runs = 0;
  for (const TypeCase& t : Types()) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{37}, int64_t{40009}}) {
      for (const std::optional<BufferMode>& mode : modes) {
        for (Chain chain : {kBcast, kAccumulate, kForward, kReduce}) {
          const std::string what =
              absl::StrFormat("xfer %s %s count %d mode %s", kChainName[chain], t.name, count,
                              mode.has_value() ? cartage::BufferModeName(*mode) : "policy");
          if (std::getenv("COLL_RANKS_TRACE") != nullptr) std::fprintf(stderr, "rank %d: %s\n", r, what.c_str());
          const XferOptions opts{.chunk_bytes = 16 << 10, .buffer = mode};
          const Bytes mine = Packed(t, r, 0, count);
          Bytes buf;
          auto fill = [&] {
            const bool garbage = (chain == kBcast || chain == kForward) && r > 0;
            const Bytes fresh = Layout(t, {{0, garbage ? Filler(t, count) : mine}}, count);
            buf.assign(fresh.begin(), fresh.end());  // same size: the schedule's pointer stays valid
          };
          fill();
          const Segment seg = Segment::Of(Buf::User(buf.data() - t.type.true_lb(), "buf"), count, t.type);
          cartage::ScheduleBuilder b(w, what);
          absl::Status built = absl::OkStatus();
          std::vector<BufferMode> got_modes;
          if (chain == kReduce) {
            Xfer x = Xfer::GatherInit(b, r == 0 ? cartage::kNoPeer : r - 1, opts);
            if (r + 1 < n) built.Update(x.RecvMopOp(seg, t.op, r + 1, /*piece_first=*/false));
            if (r > 0) built.Update(x.SendOp(seg));
            built.Update(x.Start().status());
          } else {
            Xfer x = Xfer::ScatterInit(b, r == 0 ? cartage::kNoPeer : r - 1, opts);
            const std::optional<Op> op = chain == kAccumulate ? t.op : std::nullopt;
            if (r == 0) {
              if (n > 1) built.Update(x.SendOp(seg, 1));
            } else if (r + 1 < n) {
              built.Update(chain == kForward ? x.ForwardOp(seg.bytes(), r + 1) : x.RecvMopForwardOp(seg, op, r + 1));
            } else {
              built.Update(x.RecvMopOp(seg, op));
            }
            built.Update(x.Start().status());
            got_modes = x.modes();
          }
          // A mode that cannot serve is refused, naming the op: USE_SEGMENT_BUF where the piece
          // is combined into its segment, or has none (forward_op).
          const bool refused =
              mode == BufferMode::kUseSegment && (chain == kAccumulate || chain == kForward) && r > 0 && r + 1 < n;
          if (refused) {
            EXPECT(!built.ok() &&
                       absl::StrContains(built.message(), chain == kForward ? "forward_op" : "recv_mop_forward_op") &&
                       absl::StrContains(built.message(), "USE_SEGMENT_BUF"),
                   "%s: expected a refusal, got %s", what, built.ToString());
          } else {
            EXPECT(built.ok(), "%s: %s", what, built.ToString());
          }
          // Every rank must agree to run it: one refusal skips it everywhere.
          int32_t ok = built.ok() ? 1 : 0, all_ok = 0;
          CollectiveCall agree;
          agree.kind = Collective::kAllreduce;
          agree.send = &ok;
          agree.recv = &all_ok;
          agree.count = 1;
          agree.type = Datatype::Basic(BasicType::kInt32);
          agree.op = Op(OpKind::kMin);
          OK(cartage::RunCollective(w, agree));
          if (all_ok == 0) continue;
          for (const BufferMode m : got_modes) {
            const BufferMode want = mode.has_value() ? *mode
                                    : (t.type.contiguous() && chain == kBcast) ? BufferMode::kUseSegment
                                                                               : BufferMode::kUseTmp;
            EXPECT(m == want, "%s: chunk forwarded by %s, expected %s", what, cartage::BufferModeName(m),
                   cartage::BufferModeName(want));
          }
          auto schedule = b.Build();
          OK(schedule.status());
          for (int run = 0; run < 2; ++run) {
            fill();
            OK((*schedule)->Run());
            std::vector<int> ranks;
            Bytes want_packed;
            if (chain == kBcast || (chain == kForward && r + 1 == n)) {
              want_packed = Packed(t, 0, 0, count);
            } else if (chain == kForward) {
              want_packed = r == 0 ? mine : Filler(t, count);
            } else if (chain == kAccumulate) {
              want_packed = r == 0 ? mine : Reduced(t, {0, r}, 0, count);
            } else {
              for (int k = r; k < n; ++k) ranks.push_back(k);
              want_packed = Reduced(t, ranks, 0, count);
            }
            const Bytes want = Layout(t, {{0, want_packed}}, count);
            for (std::size_t i = 0; i < want.size() && count > 0; ++i) {
              EXPECT(buf[i] == want[i], "%s run %d: byte %d is 0x%02x, expected 0x%02x", what, run, i, buf[i],
                     want[i]);
            }
          }
          ++runs;
        }
      }
    }
  }
  if (r == 0) std::printf("xfer: %d chains checked\n", runs);
}

}  // namespace

// One agent after another in one process: the collectives each runs must be
// its own (a schedule cached by the first must not outlive it or serve the
// second, whose communicators have the same context ids).
int Reinit() {
  for (int round = 0; round < 3; ++round) {
    auto agent = cartage::Agent::FromEnvironment();
    if (!agent.ok()) {
      std::fprintf(stderr, "coll_ranks reinit round %d: %s\n", round, agent.status().ToString().c_str());
      return 1;
    }
    const Comm w = (*agent)->World();
    g_rank = w.rank();
    const int n = w.size();
    for (int64_t count : {int64_t{1}, int64_t{1000}}) {
      std::vector<int32_t> buf(static_cast<std::size_t>(count));
      for (int64_t i = 0; i < count; ++i) buf[static_cast<std::size_t>(i)] = w.rank() == 0 ? round * 7 + static_cast<int32_t>(i) : -1;
      OK(cartage::Bcast(w, buf.data(), count, Datatype::Basic(BasicType::kInt32), 0));
      for (int64_t i = 0; i < count; ++i) {
        EXPECT(buf[static_cast<std::size_t>(i)] == round * 7 + i, "reinit round %d bcast of %d: element %d is %d", round,
               count, i, buf[static_cast<std::size_t>(i)]);
      }
      std::vector<int32_t> sum(static_cast<std::size_t>(count), 0);
      for (auto& x : buf) x = w.rank() + round;
      OK(cartage::Allreduce(w, buf.data(), sum.data(), count, Datatype::Basic(BasicType::kInt32), Op(OpKind::kSum)));
      const int32_t want = n * (n - 1) / 2 + n * round;
      for (int64_t i = 0; i < count; ++i) {
        EXPECT(sum[static_cast<std::size_t>(i)] == want, "reinit round %d allreduce of %d: element %d is %d, expected %d",
               round, count, i, sum[static_cast<std::size_t>(i)], want);
      }
    }
    OK(cartage::Barrier(w));
  }
  if (g_rank == 0) std::printf("PASS reinit\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: coll_ranks algorithms [COLLECTIVE,...]|persistent|concurrent|selection|xfer|reinit\n");
    return 2;
  }
  if (std::string(argv[1]) == "reinit") return Reinit();
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "coll_ranks: %s\n", agent.status().ToString().c_str());
    return 1;
  }
  const Comm w = (*agent)->World();
  g_rank = w.rank();
  const std::string mode = argv[1];
  if (mode == "algorithms") {
    Algorithms(w, argc > 2 ? argv[2] : "");
  } else if (mode == "persistent") {
    Persistent(w);
  } else if (mode == "selection") {
    Selection(w);
  } else if (mode == "concurrent") {
    Concurrent(w);
  } else if (mode == "faults") {
    Faults(w, argc > 2 ? argv[2] : "");
  } else if (mode == "xfer") {
    XferChains(w);
  } else if (mode == "burst") {
    Burst(w);
  } else {
    std::fprintf(stderr, "coll_ranks: unknown mode %s\n", mode.c_str());
    return 2;
  }
  OK(cartage::Barrier(w));
  if (w.rank() == 0) std::printf("PASS %s\n", mode.c_str());
  return 0;
}
