#include "methods/shm/shm_method.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>

#include "absl/strings/str_format.h"
#include "car/car_actions.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "car/unexpected_fsm.h"
#include "base/check.h"
#include "methods/common/host_keys.h"
#include "methods/common/wire_cars.h"
#include "methods/shm/shm_wire.h"

namespace cartage::methods::shm {

using car::Car;
using car::CarSignal;
using car::CarEvents;
using car::RecvEvent;
using car::RecvMachine;
using car::SendEvent;
using car::SendMachine;
using car::SendState;

uint64_t ShmMethod::NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// ---- Set-up ------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<ShmMethod>> ShmMethod::Create(Exchange& ex, MethodHost* host,
                                                             const ShmOptions& options) {
  auto m = std::unique_ptr<ShmMethod>(new ShmMethod());
  m->options_ = options;
  // shm carries only the ranks on this host, as the launcher placed them.
  const std::vector<int> host_ranks = ex.HostRanks();
  const int here = static_cast<int>(host_ranks.size());
  CARTAGE_ASSIGN_OR_RETURN(const bool oversubscribed, JobOversubscribed(here));
  CARTAGE_RETURN_IF_ERROR(m->options_.ForJob(here, oversubscribed));
  m->caps_ = Caps(m->options_);
  m->host_ = host;
  m->hold_ = host != nullptr ? host->Holding() : nullptr;
  m->rank_ = ex.rank();
  m->size_ = ex.size();
  CARTAGE_ASSIGN_OR_RETURN(m->segment_, ShmSegment::Create(ex, m->options_.ring_bytes, host_ranks));
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
  for (int p = 0; p < m->size_; ++p) {
    car::Vc& vc = m->vcs_[static_cast<std::size_t>(p)];
    vc = kConnectedOps;
    vc.context = m.get();
    vc.peer = p;
    host->InstallAgentOps(vc);
  }
  for (ControlQueue& q : m->control_) q.items.reserve(256);
  m->wire_.Reserve(4096);
  using DirectStore = ShmOptions::DirectStore;
  const uint64_t slow_ticks =
      options.direct_store == DirectStore::kAuto ? static_cast<uint64_t>(120.0 * internal::TicksPerNs()) : 0;
  for (int p = 0; p < m->size_; ++p) {
    if (!m->segment_->Holds(p)) continue;  // another host's: tcp or ofi carries it
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
    // Watched from now, while the pid is the peer's: a single copy from it
    // later must not read another process that reuses the pid.
    if (p != m->rank_) m->watch_.Watch(m->pids_[static_cast<std::size_t>(p)]);
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
    if (p != m->rank_ && m->segment_->Holds(p) && !m->cma_[static_cast<std::size_t>(p)]) {
      m->caps_.single_copy = false;
    }
  }
  return m;
}

ShmMethod::~ShmMethod() = default;

void ShmMethod::Bind(Car& c, int) { new (c.method_private()) ShmCarState(); }

void ShmMethod::Close() {
  segment_->block(rank_).finalized.store(1, std::memory_order_release);
}

bool ShmMethod::PeerGone(int peer) {
  if (peer == rank_ || !segment_->Holds(peer)) return false;
  if (segment_->block(peer).finalized.load(std::memory_order_acquire) != 0) return true;
  return watch_.Gone(pids_[static_cast<std::size_t>(peer)]);
}

// ---- Writing -----------------------------------------------------------------

void ShmMethod::RingDoorbell(RankBlock& b) {
  b.doorbell.fetch_add(1, std::memory_order_release);
  ::syscall(SYS_futex, &b.doorbell, FUTEX_WAKE, 1, nullptr, nullptr, 0);
}

inline void ShmMethod::CommitTo(int peer, uint16_t type, RingWriter::Order order) {
  const auto i = static_cast<std::size_t>(peer);
  writers_[i].Commit(type, order);
  writers_[i].AfterCommit(readers_[i].consumed());
}

