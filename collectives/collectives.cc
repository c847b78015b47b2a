// The collectives' calls: building a call's schedule (argument checks,
// packing of non-contiguous types, the algorithm), the blocking calls'
// schedule cache, and the MPI forms.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "collectives/algorithms.h"

namespace cartage {

using alg::Algorithm;
using alg::Ctx;
using alg::Find;

namespace {

// What one rank's buffers hold in a call, in elements of the call's type.
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

Shape ShapeOf(const CollectiveCall& call, int rank, int n) {
  const int64_t c = call.count;
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

// The bytes the selection table picks by: the same on every rank (only
// what every rank passes alike), so every rank picks the same algorithm.
uint64_t SelectionBytes(const CollectiveCall& call, int n) {
  const auto es = static_cast<uint64_t>(call.type.size());
  switch (call.kind) {
    case Collective::kAllgatherv: return static_cast<uint64_t>(Sum(call.recv_counts) / std::max(n, 1)) * es;
    case Collective::kReduceScatter: return static_cast<uint64_t>(Sum(call.recv_counts)) * es;
    case Collective::kReduceScatterBlock: return static_cast<uint64_t>(call.count) * static_cast<uint64_t>(n) * es;
    case Collective::kGatherv:
    case Collective::kScatterv:
    case Collective::kAlltoallv: return 0;  // counts known at the root alone, or different on every rank
    default: return static_cast<uint64_t>(call.count) * es;
  }
}

std::string AlgorithmOf(const CollectiveCall& call, int n, bool oversubscribed) {
  const bool commutative = !call.op.has_value() || call.op->commutative();
  return call.algorithm.empty() ? SelectAlgorithm(call.kind, SelectionBytes(call, n), n, commutative, oversubscribed)
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

// One side's per-rank blocks, packed: in the user's buffer at its
// displacements for a contiguous type, else in one temporary (rank order)
// that `pack` (when the side is input) fills block by block, `packs`
// collecting the pack vertices; `mine_only` packs only this rank's block.
std::vector<alg::Block> Blocks(ScheduleBuilder& b, const std::vector<int64_t>& counts,
                               const std::vector<int64_t>& displs, const void* base, const char* name,
                               const Datatype& type, bool packed, bool pack, bool mine_only,
                               std::vector<VertexId>* packs) {
  const int n = b.size();
  const auto es = static_cast<uint64_t>(type.size());
  std::vector<alg::Block> out(static_cast<std::size_t>(n));
  Buf temp = packed ? b.Temp(static_cast<uint64_t>(Sum(counts)) * es) : Buf{};
  int64_t dense = 0;
  for (int i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    const int64_t displ = displs.empty() ? dense : displs[k];
    const Buf layout = Buf::User(base, name) + static_cast<uint64_t>(displ * type.extent());
    out[k].elems = counts[k];
    out[k].layout = layout;
    out[k].at = packed ? temp + static_cast<uint64_t>(dense) * es : layout;
    if (packed && pack && counts[k] > 0 && (!mine_only || i == b.rank())) {
      packs->push_back(b.Pack(layout, counts[k], type, out[k].at));
    }
    dense += counts[k];
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
  {
    const auto me = static_cast<std::size_t>(r);
    std::optional<std::pair<int64_t, std::string>> own;  // (its entry, the entry's name)
    if (k == Collective::kAllgatherv || (k == Collective::kGatherv && root && call.send != kInPlace)) {
      own = {call.recv_counts[me], absl::StrFormat("recv_counts[%d]", r)};
    } else if (k == Collective::kScatterv && root && call.recv != kInPlace) {
      own = {call.send_counts[me], absl::StrFormat("send_counts[%d]", r)};
    }
    if (own.has_value() && call.count != own->first) {
      return bad(absl::StrFormat("count %d for this rank's own block but %s = %d", call.count, own->second,
                                 own->first));
    }
    if (k == Collective::kAlltoallv && call.send != kInPlace && call.send_counts[me] != call.recv_counts[me]) {
      return bad(absl::StrFormat("send_counts[%d] = %d but recv_counts[%d] = %d (its own block)", r,
                                 call.send_counts[me], r, call.recv_counts[me]));
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
  const uint64_t es = static_cast<uint64_t>(call.type.size());
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
  const bool packed = !call.type.contiguous() && k != Collective::kBarrier;
  const void* send_base = call.send == kInPlace ? call.recv : call.send;
  Buf send = Buf::User(send_base, call.send == kInPlace ? "recv" : "send");
  Buf recv = Buf::User(call.recv, "recv");
  std::vector<VertexId> packs;
  const bool root_bcast = k == Collective::kBcast && root;
  if (packed) {
    const int64_t room = std::max(shape.recv, in_place || root_bcast ? shape.in_place : int64_t{0});
    recv = room > 0 ? b.Temp(static_cast<uint64_t>(room) * es) : Buf{};
    if ((in_place && !scatter_in_place) || root_bcast) {
      send = recv;
      if (shape.in_place > 0) packs.push_back(b.Pack(Buf::User(call.recv, "recv"), shape.in_place, call.type, recv));
    } else if (shape.send > 0) {
      send = b.Temp(static_cast<uint64_t>(shape.send) * es);
      packs.push_back(b.Pack(Buf::User(call.send, "send"), shape.send, call.type, send));
    }
  }
  Ctx c{b, r, n, send, recv, in_place, call.count, call.type, es, call.op, call.root, {}, {}, {}, oversubscribed};
  if (k == Collective::kBcast) c.send = c.recv;
  if (shape.recv_blocks) {
    // In place, this rank's block of the receive buffer is its input (all of them for alltoallv).
    c.rblk = Blocks(b, call.recv_counts, call.recv_displs, call.recv, "recv", call.type, packed, in_place,
                    k != Collective::kAlltoallv, &packs);
  }
  if (shape.send_blocks) {
    c.sblk = k == Collective::kAlltoallv && in_place
                 ? c.rblk
                 : Blocks(b, call.send_counts, call.send_displs, call.send, "send", call.type, packed, true,
                               false, &packs);
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
  if (packed) {
    if (!packs.empty()) {
      const VertexId packed_all = packs.size() == 1 ? packs[0] : b.Fence(packs);
      for (std::size_t v = first; v < b.vertices().size(); ++v) {
        if (static_cast<VertexId>(v) != packed_all && b.vertices()[v].after.empty()) {
          b.Depend(packed_all, static_cast<VertexId>(v));
        }
      }
    }
    std::vector<VertexId> sinks = alg::SinksSince(b, first);
    if (sinks.empty() && !packs.empty()) sinks = packs;
    if (shape.recv > 0 && !root_bcast) b.Unpack(recv, shape.recv, call.type, Buf::User(call.recv, "recv"), sinks);
    for (const alg::Block& blk : c.rblk) {
      if (blk.elems > 0) b.Unpack(blk.at, blk.elems, call.type, blk.layout, sinks);
    }
  }
  absl::StatusOr<std::shared_ptr<Schedule>> s = b.Build();
  if (!s.ok()) return absl::Status(s.status().code(), absl::StrCat(coll, "/", algo, ": ", s.status().message()));
  return s;
}

std::string ScheduleName(const CollectiveCall& call, const std::string& algo) {
  return absl::StrCat(CollectiveName(call.kind), "/", algo);
}

}  // namespace

namespace {
// A runnable schedule of `call` on `comm`; under `sequence` if given (a
// rebuild that must keep the number the other ranks' schedules have), else
// the communicator's next.
absl::StatusOr<std::shared_ptr<Schedule>> BuildOn(const Comm& comm, const CollectiveCall& call,
                                                  std::optional<uint32_t> sequence) {
  const bool oversubscribed = comm.Oversubscribed();
  const std::string algo = AlgorithmOf(call, comm.size(), oversubscribed);
  ScheduleBuilder b(comm, ScheduleName(call, algo));
  if (sequence.has_value()) b.UseSequence(*sequence);
  return Build(b, call, algo, /*runnable=*/true, oversubscribed);
}
}  // namespace

absl::StatusOr<std::shared_ptr<Schedule>> BuildCollective(const Comm& comm, const CollectiveCall& call) {
  return BuildOn(comm, call, std::nullopt);
}

absl::StatusOr<std::shared_ptr<Schedule>> BuildCollective(int rank, int size, const CollectiveCall& call) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: rank %d of %d", CollectiveName(call.kind), rank, size));
  }
  const std::string algo = AlgorithmOf(call, size, /*oversubscribed=*/false);
  ScheduleBuilder b(rank, size, ScheduleName(call, algo));
  return Build(b, call, algo, /*runnable=*/false, /*oversubscribed=*/false);
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

// A blocking call's arguments as the typed calls (Allreduce, Bcast, ...)
// receive them, by reference: all the cache compares, so a call that reuses
// a schedule constructs nothing (no CollectiveCall with its vectors and
// string, no copy of its type): about 7 % of an 8-byte bcast's stores
// (callgrind), and on the VM's far placement a call's stores are what pace
// it (bench/RESULTS.md).
struct CallView {
  Collective kind = Collective::kBarrier;
  const void* send = nullptr;
  void* recv = nullptr;
  int64_t count = 0;
  const Datatype* type = nullptr;
  const Op* op = nullptr;       // the reducing collectives
  int root = 0;
  std::string_view algorithm;  // empty: the selection table's
};

CallView ViewOf(const CollectiveCall& c) {
  return {c.kind, c.send, c.recv, c.count, &c.type, c.op.has_value() ? &*c.op : nullptr, c.root, c.algorithm};
}

// A fixed-shape call (no counts or displacements), by the selection table.
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

// The call a view shows. The fixed-shape calls the cache serves have no
// counts or displacements: the view holds all of them.
CollectiveCall CallOf(const CallView& v) {
  CollectiveCall c = Call(v.kind, v.send, v.recv, v.count, *v.type,
                          v.op != nullptr ? std::optional<Op>(*v.op) : std::nullopt, v.root);
  c.algorithm = std::string(v.algorithm);
  return c;
}

// What makes two calls the same schedule (the buffers aside). Only what
// every rank passes alike: whether the root alone passes kInPlace is not in
// it (a rank-dependent key would let one rank reuse a schedule, and its
// tags, while another builds a new one).
struct CacheKey {
  uint32_t context;
  int size;
  CollectiveCall call;  // send and recv are not compared: they are the buffers the schedule is bound to
  // Whether a call on (context, size) is this key.
  // The cheap words first: a loop's call is this key, and its datatype the
  // very one the key holds (one committed type: equal without a look inside).
  bool Matches(uint32_t ctx, int n, const CallView& b) const {
    const CollectiveCall& a = call;
    if (context != ctx || size != n || a.kind != b.kind || a.count != b.count || a.root != b.root) return false;
    if (a.op.has_value() != (b.op != nullptr)) return false;
    if (a.op.has_value() && (a.op->kind() != b.op->kind() || a.op->fn() != b.op->fn() ||
                             a.op->context() != b.op->context() || a.op->commutative() != b.op->commutative())) {
      return false;
    }
    if (a.algorithm != b.algorithm) return false;
    if (&a.type.nodes() == &b.type->nodes()) return true;
    return a.type.size() == b.type->size() && a.type.extent() == b.type->extent() &&
           a.type.true_lb() == b.type->true_lb() && a.type.name() == b.type->name();
  }
};

class ScheduleCache {
 public:
  struct Entry {
    CacheKey key;
    bool in_place;
    std::shared_ptr<Schedule> schedule;
  };
  // The entry for `call`, made the most recent; null if none.
  Entry* Find(uint32_t context, int size, const CallView& call) {
    for (std::size_t i = entries_.size(); i-- > 0;) {  // the most recent first
      if (entries_[i].key.Matches(context, size, call)) {
        if (i + 1 == entries_.size()) return &entries_.back();  // the most recent already
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

// Runs a blocking call of a fixed shape (not a v form) through the cache;
// the CollectiveCall to build from is made on a miss only.
absl::Status RunCached(const Comm& comm, const CallView& view) {
  // One cache per agent: its schedules hold the agent's CARs, and a later
  // agent in this process reuses the same context ids.
  static const char kCacheKey = 0;
  auto* cache = static_cast<ScheduleCache*>(
      comm.AgentState(&kCacheKey, []() -> std::shared_ptr<void> { return std::make_shared<ScheduleCache>(); }));
  // kInPlace as the send buffer, or (scatter's root) as the receive buffer.
  const bool in_place = view.send == kInPlace || view.recv == kInPlace;
  ScheduleCache::Entry* hit = cache->Find(comm.context(), comm.size(), view);
  if (hit == nullptr) {
    CollectiveCall call = CallOf(view);
    CARTAGE_ASSIGN_OR_RETURN(std::shared_ptr<Schedule> s, BuildCollective(comm, call));
    cache->Add(CacheKey{comm.context(), comm.size(), std::move(call)}, in_place, s);
    return s->Run();
  }
  CollectiveCall& bound = hit->key.call;  // its buffers: those the schedule is bound to now
  if (hit->in_place != in_place) {
    // This rank's part changed shape (the root switched to or from kInPlace):
    // rebuild it under the same sequence number, as the other ranks reuse theirs.
    bound.send = view.send;
    bound.recv = view.recv;
    CARTAGE_ASSIGN_OR_RETURN(hit->schedule, BuildOn(comm, bound, hit->schedule->sequence()));
    hit->in_place = in_place;
    return hit->schedule->Run();
  }
  if (bound.send != view.send || bound.recv != view.recv) {  // a loop over the same buffers skips this
    hit->schedule->RebindUser("send", view.send == kInPlace ? view.recv : view.send);
    hit->schedule->RebindUser("recv", view.recv);
    bound.send = view.send;
    bound.recv = view.recv;
  }
  return hit->schedule->Run();
}

// A typed blocking call (Allreduce, Bcast, ...): `op` null where it has none.
absl::Status RunTyped(const Comm& comm, Collective kind, const void* send, void* recv, int64_t count,
                      const Datatype& type, const Op* op, int root) {
  return RunCached(comm, CallView{kind, send, recv, count, &type, op, root, {}});
}

}  // namespace

absl::Status RunCollective(const Comm& comm, const CollectiveCall& call) {
  if (Varying(call.kind)) {  // counts known at the root alone, or differing by rank: no cache key every rank shares
    CARTAGE_ASSIGN_OR_RETURN(std::shared_ptr<Schedule> s, BuildCollective(comm, call));
    return s->Run();
  }
  return RunCached(comm, ViewOf(call));
}

absl::Status StartCollective(const Comm& comm, const CollectiveCall& call, Request* req) {
  CARTAGE_ASSIGN_OR_RETURN(std::shared_ptr<Schedule> s, BuildCollective(comm, call));
  return s->Start(req);
}

absl::Status InitCollective(const Comm& comm, const CollectiveCall& call, Request* req) {
  CARTAGE_ASSIGN_OR_RETURN(std::shared_ptr<Schedule> s, BuildCollective(comm, call));
  return s->Bind(req);
}

absl::Status Barrier(const Comm& comm) {
  static const Datatype kByte = Datatype::Basic(BasicType::kByte);  // CollectiveCall's default
  return RunTyped(comm, Collective::kBarrier, nullptr, nullptr, 0, kByte, nullptr, 0);
}
absl::Status Ibarrier(const Comm& comm, Request* req) { return StartCollective(comm, CollectiveCall{}, req); }
absl::Status Bcast(const Comm& comm, void* buf, int64_t count, const Datatype& type, int root) {
  return RunTyped(comm, Collective::kBcast, buf, buf, count, type, nullptr, root);
}
absl::Status Ibcast(const Comm& comm, void* buf, int64_t count, const Datatype& type, int root, Request* req) {
  return StartCollective(comm, Call(Collective::kBcast, buf, buf, count, type, std::nullopt, root), req);
}
absl::Status Reduce(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                    const Op& op, int root) {
  return RunTyped(comm, Collective::kReduce, send, recv, count, type, &op, root);
}
absl::Status Ireduce(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                     const Op& op, int root, Request* req) {
  return StartCollective(comm, Call(Collective::kReduce, send, recv, count, type, op, root), req);
}
absl::Status Allreduce(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                       const Op& op) {
  return RunTyped(comm, Collective::kAllreduce, send, recv, count, type, &op, 0);
}
absl::Status Iallreduce(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                        const Op& op, Request* req) {
  return StartCollective(comm, Call(Collective::kAllreduce, send, recv, count, type, op, 0), req);
}
absl::Status Gather(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type, int root) {
  return RunTyped(comm, Collective::kGather, send, recv, count, type, nullptr, root);
}
absl::Status Scatter(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                     int root) {
  return RunTyped(comm, Collective::kScatter, send, recv, count, type, nullptr, root);
}
absl::Status Allgather(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type) {
  return RunTyped(comm, Collective::kAllgather, send, recv, count, type, nullptr, 0);
}
absl::Status Iallgather(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                        Request* req) {
  return StartCollective(comm, Call(Collective::kAllgather, send, recv, count, type, std::nullopt, 0), req);
}
absl::Status Alltoall(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type) {
  return RunTyped(comm, Collective::kAlltoall, send, recv, count, type, nullptr, 0);
}
absl::Status Ialltoall(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                       Request* req) {
  return StartCollective(comm, Call(Collective::kAlltoall, send, recv, count, type, std::nullopt, 0), req);
}


namespace {
std::vector<int64_t> Vec(absl::Span<const int64_t> s) { return {s.begin(), s.end()}; }
}  // namespace

absl::Status Gatherv(const Comm& comm, const void* send, int64_t send_count, void* recv,
                     absl::Span<const int64_t> recv_counts, absl::Span<const int64_t> recv_displs,
                     const Datatype& type, int root) {
  CollectiveCall c = Call(Collective::kGatherv, send, recv, send_count, type, std::nullopt, root);
  c.recv_counts = Vec(recv_counts);
  c.recv_displs = Vec(recv_displs);
  return RunCollective(comm, c);
}
absl::Status Scatterv(const Comm& comm, const void* send, absl::Span<const int64_t> send_counts,
                      absl::Span<const int64_t> send_displs, void* recv, int64_t recv_count, const Datatype& type,
                      int root) {
  CollectiveCall c = Call(Collective::kScatterv, send, recv, recv_count, type, std::nullopt, root);
  c.send_counts = Vec(send_counts);
  c.send_displs = Vec(send_displs);
  return RunCollective(comm, c);
}
absl::Status Allgatherv(const Comm& comm, const void* send, int64_t send_count, void* recv,
                        absl::Span<const int64_t> recv_counts, absl::Span<const int64_t> recv_displs,
                        const Datatype& type) {
  CollectiveCall c = Call(Collective::kAllgatherv, send, recv, send_count, type, std::nullopt, 0);
  c.recv_counts = Vec(recv_counts);
  c.recv_displs = Vec(recv_displs);
  return RunCollective(comm, c);
}
absl::Status Alltoallv(const Comm& comm, const void* send, absl::Span<const int64_t> send_counts,
                       absl::Span<const int64_t> send_displs, void* recv, absl::Span<const int64_t> recv_counts,
                       absl::Span<const int64_t> recv_displs, const Datatype& type) {
  CollectiveCall c = Call(Collective::kAlltoallv, send, recv, 0, type, std::nullopt, 0);
  c.send_counts = Vec(send_counts);
  c.send_displs = Vec(send_displs);
  c.recv_counts = Vec(recv_counts);
  c.recv_displs = Vec(recv_displs);
  return RunCollective(comm, c);
}
absl::Status ReduceScatter(const Comm& comm, const void* send, void* recv, absl::Span<const int64_t> recv_counts,
                           const Datatype& type, const Op& op) {
  CollectiveCall c = Call(Collective::kReduceScatter, send, recv, 0, type, op, 0);
  c.recv_counts = Vec(recv_counts);
  return RunCollective(comm, c);
}
absl::Status ReduceScatterBlock(const Comm& comm, const void* send, void* recv, int64_t recv_count,
                                const Datatype& type, const Op& op) {
  return RunTyped(comm, Collective::kReduceScatterBlock, send, recv, recv_count, type, &op, 0);
}
absl::Status Scan(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type, const Op& op) {
  return RunTyped(comm, Collective::kScan, send, recv, count, type, &op, 0);
}
absl::Status Exscan(const Comm& comm, const void* send, void* recv, int64_t count, const Datatype& type,
                    const Op& op) {
  return RunTyped(comm, Collective::kExscan, send, recv, count, type, &op, 0);
}

}  // namespace cartage
