// Seed 002's xfer interface: blocks of pieces turned into schedule vertices,
// the buffer policy, and chunking.
#include "cartage/xfer.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cartage {

const char* BufferModeName(BufferMode m) {
  switch (m) {
    case BufferMode::kSenderSupplies: return "SENDER_SUPPLIES_BUF";
    case BufferMode::kReceiverSupplies: return "RECEIVER_SUPPLIES_BUF";
    case BufferMode::kUseSegment: return "USE_SEGMENT_BUF";
    case BufferMode::kUseTmp: return "USE_TMP_BUF";
  }
  return "?";
}

absl::StatusOr<BufferMode> BufferModeByName(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  static constexpr std::pair<const char*, BufferMode> kShort[] = {{"sender", BufferMode::kSenderSupplies},
                                                                  {"receiver", BufferMode::kReceiverSupplies},
                                                                  {"segment", BufferMode::kUseSegment},
                                                                  {"tmp", BufferMode::kUseTmp}};
  for (const auto& [short_name, m] : kShort) {
    if (n == short_name || n == absl::AsciiStrToLower(BufferModeName(m))) return m;
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "unknown buffer mode \"%s\" (known: SENDER_SUPPLIES_BUF or sender, RECEIVER_SUPPLIES_BUF or receiver, "
      "USE_SEGMENT_BUF or segment, USE_TMP_BUF or tmp)",
      name));
}

Segment Segment::Of(Buf buf, int64_t count, const Datatype& type) {
  const uint64_t bytes = count > 0 ? static_cast<uint64_t>(count) * static_cast<uint64_t>(type.size()) : 0;
  return Segment{buf, count, type, 0, bytes};
}

Segment Segment::Range(uint64_t lo, uint64_t hi) const {
  Segment s = *this;
  s.first = lo;
  s.last = hi;
  return s;
}

// ---- The policy -------------------------------------------------------------------

namespace {

bool Lends(const PathInfo& p, uint64_t bytes) {
  return p.lends_buffers && bytes > p.eager_limit && (p.max_buffer == 0 || bytes <= p.max_buffer);
}

}  // namespace

BufferMode ChooseBufferMode(const ForwardFacts& f) {
  if (f.has_segment && f.segment_contiguous && !f.mop) return BufferMode::kUseSegment;
  if (Lends(f.to, f.bytes)) return BufferMode::kSenderSupplies;
  if (Lends(f.from, f.bytes)) return BufferMode::kReceiverSupplies;
  return BufferMode::kUseTmp;
}

absl::Status CheckBufferMode(BufferMode m, const ForwardFacts& f) {
  if (m != BufferMode::kUseSegment) return absl::OkStatus();
  if (!f.has_segment) return absl::InvalidArgumentError("USE_SEGMENT_BUF: the piece has no segment to wait in");
  if (f.mop) {
    return absl::InvalidArgumentError(
        "USE_SEGMENT_BUF: the piece is combined into its segment, which then no longer holds what is forwarded");
  }
  return absl::OkStatus();
}

// ---- Blocks -----------------------------------------------------------------------

namespace {

// CARTAGE_XFER_BUFFER: a mode to force wherever it can serve, if set.
absl::StatusOr<std::optional<BufferMode>> EnvBuffer() {
  const char* env = std::getenv("CARTAGE_XFER_BUFFER");
  if (env == nullptr || *env == '\0') return std::nullopt;
  absl::StatusOr<BufferMode> m = BufferModeByName(env);
  if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat("CARTAGE_XFER_BUFFER: ", m.status().message()));
  return *m;
}

}  // namespace

Xfer::Xfer(ScheduleBuilder& b, bool scatter, int peer, XferOptions options)
    : b_(&b), scatter_(scatter), peer_(peer), options_(options), env_buffer_(EnvBuffer()) {}

Xfer Xfer::ScatterInit(ScheduleBuilder& b, int src, XferOptions options) {
  return Xfer(b, /*scatter=*/true, src, options);
}

Xfer Xfer::GatherInit(ScheduleBuilder& b, int dest, XferOptions options) {
  return Xfer(b, /*scatter=*/false, dest, options);
}

