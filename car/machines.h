// Registration of the CAR machines (car_send, car_recv, car_unexpected,
// car_vertex) with an fsm::Registry, for `cartage diagrams` and `cartage info`.
#ifndef CARTAGE_CAR_MACHINES_H_
#define CARTAGE_CAR_MACHINES_H_

#include "absl/status/status.h"
#include "fsm/registry.h"

namespace cartage::car {

// Registers every CAR machine; fails if one is already registered.
absl::Status RegisterCarMachines(fsm::Registry& registry);

}  // namespace cartage::car

#endif  // CARTAGE_CAR_MACHINES_H_
