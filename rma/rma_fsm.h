// The tables of one-sided communication:
//   rma_epoch  a window's epochs: opened by a fence, closed by the next one
//              once every operation to and from this rank is done; locks
//              on targets; an access epoch to a group (start, complete);
//   rma_exposure this rank's window exposed to a group of origins (post),
//              until each completed and its operations landed (wait, test);
//   rma_op     an operation at its origin: its record in the batch of
//              control messages to its target, the batch (and a put's or
//              accumulate's data) sent, a get's data received back; on
//              a shared window, the origin's own loads and stores;
//   rma_access a lock this rank takes on a target: asked for, granted,
//              flushed, released (on a shared window, a word it takes);
//   rma_lock   the lock on this rank's window that the others ask for;
//   rma_serve  an operation at its target: made by its control message,
//              queued until its epoch is open here and the operations its
//              origin issued before it have landed, then applied (data
//              carried in the control message), received straight into the
//              window (a put's data), reduced into it (an accumulate's),
//              sent back (a get's), or kept, changed and sent back (a
//              fetch's: get_accumulate, fetch_and_op, compare_and_swap); a
//              request outside the window is refused and its data drained.
// Every event a CAR of the operation's messages ends is a `sent`, `data` or
// `replied` here; the window's code dispatches them as it finds those CARs
// done (rma/origin.cc, rma/target.cc), and the actions post the next ones.
#ifndef CARTAGE_RMA_RMA_FSM_H_
#define CARTAGE_RMA_RMA_FSM_H_

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "fsm/machine.h"
#include "fsm/registry.h"

