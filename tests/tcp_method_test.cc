// The tcp method between two method instances (ranks 0 and 1) in one
// process, over real loopback sockets: the handshake refuses strangers, a
// simultaneous connect ends with one connection both ends agree on, and a
// peer that writes nonsense gets a clear kDataLoss naming it, never a crash
// (ASan and UBSan watch).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "car/car_pool.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "car/unexpected_fsm.h"
#include "fsm/trace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "methods/tcp/tcp_method.h"
#include "methods/tcp/tcp_wire.h"
#include "tests/in_process_job.h"

namespace cartage::methods::tcp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class TcpMethodTest : public ::testing::Test {
 protected:
  void SetUp() override {
    job_ = std::make_unique<SharedJob>();
    // The exchanges outlive the methods: tcp reads addresses lazily.
    ex0_ = std::make_unique<InProcessExchange>(job_.get(), 0);
    ex1_ = std::make_unique<InProcessExchange>(job_.get(), 1);
    std::thread other([&] {
      auto m = TcpMethod::Create(*ex1_, &host1_, TcpOptions{});
      ASSERT_TRUE(m.ok()) << m.status();
      rank1_ = std::move(*m);
    });
    auto m = TcpMethod::Create(*ex0_, &host0_, TcpOptions{});
    other.join();
    ASSERT_TRUE(m.ok()) << m.status();
    rank0_ = std::move(*m);
  }

  // An eager send of `bytes` from `from` to the other rank, posted.
  car::Car* Send(TcpMethod& from, TestHost& host, const std::string& bytes, int tag) {
    car::CarSpec s;
    s.kind = car::CarKind::kSend;
    s.flags = car::CarFlag::kSendData;
    s.envelope = {0, 1 - from.rank(), tag};
    payloads_.push_back(std::make_unique<std::string>(bytes));
    s.segment = car::Segment::Of(payloads_.back()->data(), bytes.size(), datatype::BasicType::kByte);
    completions_.push_back(std::make_unique<base::Completion>());
    completions_.back()->pending = 1;
    s.counter = completions_.back().get();
    s.vc = from.VcOf(1 - from.rank());
    s.eager_limit = 65536;
    car::Car* c = *host.pool.Create(s);
    from.Bind(*c, 1 - from.rank());
    EXPECT_TRUE(car::SendMachine::Dispatch(*c, car::SendEvent::kPost).ok());
    return c;
  }

  // Posts rank 0's receive of `bytes` bytes with `tag` from rank 1 (the
  // matcher's part is TagMatchingHost's).
  car::Car* PostRecv0(int tag, std::size_t bytes) {
    recv_vc_ = *rank0_->VcOf(1);
    recv_vc_.post_recv = [](car::Car&, car::CarEvents&) {};
    car::CarSpec s;
    s.kind = car::CarKind::kRecv;
    s.flags = car::CarFlag::kRecvData;
    s.envelope = {0, 1, tag};
    payloads_.push_back(std::make_unique<std::string>(bytes, '\0'));
    s.segment = car::Segment::Of(payloads_.back()->data(), bytes, datatype::BasicType::kByte);
    completions_.push_back(std::make_unique<base::Completion>());
    completions_.back()->pending = 1;
    s.counter = completions_.back().get();
    s.vc = &recv_vc_;
    car::Car* r = *host0_.pool.Create(s);
    rank0_->Bind(*r, 1);
    EXPECT_TRUE(car::RecvMachine::Dispatch(*r, car::RecvEvent::kPost).ok());
    host0_.posted.push_back(r);
    return r;
  }

