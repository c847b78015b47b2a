// Replays a traced job against the tables (`cartage trace check`): every
// recorded transition must be a row of its machine, every instance's life
// must start in the initial state and go on from the state it was left in,
// and in a job every rank of which finalized, every instance must end in a
// final state and every span must have ended.
#ifndef CARTAGE_FSM_TRACE_CHECK_H_
#define CARTAGE_FSM_TRACE_CHECK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fsm/registry.h"
#include "fsm/trace_file.h"

namespace cartage::fsm {

struct TraceCheck {
  std::vector<std::string> problems;  // in words, naming rank, machine, instance and states
  uint64_t transitions = 0;  // replayed
  uint64_t instances = 0;
  bool finished = false;  // every rank's file was written at finalize
};

// A file's machine as the registry knows it: the file's state and event
// indexes mapped onto the table's by name (-1: the table has no such name);
// `info` null for a machine no table describes.
struct BoundMachine {
  const MachineInfo* info = nullptr;
  std::vector<int> state;
  std::vector<int> event;
};
// One per machine of `f`, in its order.
std::vector<BoundMachine> BindMachines(const Registry& registry, const TraceFile& f);

// `ranks`: the files of one job (any order).
TraceCheck CheckJobTrace(const Registry& registry, const std::vector<TraceFile>& ranks);

}  // namespace cartage::fsm

#endif  // CARTAGE_FSM_TRACE_CHECK_H_
