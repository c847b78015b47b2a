// Table-driven state machines: a machine is data, all code lives on its edges.
//
// A machine is three things:
//   1. a definition struct (states, events, names, the context type the
//      actions work on, the payload events carry, where the state lives);
//   2. a constexpr table of rows (source, event, guard, action, target),
//      validated at compile time;
//   3. fsm::Machine<Def, kTable>, the one dispatcher that runs it.
//
//   struct DoorDef {
//     enum class State : uint8_t { kShut, kOpen, kGone, kCount };
//     enum class Event : uint8_t { kPush, kLeave, kCount };
//     using Context = Door;  using Payload = int;
//     static constexpr absl::string_view kName = "door";
//     static constexpr absl::string_view kSummary = "a door";
//     static constexpr std::array<absl::string_view, 3> kStates = {"shut", "open", "gone"};
//     static constexpr std::array<EventSpec, 2> kEvents = {{{"push", EventKind::kUser},
//                                                          {"leave", EventKind::kUser}}};
//     static constexpr State kInitial = State::kShut;
//     static constexpr std::array kFinal = {State::kGone};
//     static StateWord& Cell(Door& d) { return d.state; }
//     static uint64_t IdOf(const Door& d) { return d.id; }
//   };
//   inline constexpr Action<DoorDef> kSwing{"Swing", &SwingFn};
//   // clang-format off
//   inline constexpr auto kDoorTable = MakeTable<DoorDef>({
//   // source          event             guard    action    target
//     {S::kShut,        E::kPush,         {},      kSwing,   S::kOpen},
//     {S::kOpen,        E::kLeave,        {},      {},       S::kGone},
//   });
//   // clang-format on
//   static_assert(kDoorTable.validation().ok());
//   using DoorMachine = Machine<DoorDef, kDoorTable>;
//   absl::Status s = DoorMachine::Dispatch(door, DoorDef::Event::kPush);
//
// Run to completion: an action never dispatches directly; it raises events
// through its event queue, and they run, in order, once the current transition has
// finished. Events may be raised on other instances, and on other machines
// that share the context and payload types.
#ifndef CARTAGE_FSM_MACHINE_H_
#define CARTAGE_FSM_MACHINE_H_

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "fsm/event_queue.h"
#include "fsm/machine_info.h"
#include "fsm/trace.h"
#include "fsm/validate.h"

namespace cartage::fsm {

template <class Def, const auto& kTable>
class Machine;

// The byte that holds an instance's state. Anyone may read it; only the
// dispatcher writes it (docs/architecture.md, "State machines").
class StateWord {
 public:
  constexpr StateWord() = default;
  constexpr StateWord(const StateWord&) = default;  // a new instance (a container's copy) starts where it was
  StateWord& operator=(const StateWord&) = delete;  // an instance's state is set by its dispatcher alone
  constexpr uint8_t value() const { return value_; }

 private:
  template <class Def, const auto& kTable>
  friend class Machine;
  uint8_t value_ = 0;
};

// What a machine definition provides (see the example at the top).
template <class D>
concept MachineDef = requires(typename D::Context& c, const typename D::Context& cc) {
  requires std::is_enum_v<typename D::State>;
  requires std::is_enum_v<typename D::Event>;
  typename D::Payload;
  { D::kName } -> std::convertible_to<absl::string_view>;
  { D::kSummary } -> std::convertible_to<absl::string_view>;
  { D::kInitial } -> std::convertible_to<typename D::State>;
  { D::Cell(c) } -> std::same_as<StateWord&>;
  { D::IdOf(cc) } -> std::convertible_to<uint64_t>;
  requires D::kStates.size() == static_cast<std::size_t>(D::State::kCount);
  requires D::kEvents.size() == static_cast<std::size_t>(D::Event::kCount);
};

// The event queue an action of Def receives.
template <class Def>
using EventsOf = EventQueue<typename Def::Context, typename Def::Payload>;

// A named guard: the transition is taken only if it returns true. `{}` (no
// name, no function) means "no guard".
template <class Def>
struct Guard {
  absl::string_view name;
  bool (*fn)(const typename Def::Context&, const typename Def::Payload&) = nullptr;
  constexpr bool present() const { return !name.empty(); }
};

// A named action: the code on an edge. `{}` means "no action".
template <class Def>
struct Action {
  absl::string_view name;
  void (*fn)(typename Def::Context&, const typename Def::Payload&, EventsOf<Def>&) = nullptr;
  constexpr bool present() const { return !name.empty(); }
};

// One row of a table. Guard and action are held by value (one load to call
// them); whether a row is guarded is known from the name at compile time.
template <class Def>
struct Transition {
  typename Def::State source;
  typename Def::Event event;
  Guard<Def> guard;
  Action<Def> action;
  typename Def::State target;
};

// A validated, indexed table. Rows for one (state, event) keep their declared
// order: the first whose guard passes is taken, an unguarded row last.
template <class Def, std::size_t N>
class Table {
 public:
  static constexpr std::size_t kStates = static_cast<std::size_t>(Def::State::kCount);
  static constexpr std::size_t kEvents = static_cast<std::size_t>(Def::Event::kCount);