Xfer& Xfer::After(std::vector<VertexId> deps) {
  after_.insert(after_.end(), deps.begin(), deps.end());
  return *this;
}

absl::Status Xfer::Usable(const char* op, int peer) const {
  const char* block = scatter_ ? "scatter" : "gather";
  if (started_) {
    return absl::FailedPreconditionError(
        absl::StrFormat("xfer %s %s (%s, rank %d): the block was started already", block, op, b_->name(), b_->rank()));
  }
  if (peer < 0 || peer >= b_->size()) {
    return absl::InvalidArgumentError(absl::StrFormat("xfer %s %s (%s, rank %d): no rank %d in a communicator of %d",
                                                      block, op, b_->name(), b_->rank(), peer, b_->size()));
  }
  return absl::OkStatus();
}

uint64_t Xfer::Chunk() const { return options_.chunk_bytes == 0 ? UINT64_MAX : options_.chunk_bytes; }

Xfer::Access Xfer::AccessOf(const Segment& seg, bool write) const {
  Access a{};
  a.user = seg.buf.user;
  a.temp = seg.buf.temp;
  a.name = seg.buf.name;
  a.count = seg.count;
  a.offset = seg.buf.offset;
  a.write = write;
  if (seg.type.contiguous()) {
    a.lo = seg.buf.offset + seg.first;
    a.hi = seg.buf.offset + seg.last;
  } else {
    a.type_id = &seg.type.nodes();  // one address per committed type
    a.lo = seg.first;
    a.hi = seg.last;
  }
  return a;
}

bool Xfer::SameBuffer(const Access& x, const Access& y) {
  return x.temp == y.temp && x.user == y.user && (x.name == y.name || std::strcmp(x.name, y.name) == 0);
}

std::vector<VertexId> Xfer::Conflicts(const Access& a) const {
  std::vector<VertexId> out;
  for (const Access& e : accesses_) {
    if (!a.write && !e.write) continue;
    if (!SameBuffer(e, a)) continue;
    bool overlap;
    if (a.type_id != nullptr && a.type_id == e.type_id && a.count == e.count && a.offset == e.offset) {
      overlap = a.lo < e.hi && e.lo < a.hi;  // the same elements: packed ranges map to disjoint bytes
    } else if (a.type_id == nullptr && e.type_id == nullptr) {
      overlap = a.lo < e.hi && e.lo < a.hi;
    } else {
      overlap = true;  // different layouts over one buffer: assume they meet
    }
    if (overlap && a.lo != a.hi && e.lo != e.hi) out.push_back(e.vertex);
  }
  return out;
}

void Xfer::Record(Access a, VertexId v) {
  a.vertex = v;
  if (a.write) {
    // What this write covers waits for nothing more than the write: later
    // accesses wait for the write alone (it waited for them).
    std::erase_if(accesses_, [&](const Access& e) {
      const bool same_layout = e.type_id == a.type_id && (a.type_id == nullptr || (e.count == a.count &&
                                                                                   e.offset == a.offset));
      return same_layout && SameBuffer(e, a) && a.lo <= e.lo && e.hi <= a.hi;
    });
  }
  accesses_.push_back(a);
}

std::vector<VertexId> Xfer::With(std::vector<VertexId> deps) const {
  deps.insert(deps.end(), after_.begin(), after_.end());
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  std::erase(deps, -1);
  return deps;
}

PathInfo Xfer::Path(int peer) const {
  if (const Comm* c = b_->comm()) {
    if (absl::StatusOr<PathInfo> p = c->PathTo(peer); p.ok()) return *p;
  }
  return PathInfo{};  // rendering: no methods; nothing lends buffers
}

absl::StatusOr<BufferMode> Xfer::ModeFor(const ForwardFacts& f, const char* op, int from, int to) const {
  auto refuse = [&](const absl::Status& why) {
    return absl::InvalidArgumentError(absl::StrFormat("xfer %s %s (%s, rank %d) from rank %d to rank %d: %s",
                                                      scatter_ ? "scatter" : "gather", op, b_->name(), b_->rank(),
                                                      from, to, why.message()));
  };
  if (options_.buffer.has_value()) {
    if (absl::Status s = CheckBufferMode(*options_.buffer, f); !s.ok()) return refuse(s);
    return *options_.buffer;
  }
  if (!env_buffer_.ok()) return refuse(env_buffer_.status());
  if (env_buffer_->has_value() && CheckBufferMode(**env_buffer_, f).ok()) return **env_buffer_;
  return ChooseBufferMode(f);
}

