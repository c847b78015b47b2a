// `cartage info`: what this build contains.
#include <iostream>

#include "absl/strings/str_format.h"
#include "car/car.h"
#include "car/car_pool.h"
#include "cartage/config.h"
#include "fsm/registry.h"
#include "methods/shm/shm_method.h"

namespace cartage::tools {

void PrintInfo(const fsm::Registry& reg) {
  std::cout << absl::StrFormat("cartage %s (%s build, sanitizers: %s)\n", CARTAGE_VERSION,
                               CARTAGE_BUILD_TYPE,
                               absl::string_view(CARTAGE_SANITIZE).empty() ? "none" : CARTAGE_SANITIZE);
  std::cout << "\nmethods compiled in:\n"
               "  self   reaches the rank itself; ordered, reliable; every size eager, one copy\n"
               "  shm    reaches the other ranks on this host; ordered, reliable;\n"
               "         eager up to EAGER_LIMIT, then rendezvous by one process_vm_readv copy\n"
               "         (CMA, probed at start-up) or a pipelined copy through the rings\n"
               "  parameters (environment CARTAGE_SHM_<NAME>):\n";
  for (const methods::shm::ParamInfo& p : methods::shm::Params()) {
    std::cout << absl::StrFormat("    %-12s default %-7s %s\n", p.name, p.default_value, p.help);
  }
  std::cout << "  tcp, ofi and verbs come with the method contract (see README.md).\n";
  std::cout << "\noptional method dependencies found at configure time:\n";
  std::cout << absl::StrFormat("  %-6s %-11s %s\n", "ofi", "libfabric",
                               CARTAGE_HAVE_OFI ? absl::StrCat("found, ", CARTAGE_OFI_VERSION)
                                                : std::string("not found (CARTAGE_WITH_OFI)"));
  std::cout << absl::StrFormat("  %-6s %-11s %s\n", "verbs", "libibverbs",
                               CARTAGE_HAVE_VERBS ? absl::StrCat("found, ", CARTAGE_VERBS_VERSION)
                                                  : std::string("not found (CARTAGE_WITH_VERBS)"));
  std::cout << absl::StrFormat("\nstate machines (%d):\n", reg.machines().size());
  for (const fsm::MachineInfo& m : reg.machines()) {
    std::cout << absl::StrFormat("  %-16s %2d states %2d events %2d transitions  %s\n", m.name,
                                 m.states.size(), m.events.size(), m.transitions.size(), m.summary);
  }
  car::CarPool pool({});
  std::cout << absl::StrFormat(
      "\nCAR: %d bytes; a pool slot is %d bytes plus the largest method-private area, "
      "rounded to 64\n",
      sizeof(car::Car), pool.slot_bytes());
}

}  // namespace cartage::tools
