// car_recv: the machine of a posted receive (CarKind::kRecv).
// post -> posted (in the matcher's queues) -> envelope (matched) -> receiving
// -> data... -> done. A rendezvous match sends CTS first; a message larger
// than the buffer is drained into truncating and fails with kOutOfRange. A
// method that delivers an eager message whole raises one `eager` event
// carrying envelope and bytes together. A synchronous eager message is
// acknowledged on its own rows (SyncEager...), whatever the receive comes to.
#ifndef CARTAGE_CAR_RECV_FSM_H_
#define CARTAGE_CAR_RECV_FSM_H_

#include <array>
#include "absl/strings/string_view.h"

#include "car/car.h"
#include "car/car_actions.h"
#include "fsm/machine.h"

namespace cartage::car {

struct RecvDef : CarMachineBase {
  enum class State : uint8_t {
    kIdle, kWaitDeps, kPosted, kCtsSent, kReceiving, kTruncating,
    kDone, kFailed, kCancelled, kCount
  };
  enum class Event : uint8_t {
    kPost, kBufferSupplied, kProgress, kDepsMet, kEnvelope, kData, kEager, kCancel, kError, kCount
  };
  static constexpr absl::string_view kName = "car_recv";
  static constexpr absl::string_view kSummary =
      "a posted receive: matched by an envelope, filled by data, truncation drained";
  static constexpr std::array<absl::string_view, 9> kStates = {
      "idle", "wait_deps", "posted", "cts_sent", "receiving", "truncating",
      "done", "failed", "cancelled"};
  static constexpr std::array<fsm::EventSpec, 9> kEvents = {{
      {"post", fsm::EventKind::kUser},         {"buffer_supplied", fsm::EventKind::kBuffer},
      {"progress", fsm::EventKind::kProgress}, {"deps_met", fsm::EventKind::kProgress},
      {"envelope", fsm::EventKind::kWire},     {"data", fsm::EventKind::kWire},
      {"eager", fsm::EventKind::kWire},        {"cancel", fsm::EventKind::kUser},
      {"error", fsm::EventKind::kWire}}};
  static constexpr State kInitial = State::kIdle;
  static constexpr std::array kFinal = {State::kDone, State::kFailed, State::kCancelled};
};

namespace recv_fsm {
using D = RecvDef;
using S = RecvDef::State;
using E = RecvDef::Event;
using A = CarActions;
inline constexpr fsm::Guard<D> kHasDeps{"HasDeps", &A::HasDeps};
inline constexpr fsm::Guard<D> kTruncates{"Truncates", &A::Truncates};
inline constexpr fsm::Guard<D> kIsRendezvous{"IsRendezvous", &A::IsRendezvous};
inline constexpr fsm::Guard<D> kIsEmpty{"IsEmpty", &A::IsEmpty};
inline constexpr fsm::Guard<D> kMoreToCome{"MoreToCome", &A::MoreToCome};
inline constexpr fsm::Guard<D> kUnpackFails{"UnpackFails", &A::UnpackFails};
inline constexpr fsm::Guard<D> kSyncTruncates{"SyncEagerTruncates", &A::SyncAnd<&A::Truncates>};
inline constexpr fsm::Guard<D> kSyncEmpty{"SyncEagerEmpty", &A::SyncAnd<&A::IsEmpty>};
inline constexpr fsm::Guard<D> kSyncUnpackFails{"SyncEagerUnpackFails", &A::SyncAnd<&A::UnpackFails>};
inline constexpr fsm::Guard<D> kSyncEager{"IsSyncEager", &A::IsSyncEager};
inline constexpr fsm::Action<D> kArm{"Arm", &A::Arm};
inline constexpr fsm::Action<D> kTakeBuffer{"TakeBuffer", &A::TakeBuffer};
inline constexpr fsm::Action<D> kCountDep{"CountDep", &A::CountDep};
inline constexpr fsm::Action<D> kPostToMatcher{"PostToMatcher", &A::PostToMatcher};
inline constexpr fsm::Action<D> kUnpostAndCancel{"UnpostAndCancel", &A::UnpostAndCancel};
inline constexpr fsm::Action<D> kBeginReceive{"BeginReceive", &A::BeginReceive};
inline constexpr fsm::Action<D> kBeginTruncated{"BeginTruncated", &A::BeginTruncated};
inline constexpr fsm::Action<D> kSendCts{"SendCts", &A::SendCts};
inline constexpr fsm::Action<D> kReceiveEmpty{"ReceiveEmpty", &A::ReceiveEmpty};
inline constexpr fsm::Action<D> kAccount{"Account", &A::Account};
inline constexpr fsm::Action<D> kFinishReceive{"FinishReceive", &A::FinishReceive};
inline constexpr fsm::Action<D> kFailTruncated{"FailTruncated", &A::FailTruncated};
inline constexpr fsm::Action<D> kReceiveEager{"ReceiveEager", &A::ReceiveEager};
inline constexpr fsm::Action<D> kReceiveEagerTruncated{"ReceiveEagerTruncated", &A::ReceiveEagerTruncated};
inline constexpr fsm::Action<D> kFailUnpack{"FailUnpack", &A::FailUnpack};
inline constexpr fsm::Action<D> kReceiveEagerUnpackFails{"ReceiveEagerUnpackFails", &A::ReceiveEagerUnpackFails};
inline constexpr fsm::Action<D> kAckBeginTruncated{"AckThenBeginTruncated", &A::AckThen<&A::BeginTruncated>};
inline constexpr fsm::Action<D> kAckReceiveEmpty{"AckThenReceiveEmpty", &A::AckThen<&A::ReceiveEmpty>};
inline constexpr fsm::Action<D> kAckBeginReceive{"AckThenBeginReceive", &A::AckThen<&A::BeginReceive>};
inline constexpr fsm::Action<D> kAckReceiveEagerTruncated{"AckThenReceiveEagerTruncated",
                                                          &A::AckThen<&A::ReceiveEagerTruncated>};
inline constexpr fsm::Action<D> kAckReceiveEagerUnpackFails{"AckThenReceiveEagerUnpackFails",
                                                            &A::AckThen<&A::ReceiveEagerUnpackFails>};
inline constexpr fsm::Action<D> kAckReceiveEager{"AckThenReceiveEager", &A::AckThen<&A::ReceiveEager>};
inline constexpr fsm::Action<D> kFail{"Fail", &A::FailCar};
inline constexpr fsm::Action<D> kCancel{"Cancel", &A::CancelCar};

// clang-format off
inline constexpr auto kTable = fsm::MakeTable<D>({
// source          event               guard          action                  target
  {S::kIdle,       E::kPost,           kHasDeps,      kArm,                   S::kWaitDeps},
  {S::kIdle,       E::kPost,           {},            kPostToMatcher,         S::kPosted},
  {S::kIdle,       E::kCancel,         {},            kCancel,                S::kCancelled},
  {S::kWaitDeps,   E::kBufferSupplied, {},            kTakeBuffer,            S::kWaitDeps},
  {S::kWaitDeps,   E::kProgress,       {},            kCountDep,              S::kWaitDeps},
  {S::kWaitDeps,   E::kDepsMet,        {},            kPostToMatcher,         S::kPosted},
  {S::kWaitDeps,   E::kCancel,         {},            kCancel,                S::kCancelled},
  {S::kWaitDeps,   E::kError,          {},            kFail,                  S::kFailed},
  {S::kPosted,     E::kEnvelope,       kSyncTruncates, kAckBeginTruncated,    S::kTruncating},
  {S::kPosted,     E::kEnvelope,       kTruncates,    kBeginTruncated,        S::kTruncating},
  {S::kPosted,     E::kEnvelope,       kIsRendezvous, kSendCts,               S::kCtsSent},
  {S::kPosted,     E::kEnvelope,       kSyncEmpty,    kAckReceiveEmpty,       S::kDone},
  {S::kPosted,     E::kEnvelope,       kIsEmpty,      kReceiveEmpty,          S::kDone},
  {S::kPosted,     E::kEnvelope,       kSyncEager,    kAckBeginReceive,       S::kReceiving},
  {S::kPosted,     E::kEnvelope,       {},            kBeginReceive,          S::kReceiving},
  {S::kPosted,     E::kEager,          kSyncTruncates, kAckReceiveEagerTruncated, S::kFailed},
  {S::kPosted,     E::kEager,          kTruncates,    kReceiveEagerTruncated, S::kFailed},
  {S::kPosted,     E::kEager,          kSyncUnpackFails, kAckReceiveEagerUnpackFails, S::kFailed},
  {S::kPosted,     E::kEager,          kUnpackFails,  kReceiveEagerUnpackFails, S::kFailed},
  {S::kPosted,     E::kEager,          kSyncEager,    kAckReceiveEager,       S::kDone},
  {S::kPosted,     E::kEager,          {},            kReceiveEager,          S::kDone},
  {S::kPosted,     E::kCancel,         {},            kUnpostAndCancel,       S::kCancelled},
  {S::kPosted,     E::kError,          {},            kFail,                  S::kFailed},
  {S::kCtsSent,    E::kData,           kMoreToCome,   kAccount,               S::kReceiving},
  {S::kCtsSent,    E::kData,           kUnpackFails,  kFailUnpack,            S::kFailed},
  {S::kCtsSent,    E::kData,           {},            kFinishReceive,         S::kDone},
  {S::kCtsSent,    E::kError,          {},            kFail,                  S::kFailed},
  {S::kReceiving,  E::kData,           kMoreToCome,   kAccount,               S::kReceiving},
  {S::kReceiving,  E::kData,           kUnpackFails,  kFailUnpack,            S::kFailed},
  {S::kReceiving,  E::kData,           {},            kFinishReceive,         S::kDone},
  {S::kReceiving,  E::kError,          {},            kFail,                  S::kFailed},
  {S::kTruncating, E::kData,           kMoreToCome,   kAccount,               S::kTruncating},
  {S::kTruncating, E::kData,           {},            kFailTruncated,         S::kFailed},
  {S::kTruncating, E::kError,          {},            kFail,                  S::kFailed},
});
// clang-format on
}  // namespace recv_fsm

// The dispatcher of car_recv.
using RecvMachine = fsm::Machine<RecvDef, recv_fsm::kTable>;
using RecvState = RecvDef::State;
using RecvEvent = RecvDef::Event;

}  // namespace cartage::car

#endif  // CARTAGE_CAR_RECV_FSM_H_
