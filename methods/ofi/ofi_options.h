// The ofi method's parameters and CARTAGE_OFI_* overrides (ofi_options.cc;
// `cartage info` prints the table).
#ifndef CARTAGE_METHODS_OFI_OFI_OPTIONS_H_
#define CARTAGE_METHODS_OFI_OFI_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "methods/method.h"
#include "methods/ofi/ofi_wire.h"

namespace cartage::methods::ofi {

// Parameters, each overridable by CARTAGE_OFI_<NAME> (see Params()).
struct OfiOptions {
  std::vector<std::string> include;  // providers to consider (empty: all)
  std::vector<std::string> exclude;  // providers never to use
  TagMode tag_mode = TagMode::kAuto;
  int events = 100;                  // completions read per fi_cq_read
  int hold_s = 60;                   // a send held back for the receiver this long fails (0: never)
  bool rma = true;                   // ask for FI_RMA: windows' puts and gets as the provider's writes and reads
  bool rma_ordered = true;           // and for sends after writes in order (FI_ORDER_SAW), relied on where given
  static absl::StatusOr<OfiOptions> FromEnvironment();
};
std::vector<ParamInfo> Params();

}  // namespace cartage::methods::ofi

#endif  // CARTAGE_METHODS_OFI_OFI_OPTIONS_H_
