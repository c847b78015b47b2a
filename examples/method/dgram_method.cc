// dgram: a complete cartage method in one file, built out of tree against the
// installed package and loaded by path (CARTAGE_METHOD_PATH). It reaches the
// other ranks on this host through one Unix-domain datagram socket per rank
// (an abstract address named after the job and rank): the kernel keeps
// datagrams between two sockets reliable and in order, so the method needs no
// connections, only framing. methods/README.md walks through it.
//
//   eager       one datagram: header + payload (up to kEager bytes)
//   rendezvous  RTS; the receiver answers CTS once matched; the sender
//               streams DATA datagrams of up to kChunk bytes
//   synchronous the receiver answers ACK when it matches
// A datagram the peer's queue cannot take (EAGAIN) waits on a per-peer FIFO
// that progress retries, so nothing overtakes it.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "car/car_actions.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "methods/common/host_keys.h"
#include "methods/common/wire_cars.h"
#include "methods/method.h"

namespace dgram {

using cartage::car::Car;
using cartage::car::CarSignal;
using cartage::car::CarEvents;
using cartage::car::RecvEvent;
using cartage::car::RecvMachine;
using cartage::car::SendEvent;
using cartage::car::SendMachine;
namespace methods = cartage::methods;

// A datagram names its sender by the sender's world rank, which the agent
// reports to the receive that takes the message. A test builds this file
// with a shift of 1 (the next rank named instead), to see the kit's
// `envelope` case name the rule.
#ifndef DGRAM_SOURCE_SHIFT
#define DGRAM_SOURCE_SHIFT 0
#endif

constexpr std::size_t kEager = 16384;  // the eager limit
constexpr std::size_t kChunk = 32768;  // DATA bytes per datagram
constexpr int kPumpBudget = 64;        // DATA datagrams per peer per progress call

enum Type : uint8_t { kEagerMsg = 1, kRts, kCts, kData, kAck };

// Every datagram starts with this; every field is checked before use.
struct Header {
  uint8_t type;
  uint8_t reserved[3];
  int32_t source;   // the sending rank
  uint32_t context;
  int32_t tag;
  uint32_t proto;   // CarProto bits of an envelope
  uint32_t reserved2;
  uint64_t length;  // EAGER/RTS: message bytes
  uint64_t a;       // EAGER/RTS/CTS/ACK: sender's handle; DATA: receiver's handle
  uint64_t b;       // CTS: receiver's handle; DATA: offset
};

// Per-CAR state, in the CAR's method-private area. The handles come first:
// methods::WireCars finds them there.
struct CarState {
  methods::WireHandles wire;
  uint64_t offset = 0;  // DATA bytes sent so far
};

// A datagram waiting for room in the peer's queue, or a DATA stream.
struct Outgoing {
  Header h;
  Car* car = nullptr;  // EAGER: complete once sent; DATA: the stream's send
  std::vector<std::byte> payload;
};

class DgramMethod final : public methods::Method {
 public:
  static absl::StatusOr<std::unique_ptr<methods::Method>> Open(const methods::OpenArgs& args);
  static methods::Capabilities Caps() {
    methods::Capabilities c;
    c.eager_limit = kEager;
    c.max_message = std::numeric_limits<uint64_t>::max();
    c.reach = methods::Reach::kHost;
    return c;
  }
  ~DgramMethod() override {
    if (fd_ >= 0) ::close(fd_);
  }

  absl::string_view name() const override { return "dgram"; }
  const methods::Capabilities& caps() const override { return caps_; }
  // The other ranks the launcher placed on this host (the exchange's HostRanks).
  bool Reaches(int peer) const override {
    return peer != rank_ && peer >= 0 && peer < size_ && here_[static_cast<std::size_t>(peer)];
  }
  cartage::car::Vc* VcOf(int peer) override { return &peers_[static_cast<std::size_t>(peer)].vc; }
  methods::VcState StateOf(int peer) const override {
    return peers_[static_cast<std::size_t>(peer)].error.ok() ? methods::VcState::kConnected : methods::VcState::kError;
  }
  const absl::Status& PeerStatus(int peer) const override { return peers_[static_cast<std::size_t>(peer)].error; }
  std::size_t private_bytes() const override { return sizeof(CarState); }
  void Bind(Car& c, int) override { new (c.method_private()) CarState(); }
  int Progress() override;
  void Block(int timeout_us) override;
  bool PeerGone(int peer) override { return methods::ProcessGone(peers_[static_cast<std::size_t>(peer)].pid); }
  void FailPeer(int peer, const absl::Status& why) override;
  void Close() override {}

