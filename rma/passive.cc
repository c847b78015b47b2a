// Passive epochs at the origin: the locks this rank takes on other ranks'
// windows (rma_access), their flushes and unlocks.
#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_format.h"
#include "rma/window_state.h"

namespace cartage::rma {

namespace {
bool AnyLockHeld(const WindowState& w) {
  for (const std::unique_ptr<LockAccess>& a : w.locks) {
    if (a != nullptr && !AccessMachine::IsFinal(*a)) return true;
  }
  return false;
}
}  // namespace

bool EpochActions::LastLockFenced(const WindowState& w, const RmaSignal& x) { return LastLock(w, x) && w.epoch > 0; }
bool EpochActions::LastLock(const WindowState& w, const RmaSignal&) { return !AnyLockHeld(w); }

// ---- passive epochs: rma_access ------------------------------------------------------------

fsm::StateWord& AccessDef::Cell(LockAccess& a) { return a.state; }
uint64_t AccessDef::IdOf(const LockAccess& a) { return a.id; }
void AccessDef::Subject(const LockAccess& a, const RmaSignal&, fsm::TraceRecord& r) {
  r.context = a.win->comm.context();
  r.peer = a.target;
  r.tag = a.type;
}

namespace {

// Asks `asked`, a request of `kind`: the receive of its one-byte answer
// posted, its record in the target's batch.
void SendRequest(LockAccess& a, OpKind kind, Asked& asked, AccessEvents& events) {
  Header h;
  h.magic = kMagic;
  h.kind = static_cast<uint8_t>(kind);
  h.op = a.type;
  h.epoch = kPassiveEpoch;
  // A lock's record goes with the operations that follow it; a flush's or
  // an unlock's leaves with those before it at once (its caller sends it).
  const absl::Status st = a.win->comm.Irecv(&asked.answer, 1, a.target, kTagReply, &asked.answer_req);
  if (st.ok()) {
    std::memcpy(a.win->AppendRecord(a.target, sizeof(h), &asked.packet), &h, sizeof(h));
    return;
  }
  RmaSignal err;
  err.error = st;
  events.Raise<AccessMachine>(a, AccessEvent::kError, err);
}

}  // namespace

void AccessActions::SendLock(LockAccess& a, const RmaSignal&, AccessEvents& events) {
  SendRequest(a, OpKind::kLock, a.lock, events);
}
void AccessActions::SendFlush(LockAccess& a, const RmaSignal&, AccessEvents& events) {
  SendRequest(a, OpKind::kFlush, a.closing, events);
}
void AccessActions::SendUnlock(LockAccess& a, const RmaSignal&, AccessEvents& events) {
  SendRequest(a, OpKind::kUnlock, a.closing, events);
}
void AccessActions::Fail(LockAccess& a, const RmaSignal& x, AccessEvents&) {
  a.status = absl::Status(x.error.code(), absl::StrFormat("%s: lock on rank %d: %s", a.win->Name(), a.target,
                                                          x.error.message()));
}

namespace {

// The answers that came, as `a`'s events, the grant first (it came first):
// `done` for the flush's or unlock's.
void TakeAnswers(LockAccess& a, AccessEvent done) {
  const auto take = [&a](Asked& asked, AccessEvent ok) {
    if (!asked.answer_req.active() || !asked.answered()) return;
    absl::Status st = asked.packet->Result();  // ended: at once
    if (st.ok()) {
      st = asked.answer_req.Wait();
    } else {  // its batch never left: no answer comes
      (void)asked.answer_req.Cancel();
      asked.answer_req.Wait().IgnoreError();
    }
    RmaSignal x;
    x.error = st;
    if (!AccessMachine::IsFinal(a)) (void)AccessMachine::Dispatch(a, st.ok() ? ok : AccessEvent::kError, x);
  };
  take(a.lock, AccessEvent::kGranted);
  take(a.closing, done);
}

}  // namespace

absl::Status WindowState::TakeFinished(int target) {
  absl::Status first;
  ops_final = 0;
  std::erase_if(ops, [&](const std::shared_ptr<OriginOp>& o) {
    if ((target >= 0 && o->target != target) || !OpMachine::IsFinal(*o)) return false;
    if (first.ok()) first = o->status;
    return true;
  });
  return first;
}

absl::Status WindowState::Lock(int target, uint8_t type) {
  const char* what = type == kLockExclusive ? "lock (exclusive)" : "lock (shared)";
  const EpochState st = EpochMachine::StateOf(*this);
  const auto fail = [&](absl::StatusCode code, const std::string& why) {
    return absl::Status(code, absl::StrFormat("%s: %s on rank %d: %s", Name(), what, target, why));
  };
  if (target < 0 || target >= comm.size()) {
    return fail(absl::StatusCode::kInvalidArgument, absl::StrFormat("no such rank in a window of %d", comm.size()));
  }
  if (st == EpochState::kFencing || st == EpochState::kFailed || st == EpochState::kFreed ||
      st == EpochState::kStarting || st == EpochState::kStarted || st == EpochState::kCompleting ||
      (st == EpochState::kOpen && !ops.empty())) {
    return fail(absl::StatusCode::kFailedPrecondition,
                st == EpochState::kOpen      ? "the fence epoch has operations (a fence completes them first)"
                : st == EpochState::kStarted ? "an access epoch is started (complete it first)"
                                             : absl::StrFormat("the window is %s", EpochDef::kStates[state.value()]));
  }
  std::unique_ptr<LockAccess>& slot = locks[static_cast<std::size_t>(target)];
  if (slot != nullptr && !AccessMachine::IsFinal(*slot)) {
    return fail(absl::StatusCode::kFailedPrecondition, "this rank holds a lock on it already");
  }
  static std::atomic<uint64_t> ids{1};
  // The last lock on this target is over: its storage takes the next (on a
  // shared window its requests were never used, and only its state and
  // status start again).
  if (slot == nullptr) {
    slot = std::make_unique<LockAccess>();
  } else if (direct()) {
    AccessMachine::Reset(*slot);
    slot->status = absl::OkStatus();
  } else {
    std::destroy_at(slot.get());
    std::construct_at(slot.get());
  }
  LockAccess& a = *slot;
  a.id = ids.fetch_add(1, std::memory_order_relaxed);
  a.win = this;
  a.target = target;
  a.type = type;
  // Noted, to be asked for with its first use; on a shared window, taken.
  if (direct()) {  // the rows new -lock-> requesting -granted-> locked, compiled in line
    (void)AccessMachine::DispatchFromThen<AccessState::kNew, AccessEvent::kLock, AccessState::kRequesting,
                                          AccessEvent::kGranted>(a);
  } else {
    (void)AccessMachine::Dispatch(a, AccessEvent::kLock);
  }
  (void)EpochMachine::Dispatch(*this, EpochEvent::kLock);
  if (AccessMachine::StateOf(a) != AccessState::kRequesting) return absl::OkStatus();
  // A shared window's word another rank holds: rounds of progress (this
  // rank may still have to serve or answer others meanwhile) until it is
  // free, or a member of the window is gone (it may hold it for ever).
  absl::Status gone;
  auto last_check = std::chrono::steady_clock::now();
  absl::Status waited = RunUntil([&] {
    if (TakeLockWord(a)) return true;
    gone = Waiting(last_check);
    return !gone.ok();
  });
  waited.Update(gone);
  RmaSignal x;
  x.error = waited;
  (void)AccessMachine::Dispatch(a, waited.ok() ? AccessEvent::kGranted : AccessEvent::kError, x);
  if (waited.ok()) return waited;
  (void)EpochMachine::Dispatch(*this, EpochEvent::kUnlock);  // this lock is no part of the epoch
  return a.status;
}

absl::Status WindowState::AwaitGrant(LockAccess& a) {
  if (AccessMachine::StateOf(a) == AccessState::kRequesting) {
    SendBatch(a.target);  // the lock's request leaves now
    CARTAGE_RETURN_IF_ERROR(RunUntil([&] { return a.lock.answered(); }));
    TakeAnswers(a, AccessEvent::kFlushed);  // only the grant was asked for
  }
  return AccessMachine::StateOf(a) == AccessState::kLocked ? absl::OkStatus() : a.status;
}

absl::StatusOr<LockAccess*> WindowState::HeldLock(int target, const char* what) {
  // A freed window's target serves nothing more (nor is its memory
  // mapped): the locks still held at the free failed with it.
  if (EpochMachine::StateOf(*this) == EpochState::kFreed) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: %s of rank %d: the window is freed", Name(), what,
                                                         target));
  }
  LockAccess* a = target >= 0 && target < comm.size() ? locks[static_cast<std::size_t>(target)].get() : nullptr;
  if (a == nullptr || AccessMachine::IsFinal(*a)) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: %s of rank %d: this rank holds no lock on it", Name(), what, target));
  }
  return a;
}

