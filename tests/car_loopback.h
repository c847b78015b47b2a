// An in-process loopback standing in for a method, and the fixture the CAR
// machine tests drive through it: it moves bytes between a send CAR and a
// receive CAR in one process, one packet per ProgressOne() call, so tests
// can interleave arrival and posting at will.
#ifndef CARTAGE_TESTS_CAR_LOOPBACK_H_
#define CARTAGE_TESTS_CAR_LOOPBACK_H_

#include <algorithm>
#include <cstring>
#include <deque>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "car/car.h"
#include "car/car_pool.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "car/unexpected_fsm.h"
#include "car/vertex_fsm.h"
#include "fsm/trace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cartage::car::test {

using datatype::BasicType;
using datatype::Datatype;
using datatype::Op;
using datatype::OpKind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

inline constexpr int32_t kSource = 0;  // the sending "process"

struct Packet {
  enum Kind { kEnvelope, kData, kCts, kAck } kind = kEnvelope;
  uint64_t msg = 0;        // message id (the sending CAR's id)
  Car* sender = nullptr;   // for envelopes
  Car* target = nullptr;   // for CTS / ACK
  Envelope env;            // as the receiver sees it (rank = source)
  uint32_t proto = 0;
  uint64_t total = 0;
  std::vector<char> bytes;  // data chunks
};

inline Packet NewPacket(Packet::Kind kind, uint64_t msg = 0, Car* sender = nullptr) {
  Packet p;
  p.kind = kind;
  p.msg = msg;
  p.sender = sender;
  return p;
}

// What the loopback keeps in each CAR's method-private area.
struct Priv {
  Car* peer = nullptr;  // send <-> matched receive
};
inline Priv& PrivOf(Car& c) { return *static_cast<Priv*>(c.method_private()); }

class Loopback;
inline Loopback* g_loop = nullptr;

class Loopback {
 public:
  explicit Loopback(uint64_t chunk) : chunk_(chunk) { g_loop = this; }
  ~Loopback() { g_loop = nullptr; }

  CarPool pool{{.method_private_bytes = sizeof(Priv)}};
  std::deque<Packet> wire;
  std::vector<Car*> posted;
  std::vector<Car*> unexpected;
  std::vector<Car*> all;  // every CAR, released at the end
  absl::flat_hash_map<uint64_t, Car*> incoming;  // msg -> CAR taking its data
  std::vector<std::unique_ptr<char[]>> temps;
  uint64_t chunk_;

  static bool Matches(const Envelope& want, const Envelope& got) {
    return want.context_id == got.context_id &&
           (want.rank == kAnySource || want.rank == got.rank) &&
           (want.tag == kAnyTag || want.tag == got.tag);
  }

  Car* Make(const CarSpec& spec) {
    absl::StatusOr<Car*> c = pool.Create(spec);
    EXPECT_TRUE(c.ok()) << c.status();
    new (c.value()->method_private()) Priv();
    all.push_back(*c);
    return *c;
  }

  void QueueData(uint64_t msg, const char* src, uint64_t n) {
    for (uint64_t off = 0; off < n; off += chunk_) {
      Packet p = NewPacket(Packet::kData, msg);
      p.bytes.assign(src + off, src + std::min(n, off + chunk_));
      wire.push_back(std::move(p));
    }
  }
  static const char* SourceOf(const Car& s) {
    return s.pack_buf() != nullptr ? static_cast<const char*>(s.pack_buf())
                                   : static_cast<const char*>(s.segment().buf) + s.segment().first;
  }

  // Delivers one packet as the receiving side's progress engine would.
  absl::Status ProgressOne() {
    if (wire.empty()) return absl::OutOfRangeError("nothing on the wire");
    Packet p = std::move(wire.front());
    wire.pop_front();
    switch (p.kind) {
      case Packet::kEnvelope: return OnEnvelope(p);
      case Packet::kData: return OnData(p);
      case Packet::kCts: return SendMachine::Dispatch(*p.target, SendEvent::kCts);
      case Packet::kAck: return SendMachine::Dispatch(*p.target, SendEvent::kAck);
    }
    return absl::InternalError("bad packet");
  }
  absl::Status Drain() {
    absl::Status s;
    while (!wire.empty()) s.Update(ProgressOne());
    return s;
  }

