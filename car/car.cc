#include "car/car.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "car/recv_fsm.h"
#include "car/rma_fsm.h"
#include "datatype/segment_walk.h"
#include "car/send_fsm.h"
#include "car/unexpected_fsm.h"
#include "car/vertex_fsm.h"

namespace cartage::car {

absl::string_view KindName(CarKind k) {
  switch (k) {
    case CarKind::kSend: return "send";
    case CarKind::kRecv: return "recv";
    case CarKind::kUnexpected: return "unexpected";
    case CarKind::kVertex: return "vertex";
    case CarKind::kRma: return "rma";
    case CarKind::kCount: break;
  }
  return "?";
}

std::string FlagsToString(CarFlags f) {
  static constexpr std::pair<CarFlag, absl::string_view> kNames[] = {
      {CarFlag::kSendData, "SEND_DATA"},
      {CarFlag::kRecvData, "RECV_DATA"},
      {CarFlag::kSupplyPackedBuf, "SUPPLY_PACKED_BUF"},
      {CarFlag::kPackedBufDependency, "PACKED_BUF_DEPENDENCY"},
      {CarFlag::kPack, "PACK"},
      {CarFlag::kUnpack, "UNPACK"},
      {CarFlag::kMop, "MOP"},
      {CarFlag::kProgressDependency, "PROGRESS_DEPENDENCY"},
      {CarFlag::kSupplyProgress, "SUPPLY_PROGRESS"},
  };
  std::vector<absl::string_view> parts;
  for (const auto& [flag, name] : kNames) {
    if (f.has(flag)) parts.push_back(name);
  }
  return parts.empty() ? "NONE" : absl::StrJoin(parts, "|");
}

namespace {

absl::Status Reject(const CarSpec& s, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "building %s CAR (context %d, rank %d, tag %d, flags %s): %s", KindName(s.kind),
      s.envelope.context_id, s.envelope.rank, s.envelope.tag, FlagsToString(s.flags), why));
}

// A segment's elements as a Datatype (cold paths: reductions, validation).
datatype::Datatype TypeOf(const Segment& g) { return g.dtype != nullptr ? *g.dtype : datatype::Datatype::Basic(g.type); }

}  // namespace

