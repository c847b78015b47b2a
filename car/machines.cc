#include "car/machines.h"

#include "car/recv_fsm.h"
#include "car/rma_fsm.h"
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
  CARTAGE_RETURN_IF_ERROR(registry.Register(RmaCarMachine::Describe()));
  return absl::OkStatus();
}

fsm::LiveCar DescribeLive(const Car& car, int64_t now_ns) {
  fsm::LiveCar l;
  fsm::TraceRecord& r = l.at;
  switch (car.kind()) {
    case CarKind::kSend: r.machine = &fsm::kNamesOf<SendDef>; break;
    case CarKind::kRecv: r.machine = &fsm::kNamesOf<RecvDef>; break;
    case CarKind::kUnexpected: r.machine = &fsm::kNamesOf<UnexpectedDef>; break;
    case CarKind::kVertex: r.machine = &fsm::kNamesOf<VertexDef>; break;
    case CarKind::kRma: r.machine = &fsm::kNamesOf<RmaCarDef>; break;
    case CarKind::kCount: break;
  }
  // No event: the subject is the CAR's own, not what an arrival announces.
  r.from = r.event = 0xff;
  CarMachineBase::Subject(car, CarSignal{}, r);
  r.time_ns = now_ns;
  r.instance = car.id();
  r.from = r.to = car.state();
  r.event = 0;
  l.done = car.bytes_done();
  l.waits_on = car.deps_pending() + car.predecessors_pending();
  return l;
}

}  // namespace cartage::car
