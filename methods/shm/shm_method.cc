#include "methods/shm/shm_method.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "car/car_actions.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "car/unexpected_fsm.h"
#include "fsm/check.h"
#include "methods/common/host_keys.h"
#include "methods/common/wire_cars.h"
#include "methods/shm/shm_wire.h"

namespace cartage::methods::shm {

using car::Car;
using car::CarSignal;
using car::CarStep;
using car::RecvEvent;
using car::RecvMachine;
using car::SendEvent;
using car::SendMachine;

namespace {
// The steady clock in nanoseconds (never 0: it counts from boot).
uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}
}  // namespace

// ---- Set-up ------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<ShmMethod>> ShmMethod::Create(Exchange& ex, MethodHost* host,
                                                             const ShmOptions& options) {
  auto m = std::unique_ptr<ShmMethod>(new ShmMethod());
  m->options_ = options;
  CARTAGE_ASSIGN_OR_RETURN(const bool oversubscribed, JobOversubscribed(ex.size()));
  CARTAGE_RETURN_IF_ERROR(m->options_.ForJob(ex.size(), oversubscribed));
  m->caps_ = Caps(m->options_);
  m->host_ = host;
  m->hold_ = host != nullptr ? host->Holding() : nullptr;
  m->rank_ = ex.rank();
  m->size_ = ex.size();
  CARTAGE_ASSIGN_OR_RETURN(m->segment_, ShmSegment::Create(ex, m->options_.ring_bytes));
  const auto n = static_cast<std::size_t>(m->size_);
  m->writers_.resize(n);
  m->readers_.resize(n);
  m->cma_.assign(n, false);
  m->choosers_.assign(n, CopyChooser());
  m->pids_.assign(n, 0);
  m->broken_.assign(n, absl::OkStatus());
  m->parked_.resize(n);
  m->streams_.resize(n);
  m->control_.resize(n);
  m->vcs_.resize(n);
  for (car::Carrier& vc : m->vcs_) {
    vc.name = "shm";
    host->InstallAgentOps(vc);
    vc.start_eager = &StartEager;
    vc.start_rendezvous = &StartRendezvous;
    vc.start_data = &StartData;
    vc.send_cts = &SendCts;
    vc.send_ack = &SendAck;
  }
  for (ControlQueue& q : m->control_) q.items.reserve(256);
  m->handles_.Reserve(4096);
  using DirectStore = ShmOptions::DirectStore;
  const uint64_t slow_ticks =
      options.direct_store == DirectStore::kAuto ? static_cast<uint64_t>(120.0 * internal::TicksPerNs()) : 0;
  for (int p = 0; p < m->size_; ++p) {
    RingWriter& w = m->writers_[static_cast<std::size_t>(p)];
    w = RingWriter(m->segment_->ring(m->rank_, p));
    w.set_window(ShmOptions::kRingBytes);
    if (options.direct_store == DirectStore::kYes) w.set_direct(true);
    if (options.direct_store == DirectStore::kAuto) w.set_direct_auto(slow_ticks);
    RingReader& r = m->readers_[static_cast<std::size_t>(p)];
    r = RingReader(m->segment_->ring(p, m->rank_));
    if (p != m->rank_) {  // its own messages go by the self method
      Probe& probe = m->probes_.emplace_back();
      probe.peer = p;
      probe.Aim(r);
    }
    RankBlock& b = m->segment_->block(p);
    m->pids_[static_cast<std::size_t>(p)] = b.pid.load(std::memory_order_acquire);
    if (!options.cma) continue;
    // CMA works with this peer if we can read its probe word.
    uint64_t got = 0;
    iovec local{&got, sizeof(got)};
    iovec remote{reinterpret_cast<void*>(b.probe_address), sizeof(got)};
    m->cma_[static_cast<std::size_t>(p)] =
        ::process_vm_readv(m->pids_[static_cast<std::size_t>(p)], &local, 1, &remote, 1, 0) ==
            static_cast<ssize_t>(sizeof(got)) &&
        got == b.probe_value;
  }
  // One copy for a rendezvous message only where the probe reached every
  // other rank (it does for all or none where one user runs the job).
  for (int p = 0; p < m->size_; ++p) {
    if (p != m->rank_ && !m->cma_[static_cast<std::size_t>(p)]) m->caps_.single_copy = false;
  }
  return m;
}