absl::Status ValidateSpec(const CarSpec& s) {
  const CarFlags f = s.flags;
  if (s.kind >= CarKind::kCount) return Reject(s, "unknown kind");
  const bool sends = f.has(CarFlag::kSendData);
  const bool recvs = f.has(CarFlag::kRecvData);
  if (sends && recvs) return Reject(s, "SEND_DATA and RECV_DATA on one CAR");
  if (s.kind == CarKind::kSend && !sends) return Reject(s, "a send CAR needs SEND_DATA");
  if ((s.kind == CarKind::kRecv || s.kind == CarKind::kUnexpected) && !recvs) {
    return Reject(s, "a receive CAR needs RECV_DATA");
  }
  if (f.has(CarFlag::kPack) && !sends) return Reject(s, "PACK on a CAR that does not send");
  if (f.has(CarFlag::kUnpack) && !recvs) return Reject(s, "UNPACK on a CAR that does not receive");
  if (f.has(CarFlag::kMop) != (s.mop != nullptr)) {
    return Reject(s, "MOP and a reduction function go together");
  }
  if (f.has(CarFlag::kMop) && !f.has(CarFlag::kPack) && !f.has(CarFlag::kUnpack)) {
    return Reject(s, "MOP needs PACK or UNPACK to apply it");
  }
  if (f.has(CarFlag::kMop) && f.has(CarFlag::kPack)) {
    return Reject(s, "MOP while packing is not supported: reduce where the data is unpacked (UNPACK|MOP)");
  }
  if (f.has(CarFlag::kMop) && s.pack_buf == nullptr && !f.has(CarFlag::kPackedBufDependency)) {
    return Reject(s, "UNPACK|MOP needs a packed buffer to receive into before it reduces");
  }
  if (f.has(CarFlag::kMop)) {
    if (absl::Status why = s.mop->Check(TypeOf(s.segment)); !why.ok()) return Reject(s, why.message());
  }

  // Dependencies: a dependent names an existing supplier.
  const bool supplies_buf = f.has(CarFlag::kSupplyPackedBuf);
  const bool needs_buf = f.has(CarFlag::kPackedBufDependency);
  if (supplies_buf && needs_buf) {
    return Reject(s, "SUPPLY_PACKED_BUF and PACKED_BUF_DEPENDENCY on one CAR");
  }
  if (needs_buf) {
    if (s.buf_dep == nullptr) return Reject(s, "PACKED_BUF_DEPENDENCY without a supplier (buf_dep)");
    if (!s.buf_dep->flags().has(CarFlag::kSupplyPackedBuf)) {
      return Reject(s, absl::StrFormat("buf_dep CAR #%d does not have SUPPLY_PACKED_BUF",
                                       s.buf_dep->id()));
    }
    if (s.pack_buf != nullptr) return Reject(s, "PACKED_BUF_DEPENDENCY but a pack_buf is already set");
  } else if (s.buf_dep != nullptr) {
    return Reject(s, "buf_dep set without PACKED_BUF_DEPENDENCY");
  }
  if (supplies_buf && (s.pack_buf == nullptr || s.pack_size == 0)) {
    return Reject(s, "SUPPLY_PACKED_BUF without a packed buffer to supply");
  }
  if (f.has(CarFlag::kProgressDependency)) {
    if (s.progress_dep == nullptr) {
      return Reject(s, "PROGRESS_DEPENDENCY without a supplier (progress_dep)");
    }
    if (!s.progress_dep->flags().has(CarFlag::kSupplyProgress)) {
      return Reject(s, absl::StrFormat("progress_dep CAR #%d does not have SUPPLY_PROGRESS",
                                       s.progress_dep->id()));
    }
  } else if (s.progress_dep != nullptr) {
    return Reject(s, "progress_dep set without PROGRESS_DEPENDENCY");
  }

  // Segment.
  const Segment& g = s.segment;
  if (g.type >= datatype::BasicType::kCount) return Reject(s, "unknown element type");
  if (g.first > g.last) return Reject(s, "segment range first > last");
  if (g.last > g.total()) {
    return Reject(s, absl::StrFormat("segment range ends at byte %d past the %d-byte buffer",
                                     g.last, g.total()));
  }
  if (g.buf == nullptr && g.bytes() > 0) return Reject(s, "segment of non-zero length without a buffer");
  if (f.has(CarFlag::kPack) && g.buf == nullptr) return Reject(s, "PACK without a segment to pack");

  // Envelope: wildcards are for receives.
  const int32_t min_rank = s.kind == CarKind::kRecv ? kAnySource : 0;
  const int32_t min_tag = s.kind == CarKind::kRecv ? kAnyTag : 0;
  if (s.kind != CarKind::kVertex && s.envelope.rank < min_rank) {
    return Reject(s, absl::StrFormat("invalid rank %d", s.envelope.rank));
  }
  if (s.kind != CarKind::kVertex && s.envelope.tag < min_tag) {
    return Reject(s, absl::StrFormat("invalid tag %d", s.envelope.tag));
  }

  // Who hears about it.
  if (s.kind != CarKind::kUnexpected && s.counter == nullptr) {
    return Reject(s, "no completion counter");
  }
  if (s.kind != CarKind::kUnexpected && s.vc == nullptr) return Reject(s, "no VC");
  if (s.kind != CarKind::kVertex && (!s.successors.empty() || s.predecessors != 0)) {
    return Reject(s, "successors and predecessors belong to schedule vertices");
  }
  if (s.synchronous && s.kind != CarKind::kSend) return Reject(s, "only a send can be synchronous");
  if (s.kind == CarKind::kRma) {
    // One direction, its own segment: nothing packed, reduced or depended on.
    if (s.flags != CarFlags(CarFlag::kSendData) && s.flags != CarFlags(CarFlag::kRecvData)) {
      return Reject(s, "a one-sided CAR writes (SEND_DATA) or reads (RECV_DATA), with no other flag");
    }
    if (!g.contiguous()) return Reject(s, "a one-sided CAR moves one run of memory");
  } else if (s.remote.addr != 0 || s.remote.key != 0) {
    return Reject(s, "only a one-sided CAR names a peer's memory");
  }
  return absl::OkStatus();
}

// Car's constructor leaves the state word at 0 for every kind.
static_assert(static_cast<uint8_t>(SendDef::kInitial) == 0 && static_cast<uint8_t>(RecvDef::kInitial) == 0 &&
                  static_cast<uint8_t>(UnexpectedDef::kInitial) == 0 && static_cast<uint8_t>(VertexDef::kInitial) == 0 &&
                  static_cast<uint8_t>(RmaCarDef::kInitial) == 0,
              "a fresh CAR starts in state 0 of its machine");

void Car::Rearm() {
  switch (spec_.kind) {
    case CarKind::kSend: SendMachine::Reset(*this); break;
    case CarKind::kRecv: RecvMachine::Reset(*this); break;
    case CarKind::kUnexpected: UnexpectedMachine::Reset(*this); break;
    case CarKind::kVertex: VertexMachine::Reset(*this); break;
    case CarKind::kRma: RmaCarMachine::Reset(*this); break;
    case CarKind::kCount: break;
  }
  proto_ = 0;
  CountDependencies();
  bytes_total_ = bytes_done_ = bytes_copied_ = 0;
  matched_ = nullptr;
  status_ = absl::OkStatus();
  // buf_consumer_ and progress_dependent_ are links, kept across re-arming.
}

