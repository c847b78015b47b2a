// `cartage trace`: reads the files a traced job wrote (CARTAGE_TRACE=DIR,
// `cartage run --trace DIR`): merges them into one Chrome/Perfetto trace,
// replays them against the tables (`cartage trace check`), and compares
// two runs life for life (`cartage trace compare`).
#ifndef CARTAGE_TOOLS_CARTAGE_TRACE_CMD_H_
#define CARTAGE_TOOLS_CARTAGE_TRACE_CMD_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fsm/registry.h"
#include "fsm/trace_file.h"

namespace cartage::tools {

// argv: the arguments after "trace". Returns the exit code.
int RunTrace(int argc, char** argv, const fsm::Registry& registry);

// One job's files, by rank.
struct TraceJob {
  std::string id;
  std::vector<fsm::TraceFile> ranks;
};
// Every job whose files are in `dir`, oldest first (by the files' times).
absl::StatusOr<std::vector<TraceJob>> ReadTraceJobs(const std::string& dir);

// The Trace Event Format JSON of one job: a process per rank, a lane (thread)
// per set of CARs that do not overlap in time, a slice per state a CAR sat
// in, flow arrows from each send to the receive side's CAR that took its
// message, and each collective call as a slice on the rank's call lanes.
// `registry` tells where a re-armed CAR's next life begins.
std::string ChromeTraceJson(const TraceJob& job, const fsm::Registry& registry);

}  // namespace cartage::tools

#endif  // CARTAGE_TOOLS_CARTAGE_TRACE_CMD_H_
