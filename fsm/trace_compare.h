// Compares two traced runs of the same traffic (`cartage trace compare`):
// a path that skips a dispatch (a fast path) must leave exactly the
// transitions the table would, so a run with it and a run without it must
// show, rank by rank and machine by machine, the same lives: each
// instance's transitions from its initial state to a final one (a re-armed
// instance starts a new life), counted as a multiset, with the instances'
// ids left out (a path may allocate differently). Spans (collective calls,
// finalize) compare by name and outcome.
#ifndef CARTAGE_FSM_TRACE_COMPARE_H_
#define CARTAGE_FSM_TRACE_COMPARE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fsm/registry.h"
#include "fsm/trace_file.h"

namespace cartage::fsm {

struct TraceComparison {
  uint64_t lives = 0;  // in the first run
  uint64_t spans = 0;  // collective calls and finalizes, in the first run
  // In words: "rank 0: car_send idle --post--> eager_in_flight --local_done--> done: 3 in A, 2 in B".
  std::vector<std::string> differences;
};

// `a` and `b`: the files of one job each (any order). Traffic whose paths
// depend on timing (a message that came before or after its receive) must
// be compared on runs that order it alike.
TraceComparison CompareJobTraces(const Registry& registry, const std::vector<TraceFile>& a,
                                 const std::vector<TraceFile>& b);

}  // namespace cartage::fsm

#endif  // CARTAGE_FSM_TRACE_COMPARE_H_
