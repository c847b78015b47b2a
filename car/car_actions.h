// The code on the edges of the CAR machines: every guard and action the
// tables in send_fsm.h, recv_fsm.h, unexpected_fsm.h, vertex_fsm.h and rma_fsm.h name.
// Each table wraps these functions in named fsm::Guard / fsm::Action objects;
// the names are what the diagrams show.
#ifndef CARTAGE_CAR_CAR_ACTIONS_H_
#define CARTAGE_CAR_CAR_ACTIONS_H_

#include "car/car.h"

namespace cartage::car {

// What every CAR machine definition shares: it runs on a Car, its events
// carry a CarSignal, its state is the Car's state byte, its id the Car's id.
struct CarMachineBase {
  using Context = Car;
  using Payload = CarSignal;
  static fsm::StateWord& Cell(Car& c) { return c.state_word(); }
  static uint64_t IdOf(const Car& c) { return c.id(); }
  // A traced transition's subject: context, peer (world rank), tag, bytes;
  // on an envelope or eager event, the tag the message carries.
  static void Subject(const Car& c, const CarSignal& s, fsm::TraceRecord& r);
};

struct CarActions {
  // Raises the error event of c's own machine, once: a CAR that is failing
  // already gets no second one.
  static void RaiseError(Car& c, CarEvents& events, absl::Status error);
  // Whether c's error event waits in `events`.
  static bool ErrorQueued(const Car& c, const CarEvents& events);
  // Whether c ended, its error waits in `events`, or (a vertex) it drains:
  // neither a second error nor a predecessor's completion is raised for it,
  // since either could reach it after it ended (the table states say so,
  // not a flag on the CAR).
  static bool Failing(Car& c, const CarEvents& events);

  // Guards: inline, so that a table's compiled rows test them in line.
  // Buffer or progress dependencies unmet.
  static bool HasDeps(const Car& c, const CarSignal&) { return c.deps_pending_ > 0; }
  // The send fits the eager limit.
  static bool IsEager(const Car& c, const CarSignal&) { return c.payload_bytes() <= c.spec().eager_limit; }
  // A synchronous send.
  static bool IsSync(const Car& c, const CarSignal&) { return c.spec().synchronous; }
  // A CTS saying the receiver read the data across itself.
  static bool ReceiverRead(const Car&, const CarSignal& s) { return (s.proto & kProtoRead) != 0; }
  // The message announced is larger than the buffer.
  static bool Truncates(const Car& c, const CarSignal& s) { return s.bytes > c.payload_bytes(); }
  // An RTS: the data comes later.
  static bool IsRendezvous(const Car&, const CarSignal& s) { return (s.proto & kProtoRendezvous) != 0; }
  // A zero-byte message.
  static bool IsEmpty(const Car&, const CarSignal& s) { return s.bytes == 0; }
  // Not the last bytes.
  static bool MoreToCome(const Car& c, const CarSignal& s) { return c.bytes_done_ + s.bytes < c.bytes_total_; }
  // A vertex can run now.
  static bool AllPredecessorsDone(const Car& c, const CarSignal&) { return c.preds_pending_ == 0; }
  // This predecessor releases it.
  static bool LastPredecessor(const Car& c, const CarSignal&) { return c.preds_pending_ == 1; }
  // A whole eager message fits the temporary buffer.
  static bool FitsTemp(const Car& c, const CarSignal& s) { return s.bytes <= c.spec().pack_size; }
  // A message small enough to wait as a record, whose match needs nothing
  // of its sender (no acknowledgement): car_unexpected's compact.
  static bool Compactable(const Car& c, const CarSignal&) {
    return c.bytes_total() <= kCompactBytes && (c.proto() & kProtoSync) == 0;
  }
  // An announced eager message will not fit.
  static bool Oversize(const Car& c, const CarSignal& s) {
    return (s.proto & kProtoRendezvous) == 0 && s.bytes > c.spec().pack_size;
  }
  // These last bytes cut a reduced element.
  static bool UnpackFails(const Car& c, const CarSignal& s) {
    return c.flags().has(CarFlag::kMop) && c.UnpackCutsAnElement(s.bytes);
  }
  // A synchronous eager message: acknowledge it.
  static bool IsSyncEager(const Car&, const CarSignal& s) {
    return (s.proto & kProtoSync) != 0 && (s.proto & kProtoRendezvous) == 0;
  }
  template <bool (*Also)(const Car&, const CarSignal&)>
  static bool SyncAnd(const Car& c, const CarSignal& s) {           // synchronous eager, and Also
    return IsSyncEager(c, s) && Also(c, s);
  }

