// An agent's life in a process: one per program, made again once the first
// is gone.
#include <memory>

#include "absl/status/statusor.h"
#include "cartage/cartage.h"
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

}  // namespace
}  // namespace cartage
