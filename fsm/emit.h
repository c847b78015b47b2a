// Diagram emitters: Graphviz DOT and Mermaid for any described machine.
// Edges read "event [guard] / action"; edge colour and style say the event's
// kind (user, wire, buffer, progress, timer); final states are double circles.
//
//   std::string dot = fsm::ToDot(car::SendMachine::Describe());
//   std::string mmd = fsm::ToMermaid(car::SendMachine::Describe());
#ifndef CARTAGE_FSM_EMIT_H_
#define CARTAGE_FSM_EMIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "fsm/machine_info.h"

namespace cartage::fsm {

// The label of one transition: "event [guard] / action" (parts omitted when absent).
std::string EdgeLabel(const MachineInfo& m, const TransitionInfo& t);

// What a running job did with a machine (`cartage trace diagram`).
struct LiveCounts {
  std::vector<uint64_t> taken;            // per row of m.transitions: how often
  std::vector<std::string> state_notes;   // per state: a line under its name ("p50 1.2 µs p99 8 µs"), or ""
  std::string caption;                    // what was counted
};

// A Graphviz digraph of the machine; with `live`, each edge carries its
// count (its width grows with it), each state its note, and the edges never
// taken are drawn faint.
std::string ToDot(const MachineInfo& m, const LiveCounts* live = nullptr);

// A Mermaid stateDiagram-v2 of the machine.
std::string ToMermaid(const MachineInfo& m);

}  // namespace cartage::fsm

#endif  // CARTAGE_FSM_EMIT_H_
