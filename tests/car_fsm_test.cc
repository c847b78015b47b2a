// The CAR machines driven end to end through the in-process loopback
// (car_loopback.h): eager, rendezvous, synchronous, unexpected ("if we
// buffer, you suffer"), truncation, cancel, and failures.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/car_loopback.h"

namespace cartage::car::test {
namespace {

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
  // Each record says what its CAR is about: peer, tag, context, bytes.
  for (const fsm::TraceRecord& t : rec.records()) {
    EXPECT_EQ(t.tag, 1) << t.machine->machine;
    EXPECT_EQ(t.bytes, 64u) << t.machine->machine;
    EXPECT_EQ(t.context, s->envelope().context_id);
    EXPECT_EQ(t.peer, t.instance == s->id() ? s->vc()->peer : r->vc()->peer);
  }
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
  EXPECT_EQ(RecvMachine::StateOf(*r2), RecvState::kFailed) << "a row of the table, not an action's branch";
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

TEST_F(CarFsmTest, SynchronousEagerMessagesAreAcknowledgedOnTheirOwnRowsWhateverTheReceiveBecomes) {
  static int acks;
  const Vc acking{.name = "acking",
                  .post_recv = [](Car&, CarEvents&) {},
                  .send_ack = [](Car&, CarEvents&) { ++acks; }};
  const std::vector<char> data = Pattern(40, 5);
  struct Case {
    bool whole;          // one eager event, or an envelope then its data
    uint32_t proto;
    uint64_t bytes;      // the message's
    std::size_t room;    // the receive's
    RecvState after;     // the envelope's (or eager's) target
    int acks;
  };
  const Case cases[] = {
      {true, kProtoSync, 40, 64, RecvState::kDone, 1},     {true, kProtoSync, 40, 8, RecvState::kFailed, 1},
      {true, kProtoSync, 0, 8, RecvState::kDone, 1},       {true, kProtoEager, 40, 64, RecvState::kDone, 0},
      {false, kProtoSync, 40, 64, RecvState::kReceiving, 1}, {false, kProtoSync, 40, 8, RecvState::kTruncating, 1},
      {false, kProtoSync, 0, 8, RecvState::kDone, 1},      {false, kProtoEager, 40, 64, RecvState::kReceiving, 0},
  };
  for (const Case& c : cases) {
    acks = 0;
    std::vector<char> buf(c.room);
    base::Completion done;
    CarSpec spec;
    spec.kind = CarKind::kRecv;
    spec.flags = CarFlag::kRecvData;
    spec.envelope = {0, kSource, 6};
    spec.segment = Segment::Of(buf.data(), static_cast<int64_t>(buf.size()), BasicType::kByte);
    spec.counter = &done;
    spec.vc = &acking;
    done.pending = 1;
    Car* r = loop_.Make(spec);
    ASSERT_TRUE(RecvMachine::Dispatch(*r, RecvEvent::kPost).ok());
    CarSignal m;
    m.bytes = c.bytes;
    m.proto = c.proto;
    m.source = kSource;
    m.tag = 6;
    m.data = reinterpret_cast<const std::byte*>(data.data());
    ASSERT_TRUE(RecvMachine::Dispatch(*r, c.whole ? RecvEvent::kEager : RecvEvent::kEnvelope, m).ok());
    EXPECT_EQ(RecvMachine::StateOf(*r), c.after) << c.whole << " " << c.bytes << " into " << c.room;
    EXPECT_EQ(acks, c.acks) << c.whole << " " << c.proto << " " << c.bytes << " into " << c.room;
    if (!RecvMachine::IsFinal(*r)) {  // the data follows its envelope: done, or failed truncated
      ASSERT_TRUE(RecvMachine::Dispatch(*r, RecvEvent::kData, m).ok());
      EXPECT_EQ(RecvMachine::StateOf(*r), c.room >= c.bytes ? RecvState::kDone : RecvState::kFailed);
      EXPECT_EQ(acks, c.acks) << "acknowledged once";
    }
  }
}

TEST_F(CarFsmTest, AnAnnouncedEagerMessageTooLargeForTheTemporaryBufferIsDroppedOnItsRow) {
  std::vector<char> temp(16);
  CarSpec u;
  u.kind = CarKind::kUnexpected;
  u.flags = CarFlag::kRecvData;
  u.envelope = {0, kSource, 4};
  u.pack_buf = temp.data();
  u.pack_size = temp.size();
  Car* big = loop_.Make(u);
  fsm::TraceRecorder rec(8);
  fsm::ScopedTraceSink on(&rec);
  CarSignal envelope;
  envelope.bytes = 17;
  envelope.proto = kProtoEager;
  envelope.source = kSource;
  envelope.tag = 4;
  ASSERT_TRUE(UnexpectedMachine::Dispatch(*big, UnexpectedEvent::kEnvelope, envelope).ok());
  EXPECT_EQ(rec.ToText(), absl::StrFormat("car_unexpected#%d: new --envelope--> dropped\n", big->id()));
  EXPECT_EQ(big->status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(absl::StrContains(big->status().message(), "17-byte message does not fit the 16-byte temporary buffer"))
      << big->status();
  // One that fits, or a rendezvous one of any size, is kept.
  envelope.bytes = 16;
  Car* fits = loop_.Make(u);
  ASSERT_TRUE(UnexpectedMachine::Dispatch(*fits, UnexpectedEvent::kEnvelope, envelope).ok());
  EXPECT_EQ(UnexpectedMachine::StateOf(*fits), UnexpectedState::kArriving);
  envelope.bytes = 1 << 20;
  envelope.proto = kProtoRendezvous;
  Car* rts = loop_.Make(u);
  ASSERT_TRUE(UnexpectedMachine::Dispatch(*rts, UnexpectedEvent::kEnvelope, envelope).ok());
  EXPECT_EQ(UnexpectedMachine::StateOf(*rts), UnexpectedState::kRtsHeld);
  CarSignal gone;
  gone.error = absl::UnavailableError("the sender died");
  for (Car* u2 : {fits, rts}) ASSERT_TRUE(UnexpectedMachine::Dispatch(*u2, UnexpectedEvent::kError, gone).ok());
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

}  // namespace
}  // namespace cartage::car::test
