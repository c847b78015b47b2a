// ScheduleBuilder's validation: every vertex's buffers, sizes, types and
// peers; no dependency cycle; no read of a temporary buffer before the
// vertices it waits for wrote it. What it finds (successors, in-degrees, a
// dependency order) is what the engine sets the schedule up with
// (schedule_setup.cc).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "cartage/schedule.h"
#include "collectives/schedule_graph.h"

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

absl::Status ScheduleBuilder::Bad(std::size_t v, const std::string& why) const {
  return absl::InvalidArgumentError(absl::StrFormat("schedule %s (rank %d): vertex %d (%s): %s", name_, rank_, v,
                                                    VertexKindName(vertices_[v].kind), why));
}

absl::Status ScheduleBuilder::CheckBuf(std::size_t v, const Buf& b, uint64_t bytes, const char* role) const {
  if (b.is_temp()) {
    if (static_cast<std::size_t>(b.temp) >= temps_.size()) {
      return Bad(v, absl::StrFormat("%s names temporary buffer %d; the schedule has %d", role, b.temp, temps_.size()));
    }
    const uint64_t size = temps_[static_cast<std::size_t>(b.temp)];
    if (b.offset > size || bytes > size - b.offset) {
      return Bad(v, absl::StrFormat("%s [%d, %d) is past the end of the %d-byte temporary buffer %d", role, b.offset,
                                    b.offset + bytes, size, b.temp));
    }
  } else if (comm_.has_value() && b.user == nullptr && bytes > 0) {
    return Bad(v, absl::StrFormat("%s is a null buffer for %d bytes", role, bytes));
  }
  return absl::OkStatus();
}

// Buffers in bounds (user memory present where it runs), peers that exist,
// counts, types and operators that agree.
absl::Status ScheduleBuilder::CheckVertices() const {
  const std::size_t n = vertices_.size();
  for (std::size_t v = 0; v < n; ++v) {
    const Vertex& x = vertices_[v];
    for (const Edge& e : x.after) {
      if (e.from < 0 || static_cast<std::size_t>(e.from) >= n) {
        return Bad(v, absl::StrFormat("waits for vertex %d, which does not exist", e.from));
      }
      if (static_cast<std::size_t>(e.from) == v) return Bad(v, "waits for itself");
    }
    switch (x.kind) {
      case VertexKind::kSend:
      case VertexKind::kRecv:
        if (x.peer < 0 || x.peer >= size_) {
          return Bad(v, absl::StrFormat("no rank %d in a communicator of %d", x.peer, size_));
        }
        CARTAGE_RETURN_IF_ERROR(CheckBuf(v, x.kind == VertexKind::kSend ? x.src : x.dst, x.bytes,
                                         x.kind == VertexKind::kSend ? "source" : "destination"));
        break;
      case VertexKind::kReduce: {
        if (x.count < 0) return Bad(v, absl::StrFormat("negative count %d", x.count));
        if (absl::Status s = x.op->Check(*x.type); !s.ok() && x.count > 0) return Bad(v, std::string(s.message()));
        CARTAGE_RETURN_IF_ERROR(CheckBuf(v, x.src, x.bytes, "operand"));
        CARTAGE_RETURN_IF_ERROR(CheckBuf(v, x.dst, x.bytes, "accumulator"));
        break;
      }
      case VertexKind::kCopy:
        CARTAGE_RETURN_IF_ERROR(CheckBuf(v, x.src, x.bytes, "source"));
        CARTAGE_RETURN_IF_ERROR(CheckBuf(v, x.dst, x.bytes, "destination"));
        break;
      case VertexKind::kPack:
      case VertexKind::kUnpack: {
        if (x.count < 0) return Bad(v, absl::StrFormat("negative count %d", x.count));
        const bool pack = x.kind == VertexKind::kPack;
        const Buf& layout = pack ? x.src : x.dst;
        const uint64_t whole = static_cast<uint64_t>(x.count) * static_cast<uint64_t>(x.type->size());
        if (x.first > whole || x.bytes > whole - x.first) {
          return Bad(v, absl::StrFormat("bytes [%d, %d) are past the %d packed bytes of %d elements of %s", x.first,
                                        x.first + x.bytes, whole, x.count, x.type->name()));
        }
        if (layout.is_temp()) {
          const uint64_t span = x.count == 0 ? 0
                                             : static_cast<uint64_t>((x.count - 1) * x.type->extent() +
                                                                     x.type->true_lb() + x.type->true_extent());
          CARTAGE_RETURN_IF_ERROR(CheckBuf(v, layout, span, "layout"));
        } else {
          CARTAGE_RETURN_IF_ERROR(CheckBuf(v, layout, whole, "layout"));
        }
        CARTAGE_RETURN_IF_ERROR(CheckBuf(v, pack ? x.dst : x.src, x.bytes, "packed buffer"));
        break;
      }
      case VertexKind::kFence: break;
    }
  }
  return absl::OkStatus();
}

// No cycles (Kahn); the order found serves the checks after it and the
// engine's set-up.
absl::StatusOr<internal::ScheduleGraph> ScheduleBuilder::Order() const {
  const std::size_t n = vertices_.size();
  internal::ScheduleGraph g;
  std::vector<std::vector<std::size_t>>& succ = g.succ;
  std::vector<uint32_t>& indegree = g.indegree;
  std::vector<std::size_t>& order = g.order;
  succ.resize(n);
  indegree.assign(n, 0);
  for (std::size_t v = 0; v < n; ++v) {
    for (const Edge& e : vertices_[v].after) {
      succ[static_cast<std::size_t>(e.from)].push_back(v);
      ++indegree[v];
    }
  }
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
        if (left[v] != 0) return Bad(v, "is on a dependency cycle");
      }
    }
  }
  return g;
}

// Every read of a temporary buffer is covered by writes of vertices that
// finish before it (its ancestors).
absl::Status ScheduleBuilder::CheckTempReads(const internal::ScheduleGraph& g) const {
  const std::size_t n = vertices_.size();
  const std::vector<std::size_t>& order = g.order;
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
          return Bad(v, absl::StrFormat("reads %s [%d, %d) of temporary buffer %d before any vertex it waits for "
                                        "wrote all of it",
                                        role, b->offset, b->offset + x.bytes, b->temp));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<Schedule>> ScheduleBuilder::Build() {
  CARTAGE_RETURN_IF_ERROR(CheckVertices());
  CARTAGE_ASSIGN_OR_RETURN(const internal::ScheduleGraph g, Order());
  CARTAGE_RETURN_IF_ERROR(CheckTempReads(g));
  return Schedule::SetUp(*this, g);
}

}  // namespace cartage
