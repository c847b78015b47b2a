#include "car/car_actions.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "absl/base/attributes.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "car/recv_fsm.h"
#include "car/rma_fsm.h"
#include "car/send_fsm.h"
#include "car/unexpected_fsm.h"
#include "car/vertex_fsm.h"

namespace cartage::car {

void CarMachineBase::Subject(const Car& c, const CarSignal& s, fsm::TraceRecord& r) {
  r.context = c.envelope().context_id;
  r.peer = c.vc() != nullptr ? c.vc()->peer : c.envelope().rank;
  r.tag = c.envelope().tag;
  r.bytes = c.bytes_total() != 0 ? c.bytes_total() : c.payload_bytes();
  // What a message announces (its sender's tag under a wildcard, its size).
  const bool arrives = (c.kind() == CarKind::kRecv && (r.event == static_cast<uint8_t>(RecvEvent::kEnvelope) ||
                                                       r.event == static_cast<uint8_t>(RecvEvent::kEager))) ||
                       (c.kind() == CarKind::kUnexpected && r.from == static_cast<uint8_t>(UnexpectedDef::State::kNew));
  if (arrives) {
    r.tag = s.tag;
    r.bytes = s.bytes;
  }
}
namespace {

// "send to rank 3 (tag 7, context 0)": the operation and the peer, for messages.
std::string Describe(const Car& c) {
  const Envelope& e = c.envelope();
  switch (c.kind()) {
    case CarKind::kSend:
      return absl::StrFormat("send #%d to rank %d (tag %d, context %d)", c.id(), e.rank, e.tag,
                             e.context_id);
    case CarKind::kRecv:
    case CarKind::kUnexpected: {
      const std::string rank =
          e.rank == kAnySource ? std::string("any rank") : absl::StrFormat("rank %d", e.rank);
      const std::string tag =
          e.tag == kAnyTag ? std::string("any tag") : absl::StrFormat("tag %d", e.tag);
      return absl::StrFormat("%s #%d from %s (%s, context %d)",
                             c.kind() == CarKind::kRecv ? "recv" : "unexpected message", c.id(),
                             rank, tag, e.context_id);
    }
    case CarKind::kVertex: return absl::StrFormat("schedule vertex #%d", c.id());
    case CarKind::kRma:
      return absl::StrFormat("one-sided %s #%d %s rank %d", c.flags().has(CarFlag::kSendData) ? "write" : "read",
                             c.id(), c.flags().has(CarFlag::kSendData) ? "to" : "from", e.rank);
    case CarKind::kCount: break;
  }
  return "car";
}

bool IsFinal(Car& c) {
  switch (c.kind()) {
    case CarKind::kSend: return SendMachine::IsFinal(c);
    case CarKind::kRecv: return RecvMachine::IsFinal(c);
    case CarKind::kUnexpected: return UnexpectedMachine::IsFinal(c);
    case CarKind::kVertex: return VertexMachine::IsFinal(c);
    case CarKind::kRma: return RmaCarMachine::IsFinal(c);
    case CarKind::kCount: break;
  }
  return true;
}

void RaiseError(Car& c, CarEvents& events, absl::Status error) {
  CarActions::RaiseError(c, events, std::move(error));
}

// Tells a dependent CAR that one of its progress dependencies completed.
void RaiseProgress(Car& dependent, CarEvents& events) {
  switch (dependent.kind()) {
    case CarKind::kSend: events.Raise<SendMachine>(dependent, SendEvent::kProgress); break;
    case CarKind::kRecv: events.Raise<RecvMachine>(dependent, RecvEvent::kProgress); break;
    case CarKind::kVertex: events.Raise<VertexMachine>(dependent, VertexEvent::kPredecessorDone); break;
    case CarKind::kUnexpected:
    case CarKind::kRma:
    case CarKind::kCount: break;
  }
}

void RaiseDepsMet(Car& c, CarEvents& events) {
  if (c.kind() == CarKind::kSend) events.Raise<SendMachine>(c, SendEvent::kDepsMet);
  if (c.kind() == CarKind::kRecv) events.Raise<RecvMachine>(c, RecvEvent::kDepsMet);
}

}  // namespace

void CarActions::NoOperation(Car& c, CarEvents& events, absl::string_view op_name) {
  const Vc* vc = c.vc();
  RaiseError(c, events, absl::FailedPreconditionError(absl::StrFormat(
                            "VC '%s' has no %s operation", vc ? vc->name : absl::string_view("none"), op_name)));
}

void CarActions::OfferBuffer(Car& c, CarEvents& events) {
  if (!c.flags().has(CarFlag::kSupplyPackedBuf) || c.buf_consumer() == nullptr) return;
  CarSignal s;
  s.buffer = c.pack_buf();
  s.bytes = c.spec().pack_size;
  Car& consumer = *c.buf_consumer();
  if (consumer.kind() == CarKind::kSend) {
    events.Raise<SendMachine>(consumer, SendEvent::kBufferSupplied, s);
  } else if (consumer.kind() == CarKind::kRecv) {
    events.Raise<RecvMachine>(consumer, RecvEvent::kBufferSupplied, s);
  }
}

namespace {

// Whoever waits on c (progress dependent, buffer consumer, successor vertices)
// would wait forever once c failed or was cancelled: fail them too.
void FailDependents(Car& c, CarEvents& events, absl::StatusCode code) {
  const absl::Status upstream(
      code, absl::StrFormat("a CAR it depends on ended without completing: %s", c.status().message()));
  auto fail = [&](Car* d) {
    if (d != nullptr) RaiseError(*d, events, upstream);
  };
  fail(c.progress_dependent());
  fail(c.buf_consumer());
  for (Car* next : c.spec().successors) fail(next);
}

}  // namespace

bool CarActions::ErrorQueued(const Car& c, const CarEvents& events) {
  switch (c.kind()) {
    case CarKind::kSend: return events.Queued<SendMachine>(c, SendEvent::kError);
    case CarKind::kRecv: return events.Queued<RecvMachine>(c, RecvEvent::kError);
    case CarKind::kUnexpected: return events.Queued<UnexpectedMachine>(c, UnexpectedEvent::kError);
    case CarKind::kVertex: return events.Queued<VertexMachine>(c, VertexEvent::kError);
    case CarKind::kRma: return events.Queued<RmaCarMachine>(c, RmaCarEvent::kError);
    case CarKind::kCount: break;
  }
  return false;
}

bool CarActions::Failing(Car& c, const CarEvents& events) {
  if (IsFinal(c) || ErrorQueued(c, events)) return true;
  return c.kind() == CarKind::kVertex && VertexMachine::StateOf(c) == VertexState::kDraining;
}

void CarActions::RaiseError(Car& c, CarEvents& events, absl::Status error) {
  if (Failing(c, events)) return;
  CarSignal s;
  s.error = std::move(error);
  switch (c.kind()) {
    case CarKind::kSend: events.Raise<SendMachine>(c, SendEvent::kError, s); break;
    case CarKind::kRecv: events.Raise<RecvMachine>(c, RecvEvent::kError, s); break;
    case CarKind::kUnexpected: events.Raise<UnexpectedMachine>(c, UnexpectedEvent::kError, s); break;
    case CarKind::kVertex: events.Raise<VertexMachine>(c, VertexEvent::kError, s); break;
    case CarKind::kRma: events.Raise<RmaCarMachine>(c, RmaCarEvent::kError, s); break;
    case CarKind::kCount: break;
  }
}

// ---- Dependencies ------------------------------------------------------------

void CarActions::Arm(Car& c, const CarSignal&, CarEvents& events) { OfferBuffer(c, events); }

void CarActions::TakeBuffer(Car& c, const CarSignal& s, CarEvents& events) {
  c.spec_.pack_buf = s.buffer;
  c.spec_.pack_size = s.bytes;
  if (--c.deps_pending_ == 0) RaiseDepsMet(c, events);
}

void CarActions::CountDep(Car& c, const CarSignal&, CarEvents& events) {
  if (--c.deps_pending_ == 0) RaiseDepsMet(c, events);
}

// ---- Send side ---------------------------------------------------------------

void CarActions::StartRendezvous(Car& c, const CarSignal&, CarEvents& events) {
  OfferBuffer(c, events);
  CallVc(c, events, &Vc::start_rendezvous, "start_rendezvous");
}

void CarActions::StartData(Car& c, const CarSignal&, CarEvents& events) {
  CallVc(c, events, &Vc::start_data, "start_data");
}

// ---- One-sided ----------------------------------------------------------------

void CarActions::StartRma(Car& c, const CarSignal&, CarEvents& events) {
  CallVc(c, events, &Vc::start_rma, "start_rma");
}

void CarActions::FinishRma(Car& c, const CarSignal&, CarEvents& events) {
  c.bytes_done_ = c.payload_bytes();
  Complete(c, events);
}

// ---- Receive side ------------------------------------------------------------

void CarActions::UnpostAndCancel(Car& c, const CarSignal& s, CarEvents& events) {
  if (c.vc() != nullptr && c.vc()->unpost_recv != nullptr) {
    c.vc()->unpost_recv(c, events);
  }
  CancelCar(c, s, events);
}

void CarActions::SendAck(Car& c, CarEvents& events) {
  if (c.vc() != nullptr && c.vc()->send_ack != nullptr) {
    c.vc()->send_ack(c, events);
  } else if (base::Completion* k = c.spec().counter) {
    k->status.Update(absl::FailedPreconditionError(absl::StrFormat(
        "%s: cannot acknowledge the synchronous send: its VC has no send_ack", Describe(c))));
  }
}

void CarActions::BeginTruncated(Car& c, const CarSignal& s, CarEvents& events) {
  BeginReceive(c, s, events);
  if ((s.proto & kProtoRendezvous) != 0) CallVc(c, events, &Vc::send_cts, "send_cts");
}

void CarActions::SendCts(Car& c, const CarSignal& s, CarEvents& events) {
  BeginReceive(c, s, events);
  CallVc(c, events, &Vc::send_cts, "send_cts");
}

void CarActions::ReceiveEmpty(Car& c, const CarSignal& s, CarEvents& events) {
  BeginReceive(c, s, events);
  CompleteCar(c, s, events);
}

void CarActions::ReleaseDependents(Car& c, CarEvents& events) {
  // A dependent that already failed (another supplier's doing) has no use for it.
  auto release = [&](Car* d) {
    if (d != nullptr && !Failing(*d, events)) RaiseProgress(*d, events);
  };
  release(c.progress_dependent());
  for (Car* next : c.spec().successors) release(next);
}

// UNPACK (and MOP) from the packed buffer the message arrived in. The
// UnpackFails rows took every receive whose unpack would fail to `failed`;
// an error here would be a broken guard, still reported.
bool CarActions::UnpackOrFail(Car& c, CarEvents& events) {
  const absl::Status why = c.UnpackArrived();
  if (why.ok()) return true;
  CarSignal failure;
  failure.error = absl::InternalError(absl::StrCat("UnpackFails let through: ", why.message()));
  FailCar(c, failure, events);
  return false;
}

void CarActions::FinishReceive(Car& c, const CarSignal& s, CarEvents& events) { Finish(c, s, events); }

void CarActions::FailUnpack(Car& c, const CarSignal& s, CarEvents& events) {
  Account(c, s, events);
  CarSignal failure;
  failure.error = c.UnpackArrived();  // names the cut; writes nothing
  if (failure.error.ok()) failure.error = absl::InternalError("UnpackFails saw a cut UnpackArrived did not");
  FailCar(c, failure, events);
}

void CarActions::ReceiveEagerUnpackFails(Car& c, const CarSignal& s, CarEvents& events) {
  BeginReceive(c, s, events);
  c.Land(s.data, s.bytes);
  FailUnpack(c, s, events);
}

void CarActions::FailTruncated(Car& c, const CarSignal& s, CarEvents& events) {
  Account(c, s, events);
  CarSignal failure;
  failure.error = absl::OutOfRangeError(
      absl::StrFormat("message of %d bytes truncated to the %d-byte receive buffer",
                      c.bytes_total_, c.payload_bytes()));
  FailCar(c, failure, events);
}

void CarActions::ReceiveEagerTruncated(Car& c, const CarSignal& s, CarEvents& events) {
  BeginReceive(c, s, events);
  c.Land(s.data, s.bytes);
  FailTruncated(c, s, events);
}

// ---- Unexpected messages -----------------------------------------------------

void CarActions::StashEager(Car& c, const CarSignal& s, CarEvents&) {
  c.bytes_total_ = s.bytes;
  c.proto_ = s.proto;
  c.Land(s.data, s.bytes);
  c.bytes_done_ = s.bytes;
}

void CarActions::DropOversize(Car& c, const CarSignal& s, CarEvents& events) {
  c.bytes_total_ = s.bytes;
  c.proto_ = s.proto;
  CarSignal failure;
  failure.error = absl::ResourceExhaustedError(absl::StrFormat(
      "%d-byte message does not fit the %d-byte temporary buffer", s.bytes, c.spec().pack_size));
  Drop(c, failure, events);
}

void CarActions::NoteEnvelope(Car& c, const CarSignal& s, CarEvents&) {
  c.bytes_total_ = s.bytes;
  c.proto_ = s.proto;
}

void CarActions::HandOff(Car& c, const CarSignal& s, CarEvents& events) {
  Car& recv = *s.peer;
  // Copy what has arrived so far; from now on LandingZone() is the receive's.
  c.bytes_copied_ += recv.Land(c.pack_buf(), c.bytes_done_);
  c.matched_ = &recv;
  CarSignal envelope;
  envelope.bytes = c.bytes_total_;
  envelope.proto = c.proto_;
  envelope.source = c.envelope().rank;
  envelope.tag = c.envelope().tag;
  events.Raise<RecvMachine>(recv, RecvEvent::kEnvelope, envelope);
  if (c.bytes_done_ > 0) {
    CarSignal data;
    data.bytes = c.bytes_done_;
    events.Raise<RecvMachine>(recv, RecvEvent::kData, data);
  }
}

void CarActions::Drop(Car& c, const CarSignal& s, CarEvents&) {
  c.status_ = absl::Status(s.error.code(), absl::StrFormat("%s: %s", Describe(c), s.error.message()));
}

// ---- Vertices ------------------------------------------------------------------

void CarActions::CountDown(Car& c, const CarSignal&, CarEvents&) { --c.preds_pending_; }

void CarActions::Launch(Car& c, const CarSignal&, CarEvents& events) {
  CallVc(c, events, &Vc::launch, "launch");
}

void CarActions::Release(Car& c, const CarSignal& s, CarEvents& events) {
  CountDown(c, s, events);
  Launch(c, s, events);
}

// ---- Endings -------------------------------------------------------------------

absl::StatusCode CarActions::NoteFailure(Car& c, const CarSignal& s) {
  const absl::Status cause =
      s.error.ok() ? absl::UnknownError("failed without a stated cause") : s.error;
  c.status_ = absl::Status(cause.code(), absl::StrFormat("%s: %s", Describe(c), cause.message()));
  if (base::Completion* k = c.spec().counter) k->status.Update(c.status_);
  return cause.code();
}

void CarActions::FailCar(Car& c, const CarSignal& s, CarEvents& events) {
  const absl::StatusCode code = NoteFailure(c, s);
  if (base::Completion* k = c.spec().counter) k->CountDown();
  FailDependents(c, events, code);
}

void CarActions::DrainCar(Car& c, const CarSignal& s, CarEvents& events) {
  FailDependents(c, events, NoteFailure(c, s));
  const Vc* vc = c.vc();
  if (vc != nullptr && vc->drain != nullptr) {
    vc->drain(c, events);
  } else {
    events.Raise<VertexMachine>(c, VertexEvent::kComplete);  // nothing to settle
  }
}

void CarActions::Drained(Car& c, const CarSignal&, CarEvents&) {
  if (base::Completion* k = c.spec().counter) k->CountDown();
}

void CarActions::CancelCar(Car& c, const CarSignal&, CarEvents& events) {
  c.status_ = absl::CancelledError(absl::StrFormat("%s: cancelled", Describe(c)));
  if (base::Completion* k = c.spec().counter) {
    k->status.Update(c.status_);
    k->CountDown();
  }
  FailDependents(c, events, absl::StatusCode::kCancelled);
}

}  // namespace cartage::car