ShmMethod::~ShmMethod() = default;

Capabilities ShmMethod::Caps(const ShmOptions& o) {
  Capabilities c;
  c.eager_limit = o.eager_limit;
  c.max_message = std::numeric_limits<uint64_t>::max();
  c.reach = Reach::kHost;
  c.single_copy = o.cma;  // CMA; an open method says so only where its probe reached every peer
  return c;
}

const Descriptor kDescriptor{
    "shm", "the other ranks on this host: lock-free rings, eager records, pipelined or CMA rendezvous",
    &CapsFromEnvironment<ShmMethod, ShmOptions>, &Params, &OpenFromEnvironment<ShmMethod, ShmOptions>};

void ShmMethod::Bind(Car& c, int peer) {
  ShmCarState& s = *new (c.method_private()) ShmCarState();
  s.method = this;
  s.peer = peer;
}

void ShmMethod::Close() {
  segment_->block(rank_).finalized.store(1, std::memory_order_release);
}

bool ShmMethod::PeerGone(int peer) {
  if (peer == rank_) return false;
  if (segment_->block(peer).finalized.load(std::memory_order_acquire) != 0) return true;
  return ProcessGone(pids_[static_cast<std::size_t>(peer)]);
}

// ---- Writing -----------------------------------------------------------------

void ShmMethod::Wake(int peer) {
  // No fence here: a waiter that misses this wake-up sleeps at most one
  // futex timeout (Block), and only after it has spun and yielded.
  RankBlock& b = segment_->block(peer);
  if (b.sleeping.load(std::memory_order_relaxed) != 0) {
    b.doorbell.fetch_add(1, std::memory_order_release);
    ::syscall(SYS_futex, &b.doorbell, FUTEX_WAKE, 1, nullptr, nullptr, 0);
  }
}

inline void ShmMethod::CommitTo(int peer, uint16_t type, RingWriter::Order order) {
  const auto i = static_cast<std::size_t>(peer);
  writers_[i].Commit(type, order);
  writers_[i].AfterCommit(readers_[i].consumed());
}

bool ShmMethod::TryEager(Car& c) {
  ShmCarState& s = StateOf(c);
  const uint64_t len = c.payload_bytes();
  std::byte* p = writers_[static_cast<std::size_t>(s.peer)].Begin(sizeof(MatchHeader) + len);
  if (p == nullptr) return false;
  const car::Envelope& e = c.envelope();
  const MatchHeader h{e.context_id, e.tag, len, s.local_handle,
                      c.spec().synchronous ? car::kProtoSync : car::kProtoEager, 0};
  std::memcpy(p, &h, sizeof(h));
  c.Gather(0, p + sizeof(h), len);  // packs a non-contiguous segment straight into the ring
  CommitTo(s.peer, kRecEager);
  Wake(s.peer);
  return true;
}

bool ShmMethod::TryRts(Car& c) {
  ShmCarState& s = StateOf(c);
  std::byte* p = writers_[static_cast<std::size_t>(s.peer)].Begin(sizeof(MatchHeader) + sizeof(RtsBody));
  if (p == nullptr) return false;
  const car::Envelope& e = c.envelope();
  const uint32_t proto = car::kProtoRendezvous | (c.spec().synchronous ? uint32_t{car::kProtoSync} : 0u);
  const MatchHeader h{e.context_id, e.tag, c.payload_bytes(), s.local_handle, proto, 0};
  // A non-contiguous message announces no address: the receiver cannot read
  // it in one copy (CMA) and asks for the pipelined stream instead.
  const RtsBody body{reinterpret_cast<uint64_t>(c.ContiguousSource())};
  std::memcpy(p, &h, sizeof(h));
  std::memcpy(p + sizeof(h), &body, sizeof(body));
  // The receiver may read the buffer in place (CMA): its bytes go first.
  CommitTo(s.peer, kRecRts, RingWriter::Order::kEarlierStores);
  Wake(s.peer);
  return true;
}

