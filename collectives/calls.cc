// The collectives' calls: the blocking calls' schedule cache, and the MPI
// forms (blocking, nonblocking, persistent) over the schedules collectives.cc
// builds.
#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/strings/str_format.h"
#include "collectives/algorithms.h"

namespace cartage {

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
// a schedule constructs nothing (cartage-bench bcast 8 B).
struct CallView {
  Collective kind = Collective::kBarrier;
  const void* send = nullptr;
  void* recv = nullptr;
  int64_t count = 0;
  const Datatype* type = nullptr;
  const Op* op = nullptr;       // the reducing collectives
  int root = 0;
  std::string_view algorithm;  // empty: the selection table's
  const Datatype* recv_type = nullptr;  // the receive side's, where it differs
  int64_t recv_count = 0;
};

CallView ViewOf(const CollectiveCall& c) {
  return {c.kind, c.send,      c.recv, c.count, &c.type, c.op.has_value() ? &*c.op : nullptr,
          c.root, c.algorithm, c.recv_type.has_value() ? &*c.recv_type : nullptr, c.recv_count};
}

bool SameType(const Datatype& a, const Datatype& b) {
  if (&a.nodes() == &b.nodes()) return true;
  return a.size() == b.size() && a.extent() == b.extent() && a.true_lb() == b.true_lb() && a.name() == b.name();
}

// Whether this rank lays out a call of a cached key as the key's call does.
bool SameLayout(const CollectiveCall& a, const CallView& b) {
  if (a.count != b.count || !SameType(a.type, *b.type)) return false;
  if (a.recv_type.has_value() != (b.recv_type != nullptr)) return false;
  return b.recv_type == nullptr || (a.recv_count == b.recv_count && SameType(*a.recv_type, *b.recv_type));
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
  if (v.recv_type != nullptr) c.recv_type = *v.recv_type;
  c.recv_count = v.recv_count;
  return c;
}

// What makes two calls the same schedule (the buffers aside). Only what
// every rank passes alike: whether the root alone passes kInPlace is not in
// it, nor how a rank lays out a block it moves, only the block's bytes (a
// rank-dependent key would let one rank reuse a schedule, and its tags,
// while another builds a new one). A hit laid out otherwise is rebuilt
// under the same sequence number (RunRebound).
struct CacheKey {
  uint32_t context;
  int size;
  CollectiveCall call;  // send and recv are not compared: they are the buffers the schedule is bound to
  // Whether a call on (context, size) is this key.
  // The cheap words first: a loop's call is this key, and its datatype the
  // very one the key holds (one committed type: equal without a look inside).
  bool Matches(uint32_t ctx, int n, const CallView& b) const {
    const CollectiveCall& a = call;
    if (context != ctx || size != n || a.kind != b.kind || a.root != b.root) return false;
    if (alg::FixedBlocks(a.kind)) {
      return a.algorithm == b.algorithm && a.count * a.type.size() == b.count * b.type->size();
    }
    if (a.count != b.count) return false;
    if (a.op.has_value() != (b.op != nullptr)) return false;
    if (a.op.has_value() && (a.op->kind() != b.op->kind() || a.op->fn() != b.op->fn() ||
                             a.op->context() != b.op->context() || a.op->commutative() != b.op->commutative())) {
      return false;
    }
    if (a.algorithm != b.algorithm) return false;
    return SameType(a.type, *b.type);
  }
};

class ScheduleCache : public engine::Extension {
 public:
  struct Entry {
    CacheKey key;
    bool in_place;
    std::shared_ptr<Schedule> schedule;
    bool failed = false;  // a run of it failed
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
    if (entries_.size() == kCapacity) {  // the least recently used goes; its sequence number stays
      Entry& old = entries_.front();
      // Not a failed one's: ranks that disagreed about a call (a count)
      // had different keys for it, and none may bring its number back.
      if (!old.failed) {
        if (forgotten_.size() == kForgottenCapacity) forgotten_.pop_front();
        forgotten_.push_back({std::move(old.key), old.schedule->sequence()});
      }
      entries_.erase(entries_.begin());
    }
    entries_.push_back({std::move(key), in_place, std::move(s), false});
  }
  // Marks the entry that holds `s` as failed, if one still does. Looked up
  // afresh: while a schedule runs, other threads' calls may move the entries.
  void MarkFailed(const Schedule* s) {
    for (Entry& e : entries_) {
      if (e.schedule.get() == s) e.failed = true;
    }
  }
  // The sequence number of a schedule for `call` this cache let go, if it
  // did (and forgets it: the schedule is built again under that number).
  // Which calls a rank's cache lets go depends on what else that rank ran,
  // on every communicator; another rank of this one may still hold the
  // schedule and reuse its tags, so a rebuilt one must use them too.
  std::optional<uint32_t> Forgotten(uint32_t context, int size, const CallView& call) {
    for (auto it = forgotten_.begin(); it != forgotten_.end(); ++it) {
      if (it->key.Matches(context, size, call)) {
        const uint32_t sequence = it->sequence;
        forgotten_.erase(it);
        return sequence;
      }
    }
    return std::nullopt;
  }

