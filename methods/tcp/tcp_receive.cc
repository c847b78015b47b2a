// The tcp method's receiving half: reading a VC's socket (straight into a
// receive buffer while a DATA stream lands), cutting frames, checking every
// field from the wire, and handing each frame to the CAR it names.
// tcp_method.cc sends and progresses; tcp_connect.cc makes connections.
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

// ---- Reading -------------------------------------------------------------------

int TcpMethod::PumpRx(TcpVc& vc) {
  int work = 0;
  for (int round = 0; round < 8 && ConnMachine::StateOf(vc) == ConnState::kConnected; ++round) {
    ssize_t n;
    std::size_t asked;
    std::size_t direct = 0;  // bytes read straight into a receive buffer
    std::span<std::byte> zone;
    if (vc.data_left > 0 && vc.head == vc.tail && vc.data_car->LandsContiguous()) zone = vc.data_car->LandingZone();
    if (!zone.empty()) {
      // A DATA stream with nothing buffered: read into the receive buffer
      // itself, and what follows the stream into rx.
      const std::size_t room = static_cast<std::size_t>(std::min<uint64_t>(zone.size(), vc.data_left));
      vc.head = vc.tail = 0;
      iovec iov[2] = {{zone.data(), room}, {vc.rx.data(), vc.rx.size()}};
      n = ::readv(vc.fd, iov, 2);
      asked = room + vc.rx.size();
      if (n > 0) {
        direct = std::min(static_cast<std::size_t>(n), room);
        vc.tail = static_cast<std::size_t>(n) - direct;
      }
    } else {
      if (vc.head == vc.tail) vc.head = vc.tail = 0;
      if (vc.rx.size() - vc.tail < 4096 && vc.head > 0) Compact(vc);
      asked = vc.rx.size() - vc.tail;
      n = ::recv(vc.fd, vc.rx.data() + vc.tail, asked, MSG_DONTWAIT);
      if (n > 0) vc.tail += static_cast<std::size_t>(n);
    }
    if (n == 0) {
      Lost(vc, absl::UnavailableError(absl::StrFormat("rank %d exited or finalized (tcp: connection closed)", vc.peer)));
      return work + 1;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      Lost(vc, absl::UnavailableError(absl::StrFormat("tcp: connection to rank %d lost: %s", vc.peer, std::strerror(errno))));
      return work + 1;
    }
    ++work;
    if (direct > 0) Landed(vc, direct);
    Parse(vc);
    if (static_cast<std::size_t>(n) < asked) break;  // drained
  }
  return work;
}

void TcpMethod::Parse(TcpVc& vc) {
  while (ConnMachine::StateOf(vc) == ConnState::kConnected) {
    const std::size_t avail = vc.tail - vc.head;
    if (vc.data_left > 0) {
      const std::size_t k = static_cast<std::size_t>(std::min<uint64_t>(vc.data_left, avail));
      if (k == 0) break;
      vc.data_car->Land(vc.rx.data() + vc.head, k);
      vc.head += k;
      Landed(vc, k);
      continue;
    }
    if (avail < sizeof(FrameHeader)) break;
    FrameHeader h;
    std::memcpy(&h, vc.rx.data() + vc.head, sizeof(h));
    if (!OnFrame(vc, h)) break;
  }
  if (vc.head == vc.tail) vc.head = vc.tail = 0;
}

void TcpMethod::Landed(TcpVc& vc, std::size_t n) {
  Car* r = vc.data_car;
  vc.data_left -= n;
  if (vc.data_left == 0) vc.data_car = nullptr;
  CarSignal d;
  d.bytes = n;
  (void)RecvMachine::Dispatch(*r, RecvEvent::kData, d);
  FinishIfFinal(*r);
}

void TcpMethod::Compact(TcpVc& vc) {
  std::memmove(vc.rx.data(), vc.rx.data() + vc.head, vc.tail - vc.head);
  vc.tail -= vc.head;
  vc.head = 0;
}