inline bool ShmMethod::WriteEager(Car& c) {
  const int peer = PeerOf(c);
  const uint64_t len = c.payload_bytes();
  std::byte* p = writers_[static_cast<std::size_t>(peer)].Begin(sizeof(MatchHeader) + len);
  if (p == nullptr) return false;
  const car::Envelope& e = c.envelope();
  const MatchHeader h{e.context_id, e.tag, len, StateOf(c).wire.local,
                      c.spec().synchronous ? car::kProtoSync : car::kProtoEager, 0};
  StoreHeader(p, h);
  c.Gather(0, p + sizeof(h), len);  // packs a non-contiguous segment straight into the ring
  CommitTo(peer, kRecEager);
  Wake(peer);
  return true;
}

bool ShmMethod::TryEager(Car& c) { return WriteEager(c); }

bool ShmMethod::TryRts(Car& c) {
  const int peer = PeerOf(c);
  std::byte* p = writers_[static_cast<std::size_t>(peer)].Begin(sizeof(MatchHeader) + sizeof(RtsBody));
  if (p == nullptr) return false;
  const car::Envelope& e = c.envelope();
  const uint32_t proto = car::kProtoRendezvous | (c.spec().synchronous ? uint32_t{car::kProtoSync} : 0u);
  const MatchHeader h{e.context_id, e.tag, c.payload_bytes(), StateOf(c).wire.local, proto, 0};
  // A non-contiguous message announces no address: the receiver cannot read
  // it in one copy (CMA) and asks for the pipelined stream instead.
  const RtsBody body{reinterpret_cast<uint64_t>(c.ContiguousSource())};
  StoreHeader(p, h);
  std::memcpy(p + sizeof(h), &body, sizeof(body));
  // The receiver may read the buffer in place (CMA): its bytes go first.
  CommitTo(peer, kRecRts, RingWriter::Order::kEarlierStores);
  Wake(peer);
  return true;
}