 private:
  struct Forgot {
    CacheKey key;
    uint32_t sequence;
  };
  static constexpr std::size_t kCapacity = 16;
  // Keys only (no schedules): many, so that a call comes back long before
  // its number is dropped.
  static constexpr std::size_t kForgottenCapacity = 4096;
  std::vector<Entry> entries_;
  std::deque<Forgot> forgotten_;
};

// A call the cache has no schedule for: built, kept, run.
ABSL_ATTRIBUTE_NOINLINE absl::Status RunMissed(const Comm& comm, const CallView& view, ScheduleCache& cache,
                                               bool in_place) {
  CollectiveCall call = CallOf(view);
  const std::optional<uint32_t> sequence = cache.Forgotten(comm.context(), comm.size(), view);
  CARTAGE_ASSIGN_OR_RETURN(std::shared_ptr<Schedule> s, alg::BuildOn(comm, call, sequence));
  cache.Add(CacheKey{comm.context(), comm.size(), std::move(call)}, in_place, s);
  absl::Status st = s->Run();
  if (!st.ok()) [[unlikely]] cache.MarkFailed(s.get());
  return st;
}

// A cached schedule called with other buffers, or whose rank's part changed
// shape: rebound or rebuilt, then run.
ABSL_ATTRIBUTE_NOINLINE absl::Status RunRebound(const Comm& comm, const CallView& view, ScheduleCache& cache,
                                                ScheduleCache::Entry& hit,
                                                bool in_place) {
  CollectiveCall& bound = hit.key.call;  // its buffers: those the schedule is bound to now
  bound.send = view.send;
  bound.recv = view.recv;
  if (hit.in_place != in_place || !SameLayout(bound, view)) {
    // This rank's part changed shape (the root switched to or from kInPlace,
    // or a block's layout changed): rebuild it under the same sequence
    // number, as the other ranks reuse theirs.
    bound = CallOf(view);
    CARTAGE_ASSIGN_OR_RETURN(hit.schedule, alg::BuildOn(comm, bound, hit.schedule->sequence()));
    hit.in_place = in_place;
  } else {
    hit.schedule->RebindUser("send", view.send == kInPlace ? view.recv : view.send);
    hit.schedule->RebindUser("recv", view.recv);
  }
  Schedule* s = hit.schedule.get();
  absl::Status st = s->Run();
  if (!st.ok()) [[unlikely]] cache.MarkFailed(s);
  return st;
}

// Runs a blocking call of a fixed shape (not a v form) through the cache;
// the CollectiveCall to build from is made on a miss only. A loop's call
// (same schedule, same buffers) takes the short way: a lookup and the run,
// the rest out of line (inlined, it cost a 1 KiB stack frame and its spills
// on every call).
absl::Status RunCached(const Comm& comm, const CallView& view) {
  engine::Call in(comm);
  if (!in.ok()) return in.status(CollectiveName(view.kind));
  // One cache per agent: its schedules hold the agent's CARs, and a later
  // agent in this process reuses the same context ids.
  ScheduleCache* cache = engine::ExtensionOf<ScheduleCache>(comm);
  if (cache == nullptr) [[unlikely]] return engine::Alive(comm, CollectiveName(view.kind));
  // kInPlace as the send buffer, or (scatter's root) as the receive buffer.
  const bool in_place = view.send == kInPlace || view.recv == kInPlace;
  ScheduleCache::Entry* hit = cache->Find(comm.context(), comm.size(), view);
  if (hit == nullptr) [[unlikely]] return RunMissed(comm, view, *cache, in_place);
  const CollectiveCall& bound = hit->key.call;
  if (hit->in_place != in_place || bound.send != view.send || bound.recv != view.recv ||
      (alg::FixedBlocks(view.kind) && !SameLayout(bound, view))) [[unlikely]] {
    return RunRebound(comm, view, *cache, *hit, in_place);
  }
  Schedule* s = hit->schedule.get();
  absl::Status st = s->Run();
  if (!st.ok()) [[unlikely]] cache->MarkFailed(s);
  return st;
}

// A typed blocking call (Allreduce, Bcast, ...): `op` null where it has none.
absl::Status RunTyped(const Comm& comm, Collective kind, const void* send, void* recv, int64_t count,
                      const Datatype& type, const Op* op, int root) {
  return RunCached(comm, CallView{kind, send, recv, count, &type, op, root, {}});
}

}  // namespace

