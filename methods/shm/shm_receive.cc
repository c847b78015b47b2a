// The shm method's reading side: progress (the sweep over the probes,
// holding an envelope nothing matches yet, the backlog of sends waiting for
// room), blocking, and the records that arrive. shm_method.cc has set-up,
// writing and the VC operations.
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "methods/common/wire_cars.h"
#include "methods/shm/shm_method.h"
#include "methods/shm/shm_wire.h"

namespace cartage::methods::shm {

using car::Car;
using car::CarSignal;
using car::RecvEvent;
using car::RecvMachine;
using car::SendEvent;
using car::SendMachine;
using car::SendState;

// ---- Progress: the sweep, holding, the backlog -----------------------------------

int ShmMethod::Progress() {
  // A ring with nothing new costs one load and a compare (its probe), and a
  // sweep that finds nothing is this loop alone, with no call in it and so
  // no registers saved and restored: a waiting rank sweeps many times a
  // message. The first ring that shows a record hands the rest of the sweep
  // to Sweep. (Forcing ReadRing and RetryBacklog themselves out of line cost
  // a 2-rank 1 MiB allreduce a quarter more time.)
  if (held_ > 0 && (hold_->postings != held_postings_ || !hold_->allowed)) [[unlikely]] Unhold();
  for (Probe* p = probes_.data(), *end = p + probes_.size(); p != end; ++p) {
    if (p->Shows()) [[unlikely]] return Sweep(p);
  }
  return backlog_ > 0 ? RetryBacklog() : 0;
}

void ShmMethod::Unhold() {
  for (Probe& p : probes_) {
    if (!p.held) continue;
    p.held = false;
    p.Aim(readers_[static_cast<std::size_t>(p.peer)]);
  }
  held_ = 0;
}

bool ShmMethod::MayHold(const Probe& probe) const {
  return hold_ != nullptr && hold_->allowed && probe.holds < kMaxHolds;
}

void ShmMethod::Hold(Probe& probe, const RingReader& r) {
  probe.held = true;
  ++probe.holds;
  probe.stamp = r.stamp_after();
  probe.expected = r.expected_after();
  if (held_++ == 0) held_postings_ = hold_->postings;
}

// In line in Sweep, its one caller.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline int ShmMethod::ReadRing(Probe& probe) {
  const int p = probe.peer;
  RingReader& r = readers_[static_cast<std::size_t>(p)];
  if (probe.held) {  // something came behind the record it holds: read on
    probe.held = false;
    --held_;
  }
  RingRecord rec;
  int work = 0;
  // After the first record, an envelope nobody waits for yet stays in the
  // ring until the next sweep: its receive is often posted by then. With
  // no receive posted at all it stays unread (a bcast's stream, where the
  // next message is in the ring before its receive is posted). The loop
  // ends on a Peek (32 records at most), which, finding the ring empty,
  // publishes the head for a producer waiting for room: the probe alone
  // will not look again until a record comes. The first record, an
  // envelope nothing matches, may be held instead (Hold: unread until a
  // receive is posted or a record comes behind it). The ring then holds that
  // one record (a quarter of the ring at most) and less than an eighth
  // unpublished, so the producer always has room for the next record, which
  // ends the hold.
  for (int k = 0; r.Peek(&rec) && k < 32; ++k) {
    if (k > 0 && (rec.type == kRecEager || rec.type == kRecRts) && !host_->AnyPosted()) break;
    const Defer defer = k > 0 ? Defer::kYes : MayHold(probe) ? Defer::kHold : Defer::kNo;
    if (!Handle(p, rec, defer)) {
      if (k > 0) break;
      Hold(probe, r);  // the first record, unmatched: left where it lies
      return work;
    }
    r.Pop();
    ++work;
  }
  if (work > 0) probe.holds = 0;  // the record it held (if any) is read
  probe.Aim(r);
  if (r.TakeRoomWanted()) Wake(p);  // its sends wait for the room just read
  return work;
}

int ShmMethod::Sweep(Probe* from) {
  int work = 0;
  for (Probe* p = from, *end = probes_.data() + probes_.size(); p != end; ++p) {
    if (p->Shows()) work += ReadRing(*p);
  }
  if (backlog_ > 0) work += RetryBacklog();
  return work;
}

