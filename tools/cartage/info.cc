// `cartage info`: what this build contains.
#include <iostream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "agent/params.h"
#include "car/car.h"
#include "car/car_pool.h"
#include "cartage/collectives.h"
#include "cartage/config.h"
#include "fsm/registry.h"
#include "methods/registry.h"

namespace cartage::tools {

void PrintInfo(const fsm::Registry& reg) {
  std::cout << absl::StrFormat("cartage %s (%s build, sanitizers: %s)\n", CARTAGE_VERSION,
                               CARTAGE_BUILD_TYPE,
                               absl::string_view(CARTAGE_SANITIZE).empty() ? "none" : CARTAGE_SANITIZE);
  absl::StatusOr<methods::Registry> registry = methods::Registry::Load();
  if (!registry.ok()) {
    std::cout << "\nmethods: " << registry.status().message() << "\n";
  } else {
    std::cout << absl::StrFormat("\nmethods (%d; CARTAGE_METHODS picks, default %s):\n", registry->all().size(),
                                 methods::kDefaultMethods);
    for (const methods::Descriptor* d : registry->all()) {
      std::cout << absl::StrFormat("  %-6s %s (%s)\n", d->name, d->summary, registry->origin(d));
      std::cout << absl::StrFormat("         %s\n", methods::Describe(d->caps()));
      if (d->details != nullptr) {
        for (const std::string& line : d->details()) std::cout << absl::StrFormat("         %s\n", line);
      }
      const std::string upper = absl::AsciiStrToUpper(d->name);
      for (const methods::ParamInfo& p : d->params()) {
        std::cout << absl::StrFormat("         CARTAGE_%s_%-12s default %-9s %s\n", upper, p.name,
                                     *p.default_value ? p.default_value : "(none)", p.help);
      }
    }
  }
  std::cout << "\nagent:\n";
  for (const methods::ParamInfo& p : agent::Params()) {
    std::cout << absl::StrFormat("  %-23s default %-12s %s\n", p.name, *p.default_value ? p.default_value : "(none)",
                                 p.help);
  }
  std::cout << "\noptional dependencies found at configure time:\n";
  std::cout << absl::StrFormat("  %-6s %-11s %s\n", "ofi", "libfabric",
                               CARTAGE_HAVE_OFI ? absl::StrCat("found, ", CARTAGE_OFI_VERSION)
                                                : std::string("not found (CARTAGE_WITH_OFI)"));
  std::cout << absl::StrFormat("  %-6s %-11s %s\n", "verbs", "libibverbs",
                               CARTAGE_HAVE_VERBS ? absl::StrCat("found, ", CARTAGE_VERBS_VERSION)
                                                  : std::string("not found (CARTAGE_WITH_VERBS)"));
  std::cout << absl::StrFormat("  %-6s %-11s %s\n", "pmix", "libpmix",
                               CARTAGE_HAVE_PMIX ? absl::StrCat("found, ", CARTAGE_PMIX_VERSION, " (start-up under PMIx)")
                                                 : std::string("not found (CARTAGE_WITH_PMIX)"));
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
  std::cout << "\n" << DescribeSelection();
}

}  // namespace cartage::tools
