// Agents made from an exchange instead of the environment, for tests that
// run the ranks of a job as threads of one process (the conformance kit's
// in-process runs). A program makes its one agent with
// Agent::FromEnvironment; this path skips that check, so several agents can
// live in one test process.
#ifndef CARTAGE_AGENT_TESTING_H_
#define CARTAGE_AGENT_TESTING_H_

#include <memory>

#include "absl/status/statusor.h"
#include "agent/threads.h"
#include "cartage/cartage.h"
#include "methods/host.h"

namespace cartage::agent {

absl::StatusOr<std::unique_ptr<Agent>> NewAgentForTesting(std::unique_ptr<methods::Exchange> exchange,
                                                          Threading threading = {});

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_TESTING_H_