  absl::Status OnEnvelope(const Packet& p) {
    CarSignal sig;
    sig.bytes = p.total;
    sig.proto = p.proto;
    sig.source = p.env.rank;
    sig.tag = p.env.tag;
    for (auto it = posted.begin(); it != posted.end(); ++it) {
      if (!Matches((*it)->envelope(), p.env)) continue;
      Car* r = *it;
      posted.erase(it);
      PrivOf(*r).peer = p.sender;
      incoming[p.msg] = r;
      return RecvMachine::Dispatch(*r, RecvEvent::kEnvelope, sig);
    }
    // No receive: an unexpected CAR with a temporary buffer.
    temps.push_back(std::make_unique<char[]>(std::max<uint64_t>(p.total, 1)));
    CarSpec u;
    u.kind = CarKind::kUnexpected;
    u.flags = CarFlag::kRecvData;
    u.envelope = p.env;
    if ((p.proto & kProtoRendezvous) == 0) {
      u.pack_buf = temps.back().get();
      u.pack_size = p.total;
    }
    Car* car = Make(u);
    PrivOf(*car).peer = p.sender;
    unexpected.push_back(car);
    incoming[p.msg] = car;
    return UnexpectedMachine::Dispatch(*car, UnexpectedEvent::kEnvelope, sig);
  }

  absl::Status OnData(const Packet& p) {
    Car* c = incoming.at(p.msg);
    // Seed 002's switch: once matched, the unexpected CAR points at the receive.
    if (c->kind() == CarKind::kUnexpected && c->matched() != nullptr) c = c->matched();
    std::span<std::byte> zone = c->LandingZone();
    const size_t n = std::min(zone.size(), p.bytes.size());  // the rest of a truncated message is dropped
    if (n > 0) std::memcpy(zone.data(), p.bytes.data(), n);
    CarSignal sig;
    sig.bytes = p.bytes.size();
    return c->kind() == CarKind::kUnexpected
               ? UnexpectedMachine::Dispatch(*c, UnexpectedEvent::kData, sig)
               : RecvMachine::Dispatch(*c, RecvEvent::kData, sig);
  }

  // ---- Vc operations --------------------------------------------------
  static void StartEager(Car& s, CarEvents& events) {
    Packet p = NewPacket(Packet::kEnvelope, s.id(), &s);
    p.env = {s.envelope().context_id, kSource, s.envelope().tag};
    p.proto = s.spec().synchronous ? kProtoSync : kProtoEager;
    p.total = s.payload_bytes();
    g_loop->wire.push_back(p);
    g_loop->QueueData(s.id(), SourceOf(s), p.total);
    events.Raise<SendMachine>(s, SendEvent::kLocalDone);  // copied: the buffer is free
  }
  static void StartRendezvous(Car& s, CarEvents&) {
    Packet p = NewPacket(Packet::kEnvelope, s.id(), &s);
    p.env = {s.envelope().context_id, kSource, s.envelope().tag};
    p.proto = kProtoRendezvous;
    p.total = s.payload_bytes();
    g_loop->wire.push_back(p);
  }
  static void StartData(Car& s, CarEvents& events) {
    g_loop->QueueData(s.id(), SourceOf(s), s.payload_bytes());
    events.Raise<SendMachine>(s, SendEvent::kLocalDone);
  }
  static void PostRecv(Car& r, CarEvents& events) {
    auto& uq = g_loop->unexpected;
    for (auto it = uq.begin(); it != uq.end(); ++it) {
      if (!Matches(r.envelope(), (*it)->envelope())) continue;
      Car* u = *it;
      uq.erase(it);
      PrivOf(r).peer = PrivOf(*u).peer;
      CarSignal sig;
      sig.peer = &r;
      events.Raise<UnexpectedMachine>(*u, UnexpectedEvent::kMatch, sig);
      return;
    }
    g_loop->posted.push_back(&r);
  }
  static void UnpostRecv(Car& r, CarEvents&) {
    std::erase(g_loop->posted, &r);
  }
  static void SendCts(Car& r, CarEvents&) {
    Car* sender = PrivOf(r).peer;
    g_loop->incoming[sender->id()] = &r;
    Packet p = NewPacket(Packet::kCts, sender->id());
    p.target = sender;
    g_loop->wire.push_back(p);
  }
  static void SendAck(Car& r, CarEvents&) {
    Packet p = NewPacket(Packet::kAck);
    p.target = PrivOf(r).peer;
    g_loop->wire.push_back(p);
  }
};