VertexId Xfer::Settle(Buf landed, const Segment& seg, const std::optional<Op>& mop, bool piece_first,
                      VertexId arrived, const char* note) {
  ScheduleBuilder& b = *b_;
  const Access write = AccessOf(seg, /*write=*/true);
  std::vector<VertexId> deps = Conflicts(write);
  deps.push_back(arrived);
  VertexId last;
  const auto es = static_cast<uint64_t>(std::max<int64_t>(seg.type.size(), 1));
  const auto elems = static_cast<int64_t>(seg.bytes() / es);
  if (seg.type.contiguous()) {
    if (mop.has_value()) {
      last = b.Reduce(landed, seg.buf + seg.first, elems, seg.type, *mop, With(deps), piece_first);
    } else {
      last = b.Copy(landed, seg.buf + seg.first, seg.bytes(), With(deps));
    }
  } else if (!mop.has_value()) {
    last = b.UnpackRange(landed, seg.count, seg.type, seg.first, seg.last, seg.buf, With(deps));
  } else {  // combine on the packed form: pack the segment's chunk, combine, unpack it again
    const Buf acc = b.Temp(seg.bytes());
    const VertexId packed =
        b.PackRange(seg.buf, seg.count, seg.type, seg.first, seg.last, acc, With(Conflicts(AccessOf(seg, false))));
    made_.push_back(packed);
    const VertexId combined = b.Reduce(landed, acc, elems, seg.type, *mop, With({arrived, packed}), piece_first);
    made_.push_back(combined);
    deps.push_back(combined);
    last = b.UnpackRange(acc, seg.count, seg.type, seg.first, seg.last, seg.buf, With(deps));
  }
  b.Note(last, note);
  made_.push_back(last);
  Record(write, last);
  return last;
}

namespace {

struct Chunks {
  uint64_t size;
  uint64_t n;
  Chunks(uint64_t bytes, uint64_t chunk) : size(chunk), n(bytes == 0 ? 1 : 1 + (bytes - 1) / chunk) {}
  // Chunk k of [first, last).
  Segment Of(const Segment& s, uint64_t k) const {
    return s.Range(s.first + k * size, k + 1 >= n ? s.last : s.first + (k + 1) * size);
  }
  uint64_t Bytes(uint64_t total, uint64_t k) const { return (k + 1 >= n ? total : (k + 1) * size) - k * size; }
};

}  // namespace

absl::Status Xfer::Combinable(const char* op, const Segment& seg, const std::optional<Op>& mop, int src) const {
  if (!mop.has_value()) return absl::OkStatus();
  // Chunks are cut alike on both ends of a link (every op cuts every
  // `chunk_bytes`), so a combined piece and its chunks must be whole elements.
  const auto es = static_cast<uint64_t>(std::max<int64_t>(seg.type.size(), 1));
  const char* what = seg.first % es != 0                                      ? "starts inside an element"
                     : seg.bytes() % es != 0                                  ? "ends inside an element"
                     : options_.chunk_bytes != 0 && options_.chunk_bytes % es != 0 ? "is cut inside an element"
                                                                                   : nullptr;
  if (what == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "xfer %s %s (%s, rank %d) from rank %d: a combined piece %s of %s (%d bytes; bytes [%d, %d), chunks of %d)",
      scatter_ ? "scatter" : "gather", op, b_->name(), b_->rank(), src, what, seg.type.name(), es, seg.first,
      seg.last, options_.chunk_bytes));
}

Buf Xfer::Landing(BufferMode mode, uint64_t bytes, int src, int dest) {
  switch (mode) {
    case BufferMode::kSenderSupplies: return b_->LentTemp(bytes, dest);
    case BufferMode::kReceiverSupplies: return b_->LentTemp(bytes, src);
    default: return b_->Temp(bytes);
  }
}

