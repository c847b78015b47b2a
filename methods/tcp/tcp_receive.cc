// The tcp method's progress and receiving half: each round writes what
// waits and reads every connected peer's socket (straight into a receive
// buffer while a DATA stream or a large eager frame lands), cuts frames,
// checks every field from the wire, and hands each frame to the CAR it
// names. tcp_method.cc sends; tcp_connect.cc makes connections.
#include <sys/epoll.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "car/car_actions.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "methods/common/wire_cars.h"
#include "methods/tcp/tcp_method.h"

namespace cartage::methods::tcp {

using car::Car;
using car::CarSignal;
using car::RecvEvent;
using car::RecvMachine;
using car::SendEvent;
using car::SendMachine;

// ---- Progress ----------------------------------------------------------------

int TcpMethod::Progress() {
  int work = 0;
  if (failing_ > 0) {
    for (TcpConn& conn : conns_) {
      if (ConnMachine::StateOf(conn) == ConnState::kFailing) Conn(conn, ConnEvent::kFailCars);
    }
  }
  for (std::size_t i = live_.size(); i-- > 0;) {
    if (i >= live_.size()) continue;
    TcpConn& conn = *live_[i];
    if (!conn.out.empty()) work += Flush(conn, nullptr);
    if (ConnMachine::StateOf(conn) == ConnState::kConnected) work += PumpRx(conn);
  }
  // Connections being made and accepted: every round while some are under
  // way, else now and then (a peer may connect at any time; rarely once
  // connections are up, since each epoll_wait delays the next read).
  if (connecting_ > 0 || !pending_.empty() || (++tick_ & (live_.empty() ? 15 : 127)) == 0) work += PollEvents(0);
  return work;
}

void TcpMethod::Block(int timeout_us) {
  // Output left in a full socket wakes the wait once the socket has room:
  // else a sender whose reader has drained it sleeps out the timeout.
  writers_.clear();
  for (TcpConn* conn : live_) {
    if (!conn->out.empty()) {
      WatchVc(*conn, EPOLLIN | EPOLLOUT);
      writers_.push_back(conn);
    }
  }
  epoll_event evs[16];
  const int ms = std::max(1, (timeout_us + 999) / 1000);
  // Level-triggered: what this reports is still there for Progress.
  const int n = ::epoll_wait(epoll_fd_, evs, 16, ms);
  for (int k = 0; k < n; ++k) {
    if (evs[k].data.u64 == kWakeTag) DrainWake();
  }
  for (TcpConn* conn : writers_) WatchVc(*conn, EPOLLIN);
}

void TcpMethod::Wake() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

void TcpMethod::DrainWake() {
  uint64_t count = 0;
  (void)!::read(wake_fd_, &count, sizeof(count));
}

// ---- Reading -------------------------------------------------------------------

int TcpMethod::PumpRx(TcpConn& conn) {
  int work = 0;
  for (int round = 0; round < 8 && ConnMachine::StateOf(conn) == ConnState::kConnected; ++round) {
    ssize_t n;
    std::size_t asked;
    std::size_t direct = 0;  // bytes read straight into a receive buffer
    std::span<std::byte> zone;
    if (conn.data_left > 0 && conn.head == conn.tail && conn.data_car->LandsContiguous()) zone = conn.data_car->LandingZone();
    if (!zone.empty()) {
      // A stream (DATA, or a large eager frame) with nothing buffered: read
      // into the receive buffer itself, and into rx only the header of the
      // frame that follows: a frame after a large one is most often large
      // too, and then lands straight in its receive as well.
      const std::size_t room = static_cast<std::size_t>(std::min<uint64_t>(zone.size(), conn.data_left));
      conn.head = conn.tail = 0;
      iovec iov[2] = {{zone.data(), room}, {conn.rx.data(), sizeof(FrameHeader)}};
      n = ::readv(conn.fd, iov, 2);
      asked = room + sizeof(FrameHeader);
      if (n > 0) {
        direct = std::min(static_cast<std::size_t>(n), room);
        conn.tail = static_cast<std::size_t>(n) - direct;
      }
    } else {
      if (conn.head == conn.tail) conn.head = conn.tail = 0;
      if (conn.rx.size() - conn.tail < 4096 && conn.head > 0) Compact(conn);
      asked = conn.rx.size() - conn.tail;
      n = ::recv(conn.fd, conn.rx.data() + conn.tail, asked, MSG_DONTWAIT);
      if (n > 0) conn.tail += static_cast<std::size_t>(n);
    }
    if (n == 0) {
      Lost(conn, absl::UnavailableError(absl::StrFormat("rank %d exited or finalized (tcp: connection closed)", conn.peer)));
      return work + 1;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      Lost(conn, absl::UnavailableError(absl::StrFormat("tcp: connection to rank %d lost: %s", conn.peer, std::strerror(errno))));
      return work + 1;
    }
    ++work;
    if (direct > 0) Landed(conn, direct);
    Parse(conn);
    if (static_cast<std::size_t>(n) < asked) break;  // drained
  }
  return work;
}

void TcpMethod::Parse(TcpConn& conn) {
  while (ConnMachine::StateOf(conn) == ConnState::kConnected) {
    const std::size_t avail = conn.tail - conn.head;
    if (conn.data_left > 0) {
      const std::size_t k = static_cast<std::size_t>(std::min<uint64_t>(conn.data_left, avail));
      if (k == 0) break;
      conn.data_car->Land(conn.rx.data() + conn.head, k);
      conn.head += k;
      Landed(conn, k);
      continue;
    }
    if (avail < sizeof(FrameHeader)) break;
    FrameHeader h;
    std::memcpy(&h, conn.rx.data() + conn.head, sizeof(h));
    if (!OnFrame(conn, h)) break;
  }
  if (conn.head == conn.tail) conn.head = conn.tail = 0;
}

void TcpMethod::Landed(TcpConn& conn, std::size_t n) {
  Car* r = conn.data_car;
  conn.data_left -= n;
  if (conn.data_left == 0) conn.data_car = nullptr;
  CarSignal d;
  d.bytes = n;
  (void)RecvMachine::Dispatch(*r, RecvEvent::kData, d);
  wire_.FinishIfFinal(*r);
}

void TcpMethod::Compact(TcpConn& conn) {
  std::memmove(conn.rx.data(), conn.rx.data() + conn.head, conn.tail - conn.head);
  conn.tail -= conn.head;
  conn.head = 0;
}

void TcpMethod::Malformed(TcpConn& conn, absl::string_view what) {
  Lost(conn, absl::DataLossError(absl::StrFormat("tcp: malformed frame from rank %d: %s", conn.peer, what)));
}

bool TcpMethod::OnFrame(TcpConn& conn, const FrameHeader& h) {
  const int source = conn.peer;
  if ((h.type == kFrameEager || h.type == kFrameRts) && h.tag < 0) {
    Malformed(conn, absl::StrFormat("negative tag %d", h.tag));
    return false;
  }
  switch (h.type) {
    case kFrameEager: {
      if (h.length > options_.eager_limit) {
        Malformed(conn, absl::StrFormat("eager length %d exceeds the %d-byte eager limit", h.length, options_.eager_limit));
        return false;
      }
      const std::size_t need = sizeof(FrameHeader) + static_cast<std::size_t>(h.length);
      if (conn.tail - conn.head < need) {
        if (h.length >= kStreamEagerMin && StreamEager(conn, h)) return true;
        if (conn.rx.size() - conn.head < need) Compact(conn);  // make room for the whole frame
        return false;
      }
      const std::byte* payload = conn.rx.data() + conn.head + sizeof(FrameHeader);
      conn.head += need;
      OnEnvelope(conn, h, payload);
      return true;
    }
    case kFrameRts:
      conn.head += sizeof(FrameHeader);
      OnEnvelope(conn, h, nullptr);
      return true;
    case kFrameCts: {
      Car* c = wire_.CtsFor(source, h.a);
      if (c == nullptr) {
        Malformed(conn, "CTS for an unknown send");
        return false;
      }
      conn.head += sizeof(FrameHeader);
      wire_.OnCts(*c, h.b);
      return true;
    }
    case kFrameData: {
      Car* r = wire_.Lookup(h.a, car::CarKind::kRecv, source);
      if (r == nullptr) {
        Malformed(conn, "DATA for an unknown receive");
        return false;
      }
      if (h.b != r->bytes_done() || h.length != r->bytes_total() - r->bytes_done()) {
        Malformed(conn, absl::StrFormat("DATA of %d bytes at offset %d for a %d-byte message with %d bytes in", h.length,
                                      h.b, r->bytes_total(), r->bytes_done()));
        return false;
      }
      conn.head += sizeof(FrameHeader);
      if (h.length == 0) return true;
      conn.data_car = r;
      conn.data_left = h.length;
      return true;
    }
    case kFrameAck: {
      if (!wire_.OnAck(source, h.a)) {
        Malformed(conn, "ACK for an unknown send");
        return false;
      }
      conn.head += sizeof(FrameHeader);
      return true;
    }
    case kFrameGone: {
      if (h.a >= static_cast<uint64_t>(size_) || h.a == static_cast<uint64_t>(rank_) ||
          h.a == static_cast<uint64_t>(source)) {
        Malformed(conn, absl::StrFormat("news of rank %d's death", static_cast<int64_t>(h.a)));
        return false;
      }
      conn.head += sizeof(FrameHeader);
      const int gone = static_cast<int>(h.a);
      TcpConn& g = conns_[static_cast<std::size_t>(gone)];
      const ConnState s = ConnMachine::StateOf(g);
      if (s != ConnState::kFailing && s != ConnState::kError && s != ConnState::kClosed) {
        Lost(g, absl::UnavailableError(absl::StrFormat("rank %d exited (rank %d saw it go)", gone, source)));
      }
      return true;
    }
    default:
      Malformed(conn, absl::StrFormat("unknown frame type %d", h.type));
      return false;
  }
}

bool TcpMethod::StreamEager(TcpConn& conn, const FrameHeader& h) {
  const int source = conn.peer;
  Car* r = MatchStreamedEager(*host_, {h.context, source, h.tag}, h.length, h.proto, [&](Car& taker) {
    Bind(taker, source);
    StateOf(taker).wire.remote = h.a;
  });
  if (r == nullptr) return false;
  conn.head += sizeof(FrameHeader);
  conn.data_car = r;
  conn.data_left = h.length;
  return true;
}

void TcpMethod::OnEnvelope(TcpConn& conn, const FrameHeader& h, const std::byte* payload) {
  const int source = conn.peer;
  const bool rendezvous = payload == nullptr;
  const uint32_t proto = rendezvous ? (h.proto | car::kProtoRendezvous) : (h.proto & ~car::kProtoRendezvous);
  absl::StatusOr<Car*> c =
      DeliverEnvelope(*host_, {h.context, source, h.tag}, h.length, proto, payload, [&](Car& taker) {
        Bind(taker, source);
        StateOf(taker).wire.remote = h.a;
      });
  if (!c.ok()) return Lost(conn, c.status());
  wire_.FinishIfFinal(**c);
}

}  // namespace cartage::methods::tcp
