// The shm method against a peer that writes nonsense: two method instances
// (ranks 0 and 1) in one process share a real segment; the test writes
// forged records into rank 1's ring to rank 0. Every one must end in a clear
// kDataLoss naming the peer, never a crash (ASan and UBSan watch the fuzz).
#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "car/car_pool.h"
#include "car/send_fsm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "methods/shm/shm_method.h"
#include "methods/shm/shm_wire.h"
#include "tests/in_process_job.h"

namespace cartage::methods::shm {
namespace {

using ::testing::HasSubstr;

class ShmMethodTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }

  // A fresh pair of ranks with their own segment.
  void Start() {
    forged_.clear();
    rank0_.reset();
    rank1_.reset();
    job_ = std::make_unique<SharedJob>();
    ShmOptions options;
    std::thread other([&] {
      InProcessExchange ex(job_.get(), 1);
      auto m = ShmMethod::Create(ex, &host1_, options);
      ASSERT_TRUE(m.ok()) << m.status();
      rank1_ = std::move(*m);
    });
    InProcessExchange ex(job_.get(), 0);
    auto m = ShmMethod::Create(ex, &host0_, options);
    other.join();
    ASSERT_TRUE(m.ok()) << m.status();
    rank0_ = std::move(*m);
  }

  // The same writer across calls (so records follow each other in the ring).
  RingWriter& Writer() {
    if (forged_.empty()) forged_.emplace_back(rank1_->segment().ring(1, 0));
    return forged_.front();
  }
  void Append(uint16_t type, const void* bytes, std::size_t len) {
    std::byte* p = Writer().Begin(len);
    ASSERT_NE(p, nullptr);
    if (len > 0) std::memcpy(p, bytes, len);
    Writer().Commit(type);
  }

  // A synchronous send from rank 0 to rank 1 that waits for its ACK.
  car::Car* SyncSend(bool expect_waiting = true) {
    car::CarSpec s;
    s.kind = car::CarKind::kSend;
    s.flags = car::CarFlag::kSendData;
    s.envelope = {0, 1, 3};
    s.segment = car::Segment::Of(payload_, sizeof(payload_), car::BasicType::kByte);
    s.counter = &done_;
    s.carrier = rank0_->Vc(1);  // the VC's operations: swapped when it fails
    s.eager_limit = 8192;
    s.synchronous = true;
    done_.pending = 1;
    car::Car* c = *host0_.pool.Create(s);
    rank0_->Bind(*c, 1);
    EXPECT_TRUE(car::SendMachine::Dispatch(*c, car::SendEvent::kPost).ok());
    if (expect_waiting) {
      EXPECT_EQ(car::SendMachine::StateOf(*c), car::SendState::kWaitAck);
    }
    return c;
  }

  std::unique_ptr<SharedJob> job_;
  TestHost host0_, host1_;
  std::unique_ptr<ShmMethod> rank0_, rank1_;
  std::vector<RingWriter> forged_;
  char payload_[16] = "sixteen bytes!!";
  car::Completion done_;
};

