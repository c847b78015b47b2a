// The schedule builder: vertices and edges as an algorithm adds them.
// Build validates the graph (schedule_validate.cc) and sets the schedule up
// (schedule_setup.cc); schedule_engine.cc runs it.
#include "cartage/schedule.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cartage {


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

}  // namespace cartage