namespace cartage::rma {

class WindowState;
struct OriginOp;
struct ServedOp;
struct LockAccess;

// What an rma event carries: the error of an `error` event.
struct RmaSignal {
  absl::Status error;
};

// ---- rma_epoch ----------------------------------------------------------------

struct EpochActions {
  // No other target's lock is held, and a fence opened an epoch before
  // (whose next fence closes it: it had no operations when the lock came).
  static bool LastLockFenced(const WindowState& w, const RmaSignal& x);
  static bool LastLock(const WindowState& w, const RmaSignal& x);    // no other target's lock is held
  static bool Fenced(const WindowState& w, const RmaSignal& x);      // a fence opened an epoch before
  static void OpenEpoch(WindowState& w, const RmaSignal& x, fsm::EventQueue<WindowState, RmaSignal>& events);
  static void NameFailure(WindowState& w, const RmaSignal& x, fsm::EventQueue<WindowState, RmaSignal>& events);
};

struct EpochDef {
  enum class State : uint8_t {
    kIdle, kOpen, kFencing, kPassive, kStarting, kStarted, kCompleting, kFailed, kFreed, kCount
  };
  enum class Event : uint8_t { kFence, kEnded, kError, kLock, kUnlock, kStart, kPosted, kComplete, kFree, kCount };
  using Context = WindowState;
  using Payload = RmaSignal;
  static constexpr absl::string_view kName = "rma_epoch";
  static constexpr absl::string_view kSummary =
      "a window's epochs at this rank: a fence opens one and the next closes it once every operation to and from "
      "this rank is done; locks on targets make a passive one; start opens one to a group once each of it posted, "
      "and complete closes it";
  static constexpr std::array<absl::string_view, 9> kStates = {
      "idle", "open", "fencing", "passive", "starting", "started", "completing", "failed", "freed"};
  static constexpr std::array<fsm::EventSpec, 9> kEvents = {{{"fence", fsm::EventKind::kUser},
                                                             {"ended", fsm::EventKind::kProgress},
                                                             {"error", fsm::EventKind::kProgress},
                                                             {"lock", fsm::EventKind::kUser},
                                                             {"unlock", fsm::EventKind::kUser},
                                                             {"start", fsm::EventKind::kUser},
                                                             {"posted", fsm::EventKind::kWire},
                                                             {"complete", fsm::EventKind::kUser},
                                                             {"free", fsm::EventKind::kUser}}};
  static constexpr State kInitial = State::kIdle;
  static constexpr std::array kFinal = {State::kFreed};
  static constexpr bool kRaisesEvents = false;  // the window's calls drive it
  static fsm::StateWord& Cell(WindowState& w);
  static uint64_t IdOf(const WindowState& w);
  static void Subject(const WindowState& w, const RmaSignal& x, fsm::TraceRecord& r);
};

namespace epoch_fsm {
using D = EpochDef;
using S = EpochDef::State;
using E = EpochDef::Event;
inline constexpr fsm::Guard<D> kLastLockFenced{"LastLockFenced", &EpochActions::LastLockFenced};
inline constexpr fsm::Guard<D> kLastLock{"LastLock", &EpochActions::LastLock};
inline constexpr fsm::Guard<D> kFenced{"Fenced", &EpochActions::Fenced};
inline constexpr fsm::Action<D> kOpenEpoch{"OpenEpoch", &EpochActions::OpenEpoch};
inline constexpr fsm::Action<D> kNameFailure{"NameFailure", &EpochActions::NameFailure};
// clang-format off
inline constexpr auto kTable = fsm::MakeTable<D>({
// source        event       guard      action        target
  {S::kIdle,     E::kFence,  {},        kOpenEpoch,   S::kOpen},
  {S::kIdle,     E::kLock,   {},        {},           S::kPassive},
  {S::kIdle,     E::kStart,  {},        {},           S::kStarting},
  {S::kIdle,     E::kFree,   {},        {},           S::kFreed},
  {S::kOpen,     E::kFence,  {},        {},           S::kFencing},
  {S::kOpen,     E::kLock,   {},        {},           S::kPassive},
  {S::kOpen,     E::kStart,  {},        {},           S::kStarting},
  {S::kOpen,     E::kFree,   {},        {},           S::kFreed},
  {S::kFencing,  E::kEnded,  {},        kOpenEpoch,   S::kOpen},
  {S::kFencing,  E::kError,  {},        kNameFailure, S::kFailed},
  {S::kPassive,  E::kLock,   {},        {},           S::kPassive},
  {S::kPassive,  E::kUnlock, kLastLockFenced, {},     S::kOpen},
  {S::kPassive,  E::kUnlock, kLastLock, {},           S::kIdle},
  {S::kPassive,  E::kUnlock, {},        {},           S::kPassive},
  {S::kPassive,  E::kError,  {},        kNameFailure, S::kFailed},
  {S::kPassive,  E::kFree,   {},        {},           S::kFreed},
  {S::kStarting, E::kPosted, {},        {},           S::kStarted},
  {S::kStarting, E::kError,  {},        kNameFailure, S::kFailed},
  {S::kStarted,  E::kComplete, {},      {},           S::kCompleting},
  {S::kStarted,  E::kFree,   {},        {},           S::kFreed},
  {S::kCompleting, E::kEnded, kFenced,  {},           S::kOpen},
  {S::kCompleting, E::kEnded, {},       {},           S::kIdle},
  {S::kCompleting, E::kError, {},       kNameFailure, S::kFailed},
  {S::kFailed,   E::kFree,   {},        {},           S::kFreed},
});
// clang-format on
}  // namespace epoch_fsm

using EpochMachine = fsm::Machine<EpochDef, epoch_fsm::kTable>;
using EpochState = EpochDef::State;
using EpochEvent = EpochDef::Event;

// ---- rma_exposure ------------------------------------------------------------

using WindowEvents = fsm::EventQueue<WindowState, RmaSignal>;

struct ExposureActions {
  // Posts the receive of each origin's complete, then sends each its post
  // (raises error where one cannot be posted or sent).
  static void SendPosts(WindowState& w, const RmaSignal& x, WindowEvents& events);
  static void NameFailure(WindowState& w, const RmaSignal& x, WindowEvents& events);
};

// This rank's window exposed to a group of origins (MPI's post and wait):
// a post tells each origin it may start; each origin's complete says how
// many operations it issued here, and the exposure ends (wait, test) once
// every origin completed and that many of its operations landed.
struct ExposureDef {
  enum class State : uint8_t { kIdle, kPosted, kFailed, kClosed, kCount };
  enum class Event : uint8_t { kPost, kCompleted, kError, kFree, kCount };
  using Context = WindowState;
  using Payload = RmaSignal;
  static constexpr absl::string_view kName = "rma_exposure";
  static constexpr absl::string_view kSummary =
      "this rank's window exposed to a group of origins: posted to each, ended once each completed and its "
      "operations landed";
  static constexpr std::array<absl::string_view, 4> kStates = {"idle", "posted", "failed", "closed"};
  static constexpr std::array<fsm::EventSpec, 4> kEvents = {{{"post", fsm::EventKind::kUser},
                                                             {"completed", fsm::EventKind::kWire},
                                                             {"error", fsm::EventKind::kProgress},
                                                             {"free", fsm::EventKind::kUser}}};
  static constexpr State kInitial = State::kIdle;
  static constexpr std::array kFinal = {State::kClosed};
  static fsm::StateWord& Cell(WindowState& w);
  static uint64_t IdOf(const WindowState& w);
  static void Subject(const WindowState& w, const RmaSignal& x, fsm::TraceRecord& r);
};

namespace exposure_fsm {
using D = ExposureDef;
using S = ExposureDef::State;
using E = ExposureDef::Event;
inline constexpr fsm::Action<D> kSendPosts{"SendPosts", &ExposureActions::SendPosts};
inline constexpr fsm::Action<D> kNameFailure{"NameFailure", &ExposureActions::NameFailure};
// clang-format off
inline constexpr auto kTable = fsm::MakeTable<D>({
// source        event          guard  action        target
  {S::kIdle,     E::kPost,      {},    kSendPosts,   S::kPosted},
  {S::kIdle,     E::kFree,      {},    {},           S::kClosed},
  {S::kPosted,   E::kCompleted, {},    {},           S::kIdle},
  {S::kPosted,   E::kError,     {},    kNameFailure, S::kFailed},
  {S::kPosted,   E::kFree,      {},    {},           S::kClosed},
  {S::kFailed,   E::kFree,      {},    {},           S::kClosed},
});
// clang-format on
}  // namespace exposure_fsm

using ExposureMachine = fsm::Machine<ExposureDef, exposure_fsm::kTable>;
using ExposureState = ExposureDef::State;
using ExposureEvent = ExposureDef::Event;

// ---- rma_op -------------------------------------------------------------------

using OpEvents = fsm::EventQueue<OriginOp, RmaSignal>;

struct OpActions {
  static bool Fetches(const OriginOp& op, const RmaSignal& x);  // the target sends data back
  // The window is shared (every rank's memory mapped here): the origin
  // itself copies a put's or get's data (Copy, which cannot fail), or
  // applies an accumulate or a fetch under the target's accumulate word
  // (Store, which raises stored, or error where that word's wait failed).
  static bool DirectCopy(const OriginOp& op, const RmaSignal& x);
  static bool Direct(const OriginOp& op, const RmaSignal& x);
  static void Copy(OriginOp& op, const RmaSignal& x, OpEvents& events);
  static void Store(OriginOp& op, const RmaSignal& x, OpEvents& events);
  // A put or get on a single-copy window (every rank on one host, its
  // memory reached with process_vm_writev and readv): the origin copies it
  // itself, in one copy (CrossCopy raises stored, or error where the copy
  // failed: a target gone).
  static bool OneCopy(const OriginOp& op, const RmaSignal& x);
  static void CrossCopy(OriginOp& op, const RmaSignal& x, OpEvents& events);
  // A put or get on a one-sided window: the method moves it, as a car_rma
  // CAR the origin starts (StartRemote; stored once the CAR completed, a
  // write placed at the target, or error).
  static bool OneSided(const OriginOp& op, const RmaSignal& x);
  static void StartRemote(OriginOp& op, const RmaSignal& x, OpEvents& events);
  // A served operation's record joins its target's batch (a fetch's reply
  // receive posted first; raises error if that fails); once the batch is
  // sent (departed), its data that travels apart follows (SendData).
  static void Append(OriginOp& op, const RmaSignal& x, OpEvents& events);
  static void SendData(OriginOp& op, const RmaSignal& x, OpEvents& events);  // raises error if its send fails
  static void Fail(OriginOp& op, const RmaSignal& x, OpEvents& events);
};

struct OpDef {
  enum class State : uint8_t { kIdle, kBatched, kIssued, kAwaitingData, kDone, kFailed, kCount };
  enum class Event : uint8_t { kIssue, kDeparted, kSent, kData, kError, kStored, kCount };
  using Context = OriginOp;
  using Payload = RmaSignal;
  static constexpr absl::string_view kName = "rma_op";
  static constexpr absl::string_view kSummary =
      "an operation at its origin: its record batched with the others to its target, the batch and its data "
      "sent, what it fetches received back; on a shared window the origin's own loads and stores, on a "
      "single-copy one its own copy, on a one-sided one the method's write or read (a car_rma CAR)";
  static constexpr std::array<absl::string_view, 6> kStates = {"idle",          "batched", "issued",
                                                               "awaiting_data", "done",    "failed"};
  static constexpr std::array<fsm::EventSpec, 6> kEvents = {{{"issue", fsm::EventKind::kUser},
                                                             {"departed", fsm::EventKind::kProgress},
                                                             {"sent", fsm::EventKind::kProgress},
                                                             {"data", fsm::EventKind::kWire},
                                                             {"error", fsm::EventKind::kProgress},
                                                             {"stored", fsm::EventKind::kProgress}}};
  static constexpr State kInitial = State::kIdle;
  static constexpr std::array kFinal = {State::kDone, State::kFailed};
  static fsm::StateWord& Cell(OriginOp& op);
  static uint64_t IdOf(const OriginOp& op);
  static void Subject(const OriginOp& op, const RmaSignal& x, fsm::TraceRecord& r);
};

namespace op_fsm {
using D = OpDef;
using S = OpDef::State;
using E = OpDef::Event;
inline constexpr fsm::Guard<D> kFetches{"Fetches", &OpActions::Fetches};
inline constexpr fsm::Guard<D> kDirectCopy{"DirectCopy", &OpActions::DirectCopy};
inline constexpr fsm::Guard<D> kDirect{"Direct", &OpActions::Direct};
inline constexpr fsm::Action<D> kCopy{"Copy", &OpActions::Copy};
inline constexpr fsm::Action<D> kStore{"Store", &OpActions::Store};
inline constexpr fsm::Guard<D> kOneCopy{"OneCopy", &OpActions::OneCopy};
inline constexpr fsm::Action<D> kCrossCopy{"CrossCopy", &OpActions::CrossCopy};
inline constexpr fsm::Guard<D> kOneSided{"OneSided", &OpActions::OneSided};
inline constexpr fsm::Action<D> kStartRemote{"StartRemote", &OpActions::StartRemote};
inline constexpr fsm::Action<D> kAppend{"Append", &OpActions::Append};
inline constexpr fsm::Action<D> kSendData{"SendData", &OpActions::SendData};
inline constexpr fsm::Action<D> kFail{"Fail", &OpActions::Fail};
// clang-format off
inline constexpr auto kTable = fsm::MakeTable<D>({
// source              event       guard   action  target
  {S::kIdle,           E::kIssue,  kDirectCopy, kCopy, S::kDone},
  {S::kIdle,           E::kIssue,  kDirect, kStore, S::kIssued},
  {S::kIdle,           E::kIssue,  kOneCopy, kCrossCopy, S::kIssued},
  {S::kIdle,           E::kIssue,  kOneSided, kStartRemote, S::kIssued},
  {S::kIdle,           E::kIssue,  {},     kAppend, S::kBatched},
  {S::kBatched,        E::kDeparted, {},   kSendData, S::kIssued},
  {S::kBatched,        E::kError,  {},     kFail,  S::kFailed},
  {S::kIssued,         E::kStored, {},     {},     S::kDone},
  {S::kIssued,         E::kSent,   kFetches, {},   S::kAwaitingData},
  {S::kIssued,         E::kSent,   {},     {},     S::kDone},
  {S::kIssued,         E::kError,  {},     kFail,  S::kFailed},
  {S::kAwaitingData,   E::kData,   {},     {},     S::kDone},
  {S::kAwaitingData,   E::kError,  {},     kFail,  S::kFailed},
});
// clang-format on
}  // namespace op_fsm

using OpMachine = fsm::Machine<OpDef, op_fsm::kTable>;
using OpState = OpDef::State;
using OpEvent = OpDef::Event;

// ---- rma_access ---------------------------------------------------------------

using AccessEvents = fsm::EventQueue<LockAccess, RmaSignal>;

struct AccessActions {
  // Each posts the receive of the target's answer and sends the request.
  static void SendLock(LockAccess& a, const RmaSignal& x, AccessEvents& events);
  static void SendFlush(LockAccess& a, const RmaSignal& x, AccessEvents& events);
  static void SendUnlock(LockAccess& a, const RmaSignal& x, AccessEvents& events);
  static void Fail(LockAccess& a, const RmaSignal& x, AccessEvents& events);
  // A shared window: the target's lock is a word in the shared segment,
  // which the origin takes (raising granted once it has it), orders its
  // stores against (a flush) and drops, itself.
  static bool Direct(const LockAccess& a, const RmaSignal& x);
  static void TakeWord(LockAccess& a, const RmaSignal& x, AccessEvents& events);
  static void Sync(LockAccess& a, const RmaSignal& x, AccessEvents& events);
  static void DropWord(LockAccess& a, const RmaSignal& x, AccessEvents& events);
};

// One lock this rank takes on one target (a passive access epoch). Taken
// lazily, as MPI allows: Lock only notes it (pending), and the request goes
// with the first operation, flush or unlock, which follow it at once; the
// target serves them only once it granted the lock, so a lock, a put and
// an unlock cost one round trip. A lock nothing used is released with no
// message. The grant's answer may come while a flush or the unlock is on
// its way (granted in flushing or unlocking). On a shared window the lock
// is taken at once (the program's own loads and stores need it), from a
// word in the shared segment; requesting is then the wait for that word.
struct AccessDef {
  enum class State : uint8_t {
    kNew, kPending, kRequesting, kLocked, kFlushing, kUnlocking, kReleased, kFailed, kCount
  };
  enum class Event : uint8_t { kLock, kUse, kGranted, kFlush, kFlushed, kUnlock, kReleased, kError, kCount };
  using Context = LockAccess;
  using Payload = RmaSignal;
  static constexpr absl::string_view kName = "rma_access";
  static constexpr absl::string_view kSummary =
      "a lock this rank takes on a target's window: noted, asked for with its first use, granted, flushed, released";
  static constexpr std::array<absl::string_view, 8> kStates = {"new",       "pending",   "requesting", "locked",
                                                               "flushing",  "unlocking", "released",   "failed"};
  static constexpr std::array<fsm::EventSpec, 8> kEvents = {{{"lock", fsm::EventKind::kUser},
                                                             {"use", fsm::EventKind::kUser},
                                                             {"granted", fsm::EventKind::kWire},
                                                             {"flush", fsm::EventKind::kUser},
                                                             {"flushed", fsm::EventKind::kWire},
                                                             {"unlock", fsm::EventKind::kUser},
                                                             {"released", fsm::EventKind::kWire},
                                                             {"error", fsm::EventKind::kProgress}}};
  static constexpr State kInitial = State::kNew;
  static constexpr std::array kFinal = {State::kReleased, State::kFailed};
  static fsm::StateWord& Cell(LockAccess& a);
  static uint64_t IdOf(const LockAccess& a);
  static void Subject(const LockAccess& a, const RmaSignal& x, fsm::TraceRecord& r);
};

namespace access_fsm {
using D = AccessDef;
using S = AccessDef::State;
using E = AccessDef::Event;
using A = AccessActions;
inline constexpr fsm::Action<D> kSendLock{"SendLock", &A::SendLock};
inline constexpr fsm::Action<D> kSendFlush{"SendFlush", &A::SendFlush};
inline constexpr fsm::Action<D> kSendUnlock{"SendUnlock", &A::SendUnlock};
inline constexpr fsm::Action<D> kFail{"Fail", &A::Fail};
inline constexpr fsm::Guard<D> kDirect{"Direct", &A::Direct};
inline constexpr fsm::Action<D> kTakeWord{"TakeWord", &A::TakeWord};
inline constexpr fsm::Action<D> kSync{"Sync", &A::Sync};
inline constexpr fsm::Action<D> kDropWord{"DropWord", &A::DropWord};
// clang-format off
inline constexpr auto kTable = fsm::MakeTable<D>({
// source            event         guard  action       target
  {S::kNew,          E::kLock,     kDirect, kTakeWord, S::kRequesting},
  {S::kNew,          E::kLock,     {},    {},          S::kPending},
  {S::kPending,      E::kUse,      {},    kSendLock,   S::kRequesting},
  {S::kPending,      E::kUnlock,   {},    {},          S::kReleased},
  {S::kPending,      E::kError,    {},    kFail,       S::kFailed},
  {S::kRequesting,   E::kGranted,  {},    {},          S::kLocked},
  {S::kRequesting,   E::kFlush,    {},    kSendFlush,  S::kFlushing},
  {S::kRequesting,   E::kUnlock,   {},    kSendUnlock, S::kUnlocking},
  {S::kRequesting,   E::kError,    {},    kFail,       S::kFailed},
  {S::kLocked,       E::kFlush,    kDirect, kSync,     S::kLocked},
  {S::kLocked,       E::kFlush,    {},    kSendFlush,  S::kFlushing},
  {S::kLocked,       E::kUnlock,   kDirect, kDropWord, S::kReleased},
  {S::kLocked,       E::kUnlock,   {},    kSendUnlock, S::kUnlocking},
  {S::kLocked,       E::kError,    {},    kFail,       S::kFailed},
  {S::kFlushing,     E::kGranted,  {},    {},          S::kFlushing},
  {S::kFlushing,     E::kFlushed,  {},    {},          S::kLocked},
  {S::kFlushing,     E::kError,    {},    kFail,       S::kFailed},
  {S::kUnlocking,    E::kGranted,  {},    {},          S::kUnlocking},
  {S::kUnlocking,    E::kReleased, {},    {},          S::kReleased},
  {S::kUnlocking,    E::kError,    {},    kFail,       S::kFailed},
});
// clang-format on
}  // namespace access_fsm

using AccessMachine = fsm::Machine<AccessDef, access_fsm::kTable>;
using AccessState = AccessDef::State;
using AccessEvent = AccessDef::Event;

// ---- rma_lock -----------------------------------------------------------------

struct LockActions {
  static bool LastHolder(const WindowState& w, const RmaSignal& x);  // the releasing origin is the only holder
};

// The lock on this rank's window that other ranks' passive epochs take:
// shared by any number of origins, or exclusive to one. An `acquire_*` or
// `release` event's origin is the window's `lock_origin` while it runs.
struct LockDef {
  enum class State : uint8_t { kFree, kShared, kExclusive, kClosed, kCount };
  enum class Event : uint8_t { kAcquireShared, kAcquireExclusive, kRelease, kClose, kCount };
  using Context = WindowState;
  using Payload = RmaSignal;
  static constexpr absl::string_view kName = "rma_lock";
  static constexpr absl::string_view kSummary =
      "the lock on this rank's window: shared by any number of origins or held by one, until the window goes";
  static constexpr std::array<absl::string_view, 4> kStates = {"free", "shared", "exclusive", "closed"};
  static constexpr std::array<fsm::EventSpec, 4> kEvents = {{{"acquire_shared", fsm::EventKind::kWire},
                                                             {"acquire_exclusive", fsm::EventKind::kWire},
                                                             {"release", fsm::EventKind::kWire},
                                                             {"close", fsm::EventKind::kUser}}};
  static constexpr State kInitial = State::kFree;
  static constexpr std::array kFinal = {State::kClosed};
  static constexpr bool kRaisesEvents = false;
  static fsm::StateWord& Cell(WindowState& w);
  static uint64_t IdOf(const WindowState& w);
  static void Subject(const WindowState& w, const RmaSignal& x, fsm::TraceRecord& r);
};

namespace lock_fsm {
using D = LockDef;
using S = LockDef::State;
using E = LockDef::Event;
inline constexpr fsm::Guard<D> kLastHolder{"LastHolder", &LockActions::LastHolder};
// clang-format off
inline constexpr auto kTable = fsm::MakeTable<D>({
// source          event                 guard        action  target
  {S::kFree,       E::kAcquireShared,    {},          {},     S::kShared},
  {S::kFree,       E::kAcquireExclusive, {},          {},     S::kExclusive},
  {S::kFree,       E::kClose,            {},          {},     S::kClosed},
  {S::kShared,     E::kAcquireShared,    {},          {},     S::kShared},
  {S::kShared,     E::kRelease,          kLastHolder, {},     S::kFree},
  {S::kShared,     E::kRelease,          {},          {},     S::kShared},
  {S::kShared,     E::kClose,            {},          {},     S::kClosed},
  {S::kExclusive,  E::kRelease,          {},          {},     S::kFree},
  {S::kExclusive,  E::kClose,            {},          {},     S::kClosed},
});
// clang-format on
}  // namespace lock_fsm

using LockMachine = fsm::Machine<LockDef, lock_fsm::kTable>;
using LockState = LockDef::State;
using LockEvent = LockDef::Event;

// ---- rma_serve ----------------------------------------------------------------

using ServeEvents = fsm::EventQueue<ServedOp, RmaSignal>;

struct ServeActions {
  // Its epoch (this one or the next) is not open here, or an operation its
  // origin issued before it has not landed: checked before Refused, so a
  // refused operation's drain still takes its origin's data in order.
  static bool Waits(const ServedOp& op, const RmaSignal& x);
  static bool Refused(const ServedOp& op, const RmaSignal& x);      // malformed, or outside the window
  static bool Inline(const ServedOp& op, const RmaSignal& x);       // sends nothing back; its data (if any) came with it
  static bool ExchangesNow(const ServedOp& op, const RmaSignal& x);  // fetches; its data (if any) came with it
  static bool IsGet(const ServedOp& op, const RmaSignal& x);
  static bool Fetches(const ServedOp& op, const RmaSignal& x);      // get_accumulate, fetch_and_op, compare_and_swap
  static bool IsLock(const ServedOp& op, const RmaSignal& x);       // a lock request: it waits for the lock
  static bool Answers(const ServedOp& op, const RmaSignal& x);      // an unlock or a flush: answered in its turn
  static bool Failed(const ServedOp& op, const RmaSignal& x);       // its data's receive failed
  static void Queue(ServedOp& op, const RmaSignal& x, ServeEvents& events);
  static void Refuse(ServedOp& op, const RmaSignal& x, ServeEvents& events);  // names it; drains its data
  static void Reply(ServedOp& op, const RmaSignal& x, ServeEvents& events);   // a get's data, sent back
  static void PostData(ServedOp& op, const RmaSignal& x, ServeEvents& events);  // into the window, or a temporary
  // The data in place: copied or reduced into the window (a put's that
  // came in the control message, an accumulate's), or landed already.
  static void Land(ServedOp& op, const RmaSignal& x, ServeEvents& events);
  static void AwaitLock(ServedOp& op, const RmaSignal& x, ServeEvents& events);  // joins the lock's queue
  static void Answer(ServedOp& op, const RmaSignal& x, ServeEvents& events);  // a lock granted, a flush or unlock done
  // A fetch: the target's data kept, the operation applied, the kept data sent back.
  static void Exchange(ServedOp& op, const RmaSignal& x, ServeEvents& events);
  static void Fail(ServedOp& op, const RmaSignal& x, ServeEvents& events);
};

struct ServeDef {
  enum class State : uint8_t {
    kNew, kQueued, kLocking, kReceiving, kReplying, kDraining, kDone, kRefused, kFailed, kCount
  };
  enum class Event : uint8_t { kHeader, kTurn, kGranted, kData, kReplied, kError, kCount };
  using Context = ServedOp;
  using Payload = RmaSignal;
  static constexpr absl::string_view kName = "rma_serve";
  static constexpr absl::string_view kSummary =
      "an operation at its target: queued until its turn, then applied, received into the window, or answered";
  static constexpr std::array<absl::string_view, 9> kStates = {
      "new", "queued", "locking", "receiving", "replying", "draining", "done", "refused", "failed"};
  static constexpr std::array<fsm::EventSpec, 6> kEvents = {{{"header", fsm::EventKind::kWire},
                                                             {"turn", fsm::EventKind::kProgress},
                                                             {"granted", fsm::EventKind::kProgress},
                                                             {"data", fsm::EventKind::kWire},
                                                             {"replied", fsm::EventKind::kProgress},
                                                             {"error", fsm::EventKind::kProgress}}};
  static constexpr State kInitial = State::kNew;
  static constexpr std::array kFinal = {State::kDone, State::kRefused, State::kFailed};
  static fsm::StateWord& Cell(ServedOp& op);
  static uint64_t IdOf(const ServedOp& op);
  static void Subject(const ServedOp& op, const RmaSignal& x, fsm::TraceRecord& r);
};

namespace serve_fsm {
using D = ServeDef;
using S = ServeDef::State;
using E = ServeDef::Event;
using A = ServeActions;
inline constexpr fsm::Guard<D> kWaits{"Waits", &A::Waits};
inline constexpr fsm::Guard<D> kRefused{"Refused", &A::Refused};
inline constexpr fsm::Guard<D> kInline{"Inline", &A::Inline};
inline constexpr fsm::Guard<D> kExchangesNow{"ExchangesNow", &A::ExchangesNow};
inline constexpr fsm::Guard<D> kIsGet{"IsGet", &A::IsGet};
inline constexpr fsm::Guard<D> kFetches{"Fetches", &A::Fetches};
inline constexpr fsm::Guard<D> kFailed{"Failed", &A::Failed};
inline constexpr fsm::Guard<D> kIsLock{"IsLock", &A::IsLock};
inline constexpr fsm::Guard<D> kAnswers{"Answers", &A::Answers};
inline constexpr fsm::Action<D> kAwaitLock{"AwaitLock", &A::AwaitLock};
inline constexpr fsm::Action<D> kAnswer{"Answer", &A::Answer};
inline constexpr fsm::Action<D> kQueue{"Queue", &A::Queue};
inline constexpr fsm::Action<D> kRefuse{"Refuse", &A::Refuse};
inline constexpr fsm::Action<D> kReply{"Reply", &A::Reply};
inline constexpr fsm::Action<D> kPostData{"PostData", &A::PostData};
inline constexpr fsm::Action<D> kLand{"Land", &A::Land};
inline constexpr fsm::Action<D> kExchange{"Exchange", &A::Exchange};
inline constexpr fsm::Action<D> kFail{"Fail", &A::Fail};
// clang-format off
inline constexpr auto kTable = fsm::MakeTable<D>({
// source            event        guard     action     target
  {S::kNew,          E::kHeader,  kWaits,   kQueue,    S::kQueued},
  {S::kNew,          E::kHeader,  kRefused, kRefuse,   S::kDraining},
  {S::kNew,          E::kHeader,  kIsLock,  kAwaitLock, S::kLocking},
  {S::kNew,          E::kHeader,  kAnswers, kAnswer,   S::kReplying},
  {S::kNew,          E::kHeader,  kInline,  kLand,     S::kDone},
  {S::kNew,          E::kHeader,  kExchangesNow, kExchange, S::kReplying},
  {S::kNew,          E::kHeader,  kIsGet,   kReply,    S::kReplying},
  {S::kNew,          E::kHeader,  {},       kPostData, S::kReceiving},
  {S::kQueued,       E::kTurn,    kRefused, kRefuse,   S::kDraining},
  {S::kQueued,       E::kTurn,    kIsLock,  kAwaitLock, S::kLocking},
  {S::kQueued,       E::kTurn,    kAnswers, kAnswer,   S::kReplying},
  {S::kQueued,       E::kTurn,    kInline,  kLand,     S::kDone},
  {S::kQueued,       E::kTurn,    kExchangesNow, kExchange, S::kReplying},
  {S::kQueued,       E::kTurn,    kIsGet,   kReply,    S::kReplying},
  {S::kQueued,       E::kTurn,    {},       kPostData, S::kReceiving},
  {S::kLocking,      E::kGranted, {},       kAnswer,   S::kReplying},
  {S::kLocking,      E::kError,   {},       kFail,     S::kFailed},
  {S::kReceiving,    E::kData,    kFailed,  kFail,     S::kFailed},
  {S::kReceiving,    E::kData,    kFetches, kExchange, S::kReplying},
  {S::kReceiving,    E::kData,    {},       kLand,     S::kDone},
  {S::kReceiving,    E::kError,   {},       kFail,     S::kFailed},
  {S::kReplying,     E::kReplied, kFailed,  kFail,     S::kFailed},
  {S::kReplying,     E::kReplied, {},       {},        S::kDone},
  {S::kReplying,     E::kError,   {},       kFail,     S::kFailed},
  {S::kDraining,     E::kData,    {},       {},        S::kRefused},
  {S::kDraining,     E::kError,   {},       {},        S::kRefused},
});
// clang-format on
}  // namespace serve_fsm

using ServeMachine = fsm::Machine<ServeDef, serve_fsm::kTable>;
using ServeState = ServeDef::State;
using ServeEvent = ServeDef::Event;

// Registers rma_epoch, rma_exposure, rma_op, rma_access, rma_lock and rma_serve (diagrams,
// trace check).
absl::Status RegisterRmaMachines(fsm::Registry& registry);

}  // namespace cartage::rma

#endif  // CARTAGE_RMA_RMA_FSM_H_
