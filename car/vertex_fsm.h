// car_vertex: one step of a collective schedule (CarKind::kVertex). It runs
// (Launch) once every predecessor completed, and its completion releases its
// successors; a failure fails every successor that has not finished. A
// successor failed that way drains first: a send or receive still settles
// its message with its peer (its VC's drain), so that the peer's
// schedule fails too instead of waiting for ever, and no message of the
// failed run is left behind to meet a later one. While it drains, its other
// predecessors' completions and failures change nothing.
#ifndef CARTAGE_CAR_VERTEX_FSM_H_
#define CARTAGE_CAR_VERTEX_FSM_H_

#include <array>
#include "absl/strings/string_view.h"

#include "car/car.h"
#include "car/car_actions.h"
#include "fsm/machine.h"

namespace cartage::car {

struct VertexDef : CarMachineBase {
  enum class State : uint8_t { kIdle, kWaiting, kRunning, kDraining, kDone, kFailed, kCancelled, kCount };
  enum class Event : uint8_t { kStart, kPredecessorDone, kComplete, kCancel, kError, kCount };
  static constexpr absl::string_view kName = "car_vertex";
  static constexpr absl::string_view kSummary =
      "a schedule step: waits for its predecessors, runs, releases its successors";
  static constexpr std::array<absl::string_view, 7> kStates = {
      "idle", "waiting", "running", "draining", "done", "failed", "cancelled"};
  static constexpr std::array<fsm::EventSpec, 5> kEvents = {{
      {"start", fsm::EventKind::kUser},   {"predecessor_done", fsm::EventKind::kProgress},
      {"complete", fsm::EventKind::kWire}, {"cancel", fsm::EventKind::kUser},
      {"error", fsm::EventKind::kWire}}};
  static constexpr State kInitial = State::kIdle;
  static constexpr std::array kFinal = {State::kDone, State::kFailed, State::kCancelled};
};

namespace vertex_fsm {
using D = VertexDef;
using S = VertexDef::State;
using E = VertexDef::Event;
using A = CarActions;
inline constexpr fsm::Guard<D> kAllPredecessorsDone{"AllPredecessorsDone", &A::AllPredecessorsDone};
inline constexpr fsm::Guard<D> kLastPredecessor{"LastPredecessor", &A::LastPredecessor};
inline constexpr fsm::Action<D> kCountDown{"CountDown", &A::CountDown};
inline constexpr fsm::Action<D> kLaunch{"Launch", &A::Launch};
inline constexpr fsm::Action<D> kRelease{"Release", &A::Release};
inline constexpr fsm::Action<D> kComplete{"Complete", &A::CompleteCar};
inline constexpr fsm::Action<D> kFail{"Fail", &A::FailCar};
inline constexpr fsm::Action<D> kCancel{"Cancel", &A::CancelCar};
inline constexpr fsm::Action<D> kDrain{"Drain", &A::DrainCar};
inline constexpr fsm::Action<D> kDrained{"Drained", &A::Drained};

// clang-format off
inline constexpr auto kTable = fsm::MakeTable<D>({
// source       event                guard                 action      target
  {S::kIdle,    E::kStart,           kAllPredecessorsDone, kLaunch,    S::kRunning},
  {S::kIdle,    E::kStart,           {},                   {},         S::kWaiting},
  {S::kIdle,    E::kPredecessorDone, {},                   kCountDown, S::kIdle},
  {S::kIdle,    E::kCancel,          {},                   kCancel,    S::kCancelled},
  {S::kIdle,    E::kError,           {},                   kDrain,     S::kDraining},
  {S::kWaiting, E::kPredecessorDone, kLastPredecessor,     kRelease,   S::kRunning},
  {S::kWaiting, E::kPredecessorDone, {},                   kCountDown, S::kWaiting},
  {S::kWaiting, E::kCancel,          {},                   kCancel,    S::kCancelled},
  {S::kWaiting, E::kError,           {},                   kDrain,     S::kDraining},
  {S::kRunning, E::kComplete,        {},                   kComplete,  S::kDone},
  {S::kRunning, E::kError,           {},                   kFail,      S::kFailed},
  {S::kDraining, E::kStart,          {},                   {},         S::kDraining},
  {S::kDraining, E::kPredecessorDone, {},                  {},         S::kDraining},
  {S::kDraining, E::kError,          {},                   {},         S::kDraining},
  {S::kDraining, E::kComplete,       {},                   kDrained,   S::kFailed},
});
// clang-format on
}  // namespace vertex_fsm

// The dispatcher of car_vertex.
using VertexMachine = fsm::Machine<VertexDef, vertex_fsm::kTable>;
using VertexState = VertexDef::State;
using VertexEvent = VertexDef::Event;

}  // namespace cartage::car

#endif  // CARTAGE_CAR_VERTEX_FSM_H_