void TcpMethod::Malformed(TcpVc& vc, absl::string_view what) {
  Lost(vc, absl::DataLossError(absl::StrFormat("tcp: malformed frame from rank %d: %s", vc.peer, what)));
}

Car* TcpMethod::Lookup(uint64_t handle, car::CarKind kind, int source) const {
  return FindFrom(handles_, handle, kind, source, [](Car& c) { return StateOf(c).peer; });
}

void TcpMethod::FinishIfFinal(Car& c) { ForgetIfFinal(handles_, c, StateOf(c).local_handle); }

bool TcpMethod::OnFrame(TcpVc& vc, const FrameHeader& h) {
  const int source = vc.peer;
  switch (h.type) {
    case kFrameEager: {
      if (h.length > options_.eager_limit) {
        Malformed(vc, absl::StrFormat("eager length %d exceeds the %d-byte eager limit", h.length, options_.eager_limit));
        return false;
      }
      const std::size_t need = sizeof(FrameHeader) + static_cast<std::size_t>(h.length);
      if (vc.tail - vc.head < need) {
        if (vc.rx.size() - vc.head < need) Compact(vc);  // make room for the whole frame
        return false;
      }
      const std::byte* payload = vc.rx.data() + vc.head + sizeof(FrameHeader);
      vc.head += need;
      OnEnvelope(vc, h, payload);
      return true;
    }
    case kFrameRts:
      vc.head += sizeof(FrameHeader);
      OnEnvelope(vc, h, nullptr);
      return true;
    case kFrameCts: {
      Car* c = Lookup(h.a, car::CarKind::kSend, source);
      if (c == nullptr || SendMachine::StateOf(*c) != car::SendState::kRtsSent) {
        Malformed(vc, "CTS for an unknown send");
        return false;
      }
      vc.head += sizeof(FrameHeader);
      StateOf(*c).remote_handle = h.b;
      (void)SendMachine::Dispatch(*c, SendEvent::kCts);
      FinishIfFinal(*c);
      return true;
    }
    case kFrameData: {
      Car* r = Lookup(h.a, car::CarKind::kRecv, source);
      if (r == nullptr) {
        Malformed(vc, "DATA for an unknown receive");
        return false;
      }
      if (h.b != r->bytes_done() || h.length != r->bytes_total() - r->bytes_done()) {
        Malformed(vc, absl::StrFormat("DATA of %d bytes at offset %d for a %d-byte message with %d bytes in", h.length,
                                      h.b, r->bytes_total(), r->bytes_done()));
        return false;
      }
      vc.head += sizeof(FrameHeader);
      if (h.length == 0) return true;
      vc.data_car = r;
      vc.data_left = h.length;
      return true;
    }
    case kFrameAck: {
      Car* c = Lookup(h.a, car::CarKind::kSend, source);
      if (c == nullptr) {
        Malformed(vc, "ACK for an unknown send");
        return false;
      }
      vc.head += sizeof(FrameHeader);
      (void)SendMachine::Dispatch(*c, SendEvent::kAck);
      FinishIfFinal(*c);
      return true;
    }
    default:
      Malformed(vc, absl::StrFormat("unknown frame type %d", h.type));
      return false;
  }
}

void TcpMethod::OnEnvelope(TcpVc& vc, const FrameHeader& h, const std::byte* payload) {
  const int source = vc.peer;
  const bool rendezvous = payload == nullptr;
  if (h.tag < 0) return Malformed(vc, absl::StrFormat("negative tag %d", h.tag));
  const uint32_t proto = rendezvous ? (h.proto | car::kProtoRendezvous) : (h.proto & ~car::kProtoRendezvous);
  absl::StatusOr<Car*> c =
      DeliverEnvelope(*host_, {h.context, source, h.tag}, h.length, proto, payload, [&](Car& taker) {
        Bind(taker, source);
        StateOf(taker).remote_handle = h.a;
      });
  if (!c.ok()) return Lost(vc, c.status());
  FinishIfFinal(**c);
}

}  // namespace cartage::methods::tcp
