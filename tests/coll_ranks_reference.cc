// coll_ranks: the element types, their values and reference reductions,
// and every algorithm of every collective checked against the serial
// reference, byte for byte.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/coll_ranks.h"

namespace cartage::test::coll {

// ---- element types, their values and their reference reductions ----------------

Affine Compose(Affine f, Affine g) {
  return {static_cast<int32_t>(int64_t{f.a} * g.a % kP), static_cast<int32_t>((int64_t{f.a} * g.b + f.b) % kP)};
}
void AffineOp(const void* in, void* inout, int64_t count, const Datatype&, void*) {
  const auto* x = static_cast<const Affine*>(in);
  auto* y = static_cast<Affine*>(inout);
  for (int64_t i = 0; i < count; ++i) y[i] = Compose(x[i], y[i]);
}


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


namespace {

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
}  // namespace

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

namespace {

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

}  // namespace

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
    KIT_OK(cartage::StartCollective(w, call, &req));
    absl::Status s = req.Wait();
    KIT_EXPECT(s.ok(), "%s: %s", what, s.ToString());
  } else {
    absl::Status s = cartage::RunCollective(w, call);
    KIT_EXPECT(s.ok(), "%s: %s", what, s.ToString());
  }
  if (defined == 0) return;
  KIT_EXPECT(recv.size() >= want.size(), "%s: buffer sizes", what);
  for (std::size_t i = 0; i < want.size(); ++i) {
    KIT_EXPECT(recv[i] == want[i], "%s: byte %d is 0x%02x, expected 0x%02x", what, i, recv[i], want[i]);
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

}  // namespace cartage::test::coll
