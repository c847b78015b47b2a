// Building a collective call's schedule: argument checks, packing of
// non-contiguous types, the algorithm the selection table picks. The calls
// that run them (the blocking calls' cache, the MPI forms) are in calls.cc.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collectives/algorithms.h"

namespace cartage {

using alg::Algorithm;
using alg::Ctx;
using alg::Find;
using alg::FixedBlocks;

namespace {

// What one rank's buffers hold in a call, in elements of each side's type.
// A side is either one run (`send`, `recv`) or per-rank blocks (the v forms).
struct Shape {
  int64_t send = 0;       // input elements in the send buffer
  int64_t recv = 0;       // result elements in the receive buffer
  int64_t in_place = 0;   // in place: input (and room) the receive buffer holds
  bool send_blocks = false;
  bool recv_blocks = false;
};

int64_t Sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

Shape ShapeWith(const CollectiveCall& call, int64_t c, int rank, int n) {
  const bool root = rank == call.root;
  switch (call.kind) {
    case Collective::kBarrier: return {};
    case Collective::kBcast: return {0, c, c};
    case Collective::kReduce: return {c, root ? c : 0, c};
    case Collective::kAllreduce:
    case Collective::kScan: return {c, c, c};
    case Collective::kExscan: return {c, rank > 0 ? c : 0, c};  // rank 0's result is undefined: left alone
    case Collective::kGather: return {c, root ? c * n : 0, c * n};
    case Collective::kScatter: return {root ? c * n : 0, root && call.recv == kInPlace ? 0 : c, 0};
    case Collective::kAllgather: return {c, c * n, c * n};
    case Collective::kAlltoall: return {c * n, c * n, c * n};
    case Collective::kGatherv: return {c, 0, 0, false, root};
    case Collective::kScatterv: return {0, root && call.recv == kInPlace ? 0 : c, 0, root, false};
    case Collective::kAllgatherv: return {c, 0, 0, false, true};
    case Collective::kAlltoallv: return {0, 0, 0, true, true};
    case Collective::kReduceScatter: {
      const int64_t total = Sum(call.recv_counts);
      return {total, call.recv_counts[static_cast<std::size_t>(rank)], total};
    }
    case Collective::kReduceScatterBlock: return {c * n, c, c * n};
    case Collective::kCount: break;
  }
  return {};
}

Shape ShapeOf(const CollectiveCall& call, int rank, int n) {
  Shape s = ShapeWith(call, call.count, rank, n);
  if (call.recv_type.has_value() && FixedBlocks(call.kind)) {  // the receive side counts in its own type
    const Shape r = ShapeWith(call, call.recv_count, rank, n);
    s.recv = r.recv;
    s.in_place = r.in_place;
  }
  return s;
}

// The receive side's type.
const Datatype& RecvType(const CollectiveCall& call) {
  return call.recv_type.has_value() ? *call.recv_type : call.type;
}

// Where only one side of a two-type call is significant on `rank` (a
// gather's non-root, a scatter's root receiving in place, any call sending
// in place), or both name one type and count, the same call with one type
// (in `*one`); otherwise `call` itself.
const CollectiveCall& OneTypeWhereItCan(const CollectiveCall& call, int rank, CollectiveCall* one) {
  const Collective k = call.kind;
  if (!call.recv_type.has_value() || !call.send_types.empty() || !call.recv_types.empty()) return call;
  if (!FixedBlocks(k) && !Varying(k)) return call;  // Build refuses it
  const bool root = rank == call.root;
  const bool gathers = k == Collective::kGather || k == Collective::kGatherv;
  const bool scatters = k == Collective::kScatter || k == Collective::kScatterv;
  const bool send_only = gathers && !root;                    // a non-root's receive side is not significant
  const bool recv_only = (scatters && !root) || (call.send == kInPlace && !scatters);  // in place: recv's layout
  const bool scatter_in_place = scatters && root && call.recv == kInPlace;
  const bool same = &call.type.nodes() == &call.recv_type->nodes() &&
                    (!FixedBlocks(k) || call.count == call.recv_count);
  if (!send_only && !recv_only && !scatter_in_place && !same) return call;
  *one = call;
  if (recv_only) {
    one->type = *call.recv_type;
    if (FixedBlocks(k)) one->count = call.recv_count;
  }
  one->recv_type.reset();
  one->recv_count = 0;
  return *one;
}

// The bytes the selection table picks by: the same on every rank (only
// what every rank passes alike), so every rank picks the same algorithm.
uint64_t SelectionBytes(const CollectiveCall& call, int n) {
  const auto es = static_cast<uint64_t>(call.type.size());
  switch (call.kind) {
    // In bytes before the division: a rank whose receive type differs from another's computes the same.
    case Collective::kAllgatherv:
      return static_cast<uint64_t>(Sum(call.recv_counts)) * static_cast<uint64_t>(RecvType(call).size()) /
             static_cast<uint64_t>(std::max(n, 1));
    case Collective::kReduceScatter: return static_cast<uint64_t>(Sum(call.recv_counts)) * es;
    case Collective::kReduceScatterBlock: return static_cast<uint64_t>(call.count) * static_cast<uint64_t>(n) * es;
    case Collective::kGatherv:
    case Collective::kScatterv:
    case Collective::kAlltoallv: return 0;  // counts known at the root alone, or different on every rank
    default: return static_cast<uint64_t>(call.count) * es;
  }
}

std::string AlgorithmOf(const CollectiveCall& call, int n, bool oversubscribed, bool crowded) {
  const bool commutative = !call.op.has_value() || call.op->commutative();
  return call.algorithm.empty()
             ? SelectAlgorithm(call.kind, SelectionBytes(call, n), n, commutative, oversubscribed, crowded)
             : call.algorithm;
}

// Checks per-rank counts and displacements: n of each (no displacements:
// blocks one after another), none negative.
absl::Status CheckCounts(const std::vector<int64_t>& counts, const std::vector<int64_t>& displs, int n,
                         const char* what) {
  if (counts.size() != static_cast<std::size_t>(n)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s_counts has %d entries for a communicator of %d", what, counts.size(), n));
  }
  if (!displs.empty() && displs.size() != static_cast<std::size_t>(n)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s_displs has %d entries for a communicator of %d", what, displs.size(), n));
  }
  for (int i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (counts[k] < 0) return absl::InvalidArgumentError(absl::StrFormat("%s_counts[%d] = %d", what, i, counts[k]));
    if (!displs.empty() && displs[k] < 0) {
      return absl::InvalidArgumentError(absl::StrFormat("%s_displs[%d] = %d", what, i, displs[k]));
    }
  }
  return absl::OkStatus();
}

// One side of a v form: per-rank counts and displacements, in elements and
// extents of `type`, or (alltoallw) of `types[i]` and in bytes.
struct Side {
  const std::vector<int64_t>& counts;
  const std::vector<int64_t>& displs;
  const void* base;
  const char* name;
  const Datatype& type;
  const std::vector<Datatype>& types;  // empty: `type` for every rank
  bool bytes;                          // blocks count bytes (the call's sides differ in type)
  const Datatype& TypeOf(std::size_t k) const { return types.empty() ? type : types[k]; }
};

// A packed receive block to unpack last.
struct Unpacking {
  Buf at;
  int64_t count;
  Datatype type;
  Buf layout;
};

// One side's per-rank blocks, packed: in the user's buffer at its
// displacements where the block's type is contiguous, else in one temporary
// (rank order) that `pack` (when the side is input) fills block by block,
// `packs` collecting the pack vertices, and `unpacks` the blocks to unpack
// last (when it is output); `mine_only` packs only this rank's block.
std::vector<alg::Block> Blocks(ScheduleBuilder& b, const Side& side, bool pack, bool mine_only,
                               std::vector<VertexId>* packs, std::vector<Unpacking>* unpacks) {
  const int n = b.size();
  std::vector<alg::Block> out(static_cast<std::size_t>(n));
  uint64_t temp_bytes = 0;
  for (std::size_t k = 0; k < out.size(); ++k) {
    const Datatype& t = side.TypeOf(k);
    if (!t.contiguous()) temp_bytes += static_cast<uint64_t>(side.counts[k] * t.size());
  }
  const Buf temp = temp_bytes > 0 ? b.Temp(temp_bytes) : Buf{};
  int64_t dense = 0;  // bytes into the user's buffer where no displacements are given
  uint64_t packed_at = 0;
  for (int i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    const Datatype& t = side.TypeOf(k);
    const int64_t displ = side.displs.empty()  ? dense
                          : side.types.empty() ? side.displs[k] * t.extent()
                                               : side.displs[k];  // alltoallw's: bytes
    const Buf layout = Buf::User(side.base, side.name) + static_cast<uint64_t>(displ);
    const bool packed = !t.contiguous();
    out[k].elems = side.bytes ? side.counts[k] * t.size() : side.counts[k];
    out[k].layout = layout;
    out[k].at = packed ? temp + packed_at : layout;
    if (packed && pack && side.counts[k] > 0 && (!mine_only || i == b.rank())) {
      packs->push_back(b.Pack(layout, side.counts[k], t, out[k].at));
    }
    if (packed && unpacks != nullptr && side.counts[k] > 0) unpacks->push_back({out[k].at, side.counts[k], t, layout});
    dense += side.counts[k] * t.extent();
    if (packed) packed_at += static_cast<uint64_t>(side.counts[k] * t.size());
  }
  return out;
}

// Builds `call` with algorithm `algo` (AlgorithmOf: chosen once per build).
absl::StatusOr<std::shared_ptr<Schedule>> Build(ScheduleBuilder& b, const CollectiveCall& call,
                                                const std::string& algo, bool runnable, bool oversubscribed) {
  const int n = b.size();
  const int r = b.rank();
  const char* coll = CollectiveName(call.kind);
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrFormat("%s (rank %d of %d): %s", coll, r, n, why));
  };
  if (call.kind >= Collective::kCount) return bad("no such collective");
  if (call.count < 0) return bad(absl::StrFormat("negative count %d", call.count));
  const Collective k = call.kind;
  if (Rooted(k) && (call.root < 0 || call.root >= n)) {
    return bad(absl::StrFormat("root %d is not a rank of a communicator of %d", call.root, n));
  }
  const bool root = r == call.root;
  // Two types: the receive side's, or alltoallw's per rank.
  const bool per_rank_types = !call.send_types.empty() || !call.recv_types.empty();
  const bool two = call.recv_type.has_value() || per_rank_types;
  if (call.recv_type.has_value() && !FixedBlocks(k) && !Varying(k)) {
    return bad("recv_type: only gather, scatter, allgather, alltoall and their v forms take one");
  }
  if (call.recv_type.has_value() && k == Collective::kReduceScatter) return bad("recv_type: a reduction takes one type");
  if (per_rank_types) {
    if (k != Collective::kAlltoallv) return bad("send_types and recv_types: only alltoallv takes them (alltoallw)");
    if (call.recv_type.has_value()) return bad("recv_type beside recv_types");
    const bool sends = call.send != kInPlace;
    if (call.recv_types.size() != static_cast<std::size_t>(n) ||
        (sends && call.send_types.size() != static_cast<std::size_t>(n))) {
      return bad(absl::StrFormat("%d send_types and %d recv_types for a communicator of %d", call.send_types.size(),
                                 call.recv_types.size(), n));
    }
  }
  const Datatype& rtype = RecvType(call);
  // Per-rank counts: checked where they count (the root's alone for gatherv and scatterv).
  const bool recv_counted = k == Collective::kAllgatherv || k == Collective::kAlltoallv ||
                            k == Collective::kReduceScatter || (k == Collective::kGatherv && root);
  const bool send_counted = k == Collective::kAlltoallv || (k == Collective::kScatterv && root);
  if (recv_counted) {
    const std::vector<int64_t> none;
    absl::Status s = CheckCounts(call.recv_counts, k == Collective::kReduceScatter ? none : call.recv_displs, n, "recv");
    if (!s.ok()) return bad(std::string(s.message()));
  }
  if (send_counted) {
    if (absl::Status s = CheckCounts(call.send_counts, call.send_displs, n, "send"); !s.ok()) {
      return bad(std::string(s.message()));
    }
  }
  // What this rank passes for its own block must agree with its entry in the counts.
  // Where the sides differ in type, their bytes must agree.
  {
    const auto me = static_cast<std::size_t>(r);
    auto bytes = [&](int64_t count, const Datatype& t) { return two ? count * t.size() : count; };
    const char* unit = two ? " bytes" : "";
    std::optional<std::pair<int64_t, std::string>> own;  // (its entry, the entry's name)
    int64_t mine = 0;
    if (k == Collective::kAllgatherv || (k == Collective::kGatherv && root && call.send != kInPlace)) {
      own = {bytes(call.recv_counts[me], rtype), absl::StrFormat("recv_counts[%d]", r)};
      mine = bytes(call.count, call.type);
    } else if (k == Collective::kScatterv && root && call.recv != kInPlace) {
      own = {bytes(call.send_counts[me], call.type), absl::StrFormat("send_counts[%d]", r)};
      mine = bytes(call.count, rtype);
    }
    if (own.has_value() && mine != own->first) {
      return bad(absl::StrFormat("count %d%s for this rank's own block but %s = %d%s", mine, unit, own->second,
                                 own->first, unit));
    }
    if (k == Collective::kAlltoallv && call.send != kInPlace) {
      const int64_t sent = bytes(call.send_counts[me], per_rank_types ? call.send_types[me] : call.type);
      const int64_t got = bytes(call.recv_counts[me], per_rank_types ? call.recv_types[me] : rtype);
      if (sent != got) {
        return bad(absl::StrFormat("send_counts[%d] = %d%s but recv_counts[%d] = %d%s (its own block)", r, sent, unit,
                                   r, got, unit));
      }
    }
    const bool block_bytes_differ = call.count * call.type.size() != call.recv_count * rtype.size();
    if (call.recv_type.has_value() && FixedBlocks(k) && block_bytes_differ) {
      return bad(absl::StrFormat("a block sent is %d of %s (%d bytes) but a block received %d of %s (%d bytes)",
                                 call.count, call.type.name(), call.count * call.type.size(), call.recv_count,
                                 rtype.name(), call.recv_count * rtype.size()));
    }
  }
  const Shape shape = ShapeOf(call, r, n);
  if (Reduces(k) && !call.op.has_value()) return bad("no reduction operator");
  if (Reduces(k) && std::max(shape.send, shape.in_place) > 0) {
    if (absl::Status s = call.op->Check(call.type); !s.ok()) return bad(std::string(s.message()));
  }
  const bool scatter_in_place = (k == Collective::kScatter || k == Collective::kScatterv) && call.recv == kInPlace;
  const bool in_place = call.send == kInPlace || scatter_in_place;
  const bool may_in_place =
      k == Collective::kAllreduce || k == Collective::kAllgather || k == Collective::kAlltoall ||
      k == Collective::kAllgatherv || k == Collective::kAlltoallv || k == Collective::kReduceScatter ||
      k == Collective::kReduceScatterBlock || k == Collective::kScan || k == Collective::kExscan ||
      (root && (k == Collective::kReduce || k == Collective::kGather || k == Collective::kGatherv)) ||
      (root && scatter_in_place && call.send != kInPlace);
  if (in_place && !may_in_place) {
    return bad("kInPlace is not allowed here (MPI allows it as the send buffer at the root of reduce, gather and "
               "gatherv, as the receive buffer at the root of scatter and scatterv, and on every rank of the "
               "allreduce, allgather(v), alltoall(v), reduce_scatter(_block), scan and exscan)");
  }
  // Two types: the algorithm moves bytes, each side packed by its own type.
  const uint64_t es = two ? 1 : static_cast<uint64_t>(call.type.size());
  int64_t count = call.count;
  if (two && k != Collective::kAlltoallv) count *= k == Collective::kScatterv ? rtype.size() : call.type.size();
  if (call.algorithm.empty()) {
    if (absl::StatusOr<const std::vector<SelectionRule>*> f = SelectionFileRules(); !f.ok()) {
      return bad(std::string(f.status().message()));
    }
  }
  const Algorithm* a = Find(k, algo);
  if (a == nullptr) {
    std::string names;
    for (const AlgorithmInfo& i : Algorithms()) {
      if (i.collective == k) absl::StrAppend(&names, names.empty() ? "" : ", ", i.name);
    }
    return bad(absl::StrFormat("no algorithm '%s' (there are: %s)", algo, names));
  }
  const bool commutative = !call.op.has_value() || call.op->commutative();
  if (a->info.commutative_only && !commutative) {
    return bad(absl::StrFormat("algorithm %s needs a commutative operator", algo));
  }
  if (runnable) {
    const bool send_used =
        shape.send > 0 || (shape.send_blocks && Sum(call.send_counts) > 0 && !(k == Collective::kAlltoallv && in_place));
    if (send_used && !(in_place && call.send == kInPlace) && call.send == nullptr) return bad("null send buffer");
    const bool recv_used = shape.recv > 0 || (shape.recv_blocks && Sum(call.recv_counts) > 0);
    if (recv_used && call.recv == nullptr) return bad("null receive buffer");
  }