  // Progresses both ranks until `done` or 5 s pass.
  template <class Done>
  bool PumpUntil(Done done) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done()) {
      if (std::chrono::steady_clock::now() > until) return false;
      rank0_->Progress();
      rank1_->Progress();
    }
    return true;
  }

  // A raw client's socket connected to rank 0.
  int Connect0() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(rank0_->port()));
    EXPECT_EQ(::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof(a)), 0);
    return fd;
  }

  // A raw client speaking to rank 0 as `claimed_rank`, `key` as the job key;
  // returns the socket and the verdict rank 0 answered (0: none, closed).
  std::pair<int, uint32_t> Greet(int claimed_rank, const std::string& key) {
    const int fd = Connect0();
    Hello h{};
    h.magic = kHelloMagic;
    h.version = kWireVersion;
    h.key_len = static_cast<uint16_t>(key.size());
    h.rank = claimed_rank;
    h.size = 2;
    std::memcpy(h.key, key.data(), key.size());
    EXPECT_EQ(::send(fd, &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
    HelloReply reply{};
    std::size_t got = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (got < sizeof(reply) && std::chrono::steady_clock::now() < until) {
      rank0_->Progress();
      const ssize_t n = ::recv(fd, reinterpret_cast<char*>(&reply) + got, sizeof(reply) - got, MSG_DONTWAIT);
      if (n == 0) break;
      if (n > 0) got += static_cast<std::size_t>(n);
    }
    return {fd, got == sizeof(reply) ? reply.verdict : 0u};
  }

  // Rank 0 reads `frame` from an impostor that passed the handshake as rank
  // 1, and fails the VC; returns why.
  absl::Status Forged(const void* frame, std::size_t n) {
    auto [fd, verdict] = Greet(1, job_->id.substr(0, kJobKeyBytes));
    EXPECT_EQ(verdict, kWelcome);
    EXPECT_EQ(rank0_->StateOf(1), VcState::kConnected);
    EXPECT_EQ(::send(fd, frame, n, 0), static_cast<ssize_t>(n));
    EXPECT_TRUE(PumpUntil([&] { return rank0_->StateOf(1) == VcState::kError; }));
    ::close(fd);
    return rank0_->PeerStatus(1);
  }

  std::unique_ptr<SharedJob> job_;
  std::unique_ptr<InProcessExchange> ex0_, ex1_;
  TagMatchingHost host0_, host1_;
  car::Vc recv_vc_;
  std::unique_ptr<TcpMethod> rank0_, rank1_;
  std::vector<std::unique_ptr<std::string>> payloads_;
  std::vector<std::unique_ptr<base::Completion>> completions_;
};

TEST_F(TcpMethodTest, SimultaneousConnectKeepsOneConnectionAndDeliversInOrder) {
  ::testing::internal::CaptureStderr();
  // Both ranks send first, before either has progressed: both connect.
  for (int i = 0; i < 50; ++i) {
    Send(*rank0_, host0_, absl::StrCat("from 0 #", i), i);
    Send(*rank1_, host1_, absl::StrCat("from 1 #", i), i);
  }
  EXPECT_EQ(rank0_->StateOf(1), VcState::kConnecting);
  EXPECT_EQ(rank1_->StateOf(0), VcState::kConnecting);
  ASSERT_TRUE(PumpUntil([&] { return host0_.arrived.size() == 50 && host1_.arrived.size() == 50; }));
  EXPECT_EQ(rank0_->StateOf(1), VcState::kConnected);
  EXPECT_EQ(rank1_->StateOf(0), VcState::kConnected);
  // The lower rank's connection won: both ends hold the two ends of it.
  sockaddr_in local0{}, peer1{};
  socklen_t len = sizeof(local0);
  ASSERT_EQ(::getsockname(rank0_->conn(1).fd, reinterpret_cast<sockaddr*>(&local0), &len), 0);
  len = sizeof(peer1);
  ASSERT_EQ(::getpeername(rank1_->conn(0).fd, reinterpret_cast<sockaddr*>(&peer1), &len), 0);
  EXPECT_EQ(local0.sin_port, peer1.sin_port);
  for (int i = 0; i < 50; ++i) {
    for (auto [host, from] : {std::pair{&host0_, 1}, std::pair{&host1_, 0}}) {
      const car::Car& u = *host->arrived[static_cast<std::size_t>(i)];
      EXPECT_EQ(u.envelope().tag, i);
      EXPECT_EQ(u.envelope().rank, from);
      const std::string want = absl::StrCat("from ", from, " #", i);
      const std::vector<std::byte>& got = host->buffer(static_cast<std::size_t>(i));
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(got.data()), got.size()), want);
    }
  }
  for (const auto& c : completions_) EXPECT_TRUE(c->done() && c->status.ok()) << c->status;
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "what works as designed says nothing";
}

