// What every method that speaks a wire protocol does with CARs, in one
// place: hand an arrived envelope to the receive it matches (or to a new
// unexpected CAR); name CARs on the wire by handle and find them again when
// the peer answers (CTS, ACK, DATA); forget a handle once its CAR is final;
// fail the CARs a dead peer will never answer. shm, tcp and the example
// method (examples/method) use them.
//
//   struct MyCarState {
//     WireHandles wire;   // first: WireCars finds it at the start of the private area
//     ...
//   };
//   WireCars wire_;
//   s.wire.local = wire_.Register(c);                       // a send that waits for its CTS
//   if (Car* c = wire_.CtsFor(source, h.sender)) wire_.OnCts(*c, h.receiver);
//   else Malformed(source, "CTS for an unknown send");
#ifndef CARTAGE_METHODS_COMMON_WIRE_CARS_H_
#define CARTAGE_METHODS_COMMON_WIRE_CARS_H_

#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "car/car.h"
#include "car/recv_fsm.h"
#include "car/rma_fsm.h"
#include "car/send_fsm.h"
#include "car/unexpected_fsm.h"
#include "methods/common/handle_table.h"
#include "methods/host.h"

namespace cartage::methods {

// Delivers an arrived envelope: `bytes` announced, `proto` its CarProto bits
// (kProtoRendezvous for an RTS), `payload` the whole message of an eager one
// (null for an RTS). The posted receive it matches, or else a new unexpected
// CAR (with a temporary buffer for eager data), gets `adopt(car)` (the
// method's private state: its handles) and then its machine's event.
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
// The envelope event's signal: `bytes` announced, `proto` its CarProto bits.
inline car::CarSignal EnvelopeSignal(const car::Envelope& envelope, uint64_t bytes, uint32_t proto) {
  car::CarSignal sig;
  sig.bytes = bytes;
  sig.proto = proto;
  sig.source = envelope.rank;
  sig.tag = envelope.tag;
  return sig;
}

template <class Adopt, class Defer = bool>
absl::StatusOr<car::Car*> DeliverEnvelope(MethodHost& host, const car::Envelope& envelope, uint64_t bytes,
                                          uint32_t proto, const std::byte* payload, Adopt adopt,
                                          Defer defer_unmatched = false) {
  const bool rendezvous = (proto & car::kProtoRendezvous) != 0;
  car::CarSignal sig = EnvelopeSignal(envelope, bytes, proto);
  sig.data = payload;  // eager: the whole message, one event
  // A matched receive is posted, and an unexpected CAR new: those states'
  // rows are compiled in line (DispatchFrom); any other takes the table's
  // general way.
  if (car::Car* r = host.MatchIncoming(envelope.Assembled())) {
    adopt(*r);
    if (rendezvous) {
      (void)car::RecvMachine::DispatchFrom<car::RecvState::kPosted, car::RecvEvent::kEnvelope>(*r, sig);
    } else {
      (void)car::RecvMachine::DispatchFrom<car::RecvState::kPosted, car::RecvEvent::kEager>(*r, sig);
    }
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
  if (rendezvous) {
    (void)car::UnexpectedMachine::DispatchFrom<car::UnexpectedState::kNew, car::UnexpectedEvent::kEnvelope>(**u, sig);
  } else {
    (void)car::UnexpectedMachine::DispatchFrom<car::UnexpectedState::kNew, car::UnexpectedEvent::kEager>(**u, sig);
  }
  return *u;
}

// An eager message whose bytes are still on their way, for a method that
// would read them straight into the receive (a large frame half read): the
// posted receive it matches gets `adopt(car)` and the envelope event, and
// the bytes follow as data events. nullptr, with nothing done, where no
// posted receive matches: the method then delivers the message whole
// (DeliverEnvelope) once all of it is in.
template <class Adopt>
car::Car* MatchStreamedEager(MethodHost& host, const car::Envelope& envelope, uint64_t bytes, uint32_t proto,
                             Adopt adopt) {
  car::Car* r = host.MatchIncoming(envelope.Assembled());
  if (r == nullptr) return nullptr;
  adopt(*r);
  (void)car::RecvMachine::DispatchFrom<car::RecvState::kPosted, car::RecvEvent::kEnvelope>(
      *r, EnvelopeSignal(envelope, bytes, proto & ~car::kProtoRendezvous));
  return r;
}

// Fails `c` with `why` through its machine, unless it is already final.
// Outside any CAR's transition (inside one: car::CarActions::RaiseError).
inline void DispatchError(car::Car& c, const absl::Status& why) {
  car::CarSignal err;
  err.error = why;
  if (c.kind() == car::CarKind::kSend) {
    if (!car::SendMachine::IsFinal(c)) (void)car::SendMachine::Dispatch(c, car::SendEvent::kError, err);
  } else if (c.kind() == car::CarKind::kRma) {
    if (!car::RmaCarMachine::IsFinal(c)) (void)car::RmaCarMachine::Dispatch(c, car::RmaCarEvent::kError, err);
  } else if (!car::RecvMachine::IsFinal(c)) {
    (void)car::RecvMachine::Dispatch(c, car::RecvEvent::kError, err);
  }
}

// How a CAR and its peer's CAR name each other on the wire. A method that
// uses WireCars makes this the first member of its CAR state (a
// standard-layout struct), so that WireCars finds it at the start of the
// CAR's private area.
struct WireHandles {
  uint64_t local = 0;   // this CAR's handle while the peer may name it (0: none)
  uint64_t remote = 0;  // the peer's handle: the sender's send, or the receiver's receive
};

// The CARs a method has named on the wire, and what every protocol does when
// a peer names one back. Everything it dispatches, it dispatches directly:
// call it outside any CAR's transition (from progress).
class WireCars {
 public:
  // A CAR's handles, at the start of its private area.
  static WireHandles& HandlesOf(car::Car& c) { return *static_cast<WireHandles*>(c.method_private()); }

  // Room for `n` handles without allocating.
  void Reserve(std::size_t n) { handles_.Reserve(n); }
  // Names `c` on the wire: its local handle, which the peer sends back.
  uint64_t Register(car::Car& c) { return HandlesOf(c).local = handles_.Insert(&c); }
  // The CAR under `handle` if it is of `kind` and bound to `source` (its
  // VC's peer); nullptr for a stale, forged or misdirected handle.
  car::Car* Lookup(uint64_t handle, car::CarKind kind, int source) const {
    car::Car* c = handles_.Find(handle);
    return c != nullptr && c->kind() == kind && c->vc()->peer == source ? c : nullptr;
  }
  // Forgets `c`'s handle once its machine is final: the peer can no longer
  // name it. In line where most CARs have none (an eager message's).
  ABSL_ATTRIBUTE_ALWAYS_INLINE void FinishIfFinal(car::Car& c) {
    if (HandlesOf(c).local != 0) ForgetIfFinal(c);
  }
  // Forgets `c`'s handle now (its last answer has come).
  void Forget(car::Car& c) { Forget(HandlesOf(c)); }

  // The send a CTS from `source` names, if it waits for one (rts_sent);
  // nullptr otherwise: the peer sent something malformed.
  car::Car* CtsFor(int source, uint64_t send_handle) const {
    car::Car* c = Lookup(send_handle, car::CarKind::kSend, source);
    return c != nullptr && car::SendMachine::StateOf(*c) == car::SendState::kRtsSent ? c : nullptr;
  }
  // `send`'s CTS came, naming the receive that takes the data
  // (`receiver_handle`), or saying the receiver read the data itself
  // (`read`: single copy, and the send is done): the send's machine moves on.
  void OnCts(car::Car& send, uint64_t receiver_handle, bool read = false) {
    HandlesOf(send).remote = receiver_handle;
    car::CarSignal cts;
    cts.proto = read ? car::kProtoRead : car::kProtoEager;
    (void)car::SendMachine::Dispatch(send, car::SendEvent::kCts, cts);
    FinishIfFinal(send);
  }
  // The ACK of a synchronous send came from `source`; false if it names no
  // send to `source` (malformed).
  bool OnAck(int source, uint64_t send_handle) {
    car::Car* c = Lookup(send_handle, car::CarKind::kSend, source);
    if (c == nullptr) return false;
    (void)car::SendMachine::Dispatch(*c, car::SendEvent::kAck);
    FinishIfFinal(*c);
    return true;
  }

  // Fails, with `why`, every CAR named on the wire whose peer is `peer`: it
  // will never answer. `also(car)` runs for each first (the method's own
  // bookkeeping).
  template <class Also>
  void FailWaiting(int peer, const absl::Status& why, Also also) {
    std::vector<car::Car*> waiting;
    handles_.ForEach([&](uint64_t, car::Car* c) {
      if (c->vc()->peer == peer) waiting.push_back(c);
    });
    for (car::Car* c : waiting) {
      Forget(HandlesOf(*c));
      also(*c);
      DispatchError(*c, why);
    }
  }
  void FailWaiting(int peer, const absl::Status& why) {
    FailWaiting(peer, why, [](car::Car&) {});
  }

  std::size_t live() const { return handles_.live(); }

 private:
  ABSL_ATTRIBUTE_NOINLINE void ForgetIfFinal(car::Car& c) {
    const bool final = c.kind() == car::CarKind::kSend ? car::SendMachine::IsFinal(c) : car::RecvMachine::IsFinal(c);
    if (final) Forget(HandlesOf(c));
  }
  void Forget(WireHandles& h) {
    handles_.Remove(h.local);
    h.local = 0;
  }
  HandleTable handles_;
};

}  // namespace cartage::methods

#endif  // CARTAGE_METHODS_COMMON_WIRE_CARS_H_