bool ShmMethod::TryControl(int peer, const Control& k) {
  RingWriter& w = writers_[static_cast<std::size_t>(peer)];
  switch (k.type) {
    case kRecCts: {
      std::byte* p = w.Begin(sizeof(CtsBody));
      if (p == nullptr) return false;
      const CtsBody b{k.a, k.b, k.c, 0};
      std::memcpy(p, &b, sizeof(b));
      break;
    }
    case kRecAck: {
      std::byte* p = w.Begin(sizeof(AckBody));
      if (p == nullptr) return false;
      const AckBody b{k.a};
      std::memcpy(p, &b, sizeof(b));
      break;
    }
    default: return true;
  }
  CommitTo(peer, k.type);
  Wake(peer);
  return true;
}

void ShmMethod::SendControl(int peer, const Control& k) {
  auto& backlog = control_[static_cast<std::size_t>(peer)];
  if (backlog.empty() && TryControl(peer, k)) return;
  backlog.push_back(k);
  ++backlog_;
}

bool ShmMethod::PumpStream(Car& c) {
  ShmCarState& s = StateOf(c);
  RingWriter& w = writers_[static_cast<std::size_t>(s.peer)];
  const uint64_t total = c.payload_bytes();
  const std::size_t chunk_max = w.max_payload() - sizeof(DataHeader);
  while (s.offset < total) {
    const std::size_t chunk = static_cast<std::size_t>(std::min<uint64_t>(chunk_max, total - s.offset));
    std::byte* p = w.Begin(sizeof(DataHeader) + chunk);
    if (p == nullptr) return false;
    const DataHeader h{s.remote_handle, s.offset};
    std::memcpy(p, &h, sizeof(h));
    c.Gather(s.offset, p + sizeof(h), chunk);
    CommitTo(s.peer, kRecData);
    s.offset += chunk;
  }
  Wake(s.peer);
  return true;
}

// ---- Carrier operations ------------------------------------------------------

void ShmMethod::FailAtOnce(Car& c, CarStep& step) {
  ShmCarState& s = StateOf(c);
  car::CarActions::RaiseError(c, step, s.method->broken_[static_cast<std::size_t>(s.peer)]);
}

void ShmMethod::Park(Car& c, ParkedAs why) {
  ShmCarState& s = StateOf(c);
  s.parked = why;
  parked_[static_cast<std::size_t>(s.peer)].PushBack(&c);
  ++backlog_;
}

void ShmMethod::StartEager(Car& c, CarStep& step) {
  ShmCarState& s = StateOf(c);
  ShmMethod& m = *s.method;
  if (c.spec().synchronous) s.local_handle = m.handles_.Insert(&c);
  if (m.parked_[static_cast<std::size_t>(s.peer)].empty() && m.TryEager(c)) {
    step.Raise<SendMachine>(c, SendEvent::kLocalDone);  // copied out: the buffer is free
    return;
  }
  m.Park(c, kParkedEager);
}

void ShmMethod::StartRendezvous(Car& c, CarStep&) {
  ShmCarState& s = StateOf(c);
  ShmMethod& m = *s.method;
  s.local_handle = m.handles_.Insert(&c);
  s.awaiting_cts = true;
  ++m.rts_out_;
  if (m.parked_[static_cast<std::size_t>(s.peer)].empty() && m.TryRts(c)) return;
  m.Park(c, kParkedRts);
}

void ShmMethod::StartData(Car& c, CarStep& step) {
  ShmCarState& s = StateOf(c);
  ShmMethod& m = *s.method;
  if (s.remote_handle == 0) {  // the receiver already copied it (CMA)
    step.Raise<SendMachine>(c, SendEvent::kLocalDone);
    return;
  }
  if (m.streams_[static_cast<std::size_t>(s.peer)].empty() && m.PumpStream(c)) {
    step.Raise<SendMachine>(c, SendEvent::kLocalDone);
    return;
  }
  m.streams_[static_cast<std::size_t>(s.peer)].PushBack(&c);
  ++m.backlog_;
}