  // Non-contiguous types travel packed: pack first, unpack last.
  const bool send_packed = !call.type.contiguous() && k != Collective::kBarrier;
  const bool recv_packed = !rtype.contiguous() && k != Collective::kBarrier;
  const auto send_es = static_cast<uint64_t>(call.type.size());
  const auto recv_es = static_cast<uint64_t>(rtype.size());
  const void* send_base = call.send == kInPlace ? call.recv : call.send;
  Buf send = Buf::User(send_base, call.send == kInPlace ? "recv" : "send");
  Buf recv = Buf::User(call.recv, "recv");
  std::vector<VertexId> packs;
  std::vector<Unpacking> unpacks;
  const bool root_bcast = k == Collective::kBcast && root;
  // In place (and a bcast's root) the input is the receive buffer, laid out by the receive type.
  const bool input_in_recv = (in_place && !scatter_in_place) || root_bcast;
  if (recv_packed) {
    const int64_t room = std::max(shape.recv, in_place || root_bcast ? shape.in_place : int64_t{0});
    recv = room > 0 ? b.Temp(static_cast<uint64_t>(room) * recv_es) : Buf{};
    if (input_in_recv) {
      send = recv;
      if (shape.in_place > 0) packs.push_back(b.Pack(Buf::User(call.recv, "recv"), shape.in_place, rtype, recv));
    }
  }
  if (send_packed && !input_in_recv && shape.send > 0) {
    send = b.Temp(static_cast<uint64_t>(shape.send) * send_es);
    packs.push_back(b.Pack(Buf::User(call.send, "send"), shape.send, call.type, send));
  }
  const Datatype algo_type = two ? Datatype::Basic(BasicType::kByte) : call.type;
  Ctx c{b, r, n, send, recv, in_place, count, algo_type, es, call.op, call.root, {}, {}, {}, oversubscribed};
  if (k == Collective::kBcast) c.send = c.recv;
  if (shape.recv_blocks) {
    // In place, this rank's block of the receive buffer is its input (all of them for alltoallv).
    const Side side{call.recv_counts, call.recv_displs, call.recv, "recv", rtype, call.recv_types, two};
    c.rblk = Blocks(b, side, in_place, k != Collective::kAlltoallv, &packs, &unpacks);
  }
  if (shape.send_blocks) {
    const Side side{call.send_counts, call.send_displs, call.send, "send", call.type, call.send_types, two};
    c.sblk = k == Collective::kAlltoallv && in_place ? c.rblk : Blocks(b, side, true, false, &packs, nullptr);
  }
  if (k == Collective::kReduceScatter || k == Collective::kReduceScatterBlock) {
    c.parts.assign(static_cast<std::size_t>(n) + 1, 0);
    for (int i = 0; i < n; ++i) {
      const auto q = static_cast<std::size_t>(i);
      c.parts[q + 1] = c.parts[q] + (k == Collective::kReduceScatter ? call.recv_counts[q] : call.count);
    }
  }
  const std::size_t first = b.vertices().size();
  CARTAGE_RETURN_IF_ERROR(a->build(c));
  if (!packs.empty()) {
    const VertexId packed_all = packs.size() == 1 ? packs[0] : b.Fence(packs);
    for (std::size_t v = first; v < b.vertices().size(); ++v) {
      if (static_cast<VertexId>(v) != packed_all && b.vertices()[v].after.empty()) {
        b.Depend(packed_all, static_cast<VertexId>(v));
      }
    }
  }
  const bool unpack_run = recv_packed && shape.recv > 0 && !root_bcast;
  if (unpack_run || !unpacks.empty()) {
    std::vector<VertexId> sinks = alg::SinksSince(b, first);
    if (sinks.empty() && !packs.empty()) sinks = packs;
    if (unpack_run) b.Unpack(recv, shape.recv, rtype, Buf::User(call.recv, "recv"), sinks);
    for (const Unpacking& u : unpacks) b.Unpack(u.at, u.count, u.type, u.layout, sinks);
  }
  absl::StatusOr<std::shared_ptr<Schedule>> s = b.Build();
  if (!s.ok()) return absl::Status(s.status().code(), absl::StrCat(coll, "/", algo, ": ", s.status().message()));
  return s;
}

