// The CAR machines driven end to end through an in-process loopback VC:
// eager, rendezvous, synchronous, unexpected ("if we buffer, you suffer"),
// truncation, cancel, dependencies, schedule vertices, and failures.
//
// The loopback is test scaffolding standing in for a method: it moves bytes
// between a send CAR and a receive CAR in one process, one packet per
// ProgressOne() call, so tests can interleave arrival and posting at will.
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

namespace cartage::car {
namespace {

using datatype::BasicType;
using datatype::Datatype;
using datatype::Op;
using datatype::OpKind;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int32_t kSource = 0;  // the sending "process"

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

Packet NewPacket(Packet::Kind kind, uint64_t msg = 0, Car* sender = nullptr) {
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
Priv& PrivOf(Car& c) { return *static_cast<Priv*>(c.method_private()); }

class Loopback;
Loopback* g_loop = nullptr;

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

const Vc kLoopback{.name = "loopback",
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

TEST_F(CarFsmTest, EagerToPostedReceiveDeliversExactBytes) {
  const std::vector<char> data = Pattern(1000, 1);
  std::vector<char> buf(1000, 0);
  Car* r = Recv(buf, 5);
  ASSERT_TRUE(Post(r).ok());
  EXPECT_EQ(RecvMachine::StateOf(*r), RecvState::kPosted);
  Car* s = Send(data, 5);
  ASSERT_TRUE(Post(s).ok());
  EXPECT_EQ(SendMachine::StateOf(*s), SendState::kDone) << "eager: done once the data left";
  EXPECT_TRUE(send_done_.done());
  EXPECT_FALSE(recv_done_.done());
  ASSERT_TRUE(loop_.Drain().ok());
  EXPECT_EQ(RecvMachine::StateOf(*r), RecvState::kDone);
  EXPECT_EQ(buf, data);
  EXPECT_TRUE(recv_done_.done());
  EXPECT_TRUE(recv_done_.status.ok());
  EXPECT_EQ(recv_done_.bytes, 1000u);
  EXPECT_EQ(recv_done_.source, kSource);
  EXPECT_EQ(recv_done_.tag, 5);
  EXPECT_EQ(send_done_.bytes, 1000u);
}

TEST_F(CarFsmTest, StateSequencesAreTraced) {
  const std::vector<char> data = Pattern(64, 2);
  std::vector<char> buf(64);
  fsm::TraceRecorder rec(64);
  fsm::ScopedTraceSink on(&rec);
  Car* r = Recv(buf, 1);
  Car* s = Send(data, 1, /*eager_limit=*/16);  // rendezvous
  ASSERT_TRUE(Post(r).ok());
  ASSERT_TRUE(Post(s).ok());
  ASSERT_TRUE(loop_.Drain().ok());
  EXPECT_EQ(buf, data);
  EXPECT_EQ(rec.ToText(),
            absl::StrFormat("car_recv#%d: idle --post--> posted\n"
                            "car_send#%d: idle --post--> rts_sent\n"
                            "car_recv#%d: posted --envelope--> cts_sent\n"
                            "car_send#%d: rts_sent --cts--> data_in_flight\n"
                            "car_send#%d: data_in_flight --local_done--> done\n"
                            "car_recv#%d: cts_sent --data--> done\n",
                            r->id(), s->id(), r->id(), s->id(), s->id(), r->id()));
}

TEST_F(CarFsmTest, SynchronousSendCompletesOnlyAfterTheMatch) {
  const std::vector<char> data = Pattern(10, 3);
  std::vector<char> buf(10);
  Car* s = Send(data, 9, 1 << 20, nullptr, /*sync=*/true);
  ASSERT_TRUE(Post(s).ok());
  ASSERT_TRUE(loop_.Drain().ok());  // arrives unexpected: nobody matched it
  EXPECT_EQ(SendMachine::StateOf(*s), SendState::kWaitAck);
  EXPECT_FALSE(send_done_.done());
  Car* r = Recv(buf, 9);
  ASSERT_TRUE(Post(r).ok());  // matches the unexpected message, sends the ACK
  EXPECT_FALSE(send_done_.done()) << "the ACK is still on the wire";
  ASSERT_TRUE(loop_.Drain().ok());
  EXPECT_EQ(SendMachine::StateOf(*s), SendState::kDone);
  EXPECT_TRUE(send_done_.done());
  EXPECT_EQ(buf, data);
}

TEST_F(CarFsmTest, AckBeforeLocalCompletionIsFine) {
  // A VC whose NIC reports local completion late: the receiver's ACK
  // overtakes it (eager_in_flight -> acked_early -> done).
  const Vc slow{.name = "slow", .start_eager = [](Car&, CarEvents&) {}};
  const std::vector<char> data = Pattern(4, 4);
  CarSpec spec;
  spec.kind = CarKind::kSend;
  spec.flags = CarFlag::kSendData;
  spec.envelope = {0, 1, 1};
  spec.segment = Segment::Of(data.data(), data.size(), BasicType::kByte);
  spec.counter = &send_done_;
  spec.vc = &slow;
  spec.eager_limit = 64;
  spec.synchronous = true;
  send_done_.pending = 1;
  Car* s = loop_.Make(spec);
  ASSERT_TRUE(SendMachine::Dispatch(*s, SendEvent::kPost).ok());
  EXPECT_EQ(SendMachine::StateOf(*s), SendState::kEagerInFlight);
  ASSERT_TRUE(SendMachine::Dispatch(*s, SendEvent::kAck).ok());
  EXPECT_EQ(SendMachine::StateOf(*s), SendState::kAckedEarly);
  EXPECT_FALSE(send_done_.done()) << "the buffer is not free yet";
  ASSERT_TRUE(SendMachine::Dispatch(*s, SendEvent::kLocalDone).ok());
  EXPECT_EQ(SendMachine::StateOf(*s), SendState::kDone);
  EXPECT_TRUE(send_done_.done());
  // A duplicate ACK is a protocol error the machine names.
  EXPECT_EQ(SendMachine::Dispatch(*s, SendEvent::kAck).message(),
            absl::StrFormat("fsm 'car_send' instance %d: event 'ack' is not handled in state 'done'",
                            s->id()));
}

class CarFsmChunkedTest : public CarFsmTest {
 protected:
  CarFsmChunkedTest() : CarFsmTest(/*chunk=*/100) {}
};

TEST_F(CarFsmChunkedTest, IfWeBufferYouSuffer) {
  // 1000 bytes in 10 chunks; 3 arrive before the receive is posted.
  const std::vector<char> data = Pattern(1000, 5);
  std::vector<char> buf(1000, 0);
  Car* s = Send(data, 3);
  ASSERT_TRUE(Post(s).ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(loop_.ProgressOne().ok());  // envelope + 3 chunks
  ASSERT_EQ(loop_.unexpected.size(), 1u);
  Car* u = loop_.unexpected[0];
  EXPECT_EQ(UnexpectedMachine::StateOf(*u), UnexpectedState::kArriving);
  EXPECT_EQ(u->bytes_done(), 300u);

  Car* r = Recv(buf, 3);
  ASSERT_TRUE(Post(r).ok());
  EXPECT_EQ(UnexpectedMachine::StateOf(*u), UnexpectedState::kHandedOff);
  EXPECT_EQ(u->matched(), r);
  EXPECT_EQ(RecvMachine::StateOf(*r), RecvState::kReceiving);
  EXPECT_EQ(0, std::memcmp(buf.data(), data.data(), 300)) << "bytes so far copied";
  ASSERT_TRUE(loop_.Drain().ok());
  EXPECT_EQ(buf, data);
  EXPECT_EQ(RecvMachine::StateOf(*r), RecvState::kDone);
  EXPECT_EQ(recv_done_.bytes, 1000u);
  // Only what arrived before the match went through the temporary buffer.
  EXPECT_EQ(u->bytes_copied(), 300u);
  EXPECT_EQ(u->bytes_done(), 300u) << "the rest bypassed the unexpected CAR";
}

// UNPACK|MOP (seed 002's recv_mop): the message lands in the packed buffer
// in chunks cut anywhere, then is reduced into every other int32 of the user
// buffer; a message that ends inside an element fails the receive.
TEST_F(CarFsmChunkedTest, ReceiveWithMopReducesIntoTheSegment) {
  constexpr int kN = 250;
  std::vector<int32_t> incoming(kN);
  for (int i = 0; i < kN; ++i) incoming[static_cast<std::size_t>(i)] = i * 3 - 100;
  std::vector<char> data(kN * sizeof(int32_t));
  std::memcpy(data.data(), incoming.data(), data.size());
  std::vector<int32_t> accum(2 * kN);
  for (int i = 0; i < 2 * kN; ++i) accum[static_cast<std::size_t>(i)] = 1000 + i;
  const Datatype every_other = *Datatype::Vector(kN, 1, 2, Datatype::Basic(BasicType::kInt32));
  const Op sum(OpKind::kSum);
  std::vector<char> temp(data.size());
  auto reduce_recv = [&](int32_t tag, base::Completion* done) {
    CarSpec s;
    s.kind = CarKind::kRecv;
    s.flags = CarFlag::kRecvData | CarFlag::kUnpack | CarFlag::kMop;
    s.envelope = {0, kSource, tag};
    s.segment = Segment::Of(accum.data(), 1, every_other);
    s.pack_buf = temp.data();
    s.pack_size = temp.size();
    s.mop = &sum;
    s.counter = done;
    done->pending++;
    s.vc = &kLoopback;
    return loop_.Make(s);
  };
  base::Completion done;
  Car* r = reduce_recv(8, &done);
  ASSERT_NE(r, nullptr);
  ASSERT_TRUE(Post(r).ok());
  ASSERT_TRUE(Post(Send(data, 8)).ok());
  ASSERT_TRUE(loop_.Drain().ok());
  ASSERT_TRUE(done.done());
  ASSERT_TRUE(done.status.ok()) << done.status;
  for (int i = 0; i < 2 * kN; ++i) {
    const int32_t want = i % 2 == 0 ? 1000 + i + incoming[static_cast<std::size_t>(i / 2)] : 1000 + i;
    ASSERT_EQ(accum[static_cast<std::size_t>(i)], want) << "element " << i;
  }
  // 998 bytes: the last element is cut.
  const std::vector<int32_t> before = accum;
  base::Completion cut;
  Car* r2 = reduce_recv(9, &cut);
  ASSERT_TRUE(Post(r2).ok());
  ASSERT_TRUE(Post(Send(std::vector<char>(data.begin(), data.end() - 2), 9)).ok());
  ASSERT_TRUE(loop_.Drain().ok());
  ASSERT_TRUE(cut.done());
  EXPECT_EQ(cut.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(cut.status.message(), HasSubstr("bytes [0, 998) cut an element of 4 bytes"));
  EXPECT_EQ(accum, before) << "a refused reduction writes nothing";
}

TEST_F(CarFsmChunkedTest, FullyBufferedUnexpectedIsDeliveredOnPost) {
  const std::vector<char> data = Pattern(250, 6);
  std::vector<char> buf(250);
  ASSERT_TRUE(Post(Send(data, 4)).ok());
  ASSERT_TRUE(loop_.Drain().ok());
  Car* u = loop_.unexpected.at(0);
  EXPECT_EQ(UnexpectedMachine::StateOf(*u), UnexpectedState::kBuffered);
  Car* r = Recv(buf, kAnyTag, kAnySource);
  ASSERT_TRUE(Post(r).ok());
  EXPECT_EQ(RecvMachine::StateOf(*r), RecvState::kDone);
  EXPECT_EQ(buf, data);
  EXPECT_EQ(u->bytes_copied(), 250u);
  EXPECT_EQ(recv_done_.tag, 4) << "a wildcard receive reports the matched tag";
}

TEST_F(CarFsmChunkedTest, RendezvousHeldUnexpectedThenMatched) {
  const std::vector<char> data = Pattern(777, 7);
  std::vector<char> buf(777);
  Car* s = Send(data, 2, /*eager_limit=*/64);
  ASSERT_TRUE(Post(s).ok());
  ASSERT_TRUE(loop_.Drain().ok());
  Car* u = loop_.unexpected.at(0);
  EXPECT_EQ(UnexpectedMachine::StateOf(*u), UnexpectedState::kRtsHeld);
  EXPECT_EQ(SendMachine::StateOf(*s), SendState::kRtsSent);
  Car* r = Recv(buf, 2);
  ASSERT_TRUE(Post(r).ok());
  EXPECT_EQ(RecvMachine::StateOf(*r), RecvState::kCtsSent);
  ASSERT_TRUE(loop_.Drain().ok());
  EXPECT_EQ(buf, data);
  EXPECT_EQ(u->bytes_copied(), 0u) << "rendezvous data never touches a temporary buffer";
  EXPECT_TRUE(send_done_.done());
  EXPECT_TRUE(recv_done_.done());
}

TEST_F(CarFsmChunkedTest, TruncationFailsWritesNothingPastTheBufferAndLeavesTheWireUsable) {
  const std::vector<char> big = Pattern(500, 8);
  std::vector<char> buf(300, 'g');
  // A receive of 200 bytes inside a guarded 300-byte region.
  CarSpec spec;
  spec.kind = CarKind::kRecv;
  spec.flags = CarFlag::kRecvData;
  spec.envelope = {0, kSource, 6};
  spec.segment = Segment::Of(buf.data(), 200, BasicType::kByte);
  spec.counter = &recv_done_;
  spec.vc = &kLoopback;
  recv_done_.pending = 1;
  Car* r = loop_.Make(spec);
  ASSERT_TRUE(Post(r).ok());
  ASSERT_TRUE(Post(Send(big, 6)).ok());
  ASSERT_TRUE(loop_.Drain().ok());
  EXPECT_EQ(RecvMachine::StateOf(*r), RecvState::kFailed);
  EXPECT_EQ(recv_done_.status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(recv_done_.status.message(),
            absl::StrFormat("recv #%d from rank 0 (tag 6, context 0): message of 500 bytes "
                            "truncated to the 200-byte receive buffer",
                            r->id()));
  EXPECT_EQ(0, std::memcmp(buf.data(), big.data(), 200));
  EXPECT_TRUE(std::all_of(buf.begin() + 200, buf.end(), [](char c) { return c == 'g'; }));
  // The next message on the same path arrives intact.
  const std::vector<char> next = Pattern(50, 9);
  std::vector<char> buf2(50);
  base::Completion done2;
  Car* r2 = Recv(buf2, 6, kSource, &done2);
  ASSERT_TRUE(Post(r2).ok());
  ASSERT_TRUE(Post(Send(next, 6)).ok());
  ASSERT_TRUE(loop_.Drain().ok());
  EXPECT_EQ(buf2, next);
  EXPECT_TRUE(done2.status.ok());
}

TEST_F(CarFsmTest, ZeroByteMessage) {
  const std::vector<char> none;
  std::vector<char> buf;
  Car* r = Recv(buf, 0);
  ASSERT_TRUE(Post(r).ok());
  ASSERT_TRUE(Post(Send(none, 0)).ok());
  ASSERT_TRUE(loop_.Drain().ok());
  EXPECT_EQ(RecvMachine::StateOf(*r), RecvState::kDone);
  EXPECT_EQ(recv_done_.bytes, 0u);
}

TEST_F(CarFsmTest, WholeEagerEventDeliversTruncatesStashesAndDrops) {
  const std::vector<char> data = Pattern(50, 13);
  CarSignal eager;
  eager.bytes = 50;
  eager.source = kSource;
  eager.tag = 4;
  eager.data = reinterpret_cast<const std::byte*>(data.data());
  // To a posted receive that fits: done in one transition.
  std::vector<char> buf(100, 0);
  Car* r = Recv(buf, 4);
  ASSERT_TRUE(Post(r).ok());
  loop_.posted.clear();  // as if the method had matched it
  ASSERT_TRUE(RecvMachine::Dispatch(*r, RecvEvent::kEager, eager).ok());
  EXPECT_EQ(RecvMachine::StateOf(*r), RecvState::kDone);
  EXPECT_EQ(std::vector<char>(buf.begin(), buf.begin() + 50), data);
  EXPECT_EQ(recv_done_.bytes, 50u);
  // To one that is too small: what fits lands, nothing past it, kOutOfRange.
  std::vector<char> small(20, 'g');
  base::Completion small_done;
  CarSpec spec;
  spec.kind = CarKind::kRecv;
  spec.flags = CarFlag::kRecvData;
  spec.envelope = {0, kSource, 4};
  spec.segment = Segment::Of(small.data(), 10, BasicType::kByte);
  spec.counter = &small_done;
  spec.vc = &kLoopback;
  small_done.pending = 1;
  Car* t = loop_.Make(spec);
  ASSERT_TRUE(Post(t).ok());
  loop_.posted.clear();
  ASSERT_TRUE(RecvMachine::Dispatch(*t, RecvEvent::kEager, eager).ok());
  EXPECT_EQ(RecvMachine::StateOf(*t), RecvState::kFailed);
  EXPECT_EQ(small_done.status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(std::vector<char>(small.begin(), small.begin() + 10), std::vector<char>(data.begin(), data.begin() + 10));
  EXPECT_TRUE(std::all_of(small.begin() + 10, small.end(), [](char c) { return c == 'g'; }));
  // Unexpected: stashed whole in the temporary buffer, then handed to a receive.
  std::vector<char> temp(64), out(50, 0);
  CarSpec u;
  u.kind = CarKind::kUnexpected;
  u.flags = CarFlag::kRecvData;
  u.envelope = {0, kSource, 4};
  u.pack_buf = temp.data();
  u.pack_size = temp.size();
  Car* stash = loop_.Make(u);
  ASSERT_TRUE(UnexpectedMachine::Dispatch(*stash, UnexpectedEvent::kEager, eager).ok());
  EXPECT_EQ(UnexpectedMachine::StateOf(*stash), UnexpectedState::kBuffered);
  loop_.unexpected.push_back(stash);
  base::Completion out_done;
  Car* late = Recv(out, 4, kSource, &out_done);
  ASSERT_TRUE(Post(late).ok());
  EXPECT_EQ(RecvMachine::StateOf(*late), RecvState::kDone);
  EXPECT_EQ(out, data);
  EXPECT_EQ(stash->bytes_copied(), 50u);
  // A temporary buffer too small: dropped with kResourceExhausted.
  u.pack_size = 16;
  Car* tiny = loop_.Make(u);
  ASSERT_TRUE(UnexpectedMachine::Dispatch(*tiny, UnexpectedEvent::kEager, eager).ok());
  EXPECT_EQ(UnexpectedMachine::StateOf(*tiny), UnexpectedState::kDropped);
  EXPECT_EQ(tiny->status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(CarFsmTest, CancelPostedReceive) {
  std::vector<char> buf(8);
  Car* r = Recv(buf, 1);
  ASSERT_TRUE(Post(r).ok());
  ASSERT_EQ(loop_.posted.size(), 1u);
  ASSERT_TRUE(RecvMachine::Dispatch(*r, RecvEvent::kCancel).ok());
  EXPECT_EQ(RecvMachine::StateOf(*r), RecvState::kCancelled);
  EXPECT_TRUE(loop_.posted.empty()) << "taken out of the matcher";
  EXPECT_EQ(recv_done_.status.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(recv_done_.done());
  // A matched receive can no longer be cancelled.
  base::Completion done2;
  std::vector<char> buf2(8);
  Car* r2 = Recv(buf2, 2, kSource, &done2);
  ASSERT_TRUE(Post(r2).ok());
  ASSERT_TRUE(Post(Send(Pattern(8, 1), 2)).ok());
  ASSERT_TRUE(loop_.ProgressOne().ok());  // envelope only
  const absl::Status late = RecvMachine::Dispatch(*r2, RecvEvent::kCancel);
  EXPECT_EQ(late.message(), absl::StrFormat("fsm 'car_recv' instance %d: event 'cancel' is not "
                                            "handled in state 'receiving'", r2->id()));
  ASSERT_TRUE(loop_.Drain().ok());
  EXPECT_TRUE(done2.status.ok());
}

TEST_F(CarFsmTest, WireErrorFailsTheCarNamingOperationAndPeer) {
  std::vector<char> buf(8);
  Car* r = Recv(buf, 3);
  ASSERT_TRUE(Post(r).ok());
  CarSignal err;
  err.error = absl::UnavailableError("peer rank 0 closed the connection");
  ASSERT_TRUE(RecvMachine::Dispatch(*r, RecvEvent::kError, err).ok());
  EXPECT_EQ(RecvMachine::StateOf(*r), RecvState::kFailed);
  EXPECT_EQ(recv_done_.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(recv_done_.status.message(),
            absl::StrFormat("recv #%d from rank 0 (tag 3, context 0): peer rank 0 closed the "
                            "connection", r->id()));
  loop_.posted.clear();
}

TEST_F(CarFsmTest, MissingVcOperationFailsTheCar) {
  const Vc partial{.name = "partial"};
  const std::vector<char> data = Pattern(8, 1);
  CarSpec s;
  s.kind = CarKind::kSend;
  s.flags = CarFlag::kSendData;
  s.envelope = {0, 4, 1};
  s.segment = Segment::Of(data.data(), data.size(), BasicType::kByte);
  s.counter = &send_done_;
  s.vc = &partial;
  s.eager_limit = 64;
  send_done_.pending = 1;
  Car* c = loop_.Make(s);
  ASSERT_TRUE(SendMachine::Dispatch(*c, SendEvent::kPost).ok());
  EXPECT_EQ(SendMachine::StateOf(*c), SendState::kFailed);
  EXPECT_EQ(send_done_.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(send_done_.status.message(),
            absl::StrFormat("send #%d to rank 4 (tag 1, context 0): VC 'partial' has no "
                            "start_eager operation", c->id()));
}

TEST_F(CarFsmTest, UnhandledWireEventIsAnErrorAndChangesNothing) {
  Car* s = Send(Pattern(8, 1), 1);
  const absl::Status st = SendMachine::Dispatch(*s, SendEvent::kCts);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(st.message(),
            absl::StrFormat("fsm 'car_send' instance %d: event 'cts' is not handled in state 'idle'",
                            s->id()));
  EXPECT_EQ(SendMachine::StateOf(*s), SendState::kIdle);
  ASSERT_TRUE(SendMachine::Dispatch(*s, SendEvent::kCancel).ok());
}

// A receive that supplies its buffer and/or its progress to a send (seed 002's
// forward): the receive is built first, the send names it.
struct Forward {
  Car* recv;
  Car* send;
};
Forward MakeForward(Loopback& loop, base::Completion* done, std::vector<char>& staging, int32_t in_tag,
                    int32_t out_tag, bool supply_buffer, const std::vector<char>* own_data) {
  CarSpec r;
  r.kind = CarKind::kRecv;
  r.flags = CarFlag::kRecvData | CarFlag::kSupplyProgress;
  r.envelope = {0, kSource, in_tag};
  r.counter = done;
  r.vc = &kLoopback;
  if (supply_buffer) {
    r.flags = r.flags | CarFlag::kSupplyPackedBuf;
    r.pack_buf = staging.data();
    r.pack_size = staging.size();
  } else {
    r.segment = Segment::Of(staging.data(), staging.size(), BasicType::kByte);
  }
  Car* recv = loop.Make(r);
  CarSpec s;
  s.kind = CarKind::kSend;
  s.flags = CarFlag::kSendData | CarFlag::kProgressDependency;
  s.envelope = {0, 2, out_tag};
  s.counter = done;
  s.vc = &kLoopback;
  s.eager_limit = 1 << 20;
  s.progress_dep = recv;
  if (supply_buffer) {
    s.flags = s.flags | CarFlag::kPackedBufDependency;
    s.buf_dep = recv;
  } else {
    s.segment = Segment::Of(own_data->data(), own_data->size(), BasicType::kByte);
  }
  done->pending += 2;
  return {recv, loop.Make(s)};
}

TEST_F(CarFsmChunkedTest, ForwardWithReceiverSuppliedBuffer) {
  // The receive lands 450 bytes in its packed buffer, hands the buffer to the
  // send, and the send forwards exactly those bytes once the receive is done.
  const std::vector<char> data = Pattern(450, 10);
  std::vector<char> staging(450, 0), out(450, 0);
  base::Completion fwd_done, out_done;
  Forward f = MakeForward(loop_, &fwd_done, staging, 10, 11, /*supply_buffer=*/true, nullptr);
  ASSERT_TRUE(Post(f.send).ok());
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kWaitDeps);
  EXPECT_EQ(f.send->deps_pending(), 2u);
  ASSERT_TRUE(Post(f.recv).ok());
  EXPECT_EQ(f.send->pack_buf(), staging.data()) << "the receive supplied its buffer at post";
  EXPECT_EQ(f.send->deps_pending(), 1u);
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kWaitDeps);

  Car* final_recv = Recv(out, 11, kSource, &out_done);
  ASSERT_TRUE(Post(final_recv).ok());
  ASSERT_TRUE(Post(Send(data, 10)).ok());
  ASSERT_TRUE(loop_.Drain().ok());
  EXPECT_EQ(staging, data);
  EXPECT_EQ(out, data) << "forwarded from the supplied buffer";
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kDone);
  EXPECT_TRUE(fwd_done.done());
  EXPECT_TRUE(fwd_done.status.ok());
  EXPECT_EQ(fwd_done.bytes, 900u) << "450 in, 450 out";
  EXPECT_TRUE(out_done.done());
}

TEST_F(CarFsmTest, ProgressDependencyHoldsASendUntilItsSupplierCompletes) {
  const std::vector<char> payload = Pattern(64, 11);
  std::vector<char> in(64), out(64);
  base::Completion chain, out_done;
  Forward f = MakeForward(loop_, &chain, in, 20, 21, /*supply_buffer=*/false, &payload);
  ASSERT_TRUE(Post(f.send).ok());
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kWaitDeps);
  ASSERT_TRUE(Post(f.recv).ok());
  EXPECT_TRUE(loop_.wire.empty()) << "nothing sent before the dependency is met";
  ASSERT_TRUE(Post(Send(Pattern(64, 12), 20)).ok());
  ASSERT_TRUE(loop_.ProgressOne().ok());  // envelope for the receive
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kWaitDeps);
  ASSERT_TRUE(loop_.ProgressOne().ok());  // its data: the receive completes, the send starts
  EXPECT_EQ(RecvMachine::StateOf(*f.recv), RecvState::kDone);
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kDone);
  EXPECT_TRUE(chain.done());
  Car* final_recv = Recv(out, 21, kSource, &out_done);
  ASSERT_TRUE(Post(final_recv).ok());
  ASSERT_TRUE(loop_.Drain().ok());
  EXPECT_EQ(out, payload);
}

TEST_F(CarFsmTest, FailedSupplierFailsItsDependent) {
  const std::vector<char> payload = Pattern(8, 1);
  std::vector<char> in(8);
  base::Completion chain;
  Forward f = MakeForward(loop_, &chain, in, 1, 2, /*supply_buffer=*/false, &payload);
  ASSERT_TRUE(Post(f.send).ok());
  ASSERT_TRUE(Post(f.recv).ok());
  CarSignal err;
  err.error = absl::UnavailableError("rank 0 died");
  ASSERT_TRUE(RecvMachine::Dispatch(*f.recv, RecvEvent::kError, err).ok());
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kFailed);
  EXPECT_TRUE(chain.done()) << "nobody is left waiting";
  EXPECT_EQ(f.send->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(f.send->status().message(),
            absl::StrFormat("send #%d to rank 2 (tag 2, context 0): a CAR it depends on ended "
                            "without completing: recv #%d from rank 0 (tag 1, context 0): rank 0 died",
                            f.send->id(), f.recv->id()));
  loop_.posted.clear();
}

TEST_F(CarFsmTest, CancelledSupplierReleasesItsDependent) {
  const std::vector<char> payload = Pattern(8, 1);
  std::vector<char> in(8);
  base::Completion chain;
  Forward f = MakeForward(loop_, &chain, in, 1, 2, false, &payload);
  ASSERT_TRUE(Post(f.send).ok());
  ASSERT_TRUE(Post(f.recv).ok());
  ASSERT_TRUE(RecvMachine::Dispatch(*f.recv, RecvEvent::kCancel).ok());
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kFailed);
  EXPECT_EQ(f.send->status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(chain.done());
}

TEST_F(CarFsmTest, StartedSupplierCannotTakeANewDependent) {
  std::vector<char> in(8);
  CarSpec r;
  r.kind = CarKind::kRecv;
  r.flags = CarFlag::kRecvData | CarFlag::kSupplyProgress;
  r.envelope = {0, kSource, 1};
  r.segment = Segment::Of(in.data(), in.size(), BasicType::kByte);
  r.counter = &recv_done_;
  r.vc = &kLoopback;
  recv_done_.pending = 1;
  Car* recv = loop_.Make(r);
  ASSERT_TRUE(Post(recv).ok());
  const std::vector<char> payload = Pattern(8, 1);
  CarSpec s;
  s.kind = CarKind::kSend;
  s.flags = CarFlag::kSendData | CarFlag::kProgressDependency;
  s.envelope = {0, 2, 2};
  s.segment = Segment::Of(payload.data(), payload.size(), BasicType::kByte);
  s.counter = &send_done_;
  s.vc = &kLoopback;
  s.progress_dep = recv;
  EXPECT_EQ(loop_.pool.Create(s).status().message(),
            absl::StrFormat("building send CAR: progress supplier CAR #%d has already started "
                            "(state posted)", recv->id()));
  ASSERT_TRUE(RecvMachine::Dispatch(*recv, RecvEvent::kCancel).ok());
}

}  // namespace
}  // namespace cartage::car