void ShmMethod::SendCts(Car& c, CarStep& step) {
  ShmCarState& s = StateOf(c);
  ShmMethod& m = *s.method;
  const auto peer = static_cast<std::size_t>(s.peer);
  const uint64_t total = c.bytes_total();
  const bool can_cma = m.cma_[peer] && s.remote_address != 0 && c.LandsContiguous();
  bool cma = can_cma && total >= m.CmaMin();
  // Between the two minimums, the way that was faster lately (timed here).
  const bool timed = can_cma && !cma && m.options_.cma_choose_min > 0 && total >= m.options_.cma_choose_min;
  if (timed) cma = m.choosers_[peer].UseCma();
  if (!cma) {
    s.local_handle = m.handles_.Insert(&c);
    s.cts_ns = timed ? NowNs() : 0;
    m.SendControl(s.peer, {kRecCts, s.remote_handle, s.local_handle, 0});
    return;
  }
  // Single copy: read straight from the sender into the receive buffer.
  const uint64_t start_ns = timed ? NowNs() : 0;
  std::span<std::byte> zone = c.LandingZone();
  uint64_t want = std::min<uint64_t>(total, zone.size());
  uint64_t done = 0;
  while (done < want) {
    iovec local{zone.data() + done, want - done};
    iovec remote{reinterpret_cast<void*>(s.remote_address + done), want - done};
    const ssize_t got = ::process_vm_readv(m.pids_[peer], &local, 1, &remote, 1, 0);
    if (got <= 0) {
      const absl::Status why = absl::UnavailableError(absl::StrFormat(
          "process_vm_readv from rank %d failed: %s", s.peer, std::strerror(errno)));
      m.SendControl(s.peer, {kRecCts, s.remote_handle, 0, 2});
      car::CarActions::RaiseError(c, step, why);
      return;
    }
    done += static_cast<uint64_t>(got);
  }
  if (timed) m.choosers_[peer].Observe(/*cma=*/true, want, NowNs() - start_ns);
  m.SendControl(s.peer, {kRecCts, s.remote_handle, 0, 1});
  CarSignal data;
  data.bytes = total;  // all of it is accounted; what did not fit was not read
  step.Raise<RecvMachine>(c, RecvEvent::kData, data);
}

void ShmMethod::SendAck(Car& c, CarStep&) {
  ShmCarState& s = StateOf(c);
  s.method->SendControl(s.peer, {kRecAck, s.remote_handle, 0, 0});
}

// ---- Progress ----------------------------------------------------------------

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

bool ShmMethod::MayHold(Probe& probe, const RingReader& r) {
  if (hold_ == nullptr || !hold_->allowed) return false;
  if (probe.hold_at != r.consumed()) {
    probe.hold_at = r.consumed();
    probe.holds = 0;
  }
  return probe.holds < kMaxHolds;
}

void ShmMethod::Hold(Probe& probe, const RingReader& r) {
  probe.held = true;
  ++probe.holds;
  probe.stamp = r.stamp_after();
  probe.expected = r.expected_after();
  if (held_++ == 0) held_postings_ = hold_->postings;
}

int ShmMethod::Sweep(Probe* from) {
  int work = 0;
  for (Probe* p = from, *end = probes_.data() + probes_.size(); p != end; ++p) {
    if (p->Shows()) work += ReadRing(*p);
  }
  if (backlog_ > 0) work += RetryBacklog();
  return work;
}

