// The rank side of the collective tests (tests/collectives_test.cc runs each
// mode through `cartage run` at several rank counts). Every result is
// compared byte for byte with a serial reference computed from the inputs,
// which every rank can generate for every other rank; the gaps of
// non-contiguous layouts must keep their sentinel bytes. Rank 0 prints
// "PASS <mode>" when the whole job agrees.
//
// usage: coll_ranks algorithms|persistent|concurrent|builder
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "car/segment_walk.h"
#include "cartage/cartage.h"
#include "tests/rank_check.h"
#include "cartage/collectives.h"

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

// A layout buffer for `elems` elements: sentinel bytes, then the packed data unpacked in.
constexpr unsigned char kSentinel = 0xAB;
Bytes Layout(const TypeCase& t, const Bytes& packed, int64_t elems) {
  const int64_t span = elems == 0 ? 0 : (elems - 1) * t.type.extent() + t.type.true_extent();
  Bytes out(static_cast<std::size_t>(std::max<int64_t>(span, 1)), kSentinel);
  if (elems > 0) {
    cartage::car::Unpack(packed.data(), elems, t.type, 0, elems * t.type.size(), out.data() - t.type.true_lb());
  }
  return out;
}

// The reference result of `call` on rank `r` of `n`, packed; and how many elements.
Bytes Reference(const TypeCase& t, const CollectiveCall& call, int r, int n, int64_t* elems) {
  const int64_t c = call.count;
  const auto es = static_cast<std::size_t>(t.type.size());
  Bytes out;
  *elems = 0;
  switch (call.kind) {
    case Collective::kBcast:
      *elems = c;
      return Packed(t, call.root, 0, c);
    case Collective::kReduce:
    case Collective::kAllreduce: {
      if (call.kind == Collective::kReduce && r != call.root) return out;
      *elems = c;
      out = Packed(t, 0, 0, c);
      for (int q = 1; q < n; ++q) {
        Bytes v = Packed(t, q, 0, c);
        for (int64_t i = 0; i < c; ++i) {  // out = out op v
          unsigned char* slot = &v[static_cast<std::size_t>(i) * es];
          t.ref(&out[static_cast<std::size_t>(i) * es], slot);
          std::memcpy(&out[static_cast<std::size_t>(i) * es], slot, es);
        }
      }
      return out;
    }
    case Collective::kGather:
    case Collective::kAllgather:
      if (call.kind == Collective::kGather && r != call.root) return out;
      *elems = c * n;
      for (int q = 0; q < n; ++q) {
        Bytes v = Packed(t, q, 0, c);
        out.insert(out.end(), v.begin(), v.end());
      }
      return out;
    case Collective::kScatter:
      *elems = c;
      return Packed(t, call.root, r * c, c);
    case Collective::kAlltoall:
      *elems = c * n;
      for (int q = 0; q < n; ++q) {
        Bytes v = Packed(t, q, r * c, c);  // block r of rank q's input
        out.insert(out.end(), v.begin(), v.end());
      }
      return out;
    default: return out;
  }
}

// The input elements of rank r (its send buffer), as the reference generated them.
int64_t SendElems(const CollectiveCall& call, int r, int n) {
  switch (call.kind) {
    case Collective::kBcast: return r == call.root ? call.count : 0;
    case Collective::kReduce:
    case Collective::kAllreduce:
    case Collective::kGather:
    case Collective::kAllgather: return call.count;
    case Collective::kScatter: return r == call.root ? call.count * n : 0;
    case Collective::kAlltoall: return call.count * n;
    default: return 0;
  }
}

bool Reduces(Collective k) { return k == Collective::kReduce || k == Collective::kAllreduce; }

