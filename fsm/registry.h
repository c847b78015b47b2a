// The registry of state machines: what `cartage diagrams` draws and
// `cartage info` lists. Registration is explicit (no static initialisers):
// each folder offers a Register...Machines(Registry&) function.
//
//   fsm::Registry reg;
//   CARTAGE_CHECK_OK(car::RegisterCarMachines(reg));
//   for (const fsm::MachineInfo& m : reg.machines()) std::cout << m.name << "\n";
#ifndef CARTAGE_FSM_REGISTRY_H_
#define CARTAGE_FSM_REGISTRY_H_

#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "fsm/machine_info.h"

namespace cartage::fsm {

// Holds validated machine descriptions, sorted by name.
class Registry {
 public:
  // Validates `info` (CheckMachine) and adds it; kAlreadyExists for a name
  // registered before, kInvalidArgument for a table that breaks a rule.
  absl::Status Register(MachineInfo info);

  // Every registered machine, sorted by name.
  const std::vector<MachineInfo>& machines() const { return machines_; }

  // The machine called `name`, or nullptr.
  const MachineInfo* Find(absl::string_view name) const;

 private:
  std::vector<MachineInfo> machines_;
};

}  // namespace cartage::fsm

#endif  // CARTAGE_FSM_REGISTRY_H_
