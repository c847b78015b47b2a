// The schedule builder and its validation: Build checks a graph and makes
// its vertices car_vertex CARs (schedule_engine.cc runs them).
#include "cartage/schedule.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "car/vertex_fsm.h"

namespace cartage {

namespace {

// Whether [lo, hi) is covered by the union of `ranges`.
bool Covered(std::vector<std::pair<uint64_t, uint64_t>> ranges, uint64_t lo, uint64_t hi) {
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = lo;
  for (const auto& [a, b] : ranges) {
    if (at >= hi) break;
    if (a > at) return false;
    at = std::max(at, b);
  }
  return at >= hi;
}

}  // namespace

std::string Buf::Label() const {
  return is_temp() ? absl::StrFormat("tmp%d+%d", temp, offset) : absl::StrFormat("%s+%d", name, offset);
}

const char* VertexKindName(VertexKind k) {
  switch (k) {
    case VertexKind::kSend: return "send";
    case VertexKind::kRecv: return "recv";
    case VertexKind::kReduce: return "reduce";
    case VertexKind::kCopy: return "copy";
    case VertexKind::kPack: return "pack";
    case VertexKind::kUnpack: return "unpack";
    case VertexKind::kFence: return "fence";
  }
  return "?";
}

const char* EdgeKindName(EdgeKind k) {
  switch (k) {
    case EdgeKind::kCompletion: return "completion";
    case EdgeKind::kBuffer: return "buffer";
    case EdgeKind::kProgress: return "progress";
  }
  return "?";
}

// ---- Builder -------------------------------------------------------------------

ScheduleBuilder::ScheduleBuilder(const Comm& comm, std::string name)
    : comm_(engine::CollectiveChannel(comm)),
      rank_(comm.rank()),
      size_(comm.size()),
      name_(std::move(name)),
      sends_to_(static_cast<std::size_t>(comm.size())),
      recvs_from_(static_cast<std::size_t>(comm.size())) {}

ScheduleBuilder::ScheduleBuilder(int rank, int size, std::string name)
    : rank_(rank),
      size_(size),
      name_(std::move(name)),
      sends_to_(static_cast<std::size_t>(std::max(size, 0))),
      recvs_from_(static_cast<std::size_t>(std::max(size, 0))) {}

Buf ScheduleBuilder::Temp(uint64_t bytes) { return LentTemp(bytes, -1); }

Buf ScheduleBuilder::LentTemp(uint64_t bytes, int peer) {
  temps_.push_back(bytes);
  lenders_.push_back(peer);
  Buf b;
  b.temp = static_cast<int>(temps_.size()) - 1;
  return b;
}

VertexId ScheduleBuilder::Add(Vertex v, absl::Span<const VertexId> after) {
  for (VertexId a : after) v.after.push_back({a, EdgeKind::kCompletion});
  vertices_.push_back(std::move(v));
  return static_cast<VertexId>(vertices_.size()) - 1;
}

// A send or receive: the n-th message to or from `peer` in this schedule.
VertexId ScheduleBuilder::Message(VertexKind kind, Buf at, uint64_t bytes, int peer,
                                  absl::Span<const VertexId> after) {
  Vertex v;
  v.kind = kind;
  v.peer = peer;
  std::vector<int>& count = kind == VertexKind::kSend ? sends_to_ : recvs_from_;
  if (peer >= 0 && peer < size_) v.ordinal = count[static_cast<std::size_t>(peer)]++;
  (kind == VertexKind::kSend ? v.src : v.dst) = at;
  v.bytes = bytes;
  return Add(std::move(v), after);
}

VertexId ScheduleBuilder::Send(Buf src, uint64_t bytes, int peer, absl::Span<const VertexId> after) {
  return Message(VertexKind::kSend, src, bytes, peer, after);
}

VertexId ScheduleBuilder::Recv(Buf dst, uint64_t bytes, int peer, absl::Span<const VertexId> after) {
  return Message(VertexKind::kRecv, dst, bytes, peer, after);
}

// A vertex over `count` elements of `type` (reduce, pack, unpack).
VertexId ScheduleBuilder::Typed(VertexKind kind, Buf src, Buf dst, int64_t count, const Datatype& type,
                                absl::Span<const VertexId> after) {
  Vertex v;
  v.kind = kind;
  v.src = src;
  v.dst = dst;
  v.count = count;
  v.bytes = count > 0 ? static_cast<uint64_t>(count) * static_cast<uint64_t>(type.size()) : 0;
  v.type = type;
  return Add(std::move(v), after);
}

VertexId ScheduleBuilder::Reduce(Buf in, Buf inout, int64_t count, const Datatype& type, const Op& op,
                                 absl::Span<const VertexId> after, bool in_is_left) {
  const VertexId id = Typed(VertexKind::kReduce, in, inout, count, type, after);
  vertices_.back().op = op;
  vertices_.back().src_is_left = in_is_left;
  return id;
}

VertexId ScheduleBuilder::Copy(Buf src, Buf dst, uint64_t bytes, absl::Span<const VertexId> after) {
  Vertex v;
  v.kind = VertexKind::kCopy;
  v.src = src;
  v.dst = dst;
  v.bytes = bytes;
  return Add(std::move(v), after);
}

VertexId ScheduleBuilder::Pack(Buf layout, int64_t count, const Datatype& type, Buf packed,
                               absl::Span<const VertexId> after) {
  return Typed(VertexKind::kPack, layout, packed, count, type, after);
}

VertexId ScheduleBuilder::Unpack(Buf packed, int64_t count, const Datatype& type, Buf layout,
                                 absl::Span<const VertexId> after) {
  return Typed(VertexKind::kUnpack, packed, layout, count, type, after);
}

VertexId ScheduleBuilder::PackRange(Buf layout, int64_t count, const Datatype& type, uint64_t first, uint64_t last,
                                    Buf packed, absl::Span<const VertexId> after) {
  const VertexId id = Typed(VertexKind::kPack, layout, packed, count, type, after);
  vertices_.back().first = first;
  vertices_.back().bytes = last >= first ? last - first : 0;
  return id;
}

VertexId ScheduleBuilder::UnpackRange(Buf packed, int64_t count, const Datatype& type, uint64_t first,
                                      uint64_t last, Buf layout, absl::Span<const VertexId> after) {
  const VertexId id = Typed(VertexKind::kUnpack, packed, layout, count, type, after);
  vertices_.back().first = first;
  vertices_.back().bytes = last >= first ? last - first : 0;
  return id;
}

VertexId ScheduleBuilder::Fence(absl::Span<const VertexId> after) {
  Vertex v;
  v.kind = VertexKind::kFence;
  return Add(std::move(v), after);
}

void ScheduleBuilder::Depend(VertexId earlier, VertexId later, EdgeKind kind) {
  if (later < 0 || later >= static_cast<VertexId>(vertices_.size())) return;
  std::vector<Edge>& after = vertices_[static_cast<std::size_t>(later)].after;
  for (Edge& e : after) {
    if (e.from == earlier) {  // one edge per pair: the more specific kind wins
      if (e.kind == EdgeKind::kCompletion) e.kind = kind;
      return;
    }
  }
  after.push_back({earlier, kind});
}

void ScheduleBuilder::Note(VertexId v, std::string note) {
  if (v >= 0 && v < static_cast<VertexId>(vertices_.size())) vertices_[static_cast<std::size_t>(v)].note = std::move(note);
}

void ScheduleBuilder::Chunk(VertexId v, int chunk) {
  if (v >= 0 && v < static_cast<VertexId>(vertices_.size())) vertices_[static_cast<std::size_t>(v)].chunk = chunk;
}

absl::StatusOr<std::shared_ptr<Schedule>> ScheduleBuilder::Build() {
  const std::size_t n = vertices_.size();
  auto bad = [&](std::size_t v, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrFormat("schedule %s (rank %d): vertex %d (%s): %s", name_, rank_, v,
                                                      VertexKindName(vertices_[v].kind), why));
  };
  // Buffers: temporaries in bounds, user memory present where it runs.
  auto check_buf = [&](std::size_t v, const Buf& b, uint64_t bytes, const char* role) -> absl::Status {
    if (b.is_temp()) {
      if (static_cast<std::size_t>(b.temp) >= temps_.size()) {
        return bad(v, absl::StrFormat("%s names temporary buffer %d; the schedule has %d", role, b.temp,
                                      temps_.size()));
      }
      const uint64_t size = temps_[static_cast<std::size_t>(b.temp)];
      if (b.offset > size || bytes > size - b.offset) {
        return bad(v, absl::StrFormat("%s [%d, %d) is past the end of the %d-byte temporary buffer %d", role,
                                      b.offset, b.offset + bytes, size, b.temp));
      }
    } else if (comm_.has_value() && b.user == nullptr && bytes > 0) {
      return bad(v, absl::StrFormat("%s is a null buffer for %d bytes", role, bytes));
    }
    return absl::OkStatus();
  };
  for (std::size_t v = 0; v < n; ++v) {
    const Vertex& x = vertices_[v];
    for (const Edge& e : x.after) {
      if (e.from < 0 || static_cast<std::size_t>(e.from) >= n) {
        return bad(v, absl::StrFormat("waits for vertex %d, which does not exist", e.from));
      }
      if (static_cast<std::size_t>(e.from) == v) return bad(v, "waits for itself");
    }
    switch (x.kind) {
      case VertexKind::kSend:
      case VertexKind::kRecv:
        if (x.peer < 0 || x.peer >= size_) {
          return bad(v, absl::StrFormat("no rank %d in a communicator of %d", x.peer, size_));
        }
        CARTAGE_RETURN_IF_ERROR(check_buf(v, x.kind == VertexKind::kSend ? x.src : x.dst, x.bytes,
                                          x.kind == VertexKind::kSend ? "source" : "destination"));
        break;
      case VertexKind::kReduce: {
        if (x.count < 0) return bad(v, absl::StrFormat("negative count %d", x.count));
        if (absl::Status s = x.op->Check(*x.type); !s.ok() && x.count > 0) return bad(v, std::string(s.message()));
        CARTAGE_RETURN_IF_ERROR(check_buf(v, x.src, x.bytes, "operand"));
        CARTAGE_RETURN_IF_ERROR(check_buf(v, x.dst, x.bytes, "accumulator"));
        break;
      }
      case VertexKind::kCopy:
        CARTAGE_RETURN_IF_ERROR(check_buf(v, x.src, x.bytes, "source"));
        CARTAGE_RETURN_IF_ERROR(check_buf(v, x.dst, x.bytes, "destination"));
        break;
      case VertexKind::kPack:
      case VertexKind::kUnpack: {
        if (x.count < 0) return bad(v, absl::StrFormat("negative count %d", x.count));
        const bool pack = x.kind == VertexKind::kPack;
        const Buf& layout = pack ? x.src : x.dst;
        const uint64_t whole = static_cast<uint64_t>(x.count) * static_cast<uint64_t>(x.type->size());
        if (x.first > whole || x.bytes > whole - x.first) {
          return bad(v, absl::StrFormat("bytes [%d, %d) are past the %d packed bytes of %d elements of %s", x.first,
                                        x.first + x.bytes, whole, x.count, x.type->name()));
        }
        if (layout.is_temp()) {
          const uint64_t span = x.count == 0 ? 0
                                             : static_cast<uint64_t>((x.count - 1) * x.type->extent() +
                                                                     x.type->true_lb() + x.type->true_extent());
          CARTAGE_RETURN_IF_ERROR(check_buf(v, layout, span, "layout"));
        } else {
          CARTAGE_RETURN_IF_ERROR(check_buf(v, layout, whole, "layout"));
        }
        CARTAGE_RETURN_IF_ERROR(check_buf(v, pack ? x.dst : x.src, x.bytes, "packed buffer"));
        break;
      }
      case VertexKind::kFence: break;
    }
  }