// Where StartEager cuts a large frame: only where one write would end in a
// sliver (under half) of a segment, and then so the last two pieces are even.
TEST(TcpFirstWriteTest, CutsOnlyAFrameEndingInASliverOfASegment) {
  // A 64 KiB message and its 40-byte header on loopback, once the window has
  // grown (65,483-byte segments) and before (32,768).
  EXPECT_EQ(TcpMethod::FirstWrite(65576, 65483), 32788u);
  EXPECT_EQ(TcpMethod::FirstWrite(65576, 32768), 49172u);
  EXPECT_EQ(TcpMethod::FirstWrite(131112, 65483), 98298u);  // 2 segments and a 146-byte sliver
  EXPECT_EQ(TcpMethod::FirstWrite(65440, 65483), 65440u);   // within one segment
  EXPECT_EQ(TcpMethod::FirstWrite(32808, 65483), 32808u);
  EXPECT_EQ(TcpMethod::FirstWrite(100000, 65483), 100000u);  // ends in more than half a segment
  EXPECT_EQ(TcpMethod::FirstWrite(130966, 65483), 130966u);  // whole segments
  EXPECT_EQ(TcpMethod::FirstWrite(65576, 1448), 65576u);     // a network's packets: the kernel's to cut
  EXPECT_EQ(TcpMethod::FirstWrite(65576, 0), 65576u);        // segment size not known
}

TEST(TcpFirstWriteTest, CutsALoneRendezvousFrameUpTo2MiB) {
  // A 1 MiB payload and its header: 16 segments of 65,483 and 888 bytes.
  EXPECT_EQ(TcpMethod::LargeFrameFirstWrite(1 << 20, 65483), 1015431u);
  EXPECT_EQ(TcpMethod::LargeFrameFirstWrite(512 << 10, 65483), 491355u);  // 8 segments and 464 bytes
  EXPECT_EQ(TcpMethod::LargeFrameFirstWrite((2 << 20) - 40, 65483), 2063563u);  // the largest cut: 2 MiB in all
  EXPECT_EQ(TcpMethod::LargeFrameFirstWrite((2 << 20) - 39, 65483), 2097153u);  // one byte more: whole
  EXPECT_EQ(TcpMethod::LargeFrameFirstWrite(4 << 20, 65483), 4194344u);
  EXPECT_EQ(TcpMethod::LargeFrameFirstWrite(16 << 10, 65483), 16424u);  // below kStreamEagerMin: whole
  EXPECT_EQ(TcpMethod::LargeFrameFirstWrite(1 << 20, 1448), 1048616u);   // a network's packets
}