absl::Status Xfer::RecvMopOp(const Segment& seg, const std::optional<Op>& mop, int peer, bool piece_first) {
  const int src = scatter_ ? (peer == kNoPeer ? peer_ : peer) : peer;
  CARTAGE_RETURN_IF_ERROR(Usable("recv_mop_op", src));
  CARTAGE_RETURN_IF_ERROR(Combinable("recv_mop_op", seg, mop, src));
  ScheduleBuilder& b = *b_;
  const Chunks ch(seg.bytes(), Chunk());
  for (uint64_t k = 0; k < ch.n; ++k) {
    const Segment piece = ch.Of(seg, k);
    VertexId got;
    if (!mop.has_value() && seg.type.contiguous()) {  // straight into the user's memory
      const Access w = AccessOf(piece, /*write=*/true);
      got = b.Recv(piece.buf + piece.first, piece.bytes(), src, With(Conflicts(w)));
      Record(w, got);
      made_.push_back(got);
    } else {
      const Buf landing = b.Temp(piece.bytes());
      got = b.Recv(landing, piece.bytes(), src, With({}));
      made_.push_back(got);
      Settle(landing, piece, mop, piece_first, got, mop.has_value() ? "mop" : "unpack");
    }
    if (ch.n > 1) b.Chunk(got, static_cast<int>(k));
  }
  return absl::OkStatus();
}

absl::Status Xfer::RecvMopForwardOp(const Segment& seg, const std::optional<Op>& mop, int peer, bool piece_first) {
  const int src = scatter_ ? peer_ : peer;
  const int dest = scatter_ ? peer : peer_;
  CARTAGE_RETURN_IF_ERROR(Usable("recv_mop_forward_op", src));
  CARTAGE_RETURN_IF_ERROR(Usable("recv_mop_forward_op", dest));
  CARTAGE_RETURN_IF_ERROR(Combinable("recv_mop_forward_op", seg, mop, src));
  ScheduleBuilder& b = *b_;
  const PathInfo from = Path(src);
  const PathInfo to = Path(dest);
  const Chunks ch(seg.bytes(), Chunk());
  for (uint64_t k = 0; k < ch.n; ++k) {
    const Segment piece = ch.Of(seg, k);
    const ForwardFacts f{.bytes = piece.bytes(),
                         .has_segment = true,
                         .segment_contiguous = seg.type.contiguous(),
                         .mop = mop.has_value(),
                         .from = from,
                         .to = to};
    CARTAGE_ASSIGN_OR_RETURN(BufferMode mode, ModeFor(f, "recv_mop_forward_op", src, dest));
    modes_.push_back(mode);
    VertexId got;
    VertexId sent;
    if (mode == BufferMode::kUseSegment && seg.type.contiguous()) {
      const Access w = AccessOf(piece, /*write=*/true);
      got = b.Recv(piece.buf + piece.first, piece.bytes(), src, With(Conflicts(w)));
      Record(w, got);
      made_.push_back(got);
      const Access r = AccessOf(piece, /*write=*/false);
      sent = b.Send(piece.buf + piece.first, piece.bytes(), dest, With(Conflicts(r)));
      b.Depend(got, sent, EdgeKind::kProgress);
      Record(r, sent);
    } else if (mode == BufferMode::kUseSegment) {  // arrives unpacked into the segment, leaves packed from it
      const Buf landing = b.Temp(piece.bytes());
      got = b.Recv(landing, piece.bytes(), src, With({}));
      made_.push_back(got);
      const VertexId in = Settle(landing, piece, std::nullopt, true, got, "unpack");
      const Buf out = b.Temp(piece.bytes());
      const Access r = AccessOf(piece, /*write=*/false);
      std::vector<VertexId> deps = Conflicts(r);
      deps.push_back(in);
      const VertexId packed = b.PackRange(piece.buf, piece.count, piece.type, piece.first, piece.last, out, With(deps));
      Record(r, packed);
      made_.push_back(packed);
      sent = b.Send(out, piece.bytes(), dest, With({packed}));
      b.Depend(got, sent, EdgeKind::kProgress);
    } else {
      const Buf landing = Landing(mode, piece.bytes(), src, dest);
      got = b.Recv(landing, piece.bytes(), src, With({}));
      made_.push_back(got);
      sent = b.Send(landing, piece.bytes(), dest, With({}));
      b.Depend(got, sent, mode == BufferMode::kReceiverSupplies ? EdgeKind::kBuffer : EdgeKind::kProgress);
      Settle(landing, piece, mop, piece_first, got, mop.has_value() ? "mop" : "unpack");
    }
    b.Note(sent, BufferModeName(mode));
    made_.push_back(sent);
    if (ch.n > 1) {
      b.Chunk(got, static_cast<int>(k));
      b.Chunk(sent, static_cast<int>(k));
    }
  }
  return absl::OkStatus();
}

