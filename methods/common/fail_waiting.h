// Failing the CARs a method holds by wire handle for a peer that is gone:
// every method with handles (a send waiting for its CTS or ACK, a receive
// waiting for DATA) does this when a VC enters the error state.
#ifndef CARTAGE_METHODS_COMMON_FAIL_WAITING_H_
#define CARTAGE_METHODS_COMMON_FAIL_WAITING_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "car/car.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "methods/common/handle_table.h"

namespace cartage::methods {

// Fails, with `why`, every CAR in `handles` whose peer (`peer_of(car)`) is
// `peer`, and forgets their handles (`forget(car)` clears the method's copy).
// Dispatches the CAR machines: call it outside any CAR's transition.
template <class PeerOf, class Forget>
void FailWaiting(HandleTable& handles, int peer, const absl::Status& why, PeerOf peer_of, Forget forget) {
  car::CarSignal err;
  err.error = why;
  std::vector<std::pair<uint64_t, car::Car*>> waiting;
  handles.ForEach([&](uint64_t h, car::Car* c) {
    if (peer_of(*c) == peer) waiting.emplace_back(h, c);
  });
  for (auto [h, c] : waiting) {
    handles.Remove(h);
    forget(*c);
    if (c->kind() == car::CarKind::kSend) {
      if (!car::SendMachine::IsFinal(*c)) (void)car::SendMachine::Dispatch(*c, car::SendEvent::kError, err);
    } else if (!car::RecvMachine::IsFinal(*c)) {
      (void)car::RecvMachine::Dispatch(*c, car::RecvEvent::kError, err);
    }
  }
}

}  // namespace cartage::methods

#endif  // CARTAGE_METHODS_COMMON_FAIL_WAITING_H_
