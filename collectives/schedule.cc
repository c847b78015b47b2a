// The schedule builder, its validation, and the engine that runs a schedule
// as car_vertex CARs under the progress engine.
#include "cartage/schedule.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "car/segment_walk.h"
#include "car/vertex_fsm.h"

namespace cartage {

namespace {

using car::VertexEvent;
using car::VertexMachine;

// Tags: (1 + sequence mod kSlots) * kStepTags + step mod kStepTags, so that
// tags stay clear of the small ones Comm::Split uses on the same context.
constexpr int kStepTags = 1024;
constexpr uint32_t kSlots = (static_cast<uint32_t>(kMaxTag) + 1) / kStepTags - 1;

std::string BufName(const Buf& b) {
  if (b.is_temp()) return absl::StrFormat("tmp%d+%d", b.temp, b.offset);
  return absl::StrFormat("%s+%d", b.name, b.offset);
}

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
    : comm_(comm.CollectiveChannel()),
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

VertexId ScheduleBuilder::Send(Buf src, uint64_t bytes, int peer, absl::Span<const VertexId> after) {
  Vertex v;
  v.kind = VertexKind::kSend;
  v.peer = peer;
  if (peer >= 0 && peer < size_) v.step = sends_to_[static_cast<std::size_t>(peer)]++;
  v.src = src;
  v.bytes = bytes;
  return Add(std::move(v), after);
}

VertexId ScheduleBuilder::Recv(Buf dst, uint64_t bytes, int peer, absl::Span<const VertexId> after) {
  Vertex v;
  v.kind = VertexKind::kRecv;
  v.peer = peer;
  if (peer >= 0 && peer < size_) v.step = recvs_from_[static_cast<std::size_t>(peer)]++;
  v.dst = dst;
  v.bytes = bytes;
  return Add(std::move(v), after);
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
  s->sequence_ = sequence_.has_value() ? *sequence_ : comm_.has_value() ? comm_->NextScheduleSequence() : 0;
  s->vertices_ = vertices_;
  s->temp_sizes_ = temps_;
  s->temp_lenders_ = lenders_;
  for (std::size_t t = 0; t < temps_.size(); ++t) {
    const uint64_t bytes = std::max<uint64_t>(temps_[t], 1);
    if (lenders_[t] >= 0 && comm_.has_value()) {
      absl::StatusOr<std::shared_ptr<std::byte>> lent = comm_->LendBuffer(lenders_[t], bytes);
      if (!lent.ok()) {
        return absl::Status(lent.status().code(),
                            absl::StrFormat("schedule %s (rank %d): temporary buffer %d: %s", name_, rank_, t,
                                            lent.status().message()));
      }
      s->lent_.push_back(*std::move(lent));
      s->temps_.push_back(nullptr);
    } else {
      s->temps_.push_back(std::make_unique<std::byte[]>(bytes));
      s->lent_.push_back(nullptr);
    }
    s->temp_at_.push_back(s->temps_.back() ? s->temps_.back().get() : s->lent_.back().get());
  }
  s->scratch_.resize(n);
  for (std::size_t v = 0; v < n; ++v) {
    const Vertex& x = vertices_[v];
    if (x.kind == VertexKind::kReduce && !x.src_is_left && !x.op->commutative()) s->scratch_[v].resize(x.bytes);
  }
  if (!comm_.has_value()) return s;

  // The vertices as car_vertex CARs; a CAR's private area holds its number.
  s->pool_ = std::make_unique<car::CarPool>(car::CarPool::Options{
      .method_private_bytes = sizeof(VertexId), .cars_per_slab = std::max<std::size_t>(n, 1), .max_cars = 0});
  s->successors_.resize(n);
  s->cars_.assign(n, nullptr);
  s->reqs_ = std::make_unique<Request[]>(n);
  static const car::Carrier kVertexCarrier{.name = "schedule", .launch = &Schedule::LaunchVertex};
  // Sinks first, so that every CAR can name its successors when created.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const std::size_t v = *it;
    for (std::size_t t : succ[v]) s->successors_[v].push_back(s->cars_[t]);
    car::CarSpec spec;
    spec.kind = car::CarKind::kVertex;
    spec.counter = &s->done_;
    spec.carrier = &kVertexCarrier;
    spec.successors = s->successors_[v];
    spec.predecessors = indegree[v];
    spec.owner = s.get();
    CARTAGE_ASSIGN_OR_RETURN(car::Car * c, s->pool_->Create(spec));
    *static_cast<VertexId*>(c->method_private()) = static_cast<VertexId>(v);
    s->cars_[v] = c;
  }
  return s;
}

// ---- Schedule ------------------------------------------------------------------

Schedule::~Schedule() {
  if (pool_) {
    for (car::Car* c : cars_) pool_->Release(c);
  }
}

int Schedule::TagOf(const Vertex& v) const {
  return static_cast<int>(1 + sequence_ % kSlots) * kStepTags + v.step % kStepTags;
}

std::string Schedule::StateOf(VertexId v) const {
  if (!pool_ || v < 0 || static_cast<std::size_t>(v) >= cars_.size()) return "unbuilt";
  return std::string(cars_[static_cast<std::size_t>(v)]->state_name());
}

std::byte* Schedule::Resolve(const Buf& b) const {
  std::byte* base = b.is_temp() ? temp_at_[static_cast<std::size_t>(b.temp)] : static_cast<std::byte*>(b.user);
  return base == nullptr ? nullptr : base + b.offset;
}

std::string Schedule::Describe(VertexId v) const {
  const Vertex& x = vertices_[static_cast<std::size_t>(v)];
  std::string what;
  switch (x.kind) {
    case VertexKind::kSend: what = absl::StrFormat("send %d B to rank %d from %s", x.bytes, x.peer, BufName(x.src)); break;
    case VertexKind::kRecv: what = absl::StrFormat("recv %d B from rank %d into %s", x.bytes, x.peer, BufName(x.dst)); break;
    case VertexKind::kReduce:
      what = absl::StrFormat("reduce %d B (%s) %s into %s", x.bytes, car::OpName(x.op->kind()), BufName(x.src),
                             BufName(x.dst));
      break;
    default: what = absl::StrFormat("%s %d B %s -> %s", VertexKindName(x.kind), x.bytes, BufName(x.src), BufName(x.dst));
  }
  return absl::StrFormat("%s (rank %d): vertex %d (%s)", name_, rank_, v, what);
}

void Schedule::RebindUser(const char* name, const void* base) {
  auto rebind = [&](Buf& b) {
    if (!b.is_temp() && (b.name == name || std::strcmp(b.name, name) == 0)) b.user = const_cast<void*>(base);
  };
  for (Vertex& x : vertices_) {
    rebind(x.src);
    rebind(x.dst);
  }
}

absl::Status Schedule::Start(Request* req) {
  if (!comm_.has_value()) {
    return absl::FailedPreconditionError(absl::StrFormat("schedule %s: built for rendering only", name_));
  }
  return comm_->Launch(shared_from_this(), /*persistent=*/false, req);
}

absl::Status Schedule::Bind(Request* req) {
  if (!comm_.has_value()) {
    return absl::FailedPreconditionError(absl::StrFormat("schedule %s: built for rendering only", name_));
  }
  return comm_->Launch(shared_from_this(), /*persistent=*/true, req);
}

absl::Status Schedule::Run() {
  Request req;
  CARTAGE_RETURN_IF_ERROR(Start(&req));
  return req.Wait();
}

absl::Status Schedule::Begin() {
  if (!comm_.has_value()) {
    return absl::FailedPreconditionError(absl::StrFormat("schedule %s: built for rendering only", name_));
  }
  if (running_) {
    return absl::FailedPreconditionError(absl::StrFormat("schedule %s: started again while still running", name_));
  }
  done_ = car::Completion();
  done_.pending = static_cast<int64_t>(cars_.size());
  failed_.reset();
  inflight_.clear();
  for (car::Car* c : cars_) c->Rearm();
  running_ = true;
  for (car::Car* c : cars_) {
    if (VertexMachine::IsFinal(*c)) continue;  // failed already, through a predecessor
    CARTAGE_RETURN_IF_ERROR(VertexMachine::Dispatch(*c, VertexEvent::kStart));
  }
  return absl::OkStatus();
}

std::optional<absl::Status> Schedule::Poll(int* work) {
  for (std::size_t i = 0; i < inflight_.size();) {
    const VertexId v = inflight_[i];
    Request& r = reqs_[v];
    if (!r.completed()) {
      ++i;
      continue;
    }
    inflight_[i] = inflight_.back();
    inflight_.pop_back();
    ++*work;
    const absl::Status st = Finished(v, r);
    car::Car& c = *cars_[static_cast<std::size_t>(v)];
    if (st.ok()) {
      (void)VertexMachine::Dispatch(c, VertexEvent::kComplete);
    } else {
      car::CarSignal sig;
      sig.error = absl::Status(st.code(), absl::StrFormat("%s: %s", Describe(v), st.message()));
      if (!failed_.has_value()) failed_ = sig.error;
      (void)VertexMachine::Dispatch(c, VertexEvent::kError, sig);
    }
  }
  if (done_.pending > 0) return std::nullopt;
  running_ = false;
  if (failed_.has_value()) return *failed_;
  return done_.status;
}

absl::Status Schedule::Finished(VertexId v, Request& r) {
  absl::Status st = r.Wait();  // completed: returns at once
  const Vertex& x = vertices_[static_cast<std::size_t>(v)];
  if (st.ok() && x.kind == VertexKind::kRecv && r.bytes() != x.bytes) {
    st = absl::InvalidArgumentError(absl::StrFormat(
        "received %d bytes, expected %d (the ranks disagree about the sizes)", r.bytes(), x.bytes));
  }
  return st;
}

void Schedule::LaunchVertex(car::Car& car, car::CarStep& step) {
  auto* s = static_cast<Schedule*>(car.spec().owner);
  s->Launch(*static_cast<const VertexId*>(car.method_private()), car, step);
}

void Schedule::Launch(VertexId v, car::Car& car, car::CarStep& step) {
  const Vertex& x = vertices_[static_cast<std::size_t>(v)];
  absl::Status st;
  if (x.kind == VertexKind::kSend || x.kind == VertexKind::kRecv) {
    Request& r = reqs_[v];
    st = x.kind == VertexKind::kSend ? comm_->Isend(Resolve(x.src), x.bytes, x.peer, TagOf(x), &r)
                                     : comm_->Irecv(Resolve(x.dst), x.bytes, x.peer, TagOf(x), &r);
    if (st.ok() && r.completed()) {  // an eager send, a message that was waiting: done now
      st = Finished(v, r);
      if (st.ok()) {
        step.Raise<VertexMachine>(car, VertexEvent::kComplete);
        return;
      }
    } else if (st.ok()) {
      inflight_.push_back(v);
      return;  // Poll completes it
    }
  } else {
    st = RunLocal(v);
    if (st.ok()) {
      step.Raise<VertexMachine>(car, VertexEvent::kComplete);
      return;
    }
  }
  car::CarSignal sig;
  sig.error = absl::Status(st.code(), absl::StrFormat("%s: %s", Describe(v), st.message()));
  if (!failed_.has_value()) failed_ = sig.error;
  step.Raise<VertexMachine>(car, VertexEvent::kError, sig);
}

absl::Status Schedule::RunLocal(VertexId v) {
  const Vertex& x = vertices_[static_cast<std::size_t>(v)];
  switch (x.kind) {
    case VertexKind::kReduce: return ReduceInto(v);
    case VertexKind::kCopy:
      if (x.bytes > 0) std::memmove(Resolve(x.dst), Resolve(x.src), x.bytes);
      return absl::OkStatus();
    case VertexKind::kPack:
      if (x.bytes > 0) {
        car::Pack(Resolve(x.src), x.count, *x.type, static_cast<int64_t>(x.first),
                  static_cast<int64_t>(x.first + x.bytes), Resolve(x.dst));
      }
      return absl::OkStatus();
    case VertexKind::kUnpack:
      if (x.bytes > 0) {
        car::Unpack(Resolve(x.src), x.count, *x.type, static_cast<int64_t>(x.first),
                    static_cast<int64_t>(x.first + x.bytes), Resolve(x.dst));
      }
      return absl::OkStatus();
    default: return absl::OkStatus();
  }
}

namespace {

// inout = in op inout over `count` packed elements of `type`.
void Apply(const Op& op, const void* in, void* inout, int64_t count, const Datatype& type) {
  car::BasicType basic;
  if (op.kind() != OpKind::kUser && type.homogeneous(&basic)) {
    car::ReduceBasic(op.kind(), basic, in, inout, count * type.size() / static_cast<int64_t>(car::SizeOf(basic)));
    return;
  }
  if (type.contiguous()) {
    op.fn()(in, inout, count, type, op.context());
    return;
  }
  // A user operator on a non-contiguous type works on the type's layout:
  // unpack the accumulator, reduce the packed operand into it, pack it back.
  const int64_t bytes = count * type.size();
  std::vector<std::byte> layout(static_cast<std::size_t>((count - 1) * type.extent() + type.true_extent()));
  std::byte* base = layout.data() - type.true_lb();
  car::Unpack(inout, count, type, 0, bytes, base);
  (void)car::ReduceUnpack(op, in, count, type, 0, bytes, base);  // Build checked the operator
  car::Pack(base, count, type, 0, bytes, inout);
}

}  // namespace

absl::Status Schedule::ReduceInto(VertexId v) {
  const Vertex& x = vertices_[static_cast<std::size_t>(v)];
  if (x.count == 0) return absl::OkStatus();
  const std::byte* in = Resolve(x.src);
  std::byte* inout = Resolve(x.dst);
  if (x.src_is_left || x.op->commutative()) {
    Apply(*x.op, in, inout, x.count, *x.type);
    return absl::OkStatus();
  }
  // inout = inout op in: reduce into a copy of `in`, then move it over.
  std::vector<std::byte>& tmp = scratch_[static_cast<std::size_t>(v)];
  std::memcpy(tmp.data(), in, x.bytes);
  Apply(*x.op, inout, tmp.data(), x.count, *x.type);
  std::memcpy(inout, tmp.data(), x.bytes);
  return absl::OkStatus();
}

}  // namespace cartage