absl::Status WindowState::Flush(int target, bool local) {
  absl::StatusOr<LockAccess*> held = HeldLock(target, local ? "flush_local" : "flush");
  if (!held.ok()) return held.status();
  LockAccess* a = *held;
  // A shared window's operations were done as they were issued.
  if (local && direct()) return absl::OkStatus();
  const auto mine_final = [this, target] { return OpsFinal(target); };
  // Nothing was asked of the target yet: nothing to flush there.
  if (local || AccessMachine::StateOf(*a) == AccessState::kPending) {
    SendBatch(target);
    CARTAGE_RETURN_IF_ERROR(RunUntil(mine_final));
    return TakeFinished(target);
  }
  MakeRoom(target, sizeof(Header));
  (void)AccessMachine::Dispatch(*a, AccessEvent::kFlush);
  SendBatch(target);  // the flush goes with the operations it closes
  if (AccessMachine::StateOf(*a) == AccessState::kFlushing) {
    CARTAGE_RETURN_IF_ERROR(RunUntil([&] { return a->lock.answered() && a->closing.answered() && mine_final(); }));
    TakeAnswers(*a, AccessEvent::kFlushed);
  }
  absl::Status st = TakeFinished(target);
  if (AccessMachine::StateOf(*a) != AccessState::kLocked) st.Update(a->status);
  return st;
}

