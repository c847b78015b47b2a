// car_vertex: a diamond schedule A -> {B, C} -> D run through the machine;
// order, failure propagation (draining) and cancel.
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "car/car.h"
#include "car/car_pool.h"
#include "car/vertex_fsm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cartage::car {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<uint64_t>* g_ran = nullptr;
uint64_t g_fail_id = 0;    // the vertex whose launch fails
bool g_complete_now = true;  // local ops complete inside launch

void LaunchLocal(Car& v, CarEvents& events) {
  g_ran->push_back(v.id());
  if (v.id() == g_fail_id) {
    CarSignal err;
    err.error = absl::InternalError("reduction failed");
    events.Raise<VertexMachine>(v, VertexEvent::kError, err);
  } else if (g_complete_now) {
    events.Raise<VertexMachine>(v, VertexEvent::kComplete);
  }
}
const Vc kLocal{.name = "local", .launch = &LaunchLocal};

class VertexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_ran = &ran_;
    g_fail_id = 0;
    g_complete_now = true;
    // Built sinks first so each vertex can name its successors.
    d_ = Make({}, 2);
    b_succ_[0] = d_;
    c_succ_[0] = d_;
    b_ = Make(b_succ_, 1);
    c_ = Make(c_succ_, 1);
    a_succ_[0] = b_;
    a_succ_[1] = c_;
    a_ = Make(a_succ_, 0);
  }
  void TearDown() override {
    for (Car* v : {a_, b_, c_, d_}) {
      EXPECT_TRUE(VertexMachine::IsFinal(*v)) << "vertex #" << v->id() << " in " << v->state_name();
      pool_.Release(v);
    }
    g_ran = nullptr;
  }
  Car* Make(std::span<Car* const> successors, uint32_t predecessors) {
    CarSpec s;
    s.kind = CarKind::kVertex;
    s.counter = &done_;
    s.vc = &kLocal;
    s.successors = successors;
    s.predecessors = predecessors;
    ++done_.pending;
    return *pool_.Create(s);
  }
  absl::Status StartAll() {
    // Start in reverse order: successors may be released before they start.
    for (Car* v : {d_, c_, b_, a_}) {
      if (absl::Status s = VertexMachine::Dispatch(*v, VertexEvent::kStart); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  CarPool pool_{{}};
  base::Completion done_;
  std::vector<uint64_t> ran_;
  Car *a_, *b_, *c_, *d_;
  Car* a_succ_[2];
  Car* b_succ_[1];
  Car* c_succ_[1];
};

TEST_F(VertexTest, RunsInDependencyOrder) {
  ASSERT_TRUE(StartAll().ok());
  EXPECT_THAT(ran_, ElementsAre(a_->id(), b_->id(), c_->id(), d_->id()));
  EXPECT_TRUE(done_.done());
  EXPECT_TRUE(done_.status.ok());
  for (Car* v : {a_, b_, c_, d_}) EXPECT_EQ(VertexMachine::StateOf(*v), VertexState::kDone);
}

TEST_F(VertexTest, PredecessorsFinishingBeforeStartAreCounted) {
  // Start only A: B and C are still idle, so A's completion only counts them
  // down; each runs as soon as it is started.
  ASSERT_TRUE(VertexMachine::Dispatch(*a_, VertexEvent::kStart).ok());
  EXPECT_THAT(ran_, ElementsAre(a_->id()));
  EXPECT_EQ(VertexMachine::StateOf(*b_), VertexState::kIdle);
  EXPECT_EQ(b_->predecessors_pending(), 0u);
  ASSERT_TRUE(VertexMachine::Dispatch(*b_, VertexEvent::kStart).ok());
  EXPECT_EQ(VertexMachine::StateOf(*d_), VertexState::kIdle);
  EXPECT_EQ(d_->predecessors_pending(), 1u);
  ASSERT_TRUE(VertexMachine::Dispatch(*d_, VertexEvent::kStart).ok());
  EXPECT_EQ(VertexMachine::StateOf(*d_), VertexState::kWaiting);
  ASSERT_TRUE(VertexMachine::Dispatch(*c_, VertexEvent::kStart).ok());
  EXPECT_THAT(ran_, ElementsAre(a_->id(), b_->id(), c_->id(), d_->id()));
}

TEST_F(VertexTest, AsynchronousCompletion) {
  g_complete_now = false;
  ASSERT_TRUE(StartAll().ok());
  EXPECT_THAT(ran_, ElementsAre(a_->id()));
  EXPECT_EQ(VertexMachine::StateOf(*a_), VertexState::kRunning);
  ASSERT_TRUE(VertexMachine::Dispatch(*a_, VertexEvent::kComplete).ok());
  ASSERT_TRUE(VertexMachine::Dispatch(*c_, VertexEvent::kComplete).ok());
  EXPECT_EQ(VertexMachine::StateOf(*d_), VertexState::kWaiting);
  ASSERT_TRUE(VertexMachine::Dispatch(*b_, VertexEvent::kComplete).ok());
  EXPECT_EQ(VertexMachine::StateOf(*d_), VertexState::kRunning);
  ASSERT_TRUE(VertexMachine::Dispatch(*d_, VertexEvent::kComplete).ok());
  EXPECT_THAT(ran_, ElementsAre(a_->id(), b_->id(), c_->id(), d_->id()));
  EXPECT_TRUE(done_.done());
}

TEST_F(VertexTest, FailureFailsEverySuccessorAndNothingHangs) {
  g_fail_id = b_->id();
  ASSERT_TRUE(StartAll().ok());
  EXPECT_EQ(VertexMachine::StateOf(*b_), VertexState::kFailed);
  EXPECT_EQ(VertexMachine::StateOf(*d_), VertexState::kFailed);
  EXPECT_EQ(VertexMachine::StateOf(*c_), VertexState::kDone);
  EXPECT_THAT(ran_, ElementsAre(a_->id(), b_->id(), c_->id())) << "D never ran";
  EXPECT_TRUE(done_.done());
  EXPECT_EQ(done_.status.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(done_.status.message(),
            absl::StrFormat("schedule vertex #%d: reduction failed", b_->id()));
  EXPECT_THAT(d_->status().message(), HasSubstr("a CAR it depends on ended without completing"));
}

TEST_F(VertexTest, CancelBeforeStartCancelsTheRest) {
  ASSERT_TRUE(VertexMachine::Dispatch(*a_, VertexEvent::kCancel).ok());
  for (Car* v : {b_, c_, d_}) EXPECT_EQ(VertexMachine::StateOf(*v), VertexState::kFailed);
  EXPECT_EQ(VertexMachine::StateOf(*a_), VertexState::kCancelled);
  EXPECT_TRUE(ran_.empty());
  EXPECT_TRUE(done_.done());
  EXPECT_EQ(done_.status.code(), absl::StatusCode::kCancelled);
}

TEST_F(VertexTest, RearmRunsTheScheduleAgain) {
  ASSERT_TRUE(StartAll().ok());
  for (Car* v : {a_, b_, c_, d_}) v->Rearm();
  done_.pending = 4;
  ran_.clear();
  EXPECT_EQ(d_->predecessors_pending(), 2u);
  ASSERT_TRUE(StartAll().ok());
  EXPECT_THAT(ran_, ElementsAre(a_->id(), b_->id(), c_->id(), d_->id()));
  EXPECT_TRUE(done_.done());
}

// A vertex failed through a predecessor drains: its VC settles its
// message with the peer, and the vertex counts as finished (failed) only once
// the drain completes; a start that reaches it meanwhile changes nothing.
std::vector<uint64_t>* g_drains = nullptr;
void DrainLater(Car& v, CarEvents&) { g_drains->push_back(v.id()); }
const Vc kDraining{.name = "draining", .launch = &LaunchLocal, .drain = &DrainLater};

TEST(VertexDrain, AFailedPredecessorsSuccessorDrainsBeforeItCountsAsFailed) {
  std::vector<uint64_t> ran, drains;
  g_ran = &ran;
  g_drains = &drains;
  g_complete_now = true;
  CarPool pool{{}};
  base::Completion done;
  auto make = [&](std::span<Car* const> successors, uint32_t predecessors, const Vc* vc) {
    CarSpec s;
    s.kind = CarKind::kVertex;
    s.counter = &done;
    s.vc = vc;
    s.successors = successors;
    s.predecessors = predecessors;
    ++done.pending;
    return *pool.Create(s);
  };
  Car* y = make({}, 1, &kDraining);
  Car* y_succ[1] = {y};
  Car* x = make(y_succ, 0, &kLocal);
  g_fail_id = x->id();
  ASSERT_TRUE(VertexMachine::Dispatch(*x, VertexEvent::kStart).ok());
  EXPECT_EQ(VertexMachine::StateOf(*x), VertexState::kFailed);
  EXPECT_EQ(VertexMachine::StateOf(*y), VertexState::kDraining);
  EXPECT_THAT(drains, ElementsAre(y->id()));
  EXPECT_THAT(ran, ElementsAre(x->id())) << "Y never ran";
  EXPECT_FALSE(done.done()) << "the drain is still out";
  EXPECT_EQ(done.status.code(), absl::StatusCode::kInternal);
  ASSERT_TRUE(VertexMachine::Dispatch(*y, VertexEvent::kStart).ok());  // Begin reaching it late
  EXPECT_EQ(VertexMachine::StateOf(*y), VertexState::kDraining);
  ASSERT_TRUE(VertexMachine::Dispatch(*y, VertexEvent::kComplete).ok());  // the drain settled
  EXPECT_EQ(VertexMachine::StateOf(*y), VertexState::kFailed);
  EXPECT_TRUE(done.done());
  EXPECT_THAT(y->status().message(), HasSubstr("a CAR it depends on ended without completing"));
  EXPECT_EQ(done.status.message(), absl::StrFormat("schedule vertex #%d: reduction failed", x->id()));
  // Another predecessor's failure or completion changes nothing while it
  // drains (rows that stay in draining); only its drain's completion ends it.
  y->Rearm();
  x->Rearm();
  done.pending = 2;
  done.status = absl::OkStatus();
  drains.clear();
  ASSERT_TRUE(VertexMachine::Dispatch(*x, VertexEvent::kStart).ok());
  ASSERT_TRUE(VertexMachine::Dispatch(*y, VertexEvent::kError).ok());
  ASSERT_TRUE(VertexMachine::Dispatch(*y, VertexEvent::kPredecessorDone).ok());
  EXPECT_EQ(VertexMachine::StateOf(*y), VertexState::kDraining);
  EXPECT_THAT(drains, ElementsAre(y->id())) << "drained once";
  EXPECT_FALSE(done.done());
  ASSERT_TRUE(VertexMachine::Dispatch(*y, VertexEvent::kComplete).ok());
  EXPECT_EQ(VertexMachine::StateOf(*y), VertexState::kFailed);
  EXPECT_TRUE(done.done());
  EXPECT_FALSE(VertexMachine::Dispatch(*y, VertexEvent::kError).ok()) << "failed is final";
  pool.Release(x);
  pool.Release(y);
  g_ran = nullptr;
  g_drains = nullptr;
  g_fail_id = 0;
}

}  // namespace
}  // namespace cartage::car