inline const Vc kLoopback{.name = "loopback",
                   .start_eager = &Loopback::StartEager,
                   .start_rendezvous = &Loopback::StartRendezvous,
                   .start_data = &Loopback::StartData,
                   .post_recv = &Loopback::PostRecv,
                   .unpost_recv = &Loopback::UnpostRecv,
                   .send_cts = &Loopback::SendCts,
                   .send_ack = &Loopback::SendAck};

class CarFsmTest : public ::testing::Test {
 protected:
  explicit CarFsmTest(uint64_t chunk = 1 << 20) : loop_(chunk) {}

  void TearDown() override {
    // No CAR may be left mid-flight, and every one goes back to the pool.
    for (Car* c : loop_.all) {
      const bool final = c->kind() == CarKind::kSend         ? SendMachine::IsFinal(*c)
                         : c->kind() == CarKind::kRecv       ? RecvMachine::IsFinal(*c)
                         : c->kind() == CarKind::kUnexpected ? UnexpectedMachine::IsFinal(*c)
                                                             : VertexMachine::IsFinal(*c);
      EXPECT_TRUE(final) << KindName(c->kind()) << " CAR #" << c->id() << " left in state "
                         << c->state_name();
      loop_.pool.Release(c);
    }
    EXPECT_EQ(loop_.pool.live(), 0u);
  }

  Car* Send(const std::vector<char>& data, int32_t tag, uint64_t eager_limit = 1 << 20,
            base::Completion* done = nullptr, bool sync = false) {
    CarSpec s;
    s.kind = CarKind::kSend;
    s.flags = CarFlag::kSendData;
    s.envelope = {0, 1, tag};
    s.segment = Segment::Of(data.data(), data.size(), BasicType::kByte);
    s.counter = done ? done : &send_done_;
    s.counter->pending++;
    s.vc = &kLoopback;
    s.eager_limit = eager_limit;
    s.synchronous = sync;
    return loop_.Make(s);
  }
  Car* Recv(std::vector<char>& buf, int32_t tag, int32_t rank = kSource, base::Completion* done = nullptr) {
    CarSpec s;
    s.kind = CarKind::kRecv;
    s.flags = CarFlag::kRecvData;
    s.envelope = {0, rank, tag};
    s.segment = Segment::Of(buf.data(), buf.size(), BasicType::kByte);
    s.counter = done ? done : &recv_done_;
    s.counter->pending++;
    s.vc = &kLoopback;
    return loop_.Make(s);
  }
  static std::vector<char> Pattern(size_t n, int seed) {
    std::vector<char> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + seed * 7) & 0xff);
    return v;
  }
  static absl::Status Post(Car* c) {
    return c->kind() == CarKind::kSend ? SendMachine::Dispatch(*c, SendEvent::kPost)
                                       : RecvMachine::Dispatch(*c, RecvEvent::kPost);
  }

  Loopback loop_;
  base::Completion send_done_, recv_done_;
};

class CarFsmChunkedTest : public CarFsmTest {
 protected:
  CarFsmChunkedTest() : CarFsmTest(/*chunk=*/100) {}
};

}  // namespace cartage::car::test

#endif  // CARTAGE_TESTS_CAR_LOOPBACK_H_
