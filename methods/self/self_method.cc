#include "methods/self/self_method.h"

#include "car/car_actions.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "car/unexpected_fsm.h"

namespace cartage::methods::self {

using car::Car;
using car::CarSignal;
using car::CarEvents;

const car::Vc SelfMethod::kOps{.name = "self", .start_eager = &StartEager, .send_ack = &SendAck};

SelfMethod::SelfMethod(MethodHost* host, int rank) : host_(host), rank_(rank) {
  vc_ = kOps;
  vc_.context = this;
  vc_.peer = rank;
  host_->InstallAgentOps(vc_);
}

void SelfMethod::Bind(Car& car, int) { new (car.method_private()) SelfCarState(); }

void SelfMethod::StartEager(Car& send, CarEvents& events) {
  SelfMethod& m = MethodOf<SelfMethod>(send);
  const car::Envelope& e = send.envelope();
  const car::Envelope incoming{e.context_id, m.rank_, e.tag};
  CarSignal sig;
  sig.bytes = send.payload_bytes();
  sig.proto = send.spec().synchronous ? car::kProtoSync : car::kProtoEager;
  sig.source = m.rank_;
  sig.tag = e.tag;
  sig.data = send.ContiguousSource();
  if (sig.data == nullptr && sig.bytes > 0) {
    // A non-contiguous message: pack it once into scratch kept for reuse.
    if (m.scratch_.size() < sig.bytes) m.scratch_.resize(sig.bytes);
    send.Gather(0, m.scratch_.data(), sig.bytes);
    sig.data = m.scratch_.data();
  }
  Car* sender = send.spec().synchronous ? &send : nullptr;
  if (Car* r = m.host_->MatchIncoming(incoming)) {
    m.Bind(*r, m.rank_);
    StateOf(*r).sender = sender;
    events.Raise<car::RecvMachine>(*r, car::RecvEvent::kEager, sig);
  } else {
    absl::StatusOr<Car*> u = m.host_->NewUnexpected(incoming, sig.bytes);
    if (!u.ok()) {
      car::CarActions::RaiseError(send, events, u.status());
      return;
    }
    m.Bind(**u, m.rank_);
    StateOf(**u).sender = sender;
    events.Raise<car::UnexpectedMachine>(**u, car::UnexpectedEvent::kEager, sig);
  }
  // The bytes are copied while the raised events run, before this post returns.
  events.Raise<car::SendMachine>(send, car::SendEvent::kLocalDone);
}

void SelfMethod::SendAck(Car& recv, CarEvents& events) {
  if (Car* sender = StateOf(recv).sender) events.Raise<car::SendMachine>(*sender, car::SendEvent::kAck);
}

}  // namespace cartage::methods::self