  // No cycles (Kahn); the order found serves the checks below.
  std::vector<std::vector<std::size_t>> succ(n);
  std::vector<uint32_t> indegree(n, 0);
  for (std::size_t v = 0; v < n; ++v) {
    for (const Edge& e : vertices_[v].after) {
      succ[static_cast<std::size_t>(e.from)].push_back(v);
      ++indegree[v];
    }
  }
  std::vector<std::size_t> order;
  order.reserve(n);
  {
    std::vector<uint32_t> left = indegree;
    for (std::size_t v = 0; v < n; ++v) {
      if (left[v] == 0) order.push_back(v);
    }
    for (std::size_t i = 0; i < order.size(); ++i) {
      for (std::size_t s : succ[order[i]]) {
        if (--left[s] == 0) order.push_back(s);
      }
    }
    if (order.size() != n) {
      for (std::size_t v = 0; v < n; ++v) {
        if (left[v] != 0) return bad(v, "is on a dependency cycle");
      }
    }
  }

  // Every read of a temporary buffer is covered by writes of vertices that
  // finish before it (its ancestors).
  bool reads_temps = false;
  for (const Vertex& x : vertices_) reads_temps = reads_temps || x.src.is_temp() || x.dst.is_temp();
  if (reads_temps) {
    const std::size_t words = (n + 63) / 64;
    std::vector<uint64_t> anc(n * words, 0);
    for (std::size_t v : order) {
      uint64_t* mine = &anc[v * words];
      for (const Edge& e : vertices_[v].after) {
        const auto p = static_cast<std::size_t>(e.from);
        const uint64_t* theirs = &anc[p * words];
        for (std::size_t w = 0; w < words; ++w) mine[w] |= theirs[w];
        mine[p / 64] |= uint64_t{1} << (p % 64);
      }
    }
    struct Write {
      std::size_t vertex;
      uint64_t lo, hi;
    };
    std::vector<std::vector<Write>> writes(temps_.size());
    auto written = [](const Vertex& x) -> const Buf* {
      switch (x.kind) {
        case VertexKind::kRecv:
        case VertexKind::kReduce:
        case VertexKind::kCopy:
        case VertexKind::kPack: return &x.dst;
        default: return nullptr;  // an unpack writes a layout, checked by bounds only
      }
    };
    for (std::size_t v = 0; v < n; ++v) {
      const Vertex& x = vertices_[v];
      const Buf* w = written(x);
      if (w != nullptr && w->is_temp()) {
        writes[static_cast<std::size_t>(w->temp)].push_back({v, w->offset, w->offset + x.bytes});
      }
    }
    for (std::size_t v = 0; v < n; ++v) {
      const Vertex& x = vertices_[v];
      std::vector<std::pair<const Buf*, const char*>> reads;
      if (x.kind == VertexKind::kSend || x.kind == VertexKind::kCopy || x.kind == VertexKind::kReduce ||
          x.kind == VertexKind::kUnpack) {
        reads.push_back({&x.src, x.kind == VertexKind::kReduce ? "operand" : "source"});
      }
      if (x.kind == VertexKind::kReduce) reads.push_back({&x.dst, "accumulator"});
      for (const auto& [b, role] : reads) {
        if (!b->is_temp() || x.bytes == 0) continue;
        std::vector<std::pair<uint64_t, uint64_t>> before;
        for (const Write& w : writes[static_cast<std::size_t>(b->temp)]) {
          if ((anc[v * words + w.vertex / 64] >> (w.vertex % 64)) & 1) before.push_back({w.lo, w.hi});
        }
        if (!Covered(std::move(before), b->offset, b->offset + x.bytes)) {
          return bad(v, absl::StrFormat("reads %s [%d, %d) of temporary buffer %d before any vertex it waits for "
                                        "wrote all of it",
                                        role, b->offset, b->offset + x.bytes, b->temp));
        }
      }
    }
  }