  consteval explicit Table(const Transition<Def> (&rows)[N]) {
    std::array<ShapeRow, N> shape{};
    for (std::size_t i = 0; i < N; ++i) {
      shape[i] = {Index(rows[i].source), Index(rows[i].event), Index(rows[i].target),
                  rows[i].guard.present()};
    }
    std::array<bool, kMaxStates> is_final{};
    for (auto s : Def::kFinal) is_final[Index(s)] = true;
    validation_ = ValidateShape(shape, kStates, kEvents, Index(Def::kInitial), is_final);
    if (!validation_.ok()) return;
    // Counting sort by (source, event): stable, so guard order is kept.
    std::array<uint16_t, kStates * kEvents + 1> count{};
    for (const auto& r : rows) ++count[Key(r.source, r.event) + 1];
    for (std::size_t k = 0; k < kStates * kEvents; ++k) count[k + 1] += count[k];
    first_ = count;
    for (const auto& r : rows) rows_[count[Key(r.source, r.event)]++] = r;
  }

  // The result of validating the rows at compile time.
  constexpr const Validation& validation() const { return validation_; }
  // Rows sorted by (source, event), declared order within a pair.
  constexpr const std::array<Transition<Def>, N>& rows() const { return rows_; }
  // Rows for (s, e) are rows()[first(key)] up to rows()[first(key + 1)].
  constexpr uint16_t first(std::size_t key) const { return first_[key]; }

  static constexpr uint8_t Index(typename Def::State s) { return static_cast<uint8_t>(s); }
  static constexpr uint8_t Index(typename Def::Event e) { return static_cast<uint8_t>(e); }
  static constexpr std::size_t Key(typename Def::State s, typename Def::Event e) {
    return Index(s) * kEvents + Index(e);
  }

 private:
  std::array<Transition<Def>, N> rows_{};
  std::array<uint16_t, kStates * kEvents + 1> first_{};
  Validation validation_{};
};

// Builds a Table from a braced list of rows.
template <class Def, std::size_t N>
consteval Table<Def, N> MakeTable(const Transition<Def> (&rows)[N]) {
  return Table<Def, N>(rows);
}

// Whether a dispatch may call the trace hook.
enum class TraceMode : uint8_t {
  kRuntime,      // one relaxed load; records when a sink is installed
  kCompiledOut,  // no hook at all
};

// Out-of-line error builders (cold path; kept out of line under LTO too).
namespace internal {
ABSL_ATTRIBUTE_NOINLINE ABSL_ATTRIBUTE_COLD absl::Status UnhandledEvent(const MachineNames& m, uint64_t id,
                                                                       uint8_t state, uint8_t event);
ABSL_ATTRIBUTE_NOINLINE ABSL_ATTRIBUTE_COLD absl::Status NoGuardPassed(const MachineNames& m, uint64_t id,
                                                                      uint8_t state, uint8_t event);
}  // namespace internal

// The names of Def, for traces and messages.
template <MachineDef Def>
inline constexpr MachineNames kNamesOf{Def::kName, Def::kStates, Def::kEvents};

// A Def may say what a traced transition is about:
//   static void Subject(const Context&, const Payload&, TraceRecord&);
template <class Def>
void SubjectThunk(const void* ctx, const void* payload, TraceRecord& r) {
  Def::Subject(*static_cast<const typename Def::Context*>(ctx), *static_cast<const typename Def::Payload*>(payload),
               r);
}
template <class Def>
constexpr internal::SubjectFn SubjectOf() {
  if constexpr (requires(const typename Def::Context& c, const typename Def::Payload& p, TraceRecord& r) {
                  Def::Subject(c, p, r);
                }) {
    return &SubjectThunk<Def>;
  } else {
    return nullptr;
  }
}

// The dispatcher for one machine.
template <class Def, const auto& kTable>
class Machine {
  static_assert(MachineDef<Def>);
  static_assert(kTable.validation().ok(),
                "fsm table failed validation; kTable.validation() names the problem, state, "
                "event and row");