 private:
  struct Peer {
    cartage::car::Vc vc;  // its context is this method, its peer the rank
    absl::Status error;
    int32_t pid = 0;
    sockaddr_un addr{};
    socklen_t addr_len = 0;
    std::deque<Outgoing> queue;  // FIFO: nothing overtakes a waiting datagram
  };
  static CarState& S(Car& c) { return *static_cast<CarState*>(c.method_private()); }
  static DgramMethod& Of(const Car& c) { return methods::MethodOf<DgramMethod>(c); }
  static sockaddr_un Address(const std::string& job, int rank, socklen_t* len);

  // VC operations. Each finds the method and the peer through the VC it was
  // called through (methods::MethodOf, methods::PeerOf).
  static const cartage::car::Vc kOps;
  static void StartEager(Car& c, CarEvents& events);
  static void StartRendezvous(Car& c, CarEvents& events);
  static void StartData(Car& c, CarEvents& events);
  static void SendCts(Car& c, CarEvents& events);
  static void SendAck(Car& c, CarEvents& events);
  static void FailAtOnce(Car& c, CarEvents& events) {
    const int peer = methods::PeerOf(c);
    cartage::car::CarActions::RaiseError(c, events, Of(c).peers_[static_cast<std::size_t>(peer)].error);
  }

  Header Make(Type t, const Car* c) const;
  // Sends one datagram now: 1 sent, 0 no room (EAGAIN), -1 the peer is gone.
  int Try(int peer, const Header& h, const void* payload, std::size_t n);
  void Post(int peer, Outgoing o);  // sends now, or queues behind the others
  bool Pump(int peer);              // the peer's queue, in order; false: blocked
  // Try's verdict: true if sent; false if there was no room, or the peer is
  // gone (then its VC has failed).
  bool Sent(int peer, int tried) {
    if (tried < 0) FailPeer(peer, absl::UnavailableError(absl::StrFormat("rank %d exited or finalized (dgram)", peer)));
    return tried == 1;
  }
  void Handle(const Header& h, const std::byte* payload, std::size_t n);
  void Malformed(int source, absl::string_view what) {
    FailPeer(source, absl::DataLossError(absl::StrFormat("dgram: malformed datagram from rank %d: %s", source, what)));
  }

  methods::Capabilities caps_ = Caps();
  methods::MethodHost* host_ = nullptr;
  int rank_ = 0, size_ = 0, fd_ = -1;
  std::vector<Peer> peers_;
  std::vector<bool> here_;  // by rank: on this host
  methods::WireCars wire_;  // the CARs the peers may name by handle
  int backlog_ = 0;  // datagrams queued over all peers
  std::vector<std::byte> rx_ = std::vector<std::byte>(sizeof(Header) + kChunk);
};

sockaddr_un DgramMethod::Address(const std::string& job, int rank, socklen_t* len) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  // Abstract namespace (leading NUL): nothing to clean up on disk.
  const std::string name = absl::StrCat("cartage-dgram-", job.substr(0, 60), "-", rank);
  std::memcpy(a.sun_path + 1, name.data(), name.size());
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  return a;
}

