#include "fsm/machine_info.h"

#include <array>
#include <string>

#include "absl/strings/str_format.h"

namespace cartage::fsm {

absl::string_view EventKindName(EventKind k) {
  switch (k) {
    case EventKind::kUser: return "user";
    case EventKind::kWire: return "wire";
    case EventKind::kBuffer: return "buffer";
    case EventKind::kProgress: return "progress";
    case EventKind::kTimer: return "timer";
  }
  return "?";
}

absl::string_view ProblemName(Problem p) {
  switch (p) {
    case Problem::kNone: return "no problem";
    case Problem::kEmpty: return "no transitions";
    case Problem::kTooBig: return "too many states or events";
    case Problem::kNoFinalState: return "no final state";
    case Problem::kInitialIsFinal: return "initial state is final";
    case Problem::kBadIndex: return "state or event out of range";
    case Problem::kUnreachable: return "unreachable state";
    case Problem::kDeadEnd: return "dead end";
    case Problem::kNoPathToFinal: return "no path to a final state";
    case Problem::kAmbiguous: return "ambiguous transitions";
    case Problem::kShadowed: return "shadowed transition";
    case Problem::kFinalHasExit: return "final state has a transition";
  }
  return "?";
}

Validation Validate(const MachineInfo& info) {
  std::vector<ShapeRow> rows;
  rows.reserve(info.transitions.size());
  for (const TransitionInfo& t : info.transitions) {
    rows.push_back({t.source, t.event, t.target, !t.guard.empty()});
  }
  std::array<bool, kMaxStates> is_final{};
  for (std::size_t s = 0; s < info.is_final.size() && s < kMaxStates; ++s) {
    is_final[s] = info.is_final[s];
  }
  const std::size_t n_states = info.states.size();
  return ValidateShape(rows, n_states, info.events.size(), info.initial, is_final);
}

std::string DescribeProblem(const MachineInfo& m, const Validation& v) {
  auto state = [&](uint8_t s) -> std::string {
    return s < m.states.size() ? absl::StrFormat("'%s'", m.states[s]) : absl::StrFormat("#%d", s);
  };
  auto event = [&](uint8_t e) -> std::string {
    return e < m.events.size() ? absl::StrFormat("'%s'", m.events[e].name)
                               : absl::StrFormat("#%d", e);
  };
  const std::string head = absl::StrFormat("fsm '%s': %s: ", m.name, ProblemName(v.problem));
  switch (v.problem) {
    case Problem::kNone: return absl::StrFormat("fsm '%s': valid", m.name);
    case Problem::kEmpty: return head + "the table has no rows";
    case Problem::kTooBig:
      return head + absl::StrFormat("%d states and %d events (at most %d and %d)",
                                    m.states.size(), m.events.size(), kMaxStates, kMaxEvents);
    case Problem::kNoFinalState: return head + "no state is marked final";
    case Problem::kInitialIsFinal:
      return head + absl::StrFormat("initial state %s is final", state(v.state));
    case Problem::kBadIndex:
      return head + absl::StrFormat("row %d names a state or event that is not declared", v.row);
    case Problem::kUnreachable:
      return head + absl::StrFormat("state %s cannot be reached from initial state %s",
                                    state(v.state), state(m.initial));
    case Problem::kDeadEnd:
      return head + absl::StrFormat("state %s is not final and has no transition out",
                                    state(v.state));
    case Problem::kNoPathToFinal:
      return head + absl::StrFormat("no final state can be reached from state %s", state(v.state));
    case Problem::kAmbiguous:
      return head + absl::StrFormat("two unguarded transitions for event %s in state %s (row %d)",
                                    event(v.event), state(v.state), v.row);
    case Problem::kShadowed:
      return head + absl::StrFormat(
                        "row %d (event %s in state %s) follows an unguarded row and is never taken",
                        v.row, event(v.event), state(v.state));
    case Problem::kFinalHasExit:
      return head + absl::StrFormat("final state %s has a transition on event %s (row %d)",
                                    state(v.state), event(v.event), v.row);
  }
  return head;
}

absl::Status CheckMachine(const MachineInfo& info) {
  const Validation v = Validate(info);
  if (v.ok()) return absl::OkStatus();
  return absl::InvalidArgumentError(DescribeProblem(info, v));
}

}  // namespace cartage::fsm