// Both ranks stream 64 KiB messages at each other, 64 each way before either
// reads (the window of a bi-directional bandwidth test): once connected,
// every frame is written in two pieces, and some of those find the socket
// full part-way. Every byte arrives, in order.
TEST_F(TcpMethodTest, FramesCutInTwoWhileBothStreamArriveWholeAndInOrder) {
  constexpr std::size_t kBytes = 65536;
  auto body = [](int from, int i) {
    std::string b(kBytes, '\0');
    for (std::size_t k = 0; k < kBytes; ++k) b[k] = static_cast<char>(k * 7 + static_cast<std::size_t>(i) * 31 + from);
    return b;
  };
  Send(*rank0_, host0_, body(0, 0), 0);
  Send(*rank1_, host1_, body(1, 0), 0);
  ASSERT_TRUE(PumpUntil([&] { return host0_.arrived.size() == 1 && host1_.arrived.size() == 1; }));
  for (TcpMethod* m : {rank0_.get(), rank1_.get()}) {
    const TcpConn& c = m->conn(1 - m->rank());
    ASSERT_GT(c.segment, 0u);
    EXPECT_LT(TcpMethod::FirstWrite(sizeof(FrameHeader) + kBytes, c.segment), sizeof(FrameHeader) + kBytes)
        << "segment " << c.segment << ": the frames below go in one piece";
  }
  constexpr int kWindow = 64;
  for (int i = 1; i <= kWindow; ++i) {
    Send(*rank0_, host0_, body(0, i), i);
    Send(*rank1_, host1_, body(1, i), i);
  }
  ASSERT_TRUE(PumpUntil([&] { return host0_.arrived.size() == kWindow + 1 && host1_.arrived.size() == kWindow + 1; }));
  for (int i = 0; i <= kWindow; ++i) {
    for (auto [host, from] : {std::pair{&host0_, 1}, std::pair{&host1_, 0}}) {
      const car::Car& u = *host->arrived[static_cast<std::size_t>(i)];
      EXPECT_EQ(u.envelope().tag, i);
      const std::vector<std::byte>& got = host->buffer(static_cast<std::size_t>(i));
      ASSERT_EQ(got.size(), kBytes);
      EXPECT_EQ(std::memcmp(got.data(), body(from, i).data(), kBytes), 0) << "message " << i << " from rank " << from;
    }
  }
  for (const auto& c : completions_) EXPECT_TRUE(c->done() && c->status.ok()) << c->status;
}

// A connection closed before its greeting (the half of a simultaneous
// connect its rank gave up) goes without a word; one closed part-way
// through its greeting is refused aloud. Neither touches the real rank's VC.
TEST_F(TcpMethodTest, AConnectionClosedBeforeItsGreetingIsDroppedQuietly) {
  ::testing::internal::CaptureStderr();
  ::close(Connect0());
  const int partial = Connect0();
  const char half[4] = {};
  EXPECT_EQ(::send(partial, half, sizeof(half), 0), 4);
  ::close(partial);
  for (int i = 0; i < 200; ++i) rank0_->Progress();
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, ::testing::MatchesRegex("cartage tcp \\(rank 0\\): refused a connection from 127\\.0\\.0\\.1:[0-9]+: "
                                           "closed part-way through its greeting\n"));
  EXPECT_EQ(rank0_->StateOf(1), VcState::kIdle);
  Send(*rank1_, host1_, "still welcome", 3);
  ASSERT_TRUE(PumpUntil([&] { return host0_.arrived.size() == 1; }));
}

TEST_F(TcpMethodTest, WrongJobKeyIsRefusedAndLogged) {
  ::testing::internal::CaptureStderr();
  auto [fd, verdict] = Greet(1, "not-this-job");
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(verdict, kRefused);
  EXPECT_THAT(log, HasSubstr("cartage tcp (rank 0): refused a connection from 127.0.0.1:"));
  EXPECT_THAT(log, HasSubstr("wrong job key"));
  EXPECT_EQ(rank0_->StateOf(1), VcState::kIdle);  // the real rank 1 can still connect
  ::close(fd);
  Send(*rank1_, host1_, "still welcome", 3);
  ASSERT_TRUE(PumpUntil([&] { return host0_.arrived.size() == 1; }));
}

TEST_F(TcpMethodTest, ImpossibleRankIsRefused) {
  ::testing::internal::CaptureStderr();
  auto [fd, verdict] = Greet(7, job_->id.substr(0, kJobKeyBytes));
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("claims rank 7 of 2"));
  EXPECT_EQ(verdict, kRefused);
  ::close(fd);
}

FrameHeader Header(uint8_t type) {
  FrameHeader h{};
  h.type = type;
  return h;
}

TEST_F(TcpMethodTest, UnknownFrameTypeFailsThePeer) {
  const FrameHeader h = Header(99);
  const absl::Status s = Forged(&h, sizeof(h));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "tcp: malformed frame from rank 1: unknown frame type 99");
}

TEST_F(TcpMethodTest, OversizedEagerLengthFailsThePeer) {
  FrameHeader h = Header(kFrameEager);
  h.length = uint64_t{1} << 40;
  const absl::Status s = Forged(&h, sizeof(h));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "tcp: malformed frame from rank 1: eager length 1099511627776 exceeds the 65536-byte eager limit");
}