absl::string_view Car::state_name() const {
  const uint8_t s = state_.value();
  switch (spec_.kind) {
    case CarKind::kSend: return SendDef::kStates[s];
    case CarKind::kRecv: return RecvDef::kStates[s];
    case CarKind::kUnexpected: return UnexpectedDef::kStates[s];
    case CarKind::kVertex: return VertexDef::kStates[s];
    case CarKind::kRma: return RmaCarDef::kStates[s];
    case CarKind::kCount: break;
  }
  return "?";
}

std::span<std::byte> Car::LandingZone() {
  if (matched_ != nullptr) return matched_->LandingZone();
  return LandsContiguous() ? ContiguousZone() : std::span<std::byte>();
}

std::span<std::byte> Car::ContiguousZone() {
  std::byte* base = nullptr;
  uint64_t size = 0;
  if (spec_.pack_buf != nullptr) {
    base = static_cast<std::byte*>(spec_.pack_buf);
    size = spec_.pack_size;
  } else if (spec_.kind == CarKind::kRecv) {
    base = static_cast<std::byte*>(spec_.segment.buf) + spec_.segment.first;
    size = spec_.segment.bytes();
  }
  if (base == nullptr || bytes_done_ >= size) return {};
  return {base + bytes_done_, size - bytes_done_};
}

bool Car::LandsContiguous() const {
  if (matched_ != nullptr) return matched_->LandsContiguous();
  return spec_.pack_buf != nullptr || spec_.segment.contiguous();
}

uint64_t Car::Land(const void* from, uint64_t n) {
  if (matched_ != nullptr) return matched_->Land(from, n);
  const Segment& g = spec_.segment;
  if (spec_.pack_buf == nullptr && spec_.kind == CarKind::kRecv && !g.contiguous()) {  // into the user's layout
    const uint64_t at = g.first + bytes_done_;
    const uint64_t fit = at < g.last ? std::min<uint64_t>(g.last - at, n) : 0;
    if (fit > 0) {
      datatype::Unpack(from, static_cast<int64_t>(g.count), *g.dtype, static_cast<int64_t>(at),
             static_cast<int64_t>(at + fit), g.buf);
    }
    return fit;
  }
  const std::span<std::byte> zone = ContiguousZone();
  const uint64_t fit = std::min<uint64_t>(zone.size(), n);
  if (fit > 0) CopyBytes(zone.data(), from, fit);
  return fit;
}

void Car::GatherPacked(uint64_t offset, void* to, uint64_t n) const {
  const Segment& g = spec_.segment;
  datatype::Pack(g.buf, static_cast<int64_t>(g.count), *g.dtype, static_cast<int64_t>(g.first + offset),
       static_cast<int64_t>(g.first + offset + n), to);
}

absl::Status Car::UnpackArrived() {
  const Segment& g = spec_.segment;
  const uint64_t n = std::min(bytes_done_, spec_.pack_size);
  if (!spec_.flags.has(CarFlag::kUnpack) || spec_.pack_buf == nullptr || n == 0) return absl::OkStatus();
  const datatype::Datatype type = TypeOf(g);
  const auto count = static_cast<int64_t>(g.count);
  const auto first = static_cast<int64_t>(g.first);
  const auto last = static_cast<int64_t>(std::min<uint64_t>(g.last, g.first + n));
  if (spec_.mop != nullptr) return datatype::ReduceUnpack(*spec_.mop, spec_.pack_buf, count, type, first, last, g.buf);
  datatype::Unpack(spec_.pack_buf, count, type, first, last, g.buf);
  return absl::OkStatus();
}

bool Car::UnpackCutsAnElement(uint64_t arriving) const {
  if (spec_.mop == nullptr || !spec_.flags.has(CarFlag::kUnpack) || spec_.pack_buf == nullptr) return false;
  const Segment& g = spec_.segment;
  const uint64_t n = std::min(bytes_done_ + arriving, spec_.pack_size);
  // As datatype::ReduceUnpack bounds and measures it.
  const uint64_t size = g.dtype != nullptr ? static_cast<uint64_t>(g.dtype->size()) : datatype::SizeOf(g.type);
  const uint64_t first = g.first;
  const uint64_t last = std::min({g.last, g.first + n, g.count * size});
  if (n == 0 || first >= last) return false;
  uint64_t unit = size;
  datatype::BasicType basic = datatype::BasicType::kByte;
  if (g.dtype != nullptr && spec_.mop->kind() != datatype::OpKind::kUser && g.dtype->homogeneous(&basic)) {
    unit = datatype::SizeOf(basic);
  }
  return unit != 0 && (first % unit != 0 || last % unit != 0);
}

}  // namespace cartage::car