  // Dependencies.
  static void Arm(Car& c, const CarSignal& s, CarEvents& events);         // offer buffer, then wait
  static void TakeBuffer(Car& c, const CarSignal& s, CarEvents& events);  // buffer dep satisfied
  static void CountDep(Car& c, const CarSignal& s, CarEvents& events);    // progress dep satisfied
  // Send side. StartEager in line: a send's post compiles its row at the
  // call (runtime's PostNow), where an action's call and frame cost a send
  // about 15 instructions. A supplier of a packed buffer offers it first.
  ABSL_ATTRIBUTE_ALWAYS_INLINE static void StartEager(Car& c, const CarSignal&, CarEvents& events) {
    if (c.flags().has(CarFlag::kSupplyPackedBuf)) [[unlikely]] OfferBuffer(c, events);
    CallVc(c, events, &Vc::start_eager, "start_eager");
  }
  static void StartRendezvous(Car& c, const CarSignal& s, CarEvents& events);
  static void StartData(Car& c, const CarSignal& s, CarEvents& events);
  // Receive side. PostToMatcher and ReceiveEager in line, as StartEager:
  // a receive's post and an eager message's landing compile their rows at
  // the call.
  ABSL_ATTRIBUTE_ALWAYS_INLINE static void PostToMatcher(Car& c, const CarSignal&, CarEvents& events) {
    if (c.flags().has(CarFlag::kSupplyPackedBuf)) [[unlikely]] OfferBuffer(c, events);
    CallVc(c, events, &Vc::post_recv, "post_recv");
  }
  static void UnpostAndCancel(Car& c, const CarSignal& s, CarEvents& events);
  ABSL_ATTRIBUTE_ALWAYS_INLINE static void BeginReceive(Car& c, const CarSignal& s, CarEvents&) {
    c.bytes_total_ = s.bytes;
    c.proto_ = s.proto;
    if (base::Completion* k = c.spec().counter) {
      k->source = s.source;
      k->tag = s.tag;
    }
  }
  static void BeginTruncated(Car& c, const CarSignal& s, CarEvents& events);
  static void SendCts(Car& c, const CarSignal& s, CarEvents& events);
  static void ReceiveEmpty(Car& c, const CarSignal& s, CarEvents& events);
  static void Account(Car& c, const CarSignal& s, CarEvents&) { c.bytes_done_ += s.bytes; }
  static void FinishReceive(Car& c, const CarSignal& s, CarEvents& events);
  static void FailTruncated(Car& c, const CarSignal& s, CarEvents& events);
  ABSL_ATTRIBUTE_ALWAYS_INLINE static void ReceiveEager(Car& c, const CarSignal& s, CarEvents& events) {
    BeginReceive(c, s, events);  // the whole message
    c.LandInLine(s.data, s.bytes);
    Finish(c, s, events);
  }
  static void ReceiveEagerTruncated(Car& c, const CarSignal& s, CarEvents& events);  // what fits, then fail
  static void FailUnpack(Car& c, const CarSignal& s, CarEvents& events);             // account, fail naming the cut
  static void ReceiveEagerUnpackFails(Car& c, const CarSignal& s, CarEvents& events);  // land, then FailUnpack
  // A synchronous eager message's ACK to its sender, then Then: the rows
  // guarded by SyncAnd<...> take these, whatever becomes of the receive.
  template <void (*Then)(Car&, const CarSignal&, CarEvents&)>
  static void AckThen(Car& c, const CarSignal& s, CarEvents& events) {
    SendAck(c, events);
    Then(c, s, events);
  }
  static void SendAck(Car& c, CarEvents& events);
  // Unexpected messages.
  static void NoteEnvelope(Car& c, const CarSignal& s, CarEvents& events);
  static void HandOff(Car& c, const CarSignal& s, CarEvents& events);
  static void Drop(Car& c, const CarSignal& s, CarEvents& events);
  static void StashEager(Car& c, const CarSignal& s, CarEvents& events);    // a whole message into the temp buffer
  static void DropOversize(Car& c, const CarSignal& s, CarEvents& events);  // it does not fit: dropped, named
  // Vertices.
  static void CountDown(Car& c, const CarSignal& s, CarEvents& events);
  static void Launch(Car& c, const CarSignal& s, CarEvents& events);
  static void Release(Car& c, const CarSignal& s, CarEvents& events);  // CountDown, then Launch
  // One-sided CARs: handed to the VC's start_rma; once the method says the
  // data arrived (FinishRma), all of it counts as moved.
  static void StartRma(Car& c, const CarSignal& s, CarEvents& events);
  static void FinishRma(Car& c, const CarSignal& s, CarEvents& events);
  // Endings shared by every machine. CompleteCar in line, as StartEager:
  // a send's local completion follows its post in the same piece of code.
  ABSL_ATTRIBUTE_ALWAYS_INLINE static void CompleteCar(Car& c, const CarSignal&, CarEvents& events) {
    Complete(c, events);
  }
  static void FailCar(Car& c, const CarSignal& s, CarEvents& events);
  static void CancelCar(Car& c, const CarSignal& s, CarEvents& events);
  // A vertex failed through a predecessor: its status and the schedule's
  // error now, its dependents failed now; then its VC's drain, and
  // Drained counts it finished once the drain completes.
  static void DrainCar(Car& c, const CarSignal& s, CarEvents& events);
  static void Drained(Car& c, const CarSignal& s, CarEvents& events);
  // The CAR's status from the signal's error, named after the CAR, and its
  // counter's first error; returns the code.
  static absl::StatusCode NoteFailure(Car& c, const CarSignal& s);

