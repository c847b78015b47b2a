// The trace file a traced process writes (CARTAGE_TRACE=DIR): one per rank,
// text, self-describing (each machine's state and event names travel with
// it), read back by `cartage trace`.
//
//   cartage-trace 1
//   job 4242-1a2b / rank 0 / size 2 / host h / pid 4243 / clock_offset_ns 0
//   capacity 262144 / recorded 1234 / lost 0 / end finalize
//   machine 0 car_send idle,wait_deps,... post,cancel,...
//   span 0 allreduce/recursive_doubling
//   t TIME_NS MACHINE INSTANCE FROM EVENT TO CONTEXT PEER TAG BYTES
//   l TIME_NS MACHINE INSTANCE STATE CONTEXT PEER TAG BYTES DONE WAITS_ON
//                                      (a CAR alive at the dump, as its owner listed it)
//   b TIME_NS CALL CONTEXT SPAN         (a collective call begins)
//   e TIME_NS CALL CONTEXT SPAN OK      (and ends)
// (one header field a line in the file itself).
#ifndef CARTAGE_FSM_TRACE_FILE_H_
#define CARTAGE_FSM_TRACE_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fsm/trace_ring.h"

namespace cartage::fsm {

struct TraceFile {
  // Header.
  std::string job;
  int rank = 0;
  int size = 1;
  std::string host;
  int64_t pid = 0;
  int64_t clock_offset_ns = 0;  // add to this rank's times for the job's time base (rank 0's clock)
  uint64_t capacity = 0;
  uint64_t recorded = 0;
  uint64_t lost = 0;      // records the ring dropped before the dump
  std::string end;        // why it was written: "finalize", "exit", "signal", "watchdog"
  int64_t dump_ns = 0;    // when (this rank's clock)
  // Whether the rank's own thread listed its live CARs for the dump (it does
  // from a wait inside cartage); when not, only the ring tells what lives.
  bool live_listed = false;

  struct Machine {
    std::string name;
    std::vector<std::string> states;
    std::vector<std::string> events;
  };
  std::vector<Machine> machines;
  std::vector<std::string> span_names;

  // One record, in the order they were made.
  struct Entry {
    char kind = 't';  // 't' transition, 'b' span begins, 'e' span ends
    int64_t time_ns = 0;
    int32_t machine = 0;  // 't': index into machines
    uint64_t instance = 0;  // 't': the instance; 'b'/'e': the call number
    uint8_t from = 0, event = 0, to = 0;
    uint32_t context = 0;
    int32_t peer = -1;  // 'b'/'e': index into span_names
    int32_t tag = 0;
    uint64_t bytes = 0;
    bool ok = true;  // 'e': the call ended well
    // 'l' (state in `to`):
    uint64_t done = 0;      // bytes done
    uint32_t waits_on = 0;  // dependencies not yet met (buffer, progress, predecessors)
  };
  std::vector<Entry> entries;
  std::vector<Entry> live;  // 'l': every live CAR, where live_listed

  // Accessors for a transition entry's names.
  const Machine& MachineOf(const Entry& e) const { return machines[static_cast<std::size_t>(e.machine)]; }
};

// A CAR alive as its owner lists it for a dump.
struct LiveCar {
  TraceRecord at;  // machine, instance, state (in `to`), context, peer, tag, bytes
  uint64_t done = 0;
  uint32_t waits_on = 0;
};

// Writes the header (entries and names are taken from `snapshot`) to
// `path`, through a temporary file renamed into place; `live`, where the
// owner listed its CARs (null: not listed).
absl::Status WriteTraceFile(const std::string& path, const TraceFile& header, const TraceRing::Snapshot& snapshot,
                            const std::vector<LiveCar>* live = nullptr);

// Reads one; kInvalidArgument naming the file and line for anything malformed.
absl::StatusOr<TraceFile> ReadTraceFile(const std::string& path);

}  // namespace cartage::fsm

#endif  // CARTAGE_FSM_TRACE_FILE_H_
