#include "fsm/machine.h"

#include "absl/strings/str_format.h"

namespace cartage::fsm::internal {

namespace {
absl::string_view Name(std::span<const absl::string_view> names, uint8_t i) {
  return i < names.size() ? names[i] : absl::string_view("?");
}
absl::string_view EventName(const MachineNames& m, uint8_t e) {
  return e < m.events.size() ? m.events[e].name : absl::string_view("?");
}
}  // namespace

absl::Status UnhandledEvent(const MachineNames& m, uint64_t id, uint8_t state, uint8_t event) {
  return absl::FailedPreconditionError(
      absl::StrFormat("fsm '%s' instance %d: event '%s' is not handled in state '%s'", m.machine,
                      id, EventName(m, event), Name(m.states, state)));
}

absl::Status NoGuardPassed(const MachineNames& m, uint64_t id, uint8_t state, uint8_t event) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "fsm '%s' instance %d: event '%s' in state '%s': every guard refused the transition",
      m.machine, id, EventName(m, event), Name(m.states, state)));
}

}  // namespace cartage::fsm::internal
