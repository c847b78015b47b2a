// The collectives' calls: building a call's schedule (argument checks,
// packing of non-contiguous types, the algorithm), the blocking calls'
// schedule cache, and the MPI forms.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
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