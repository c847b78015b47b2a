// `cartage schedule COLLECTIVE[/ALGORITHM] --ranks N --bytes B`: renders a
// collective's schedule (every rank's, with the messages between them, or
// one rank's) as DOT, Mermaid or SVG; and the examples in diagrams/schedules.
#ifndef CARTAGE_TOOLS_CARTAGE_SCHEDULE_CMD_H_
#define CARTAGE_TOOLS_CARTAGE_SCHEDULE_CMD_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace cartage::tools {

// `spec` is "allreduce" or "allreduce/ring"; `rank` < 0: the whole job.
// Reductions sum doubles (bytes / 8 of them), the others move bytes;
// `bytes` is per rank for gather, scatter, allgather and alltoall.
absl::StatusOr<std::string> RenderSchedule(const std::string& spec, int ranks, uint64_t bytes,
                                           const std::string& format, int rank);

// diagrams/schedules: every algorithm's whole-job schedule at 8 ranks as
// DOT, Mermaid and SVG, with a README indexing them (file name -> contents,
// names relative to the diagrams folder).
absl::StatusOr<std::map<std::string, std::string>> ScheduleDiagrams();

}  // namespace cartage::tools

#endif  // CARTAGE_TOOLS_CARTAGE_SCHEDULE_CMD_H_