int ShmMethod::ReadRing(Probe& probe) {
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
  // next message is in the ring before its receive is posted: reading it
  // only to leave it cost a few dozen instructions a message). The loop
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
    const Defer defer = k > 0 ? Defer::kYes : MayHold(probe, r) ? Defer::kHold : Defer::kNo;
    if (!Handle(p, rec, defer)) {
      if (k > 0) break;
      Hold(probe, r);  // the first record, unmatched: left where it lies
      return work;
    }
    r.Pop();
    ++work;
  }
  probe.Aim(r);
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
      ShmCarState& s = StateOf(*c);
      const bool sent = s.parked == kParkedEager ? TryEager(*c) : TryRts(*c);
      if (!sent) break;
      parked_[i].Unlink(c);
      --backlog_;
      ++work;
      if (s.parked == kParkedEager) {
        s.parked = kNotParked;
        (void)SendMachine::Dispatch(*c, SendEvent::kLocalDone);
        FinishIfFinal(*c);
      } else {
        s.parked = kNotParked;
      }
    }
    while (Car* c = streams_[i].front()) {
      if (!PumpStream(*c)) break;
      streams_[i].Unlink(c);
      --backlog_;
      ++work;
      (void)SendMachine::Dispatch(*c, SendEvent::kLocalDone);
      FinishIfFinal(*c);
    }
  }
  return work;
}

void ShmMethod::FinishIfFinal(Car& c) { ForgetIfFinal(handles_, c, StateOf(c).local_handle); }

void ShmMethod::EndRts(Car& c) {
  ShmCarState& s = StateOf(c);
  if (!s.awaiting_cts) return;
  s.awaiting_cts = false;
  --rts_out_;
}

std::size_t ShmMethod::CmaMin() const {
  if (options_.cma_min_set || rts_out_ == 0) return options_.cma_min;
  return std::min(options_.cma_min, options_.cma_min_exchange);
}

void ShmMethod::Block(int timeout_us) {
  RankBlock& me = segment_->block(rank_);
  const uint32_t seen = me.doorbell.load(std::memory_order_acquire);
  me.sleeping.store(1, std::memory_order_seq_cst);
  bool ready = false;
  for (std::size_t i = 0; i < probes_.size() && !ready; ++i) ready = probes_[i].Shows();
  if (!ready) {
    timespec ts{0, static_cast<long>(timeout_us) * 1000};
    ::syscall(SYS_futex, &me.doorbell, FUTEX_WAIT, seen, &ts, nullptr, 0);
  }
  me.sleeping.store(0, std::memory_order_relaxed);
}

