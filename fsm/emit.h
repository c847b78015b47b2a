// Diagram emitters: Graphviz DOT and Mermaid for any described machine.
// Edges read "event [guard] / action"; edge colour and style say the event's
// kind (user, wire, buffer, progress, timer); final states are double circles.
//
//   std::string dot = fsm::ToDot(car::SendMachine::Describe());
//   std::string mmd = fsm::ToMermaid(car::SendMachine::Describe());
#ifndef CARTAGE_FSM_EMIT_H_
#define CARTAGE_FSM_EMIT_H_

#include <string>

#include "fsm/machine_info.h"

namespace cartage::fsm {

// The label of one transition: "event [guard] / action" (parts omitted when absent).
std::string EdgeLabel(const MachineInfo& m, const TransitionInfo& t);

// A Graphviz digraph of the machine.
std::string ToDot(const MachineInfo& m);

// A Mermaid stateDiagram-v2 of the machine.
std::string ToMermaid(const MachineInfo& m);

}  // namespace cartage::fsm

#endif  // CARTAGE_FSM_EMIT_H_