TEST_F(ShmMethodTest, UnknownRecordTypeFailsThePeerAndItsWaitingSends) {
  car::Car* send = SyncSend();
  const char junk[8] = {};
  Append(99, junk, sizeof(junk));
  rank0_->Progress();
  EXPECT_EQ(rank0_->PeerStatus(1).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(rank0_->PeerStatus(1).message(), "malformed wire record from rank 1: unknown record type 99");
  EXPECT_EQ(car::SendMachine::StateOf(*send), car::SendState::kFailed);
  EXPECT_EQ(done_.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(done_.status.message(), HasSubstr("send #"));
  EXPECT_THAT(done_.status.message(), HasSubstr("to rank 1 (tag 3, context 0): malformed wire record from rank 1"));
  // New sends to the broken peer fail at once.
  car::Car* again = SyncSend(/*expect_waiting=*/false);
  EXPECT_EQ(car::SendMachine::StateOf(*again), car::SendState::kFailed);
}

TEST_F(ShmMethodTest, ShortAndInconsistentEnvelopes) {
  const char two[2] = {1, 2};
  Append(kRecEager, two, sizeof(two));
  rank0_->Progress();
  EXPECT_EQ(rank0_->PeerStatus(1).message(), "malformed wire record from rank 1: short envelope");
}

TEST_F(ShmMethodTest, EagerLengthMustMatchTheRecord) {
  std::vector<std::byte> rec(sizeof(MatchHeader) + 10);
  MatchHeader h{0, 5, 1000000, 0, 0, 0};  // claims 1 MB in a 10-byte payload
  std::memcpy(rec.data(), &h, sizeof(h));
  Append(kRecEager, rec.data(), rec.size());
  rank0_->Progress();
  EXPECT_EQ(rank0_->PeerStatus(1).message(),
            "malformed wire record from rank 1: eager length 1000000 in a 42-byte record");
}

TEST_F(ShmMethodTest, NegativeTagIsRefused) {
  std::vector<std::byte> rec(sizeof(MatchHeader));
  MatchHeader h{0, -7, 0, 0, 0, 0};
  std::memcpy(rec.data(), &h, sizeof(h));
  Append(kRecEager, rec.data(), rec.size());
  rank0_->Progress();
  EXPECT_EQ(rank0_->PeerStatus(1).message(), "malformed wire record from rank 1: negative tag -7");
}

TEST_F(ShmMethodTest, ForgedHandlesAreRefused) {
  car::Car* send = SyncSend();
  const CtsBody cts{0xdeadbeef00000007ull, 0, 1, 0};
  Append(kRecCts, &cts, sizeof(cts));
  rank0_->Progress();
  EXPECT_EQ(rank0_->PeerStatus(1).message(), "malformed wire record from rank 1: CTS for an unknown send");
  EXPECT_EQ(car::SendMachine::StateOf(*send), car::SendState::kFailed);
}

TEST_F(ShmMethodTest, AWellFormedAckCompletesTheSend) {
  // The same path, honest: rank 1's real ACK completes rank 0's ssend.
  car::Car* send = SyncSend();
  const uint64_t handle = ShmMethod::StateOf(*send).local_handle;
  ASSERT_NE(handle, 0u);
  const AckBody ack{handle};
  Append(kRecAck, &ack, sizeof(ack));
  rank0_->Progress();
  EXPECT_TRUE(rank0_->PeerStatus(1).ok());
  EXPECT_EQ(car::SendMachine::StateOf(*send), car::SendState::kDone);
  EXPECT_TRUE(done_.done() && done_.status.ok());
  // A second ACK for the same (now retired) handle is refused.
  Append(kRecAck, &ack, sizeof(ack));
  rank0_->Progress();
  EXPECT_EQ(rank0_->PeerStatus(1).message(), "malformed wire record from rank 1: ACK for an unknown send");
}

TEST_F(ShmMethodTest, RandomRecordsNeverCrash) {
  // 200 fresh pairs; each gets a burst of records of real types with random
  // contents, a third of them well-formed eager envelopes (so the unexpected
  // path runs too), until the peer is declared broken.
  std::mt19937_64 rng(12345);
  std::vector<std::byte> bytes(700);
  int broken = 0, accepted = 0;
  for (int pair = 0; pair < 200; ++pair) {
    if (pair > 0) Start();
    for (int i = 0; i < 50 && rank0_->PeerStatus(1).ok(); ++i) {
      std::size_t len = rng() % bytes.size();
      for (auto& b : bytes) b = static_cast<std::byte>(rng());
      uint16_t type = static_cast<uint16_t>(rng() % 7);
      if (rng() % 3 == 0) {  // a well-formed eager message
        type = kRecEager;
        len = std::max(len, sizeof(MatchHeader));
        MatchHeader h{static_cast<uint32_t>(rng() % 4), static_cast<int32_t>(rng() % 100),
                      len - sizeof(MatchHeader), 0, 0, 0};
        std::memcpy(bytes.data(), &h, sizeof(h));
        ++accepted;
      }
      std::byte* p = Writer().Begin(len);
      if (p == nullptr) break;
      std::memcpy(p, bytes.data(), len);
      Writer().Commit(type);
      rank0_->Progress();
    }
    if (!rank0_->PeerStatus(1).ok()) {
      ++broken;
      EXPECT_EQ(rank0_->PeerStatus(1).code(), absl::StatusCode::kDataLoss);
      EXPECT_THAT(rank0_->PeerStatus(1).message(), HasSubstr("malformed wire record from rank 1"));
    }
  }
  EXPECT_GT(broken, 150) << "random records should almost always be caught";
  EXPECT_GT(accepted, 100) << "and well-formed ones accepted";
}

}  // namespace
}  // namespace cartage::methods::shm
