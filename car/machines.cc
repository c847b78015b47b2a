#include "car/machines.h"

#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "car/unexpected_fsm.h"
#include "car/vertex_fsm.h"
#include "base/check.h"

namespace cartage::car {

absl::Status RegisterCarMachines(fsm::Registry& registry) {
  CARTAGE_RETURN_IF_ERROR(registry.Register(SendMachine::Describe()));
  CARTAGE_RETURN_IF_ERROR(registry.Register(RecvMachine::Describe()));
  CARTAGE_RETURN_IF_ERROR(registry.Register(UnexpectedMachine::Describe()));
  CARTAGE_RETURN_IF_ERROR(registry.Register(VertexMachine::Describe()));
  return absl::OkStatus();
}

}  // namespace cartage::car