absl::StatusOr<std::unique_ptr<methods::Method>> DgramMethod::Open(const methods::OpenArgs& args) {
  auto m = std::make_unique<DgramMethod>();
  methods::Exchange& ex = *args.exchange;
  m->host_ = args.host;
  m->rank_ = ex.rank();
  m->size_ = ex.size();
  m->fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  socklen_t len = 0;
  const sockaddr_un me = Address(ex.job_id(), m->rank_, &len);
  if (m->fd_ < 0 || ::bind(m->fd_, reinterpret_cast<const sockaddr*>(&me), len) != 0) {
    return absl::UnavailableError(absl::StrCat("dgram: cannot bind its socket: ", std::strerror(errno)));
  }
  const int bytes = 4 << 20;  // room for a window of DATA datagrams
  ::setsockopt(m->fd_, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
  ::setsockopt(m->fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof(bytes));
  absl::Status s = ex.Put(absl::StrCat("dgram.", m->rank_), absl::StrCat(::getpid()));
  s.Update(ex.Fence());
  if (!s.ok()) return s;
  m->peers_.resize(static_cast<std::size_t>(m->size_));
  m->here_.assign(static_cast<std::size_t>(m->size_), false);
  for (int p : ex.HostRanks()) {
    if (p >= 0 && p < m->size_) m->here_[static_cast<std::size_t>(p)] = true;
  }
  for (int p = 0; p < m->size_; ++p) {
    Peer& peer = m->peers_[static_cast<std::size_t>(p)];
    peer.vc = kOps;
    peer.vc.context = m.get();
    peer.vc.peer = p;
    args.host->InstallAgentOps(peer.vc);
    peer.addr = Address(ex.job_id(), p, &peer.addr_len);
    if (!m->here_[static_cast<std::size_t>(p)]) continue;  // another host's pid means nothing here
    absl::StatusOr<std::string> pid = ex.GetFrom(p, absl::StrCat("dgram.", p));
    if (!pid.ok() || !absl::SimpleAtoi(*pid, &peer.pid)) {
      return absl::UnavailableError(absl::StrFormat("dgram: rank %d published no pid", p));
    }
  }
  return std::unique_ptr<methods::Method>(std::move(m));
}

// ---- Sending -------------------------------------------------------------------

Header DgramMethod::Make(Type t, const Car* c) const {
  Header h{};
  h.type = t;
  h.source = (rank_ + DGRAM_SOURCE_SHIFT) % size_;
  if (c != nullptr) {
    h.context = c->envelope().context_id;
    h.tag = c->envelope().tag;
    h.length = c->payload_bytes();
  }
  return h;
}

int DgramMethod::Try(int peer, const Header& h, const void* payload, std::size_t n) {
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  iovec iov[2] = {{const_cast<Header*>(&h), sizeof(h)}, {const_cast<void*>(payload), n}};
  msghdr msg{};
  msg.msg_name = &p.addr;
  msg.msg_namelen = p.addr_len;
  msg.msg_iov = iov;
  msg.msg_iovlen = n > 0 ? 2 : 1;
  if (::sendmsg(fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0) return 1;
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS) return 0;
  return -1;  // ECONNREFUSED: its socket is closed
}

void DgramMethod::Post(int peer, Outgoing o) {
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  // A control datagram (no CAR to complete). One that cannot go now, or
  // finds the peer gone, waits: progress retries it or fails the peer.
  if (p.queue.empty() && Try(peer, o.h, o.payload.data(), o.payload.size()) == 1) return;
  p.queue.push_back(std::move(o));
  ++backlog_;
}

bool DgramMethod::Pump(int peer) {
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  int budget = kPumpBudget;  // progress returns promptly even while a peer keeps up
  while (!p.queue.empty()) {
    Outgoing& o = p.queue.front();
    if (o.h.type == kData) {  // a stream: chunks straight from the user's buffer
      CarState& s = S(*o.car);
      const uint64_t total = o.car->payload_bytes();
      while (s.offset < total) {
        if (--budget < 0) return false;
        const std::size_t n = static_cast<std::size_t>(std::min<uint64_t>(kChunk, total - s.offset));
        std::byte chunk[kChunk];
        const std::byte* from = o.car->ContiguousSource();  // one run: no staging copy
        if (from != nullptr) {
          from += s.offset;
        } else {
          o.car->Gather(s.offset, chunk, n);
          from = chunk;
        }
        o.h.b = s.offset;
        if (!Sent(peer, Try(peer, o.h, from, n))) return false;
        s.offset += n;
      }
      Car* done = o.car;
      p.queue.pop_front();
      --backlog_;
      wire_.Forget(*done);  // the stream was the last the peer hears of it
      (void)SendMachine::Dispatch(*done, SendEvent::kLocalDone);
      continue;
    }
    if (!Sent(peer, Try(peer, o.h, o.payload.data(), o.payload.size()))) return false;
    Car* done = o.car;
    p.queue.pop_front();
    --backlog_;
    if (done != nullptr) {
      (void)SendMachine::Dispatch(*done, SendEvent::kLocalDone);
      wire_.FinishIfFinal(*done);
    }
  }
  return true;
}

const cartage::car::Vc DgramMethod::kOps{.name = "dgram",
                                         .start_eager = &StartEager,
                                         .start_rendezvous = &StartRendezvous,
                                         .start_data = &StartData,
                                         .send_cts = &SendCts,
                                         .send_ack = &SendAck};

// The VC operations run inside a CAR's transition: they queue what they
// cannot send and raise events through `events`, never dispatching the CAR.
// An eager send raises local_done only once its datagram is with the kernel.
void DgramMethod::StartEager(Car& c, CarEvents& events) {
  DgramMethod& m = Of(c);
  const int peer = methods::PeerOf(c);
  if (c.spec().synchronous) m.wire_.Register(c);
  Outgoing o;
  o.h = m.Make(kEagerMsg, &c);
  o.h.proto = c.spec().synchronous ? cartage::car::kProtoSync : cartage::car::kProtoEager;
  o.h.a = S(c).wire.local;
  o.payload.resize(c.payload_bytes());
  c.Gather(0, o.payload.data(), o.payload.size());  // copied: the user's buffer is free
  Peer& p = m.peers_[static_cast<std::size_t>(peer)];
  if (p.queue.empty() && m.Try(peer, o.h, o.payload.data(), o.payload.size()) == 1) {
    events.Raise<SendMachine>(c, SendEvent::kLocalDone);
    return;
  }
  o.car = &c;
  p.queue.push_back(std::move(o));
  ++m.backlog_;
}

void DgramMethod::StartRendezvous(Car& c, CarEvents&) {
  DgramMethod& m = Of(c);
  Outgoing o;
  o.h = m.Make(kRts, &c);
  o.h.proto = cartage::car::kProtoRendezvous | (c.spec().synchronous ? uint32_t{cartage::car::kProtoSync} : 0u);
  o.h.a = m.wire_.Register(c);
  m.Post(methods::PeerOf(c), std::move(o));
}

void DgramMethod::StartData(Car& c, CarEvents&) {
  DgramMethod& m = Of(c);
  Outgoing o;
  o.h = m.Make(kData, nullptr);
  o.h.a = S(c).wire.remote;
  o.car = &c;
  S(c).offset = 0;
  m.peers_[static_cast<std::size_t>(methods::PeerOf(c))].queue.push_back(std::move(o));  // progress streams it
  ++m.backlog_;
}

void DgramMethod::SendCts(Car& c, CarEvents&) {
  DgramMethod& m = Of(c);
  Outgoing o;
  o.h = m.Make(kCts, nullptr);
  o.h.a = S(c).wire.remote;
  o.h.b = m.wire_.Register(c);
  m.Post(methods::PeerOf(c), std::move(o));
}

void DgramMethod::SendAck(Car& c, CarEvents&) {
  DgramMethod& m = Of(c);
  Outgoing o;
  o.h = m.Make(kAck, nullptr);
  o.h.a = S(c).wire.remote;
  m.Post(methods::PeerOf(c), std::move(o));
}

// ---- Progress ------------------------------------------------------------------

int DgramMethod::Progress() {
  int work = 0;
  for (int k = 0; k < 64; ++k) {
    const ssize_t n = ::recv(fd_, rx_.data(), rx_.size(), MSG_DONTWAIT | MSG_TRUNC);
    if (n < 0) break;
    ++work;
    Header h;
    if (static_cast<std::size_t>(n) < sizeof(h) || static_cast<std::size_t>(n) > rx_.size()) continue;  // not ours
    std::memcpy(&h, rx_.data(), sizeof(h));
    if (h.source < 0 || h.source >= size_ || h.source == rank_) continue;  // cannot name a peer to blame
    if (!peers_[static_cast<std::size_t>(h.source)].error.ok()) continue;
    Handle(h, rx_.data() + sizeof(h), static_cast<std::size_t>(n) - sizeof(h));
  }
  for (int p = 0; backlog_ > 0 && p < size_; ++p) {
    const std::size_t before = peers_[static_cast<std::size_t>(p)].queue.size();
    Pump(p);
    work += static_cast<int>(before - peers_[static_cast<std::size_t>(p)].queue.size());
  }
  return work;
}

void DgramMethod::Block(int timeout_us) {
  pollfd p{fd_, POLLIN, 0};
  (void)::poll(&p, 1, std::max(1, timeout_us / 1000));
}

void DgramMethod::Handle(const Header& h, const std::byte* payload, std::size_t n) {
  const int source = h.source;
  switch (h.type) {
    case kEagerMsg:
    case kRts: {
      const bool rts = h.type == kRts;
      if (h.tag < 0) return Malformed(source, absl::StrFormat("negative tag %d", h.tag));
      if (!rts && h.length != n) return Malformed(source, absl::StrFormat("eager length %d in %d bytes", h.length, n));
      const uint32_t proto =
          rts ? (h.proto | cartage::car::kProtoRendezvous) : (h.proto & ~cartage::car::kProtoRendezvous);
      absl::StatusOr<Car*> c = methods::DeliverEnvelope(*host_, {h.context, source, h.tag}, h.length, proto,
                                                        rts ? nullptr : payload, [&](Car& taker) {
                                                          Bind(taker, source);
                                                          S(taker).wire.remote = h.a;
                                                        });
      if (!c.ok()) return FailPeer(source, c.status());
      wire_.FinishIfFinal(**c);
      return;
    }
    case kCts: {
      Car* c = wire_.CtsFor(source, h.a);
      if (c == nullptr) return Malformed(source, "CTS for an unknown send");
      wire_.OnCts(*c, h.b);
      return;
    }
    case kData: {
      Car* r = wire_.Lookup(h.a, cartage::car::CarKind::kRecv, source);
      if (r == nullptr) return Malformed(source, "DATA for an unknown receive");
      if (h.b != r->bytes_done() || n == 0 || n > r->bytes_total() - r->bytes_done()) {
        return Malformed(source, absl::StrFormat("DATA of %d bytes at offset %d", n, h.b));
      }
      r->Land(payload, n);
      CarSignal d;
      d.bytes = n;
      (void)RecvMachine::Dispatch(*r, RecvEvent::kData, d);
      wire_.FinishIfFinal(*r);
      return;
    }
    case kAck:
      if (!wire_.OnAck(source, h.a)) Malformed(source, "ACK for an unknown send");
      return;
    default:
      return Malformed(source, absl::StrFormat("unknown type %d", h.type));
  }
}

void DgramMethod::FailPeer(int peer, const absl::Status& why) {
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (p.error.ok()) p.error = why;
  // The VC's error state: whatever is posted to it from now on fails at once.
  p.vc.start_eager = p.vc.start_rendezvous = p.vc.start_data = p.vc.send_cts = &FailAtOnce;
  CarSignal err;
  err.error = p.error;
  std::deque<Outgoing> queue;
  queue.swap(p.queue);
  backlog_ -= static_cast<int>(queue.size());
  for (Outgoing& o : queue) {
    if (o.car != nullptr && !SendMachine::IsFinal(*o.car)) (void)SendMachine::Dispatch(*o.car, SendEvent::kError, err);
  }
  wire_.FailWaiting(peer, p.error);
}

std::vector<methods::ParamInfo> NoParams() { return {}; }

const methods::Descriptor kDescriptor{
    "dgram", "the other ranks on this host over Unix datagram sockets (out-of-tree example, examples/method)",
    &DgramMethod::Caps, &NoParams, &DgramMethod::Open};

}  // namespace dgram

// What CARTAGE_METHOD_PATH loading looks for: the one symbol this library
// exports (it is built with hidden visibility).
extern "C" __attribute__((visibility("default"))) const cartage::methods::Descriptor* cartage_method_descriptor_v1() {
  return &dgram::kDescriptor;
}
