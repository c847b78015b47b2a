// schedule_run: one run of a collective schedule, as a table. Its steps are
// CARs (car_vertex, or the car_send / car_recv of a step that runs alone,
// whose end runs the local steps fused to it); what no step's CAR carries
// is this machine's: the steps that run last (a `step` each in `last`,
// passed over once the run failed), and the sends that start last, which
// start as the rest ended well and drain (an empty message each, so their
// peers fail instead of waiting) where it failed.
// `ended` comes from the schedule's poll each time the steps it counts have
// all ended. Begin posts the receives that wait for nothing, starts the
// run, then the other steps. A step event's trace record carries the
// step's vertex in `tag`.
#ifndef CARTAGE_COLLECTIVES_RUN_FSM_H_
#define CARTAGE_COLLECTIVES_RUN_FSM_H_

#include <array>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "cartage/schedule.h"
#include "fsm/machine.h"

namespace cartage::internal {

// What a schedule_run event carries: the local step it runs.
struct RunSignal {
  VertexId step = -1;
};

using RunEvents = fsm::EventQueue<Schedule, RunSignal>;

// The guards and actions of schedule_run (schedule_engine.cc).
struct RunActions {
  static bool EndsWell(const Schedule& s, const RunSignal& x);        // nothing failed, nothing runs or starts last
  static bool Failed(const Schedule& s, const RunSignal& x);          // a step failed, or bytes fell short
  static bool FailedStartsLast(const Schedule& s, const RunSignal& x);  // and sends start last
  static bool HasRunLast(const Schedule& s, const RunSignal& x);      // steps run last
  static bool HasStartsLast(const Schedule& s, const RunSignal& x);   // sends start last
  static void BeginCall(Schedule& s, const RunSignal& x, RunEvents& events);  // the call's span (CARTAGE_TRACE)
  static void RunLastStep(Schedule& s, const RunSignal& x, RunEvents& events);  // fails the run
  static void NameFailure(Schedule& s, const RunSignal& x, RunEvents& events);
  static void NameFailureDrainLast(Schedule& s, const RunSignal& x, RunEvents& events);
  static void StartLast(Schedule& s, const RunSignal& x, RunEvents& events);
  static void DrainLast(Schedule& s, const RunSignal& x, RunEvents& events);
};

struct RunDef {
  enum class State : uint8_t { kIdle, kRunning, kLast, kStartingLast, kDrainingLast, kDone, kFailed, kCount };
  enum class Event : uint8_t { kStart, kStep, kEnded, kCount };
  using Context = Schedule;
  using Payload = RunSignal;
  static constexpr absl::string_view kName = "schedule_run";
  static constexpr absl::string_view kSummary =
      "a run of a collective schedule: its steps, then those that run last, then the sends that start last";
  static constexpr std::array<absl::string_view, 7> kStates = {
      "idle", "running", "last", "starting_last", "draining_last", "done", "failed"};
  static constexpr std::array<fsm::EventSpec, 3> kEvents = {
      {{"start", fsm::EventKind::kUser}, {"step", fsm::EventKind::kProgress}, {"ended", fsm::EventKind::kProgress}}};
  static constexpr State kInitial = State::kIdle;
  static constexpr std::array kFinal = {State::kDone, State::kFailed};
  static constexpr bool kRaisesEvents = false;  // Begin and the poll drive it
  static fsm::StateWord& Cell(Schedule& s);
  static uint64_t IdOf(const Schedule& s);
  static void Subject(const Schedule& s, const RunSignal& x, fsm::TraceRecord& r);
};

namespace run_fsm {
using D = RunDef;
using S = RunDef::State;
using E = RunDef::Event;
using A = RunActions;
inline constexpr fsm::Guard<D> kEndsWell{"EndsWell", &A::EndsWell};
inline constexpr fsm::Guard<D> kFailed{"Failed", &A::Failed};
inline constexpr fsm::Guard<D> kFailedStartsLast{"FailedStartsLast", &A::FailedStartsLast};
inline constexpr fsm::Guard<D> kHasRunLast{"HasRunLast", &A::HasRunLast};
inline constexpr fsm::Guard<D> kHasStartsLast{"HasStartsLast", &A::HasStartsLast};
inline constexpr fsm::Action<D> kBeginCall{"BeginCall", &A::BeginCall};
inline constexpr fsm::Action<D> kRunLastStep{"RunLastStep", &A::RunLastStep};
inline constexpr fsm::Action<D> kNameFailure{"NameFailure", &A::NameFailure};
inline constexpr fsm::Action<D> kNameFailureDrainLast{"NameFailureDrainLast", &A::NameFailureDrainLast};
inline constexpr fsm::Action<D> kStartLast{"StartLast", &A::StartLast};
inline constexpr fsm::Action<D> kDrainLast{"DrainLast", &A::DrainLast};

// clang-format off
inline constexpr auto kTable = fsm::MakeTable<D>({
// source             event       guard              action                 target
  {S::kIdle,          E::kStart,  {},                kBeginCall,            S::kRunning},
  {S::kRunning,       E::kEnded,  kEndsWell,         {},                    S::kDone},
  {S::kRunning,       E::kEnded,  kFailedStartsLast, kNameFailureDrainLast, S::kDrainingLast},
  {S::kRunning,       E::kEnded,  kFailed,           kNameFailure,          S::kFailed},
  {S::kRunning,       E::kEnded,  kHasRunLast,       {},                    S::kLast},
  {S::kRunning,       E::kEnded,  {},                kStartLast,            S::kStartingLast},
  {S::kLast,          E::kStep,   kFailed,           {},                    S::kLast},
  {S::kLast,          E::kStep,   {},                kRunLastStep,          S::kLast},
  {S::kLast,          E::kEnded,  kFailedStartsLast, kDrainLast,            S::kDrainingLast},
  {S::kLast,          E::kEnded,  kFailed,           kNameFailure,          S::kFailed},
  {S::kLast,          E::kEnded,  kHasStartsLast,    kStartLast,            S::kStartingLast},
  {S::kLast,          E::kEnded,  {},                {},                    S::kDone},
  {S::kStartingLast,  E::kEnded,  kFailed,           kNameFailure,          S::kFailed},
  {S::kStartingLast,  E::kEnded,  {},                {},                    S::kDone},
  {S::kDrainingLast,  E::kEnded,  {},                {},                    S::kFailed},
});
// clang-format on
}  // namespace run_fsm

// The dispatcher of schedule_run.
using RunMachine = fsm::Machine<RunDef, run_fsm::kTable>;
using RunState = RunDef::State;
using RunEvent = RunDef::Event;

}  // namespace cartage::internal

#endif  // CARTAGE_COLLECTIVES_RUN_FSM_H_
