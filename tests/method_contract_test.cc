// The contract's defaults (methods/method.h) on a real method (self), and
// the registry: CARTAGE_METHODS parsing, plugins that do not load.
#include <cstring>
#include <string>
#include <vector>

#include "car/car_list.h"
#include "car/car_pool.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "cartage/config.h"
#include "methods/registry.h"
#include "methods/self/self_method.h"
#include "tests/in_process_job.h"

namespace cartage::methods {
namespace {

using ::testing::HasSubstr;

class ContractTest : public ::testing::Test {
 protected:
  // A send of `text` to rank 0 (self), bound, not posted.
  car::Car* MakeSend(const std::string& text, int tag, car::Car* progress_dep = nullptr) {
    car::CarSpec s;
    s.kind = car::CarKind::kSend;
    s.flags = car::CarFlag::kSendData;
    if (progress_dep != nullptr) {
      s.flags = s.flags | car::CarFlag::kProgressDependency;
      s.progress_dep = progress_dep;
    }
    s.envelope = {0, 0, tag};
    texts_.push_back(text);
    s.segment = car::Segment::Of(texts_.back().data(), text.size(), datatype::BasicType::kByte);
    s.counter = &done_;
    done_.pending += 1;
    s.vc = self_.VcOf(0);
    s.eager_limit = self_.caps().eager_limit;
    car::Car* c = *host_.pool.Create(s);
    self_.Bind(*c, 0);
    return c;
  }
  std::string Arrived(std::size_t i) const {
    const std::vector<std::byte>& b = host_.buffer(i);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }

  TestHost host_;
  self::SelfMethod self_{&host_, 0};
  std::vector<std::string> texts_ = std::vector<std::string>();
  base::Completion done_;
  ContractTest() { texts_.reserve(16); }
};

TEST_F(ContractTest, SendListPostsEveryCarInOrder) {
  car::CarList list;
  for (int i = 0; i < 3; ++i) list.PushBack(MakeSend("message " + std::to_string(i), i));
  ASSERT_TRUE(self_.Send(0, list).ok());
  EXPECT_TRUE(list.empty());
  ASSERT_EQ(host_.arrived.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(host_.arrived[static_cast<std::size_t>(i)]->envelope().tag, i);
    EXPECT_EQ(Arrived(static_cast<std::size_t>(i)), "message " + std::to_string(i));
  }
  EXPECT_TRUE(done_.done());
}

TEST_F(ContractTest, SendListRefusesAReceive) {
  car::CarSpec r;
  r.kind = car::CarKind::kRecv;
  r.flags = car::CarFlag::kRecvData;
  r.envelope = {0, 0, 1};
  r.counter = &done_;
  r.vc = self_.VcOf(0);
  car::CarList list;
  list.PushBack(*host_.pool.Create(r));
  const absl::Status s = self_.Send(0, list);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("self send list to rank 0: CAR #"));
  EXPECT_THAT(s.message(), HasSubstr("is a recv"));
}

TEST_F(ContractTest, CancelTakesAnIdleSendButNotOneOnTheWire) {
  car::Car* idle = MakeSend("never", 1);
  EXPECT_TRUE(self_.Cancel(*idle).ok());
  EXPECT_EQ(car::SendMachine::StateOf(*idle), car::SendState::kCancelled);
  car::Car* sent = MakeSend("sent", 2);
  ASSERT_TRUE(car::SendMachine::Dispatch(*sent, car::SendEvent::kPost).ok());
  const absl::Status s = self_.Cancel(*sent);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("is already on the wire"));
}

TEST_F(ContractTest, RecvReadyReleasesASendWaitingOnAnotherMethod) {
  // The send forwards once a receive on "another method" is ready: here the
  // supplier is a receive CAR that never runs, and RecvReady stands for it.
  car::CarSpec r;
  r.kind = car::CarKind::kRecv;
  r.flags = car::CarFlag::kRecvData | car::CarFlag::kSupplyProgress;
  r.envelope = {0, 0, 9};
  r.counter = &done_;
  r.vc = self_.VcOf(0);
  car::Car* supplier = *host_.pool.Create(r);
  car::Car* send = MakeSend("forwarded", 4, supplier);
  ASSERT_TRUE(car::SendMachine::Dispatch(*send, car::SendEvent::kPost).ok());
  EXPECT_EQ(car::SendMachine::StateOf(*send), car::SendState::kWaitDeps);
  EXPECT_TRUE(host_.arrived.empty());
  self_.RecvReady(*send);
  EXPECT_EQ(car::SendMachine::StateOf(*send), car::SendState::kDone);
  ASSERT_EQ(host_.arrived.size(), 1u);
  EXPECT_EQ(Arrived(0), "forwarded");
}

