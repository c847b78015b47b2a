// MachineInfo: a state machine described as plain data, whatever its C++
// types. The registry, the validators' messages and the DOT/Mermaid emitters
// all work on it, so a diagram is drawn from exactly the rows that dispatch.
//
//   fsm::MachineInfo info = car::SendMachine::Describe();
//   std::cout << fsm::ToDot(info);
#ifndef CARTAGE_FSM_MACHINE_INFO_H_
#define CARTAGE_FSM_MACHINE_INFO_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "fsm/validate.h"

namespace cartage::fsm {

// Where an event comes from (docs/architecture.md, "State machines").
enum class EventKind : uint8_t { kUser, kWire, kBuffer, kProgress, kTimer };

// "user", "wire", "buffer", "progress", "timer".
absl::string_view EventKindName(EventKind k);

// An event's name and kind, as a machine declares it.
struct EventSpec {
  absl::string_view name;
  EventKind kind = EventKind::kUser;
};

// One transition of a described machine; guard/action are empty when absent.
struct TransitionInfo {
  uint8_t source = 0;
  uint8_t event = 0;
  uint8_t target = 0;
  absl::string_view guard;
  absl::string_view action;
};

// A whole machine as data.
struct MachineInfo {
  absl::string_view name;
  absl::string_view summary;  // one line: what the machine is for
  std::vector<absl::string_view> states;
  std::vector<EventSpec> events;
  uint8_t initial = 0;
  std::vector<bool> is_final;  // indexed by state
  std::vector<TransitionInfo> transitions;
};

// Runs ValidateShape on `info`.
Validation Validate(const MachineInfo& info);

// Words for a failed validation: "fsm 'm': state 'x' is unreachable from initial state 'a'".
std::string DescribeProblem(const MachineInfo& info, const Validation& v);

// OK, or kInvalidArgument with DescribeProblem's words.
absl::Status CheckMachine(const MachineInfo& info);

}  // namespace cartage::fsm

#endif  // CARTAGE_FSM_MACHINE_INFO_H_