 public:
  using State = typename Def::State;
  using Event = typename Def::Event;
  using Context = typename Def::Context;
  using Payload = typename Def::Payload;

  // Delivers `event` to `ctx` and runs every event raised meanwhile. An event
  // the current state does not handle (or whose guards all fail) leaves the
  // state unchanged and returns kFailedPrecondition naming machine, state,
  // event and instance.
  template <TraceMode kMode = TraceMode::kRuntime>
  static absl::Status Dispatch(Context& ctx, Event event) {
    return Dispatch<kMode>(ctx, event, EventsOf<Def>::NoPayload());
  }
  template <TraceMode kMode = TraceMode::kRuntime>
  static absl::Status Dispatch(Context& ctx, Event event, const Payload& payload) {
    const uint8_t e = static_cast<uint8_t>(event);
    if constexpr (!kRaises) {
      // Its actions raise nothing: no queue to build, nothing to drain.
      return StatusOf(Fire<kMode>(ctx, e, payload, no_events_), ctx, e);
    }
    EventsOf<Def> events;
    return Settle(Fire<kMode>(ctx, e, payload, events), ctx, e, events);
  }

  // The same for a caller that knows the state `ctx` is most likely in: the
  // rows of (kFrom, kEvent) are compiled in line at the call site, with no
  // indirect call, and any other state takes the dispatch above. The rows,
  // their order and the trace are the table's either way.
  template <State kFrom, Event kEvent, TraceMode kMode = TraceMode::kRuntime>
  ABSL_ATTRIBUTE_ALWAYS_INLINE static absl::Status DispatchFrom(Context& ctx,
                                                                const Payload& payload = EventsOf<Def>::NoPayload()) {
    constexpr std::size_t kKey = kTable.Key(kFrom, kEvent);
    if (ABSL_PREDICT_FALSE(Def::Cell(ctx).value() != static_cast<uint8_t>(kFrom))) {
      return Dispatch<kMode>(ctx, kEvent, payload);
    }
    constexpr uint8_t e = static_cast<uint8_t>(kEvent);
    if constexpr (!kRaises) {
      return StatusOf(FireRow<kMode, kKey, kTable.first(kKey)>(ctx, payload, no_events_), ctx, e);
    }
    EventsOf<Def> events;
    return Settle(FireRow<kMode, kKey, kTable.first(kKey)>(ctx, payload, events), ctx, e, events);
  }

  // The same, for a caller that also knows which transition most often
  // follows: where the transition taken raised exactly one event, kThenEvent
  // on `ctx` itself, and `ctx` is now in kThen, that event's rows are
  // compiled in line too, and run where the queue would have run them
  // (next, as nothing else waits). Anything else drains the queue as ever;
  // the rows, their order and the trace are the table's either way.
  template <State kFrom, Event kEvent, State kThen, Event kThenEvent, TraceMode kMode = TraceMode::kRuntime>
  ABSL_ATTRIBUTE_ALWAYS_INLINE static absl::Status DispatchFromThen(Context& ctx) {
    static_assert(kRaises, "nothing follows in a machine whose actions raise nothing");
    constexpr std::size_t kKey = kTable.Key(kFrom, kEvent);
    constexpr std::size_t kThenKey = kTable.Key(kThen, kThenEvent);
    const Payload& none = EventsOf<Def>::NoPayload();
    if (ABSL_PREDICT_FALSE(Def::Cell(ctx).value() != static_cast<uint8_t>(kFrom))) {
      return Dispatch<kMode>(ctx, kEvent, none);
    }
    EventsOf<Def> events;
    const Fired fired = FireRow<kMode, kKey, kTable.first(kKey)>(ctx, none, events);
    absl::Status s = StatusOf(fired, ctx, static_cast<uint8_t>(kEvent));
    if (!events.raised()) return s;
    if (events.template TakeOnly<Machine>(ctx, kThenEvent)) {
      constexpr uint8_t then = static_cast<uint8_t>(kThenEvent);
      const Fired next = Def::Cell(ctx).value() == static_cast<uint8_t>(kThen)
                             ? FireRow<TraceMode::kRuntime, kThenKey, kTable.first(kThenKey)>(ctx, none, events)
                             : Fire<TraceMode::kRuntime>(ctx, then, none, events);
      s.Update(StatusOf(next, ctx, then));
      if (!events.raised()) return s;
    }
    s.Update(events.Drain());
    return s;
  }

