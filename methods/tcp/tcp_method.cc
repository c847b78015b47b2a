#include "methods/tcp/tcp_method.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "car/car_actions.h"
#include "car/send_fsm.h"
#include "base/check.h"
#include "methods/common/host_keys.h"
#include "methods/common/wire_cars.h"

namespace cartage::methods::tcp {

using car::Car;
using car::CarSignal;
using car::CarEvents;
using car::SendEvent;
using car::SendMachine;

namespace {

constexpr std::size_t kRxMin = 256 * 1024;  // a VC's receive buffer, at least
constexpr int kMaxIov = 64;                 // frames (x2 pieces) written per system call
constexpr uint64_t kSmallFrame = 256;       // payloads copied behind their header for one send()
// Bytes one connection writes in a pass: while the reader keeps pace, a
// loopback socket takes a large payload in one call, and every other VC and
// the receive side would wait for all of it.
constexpr uint64_t kFlushBytes = uint64_t{8} << 20;

bool IsConnecting(ConnState s) {
  return s == ConnState::kConnecting || s == ConnState::kHelloSent || s == ConnState::kAwaitPeer;
}

}  // namespace

absl::Status RegisterTcpMachines(fsm::Registry& registry) { return registry.Register(ConnMachine::Describe()); }

// ---- Set-up ------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TcpMethod>> TcpMethod::Create(Exchange& ex, MethodHost* host,
                                                             const TcpOptions& options) {
  auto m = std::unique_ptr<TcpMethod>(new TcpMethod());
  m->options_ = options;
  m->caps_ = Caps(options);
  m->exchange_ = &ex;
  m->host_ = host;
  m->lane_ = host->lane();
  m->rank_ = ex.rank();
  m->size_ = ex.size();
  m->job_key_ = ex.job_id().substr(0, kJobKeyBytes);
  const auto n = static_cast<std::size_t>(m->size_);
  m->conns_.resize(n);
  for (int p = 0; p < m->size_; ++p) {
    TcpConn& conn = m->conns_[static_cast<std::size_t>(p)];
    conn.method = m.get();
    conn.peer = p;
    conn.vc = kQueueingOps;
    conn.vc.context = m.get();
    conn.vc.peer = p;
    host->InstallAgentOps(conn.vc);
  }
  m->live_.reserve(n);
  m->wire_.Reserve(4096);
  m->records_.resize(n);
  m->addresses_.resize(n);
  m->epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (m->epoll_fd_ < 0) return absl::InternalError(absl::StrCat("tcp: epoll_create1: ", std::strerror(errno)));
  m->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (m->wake_fd_ < 0) return absl::InternalError(absl::StrCat("tcp: eventfd: ", std::strerror(errno)));
  m->Watch(m->wake_fd_, EPOLLIN, kWakeTag);
  CARTAGE_RETURN_IF_ERROR(m->Listen());
  return m;
}

