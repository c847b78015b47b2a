#include "fsm/registry.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace cartage::fsm {

absl::Status Registry::Register(MachineInfo info) {
  if (Find(info.name) != nullptr) {
    return absl::AlreadyExistsError(
        absl::StrFormat("fsm registry: a machine named '%s' is already registered", info.name));
  }
  if (absl::Status s = CheckMachine(info); !s.ok()) return s;
  auto at = std::lower_bound(machines_.begin(), machines_.end(), info.name,
                             [](const MachineInfo& m, absl::string_view n) { return m.name < n; });
  machines_.insert(at, std::move(info));
  return absl::OkStatus();
}

const MachineInfo* Registry::Find(absl::string_view name) const {
  for (const MachineInfo& m : machines_) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

}  // namespace cartage::fsm