  auto s = std::shared_ptr<Schedule>(new Schedule());
  s->comm_ = comm_;
  s->name_ = name_;
  s->rank_ = rank_;
  s->size_ = size_;
  s->sequence_ = sequence_.has_value() ? *sequence_ : comm_.has_value() ? engine::NextScheduleSequence(*comm_) : 0;
  s->vertices_ = vertices_;
  s->temp_sizes_ = temps_;
  s->temp_lenders_ = lenders_;
  for (std::size_t t = 0; t < temps_.size(); ++t) {
    const uint64_t bytes = std::max<uint64_t>(temps_[t], 1);
    if (lenders_[t] < 0 || !comm_.has_value()) {
      s->temps_.emplace_back(new std::byte[bytes](), std::default_delete<std::byte[]>());
      continue;
    }
    absl::StatusOr<std::shared_ptr<std::byte>> lent = comm_->LendBuffer(lenders_[t], bytes);
    if (!lent.ok()) {
      return absl::Status(lent.status().code(), absl::StrFormat("schedule %s (rank %d): temporary buffer %d: %s",
                                                                name_, rank_, t, lent.status().message()));
    }
    s->temps_.push_back(*std::move(lent));
  }
  s->FindShapes(succ, indegree, order);
  s->scratch_.resize(n);
  for (std::size_t v = 0; v < n; ++v) {
    const Vertex& x = vertices_[v];
    if (x.kind == VertexKind::kReduce && !x.src_is_left && !x.op->commutative()) s->scratch_[v].resize(x.bytes);
  }
  if (!comm_.has_value()) return s;