  // The current state of `ctx`.
  static State StateOf(Context& ctx) { return static_cast<State>(Def::Cell(ctx).value()); }
  // The current state's name.
  static absl::string_view StateName(Context& ctx) { return Def::kStates[Def::Cell(ctx).value()]; }
  // Puts `ctx` in the initial state (a fresh or recycled instance).
  static void Reset(Context& ctx) { Def::Cell(ctx).value_ = static_cast<uint8_t>(Def::kInitial); }
  // True once `ctx` is in a final state.
  static bool IsFinal(Context& ctx) {
    const uint8_t s = Def::Cell(ctx).value();
    for (auto f : Def::kFinal) {
      if (static_cast<uint8_t>(f) == s) return true;
    }
    return false;
  }

  // Used by EventQueue::Raise: dispatch inside a run-to-completion loop.
  static absl::Status DispatchQueued(Context& ctx, uint8_t event, const Payload& payload,
                                     EventsOf<Def>& events) {
    return StatusOf(Fire<TraceMode::kRuntime>(ctx, event, payload, events), ctx, event);
  }

  // The machine as data, for the registry and the emitters.
  static MachineInfo Describe() {
    MachineInfo info;
    info.name = Def::kName;
    info.summary = Def::kSummary;
    info.states.assign(Def::kStates.begin(), Def::kStates.end());
    info.events.assign(Def::kEvents.begin(), Def::kEvents.end());
    info.initial = static_cast<uint8_t>(Def::kInitial);
    info.is_final.assign(Def::kStates.size(), false);
    for (auto f : Def::kFinal) info.is_final[static_cast<uint8_t>(f)] = true;
    for (const auto& r : kTable.rows()) {
      info.transitions.push_back({static_cast<uint8_t>(r.source), static_cast<uint8_t>(r.event),
                                  static_cast<uint8_t>(r.target),
                                  r.guard.name, r.action.name});
    }
    return info;
  }

 private:
  static constexpr std::size_t kEvents = static_cast<std::size_t>(Event::kCount);
  // A Def whose actions never raise an event says so
  // (`static constexpr bool kRaisesEvents = false;`): its dispatch builds no queue.
  static inline EventsOf<Def> no_events_;  // what a Def that raises nothing is handed, untouched
  static constexpr bool kRaises = [] {
    if constexpr (requires { Def::kRaisesEvents; }) {
      return Def::kRaisesEvents;
    } else {
      return true;
    }
  }();

  // Compiled from the table: one function per (state, event), its rows
  // unrolled in declared order with their guards and actions called
  // directly, so the compiler can inline them. A dispatch makes one indirect
  // call (kFire, indexed by state and event), where walking the rows and
  // calling through pointers cost more (bench/fsm_bench.cc).
  // A firing returns a byte, not a status: a status is returned through
  // memory and checked again where it is destroyed, at every transition.
  enum class Fired : uint8_t { kTaken, kUnhandled, kNoGuardPassed };
  using FireFn = Fired (*)(Context&, const Payload&, EventsOf<Def>&);

  // OK where a row was taken; else the error naming machine, instance,
  // state (unchanged) and event.
  ABSL_ATTRIBUTE_ALWAYS_INLINE static absl::Status StatusOf(Fired fired, Context& ctx, uint8_t event) {
    if (ABSL_PREDICT_TRUE(fired == Fired::kTaken)) return absl::OkStatus();
    return Failure(fired, ctx, event);
  }
  // A dispatch's outcome: the firing's status, then the first error of the
  // events it raised, run in order.
  ABSL_ATTRIBUTE_ALWAYS_INLINE static absl::Status Settle(Fired fired, Context& ctx, uint8_t event,
                                                          EventsOf<Def>& events) {
    absl::Status s = StatusOf(fired, ctx, event);
    if (ABSL_PREDICT_FALSE(events.raised())) s.Update(events.Drain());
    return s;
  }
  ABSL_ATTRIBUTE_NOINLINE ABSL_ATTRIBUTE_COLD static absl::Status Failure(Fired fired, Context& ctx, uint8_t event) {
    const uint8_t state = Def::Cell(ctx).value();
    return fired == Fired::kUnhandled ? internal::UnhandledEvent(kNamesOf<Def>, Def::IdOf(ctx), state, event)
                                      : internal::NoGuardPassed(kNamesOf<Def>, Def::IdOf(ctx), state, event);
  }

