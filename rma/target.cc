// The target side of one-sided communication: the service that takes each
// control message as it comes and serves its operation (rma_serve), and
// the window's lock that passive epochs take (rma_lock).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <limits>

#include "absl/strings/str_format.h"
#include "datatype/basic_type.h"
#include "rma/window_state.h"

namespace cartage::rma {

namespace {

std::atomic<uint64_t> g_next_served{1};

// Why the readable record `rec` (SplitBatch checked its header's form and
// its size; parsed here into `op`) cannot be served here: empty if it can.
std::string Check(const WindowState& w, ServedOp& op, const Record& rec) {
  op.h = rec.h;
  const Header& h = op.h;
  const std::byte* m = rec.at;
  // Whether a passive epoch's request comes from an origin that holds the
  // lock (or asks for it) is known only in its turn: ServeActions::Refused.
  const auto kind = static_cast<OpKind>(h.kind);
  const bool request = kind == OpKind::kLock || kind == OpKind::kFlush || kind == OpKind::kUnlock;
  if (h.epoch == kPassiveEpoch) {
    if (kind == OpKind::kLock && h.op != kLockShared && h.op != kLockExclusive) {
      return absl::StrFormat("a lock request of kind %d", h.op);
    }
  } else if (request) {
    return absl::StrFormat("a %s request outside a passive epoch", OpKindName(kind));
  } else if (h.epoch == kGroupEpoch) {
    // Whether its origin is one this rank exposed the window to is known
    // only in its turn: ServeActions::Refused.
  } else if (h.epoch == 0 || (h.epoch != w.epoch && h.epoch != w.epoch + 1)) {
    return absl::StrFormat("an operation of epoch %d where epoch %d is open here", h.epoch, w.epoch);
  }
  const std::size_t layout = sizeof(Header) + h.runs * sizeof(Run);
  op.runs.resize(h.runs);
  if (h.runs > 0) std::memcpy(op.runs.data(), m + sizeof(Header), h.runs * sizeof(Run));
  if (h.inline_data) op.data.assign(m + layout, m + rec.n);
  const bool combines = kind == OpKind::kAccumulate || kind == OpKind::kGetAccumulate;
  if (combines || kind == OpKind::kCompareAndSwap) {
    const auto basic = static_cast<datatype::BasicType>(h.basic);
    const auto opk = static_cast<datatype::OpKind>(h.op);
    const bool known_op = h.op == kOpReplace || h.op == kOpNoOp ||
                          (opk < datatype::OpKind::kUser && datatype::Defined(opk, basic));
    if (h.basic >= static_cast<uint8_t>(datatype::BasicType::kCount) || (combines && !known_op)) {
      return absl::StrFormat("%s with operator %d on basic type %d", OpKindName(kind), h.op, h.basic);
    }
    if (kind == OpKind::kCompareAndSwap && (h.runs != 1 || h.bytes != datatype::SizeOf(basic))) {
      return absl::StrFormat("a compare-and-swap of %d bytes in %d blocks", h.bytes, h.runs);
    }
  }
  const int64_t unit = w.disp_unit;
  if (h.disp > static_cast<uint64_t>(std::numeric_limits<int64_t>::max() / 2 / std::max<int64_t>(unit, 1))) {
    return absl::StrFormat("displacement %d overflows", h.disp);
  }
  const int64_t at = static_cast<int64_t>(h.disp) * unit;
  const int64_t elem = kind == OpKind::kPut || kind == OpKind::kGet
                           ? 1
                           : static_cast<int64_t>(datatype::SizeOf(static_cast<datatype::BasicType>(h.basic)));
  uint64_t total = 0;
  for (const Run& r : op.runs) {
    if (r.length <= 0 || r.length > (int64_t{1} << 56) || r.length % elem != 0 || r.offset < -(int64_t{1} << 56) ||
        r.offset > (int64_t{1} << 56) || at + r.offset < 0) {
      return absl::StrFormat("a block of %d bytes at %d", r.length, at + r.offset);
    }
    const auto from = static_cast<uint64_t>(at + r.offset);
    const auto length = static_cast<uint64_t>(r.length);
    if (w.dynamic) {
      if (!w.Attached(from, length)) {
        return absl::StrFormat("%d bytes at address %#x, in no region attached to this window", r.length, from);
      }
    } else if (from + length > w.bytes) {
      return absl::StrFormat("%d bytes at byte %d, outside this window of %d bytes", r.length, from, w.bytes);
    }
    total += length;
  }
  if (total != h.bytes) return absl::StrFormat("a layout of %d bytes for %d bytes of data", total, h.bytes);
  return "";
}

}  // namespace

void SplitBatch(const std::byte* m, std::size_t n, std::vector<Record>* records) {
  std::vector<Record>& out = *records;
  out.clear();
  BatchHeader b;
  if (n >= sizeof(b)) std::memcpy(&b, m, sizeof(b));
  if (n < sizeof(b) || b.magic != kBatchMagic || b.count == 0 || b.count > (n - sizeof(b)) / sizeof(Header)) {
    out.push_back({Header{}, nullptr, 0,
                   absl::StrFormat("a control message of %d bytes with a malformed batch header (magic %#x, %d "
                                   "records)",
                                   n, b.magic, b.count)});
    return;
  }
  out.reserve(b.count);
  std::size_t at = sizeof(b);
  std::string why;  // the first record that cannot be read: it and the rest are refused
  for (uint32_t i = 0; i < b.count; ++i) {
    if (why.empty()) {
      Header h;
      std::size_t len = 0;
      if (n - at < sizeof(Header)) {
        why = "its header runs past the message's end";
      } else {
        std::memcpy(&h, m + at, sizeof(h));
        if (h.magic != kMagic) {
          why = "a foreign header";
        } else if (h.kind >= static_cast<uint8_t>(OpKind::kCount) || h.runs > kMaxRuns || h.inline_data > 1 ||
                   h.bytes > (uint64_t{1} << 56)) {
          why = "a malformed header";
        } else if ((len = RecordBytes(h)) > n - at) {
          why = absl::StrFormat("%d bytes, %d past the message's end", len, len - (n - at));
        }
      }
      if (why.empty()) {
        out.push_back({h, m + at, len, ""});
        at += len;
        continue;
      }
      why = absl::StrFormat("record %d of %d in a control message of %d bytes: %s", i + 1, b.count, n, why);
    }
    out.push_back({Header{}, nullptr, 0, why});
  }
  if (why.empty() && at != n) {
    out.back() = {Header{}, nullptr, 0,
                  absl::StrFormat("a control message of %d bytes with %d bytes past its last record", n, n - at)};
  }
}

namespace {

// Where the operation's target layout starts.
std::byte* TargetOf(const ServedOp& op) {
  // (A dynamic window's base is 0: its displacements are addresses.)
  return reinterpret_cast<std::byte*>(reinterpret_cast<uintptr_t>(op.win->base) +
                                      op.h.disp * static_cast<uint64_t>(op.win->disp_unit));
}

// The target layout as one datatype over TargetOf (its blocks in order), for
// a receive or a reply; nullopt where it is one block.
absl::Status MakeLayout(ServedOp& op) {
  if (op.runs.size() <= 1) return absl::OkStatus();
  std::vector<int64_t> lengths, offsets;
  lengths.reserve(op.runs.size());
  offsets.reserve(op.runs.size());
  for (const Run& r : op.runs) {
    lengths.push_back(r.length);
    offsets.push_back(r.offset);
  }
  absl::StatusOr<Datatype> t = Datatype::Hindexed(lengths, offsets, Datatype::Basic(datatype::BasicType::kByte));
  if (!t.ok()) return t.status();
  op.layout = *std::move(t);
  return absl::OkStatus();
}

void RaiseError(ServedOp& op, const absl::Status& st, ServeEvents& events) {
  RmaSignal err;
  err.error = st;
  events.Raise<ServeMachine>(op, ServeEvent::kError, err);
}

}  // namespace

// ---- rma_serve ------------------------------------------------------------------------

fsm::StateWord& ServeDef::Cell(ServedOp& op) { return op.state; }
uint64_t ServeDef::IdOf(const ServedOp& op) { return op.id; }
void ServeDef::Subject(const ServedOp& op, const RmaSignal&, fsm::TraceRecord& r) {
  r.context = op.win->comm.context();
  r.peer = op.origin;
  r.tag = op.h.kind;
  r.bytes = op.h.bytes;
}

bool ServeActions::Waits(const ServedOp& op, const RmaSignal&) {
  const WindowState& w = *op.win;
  const auto o = static_cast<std::size_t>(op.origin);
  if (op.h.magic != kMagic || op.h.epoch == 0) return false;  // nothing of it can be trusted: refused
  const bool in_order = w.landing[o] > 0 || !w.queued[o].empty() || w.lock_pending[o] != 0;
  // A flush or unlock also waits for its origin's fetches to be sent back:
  // once it is answered, another origin may write where they read.
  const auto kind = static_cast<OpKind>(op.h.kind);
  if ((kind == OpKind::kFlush || kind == OpKind::kUnlock) && w.replying[o] > 0) return true;
  // Under a lock its epoch is the lock's; from a start's access epoch it
  // was sent once this rank had posted.
  if (!FenceEpoch(op.h.epoch)) return in_order;
  if (op.h.epoch != w.epoch && op.h.epoch != w.epoch + 1) return false;  // no epoch an origin can be in
  return op.h.epoch != w.epoch || in_order;
}
namespace {
// Why an operation of a passive or a start's epoch cannot be served in its
// turn: its origin holds no lock here (or asks for one it holds), or is
// not one this rank's window is exposed to. Empty if it can.
std::string RefusedInTurn(const ServedOp& op) {
  const bool exposed = op.win->exposed_to[static_cast<std::size_t>(op.origin)] != 0;
  if (op.h.magic == kMagic && op.h.epoch == kGroupEpoch && !exposed) {
    return absl::StrFormat("%s from an origin this window is not exposed to (post names its origins)",
                           OpKindName(static_cast<OpKind>(op.h.kind)));
  }
  if (op.h.magic != kMagic || op.h.epoch != kPassiveEpoch) return "";
  const bool held = op.win->holders[static_cast<std::size_t>(op.origin)] != 0;
  const auto kind = static_cast<OpKind>(op.h.kind);
  if (kind == OpKind::kLock) return held ? "a lock request from an origin that holds the lock" : "";
  return held ? "" : absl::StrFormat("%s from an origin that holds no lock on this window", OpKindName(kind));
}
}  // namespace

bool ServeActions::Refused(const ServedOp& op, const RmaSignal&) {
  return !op.refusal.empty() || !RefusedInTurn(op).empty();
}
namespace {
// Its data is here (it came in the control message, or it has none).
bool DataHere(const ServedOp& op) {
  return op.h.inline_data != 0 || DataBytes(static_cast<OpKind>(op.h.kind), op.h.op, op.h.bytes) == 0;
}
}  // namespace

bool ServeActions::Inline(const ServedOp& op, const RmaSignal&) {
  return !rma::Fetches(static_cast<OpKind>(op.h.kind)) && DataHere(op);
}
bool ServeActions::ExchangesNow(const ServedOp& op, const RmaSignal&) {
  const auto kind = static_cast<OpKind>(op.h.kind);
  return kind != OpKind::kGet && rma::Fetches(kind) && DataHere(op);
}
bool ServeActions::IsGet(const ServedOp& op, const RmaSignal&) {
  return static_cast<OpKind>(op.h.kind) == OpKind::kGet;
}
bool ServeActions::Fetches(const ServedOp& op, const RmaSignal&) {
  return rma::Fetches(static_cast<OpKind>(op.h.kind));
}
bool ServeActions::IsLock(const ServedOp& op, const RmaSignal&) {
  return static_cast<OpKind>(op.h.kind) == OpKind::kLock;
}
bool ServeActions::Answers(const ServedOp& op, const RmaSignal&) {
  const auto kind = static_cast<OpKind>(op.h.kind);
  return kind == OpKind::kFlush || kind == OpKind::kUnlock;
}

void ServeActions::AwaitLock(ServedOp& op, const RmaSignal&, ServeEvents&) {
  op.win->lock_waiters.push_back(&op);
  op.win->lock_pending[static_cast<std::size_t>(op.origin)] = 1;  // what its origin sent after it waits for it
}

void ServeActions::Answer(ServedOp& op, const RmaSignal&, ServeEvents& events) {
  static const std::byte kYes{1};
  const absl::Status st = op.win->comm.Isend(&kYes, 1, op.origin, kTagReply, &op.req);
  if (!st.ok()) RaiseError(op, st, events);
}

// ---- rma_lock -------------------------------------------------------------------------

fsm::StateWord& LockDef::Cell(WindowState& w) { return w.lock_state; }
uint64_t LockDef::IdOf(const WindowState& w) { return w.trace_id; }
void LockDef::Subject(const WindowState& w, const RmaSignal&, fsm::TraceRecord& r) {
  r.context = w.comm.context();
  r.peer = w.lock_origin;
  r.tag = w.shared_holders;
}
bool LockActions::LastHolder(const WindowState& w, const RmaSignal&) { return w.shared_holders == 1; }

void WindowState::GrantWaiting(int* work) {
  while (!lock_waiters.empty()) {
    ServedOp& op = *lock_waiters.front();
    const bool exclusive = op.h.op == kLockExclusive;
    const LockState now = LockMachine::StateOf(*this);
    if (now == LockState::kClosed || (exclusive ? now != LockState::kFree : now == LockState::kExclusive)) return;
    lock_waiters.pop_front();
    lock_origin = op.origin;
    holders[static_cast<std::size_t>(op.origin)] = op.h.op;
    lock_pending[static_cast<std::size_t>(op.origin)] = 0;
    if (!exclusive) ++shared_holders;
    (void)LockMachine::Dispatch(*this, exclusive ? LockEvent::kAcquireExclusive : LockEvent::kAcquireShared);
    (void)ServeMachine::Dispatch(op, ServeEvent::kGranted);
    Settled(op);
    ++*work;
    StartQueued(op.origin, work);  // what it sent after its lock request
  }
}

// After `op` left `from` for its state now: an unlock answered releases the
// lock, and a lock request queued may be granted.
void WindowState::AfterStep(ServedOp& op, ServeState from, int* work) {
  const auto kind = static_cast<OpKind>(op.h.kind);
  const ServeState now = ServeMachine::StateOf(op);
  if (kind == OpKind::kUnlock && from != now && now == ServeState::kReplying) {
    const auto o = static_cast<std::size_t>(op.origin);
    lock_origin = op.origin;
    (void)LockMachine::Dispatch(*this, LockEvent::kRelease);
    if (holders[o] == kLockShared) --shared_holders;
    holders[o] = 0;
  }
  if ((kind == OpKind::kUnlock || kind == OpKind::kLock) && from != now) GrantWaiting(work);
}
bool ServeActions::Failed(const ServedOp& op, const RmaSignal&) { return !op.status.ok(); }

void ServeActions::Queue(ServedOp& op, const RmaSignal&, ServeEvents&) {
  op.win->queued[static_cast<std::size_t>(op.origin)].push_back(&op);
}

void ServeActions::Refuse(ServedOp& op, const RmaSignal&, ServeEvents& events) {
  if (op.refusal.empty()) op.refusal = RefusedInTurn(op);
  op.status = absl::InvalidArgumentError(
      absl::StrFormat("%s: refused an operation from rank %d: %s; nothing was written", op.win->Name(), op.origin,
                      op.refusal));
  // Data that follows in a message of its own is taken and dropped, so the
  // origin's next data meets its own receive.
  const uint64_t apart = op.h.magic == kMagic && op.h.kind < static_cast<uint8_t>(OpKind::kCount) && !op.h.inline_data
                             ? DataBytes(static_cast<OpKind>(op.h.kind), op.h.op, op.h.bytes)
                             : 0;
  if (apart == 0 || apart > (uint64_t{1} << 32)) {
    events.Raise<ServeMachine>(op, ServeEvent::kData);
    return;
  }
  op.data.resize(static_cast<std::size_t>(apart));
  const absl::Status st = op.win->comm.Irecv(op.data.data(), op.data.size(), op.origin, kTagData, &op.req);
  if (!st.ok()) RaiseError(op, st, events);
}

void ServeActions::Reply(ServedOp& op, const RmaSignal&, ServeEvents& events) {
  absl::Status st = MakeLayout(op);
  if (st.ok()) {
    st = op.layout.has_value()
             ? op.win->comm.Isend(TargetOf(op), 1, *op.layout, op.origin, kTagReply, &op.req)
             : op.win->comm.Isend(TargetOf(op) + (op.runs.empty() ? 0 : op.runs[0].offset),
                                  static_cast<std::size_t>(op.h.bytes), op.origin, kTagReply, &op.req);
  }
  if (!st.ok()) return RaiseError(op, st, events);
  ++op.win->replying[static_cast<std::size_t>(op.origin)];  // its data is read until the send ends
}

void ServeActions::PostData(ServedOp& op, const RmaSignal&, ServeEvents& events) {
  WindowState& w = *op.win;
  ++w.landing[static_cast<std::size_t>(op.origin)];
  absl::Status st;
  if (static_cast<OpKind>(op.h.kind) != OpKind::kPut) {
    // Reduced into the window once all of it is here (Land, Exchange), whole.
    op.data.resize(static_cast<std::size_t>(op.h.bytes));
    st = w.comm.Irecv(op.data.data(), op.data.size(), op.origin, kTagData, &op.req);
  } else {
    // A put becomes a receive at the target: its data lands in the window.
    st = MakeLayout(op);
    if (st.ok()) {
      st = op.layout.has_value() ? w.comm.Irecv(TargetOf(op), 1, *op.layout, op.origin, kTagData, &op.req)
                                 : w.comm.Irecv(TargetOf(op) + op.runs[0].offset,
                                                static_cast<std::size_t>(op.h.bytes), op.origin, kTagData, &op.req);
    }
  }
  if (!st.ok()) RaiseError(op, st, events);
}

void ServeActions::Land(ServedOp& op, const RmaSignal&, ServeEvents&) {
  const auto kind = static_cast<OpKind>(op.h.kind);
  if (kind == OpKind::kGet) return;
  if (kind == OpKind::kPut && !op.h.inline_data) return;  // landed in place
  std::byte* target = TargetOf(op);
  const std::byte* in = op.data.data();
  if (kind == OpKind::kCompareAndSwap) {  // one element: the value, then the comparand
    const auto n = static_cast<std::size_t>(op.h.bytes);
    std::byte* at = target + op.runs[0].offset;
    if (std::memcmp(at, in + n, n) == 0) std::memcpy(at, in, n);
    return;
  }
  const auto basic = static_cast<datatype::BasicType>(op.h.basic);
  const auto size = static_cast<int64_t>(datatype::SizeOf(basic));
  for (const Run& r : op.runs) {
    if (kind == OpKind::kPut || op.h.op == kOpReplace) {
      std::memcpy(target + r.offset, in, static_cast<std::size_t>(r.length));
    } else if (op.h.op != kOpNoOp) {
      datatype::ReduceBasic(static_cast<datatype::OpKind>(op.h.op), basic, in, target + r.offset, r.length / size);
    }
    in += r.length;
  }
}

void ServeActions::Exchange(ServedOp& op, const RmaSignal& x, ServeEvents& events) {
  // What is there now goes back; then the operation changes it, whole,
  // before anything else is served.
  op.old.resize(static_cast<std::size_t>(op.h.bytes));
  std::byte* out = op.old.data();
  for (const Run& r : op.runs) {
    std::memcpy(out, TargetOf(op) + r.offset, static_cast<std::size_t>(r.length));
    out += r.length;
  }
  Land(op, x, events);
  const absl::Status st = op.win->comm.Isend(op.old.data(), op.old.size(), op.origin, kTagReply, &op.req);
  if (!st.ok()) return RaiseError(op, st, events);
  ++op.win->replying[static_cast<std::size_t>(op.origin)];
}

void ServeActions::Fail(ServedOp& op, const RmaSignal& x, ServeEvents&) {
  const absl::Status why = op.status.ok() ? x.error : op.status;
  op.status = absl::Status(why.code(), absl::StrFormat("%s: %s of %d bytes from rank %d: %s", op.win->Name(),
                                                       OpKindName(static_cast<OpKind>(op.h.kind)), op.h.bytes,
                                                       op.origin, why.message()));
}

// ---- the service ------------------------------------------------------------------------

std::optional<absl::Status> Service::Poll(int* work) {
  if (EpochMachine::StateOf(*w_) == EpochState::kFreed) return absl::OkStatus();
  w_->Serve(work);
  return std::nullopt;
}

absl::Status WindowState::PostControlReceive() {
  return comm.Irecv(control_buf.data(), control_buf.size(), kAnySource, kTagControl, &control_req);
}

void WindowState::Serve(int* work) {
  // Control messages: each makes the operation it asks for.
  while (control_req.active() && control_req.completed()) {
    const absl::Status st = control_req.Wait();  // completed: at once
    ++*work;
    if (!st.ok()) {
      if (served_failure.ok()) {
        served_failure = absl::Status(st.code(), absl::StrFormat("%s: receiving a control message: %s", Name(),
                                                                 st.message()));
      }
      if (st.code() == absl::StatusCode::kCancelled) return;
    } else {
      // A batch: its operations, in the order their origin issued them.
      const int origin = control_req.source();
      SplitBatch(control_buf.data(), static_cast<std::size_t>(control_req.bytes()), &records);
      for (const Record& r : records) {
        std::unique_ptr<ServedOp> op = NewServed();
        op->origin = origin;
        op->refusal = r.why.empty() ? Check(*this, *op, r) : r.why;
        Take(std::move(op), work);
      }
    }
    if (absl::Status posted = PostControlReceive(); !posted.ok()) {
      if (served_failure.ok()) served_failure = posted;
      return;
    }
  }
  // Data received, replies sent.
  for (std::size_t i = 0; i < serving.size(); ++i) {
    ServedOp& op = *serving[i];
    const ServeState s = ServeMachine::StateOf(op);
    if (s != ServeState::kReceiving && s != ServeState::kReplying && s != ServeState::kDraining) continue;
    if (!op.req.completed()) continue;
    const absl::Status st = op.req.Wait();
    ++*work;
    if (s == ServeState::kDraining) {
      (void)ServeMachine::Dispatch(op, ServeEvent::kData);
    } else {
      if (op.status.ok()) op.status = st;
      const auto o = static_cast<std::size_t>(op.origin);
      const bool fetch = rma::Fetches(static_cast<OpKind>(op.h.kind));  // not a lock's, flush's or unlock's answer
      if (s == ServeState::kReceiving) --landing[o];
      if (s == ServeState::kReplying && fetch) --replying[o];
      (void)ServeMachine::Dispatch(op, s == ServeState::kReceiving ? ServeEvent::kData : ServeEvent::kReplied);
    }
    Settled(op);
    if (s == ServeState::kReceiving || (s == ServeState::kReplying && replying[static_cast<std::size_t>(op.origin)] == 0)) {
      StartQueued(op.origin, work);
    }
  }
  std::size_t kept = 0;
  for (std::unique_ptr<ServedOp>& op : serving) {
    if (!ServeMachine::IsFinal(*op)) {
      serving[kept++] = std::move(op);
    } else if (spare.size() < kSpareMax && !op->req.active()) {  // (one whose request has not ended is let go)
      spare.push_back(std::move(op));
    }
  }
  serving.resize(kept);
}

std::unique_ptr<ServedOp> WindowState::NewServed() {
  std::unique_ptr<ServedOp> op;
  if (spare.empty()) {
    op = std::make_unique<ServedOp>();
    op->win = this;
  } else {
    // A final one: its requests ended, its buffers are cleared.
    op = std::move(spare.back());
    spare.pop_back();
    ServeMachine::Reset(*op);
    op->h = Header{};
    op->runs.clear();
    op->data.clear();
    op->old.clear();
    op->refusal.clear();
    op->layout.reset();
    op->status = absl::OkStatus();
  }
  op->id = g_next_served.fetch_add(1, std::memory_order_relaxed);
  return op;
}

void WindowState::Take(std::unique_ptr<ServedOp> op, int* work) {
  ServedOp& ref = *op;
  serving.push_back(std::move(op));
  (void)ServeMachine::Dispatch(ref, ServeEvent::kHeader);
  Settled(ref);
  AfterStep(ref, ServeState::kNew, work);
}

void WindowState::StartQueued(int origin, int* work) {
  const auto o = static_cast<std::size_t>(origin);
  std::deque<ServedOp*>& q = queued[o];
  while (!q.empty() && landing[o] == 0 && lock_pending[o] == 0 &&
         (q.front()->h.epoch == epoch || !FenceEpoch(q.front()->h.epoch))) {
    ServedOp& op = *q.front();
    const auto kind = static_cast<OpKind>(op.h.kind);
    if ((kind == OpKind::kFlush || kind == OpKind::kUnlock) && replying[o] > 0) return;
    q.pop_front();
    (void)ServeMachine::Dispatch(op, ServeEvent::kTurn);
    Settled(op);
    AfterStep(op, ServeState::kQueued, work);
    ++*work;
  }
}

void WindowState::Settled(ServedOp& op) {
  if (!ServeMachine::IsFinal(op)) return;
  ++served;
  if (op.h.magic == kMagic && op.h.epoch == kGroupEpoch) {  // a wait counts its origins'
    ++group_served[static_cast<std::size_t>(op.origin)];
    if (!op.status.ok() && exposure_served_failure.ok()) exposure_served_failure = op.status;
    return;
  }
  if (FenceEpoch(op.h.epoch)) ++served_in_epoch;  // a fence counts its epoch's
  if (!op.status.ok() && served_failure.ok()) served_failure = op.status;
}

}  // namespace cartage::rma
