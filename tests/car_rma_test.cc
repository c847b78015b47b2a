// car_rma: a one-sided write or read through a VC that holds it as a method
// would, then completes or fails it; a VC without start_rma; the specs the
// pool refuses.
#include <string>
#include <vector>

#include "car/car.h"
#include "car/car_pool.h"
#include "car/rma_fsm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cartage::car {
namespace {

using ::testing::HasSubstr;

// What the fake method was handed: the CAR and where it names the peer's memory.
std::vector<Car*>* g_started = nullptr;
std::vector<RemoteRef>* g_remote = nullptr;

void HoldRma(Car& c, CarEvents&) {
  g_started->push_back(&c);
  g_remote->push_back(c.spec().remote);
}
const Vc kRmaVc{.name = "fake rma", .peer = 3, .start_rma = &HoldRma};
const Vc kNoRma{.name = "no rma", .peer = 3};

class RmaCarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_started = &started_;
    g_remote = &remote_;
  }
  void TearDown() override {
    g_started = nullptr;
    g_remote = nullptr;
  }
  Car* Make(bool write, const Vc* vc) {
    CarSpec s;
    s.kind = CarKind::kRma;
    s.flags = write ? CarFlag::kSendData : CarFlag::kRecvData;
    s.envelope.rank = 3;
    s.segment = Segment::Of(buf_, sizeof(buf_), datatype::BasicType::kByte);
    s.counter = &done_;
    s.vc = vc;
    s.remote = {0x1000, 42};
    done_.Set(1);
    absl::StatusOr<Car*> c = pool_.Create(s);
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  }

  CarPool pool_{{}};
  base::Completion done_;
  char buf_[24] = {};
  std::vector<Car*> started_;
  std::vector<RemoteRef> remote_;
};

TEST_F(RmaCarTest, AWriteIsPostedThenDoneWithEveryByteCounted) {
  Car* c = Make(true, &kRmaVc);
  EXPECT_EQ(c->state_name(), "idle");
  ASSERT_TRUE(RmaCarMachine::Dispatch(*c, RmaCarEvent::kPost).ok());
  EXPECT_EQ(c->state_name(), "posted");
  ASSERT_EQ(started_.size(), 1u);
  EXPECT_EQ(started_[0], c);
  EXPECT_EQ(remote_[0].addr, 0x1000u);
  EXPECT_EQ(remote_[0].key, 42u);
  EXPECT_FALSE(done_.done());
  ASSERT_TRUE(RmaCarMachine::Dispatch(*c, RmaCarEvent::kComplete).ok());
  EXPECT_EQ(c->state_name(), "done");
  EXPECT_TRUE(done_.done());
  EXPECT_TRUE(done_.status.ok());
  EXPECT_EQ(done_.bytes, sizeof(buf_));
  EXPECT_EQ(c->bytes_done(), sizeof(buf_));
  pool_.Release(c);
}

TEST_F(RmaCarTest, AReadTheMethodFailsEndsFailedNamingItsPeer) {
  Car* c = Make(false, &kRmaVc);
  ASSERT_TRUE(RmaCarMachine::Dispatch(*c, RmaCarEvent::kPost).ok());
  CarSignal err;
  err.error = absl::UnavailableError("the provider said no");
  ASSERT_TRUE(RmaCarMachine::Dispatch(*c, RmaCarEvent::kError, err).ok());
  EXPECT_EQ(c->state_name(), "failed");
  EXPECT_TRUE(done_.done());
  EXPECT_EQ(done_.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(done_.status.message()), HasSubstr("one-sided read"));
  EXPECT_THAT(std::string(done_.status.message()), HasSubstr("from rank 3"));
  EXPECT_THAT(std::string(done_.status.message()), HasSubstr("the provider said no"));
  // A late completion finds no row out of failed: it changes nothing.
  EXPECT_FALSE(RmaCarMachine::Dispatch(*c, RmaCarEvent::kComplete).ok());
  EXPECT_EQ(c->state_name(), "failed");
  pool_.Release(c);
}

TEST_F(RmaCarTest, AVcWithoutStartRmaFailsTheCarAtItsPost) {
  Car* c = Make(true, &kNoRma);
  ASSERT_TRUE(RmaCarMachine::Dispatch(*c, RmaCarEvent::kPost).ok());
  EXPECT_EQ(c->state_name(), "failed");
  EXPECT_TRUE(started_.empty());
  EXPECT_EQ(done_.status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(done_.status.message()), HasSubstr("VC 'no rma' has no start_rma operation"));
  pool_.Release(c);
}

TEST_F(RmaCarTest, ThePoolRefusesWhatAOneSidedCarCannotBe) {
  CarSpec s;
  s.kind = CarKind::kRma;
  s.segment = Segment::Of(buf_, sizeof(buf_), datatype::BasicType::kByte);
  s.counter = &done_;
  s.vc = &kRmaVc;
  s.flags = CarFlag::kSendData | CarFlag::kPack;
  EXPECT_THAT(std::string(ValidateSpec(s).message()), HasSubstr("writes (SEND_DATA) or reads (RECV_DATA)"));
  s.flags = CarFlag::kSendData | CarFlag::kRecvData;
  EXPECT_FALSE(ValidateSpec(s).ok());
  s.flags = CarFlag::kRecvData;
  EXPECT_TRUE(ValidateSpec(s).ok());
  const datatype::Datatype strided =
      *datatype::Datatype::Vector(2, 1, 2, datatype::Datatype::Basic(datatype::BasicType::kByte));
  s.segment = Segment::Of(buf_, 2, strided);
  EXPECT_THAT(std::string(ValidateSpec(s).message()), HasSubstr("one run of memory"));
  // Only a one-sided CAR names a peer's memory.
  CarSpec send;
  send.kind = CarKind::kSend;
  send.flags = CarFlag::kSendData;
  send.segment = Segment::Of(buf_, sizeof(buf_), datatype::BasicType::kByte);
  send.counter = &done_;
  send.vc = &kRmaVc;
  send.remote = {0x1000, 1};
  EXPECT_THAT(std::string(ValidateSpec(send).message()), HasSubstr("only a one-sided CAR names a peer's memory"));
}

}  // namespace
}  // namespace cartage::car
