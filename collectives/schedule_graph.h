// What validating a schedule finds of its graph, and what the engine sets
// the schedule up with: each vertex's successors, its number of
// predecessors, and the vertices in an order where each comes after all it
// waits for.
#ifndef CARTAGE_COLLECTIVES_SCHEDULE_GRAPH_H_
#define CARTAGE_COLLECTIVES_SCHEDULE_GRAPH_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cartage::internal {

struct ScheduleGraph {
  std::vector<std::vector<std::size_t>> succ;
  std::vector<uint32_t> indegree;
  std::vector<std::size_t> order;
};

}  // namespace cartage::internal

#endif  // CARTAGE_COLLECTIVES_SCHEDULE_GRAPH_H_