TEST_F(ContractTest, RegistrationIsCounted) {
  char buf[64] = {};
  absl::StatusOr<uint64_t> a = self_.RegisterMemory(buf, sizeof(buf));
  absl::StatusOr<uint64_t> b = self_.RegisterMemory(buf + 8, 8);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
  EXPECT_EQ(self_.registered(), 2);
  self_.UnregisterMemory(*a);
  self_.UnregisterMemory(*a);  // twice: no effect
  EXPECT_EQ(self_.registered(), 1);
}

TEST_F(ContractTest, BuffersHaveAtLeastTheAskedSize) {
  absl::StatusOr<MethodBuffer> b = self_.AllocBuffer(1000);
  ASSERT_TRUE(b.ok());
  EXPECT_GE(b->size, 1000u);
  std::memset(b->data, 7, b->size);  // ASan checks the size is real
  self_.FreeBuffer(*b);
}

TEST_F(ContractTest, AMethodWithoutRmaRefusesToExposeMemoryNamingItself) {
  char buf[64] = {};
  absl::StatusOr<Method::Exposed> e = self_.Expose(buf, sizeof(buf));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(std::string(e.status().message()), HasSubstr("self cannot expose 64 bytes to one-sided access"));
  self_.Unexpose(1);  // nothing exposed: no effect
}

TEST(Capabilities, DescribeSaysWhatAMethodCanDo) {
  EXPECT_EQ(Describe(self::SelfMethod::Caps()),
            "reach process, eager any size, max message any size, ordered, reliable, agent tag matching, no RMA, "
            "no atomics, no registration, serialised by the agent");
  Capabilities rma = self::SelfMethod::Caps();
  rma.rma = true;
  EXPECT_THAT(Describe(rma), HasSubstr(", RMA, no atomics"));
  rma.rma_ordered = true;
  EXPECT_THAT(Describe(rma), HasSubstr(", RMA (sends after writes in order), no atomics"));
}

TEST(Registry, BuiltinsAreListedInFolderOrder) {
  std::vector<std::string> names;
  for (const Descriptor* d : BuiltinMethods()) names.emplace_back(d->name);
  // ofi is built where libfabric is found (CI installs it).
  if (CARTAGE_HAVE_OFI) {
    EXPECT_THAT(names, ::testing::ElementsAre("self", "shm", "tcp", "ofi"));
  } else {
    EXPECT_THAT(names, ::testing::ElementsAre("self", "shm", "tcp"));
  }
}

TEST(Registry, ChooseKeepsOrderAndAddsSelf) {
  absl::StatusOr<Registry> reg = Registry::Load("");
  ASSERT_TRUE(reg.ok());
  absl::StatusOr<std::vector<const Descriptor*>> c = reg->Choose("tcp, shm");
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->size(), 3u);
  EXPECT_EQ((*c)[0]->name, "tcp");
  EXPECT_EQ((*c)[1]->name, "shm");
  EXPECT_EQ((*c)[2]->name, "self");
}

TEST(Registry, UnknownAndRepeatedNamesAreErrors) {
  absl::StatusOr<Registry> reg = Registry::Load("");
  ASSERT_TRUE(reg.ok());
  EXPECT_EQ(reg->Choose("shm,carrier-pigeon").status().message(),
            absl::StrCat("CARTAGE_METHODS=shm,carrier-pigeon: no method 'carrier-pigeon' (known: self, shm, tcp",
                         CARTAGE_HAVE_OFI ? ", ofi" : "", ")"));
  EXPECT_EQ(reg->Choose("tcp,tcp").status().message(), "CARTAGE_METHODS=tcp,tcp: 'tcp' named twice");
  EXPECT_EQ(reg->Choose(" , ").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(Registry, PluginThatIsNotALibraryIsAnError) {
  absl::StatusOr<Registry> reg = Registry::Load("/etc/hostname");
  EXPECT_EQ(reg.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(reg.status().message(), HasSubstr("CARTAGE_METHOD_PATH: cannot load /etc/hostname"));
}

}  // namespace
}  // namespace cartage::methods
