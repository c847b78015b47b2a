// What every method that speaks a wire protocol does with CARs, in one
// place: hand an arrived envelope to the receive it matches (or to a new
// unexpected CAR), forget a CAR's wire handle once it is final, and fail the
// CARs it holds by handle for a peer that is gone. shm, tcp and the example
// method (examples/method) use them.
#ifndef CARTAGE_METHODS_COMMON_WIRE_CARS_H_
#define CARTAGE_METHODS_COMMON_WIRE_CARS_H_

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "car/car.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "car/unexpected_fsm.h"
#include "methods/common/handle_table.h"
#include "methods/host.h"

namespace cartage::methods {

// Delivers an arrived envelope: `bytes` announced, `proto` its CarProto bits
// (kProtoRendezvous for an RTS), `payload` the whole message of an eager one
// (null for an RTS). The posted receive it matches, or else a new unexpected
// CAR (with a temporary buffer for eager data), gets `adopt(car)` (the
// method's private state: sender, handles) and then its machine's event.
// Returns that CAR; an error only if no unexpected CAR could be made.
//
// With `defer_unmatched` (a bool, or a callable asked only once no posted
// receive matched), an envelope no posted receive matches is left alone and
// nullptr returned: the method keeps the message where it is (its
// ring) and delivers it on a later call, when its receive may have been
// posted. That turns a stream of messages that each arrive just before
// their receive (a bcast's) into expected ones, which skip the unexpected
// CAR, its buffer and the second copy. A method may defer only what it will
// deliver later without waiting for anything else, and only behind a
// message it delivered in the same sweep, so that every sweep moves on.
template <class Adopt, class Defer = bool>
absl::StatusOr<car::Car*> DeliverEnvelope(MethodHost& host, const car::Envelope& envelope, uint64_t bytes,
                                          uint32_t proto, const std::byte* payload, Adopt adopt,
                                          Defer defer_unmatched = false) {
  const bool rendezvous = (proto & car::kProtoRendezvous) != 0;
  car::CarSignal sig;
  sig.bytes = bytes;
  sig.proto = proto;
  sig.source = envelope.rank;
  sig.tag = envelope.tag;
  sig.data = payload;  // eager: the whole message, one event
  if (car::Car* r = host.MatchIncoming(envelope.Assembled())) {
    adopt(*r);
    (void)car::RecvMachine::Dispatch(*r, rendezvous ? car::RecvEvent::kEnvelope : car::RecvEvent::kEager, sig);
    return r;
  }
  if constexpr (std::is_invocable_r_v<bool, Defer>) {
    if (defer_unmatched()) return nullptr;
  } else if (defer_unmatched) {
    return nullptr;
  }
  absl::StatusOr<car::Car*> u = host.NewUnexpected(envelope, rendezvous ? 0 : bytes);
  if (!u.ok()) return u.status();
  adopt(**u);
  (void)car::UnexpectedMachine::Dispatch(
      **u, rendezvous ? car::UnexpectedEvent::kEnvelope : car::UnexpectedEvent::kEager, sig);
  return *u;
}

// Forgets `c`'s wire handle (`local_handle`, the method's copy) once its
// machine is final: the peer can no longer name it.
inline void ForgetIfFinal(HandleTable& handles, car::Car& c, uint64_t& local_handle) {
  if (local_handle == 0) return;
  const bool final = c.kind() == car::CarKind::kSend ? car::SendMachine::IsFinal(c) : car::RecvMachine::IsFinal(c);
  if (final) {
    handles.Remove(local_handle);
    local_handle = 0;
  }
}

// The CAR under `handle` if it is of `kind` and talks to `source`
// (`peer_of(car)`); nullptr for a stale or forged handle.
template <class PeerOf>
car::Car* FindFrom(const HandleTable& handles, uint64_t handle, car::CarKind kind, int source, PeerOf peer_of) {
  car::Car* c = handles.Find(handle);
  return c != nullptr && c->kind() == kind && peer_of(*c) == source ? c : nullptr;
}

// Fails `c` with `why` through its machine, unless it is already final.
// Outside any CAR's transition (inside one: car::CarActions::RaiseError).
inline void DispatchError(car::Car& c, const absl::Status& why) {
  car::CarSignal err;
  err.error = why;
  if (c.kind() == car::CarKind::kSend) {
    if (!car::SendMachine::IsFinal(c)) (void)car::SendMachine::Dispatch(c, car::SendEvent::kError, err);
  } else if (!car::RecvMachine::IsFinal(c)) {
    (void)car::RecvMachine::Dispatch(c, car::RecvEvent::kError, err);
  }
}

// Fails, with `why`, every CAR in `handles` whose peer (`peer_of(car)`) is
// `peer`, and forgets their handles (`forget(car)` clears the method's copy).
// Dispatches the CAR machines: call it outside any CAR's transition.
template <class PeerOf, class Forget>
void FailWaiting(HandleTable& handles, int peer, const absl::Status& why, PeerOf peer_of, Forget forget) {
  std::vector<std::pair<uint64_t, car::Car*>> waiting;
  handles.ForEach([&](uint64_t h, car::Car* c) {
    if (peer_of(*c) == peer) waiting.emplace_back(h, c);
  });
  for (auto [h, c] : waiting) {
    handles.Remove(h);
    forget(*c);
    DispatchError(*c, why);
  }
}

}  // namespace cartage::methods

#endif  // CARTAGE_METHODS_COMMON_WIRE_CARS_H_