bool ShmMethod::Handle(int source, const RingRecord& rec, Defer defer) {
  if (!broken_[static_cast<std::size_t>(source)].ok()) return true;
  switch (rec.type) {
    case kRecEager: return OnEnvelope(source, rec, false, defer);
    case kRecRts: return OnEnvelope(source, rec, true, defer);
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

bool ShmMethod::OnEnvelope(int source, const RingRecord& rec, bool rendezvous, Defer defer) {
  // A malformed record is consumed: it fails the peer.
  auto malformed = [&](absl::string_view what) {
    Malformed(source, what);
    return true;
  };
  MatchHeader h;
  const std::size_t body = rendezvous ? sizeof(RtsBody) : 0;
  if (rec.len < sizeof(h) + body) return malformed("short envelope");
  std::memcpy(&h, rec.payload, sizeof(h));
  if (!rendezvous && h.length != rec.len - sizeof(h)) {
    return malformed(absl::StrFormat("eager length %d in a %d-byte record", h.length, rec.len));
  }
  RtsBody rts{};
  if (rendezvous) std::memcpy(&rts, rec.payload + sizeof(h), sizeof(rts));
  if (h.tag < 0) return malformed(absl::StrFormat("negative tag %d", h.tag));
  const uint32_t proto = rendezvous ? (h.proto | car::kProtoRendezvous) : (h.proto & ~car::kProtoRendezvous);
  // The CAR taking this message gets fresh method state naming its sender.
  absl::StatusOr<Car*> c = DeliverEnvelope(
      *host_, {h.context, source, h.tag}, h.length, proto, rendezvous ? nullptr : rec.payload + sizeof(h),
      [&](Car& taker) {
        Bind(taker, source);
        ShmCarState& s = StateOf(taker);
        s.remote_handle = h.sender_handle;
        s.remote_address = rts.address;
      },
      // Asked only of an envelope nothing matches: a hold needs nothing
      // behind it yet (reading the next record's line costs a transfer).
      [&] { return defer == Defer::kYes || (defer == Defer::kHold && !readers_[static_cast<std::size_t>(source)].ShowsAfter()); });
  if (!c.ok()) {
    FailPeer(source, c.status());
    return true;
  }
  if (*c == nullptr) return false;  // deferred: stays in the ring
  FinishIfFinal(**c);
  return true;
}

Car* ShmMethod::Lookup(uint64_t handle, car::CarKind kind, int source) const {
  return FindFrom(handles_, handle, kind, source, [](Car& c) { return StateOf(c).peer; });
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
  Car* c = Lookup(b.sender_handle, car::CarKind::kSend, source);
  if (c == nullptr) return Malformed(source, "CTS for an unknown send");
  ShmCarState& s = StateOf(*c);
  EndRts(*c);
  if (b.copied == 2) {
    CarSignal err;
    err.error = absl::UnavailableError(
        absl::StrFormat("rank %d could not read the data (process_vm_readv failed)", source));
    (void)SendMachine::Dispatch(*c, SendEvent::kError, err);
  } else {
    s.remote_handle = b.copied == 1 ? 0 : b.receiver_handle;
    (void)SendMachine::Dispatch(*c, SendEvent::kCts);
  }
  FinishIfFinal(*c);
}

void ShmMethod::OnData(int source, const RingRecord& rec) {
  DataHeader h;
  if (!ReadBody(source, rec, "DATA", &h)) return;
  Car* r = Lookup(h.receiver_handle, car::CarKind::kRecv, source);
  if (r == nullptr) return Malformed(source, "DATA for an unknown receive");
  if (h.offset != r->bytes_done()) {
    return Malformed(source, absl::StrFormat("DATA at offset %d, expected %d", h.offset, r->bytes_done()));
  }
  const std::size_t n = rec.len - sizeof(h);
  r->Land(rec.payload + sizeof(h), n);
  if (ShmCarState& rs = StateOf(*r); rs.cts_ns != 0 && h.offset + n == r->bytes_total()) {
    choosers_[static_cast<std::size_t>(source)].Observe(/*cma=*/false, r->bytes_total(), NowNs() - rs.cts_ns);
    rs.cts_ns = 0;
  }
  CarSignal d;
  d.bytes = n;
  (void)RecvMachine::Dispatch(*r, RecvEvent::kData, d);
  FinishIfFinal(*r);
}

void ShmMethod::OnAck(int source, const RingRecord& rec) {
  AckBody b;
  if (!ReadBody(source, rec, "ACK", &b)) return;
  Car* c = Lookup(b.sender_handle, car::CarKind::kSend, source);
  if (c == nullptr) return Malformed(source, "ACK for an unknown send");
  (void)SendMachine::Dispatch(*c, SendEvent::kAck);
  FinishIfFinal(*c);
}

void ShmMethod::FailPeer(int peer, const absl::Status& why) {
  const auto i = static_cast<std::size_t>(peer);
  if (broken_[i].ok()) broken_[i] = why;
  // The VC's error state: whatever is posted to it from now on fails at once.
  vcs_[i].start_eager = &FailAtOnce;
  vcs_[i].start_rendezvous = &FailAtOnce;
  CarSignal err;
  err.error = why;
  while (Car* c = parked_[i].PopFront()) {
    StateOf(*c).parked = kNotParked;
    EndRts(*c);
    --backlog_;
    (void)SendMachine::Dispatch(*c, SendEvent::kError, err);
  }
  while (Car* c = streams_[i].PopFront()) {
    --backlog_;
    (void)SendMachine::Dispatch(*c, SendEvent::kError, err);
  }
  backlog_ -= static_cast<int>(control_[i].size());
  control_[i].clear();
  FailWaiting(
      handles_, peer, why, [](Car& c) { return StateOf(c).peer; },
      [this](Car& c) {
        StateOf(c).local_handle = 0;
        EndRts(c);
      });
}

}  // namespace cartage::methods::shm