 private:
  // Calls one operation of c's VC, or fails the CAR if the VC lacks it. In
  // line in every action, so that each operation is called from a site of
  // its own, whose target the CPU predicts apart (cartage-bench bcast 8 B).
  ABSL_ATTRIBUTE_ALWAYS_INLINE static void CallVc(Car& c, CarEvents& events, void (*Vc::*op)(Car&, CarEvents&),
                                                  absl::string_view op_name) {
    const Vc* vc = c.vc();
    if (vc == nullptr || vc->*op == nullptr) [[unlikely]] return NoOperation(c, events, op_name);
    (vc->*op)(c, events);
  }
  // A VC without the operation a CAR needs: the CAR fails.
  [[gnu::cold, gnu::noinline]] static void NoOperation(Car& c, CarEvents& events, absl::string_view op_name);
  // A supplier's offer of its packed buffer to its consumer, once posted.
  static void OfferBuffer(Car& c, CarEvents& events);
  // CompleteCar's body, in line where a receive ends (FinishReceive): the
  // counter counts down, and what waited on the CAR may go.
  ABSL_ATTRIBUTE_ALWAYS_INLINE static void Complete(Car& c, CarEvents& events) {
    if (!c.status_.ok()) [[unlikely]] c.status_ = absl::OkStatus();  // a fresh CAR's is
    if (base::Completion* k = c.spec().counter) {
      k->bytes += c.kind() == CarKind::kSend ? c.payload_bytes() : std::min(c.bytes_done_, c.payload_bytes());
      k->CountDown();
    }
    if (c.progress_dependent() != nullptr || !c.spec().successors.empty()) [[unlikely]] ReleaseDependents(c, events);
  }
  // Complete's release of the CARs that wait on c.
  static void ReleaseDependents(Car& c, CarEvents& events);
  // FinishReceive's body, in line where an eager message lands (ReceiveEager).
  ABSL_ATTRIBUTE_ALWAYS_INLINE static void Finish(Car& c, const CarSignal& s, CarEvents& events) {
    Account(c, s, events);
    if (c.flags().has(CarFlag::kUnpack) && !UnpackOrFail(c, events)) return;
    Complete(c, events);
  }
  // FinishReceive's unpack from the packed buffer; false (the CAR failed)
  // where it cut an element.
  static bool UnpackOrFail(Car& c, CarEvents& events);
};

}  // namespace cartage::car

#endif  // CARTAGE_CAR_CAR_ACTIONS_H_