absl::Status WindowState::FlushAll(bool local) {
  absl::Status first;
  for (int r = 0; r < comm.size(); ++r) {
    LockAccess* a = locks[static_cast<std::size_t>(r)].get();
    if (a != nullptr && !AccessMachine::IsFinal(*a)) first.Update(Flush(r, local));
  }
  return first;
}

absl::Status WindowState::Unlock(int target) {
  absl::StatusOr<LockAccess*> held = HeldLock(target, "unlock");
  if (!held.ok()) return held.status();
  LockAccess* a = *held;
  if (direct()) {  // locked -unlock-> released, compiled in line: nothing was sent, nothing to wait for
    (void)AccessMachine::DispatchFrom<AccessState::kLocked, AccessEvent::kUnlock>(*a);
    (void)EpochMachine::Dispatch(*this, EpochEvent::kUnlock);
    return AccessMachine::StateOf(*a) == AccessState::kReleased ? absl::OkStatus() : a->status;
  }
  // The unlock goes after every operation to the target, which serves them
  // in order: its answer says they are all done there. A lock never used
  // asked nothing of the target, and is released with no message. The
  // method's one-sided writes are in that order only where it keeps sends
  // after writes (remote_ordered); else the unlock waits until each is
  // placed, so that no other origin's lock overtakes it.
  if (one_sided && !remote_ordered) {
    if (absl::Status placed = RunUntil([&] { return OpsFinal(target, /*remote=*/true); }); !placed.ok()) {
      RmaSignal x;
      x.error = placed;
      if (!AccessMachine::IsFinal(*a)) (void)AccessMachine::Dispatch(*a, AccessEvent::kError, x);
      (void)EpochMachine::Dispatch(*this, EpochEvent::kUnlock);
      return placed;
    }
  }
  MakeRoom(target, sizeof(Header));
  (void)AccessMachine::Dispatch(*a, AccessEvent::kUnlock);
  SendBatch(target);  // the unlock goes with the operations it closes
  absl::Status st;
  if (AccessMachine::StateOf(*a) == AccessState::kUnlocking) {
    st = RunUntil([&] {
      return a->lock.answered() && a->closing.answered() && OpsFinal(target);
    });
    if (st.ok()) TakeAnswers(*a, AccessEvent::kReleased);
  }
  if (st.ok()) st = TakeFinished(target);
  if (st.ok() && AccessMachine::StateOf(*a) != AccessState::kReleased) st = a->status;
  if (!st.ok() && !AccessMachine::IsFinal(*a)) {
    RmaSignal x;
    x.error = st;
    (void)AccessMachine::Dispatch(*a, AccessEvent::kError, x);
  }
  (void)EpochMachine::Dispatch(*this, EpochEvent::kUnlock);
  return st;
}

}  // namespace cartage::rma