int ShmMethod::RetryBacklog() {
  int work = 0;
  for (int p = 0; backlog_ > 0 && p < size_; ++p) {
    const auto i = static_cast<std::size_t>(p);
    while (!control_[i].empty() && TryControl(p, control_[i].front())) {
      control_[i].pop_front();
      --backlog_;
      ++work;
    }
    while (Car* c = parked_[i].front()) {
      const bool eager = SendMachine::StateOf(*c) == SendState::kEagerQueued;  // else rts_queued
      if (!(eager ? TryEager(*c) : TryRts(*c))) break;
      parked_[i].Unlink(c);
      --backlog_;
      ++work;
      (void)SendMachine::Dispatch(*c, SendEvent::kSent);
      if (eager) {
        (void)SendMachine::Dispatch(*c, SendEvent::kLocalDone);  // copied out: the buffer is free
        wire_.FinishIfFinal(*c);
      }
    }
    while (Car* c = streams_[i].front()) {
      if (!PumpStream(*c)) break;
      streams_[i].Unlink(c);
      --backlog_;
      ++work;
      (void)SendMachine::Dispatch(*c, SendEvent::kLocalDone);
      wire_.FinishIfFinal(*c);
    }
  }
  return work;
}

void ShmMethod::Block(int timeout_us) {
  RankBlock& me = segment_->block(rank_);
  const uint32_t seen = me.doorbell.load(std::memory_order_acquire);
  me.sleeping.store(1, std::memory_order_seq_cst);
  bool ready = false;
  for (std::size_t i = 0; i < probes_.size() && !ready; ++i) ready = probes_[i].Shows();
  // Records waiting for room in a ring: its reader wakes this rank once it
  // has read (else this rank would sleep out the timeout with room there).
  for (int p = 0; backlog_ > 0 && p < size_ && !ready; ++p) {
    const auto i = static_cast<std::size_t>(p);
    if (!parked_[i].empty() || !control_[i].empty() || !streams_[i].empty()) ready = writers_[i].WantRoom();
  }
  if (!ready) {
    timespec ts{timeout_us / 1'000'000, static_cast<long>(timeout_us % 1'000'000) * 1000};
    ::syscall(SYS_futex, &me.doorbell, FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
  me.sleeping.store(0, std::memory_order_relaxed);
}

void ShmMethod::Wake() {
  // This rank's own doorbell: a Block that read it before this returns at once.
  RankBlock& me = segment_->block(rank_);
  me.doorbell.fetch_add(1, std::memory_order_release);
  ::syscall(SYS_futex, &me.doorbell, FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

int ShmMethod::RanksOnThisCpu() {
  const int cpu = ::sched_getcpu();
  if (cpu < 0) return 0;
  RankBlock& me = segment_->block(rank_);
  if (me.cpu.load(std::memory_order_relaxed) != cpu) me.cpu.store(cpu, std::memory_order_relaxed);
  int n = 0;
  for (int p = 0; p < size_; ++p) {
    if (segment_->Holds(p)) n += segment_->block(p).cpu.load(std::memory_order_relaxed) == cpu ? 1 : 0;
  }
  return n;
}

bool ShmMethod::Handle(int source, const RingRecord& rec, Defer defer) {
  if (!broken_[static_cast<std::size_t>(source)].ok()) return true;
  switch (rec.type) {
    case kRecEager: return OnEnvelope<false>(source, rec, defer);
    case kRecRts: return OnEnvelope<true>(source, rec, defer);
    case kRecCts: OnCts(source, rec); break;
    case kRecData: OnData(source, rec); break;
    case kRecAck: OnAck(source, rec); break;
    default: Malformed(source, absl::StrFormat("unknown record type %d", rec.type));
  }
  return true;
}

void ShmMethod::Malformed(int source, absl::string_view what) {
  FailPeer(source, absl::DataLossError(
                       absl::StrFormat("malformed wire record from rank %d: %s", source, what)));
}

template <bool kRendezvous>
bool ShmMethod::OnEnvelope(int source, const RingRecord& rec, Defer defer) {
  // A malformed record is consumed: it fails the peer.
  auto malformed = [&](absl::string_view what) {
    Malformed(source, what);
    return true;
  };
  MatchHeader h;
  const std::size_t body = kRendezvous ? sizeof(RtsBody) : 0;
  if (rec.len < sizeof(h) + body) return malformed("short envelope");
  std::memcpy(&h, rec.payload, sizeof(h));
  if (!kRendezvous && h.length != rec.len - sizeof(h)) {
    return malformed(absl::StrFormat("eager length %d in a %d-byte record", h.length, rec.len));
  }
  RtsBody rts{};
  if constexpr (kRendezvous) std::memcpy(&rts, rec.payload + sizeof(h), sizeof(rts));
  if (h.tag < 0) return malformed(absl::StrFormat("negative tag %d", h.tag));
  const uint32_t proto = kRendezvous ? (h.proto | car::kProtoRendezvous) : (h.proto & ~car::kProtoRendezvous);
  // The CAR taking this message gets fresh method state naming its sender.
  absl::StatusOr<Car*> c = DeliverEnvelope(
      *host_, {h.context, source, h.tag}, h.length, proto, kRendezvous ? nullptr : rec.payload + sizeof(h),
      [&](Car& taker) {
        Bind(taker, source);
        ShmCarState& s = StateOf(taker);
        s.wire.remote = h.sender_handle;
        s.remote_address = rts.address;
      },
      // Asked only of an envelope nothing matches: a hold needs nothing
      // behind it yet (reading the next record's line costs a transfer).
      [&] {
        return defer == Defer::kYes ||
               (defer == Defer::kHold && !readers_[static_cast<std::size_t>(source)].ShowsAfter());
      });
  if (!c.ok()) {
    FailPeer(source, c.status());
    return true;
  }
  if (*c == nullptr) return false;  // deferred: stays in the ring
  wire_.FinishIfFinal(**c);
  return true;
}

template <class Body>
bool ShmMethod::ReadBody(int source, const RingRecord& rec, absl::string_view what, Body* out) {
  if (rec.len < sizeof(Body)) {
    Malformed(source, absl::StrCat("short ", what));
    return false;
  }
  std::memcpy(out, rec.payload, sizeof(Body));
  return true;
}

void ShmMethod::OnCts(int source, const RingRecord& rec) {
  CtsBody b;
  if (!ReadBody(source, rec, "CTS", &b)) return;
  Car* c = wire_.CtsFor(source, b.sender_handle);
  if (c == nullptr) return Malformed(source, "CTS for an unknown send");
  EndRts(*c);
  if (b.copied == 2) {
    DispatchError(*c, absl::UnavailableError(
                          absl::StrFormat("rank %d could not read the data (process_vm_readv failed)", source)));
    wire_.FinishIfFinal(*c);
    return;
  }
  wire_.OnCts(*c, b.receiver_handle, /*read=*/b.copied == 1);  // 1: the receiver read it itself (CMA)
}

void ShmMethod::OnData(int source, const RingRecord& rec) {
  DataHeader h;
  if (!ReadBody(source, rec, "DATA", &h)) return;
  Car* r = wire_.Lookup(h.receiver_handle, car::CarKind::kRecv, source);
  if (r == nullptr) return Malformed(source, "DATA for an unknown receive");
  if (h.offset != r->bytes_done()) {
    return Malformed(source, absl::StrFormat("DATA at offset %d, expected %d", h.offset, r->bytes_done()));
  }
  const std::size_t n = rec.len - sizeof(h);
  r->Land(rec.payload + sizeof(h), n);
  if (ShmCarState& rs = StateOf(*r); rs.cts_ns != 0 && h.offset + n == r->bytes_total()) {
    choosers_[static_cast<std::size_t>(source)].ObservePipelined(r->bytes_total(), rs.cts_ns, NowNs());
    rs.cts_ns = 0;
  }
  CarSignal d;
  d.bytes = n;
  (void)RecvMachine::Dispatch(*r, RecvEvent::kData, d);
  wire_.FinishIfFinal(*r);
}

void ShmMethod::OnAck(int source, const RingRecord& rec) {
  AckBody b;
  if (!ReadBody(source, rec, "ACK", &b)) return;
  if (!wire_.OnAck(source, b.sender_handle)) Malformed(source, "ACK for an unknown send");
}

}  // namespace cartage::methods::shm