absl::Status Xfer::ForwardOp(uint64_t bytes, int peer) {
  const int src = scatter_ ? peer_ : peer;
  const int dest = scatter_ ? peer : peer_;
  CARTAGE_RETURN_IF_ERROR(Usable("forward_op", src));
  CARTAGE_RETURN_IF_ERROR(Usable("forward_op", dest));
  ScheduleBuilder& b = *b_;
  const PathInfo from = Path(src);
  const PathInfo to = Path(dest);
  const Chunks ch(bytes, Chunk());
  for (uint64_t k = 0; k < ch.n; ++k) {
    const uint64_t len = ch.Bytes(bytes, k);
    const ForwardFacts f{.bytes = len, .has_segment = false, .segment_contiguous = false, .mop = false,
                         .from = from, .to = to};
    CARTAGE_ASSIGN_OR_RETURN(BufferMode mode, ModeFor(f, "forward_op", src, dest));
    modes_.push_back(mode);
    const Buf landing = Landing(mode, len, src, dest);
    const VertexId got = b.Recv(landing, len, src, With({}));
    const VertexId sent = b.Send(landing, len, dest, With({}));
    b.Depend(got, sent, mode == BufferMode::kReceiverSupplies ? EdgeKind::kBuffer : EdgeKind::kProgress);
    b.Note(sent, BufferModeName(mode));
    made_.push_back(got);
    made_.push_back(sent);
    if (ch.n > 1) {
      b.Chunk(got, static_cast<int>(k));
      b.Chunk(sent, static_cast<int>(k));
    }
  }
  return absl::OkStatus();
}

absl::Status Xfer::SendOp(const Segment& seg, int peer) {
  const int dest = scatter_ ? peer : (peer == kNoPeer ? peer_ : peer);
  CARTAGE_RETURN_IF_ERROR(Usable("send_op", dest));
  ScheduleBuilder& b = *b_;
  const Chunks ch(seg.bytes(), Chunk());
  for (uint64_t k = 0; k < ch.n; ++k) {
    const Segment piece = ch.Of(seg, k);
    const Access r = AccessOf(piece, /*write=*/false);
    VertexId sent;
    if (seg.type.contiguous()) {
      sent = b.Send(piece.buf + piece.first, piece.bytes(), dest, With(Conflicts(r)));
      Record(r, sent);
    } else {
      const Buf out = b.Temp(piece.bytes());
      const VertexId packed =
          b.PackRange(piece.buf, piece.count, piece.type, piece.first, piece.last, out, With(Conflicts(r)));
      Record(r, packed);
      made_.push_back(packed);
      sent = b.Send(out, piece.bytes(), dest, With({packed}));
    }
    made_.push_back(sent);
    if (ch.n > 1) b.Chunk(sent, static_cast<int>(k));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<VertexId>> Xfer::Start() {
  if (started_) {
    return absl::FailedPreconditionError(absl::StrFormat("xfer %s start (%s, rank %d): started already",
                                                         scatter_ ? "scatter" : "gather", b_->name(), b_->rank()));
  }
  started_ = true;
  std::set<VertexId> waited;
  const auto& vs = b_->vertices();
  for (VertexId v : made_) {
    for (const Edge& e : vs[static_cast<std::size_t>(v)].after) waited.insert(e.from);
  }
  std::vector<VertexId> sinks;
  for (VertexId v : made_) {
    if (!waited.contains(v)) sinks.push_back(v);
  }
  std::sort(sinks.begin(), sinks.end());
  sinks.erase(std::unique(sinks.begin(), sinks.end()), sinks.end());
  return sinks;
}

}  // namespace cartage