  // A burst: Schedule::kBurstSends or more sends larger than
  // Schedule::kBurstEagerCap that wait for nothing, so start together as the
  // run begins (a linear alltoall or allgather of large blocks from 4 ranks,
  // a binomial bcast's root from 8).
  // Each goes by rendezvous where its path moves one with a single copy.
  // Eager, the sender copies into the method's memory and the receiver out
  // again, and a burst's copies outgrow the caches (bench/RESULTS.md); a
  // chain's one send at a time stays eager, sparing a handshake.
  s->single_copy_.assign(n, false);
  std::vector<std::size_t> burst;
  for (std::size_t v = 0; v < n; ++v) {
    const Vertex& x = vertices_[v];
    if (x.kind == VertexKind::kSend && indegree[v] == 0 && x.bytes > Schedule::kBurstEagerCap) burst.push_back(v);
  }
  if (burst.size() >= Schedule::kBurstSends) {
    for (std::size_t v : burst) {
      const absl::StatusOr<PathInfo> path = comm_->PathTo(vertices_[v].peer);
      s->single_copy_[v] = path.ok() && path->single_copy && path->eager_limit > Schedule::kBurstEagerCap;
    }
  }

  // The vertices as car_vertex CARs; a CAR's private area holds its number.
  s->pool_ = std::make_unique<car::CarPool>(car::CarPool::Options{
      .method_private_bytes = sizeof(VertexId), .cars_per_slab = std::max<std::size_t>(n, 1), .max_cars = 0});
  s->successors_.resize(n);
  s->cars_.assign(n, nullptr);
  s->reqs_ = std::make_unique<Schedule::StepRequest[]>(n);
  static const car::Vc kVertexVc{
      .name = "schedule", .launch = &Schedule::LaunchVertex, .drain = &Schedule::DrainVertex};
  // Sinks first, so that every CAR can name its successors when created. A
  // receive's CAR releases what its last fused step would have.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const std::size_t v = *it;
    if (s->host_[v] != static_cast<VertexId>(v)) continue;
    for (std::size_t t : succ[s->LastOf(v)]) s->successors_[v].push_back(s->cars_[t]);
    if (s->RunsAlone(static_cast<VertexId>(v)) || s->RunsLast(static_cast<VertexId>(v)) ||
        s->ForwardsFrom(static_cast<VertexId>(v)) >= 0 || s->StartsLast(static_cast<VertexId>(v))) {
      continue;
    }
    car::CarSpec spec;
    spec.kind = car::CarKind::kVertex;
    spec.counter = &s->done_;
    spec.vc = &kVertexVc;
    spec.successors = s->successors_[v];
    spec.predecessors = indegree[v];
    spec.owner = s.get();
    CARTAGE_ASSIGN_OR_RETURN(car::Car * c, s->pool_->Create(spec));
    *static_cast<VertexId*>(c->method_private()) = static_cast<VertexId>(v);
    s->cars_[v] = c;
    s->runners_.push_back(c);
  }
  for (std::size_t v = 0; v < n; ++v) s->cars_[v] = s->cars_[static_cast<std::size_t>(s->host_[v])];
  // Begin starts the receives first (each posts its receive), then the
  // rest: a peer's message then finds its receive posted more often than
  // not, and the stores of posting the receives land before a send's ring
  // line is taken from the peer polling it (a store that waits for that
  // line holds up every store behind it). Starting order among vertices
  // that are all ready changes nothing else: each waits for its own
  // predecessors whatever its place.
  s->start_order_ = s->runners_;
  std::stable_partition(s->start_order_.begin(), s->start_order_.end(), [&](car::Car* c) {
    return vertices_[static_cast<std::size_t>(*static_cast<const VertexId*>(c->method_private()))].kind ==
           VertexKind::kRecv;
  });
  return s;
}

}  // namespace cartage