bool ShmMethod::TryControl(int peer, const Control& k) {
  RingWriter& w = writers_[static_cast<std::size_t>(peer)];
  switch (k.type) {
    case kRecCts: {
      std::byte* p = w.Begin(sizeof(CtsBody));
      if (p == nullptr) return false;
      StoreHeader(p, CtsBody{k.a, k.b, k.c, 0});
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
  const int peer = PeerOf(c);
  RingWriter& w = writers_[static_cast<std::size_t>(peer)];
  const uint64_t total = c.payload_bytes();
  const std::size_t chunk_max = w.max_payload() - sizeof(DataHeader);
  while (s.offset < total) {
    const std::size_t chunk = static_cast<std::size_t>(std::min<uint64_t>(chunk_max, total - s.offset));
    std::byte* p = w.Begin(sizeof(DataHeader) + chunk);
    if (p == nullptr) return false;
    StoreHeader(p, DataHeader{s.wire.remote, s.offset});
    c.Gather(s.offset, p + sizeof(DataHeader), chunk);
    CommitTo(peer, kRecData);
    s.offset += chunk;
  }
  Wake(peer);
  return true;
}

// ---- Vc operations ------------------------------------------------------

// A VC's operations: connected, and failed (what is posted from then on fails
// at once; an answer the VC still owes goes out as before).
const car::Vc ShmMethod::kConnectedOps{.name = "shm",
                                       .start_eager = &StartEager,
                                       .start_rendezvous = &StartRendezvous,
                                       .start_data = &StartData,
                                       .send_cts = &SendCts,
                                       .send_ack = &SendAck};
const car::Vc ShmMethod::kFailingOps{.name = "shm",
                                     .start_eager = &FailAtOnce,
                                     .start_rendezvous = &FailAtOnce,
                                     .start_data = &StartData,
                                     .send_cts = &SendCts,
                                     .send_ack = &SendAck};

void ShmMethod::FailAtOnce(Car& c, CarEvents& events) {
  car::CarActions::RaiseError(c, events, MethodOf<ShmMethod>(c).broken_[static_cast<std::size_t>(PeerOf(c))]);
}

void ShmMethod::Park(Car& c, CarEvents& events) {
  parked_[static_cast<std::size_t>(PeerOf(c))].PushBack(&c);
  ++backlog_;
  events.Raise<SendMachine>(c, SendEvent::kQueued);
}

void ShmMethod::StartEager(Car& c, CarEvents& events) {
  ShmMethod& m = MethodOf<ShmMethod>(c);
  if (c.spec().synchronous) m.wire_.Register(c);
  if (m.parked_[static_cast<std::size_t>(PeerOf(c))].empty() && m.WriteEager(c)) {
    events.Raise<SendMachine>(c, SendEvent::kLocalDone);  // copied out: the buffer is free
    return;
  }
  m.Park(c, events);
}

void ShmMethod::StartRendezvous(Car& c, CarEvents& events) {
  ShmMethod& m = MethodOf<ShmMethod>(c);
  m.wire_.Register(c);
  ++m.rts_out_;
  if (m.parked_[static_cast<std::size_t>(PeerOf(c))].empty() && m.TryRts(c)) return;
  m.Park(c, events);
}

void ShmMethod::StartData(Car& c, CarEvents& events) {
  ShmMethod& m = MethodOf<ShmMethod>(c);
  const auto peer = static_cast<std::size_t>(PeerOf(c));
  if (m.streams_[peer].empty() && m.PumpStream(c)) {
    events.Raise<SendMachine>(c, SendEvent::kLocalDone);
    return;
  }
  m.streams_[peer].PushBack(&c);
  ++m.backlog_;
}

void ShmMethod::SendCts(Car& c, CarEvents& events) {
  ShmCarState& s = StateOf(c);
  ShmMethod& m = MethodOf<ShmMethod>(c);
  const int source = PeerOf(c);
  const auto peer = static_cast<std::size_t>(source);
  const uint64_t total = c.bytes_total();
  const bool can_cma = m.cma_[peer] && s.remote_address != 0 && c.LandsContiguous();
  bool cma = can_cma && total >= m.CmaMin();
  // Between the two minimums, the way the chooser takes, timed where it asks.
  bool timed = can_cma && !cma && m.options_.cma_choose_min > 0 && total >= m.options_.cma_choose_min;
  if (timed) {
    const CopyChooser::Choice choice = m.choosers_[peer].Choose();
    cma = choice.cma;
    timed = choice.timed;
  }
  if (!cma) {
    m.wire_.Register(c);
    s.cts_ns = timed ? NowNs() : 0;
    m.SendControl(source, {kRecCts, s.wire.remote, s.wire.local, 0});
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
          "process_vm_readv from rank %d failed: %s", source, std::strerror(errno)));
      m.SendControl(source, {kRecCts, s.wire.remote, 0, 2});
      car::CarActions::RaiseError(c, events, why);
      return;
    }
    done += static_cast<uint64_t>(got);
  }
  if (timed) m.choosers_[peer].Observe(/*cma=*/true, want, NowNs() - start_ns);
  // Read from the sender only if it still lives: once gone, its pid may be
  // another process's, whose bytes these would be.
  if (want > 0 && !m.segment_->block(source).ThreadLives() && m.watch_.Gone(m.pids_[peer])) {
    m.SendControl(source, {kRecCts, s.wire.remote, 0, 2});
    car::CarActions::RaiseError(
        c, events, absl::UnavailableError(absl::StrFormat("rank %d is gone: its data could not be read", source)));
    return;
  }
  m.SendControl(source, {kRecCts, s.wire.remote, 0, 1});
  CarSignal data;
  data.bytes = total;  // all of it is accounted; what did not fit was not read
  events.Raise<RecvMachine>(c, RecvEvent::kData, data);
}

void ShmMethod::SendAck(Car& c, CarEvents&) {
  MethodOf<ShmMethod>(c).SendControl(PeerOf(c), {kRecAck, StateOf(c).wire.remote, 0, 0});
}

void ShmMethod::EndRts(Car& c) {
  const SendState s = SendMachine::StateOf(c);
  if (s == SendState::kRtsSent || s == SendState::kRtsQueued) --rts_out_;
}

std::size_t ShmMethod::CmaMin() const {
  if (options_.cma_min_set || rts_out_ == 0) return options_.cma_min;
  return std::min(options_.cma_min, options_.cma_min_exchange);
}

void ShmMethod::FailPeer(int peer, const absl::Status& why) {
  const auto i = static_cast<std::size_t>(peer);
  if (broken_[i].ok()) broken_[i] = why;
  // The VC's error state: whatever is posted to it from now on fails at once.
  SwapOps(vcs_[i], kFailingOps);
  CarSignal err;
  err.error = why;
  while (Car* c = parked_[i].PopFront()) {
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
  wire_.FailWaiting(peer, why, [this](Car& c) { EndRts(c); });
}

}  // namespace cartage::methods::shm
