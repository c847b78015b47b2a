// car_send: the machine of a CAR that sends (CarKind::kSend).
// Eager: post -> eager_in_flight -> done (or wait_ack for a synchronous send).
// Rendezvous: post -> rts_sent -> (cts) data_in_flight -> done, or straight
// to done where the receiver read the data itself (single copy).
// A method that cannot put the message or RTS on the wire yet (a full ring
// or socket) says `queued`, and `sent` once it did: eager_queued, rts_queued.
// Buffer and progress dependencies (seed 002) hold it in wait_deps first.
#ifndef CARTAGE_CAR_SEND_FSM_H_
#define CARTAGE_CAR_SEND_FSM_H_

#include <array>
#include "absl/strings/string_view.h"

#include "car/car.h"
#include "car/car_actions.h"
#include "fsm/machine.h"

namespace cartage::car {

struct SendDef : CarMachineBase {
  enum class State : uint8_t {
    kIdle, kWaitDeps, kEagerInFlight, kEagerQueued, kAckedEarly, kWaitAck, kRtsSent, kRtsQueued, kDataInFlight,
    kDone, kFailed, kCancelled, kCount
  };
  enum class Event : uint8_t {
    kPost, kBufferSupplied, kProgress, kDepsMet, kLocalDone, kAck, kCts, kCancel, kError, kQueued, kSent, kCount
  };
  static constexpr absl::string_view kName = "car_send";
  static constexpr absl::string_view kSummary =
      "a message leaving this process: eager, rendezvous (RTS/CTS/data) or synchronous";
  static constexpr std::array<absl::string_view, 12> kStates = {
      "idle", "wait_deps", "eager_in_flight", "eager_queued", "acked_early", "wait_ack",
      "rts_sent", "rts_queued", "data_in_flight", "done", "failed", "cancelled"};
  static constexpr std::array<fsm::EventSpec, 11> kEvents = {{
      {"post", fsm::EventKind::kUser},       {"buffer_supplied", fsm::EventKind::kBuffer},
      {"progress", fsm::EventKind::kProgress}, {"deps_met", fsm::EventKind::kProgress},
      {"local_done", fsm::EventKind::kWire}, {"ack", fsm::EventKind::kWire},
      {"cts", fsm::EventKind::kWire},        {"cancel", fsm::EventKind::kUser},
      {"error", fsm::EventKind::kWire},      {"queued", fsm::EventKind::kWire},
      {"sent", fsm::EventKind::kWire}}};
  static constexpr State kInitial = State::kIdle;
  static constexpr std::array kFinal = {State::kDone, State::kFailed, State::kCancelled};
};

namespace send_fsm {
using D = SendDef;
using S = SendDef::State;
using E = SendDef::Event;
using A = CarActions;
inline constexpr fsm::Guard<D> kHasDeps{"HasDeps", &A::HasDeps};
inline constexpr fsm::Guard<D> kIsEager{"IsEager", &A::IsEager};
inline constexpr fsm::Guard<D> kIsSync{"IsSync", &A::IsSync};
inline constexpr fsm::Guard<D> kReceiverRead{"ReceiverRead", &A::ReceiverRead};
inline constexpr fsm::Action<D> kArm{"Arm", &A::Arm};
inline constexpr fsm::Action<D> kTakeBuffer{"TakeBuffer", &A::TakeBuffer};
inline constexpr fsm::Action<D> kCountDep{"CountDep", &A::CountDep};
inline constexpr fsm::Action<D> kStartEager{"StartEager", &A::StartEager};
inline constexpr fsm::Action<D> kStartRendezvous{"StartRendezvous", &A::StartRendezvous};
inline constexpr fsm::Action<D> kStartData{"StartData", &A::StartData};
inline constexpr fsm::Action<D> kComplete{"Complete", &A::CompleteCar};
inline constexpr fsm::Action<D> kFail{"Fail", &A::FailCar};
inline constexpr fsm::Action<D> kCancel{"Cancel", &A::CancelCar};

// clang-format off
inline constexpr auto kTable = fsm::MakeTable<D>({
// source             event               guard     action            target
  {S::kIdle,          E::kPost,           kHasDeps, kArm,             S::kWaitDeps},
  {S::kIdle,          E::kPost,           kIsEager, kStartEager,      S::kEagerInFlight},
  {S::kIdle,          E::kPost,           {},       kStartRendezvous, S::kRtsSent},
  {S::kIdle,          E::kCancel,         {},       kCancel,          S::kCancelled},
  {S::kWaitDeps,      E::kBufferSupplied, {},       kTakeBuffer,      S::kWaitDeps},
  {S::kWaitDeps,      E::kProgress,       {},       kCountDep,        S::kWaitDeps},
  {S::kWaitDeps,      E::kDepsMet,        kIsEager, kStartEager,      S::kEagerInFlight},
  {S::kWaitDeps,      E::kDepsMet,        {},       kStartRendezvous, S::kRtsSent},
  {S::kWaitDeps,      E::kCancel,         {},       kCancel,          S::kCancelled},
  {S::kWaitDeps,      E::kError,          {},       kFail,            S::kFailed},
  {S::kEagerInFlight, E::kLocalDone,      kIsSync,  {},               S::kWaitAck},
  {S::kEagerInFlight, E::kLocalDone,      {},       kComplete,        S::kDone},
  {S::kEagerInFlight, E::kAck,            {},       {},               S::kAckedEarly},
  {S::kEagerInFlight, E::kError,          {},       kFail,            S::kFailed},
  {S::kEagerInFlight, E::kQueued,         {},       {},               S::kEagerQueued},
  {S::kEagerQueued,   E::kSent,           {},       {},               S::kEagerInFlight},
  {S::kEagerQueued,   E::kError,          {},       kFail,            S::kFailed},
  {S::kAckedEarly,    E::kLocalDone,      {},       kComplete,        S::kDone},
  {S::kAckedEarly,    E::kError,          {},       kFail,            S::kFailed},
  {S::kWaitAck,       E::kAck,            {},       kComplete,        S::kDone},
  {S::kWaitAck,       E::kError,          {},       kFail,            S::kFailed},
  {S::kRtsSent,       E::kCts,            kReceiverRead, kComplete,   S::kDone},
  {S::kRtsSent,       E::kCts,            {},       kStartData,       S::kDataInFlight},
  {S::kRtsSent,       E::kError,          {},       kFail,            S::kFailed},
  {S::kRtsSent,       E::kQueued,         {},       {},               S::kRtsQueued},
  {S::kRtsQueued,     E::kSent,           {},       {},               S::kRtsSent},
  {S::kRtsQueued,     E::kError,          {},       kFail,            S::kFailed},
  {S::kDataInFlight,  E::kLocalDone,      {},       kComplete,        S::kDone},
  {S::kDataInFlight,  E::kError,          {},       kFail,            S::kFailed},
});
// clang-format on
}  // namespace send_fsm

// The dispatcher of car_send.
using SendMachine = fsm::Machine<SendDef, send_fsm::kTable>;
using SendState = SendDef::State;
using SendEvent = SendDef::Event;

}  // namespace cartage::car

#endif  // CARTAGE_CAR_SEND_FSM_H_