// One call: builds the buffers, runs it (blocking, or nonblocking when
// `nonblocking`), compares with the reference.
void Check(const Comm& w, const TypeCase& t, CollectiveCall call, bool in_place, bool nonblocking) {
  const int r = w.rank(), n = w.size();
  int64_t out_elems = 0;
  const Bytes expect = Reference(t, call, r, n, &out_elems);
  const int64_t in_elems = SendElems(call, r, n);
  Bytes send = Layout(t, Packed(t, r, 0, in_elems), in_elems);
  // Allocated for the whole result where this rank has one; bcast's buffer
  // is the input at the root.
  const int64_t recv_elems = std::max(out_elems, call.kind == Collective::kBcast ? call.count : int64_t{0});
  Bytes recv = Layout(t, {}, 0);
  if (recv_elems > 0) recv.assign(static_cast<std::size_t>((recv_elems - 1) * t.type.extent() + t.type.true_extent()), kSentinel);
  if (call.kind == Collective::kBcast && r == call.root) recv = send;
  if (in_place) {
    // The input sits where MPI_IN_PLACE puts it: the whole buffer, or this rank's block.
    const int64_t c = call.count;
    Bytes mine = Packed(t, r, 0, in_elems);
    Bytes full;
    if (call.kind == Collective::kGather || call.kind == Collective::kAllgather) {
      full.assign(static_cast<std::size_t>(out_elems) * static_cast<std::size_t>(t.type.size()), 0);
      // Other blocks: garbage the collective must overwrite (bytes 0x5A).
      std::fill(full.begin(), full.end(), 0x5A);
      std::copy(mine.begin(), mine.end(), full.begin() + static_cast<std::ptrdiff_t>(r * c * t.type.size()));
    } else {
      full = mine;
    }
    recv = Layout(t, full, out_elems);
    call.send = cartage::kInPlace;
  } else {
    call.send = send.data() - t.type.true_lb();
  }
  call.recv = recv.data() - t.type.true_lb();
  const std::string what = absl::StrFormat("%s/%s %s count %d root %d%s%s", cartage::CollectiveName(call.kind),
                                           call.algorithm, t.name, call.count, call.root,
                                           in_place ? " in place" : "", nonblocking ? " nonblocking" : "");
  if (nonblocking) {
    Request req;
    OK(cartage::StartCollective(w, call, &req));
    absl::Status s = req.Wait();
    EXPECT(s.ok(), "%s: %s", what, s.ToString());
  } else {
    absl::Status s = cartage::RunCollective(w, call);
    EXPECT(s.ok(), "%s: %s", what, s.ToString());
  }
  if (out_elems == 0) return;
  const Bytes want = Layout(t, expect, out_elems);
  EXPECT(recv.size() >= want.size(), "%s: buffer sizes", what);
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT(recv[i] == want[i], "%s: byte %d is 0x%02x, expected 0x%02x", what, i, recv[i], want[i]);
  }
}

bool InPlaceAllowed(Collective k, int r, int root) {
  return k == Collective::kAllreduce || k == Collective::kAllgather || k == Collective::kAlltoall ||
         ((k == Collective::kReduce || k == Collective::kGather) && r == root);
}

// Every algorithm x type x size x root x (in place or not).
void Algorithms(const Comm& w) {
  const int n = w.size();
  const std::vector<TypeCase> types = Types();
  const int64_t sizes[] = {0, 1, 37, 40009};  // 40009: not a multiple of any n here; > 64 KiB
  int calls = 0;
  for (const cartage::AlgorithmInfo& a : cartage::Algorithms()) {
    for (const TypeCase& t : types) {
      const bool reduces = Reduces(a.collective);
      if (a.collective == Collective::kBarrier && &t != &types[0]) continue;
      if (!reduces && t.op.has_value() && t.op->kind() == OpKind::kUser) continue;  // one data type is enough
      if (a.commutative_only && !t.op->commutative()) continue;
      const bool rooted = a.collective == Collective::kBcast || a.collective == Collective::kReduce ||
                          a.collective == Collective::kGather || a.collective == Collective::kScatter;
      std::vector<int> roots = {0};
      if (rooted && n > 1) roots.push_back(n - 1);
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
              if (!(a.collective == Collective::kReduce || a.collective == Collective::kGather)) continue;
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
void Persistent(const Comm& w) {
  const int n = w.size();
  constexpr int64_t kCount = 33;
  std::vector<int32_t> in(kCount), out(kCount);
  CollectiveCall call;
  call.kind = Collective::kAllreduce;
  call.send = in.data();
  call.recv = out.data();
  call.count = kCount;
  call.type = Datatype::Basic(BasicType::kInt32);
  call.op = Op(OpKind::kSum);
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
  if (w.rank() == 0) std::printf("persistent: 1000 starts of each\n");
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: coll_ranks algorithms|persistent|concurrent\n");
    return 2;
  }
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "coll_ranks: %s\n", agent.status().ToString().c_str());
    return 1;
  }
  const Comm w = (*agent)->World();
  g_rank = w.rank();
  const std::string mode = argv[1];
  if (mode == "algorithms") {
    Algorithms(w);
  } else if (mode == "persistent") {
    Persistent(w);
  } else if (mode == "concurrent") {
    Concurrent(w);
  } else {
    std::fprintf(stderr, "coll_ranks: unknown mode %s\n", mode.c_str());
    return 2;
  }
  OK(cartage::Barrier(w));
  if (w.rank() == 0) std::printf("PASS %s\n", mode.c_str());
  return 0;
}
