// `cartage why-stuck DIR`: reads a job's trace dumps (written at the
// launcher's timeout, on SIGUSR1, at CARTAGE_WATCHDOG, at exit or
// finalize) and says in words why the job stopped: the collective call
// where ranks disagree (one in another call, one in none), a cycle of ranks
// each waiting for the next one's message, the rank everyone waits for,
// or a message whose size its receive did not expect.
#ifndef CARTAGE_TOOLS_CARTAGE_WHY_STUCK_H_
#define CARTAGE_TOOLS_CARTAGE_WHY_STUCK_H_

#include <string>

#include "fsm/registry.h"
#include "tools/cartage/trace_cmd.h"

namespace cartage::tools {

// The findings for one job, a line each, most telling first.
std::string WhyStuck(const TraceJob& job, const fsm::Registry& registry);

// argv: the arguments after "why-stuck". Returns the exit code: 0 when
// it found a cause, 1 when it found none or could not read DIR.
int RunWhyStuck(int argc, char** argv, const fsm::Registry& registry);

}  // namespace cartage::tools

#endif  // CARTAGE_TOOLS_CARTAGE_WHY_STUCK_H_