TEST_F(TcpMethodTest, NegativeTagFailsThePeer) {
  FrameHeader h = Header(kFrameRts);
  h.tag = -7;
  EXPECT_EQ(Forged(&h, sizeof(h)).message(), "tcp: malformed frame from rank 1: negative tag -7");
}

TEST_F(TcpMethodTest, ForgedHandlesFailThePeer) {
  FrameHeader h = Header(kFrameCts);
  h.a = 12345;
  EXPECT_EQ(Forged(&h, sizeof(h)).message(), "tcp: malformed frame from rank 1: CTS for an unknown send");
}

TEST_F(TcpMethodTest, DataForUnknownReceiveFailsThePeer) {
  FrameHeader h = Header(kFrameData);
  h.a = 1;
  h.length = 100;
  EXPECT_EQ(Forged(&h, sizeof(h)).message(), "tcp: malformed frame from rank 1: DATA for an unknown receive");
}

TEST_F(TcpMethodTest, TruncatedFrameThenCloseIsALostPeer) {
  fsm::TraceRecorder rec(256);
  fsm::ScopedTraceSink on(&rec);
  const FrameHeader h = Header(kFrameEager);
  auto [fd, verdict] = Greet(1, job_->id.substr(0, kJobKeyBytes));
  ASSERT_EQ(verdict, kWelcome);
  ASSERT_EQ(::send(fd, &h, 20, 0), 20);  // half a header
  ::close(fd);
  ASSERT_TRUE(PumpUntil([&] { return rank0_->StateOf(1) == VcState::kError; }));
  EXPECT_EQ(rank0_->PeerStatus(1).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(rank0_->PeerStatus(1).message(), "rank 1 exited or finalized (tcp: connection closed)");
  // The connection's life in its table: lost, its CARs failed, then error.
  std::vector<std::string> conn;
  for (absl::string_view line : absl::StrSplit(rec.ToText(), '\n')) {
    if (absl::StartsWith(line, "tcp_connection#1:")) conn.emplace_back(line);
  }
  EXPECT_THAT(conn, ElementsAre("tcp_connection#1: idle --accepted--> connected",
                                "tcp_connection#1: connected --lost--> failing",
                                "tcp_connection#1: failing --fail_cars--> error"));
}

TEST_F(TcpMethodTest, VcInErrorFailsNewSendsAtOnce) {
  const FrameHeader h = Header(99);
  (void)Forged(&h, sizeof(h));
  car::Car* c = Send(*rank0_, host0_, "too late", 1);
  EXPECT_EQ(car::SendMachine::StateOf(*c), car::SendState::kFailed);
  EXPECT_EQ(completions_.back()->status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(completions_.back()->status.message(), HasSubstr("malformed frame from rank 1"));
}

// A rank whose output waits in a full socket, blocked in Block, wakes once
// the socket has room again, not at the end of its timeout: its peer only
// reads, so nothing else would wake it.
TEST_F(TcpMethodTest, ABlockedWriterWakesWhenItsSocketHasRoom) {
  Send(*rank0_, host0_, "hello", 0);
  ASSERT_TRUE(PumpUntil([&] { return host1_.arrived.size() == 1; }));
  constexpr int kMessages = 300;  // 18 MB, more than the socket takes unread
  const auto body = [](int i) { return std::string(60000, static_cast<char>('a' + i % 26)); };
  for (int i = 1; i <= kMessages; ++i) Send(*rank0_, host0_, body(i), i);
  for (int i = 0; i < 10; ++i) rank0_->Progress();
  const TcpConn& conn = rank0_->conn(1);
  ASSERT_FALSE(conn.out.empty()) << "the socket took every message unread";
  pollfd p{conn.fd, POLLOUT, 0};
  ASSERT_EQ(::poll(&p, 1, 0), 0) << "a full socket is writable";
  // The reader drains until the writer's socket has room.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (::poll(&p, 1, 0) == 0 && std::chrono::steady_clock::now() < until) rank1_->Progress();
  ASSERT_EQ(p.revents & POLLOUT, POLLOUT);
  ASSERT_FALSE(conn.out.empty());
  const auto start = std::chrono::steady_clock::now();
  rank0_->Block(5'000'000);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(secs, 2.5) << "the writer slept out its timeout with room in its socket";
  // Every frame arrives whole and in order, written across many passes.
  ASSERT_TRUE(PumpUntil([&] { return host1_.arrived.size() == kMessages + 1; }));
  for (int i = 1; i <= kMessages; ++i) {
    EXPECT_EQ(host1_.arrived[static_cast<std::size_t>(i)]->envelope().tag, i);
    const std::vector<std::byte>& got = host1_.buffer(static_cast<std::size_t>(i));
    ASSERT_EQ(std::string(reinterpret_cast<const char*>(got.data()), got.size()), body(i)) << "message " << i;
  }
  for (const auto& c : completions_) EXPECT_TRUE(c->done() && c->status.ok()) << c->status;
}

// A large eager frame whose receive is posted: once its header is in, the
// receive takes the envelope, and the payload is read straight into it as
// data, not gathered in the connection's buffer first. An impostor of rank 1
// writes the frame in two parts, so that the header comes before the bytes.
class TcpStreamedEagerTest : public TcpMethodTest {
 protected:
  static constexpr std::size_t kBytes = 48 * 1024;  // above kStreamEagerMin
  static_assert(kBytes >= TcpMethod::kStreamEagerMin);

  void SetUp() override {
    TcpMethodTest::SetUp();
    for (std::size_t i = 0; i < kBytes; ++i) body_[i] = static_cast<char>(i * 13 + i / 256);
    auto [fd, verdict] = Greet(1, job_->id.substr(0, kJobKeyBytes));
    ASSERT_EQ(verdict, kWelcome);
    fd_ = fd;
  }
  void TearDown() override {
    if (fd_ >= 0) ::close(fd_);
  }
  // Writes an eager frame's header (tag, `bytes`) and its first `first` bytes of body_.
  void WriteHead(int tag, std::size_t bytes, std::size_t first) {
    FrameHeader h = Header(kFrameEager);
    h.tag = tag;
    h.length = bytes;
    ASSERT_EQ(::send(fd_, &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
    WriteBody(0, first);
  }
  void WriteBody(std::size_t from, std::size_t to) {
    while (from < to) {
      const ssize_t n = ::send(fd_, body_.data() + from, to - from, 0);
      ASSERT_GT(n, 0);
      from += static_cast<std::size_t>(n);
    }
  }
  // The receive's transitions, as "from --event--> to".
  static std::vector<std::string> RecvLines(const fsm::TraceRecorder& rec) {
    std::vector<std::string> out;
    for (absl::string_view line : absl::StrSplit(rec.ToText(), '\n')) {
      if (absl::StartsWith(line, "car_recv#")) out.emplace_back(line.substr(line.find(": ") + 2));
    }
    return out;
  }
  std::string body_ = std::string(kBytes, '\0');
  int fd_ = -1;
};

TEST_F(TcpStreamedEagerTest, LandsStraightInItsPostedReceive) {
  car::Car* r = PostRecv0(3, kBytes);
  fsm::TraceRecorder rec(4096);
  fsm::ScopedTraceSink on(&rec);
  WriteHead(3, kBytes, 1000);
  ASSERT_TRUE(PumpUntil([&] { return r->bytes_done() == 1000; }));
  EXPECT_EQ(car::RecvMachine::StateOf(*r), car::RecvState::kReceiving);
  WriteBody(1000, kBytes);
  ASSERT_TRUE(PumpUntil([&] { return completions_.back()->done(); }));
  EXPECT_TRUE(completions_.back()->status.ok()) << completions_.back()->status;
  EXPECT_EQ(*payloads_.back(), body_);
  EXPECT_TRUE(host0_.arrived.empty()) << "the message went through an unexpected CAR";
  // The table's rows for a message in pieces: envelope, then data until the last byte.
  const std::vector<std::string> lines = RecvLines(rec);
  ASSERT_GE(lines.size(), 3u);
  EXPECT_EQ(lines.front(), "posted --envelope--> receiving");
  for (std::size_t i = 1; i + 1 < lines.size(); ++i) EXPECT_EQ(lines[i], "receiving --data--> receiving");
  EXPECT_EQ(lines.back(), "receiving --data--> done");
  // The connection parses on behind it: the next frame is whole and unexpected.
  WriteHead(4, 8, 8);
  ASSERT_TRUE(PumpUntil([&] { return host0_.arrived.size() == 1; }));
  EXPECT_EQ(host0_.arrived[0]->envelope().tag, 4);
  EXPECT_EQ(std::memcmp(host0_.buffer(0).data(), body_.data(), 8), 0);
}

TEST_F(TcpStreamedEagerTest, AReceiveTooSmallTakesWhatFitsAndFailsTruncated) {
  constexpr std::size_t kFits = 40 * 1024;
  car::Car* r = PostRecv0(3, kFits);
  WriteHead(3, kBytes, 1000);
  ASSERT_TRUE(PumpUntil([&] { return r->bytes_done() == 1000; }));
  EXPECT_EQ(car::RecvMachine::StateOf(*r), car::RecvState::kTruncating);
  WriteBody(1000, kBytes);
  ASSERT_TRUE(PumpUntil([&] { return completions_.back()->done(); }));
  EXPECT_EQ(car::RecvMachine::StateOf(*r), car::RecvState::kFailed);
  EXPECT_EQ(completions_.back()->status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(completions_.back()->status.message(),
              HasSubstr("message of 49152 bytes truncated to the 40960-byte receive buffer"));
  EXPECT_EQ(*payloads_.back(), body_.substr(0, kFits));
  // What did not fit was read and dropped, to the frame's last byte.
  WriteHead(4, 8, 8);
  ASSERT_TRUE(PumpUntil([&] { return host0_.arrived.size() == 1; }));
  EXPECT_EQ(host0_.arrived[0]->envelope().tag, 4);
  EXPECT_EQ(std::memcmp(host0_.buffer(0).data(), body_.data(), 8), 0);
  EXPECT_EQ(rank0_->StateOf(1), VcState::kConnected);
}

TEST_F(TcpStreamedEagerTest, APeerLostMidMessageFailsTheReceive) {
  car::Car* r = PostRecv0(3, kBytes);
  WriteHead(3, kBytes, 1000);
  ASSERT_TRUE(PumpUntil([&] { return r->bytes_done() == 1000; }));
  ::close(fd_);
  fd_ = -1;
  ASSERT_TRUE(PumpUntil([&] { return completions_.back()->done(); }));
  EXPECT_EQ(car::RecvMachine::StateOf(*r), car::RecvState::kFailed);
  EXPECT_EQ(completions_.back()->status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(completions_.back()->status.message(), HasSubstr("rank 1 exited or finalized (tcp: connection closed)"));
}

// Nothing posted: the frame waits in the connection's buffer until it is
// whole, and becomes an unexpected message, as a small one does.
TEST_F(TcpStreamedEagerTest, UnmatchedItIsDeliveredWholeAsUnexpected) {
  WriteHead(3, kBytes, 1000);
  for (int i = 0; i < 50; ++i) rank0_->Progress();
  EXPECT_TRUE(host0_.arrived.empty());
  WriteBody(1000, kBytes);
  ASSERT_TRUE(PumpUntil([&] { return host0_.arrived.size() == 1; }));
  EXPECT_EQ(car::UnexpectedMachine::StateOf(*host0_.arrived[0]), car::UnexpectedState::kBuffered);
  const std::vector<std::byte>& got = host0_.buffer(0);
  ASSERT_EQ(got.size(), kBytes);
  EXPECT_EQ(std::memcmp(got.data(), body_.data(), kBytes), 0);
}

}  // namespace
}  // namespace cartage::methods::tcp
