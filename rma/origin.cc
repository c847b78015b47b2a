// The origin side of one-sided communication: an operation's checks, its
// control message, the CARs that carry it (rma_op), and the fence that
// closes an epoch (rma_epoch). Passive epochs are in passive.cc; the
// method's own writes and reads in one_sided.cc.
#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "cartage/collectives.h"
#include "datatype/segment_walk.h"
#include "rma/window_state.h"

namespace cartage::rma {

namespace {

// The blocks `count` elements of `type` cover, as offsets from where the
// first element starts, in the order of the packed data; adjacent ones
// merged.
Layout LayoutOf(int64_t count, const Datatype& type) {
  Layout runs;
  if (type.contiguous()) {  // one block (none for no bytes)
    if (count > 0 && type.size() > 0) runs.push_back({0, count * type.size()});
    return runs;
  }
  // Offsets only: the walk is over an address no data is at, far from 0 on
  // both sides, and read back relative to it.
  const uintptr_t anchor = uintptr_t{1} << 62;
  datatype::WalkSegment(reinterpret_cast<const void*>(anchor), count, type, 0, count * type.size(),
                        [&](std::byte* at, int64_t bytes) {
                          const int64_t offset =
                              static_cast<int64_t>(reinterpret_cast<uintptr_t>(at) - anchor);
                          if (!runs.empty() && runs.back().offset + runs.back().length == offset) {
                            runs.back().length += bytes;
                          } else {
                            runs.push_back({offset, bytes});
                          }
                        });
  return runs;
}

}  // namespace

const char* OpKindName(OpKind kind) {
  switch (kind) {
    case OpKind::kPut: return "put";
    case OpKind::kGet: return "get";
    case OpKind::kAccumulate: return "accumulate";
    case OpKind::kGetAccumulate: return "get_accumulate";
    case OpKind::kCompareAndSwap: return "compare_and_swap";
    case OpKind::kLock: return "lock";
    case OpKind::kFlush: return "flush";
    case OpKind::kUnlock: return "unlock";
    case OpKind::kCount: break;
  }
  return "?";
}

absl::Status WindowState::Issue(const Access& a, std::shared_ptr<OriginOp>* issued_op) {
  const OpKind kind = a.kind;
  const char* what = OpKindName(kind);
  const int target = a.target;
  const auto fail = [&](absl::StatusCode code, const std::string& why) {
    return absl::Status(code, absl::StrFormat("%s: %s to rank %d at displacement %d: %s", Name(), what, target,
                                              a.disp, why));
  };
  const EpochState st = EpochMachine::StateOf(*this);
  if (st != EpochState::kOpen && st != EpochState::kPassive && st != EpochState::kStarted) {
    return fail(absl::StatusCode::kFailedPrecondition,
                st == EpochState::kIdle    ? "no epoch is open (a Fence, a Lock on the target, or a Start opens one)"
                : st == EpochState::kFreed ? "the window is freed"
                                           : "the window's last epoch failed");
  }
  if (target < 0 || target >= comm.size()) {
    return fail(absl::StatusCode::kInvalidArgument, absl::StrFormat("no such rank in a window of %d", comm.size()));
  }
  const bool passive = st == EpochState::kPassive;
  const bool group = st == EpochState::kStarted;
  if (group && started_to[static_cast<std::size_t>(target)] == 0) {
    return fail(absl::StatusCode::kFailedPrecondition,
                absl::StrFormat("rank %d is not in the group of this rank's start (an access epoch reaches the "
                                "targets it started)",
                                target));
  }
  if (passive) {
    LockAccess* held = locks[static_cast<std::size_t>(target)].get();
    if (held == nullptr || AccessMachine::IsFinal(*held)) {
      return fail(absl::StatusCode::kFailedPrecondition,
                  absl::StrFormat("this rank holds no lock on rank %d (a passive epoch reaches the targets it locked)",
                                  target));
    }
    // The lock's first use sends its request, which this operation follows.
    if (AccessMachine::StateOf(*held) == AccessState::kPending) {
      MakeRoom(target, sizeof(Header));
      (void)AccessMachine::Dispatch(*held, AccessEvent::kUse);
    }
    if (AccessMachine::StateOf(*held) == AccessState::kFailed) return held->status;
  }
  if (a.origin_count < 0 || a.target_count < 0 || a.result_count < 0) {
    return fail(absl::StatusCode::kInvalidArgument, absl::StrFormat("invalid count (origin %d, result %d, target %d)",
                                                                    a.origin_count, a.result_count, a.target_count));
  }
  const Datatype& ttype = *a.target_type;
  const int64_t layout_bytes = a.target_count * ttype.size();
  const bool fetches = Fetches(kind);
  const bool sends_origin = kind == OpKind::kPut || kind == OpKind::kAccumulate || kind == OpKind::kCompareAndSwap ||
                            (kind == OpKind::kGetAccumulate && a.op != kOpNoOp);
  // Both sides of every buffer hold the same number of bytes.
  const auto differs = [&](int64_t count, const Datatype* type) { return count * type->size() != layout_bytes; };
  const auto mismatch = [&](const char* side, int64_t count, const Datatype* type) {
    return fail(absl::StatusCode::kInvalidArgument,
                absl::StrFormat("the %s holds %d bytes (%d of %s), the target %d (%d of %s)", side,
                                count * type->size(), count, type->name(), layout_bytes, a.target_count,
                                ttype.name()));
  };
  if (kind == OpKind::kGet) {
    if (differs(a.result_count, a.result_type)) return mismatch("origin", a.result_count, a.result_type);
  } else {
    if (sends_origin && differs(a.origin_count, a.origin_type)) {
      return mismatch("origin", a.origin_count, a.origin_type);
    }
    if (fetches && differs(a.result_count, a.result_type)) return mismatch("result", a.result_count, a.result_type);
  }
  if (layout_bytes > 0 && ((sends_origin && a.origin == nullptr) ||
                           (fetches && a.result == nullptr) || (kind == OpKind::kCompareAndSwap && a.compare == nullptr))) {
    return fail(absl::StatusCode::kInvalidArgument, "null buffer");
  }
  datatype::BasicType basic = datatype::BasicType::kByte;
  if (kind != OpKind::kPut && kind != OpKind::kGet) {
    // One basic type on every side, and an operator defined on it.
    datatype::BasicType other;
    const bool one_type =
        ttype.homogeneous(&basic) && (!sends_origin || (a.origin_type->homogeneous(&other) && other == basic)) &&
        (!fetches || (a.result_type->homogeneous(&other) && other == basic));
    if (!one_type) {
      return fail(absl::StatusCode::kInvalidArgument,
                  absl::StrFormat("%s needs one basic type on every side (target %s)", what, ttype.name()));
    }
    if (kind == OpKind::kCompareAndSwap) {
      const datatype::TypeClass c = datatype::ClassOf(basic);
      if (a.target_count != 1 || (c != datatype::TypeClass::kInteger && c != datatype::TypeClass::kByte &&
                                  c != datatype::TypeClass::kLogical)) {
        return fail(absl::StatusCode::kInvalidArgument,
                    absl::StrFormat("compare-and-swap takes one element of an integer, logical or byte type (not %d "
                                    "of %s)",
                                    a.target_count, ttype.name()));
      }
    } else if (a.op < static_cast<uint8_t>(datatype::OpKind::kCount)) {
      const datatype::Op op(static_cast<datatype::OpKind>(a.op));
      if (op.kind() == datatype::OpKind::kUser) {
        return fail(absl::StatusCode::kInvalidArgument, "a user-defined operator cannot accumulate (predefined only)");
      }
      if (absl::Status s = op.Check(ttype); !s.ok()) return fail(s.code(), std::string(s.message()));
    }
  }
  // Checked here against the window every rank announced: nothing moves
  // for an access outside it (the target checks again).
  Layout runs = LayoutOf(a.target_count, ttype);
  const auto t = static_cast<std::size_t>(target);
  const uint64_t unit = static_cast<uint64_t>(units[t]);
  if (unit != 0 && a.disp > std::numeric_limits<uint64_t>::max() / 2 / unit) {
    return fail(absl::StatusCode::kOutOfRange, "the displacement overflows");
  }
  const int64_t at = static_cast<int64_t>(a.disp * unit);
  for (const Run& r : runs) {
    if (at + r.offset < 0 || (!dynamic && static_cast<uint64_t>(at + r.offset + r.length) > sizes[t])) {
      return fail(absl::StatusCode::kOutOfRange,
                  absl::StrFormat("%d bytes at byte %d lie outside rank %d's window of %d bytes (displacement "
                                  "unit %d); nothing was written",
                                  r.length, at + r.offset, target, sizes[t], unit));
    }
  }
  if (runs.size() > kMaxRuns) {
    return fail(absl::StatusCode::kInvalidArgument,
                absl::StrFormat("the target layout has %d blocks; one operation takes at most %d (split it)",
                                runs.size(), kMaxRuns));
  }

  const bool one_copy = OneCopies(kind, static_cast<uint64_t>(layout_bytes));
  if (direct() || one_copy) {
    // A single copy reaches the target's memory itself: once its lock is granted.
    if (one_copy && passive) CARTAGE_RETURN_IF_ERROR(AwaitGrant(*locks[t]));
    // Done as it is issued: on the stack unless a request follows it.
    OriginOp here;
    std::shared_ptr<OriginOp> held = issued_op != nullptr ? std::make_shared<OriginOp>() : nullptr;
    OriginOp& d = held != nullptr ? *held : here;
    Begin(d, kind, target, a.disp, static_cast<uint64_t>(layout_bytes));
    d.access = &a;
    d.runs = &runs;
    // The table's rows, compiled in line: a put or get idle -issue-> done,
    // an accumulate idle -issue-> issued -stored-> done (a failure takes
    // the table's own dispatch).
    if (one_copy) {
      (void)OpMachine::DispatchFromThen<OpState::kIdle, OpEvent::kIssue, OpState::kIssued, OpEvent::kStored>(d);
    } else if (kind == OpKind::kPut || kind == OpKind::kGet) {
      (void)OpMachine::DispatchFrom<OpState::kIdle, OpEvent::kIssue>(d);
    } else {
      (void)OpMachine::DispatchFromThen<OpState::kIdle, OpEvent::kIssue, OpState::kIssued, OpEvent::kStored>(d);
    }
    d.access = nullptr;
    d.runs = nullptr;
    ++issued;
    if (issued_op != nullptr) *issued_op = std::move(held);
    return d.status;
  }
  if (MovesRemotely(kind, static_cast<uint64_t>(layout_bytes), &runs)) {
    // The method writes or reads the target's memory itself: once its lock is granted.
    if (passive) CARTAGE_RETURN_IF_ERROR(AwaitGrant(*locks[t]));
    auto o = std::make_shared<OriginOp>();
    Begin(*o, kind, target, a.disp, static_cast<uint64_t>(layout_bytes));
    o->access = &a;
    o->runs = &runs;
    (void)OpMachine::Dispatch(*o, OpEvent::kIssue);
    o->access = nullptr;
    o->runs = nullptr;
    if (OpMachine::StateOf(*o) == OpState::kFailed) return o->status;
    ops.push_back(std::move(o));
    ++issued;
    if (issued_op != nullptr) *issued_op = ops.back();
    return absl::OkStatus();
  }
  auto o = std::make_shared<OriginOp>();
  Begin(*o, kind, target, a.disp, static_cast<uint64_t>(layout_bytes));
  OpMessages& m = o->msg.emplace();
  const uint64_t data_bytes = DataBytes(kind, a.op, static_cast<uint64_t>(layout_bytes));
  const std::size_t layout_size = sizeof(Header) + runs.size() * sizeof(Run);
  const bool inline_data = kind == OpKind::kCompareAndSwap ||
                           (data_bytes <= kInlineMax && sizeof(BatchHeader) + layout_size + data_bytes <= kControlMax);
  if (!inline_data && data_bytes > 0) {
    m.data_apart = true;
    m.origin = a.origin;
    m.count = a.origin_count;
    m.type = *a.origin_type;
  }
  if (fetches) {
    m.into = a.result;
    m.into_count = a.result_count;
    m.into_type = *a.result_type;
  }
  Header& h = m.header;
  h.magic = kMagic;
  h.kind = static_cast<uint8_t>(kind);
  h.op = a.op;
  h.basic = static_cast<uint8_t>(basic);
  h.inline_data = inline_data ? 1 : 0;
  h.epoch = passive ? kPassiveEpoch : group ? kGroupEpoch : epoch;
  h.runs = static_cast<uint32_t>(runs.size());
  h.disp = a.disp;
  h.bytes = static_cast<uint64_t>(layout_bytes);
  MakeRoom(target, RecordBytes(h));

  OriginOp& ref = *o;
  ops.push_back(std::move(o));
  ref.access = &a;  // what its record packs
  ref.runs = &runs;
  (void)OpMachine::Dispatch(ref, OpEvent::kIssue);
  ref.access = nullptr;
  ref.runs = nullptr;
  if (OpMachine::StateOf(ref) == OpState::kFailed) {
    const absl::Status why = ref.status;
    ops.pop_back();  // its record never joined the batch: the target counts nothing of it
    ops_final = std::min(ops_final, ops.size());
    return why;
  }
  // A passive epoch's operations are counted by its flush and unlock, a
  // start's by its complete, a fence epoch's by the fence.
  if (group) {
    ++group_sent[t];
  } else if (!passive) {
    ++sent_to[t];
  }
  ++issued;
  if (issued_op != nullptr) *issued_op = ops.back();
  if (m.data_apart) SendBatch(target);  // its data follows its record at once
  return ref.status;
}

// ---- batches -------------------------------------------------------------------------

void WindowState::MakeRoom(int target, std::size_t n) {
  const OutBatch& b = batches[static_cast<std::size_t>(target)];
  if (b.packet != nullptr && b.packet->bytes.size() + n > kBatchMax) SendBatch(target);
}

std::byte* WindowState::AppendRecord(int target, std::size_t n, std::shared_ptr<Packet>* packet) {
  OutBatch& b = batches[static_cast<std::size_t>(target)];
  if (b.packet == nullptr) {
    b.packet = FreshPacket();
    b.packet->bytes.resize(sizeof(BatchHeader));
  }
  std::vector<std::byte>& record = b.packet->bytes;
  const std::size_t at = record.size();
  record.resize(at + n);
  ++b.count;
  *packet = b.packet;
  return record.data() + at;
}

std::shared_ptr<Packet> WindowState::FreshPacket() {
  for (const std::shared_ptr<Packet>& p : packets) {
    if (p.use_count() == 1 && !p->req.active()) {  // its send waited for, its operations and requests gone
      p->bytes.clear();
      p->failure = absl::OkStatus();
      return p;
    }
  }
  auto p = std::make_shared<Packet>();
  p->bytes.reserve(kBatchMax);
  if (packets.size() < kPacketsKept) packets.push_back(p);
  return p;
}

void WindowState::SendBatch(int target) {
  const auto t = static_cast<std::size_t>(target);
  if (batches[t].packet == nullptr) return;
  OutBatch b = std::move(batches[t]);
  batches[t] = OutBatch{};
  Packet& p = *b.packet;
  const BatchHeader head{kBatchMagic, b.count};
  std::memcpy(p.bytes.data(), &head, sizeof(head));
  const absl::Status st = comm.Isend(p.bytes.data(), p.bytes.size(), target, kTagControl, &p.req);
  RmaSignal x;
  if (st.ok()) {
    ++control_messages;
  } else {
    // Nothing of it reaches the target, which counts none of its operations.
    p.failure = absl::Status(st.code(), absl::StrFormat("its control message: %s", st.message()));
    x.error = p.failure;
    for (const OriginOp* op : b.ops) {
      const uint32_t e = op->msg->header.epoch;
      if (e == kGroupEpoch) {
        --group_sent[t];
      } else if (FenceEpoch(e)) {
        --sent_to[t];
      }
    }
  }
  for (OriginOp* op : b.ops) (void)OpMachine::Dispatch(*op, st.ok() ? OpEvent::kDeparted : OpEvent::kError, x);
}

void WindowState::SendBatches() {
  for (int r = 0; r < comm.size(); ++r) SendBatch(r);
}

bool WindowState::Reaches(int target, uint64_t disp, uint64_t n) const {
  const auto t = static_cast<std::size_t>(target);  // a negative rank is past every one
  if (!direct() || t >= sizes.size()) return false;
  switch (static_cast<EpochState>(state.value())) {
    case EpochState::kOpen: break;
    case EpochState::kPassive: {
      const LockAccess* held = locks[t].get();
      if (held == nullptr || static_cast<AccessState>(held->state.value()) != AccessState::kLocked) return false;
      break;
    }
    case EpochState::kStarted:
      if (started_to[t] == 0) return false;
      break;
    default: return false;
  }
  uint64_t at = 0;  // (no division on the way: it costs more than the rest of the checks)
  return !__builtin_mul_overflow(disp, static_cast<uint64_t>(units[t]), &at) && at <= sizes[t] && n <= sizes[t] - at;
}

bool WindowState::CopyDirect(OpKind kind, void* local, uint64_t n, int target, uint64_t disp) {
  if ((n > 0 && local == nullptr) || !Reaches(target, disp, n)) return false;
  OriginOp d;
  Begin(d, kind, target, disp, n);
  d.local = local;
  (void)OpMachine::DispatchFrom<OpState::kIdle, OpEvent::kIssue>(d);
  ++issued;
  return true;
}

std::optional<absl::Status> WindowState::AccumulateDirect(const Access& a) {
  if (!direct() || (a.kind != OpKind::kAccumulate && a.kind != OpKind::kGetAccumulate)) return std::nullopt;
  // One basic type, contiguous, on every side, as many bytes on each.
  const Datatype& there = *a.target_type;
  datatype::BasicType basic = datatype::BasicType::kByte;
  if (!there.contiguous() || !there.homogeneous(&basic) || a.target_count < 0) return std::nullopt;
  const int64_t n = a.target_count * there.size();
  const auto same = [&](const void* buf, int64_t count, const Datatype* type) {
    datatype::BasicType other = datatype::BasicType::kByte;
    return type->contiguous() && type->homogeneous(&other) && other == basic && count >= 0 &&
           count * type->size() == n && (n == 0 || buf != nullptr);
  };
  if ((a.kind == OpKind::kAccumulate || a.op != kOpNoOp) && !same(a.origin, a.origin_count, a.origin_type)) {
    return std::nullopt;
  }
  if (a.kind == OpKind::kGetAccumulate && !same(a.result, a.result_count, a.result_type)) return std::nullopt;
  if (a.op != kOpReplace && a.op != kOpNoOp &&
      (a.op >= static_cast<uint8_t>(datatype::OpKind::kUser) ||
       !datatype::Defined(static_cast<datatype::OpKind>(a.op), basic))) {
    return std::nullopt;
  }
  if (!Reaches(a.target, a.disp, static_cast<uint64_t>(n))) return std::nullopt;
  OriginOp d;
  Begin(d, a.kind, a.target, a.disp, static_cast<uint64_t>(n));
  d.access = &a;  // (and no layout: one block)
  (void)OpMachine::DispatchFromThen<OpState::kIdle, OpEvent::kIssue, OpState::kIssued, OpEvent::kStored>(d);
  ++issued;
  return d.status;
}

std::optional<absl::Status> OpDone::Poll(int* work) {
  if (!OpMachine::IsFinal(*op_)) {
    const std::shared_ptr<WindowState> w = w_.lock();
    if (w == nullptr || EpochMachine::StateOf(*w) == EpochState::kFreed) {
      return absl::FailedPreconditionError(absl::StrFormat("%s of %d bytes to rank %d: its window went first",
                                                           OpKindName(op_->kind), op_->bytes, op_->target));
    }
    // Its batch leaves now: a request's wait needs it done.
    if (OpMachine::StateOf(*op_) == OpState::kBatched) w->SendBatch(op_->target);
    w->AdvanceOps(work);
    if (!OpMachine::IsFinal(*op_)) return std::nullopt;
  }
  return op_->status;
}

// ---- rma_op ------------------------------------------------------------------------

fsm::StateWord& OpDef::Cell(OriginOp& op) { return op.state; }
uint64_t OpDef::IdOf(const OriginOp& op) { return op.id; }
void OpDef::Subject(const OriginOp& op, const RmaSignal&, fsm::TraceRecord& r) {
  r.context = op.win->comm.context();
  r.peer = op.target;
  r.tag = static_cast<int32_t>(op.kind);
  r.bytes = op.bytes;
}

bool OpActions::Fetches(const OriginOp& op, const RmaSignal&) { return rma::Fetches(op.kind); }

void OpActions::Append(OriginOp& op, const RmaSignal&, OpEvents& events) {
  WindowState& w = *op.win;
  OpMessages& m = *op.msg;
  // What it fetches may come back as soon as its record is there: its
  // receive is posted first.
  if (rma::Fetches(op.kind)) {
    const absl::Status st = w.comm.Irecv(m.into, m.into_count, *m.into_type, op.target, kTagReply, &m.reply_req);
    if (!st.ok()) {
      RaiseFailed(op, st, events);
      return;
    }
  }
  const Header& h = m.header;
  std::byte* out = w.AppendRecord(op.target, RecordBytes(h), &m.packet);
  std::memcpy(out, &h, sizeof(h));
  out += sizeof(h);
  if (h.runs > 0) std::memcpy(out, op.runs->data(), h.runs * sizeof(Run));
  out += h.runs * sizeof(Run);
  if (h.inline_data != 0 && DataBytes(op.kind, h.op, h.bytes) > 0) {
    const Access& a = *op.access;
    const auto n = static_cast<int64_t>(h.bytes);
    datatype::Pack(a.origin, a.origin_count, *a.origin_type, 0, n, out);
    if (op.kind == OpKind::kCompareAndSwap) datatype::Pack(a.compare, 1, *a.origin_type, 0, n, out + n);
  }
  w.batches[static_cast<std::size_t>(op.target)].ops.push_back(&op);
}

void OpActions::SendData(OriginOp& op, const RmaSignal&, OpEvents& events) {
  OpMessages& m = *op.msg;
  if (!m.data_apart) return;
  const absl::Status st = op.win->comm.Isend(m.origin, m.count, *m.type, op.target, kTagData, &m.data_req);
  if (!st.ok()) RaiseFailed(op, st, events);
}

void OpActions::Fail(OriginOp& op, const RmaSignal& x, OpEvents&) {
  op.status = absl::Status(x.error.code(), absl::StrFormat("%s: %s of %d bytes to rank %d at displacement %d: %s",
                                                           op.win->Name(), OpKindName(op.kind), op.bytes, op.target,
                                                           op.disp, x.error.message()));
}

std::size_t WindowState::AdvanceOps(int* work) {
  while (ops_final < ops.size() && OpMachine::IsFinal(*ops[ops_final])) ++ops_final;
  std::size_t left = 0;
  for (std::size_t i = ops_final; i < ops.size(); ++i) {
    OriginOp& op = *ops[i];
    if (op.remote.has_value()) {  // the method moves it: its CAR's end is the operation's
      if (OpMachine::StateOf(op) == OpState::kIssued && op.remote->req.completed()) {
        FinishRemote(op);
        ++*work;
      }
      if (!OpMachine::IsFinal(op)) ++left;
      continue;
    }
    OpMessages& m = *op.msg;  // the rest kept here are served ones
    if (OpMachine::StateOf(op) == OpState::kIssued && m.packet->req.completed() && m.data_req.completed()) {
      absl::Status st = m.packet->Result();  // completed: at once
      st.Update(m.data_req.Wait());
      RmaSignal x;
      x.error = st;
      (void)OpMachine::Dispatch(op, st.ok() ? OpEvent::kSent : OpEvent::kError, x);
      ++*work;
    }
    if (OpMachine::StateOf(op) == OpState::kAwaitingData && m.reply_req.completed()) {
      const absl::Status st = m.reply_req.Wait();
      RmaSignal x;
      x.error = st;
      (void)OpMachine::Dispatch(op, st.ok() ? OpEvent::kData : OpEvent::kError, x);
      ++*work;
    }
    if (!OpMachine::IsFinal(op)) ++left;
  }
  return left;
}

bool WindowState::OpsFinal(int target, bool remote) const {
  for (std::size_t i = ops_final; i < ops.size(); ++i) {
    OriginOp& o = *ops[i];
    if ((target < 0 || o.target == target) && (!remote || o.remote.has_value()) && !OpMachine::IsFinal(o)) {
      return false;
    }
  }
  return true;
}

// ---- fence ---------------------------------------------------------------------------

absl::Status WindowState::Fence() {
  const EpochState st = EpochMachine::StateOf(*this);
  if (st == EpochState::kFailed) return *failure;
  if (st == EpochState::kFreed) return absl::FailedPreconditionError(absl::StrFormat("%s: fence: freed", Name()));
  if (st == EpochState::kPassive) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: fence: this rank holds locks (unlock them first)", Name()));
  }
  if (st == EpochState::kStarted || ExposureMachine::StateOf(*this) == ExposureState::kPosted) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: fence: %s", Name(),
        st == EpochState::kStarted ? "an access epoch is started (complete it first)"
                                   : "the window is exposed to a group (wait ends that first)"));
  }
  if (st == EpochState::kIdle) {  // the first: nothing to close
    // On a shared window it orders the program's own stores before every
    // rank's loads of the epoch it opens; on a single-copy one, before
    // every rank's copies.
    if (direct() || single_copy || one_sided) {
      MemoryBarrier();
      if (absl::Status s = Barrier(comm); !s.ok()) {
        return absl::Status(s.code(), absl::StrFormat("%s: fence opening the first epoch: %s", Name(), s.message()));
      }
    }
    (void)EpochMachine::Dispatch(*this, EpochEvent::kFence);
    int work = 0;
    for (int r = 0; r < comm.size(); ++r) StartQueued(r, &work);
    return absl::OkStatus();
  }
  (void)EpochMachine::Dispatch(*this, EpochEvent::kFence);
  absl::Status s;
  if (direct()) {
    // Every operation was done as it was issued: once every rank is here,
    // every load and store of the epoch is.
    MemoryBarrier();
    s = Barrier(comm);
  } else {
    // How many operations each rank issued to each other one in this
    // epoch; then rounds until this rank's operations are done and every
    // operation issued to it in the epoch is served.
    SendBatches();
    std::vector<uint64_t> expect(sent_to.size());
    static const Datatype kU64 = Datatype::Basic(datatype::BasicType::kUint64);
    s = Alltoall(comm, sent_to.data(), expect.data(), 1, kU64);
    const uint64_t expected = std::accumulate(expect.begin(), expect.end(), uint64_t{0});
    if (s.ok()) s = RunUntil([this, expected] { return OpsFinal(-1) && served_in_epoch >= expected; });
    // A single-copy window's puts of the next epoch land as they are
    // issued: not before every rank has served this one's accumulates. A
    // one-sided window's target learns of no write into it: every rank's
    // are placed once every rank is here.
    if (s.ok() && (single_copy || one_sided)) s = Barrier(comm);
  }
  if (s.ok()) {
    for (const std::shared_ptr<OriginOp>& o : ops) {
      if (!o->status.ok()) {
        s = o->status;
        break;
      }
    }
  }
  if (s.ok()) s = served_failure;
  if (!s.ok()) {
    RmaSignal x;
    x.error = absl::Status(s.code(), absl::StrFormat("%s: fence closing epoch %d: %s", Name(), epoch, s.message()));
    (void)EpochMachine::Dispatch(*this, EpochEvent::kError, x);
    return *failure;
  }
  (void)EpochMachine::Dispatch(*this, EpochEvent::kEnded);
  int work = 0;
  for (int r = 0; r < comm.size(); ++r) StartQueued(r, &work);
  return absl::OkStatus();
}

// ---- rma_epoch -------------------------------------------------------------------------

fsm::StateWord& EpochDef::Cell(WindowState& w) { return w.state; }
uint64_t EpochDef::IdOf(const WindowState& w) { return w.trace_id; }
void EpochDef::Subject(const WindowState& w, const RmaSignal&, fsm::TraceRecord& r) {
  r.context = w.comm.context();
  r.tag = static_cast<int32_t>(w.epoch);
  r.bytes = w.bytes;
}

void EpochActions::OpenEpoch(WindowState& w, const RmaSignal&, fsm::EventQueue<WindowState, RmaSignal>&) {
  ++w.epoch;
  w.ops.clear();
  w.ops_final = 0;
  std::fill(w.sent_to.begin(), w.sent_to.end(), 0);
  w.served_in_epoch = 0;
  w.served_failure = absl::OkStatus();
}

void EpochActions::NameFailure(WindowState& w, const RmaSignal& x, fsm::EventQueue<WindowState, RmaSignal>&) {
  w.failure = x.error;
}

}  // namespace cartage::rma
