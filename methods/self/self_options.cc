// The self method's capabilities (every size eager; nothing to poll) and
// the registry's entry. It has no parameters.
#include <limits>
#include <memory>
#include <vector>

#include "methods/self/self_method.h"

namespace cartage::methods::self {

Capabilities SelfMethod::Caps() {
  Capabilities c;
  c.eager_limit = std::numeric_limits<uint64_t>::max();
  c.max_message = std::numeric_limits<uint64_t>::max();
  c.reach = Reach::kProcess;
  c.needs_polling = false;
  return c;
}

namespace {
absl::StatusOr<std::unique_ptr<Method>> Open(const OpenArgs& args) {
  return std::make_unique<SelfMethod>(args.host, args.exchange->rank());
}
std::vector<ParamInfo> NoParams() { return {}; }
}  // namespace

const Descriptor kDescriptor{"self", "the rank itself: in-process, one copy, every size eager",
                             &SelfMethod::Caps, &NoParams, &Open};

}  // namespace cartage::methods::self
