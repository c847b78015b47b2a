// Registration of the CAR machines (car_send, car_recv, car_unexpected,
// car_vertex, car_rma) with an fsm::Registry, for `cartage diagrams` and `cartage
// info`, and a live CAR described by its machine, for hang dumps.
#ifndef CARTAGE_CAR_MACHINES_H_
#define CARTAGE_CAR_MACHINES_H_

#include "absl/status/status.h"
#include "car/car.h"
#include "fsm/registry.h"
#include "fsm/trace_file.h"

namespace cartage::car {

// Registers every CAR machine; fails if one is already registered.
absl::Status RegisterCarMachines(fsm::Registry& registry);

// `car` as a hang dump lists it: its machine, state and subject (as a
// traced transition names them), bytes done and dependencies unmet;
// `now_ns` is the listing's time.
fsm::LiveCar DescribeLive(const Car& car, int64_t now_ns);

}  // namespace cartage::car

#endif  // CARTAGE_CAR_MACHINES_H_