  template <TraceMode kMode, std::size_t kKey, uint16_t kRow>
  ABSL_ATTRIBUTE_ALWAYS_INLINE static Fired FireRow(Context& ctx, const Payload& payload, EventsOf<Def>& events) {
    if constexpr (kRow == kTable.first(kKey + 1)) {
      return kRow == kTable.first(kKey) ? Fired::kUnhandled : Fired::kNoGuardPassed;
    } else {
      constexpr Transition<Def> kRowDef = kTable.rows()[kRow];
      // By name: a named guard or action has its function (a function
      // pointer's comparison with null is no constant expression under the
      // sanitizers).
      if constexpr (kRowDef.guard.present()) {
        if (!kRowDef.guard.fn(ctx, payload)) return FireRow<kMode, kKey, kRow + 1>(ctx, payload, events);
      }
      // Tracing on: the traced firing, out of line, so that tracing off
      // costs one load and a branch, and the row needs no frame of its own.
      if constexpr (kMode == TraceMode::kRuntime) {
        if (ABSL_PREDICT_FALSE(internal::g_trace_sink.load(std::memory_order_relaxed) != nullptr)) {
          return FireTraced<kKey, kRow>(ctx, payload, events);
        }
      }
      if constexpr (kRowDef.action.present()) kRowDef.action.fn(ctx, payload, events);
      Def::Cell(ctx).value_ = static_cast<uint8_t>(kRowDef.target);
      return Fired::kTaken;
    }
  }

  // Row kRow of (state, event) kKey, its guard passed, with a sink
  // installed: the record's time is the transition's start, before the
  // action puts anything on the wire (a peer may record the arrival before
  // this dispatch returns); the sink is asked for again after the action,
  // which may have removed it.
  template <std::size_t kKey, uint16_t kRow>
  ABSL_ATTRIBUTE_NOINLINE ABSL_ATTRIBUTE_COLD static Fired FireTraced(Context& ctx, const Payload& payload,
                                                                    EventsOf<Def>& events) {
    constexpr uint8_t kFrom = static_cast<uint8_t>(kKey / kEvents);
    constexpr uint8_t kEvent = static_cast<uint8_t>(kKey % kEvents);
    constexpr Transition<Def> kRowDef = kTable.rows()[kRow];
    constexpr uint8_t kTarget = static_cast<uint8_t>(kRowDef.target);
    const int64_t started = internal::TransitionStart();
    if constexpr (kRowDef.action.present()) kRowDef.action.fn(ctx, payload, events);
    Def::Cell(ctx).value_ = kTarget;
    if (TraceSink* sink = internal::g_trace_sink.load(std::memory_order_relaxed); sink != nullptr) {
      internal::EmitTrace(sink, started, Def::IdOf(ctx), &kNamesOf<Def>, kFrom, kEvent, kTarget, SubjectOf<Def>(),
                          &ctx, &payload);
    }
    return Fired::kTaken;
  }

  template <TraceMode kMode, std::size_t... kKeys>
  static constexpr std::array<FireFn, sizeof...(kKeys)> MakeFire(std::index_sequence<kKeys...>) {
    return {&FireRow<kMode, kKeys, kTable.first(kKeys)>...};
  }
  template <TraceMode kMode>
  static constexpr std::array<FireFn, Def::kStates.size() * kEvents> kFire =
      MakeFire<kMode>(std::make_index_sequence<Def::kStates.size() * kEvents>{});

  template <TraceMode kMode>
  static Fired Fire(Context& ctx, uint8_t event, const Payload& payload, EventsOf<Def>& events) {
    return kFire<kMode>[Def::Cell(ctx).value_ * kEvents + event](ctx, payload, events);
  }
};

}  // namespace cartage::fsm

#endif  // CARTAGE_FSM_MACHINE_H_
