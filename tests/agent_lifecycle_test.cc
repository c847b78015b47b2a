// An agent's life in a process: one per program, made again once the first
// is gone.
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "cartage/cartage.h"
#include "cartage/collectives.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cartage {
namespace {

using ::testing::HasSubstr;

TEST(AgentLifecycle, OnePerProcessAndAgainOnceGone) {
  // No launcher: a job of one rank.
  absl::StatusOr<std::unique_ptr<Agent>> first = Agent::FromEnvironment();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->size(), 1);
  absl::StatusOr<std::unique_ptr<Agent>> second = Agent::FromEnvironment();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr("this process has an agent already"));
  first->reset();
  absl::StatusOr<std::unique_ptr<Agent>> third = Agent::FromEnvironment();
  ASSERT_TRUE(third.ok()) << third.status();
  // It works: a message to itself.
  const Comm w = (*third)->World();
  int in = 0;
  const int out = 7;
  Request r;
  ASSERT_TRUE(w.Irecv(&in, sizeof(in), 0, 1, &r).ok());
  ASSERT_TRUE(w.Send(&out, sizeof(out), 0, 1).ok());
  ASSERT_TRUE(r.Wait().ok());
  EXPECT_EQ(in, 7);
}

// What was made on an Agent outlives it only as errors: a communicator, a
// request still in flight, a persistent request, a collective on it.
TEST(AgentLifecycle, ACommOrRequestUsedAfterItsAgentIsGoneSaysSo) {
  absl::StatusOr<std::unique_ptr<Agent>> agent = Agent::FromEnvironment();
  ASSERT_TRUE(agent.ok()) << agent.status();
  const Comm w = (*agent)->World();
  int in = 0, out = 7;
  auto pending = std::make_unique<Request>();
  ASSERT_TRUE(w.Irecv(&in, sizeof(in), 0, 3, pending.get()).ok());
  Request persistent;
  ASSERT_TRUE(w.SendInit(&out, sizeof(out), 0, 4, &persistent).ok());
  agent->reset();
  const std::string gone = "the Agent this was made on was destroyed (finalized)";
  auto expect_gone = [&](const absl::Status& s, const char* op) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << op << ": " << s;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat(op, ": ", gone))) << s;
  };
  expect_gone(w.Send(&out, sizeof(out), 0, 1), "send");
  expect_gone(w.Irecv(&in, sizeof(in), 0, 1, pending.get()), "recv");
  expect_gone(w.Iprobe(0, 1).status(), "probe");
  expect_gone(w.Probe(0, 1).status(), "probe");
  expect_gone(w.Split(0, 0).status(), "split");
  expect_gone(w.Dup().status(), "dup");
  expect_gone(cartage::Barrier(w), "barrier");
  expect_gone(pending->Wait(), "wait");
  EXPECT_TRUE(pending->Test()) << "it is finished, with that error";
  expect_gone(persistent.Start(), "start");
  pending.reset();  // its destructor touches nothing of the gone agent
  EXPECT_EQ(in, 0);
}

}  // namespace
}  // namespace cartage