TcpMethod::~TcpMethod() {
  for (TcpConn& conn : conns_) {
    if (conn.fd >= 0) ::close(conn.fd);
  }
  for (Pending& p : pending_) ::close(p.fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

void TcpMethod::Close() {
  for (TcpConn& conn : conns_) {
    if (!ConnMachine::IsFinal(conn)) Conn(conn, ConnEvent::kClose);
  }
  for (Pending& p : pending_) CloseFd(p.fd);
  pending_.clear();
}

void TcpMethod::Bind(Car& c, int) { new (c.method_private()) TcpCarState(); }

VcState TcpMethod::StateOf(int peer) const {
  const TcpConn& conn = conns_[static_cast<std::size_t>(peer)];
  switch (static_cast<ConnState>(conn.state.value())) {
    case ConnState::kIdle: return VcState::kIdle;
    case ConnState::kConnected: return VcState::kConnected;
    case ConnState::kFailing:
    case ConnState::kError:
    case ConnState::kClosed: return VcState::kError;
    default: return VcState::kConnecting;
  }
}

bool TcpMethod::PeerGone(int peer) {
  const auto i = static_cast<std::size_t>(peer);
  if (peer == rank_) return false;
  const ConnState s = ConnMachine::StateOf(conns_[i]);
  if (s == ConnState::kFailing || s == ConnState::kError) return true;
  // A peer whose pid this rank can see (same boot, same pid namespace); its
  // record came at set-up, so that this never waits for the launcher.
  const std::optional<PeerRecord>& r = records_[i];
  return r.has_value() && r->host_key == host_key_ && watch_.Gone(r->pid);
}

// ---- VC operations, by state -----------------------------------------------------

namespace {
void NobodyToTell(Car&, CarEvents&) {}  // an ACK for a peer that is gone: the receive completed
}  // namespace

// The VC's operations in each state of tcp_connection (SwapOps keeps the
// agent's post_recv / unpost_recv, the name, the context and the peer).
const car::Vc TcpMethod::kQueueingOps{.name = "tcp",
                                      .start_eager = &QueueEager,
                                      .start_rendezvous = &QueueRendezvous,
                                      .start_data = &StartData,
                                      .send_cts = &SendCts,
                                      .send_ack = &SendAck};
const car::Vc TcpMethod::kConnectedOps{.name = "tcp",
                                       .start_eager = &StartEager,
                                       .start_rendezvous = &StartRendezvous,
                                       .start_data = &StartData,
                                       .send_cts = &SendCts,
                                       .send_ack = &SendAck};
const car::Vc TcpMethod::kFailingOps{.name = "tcp",
                                     .start_eager = &FailAtOnce,
                                     .start_rendezvous = &FailAtOnce,
                                     .start_data = &FailAtOnce,
                                     .send_cts = &FailAtOnce,
                                     .send_ack = &NobodyToTell};

void TcpMethod::FailAtOnce(Car& c, CarEvents& events) {
  car::CarActions::RaiseError(c, events, MethodOf<TcpMethod>(c).conn(PeerOf(c)).error);
}

FrameHeader TcpMethod::EnvelopeFrame(Car& c, bool rendezvous) {
  TcpCarState& s = StateOf(c);
  const bool sync = c.spec().synchronous;
  // A handle for what the peer answers: the CTS of an RTS, the ACK of a synchronous send.
  if (rendezvous || sync) wire_.Register(c);
  const car::Envelope& e = c.envelope();
  FrameHeader h{};
  h.type = rendezvous ? kFrameRts : kFrameEager;
  h.proto = rendezvous ? car::kProtoRendezvous | (sync ? uint32_t{car::kProtoSync} : 0u)
                       : (sync ? uint32_t{car::kProtoSync} : uint32_t{car::kProtoEager});
  h.context = e.context_id;
  h.tag = e.tag;
  h.length = c.payload_bytes();
  h.a = s.wire.local;
  return h;
}

OutFrame& TcpMethod::Queue(TcpConn& conn, const FrameHeader& h, Car* payload_of) {
  OutFrame& f = conn.out.emplace_back();
  f.h = h;
  f.car = payload_of;
  if (payload_of != nullptr) {
    f.payload_bytes = h.length;
    f.payload = payload_of->ContiguousSource();
    if (f.payload == nullptr && f.payload_bytes > 0) {
      f.packed.resize(f.payload_bytes);
      payload_of->Gather(0, f.packed.data(), f.payload_bytes);
      f.payload = f.packed.data();
    }
  }
  return f;
}

void TcpMethod::QueueControl(TcpConn& conn, const FrameHeader& h) {
  if (conn.out.empty() && ConnMachine::StateOf(conn) == ConnState::kConnected) {
    const ssize_t n = ::send(conn.fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(sizeof(h))) return;
    Queue(conn, h, nullptr).sent = n > 0 ? static_cast<uint64_t>(n) : 0;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      Lost(conn, absl::UnavailableError(absl::StrFormat("tcp: sending to rank %d: %s", conn.peer, std::strerror(errno))));
    }
    return;
  }
  Queue(conn, h, nullptr);
}

void TcpMethod::QueueEager(Car& c, CarEvents&) {
  TcpMethod& m = MethodOf<TcpMethod>(c);
  OpScope scope(m);
  TcpConn& conn = m.conn(PeerOf(c));
  m.Queue(conn, m.EnvelopeFrame(c, false), &c);
  m.Conn(conn, ConnEvent::kSend);
}

void TcpMethod::QueueRendezvous(Car& c, CarEvents&) {
  TcpMethod& m = MethodOf<TcpMethod>(c);
  OpScope scope(m);
  TcpConn& conn = m.conn(PeerOf(c));
  m.Queue(conn, m.EnvelopeFrame(c, true), nullptr);
  m.Conn(conn, ConnEvent::kSend);
}

void TcpMethod::StartEager(Car& c, CarEvents& events) {
  TcpMethod& m = MethodOf<TcpMethod>(c);
  OpScope scope(m);
  TcpConn& conn = m.conn(PeerOf(c));
  const FrameHeader h = m.EnvelopeFrame(c, false);
  const std::byte* payload = c.ContiguousSource();
  if (conn.out.empty() && (payload != nullptr || h.length == 0)) {
    // The common case: header and payload in one system call, nothing
    // queued. A small message is copied behind its header (one plain send is
    // cheaper than a gather); a larger one goes as an iovec pair.
    ssize_t n;
    if (h.length <= kSmallFrame) {
      alignas(64) std::byte frame[sizeof(FrameHeader) + kSmallFrame];
      std::memcpy(frame, &h, sizeof(h));
      if (h.length > 0) std::memcpy(frame + sizeof(h), payload, h.length);
      n = ::send(conn.fd, frame, sizeof(h) + h.length, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      const uint64_t total = sizeof(h) + h.length;
      const uint64_t first = m.FirstWriteOn(conn, h.length);
      iovec iov[2] = {{const_cast<FrameHeader*>(&h), sizeof(h)},
                      {const_cast<std::byte*>(payload), static_cast<std::size_t>(first - sizeof(h))}};
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = 2;
      n = ::sendmsg(conn.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n == static_cast<ssize_t>(first) && first < total) {
        const ssize_t rest = ::send(conn.fd, payload + (first - sizeof(h)), total - first, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (rest > 0) n += rest;  // else the queue writes the rest (an error shows again there)
      }
    }
    if (n == static_cast<ssize_t>(sizeof(h) + h.length)) {
      events.Raise<SendMachine>(c, SendEvent::kLocalDone);
      return;
    }
    OutFrame& f = m.Queue(conn, h, &c);
    if (n > 0) f.sent = static_cast<uint64_t>(n);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      m.Lost(conn, absl::UnavailableError(absl::StrFormat("tcp: sending to rank %d: %s", conn.peer, std::strerror(errno))));
    }
    return;
  }
  m.Queue(conn, h, &c);
  m.Flush(conn, &events);
}

void TcpMethod::StartRendezvous(Car& c, CarEvents&) {
  TcpMethod& m = MethodOf<TcpMethod>(c);
  OpScope scope(m);
  m.QueueControl(m.conn(PeerOf(c)), m.EnvelopeFrame(c, true));
}

void TcpMethod::StartData(Car& c, CarEvents& events) {
  TcpMethod& m = MethodOf<TcpMethod>(c);
  OpScope scope(m);
  TcpConn& conn = m.conn(PeerOf(c));
  FrameHeader h{};
  h.type = kFrameData;
  h.length = c.payload_bytes();
  h.a = StateOf(c).wire.remote;
  h.b = 0;
  m.Queue(conn, h, &c);  // the payload stays in the user's buffer when it is one run
  m.Flush(conn, &events);
}

void TcpMethod::SendCts(Car& c, CarEvents&) {
  TcpMethod& m = MethodOf<TcpMethod>(c);
  OpScope scope(m);
  FrameHeader h{};
  h.type = kFrameCts;
  h.a = StateOf(c).wire.remote;
  h.b = m.wire_.Register(c);
  m.QueueControl(m.conn(PeerOf(c)), h);
}

void TcpMethod::TellGone(int peer, int gone) {
  TcpConn& to = conn(peer);
  if (ConnMachine::StateOf(to) != ConnState::kConnected) return;  // news rides a line already there
  FrameHeader h{};
  h.type = kFrameGone;
  h.a = static_cast<uint64_t>(gone);
  QueueControl(to, h);
}

void TcpMethod::SendAck(Car& c, CarEvents&) {
  TcpMethod& m = MethodOf<TcpMethod>(c);
  OpScope scope(m);
  FrameHeader h{};
  h.type = kFrameAck;
  h.a = StateOf(c).wire.remote;
  m.QueueControl(m.conn(PeerOf(c)), h);
}

// ---- Writing -------------------------------------------------------------------

void TcpMethod::Complete(OutFrame& f, CarEvents* events) {
  if (f.car == nullptr) return;
  if (f.h.type == kFrameData) {
    // The last the peer hears of this send: its handle goes now (the CAR is
    // done once the event below runs).
    wire_.Forget(*f.car);
  }
  if (events != nullptr) {
    events->Raise<SendMachine>(*f.car, SendEvent::kLocalDone);
  } else {
    (void)SendMachine::Dispatch(*f.car, SendEvent::kLocalDone);
    wire_.FinishIfFinal(*f.car);
  }
}

int TcpMethod::Flush(TcpConn& conn, CarEvents* events) {
  int done = 0;
  uint64_t written = 0;
  while (!conn.out.empty() && ConnMachine::StateOf(conn) == ConnState::kConnected) {
    if (written >= kFlushBytes) break;  // the next pass goes on
    iovec iov[kMaxIov];
    int n_iov = 0;
    uint64_t want = 0;
    uint64_t cap = kFlushBytes;  // of the first frame's payload, this write
    if (conn.out.size() == 1 && conn.out.front().sent == 0) {
      cap = std::min(cap, FirstWriteOn(conn, conn.out.front().payload_bytes) - sizeof(FrameHeader));
    }
    for (std::size_t k = 0; k < conn.out.size() && n_iov + 2 <= kMaxIov; ++k) {
      OutFrame& f = conn.out[k];
      uint64_t skip = f.sent;
      if (skip < sizeof(FrameHeader)) {
        iov[n_iov++] = {reinterpret_cast<std::byte*>(&f.h) + skip, sizeof(FrameHeader) - skip};
        want += sizeof(FrameHeader) - skip;
        skip = 0;
      } else {
        skip -= sizeof(FrameHeader);
      }
      if (f.payload_bytes > skip) {
        const uint64_t piece = std::min<uint64_t>(f.payload_bytes - skip, k == 0 ? cap : kFlushBytes);
        iov[n_iov++] = {const_cast<std::byte*>(f.payload) + skip, static_cast<std::size_t>(piece)};
        want += piece;
        if (piece < f.payload_bytes - skip) break;
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(n_iov);
    const ssize_t n = ::sendmsg(conn.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      Lost(conn, absl::UnavailableError(absl::StrFormat("tcp: sending to rank %d: %s", conn.peer, std::strerror(errno))));
      break;
    }
    uint64_t left = static_cast<uint64_t>(n);
    written += left;
    while (left > 0) {
      OutFrame& f = conn.out.front();
      const uint64_t rest = sizeof(FrameHeader) + f.payload_bytes - f.sent;
      const uint64_t take = std::min(rest, left);
      f.sent += take;
      left -= take;
      if (f.sent < sizeof(FrameHeader) + f.payload_bytes) break;
      OutFrame finished = std::move(f);
      conn.out.pop_front();
      Complete(finished, events);
      ++done;
    }
    if (static_cast<uint64_t>(n) < want) break;  // the socket is full
  }
  return done > 0 ? done : written > 0 ? 1 : 0;
}

// ---- Connection state ------------------------------------------------------------

void TcpMethod::BecomeConnected(TcpConn& conn) {
  SwapOps(conn.vc, kConnectedOps);
  ReadSegment(conn);
  // Room for the largest eager frame, and for reading many small ones at once.
  if (conn.rx.empty()) conn.rx.resize(std::max(kRxMin, options_.eager_limit + sizeof(FrameHeader) + 4096));
}

uint64_t TcpMethod::FirstWriteOn(TcpConn& conn, uint64_t payload) {
  if (payload < kStreamEagerMin) return sizeof(FrameHeader) + payload;
  if (++conn.large_writes >= kSegmentRecheck) ReadSegment(conn);
  return LargeFrameFirstWrite(payload, conn.segment);
}

void TcpMethod::ReadSegment(TcpConn& conn) {
  conn.large_writes = 0;
  int segment = 0;
  socklen_t len = sizeof(segment);
  if (::getsockopt(conn.fd, IPPROTO_TCP, TCP_MAXSEG, &segment, &len) == 0 && segment > 0) {
    conn.segment = static_cast<uint64_t>(segment);
  }
}

void TcpMethod::Conn(TcpConn& conn, ConnEvent e, const ConnSignal& s) {
  const ConnState before = ConnMachine::StateOf(conn);
  (void)ConnMachine::Dispatch(conn, e, s);
  const ConnState after = ConnMachine::StateOf(conn);
  connecting_ += static_cast<int>(IsConnecting(after)) - static_cast<int>(IsConnecting(before));
  failing_ += static_cast<int>(after == ConnState::kFailing) - static_cast<int>(before == ConnState::kFailing);
  if (after == ConnState::kConnected && before != ConnState::kConnected) {
    live_.push_back(&conn);
  } else if (before == ConnState::kConnected && after != ConnState::kConnected) {
    live_.erase(std::find(live_.begin(), live_.end(), &conn));
  }
  // Not from inside a CAR's operation: failing CARs dispatches their
  // machines, and the CAR whose operation runs is mid-transition. Progress
  // takes it from `failing` then.
  if (after == ConnState::kFailing && in_op_ == 0) Conn(conn, ConnEvent::kFailCars);
}

void TcpMethod::Lost(TcpConn& conn, absl::Status why) {
  ConnSignal s;
  s.error = std::move(why);
  if (!ConnMachine::IsFinal(conn)) Conn(conn, ConnEvent::kLost, s);
}

void TcpMethod::FailPeer(int peer, const absl::Status& why) {
  TcpConn& conn = this->conn(peer);
  if (ConnMachine::StateOf(conn) == ConnState::kFailing) {
    if (in_op_ == 0) Conn(conn, ConnEvent::kFailCars);
  } else if (!ConnMachine::IsFinal(conn)) {
    Lost(conn, why);
  }
}

void TcpMethod::FailCars(TcpConn& conn) {
  CarSignal err;
  err.error = conn.error;
  std::deque<OutFrame> out;
  out.swap(conn.out);
  for (OutFrame& f : out) {
    if (f.car != nullptr && !SendMachine::IsFinal(*f.car)) (void)SendMachine::Dispatch(*f.car, SendEvent::kError, err);
  }
  // The stream's receive: a large eager frame's was never named on the
  // wire, so FailWaiting does not know it (a DATA frame's it then skips, failed).
  if (conn.data_car != nullptr) DispatchError(*conn.data_car, conn.error);
  conn.data_car = nullptr;
  conn.data_left = 0;
  wire_.FailWaiting(conn.peer, conn.error);
}

}  // namespace cartage::methods::tcp