std::string ScheduleName(const CollectiveCall& call, const std::string& algo) {
  return absl::StrCat(CollectiveName(call.kind), "/", algo);
}

}  // namespace

alg::Explain alg::ExplainMode() {
  static const Explain kMode = [] {
    const char* v = std::getenv("CARTAGE_COLL_EXPLAIN");
    if (v == nullptr || *v == '\0' || absl::string_view(v) == "0") return Explain::kOff;
    return absl::string_view(v) == "all" ? Explain::kAll : Explain::kFirst;
  }();
  return kMode;
}

void alg::PrintExplanation(int rank, const std::string& why) {
  std::fprintf(stderr, "cartage[%d]: %s\n", rank, why.c_str());
}

absl::StatusOr<std::shared_ptr<Schedule>> alg::BuildOn(const Comm& comm, const CollectiveCall& as_called,
                                                       std::optional<uint32_t> sequence) {
  CollectiveCall one;
  const CollectiveCall& call = OneTypeWhereItCan(as_called, comm.rank(), &one);
  const bool oversubscribed = comm.Oversubscribed();
  const std::string algo = AlgorithmOf(call, comm.size(), oversubscribed, comm.Crowded());
  ScheduleBuilder b(comm, ScheduleName(call, algo));
  if (sequence.has_value()) b.UseSequence(*sequence);
  if (Rooted(call.kind)) b.Span(absl::StrCat(ScheduleName(call, algo), " root ", call.root));
  if (const Explain mode = ExplainMode(); mode != Explain::kOff) {
    const bool commutative = !call.op.has_value() || call.op->commutative();
    std::string why = call.algorithm.empty()
                          ? ExplainSelection(call.kind, SelectionBytes(call, comm.size()), comm.size(), commutative,
                                             oversubscribed, comm.Crowded())
                          : absl::StrFormat("%s on %d ranks: %s (asked for by the call)", CollectiveName(call.kind),
                                            comm.size(), algo);
    if (mode == Explain::kAll) {
      b.Explain(std::move(why));
    } else {
      // Once per distinct shape: the words name everything the choice depends on.
      static std::mutex mu;
      static auto* seen = new std::unordered_set<std::string>();
      std::lock_guard<std::mutex> lock(mu);
      if (seen->insert(why).second) PrintExplanation(comm.rank(), why);
    }
  }
  return Build(b, call, algo, /*runnable=*/true, oversubscribed);
}

absl::StatusOr<std::shared_ptr<Schedule>> BuildCollective(const Comm& comm, const CollectiveCall& call) {
  CARTAGE_RETURN_IF_ERROR(engine::Alive(comm, CollectiveName(call.kind)));
  return alg::BuildOn(comm, call, std::nullopt);
}

absl::StatusOr<std::shared_ptr<Schedule>> BuildCollective(int rank, int size, const CollectiveCall& call) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: rank %d of %d", CollectiveName(call.kind), rank, size));
  }
  CollectiveCall one;
  const CollectiveCall& one_type = OneTypeWhereItCan(call, rank, &one);
  const std::string algo = AlgorithmOf(one_type, size, /*oversubscribed=*/false, /*crowded=*/false);
  ScheduleBuilder b(rank, size, ScheduleName(one_type, algo));
  return Build(b, one_type, algo, /*runnable=*/false, /*oversubscribed=*/false);
}

}  // namespace cartage