absl::Status RunCollective(const Comm& comm, const CollectiveCall& call) {
  engine::Call in(comm);
  if (!in.ok()) return in.status(CollectiveName(call.kind));
  if (Varying(call.kind)) {  // counts known at the root alone, or differing by rank: no cache key every rank shares
    CARTAGE_ASSIGN_OR_RETURN(std::shared_ptr<Schedule> s, BuildCollective(comm, call));
    return s->Run();
  }
  return RunCached(comm, ViewOf(call));
}

absl::Status StartCollective(const Comm& comm, const CollectiveCall& call, Request* req) {
  engine::Call in(comm);
  if (!in.ok()) return in.status(CollectiveName(call.kind));
  CARTAGE_ASSIGN_OR_RETURN(std::shared_ptr<Schedule> s, BuildCollective(comm, call));
  return s->Start(req);
}

absl::Status InitCollective(const Comm& comm, const CollectiveCall& call, Request* req) {
  engine::Call in(comm);
  if (!in.ok()) return in.status(CollectiveName(call.kind));
  CARTAGE_ASSIGN_OR_RETURN(std::shared_ptr<Schedule> s, BuildCollective(comm, call));
  return s->Bind(req);
}

absl::Status PendingDup::Start(const Comm& comm, int copies, Request* req) {
  CARTAGE_RETURN_IF_ERROR(engine::Alive(comm, "idup"));
  if (copies < 1) return absl::InvalidArgumentError(absl::StrFormat("idup: %d copies", copies));
  comm_ = comm;
  mine_.clear();
  for (int i = 0; i < copies; ++i) mine_.push_back(engine::ProposeUniqueContext(comm));
  agreed_.assign(mine_.size(), 0);
  CollectiveCall c = Call(Collective::kAllreduce, mine_.data(), agreed_.data(), copies,
                          Datatype::Basic(BasicType::kUint32), Op(OpKind::kMax), 0);
  return StartCollective(comm, c, req);
}

absl::StatusOr<Comm> PendingDup::Take(int i) const {
  if (!comm_.has_value() || i < 0 || static_cast<std::size_t>(i) >= agreed_.size()) {
    return absl::InvalidArgumentError(absl::StrFormat("idup: no duplicate %d of %d started", i, agreed_.size()));
  }
  return engine::DupOn(*comm_, agreed_[static_cast<std::size_t>(i)]);
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
absl::Status Alltoallw(const Comm& comm, const void* send, absl::Span<const int64_t> send_counts,
                       absl::Span<const int64_t> send_byte_displs, absl::Span<const Datatype> send_types, void* recv,
                       absl::Span<const int64_t> recv_counts, absl::Span<const int64_t> recv_byte_displs,
                       absl::Span<const Datatype> recv_types) {
  CollectiveCall c = Call(Collective::kAlltoallv, send, recv, 0, Datatype::Basic(BasicType::kByte), std::nullopt, 0);
  c.send_counts = Vec(send_counts);
  c.send_displs = Vec(send_byte_displs);
  c.send_types.assign(send_types.begin(), send_types.end());
  c.recv_counts = Vec(recv_counts);
  c.recv_displs = Vec(recv_byte_displs);
  c.recv_types.assign(recv_types.begin(), recv_types.end());
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
