// The origin side of one-sided communication: an operation's checks, its
// control message, the CARs that carry it (rma_op), and the fence that
// closes an epoch.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <numeric>

#include "absl/strings/str_format.h"
#include "cartage/collectives.h"
#include "datatype/segment_walk.h"
#include "rma/window_state.h"

namespace cartage::rma {

namespace {

std::atomic<uint64_t> g_next_op{1};

// The blocks `count` elements of `type` cover, as offsets from where the
// first element starts, in the order of the packed data; adjacent ones
// merged.
std::vector<Run> LayoutOf(int64_t count, const Datatype& type) {
  std::vector<Run> runs;
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
    case OpKind::kCount: break;
  }
  return "?";
}

absl::Status WindowState::Issue(OpKind kind, void* origin, int64_t origin_count, const Datatype& origin_type,
                                int target, uint64_t disp, int64_t target_count, const Datatype& target_type,
                                const datatype::Op* op) {
  const char* what = OpKindName(kind);
  const auto fail = [&](absl::StatusCode code, const std::string& why) {
    return absl::Status(code, absl::StrFormat("%s: %s to rank %d at displacement %d: %s", Name(), what, target,
                                              disp, why));
  };
  const EpochState st = EpochMachine::StateOf(*this);
  if (st != EpochState::kOpen) {
    return fail(absl::StatusCode::kFailedPrecondition,
                st == EpochState::kIdle    ? "no epoch is open (the first Fence opens one)"
                : st == EpochState::kFreed ? "the window is freed"
                                           : "the window's last fence failed");
  }
  if (target < 0 || target >= comm.size()) {
    return fail(absl::StatusCode::kInvalidArgument, absl::StrFormat("no such rank in a window of %d", comm.size()));
  }
  if (origin_count < 0 || target_count < 0) {
    return fail(absl::StatusCode::kInvalidArgument,
                absl::StrFormat("invalid count (origin %d, target %d)", origin_count, target_count));
  }
  const int64_t data_bytes = origin_count * origin_type.size();
  if (data_bytes != target_count * target_type.size()) {
    return fail(absl::StatusCode::kInvalidArgument,
                absl::StrFormat("the origin holds %d bytes (%d of %s), the target %d (%d of %s)", data_bytes,
                                origin_count, origin_type.name(), target_count * target_type.size(), target_count,
                                target_type.name()));
  }
  if (data_bytes > 0 && origin == nullptr) return fail(absl::StatusCode::kInvalidArgument, "null origin buffer");
  datatype::BasicType basic = datatype::BasicType::kByte;
  if (kind == OpKind::kAccumulate) {
    datatype::BasicType origin_basic;
    if (op->kind() == datatype::OpKind::kUser) {
      return fail(absl::StatusCode::kInvalidArgument, "a user-defined operator cannot accumulate (predefined only)");
    }
    if (!target_type.homogeneous(&basic) || !origin_type.homogeneous(&origin_basic) || origin_basic != basic) {
      return fail(absl::StatusCode::kInvalidArgument,
                  absl::StrFormat("accumulate needs one basic type on both sides (origin %s, target %s)",
                                  origin_type.name(), target_type.name()));
    }
    if (absl::Status s = op->Check(target_type); !s.ok()) return fail(s.code(), std::string(s.message()));
  }
  // Checked here against the window every rank announced: nothing moves
  // for an access outside it (the target checks again).
  std::vector<Run> runs = LayoutOf(target_count, target_type);
  const auto t = static_cast<std::size_t>(target);
  const uint64_t unit = static_cast<uint64_t>(units[t]);
  if (unit != 0 && disp > std::numeric_limits<uint64_t>::max() / 2 / unit) {
    return fail(absl::StatusCode::kOutOfRange, "the displacement overflows");
  }
  const int64_t at = static_cast<int64_t>(disp * unit);
  for (const Run& r : runs) {
    if (at + r.offset < 0 || static_cast<uint64_t>(at + r.offset + r.length) > sizes[t]) {
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

  auto o = std::make_unique<OriginOp>();
  o->id = g_next_op.fetch_add(1, std::memory_order_relaxed);
  o->win = this;
  o->kind = kind;
  o->target = target;
  o->disp = disp;
  o->bytes = static_cast<uint64_t>(data_bytes);
  o->origin = origin;
  o->count = origin_count;
  o->type = origin_type;
  const std::size_t layout_bytes = sizeof(Header) + runs.size() * sizeof(Run);
  const bool inline_data = kind != OpKind::kGet && static_cast<std::size_t>(data_bytes) <= kInlineMax &&
                           layout_bytes + static_cast<std::size_t>(data_bytes) <= kControlMax;
  o->data_apart = kind != OpKind::kGet && !inline_data && data_bytes > 0;
  Header h;
  h.magic = kMagic;
  h.kind = static_cast<uint8_t>(kind);
  h.op = op != nullptr ? static_cast<uint8_t>(op->kind()) : 0;
  h.basic = static_cast<uint8_t>(basic);
  h.inline_data = inline_data ? 1 : 0;
  h.epoch = epoch;
  h.runs = static_cast<uint32_t>(runs.size());
  h.disp = disp;
  h.bytes = static_cast<uint64_t>(data_bytes);
  o->control.resize(layout_bytes + (inline_data ? static_cast<std::size_t>(data_bytes) : 0));
  std::memcpy(o->control.data(), &h, sizeof(h));
  if (!runs.empty()) std::memcpy(o->control.data() + sizeof(h), runs.data(), runs.size() * sizeof(Run));
  if (inline_data && data_bytes > 0) datatype::Pack(origin, origin_count, origin_type, 0, data_bytes, o->control.data() + layout_bytes);

  OriginOp& ref = *o;
  ops.push_back(std::move(o));
  (void)OpMachine::Dispatch(ref, OpEvent::kIssue);
  if (OpMachine::StateOf(ref) == OpState::kFailed && !ref.control_req.active()) {
    const absl::Status why = ref.status;
    ops.pop_back();  // its control message never left: the target counts nothing of it
    return why;
  }
  ++sent_to[t];
  ++issued;
  return ref.status;
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

bool OpActions::IsGet(const OriginOp& op, const RmaSignal&) { return op.kind == OpKind::kGet; }

void OpActions::Post(OriginOp& op, const RmaSignal&, OpEvents& events) {
  const Comm& c = op.win->comm;
  absl::Status st;
  // A get's data may come back as soon as its control message is there:
  // its receive is posted first.
  if (op.kind == OpKind::kGet) st = c.Irecv(op.origin, op.count, *op.type, op.target, kTagReply, &op.reply_req);
  if (st.ok()) st = c.Isend(op.control.data(), op.control.size(), op.target, kTagControl, &op.control_req);
  if (st.ok() && op.data_apart) st = c.Isend(op.origin, op.count, *op.type, op.target, kTagData, &op.data_req);
  if (st.ok()) return;
  RmaSignal err;
  err.error = st;
  events.Raise<OpMachine>(op, OpEvent::kError, err);
}

void OpActions::Fail(OriginOp& op, const RmaSignal& x, OpEvents&) {
  op.status = absl::Status(x.error.code(), absl::StrFormat("%s: %s of %d bytes to rank %d at displacement %d: %s",
                                                           op.win->Name(), OpKindName(op.kind), op.bytes, op.target,
                                                           op.disp, x.error.message()));
}

std::size_t WindowState::AdvanceOps(int* work) {
  std::size_t left = 0;
  for (const std::unique_ptr<OriginOp>& o : ops) {
    OriginOp& op = *o;
    if (OpMachine::StateOf(op) == OpState::kIssued && op.control_req.completed() && op.data_req.completed()) {
      absl::Status st = op.control_req.Wait();  // completed: at once
      st.Update(op.data_req.Wait());
      RmaSignal x;
      x.error = st;
      (void)OpMachine::Dispatch(op, st.ok() ? OpEvent::kSent : OpEvent::kError, x);
      ++*work;
    }
    if (OpMachine::StateOf(op) == OpState::kAwaitingData && op.reply_req.completed()) {
      const absl::Status st = op.reply_req.Wait();
      RmaSignal x;
      x.error = st;
      (void)OpMachine::Dispatch(op, st.ok() ? OpEvent::kData : OpEvent::kError, x);
      ++*work;
    }
    if (!OpMachine::IsFinal(op)) ++left;
  }
  return left;
}

// ---- fence ---------------------------------------------------------------------------

namespace {

// A fence's wait: until this rank's operations are done and every
// operation issued to it in the epoch is served.
class FenceWait : public engine::Activity {
 public:
  FenceWait(WindowState* w, uint64_t expected) : w_(w), expected_(expected) {}
  absl::Status Begin() override { return absl::OkStatus(); }
  std::optional<absl::Status> Poll(int* work) override {
    w_->Serve(work);
    if (w_->AdvanceOps(work) > 0 || w_->served_in_epoch < expected_) return std::nullopt;
    return absl::OkStatus();
  }

 private:
  WindowState* w_;
  uint64_t expected_;
};

}  // namespace

absl::Status WindowState::Fence() {
  const EpochState st = EpochMachine::StateOf(*this);
  if (st == EpochState::kFailed) return *failure;
  if (st == EpochState::kFreed) return absl::FailedPreconditionError(absl::StrFormat("%s: fence: freed", Name()));
  if (st == EpochState::kIdle) {  // the first: nothing to close
    (void)EpochMachine::Dispatch(*this, EpochEvent::kFence);
    int work = 0;
    for (int r = 0; r < comm.size(); ++r) StartQueued(r, &work);
    return absl::OkStatus();
  }
  (void)EpochMachine::Dispatch(*this, EpochEvent::kFence);
  // How many operations each rank issued to each other one in this epoch.
  std::vector<uint64_t> expect(sent_to.size());
  static const Datatype kU64 = Datatype::Basic(datatype::BasicType::kUint64);
  absl::Status s = Alltoall(comm, sent_to.data(), expect.data(), 1, kU64);
  if (s.ok()) {
    FenceWait wait(this, std::accumulate(expect.begin(), expect.end(), uint64_t{0}));
    s = engine::RunActivity(comm, wait);
  }
  if (s.ok()) {
    for (const std::unique_ptr<OriginOp>& o : ops) {
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
  std::fill(w.sent_to.begin(), w.sent_to.end(), 0);
  w.served_in_epoch = 0;
  w.served_failure = absl::OkStatus();
}

void EpochActions::NameFailure(WindowState& w, const RmaSignal& x, fsm::EventQueue<WindowState, RmaSignal>&) {
  w.failure = x.error;
}

}  // namespace cartage::rma
