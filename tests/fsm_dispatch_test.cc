// Dispatch, guards, run-to-completion, error reporting and tracing.
#include <array>
#include <string>
#include <vector>

#include "fsm/machine.h"
#include "fsm/trace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/counting_new.h"
#include "tests/turnstile_machine.h"

namespace cartage::test {
namespace {

using E = TurnstileDef::Event;
using S = TurnstileDef::State;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(FsmDispatch, GuardDecidesAndActionRuns) {
  Turnstile t;
  TurnstileMachine::Reset(t);
  EXPECT_EQ(TurnstileMachine::StateOf(t), S::kLocked);
  // One coin of value 1 is refused by PaidEnough: no row left, an error, no change.
  const absl::Status refused = TurnstileMachine::Dispatch(t, E::kCoin, 1);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.message(),
            "fsm 'turnstile' instance 0: event 'coin' in state 'locked': every guard refused "
            "the transition");
  EXPECT_EQ(TurnstileMachine::StateOf(t), S::kLocked);
  EXPECT_EQ(t.coins, 0);

  ASSERT_TRUE(TurnstileMachine::Dispatch(t, E::kCoin, 2).ok());
  EXPECT_EQ(TurnstileMachine::StateOf(t), S::kUnlocked);
  EXPECT_EQ(TurnstileMachine::StateName(t), "unlocked");
  EXPECT_EQ(t.coins, 1);
  ASSERT_TRUE(TurnstileMachine::Dispatch(t, E::kCoin, 1).ok());  // unguarded self-loop
  EXPECT_EQ(t.coins, 2);
  ASSERT_TRUE(TurnstileMachine::Dispatch(t, E::kPush).ok());
  EXPECT_EQ(TurnstileMachine::StateOf(t), S::kLocked);
  EXPECT_EQ(t.passes, 1);
}

TEST(FsmDispatch, UnhandledEventNamesMachineStateEventAndLeavesStateAlone) {
  Turnstile t;
  t.id = 42;
  TurnstileMachine::Reset(t);
  const absl::Status s = TurnstileMachine::Dispatch(t, E::kPush);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "fsm 'turnstile' instance 42: event 'push' is not handled in state 'locked'");
  EXPECT_EQ(TurnstileMachine::StateOf(t), S::kLocked);
}

TEST(FsmDispatch, FinalStateIsFinal) {
  Turnstile t;
  TurnstileMachine::Reset(t);
  EXPECT_FALSE(TurnstileMachine::IsFinal(t));
  ASSERT_TRUE(TurnstileMachine::Dispatch(t, E::kKick).ok());
  EXPECT_TRUE(TurnstileMachine::IsFinal(t));
  EXPECT_FALSE(TurnstileMachine::Dispatch(t, E::kCoin, 9).ok());
}

TEST(FsmDispatch, RaisedEventsRunAfterTheCurrentTransitionInOrder) {
  std::vector<std::string> log;
  Turnstile a, b, c;
  a.id = 1; b.id = 2; c.id = 3;
  for (Turnstile* t : {&a, &b, &c}) {
    TurnstileMachine::Reset(*t);
    t->log = &log;
    ASSERT_TRUE(TurnstileMachine::Dispatch(*t, E::kCoin, 2).ok());
  }
  log.clear();
  // a's Pass raises coin on b; b is unlocked so TakeCoin runs, and only after
  // a's transition finished (a is already locked when b's action runs).
  a.partner = &b;
  b.partner = &c;
  ASSERT_TRUE(TurnstileMachine::Dispatch(a, E::kPush).ok());
  EXPECT_THAT(log, ElementsAre("pass#1", "take#2"));
  EXPECT_EQ(TurnstileMachine::StateOf(a), S::kLocked);
  EXPECT_EQ(b.coins, 2);
  // A raised event that fails is reported by the outer Dispatch, and the
  // transition that raised it stands.
  log.clear();
  ASSERT_TRUE(TurnstileMachine::Dispatch(c, E::kPush).ok());
  ASSERT_TRUE(TurnstileMachine::Dispatch(c, E::kKick).ok());  // c is broken (final)
  const absl::Status s = TurnstileMachine::Dispatch(b, E::kPush);
  EXPECT_EQ(s.message(), "fsm 'turnstile' instance 3: event 'coin' is not handled in state 'broken'");
  EXPECT_EQ(TurnstileMachine::StateOf(b), S::kLocked);
  EXPECT_THAT(log, ElementsAre("pass#3", "pass#2"));
}

TEST(FsmDispatch, QueuedPayloadsReachTheirEventsAsTheQueueGrows) {
  // Raises with and without a payload, interleaved, past the queues' inline
  // room, and a raise with a payload (Pass: coin 5 on the partner) from
  // inside the drain: each event must see its own payload.
  Turnstile a, b;
  a.id = 1;
  b.id = 2;
  TurnstileMachine::Reset(a);
  TurnstileMachine::Reset(b);
  a.partner = &b;
  fsm::EventsOf<TurnstileDef> events;
  for (int round = 0; round < 3; ++round) {
    events.Raise<TurnstileMachine>(a, E::kCoin, 1);  // too little while locked: refused
    events.Raise<TurnstileMachine>(a, E::kCoin, 3);  // unlocks
    events.Raise<TurnstileMachine>(a, E::kCoin, 0);  // unlocked: any coin is taken
    events.Raise<TurnstileMachine>(a, E::kPush);     // no payload
  }
  const absl::Status s = events.Drain();
  EXPECT_EQ(s.message(), "fsm 'turnstile' instance 1: event 'coin' in state 'locked': every guard refused the transition");
  EXPECT_EQ(a.coins, 6);
  EXPECT_EQ(a.passes, 3);
  EXPECT_EQ(TurnstileMachine::StateOf(a), S::kLocked);
  EXPECT_EQ(b.coins, 3);  // three coins of 5: the first unlocked it
  EXPECT_EQ(TurnstileMachine::StateOf(b), S::kUnlocked);
  EXPECT_FALSE(events.has_pending());
}

// Raises `raised` coins with payloads in one step and drains it; returns
// the allocations that took.
long AllocationsToDrain(Turnstile& t, int raised) {
  fsm::EventsOf<TurnstileDef> events;
  const long before = g_allocations.load();
  events.Raise<TurnstileMachine>(t, E::kCoin, 3);  // unlocks (or, unlocked, is taken)
  for (int i = 1; i < raised; ++i) events.Raise<TurnstileMachine>(t, E::kCoin, 0);  // unlocked: taken
  EXPECT_TRUE(events.Drain().ok());
  return g_allocations.load() - before;
}

TEST(FsmDispatch, FourPayloadsInOneStepTouchNoAllocatorAFifthSpills) {
  // A receive meeting a message that came before it raises three events
  // with payloads in one step (match, envelope, data): four stay inline.
  Turnstile a;
  a.id = 1;
  TurnstileMachine::Reset(a);
  EXPECT_EQ(AllocationsToDrain(a, 4), 0);
  EXPECT_GT(AllocationsToDrain(a, 5), 0);  // the fifth goes to the heap: the counter sees it
  EXPECT_EQ(a.coins, 9);
  EXPECT_EQ(TurnstileMachine::StateOf(a), S::kUnlocked);
}

TEST(FsmDispatch, ADrainedQueueIsEmptyAndItsRoomServesAgain) {
  // Eight events and four payloads fit in the queue itself. A queue that
  // lives on (a test's event loop) and is drained round after round takes
  // them again each round, and a ninth event spills and still runs in order.
  std::vector<std::string> log;
  Turnstile a;
  a.id = 1;
  TurnstileMachine::Reset(a);
  fsm::EventsOf<TurnstileDef> events;
  const long before = g_allocations.load();
  for (int round = 0; round < 3; ++round) {
    events.Raise<TurnstileMachine>(a, E::kCoin, 2);  // unlocks
    for (int i = 0; i < 3; ++i) events.Raise<TurnstileMachine>(a, E::kCoin, 1);  // unlocked: taken
    for (int i = 0; i < 3; ++i) events.Raise<TurnstileMachine>(a, E::kCoin);   // no payload: taken
    events.Raise<TurnstileMachine>(a, E::kPush);                                // locks
    ASSERT_TRUE(events.has_pending());
    ASSERT_TRUE(events.Drain().ok());
    EXPECT_FALSE(events.has_pending());
  }
  EXPECT_EQ(g_allocations.load() - before, 0);
  EXPECT_EQ(a.coins, 21);
  EXPECT_EQ(a.passes, 3);
  const long before_spill = g_allocations.load();
  for (int i = 0; i < 4; ++i) {
    events.Raise<TurnstileMachine>(a, E::kCoin, 2);
    events.Raise<TurnstileMachine>(a, E::kPush);
  }
  EXPECT_EQ(g_allocations.load() - before_spill, 0);
  events.Raise<TurnstileMachine>(a, E::kCoin, 2);  // the ninth: spills
  EXPECT_GT(g_allocations.load() - before_spill, 0);
  a.log = &log;
  ASSERT_TRUE(events.Drain().ok());
  EXPECT_THAT(log, ElementsAre("take#1", "pass#1", "take#1", "pass#1", "take#1", "pass#1", "take#1", "pass#1",
                               "take#1"));
  EXPECT_EQ(TurnstileMachine::StateOf(a), S::kUnlocked);
}

TEST(FsmDispatch, AnEventPastTheInlineRoomKeepsItsPayloadInline) {
  // Eight events with no payload fill the queue's own room; the ninth
  // spills though its payload, the first, stays inline, and must still
  // reach its event (a coin of 2 unlocks; a coin of 1 would not).
  Turnstile a;
  a.id = 1;
  TurnstileMachine::Reset(a);
  fsm::EventsOf<TurnstileDef> events;
  for (int i = 0; i < 8; ++i) events.Raise<TurnstileMachine>(a, E::kPush);  // locked: unhandled
  events.Raise<TurnstileMachine>(a, E::kCoin, 2);
  events.Raise<TurnstileMachine>(a, E::kCoin, 1);  // unlocked: taken
  const absl::Status s = events.Drain();
  EXPECT_EQ(s.message(), "fsm 'turnstile' instance 1: event 'push' is not handled in state 'locked'");
  EXPECT_EQ(a.coins, 2);
  EXPECT_EQ(TurnstileMachine::StateOf(a), S::kUnlocked);
  EXPECT_FALSE(events.has_pending());
}

TEST(FsmDispatch, ChainedRaisesRunToCompletionIteratively) {
  // A ring of 1000 turnstiles: each push raises a coin on the next; none of
  // them is pushed, so the chain is 1 transition deep but 1000 wide.
  std::vector<Turnstile> ring(1000);
  for (size_t i = 0; i < ring.size(); ++i) {
    ring[i].id = i;
    TurnstileMachine::Reset(ring[i]);
    ASSERT_TRUE(TurnstileMachine::Dispatch(ring[i], E::kCoin, 2).ok());
  }
  ring[0].partner = &ring[1];
  ASSERT_TRUE(TurnstileMachine::Dispatch(ring[0], E::kPush).ok());
  EXPECT_EQ(ring[1].coins, 2);
}

TEST(FsmTrace, OffRecordsNothingOnRecordsEverything) {
  Turnstile t;
  t.id = 7;
  TurnstileMachine::Reset(t);
  fsm::TraceRecorder rec(16);
  ASSERT_TRUE(TurnstileMachine::Dispatch(t, E::kCoin, 2).ok());
  EXPECT_TRUE(rec.records().empty());
  {
    fsm::ScopedTraceSink on(&rec);
    ASSERT_TRUE(TurnstileMachine::Dispatch(t, E::kPush).ok());
    ASSERT_TRUE(TurnstileMachine::Dispatch(t, E::kCoin, 3).ok());
    // Compiled-out dispatch never reaches the hook.
    ASSERT_TRUE(TurnstileMachine::Dispatch<fsm::TraceMode::kCompiledOut>(t, E::kPush).ok());
    // Failed dispatches are not transitions.
    EXPECT_FALSE(TurnstileMachine::Dispatch(t, E::kPush).ok());
  }
  ASSERT_TRUE(TurnstileMachine::Dispatch(t, E::kCoin, 2).ok());  // off again
  ASSERT_EQ(rec.records().size(), 2u);
  EXPECT_EQ(rec.ToText(),
            "turnstile#7: unlocked --push--> locked\n"
            "turnstile#7: locked --coin--> unlocked\n");
  EXPECT_EQ(rec.records()[0].instance, 7u);
  EXPECT_LE(rec.records()[0].time_ns, rec.records()[1].time_ns);
}

// DispatchFrom compiles one (state, event)'s rows in line; from any other
// state it is the table's dispatch: the same transitions and trace either way.
TEST(FsmTrace, DispatchFromTakesTheTablesRowsInEveryState) {
  Turnstile t;
  t.id = 5;
  TurnstileMachine::Reset(t);
  fsm::TraceRecorder rec(16);
  fsm::ScopedTraceSink on(&rec);
  // The guard still decides: 1 coin is not enough, and no row is taken.
  EXPECT_EQ((TurnstileMachine::DispatchFrom<S::kLocked, E::kCoin>(t, 1).code()), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE((TurnstileMachine::DispatchFrom<S::kLocked, E::kCoin>(t, 2)).ok());
  // Not in locked now: the table's dispatch takes unlocked's coin row.
  ASSERT_TRUE((TurnstileMachine::DispatchFrom<S::kLocked, E::kCoin>(t, 3)).ok());
  ASSERT_TRUE((TurnstileMachine::DispatchFrom<S::kUnlocked, E::kPush>(t)).ok());
  // An event the state does not take fails as Dispatch does.
  const absl::Status s = TurnstileMachine::DispatchFrom<S::kUnlocked, E::kPush>(t);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(rec.ToText(),
            "turnstile#5: locked --coin--> unlocked\n"
            "turnstile#5: unlocked --coin--> unlocked\n"
            "turnstile#5: unlocked --push--> locked\n");
  EXPECT_EQ(t.coins, 2);
}

// A machine whose post most often raises `done` on itself, for
// DispatchFromThen: how the post's action raises is up to the instance.
struct Relay {
  fsm::StateWord state;
  uint64_t id = 0;
  enum class Raises { kDoneOnItself, kDoneWithPayload, kTwoEvents, kNothing, kDoneOnAnother } raises{};
  bool queue = false;  // the post's guard: to `queued` instead of `sent`
  Relay* other = nullptr;
  int done = 0;
};
struct RelayDef {
  enum class State : uint8_t { kIdle, kSent, kQueued, kDone, kCount };
  enum class Event : uint8_t { kPost, kDone, kCount };
  using Context = Relay;
  using Payload = int;
  static constexpr absl::string_view kName = "relay";
  static constexpr absl::string_view kSummary = "posts, then is done";
  static constexpr std::array<absl::string_view, 4> kStates = {"idle", "sent", "queued", "done"};
  static constexpr std::array<fsm::EventSpec, 2> kEvents = {{{"post", fsm::EventKind::kUser},
                                                             {"done", fsm::EventKind::kWire}}};
  static constexpr State kInitial = State::kIdle;
  static constexpr std::array kFinal = {State::kDone};
  static fsm::StateWord& Cell(Relay& r) { return r.state; }
  static uint64_t IdOf(const Relay& r) { return r.id; }
};
bool Queues(const Relay& r, const int&) { return r.queue; }
void Post(Relay& r, const int&, fsm::EventsOf<RelayDef>& events);
void Finish(Relay& r, const int& value, fsm::EventsOf<RelayDef>&) { r.done += 1 + value; }
inline constexpr auto kRelayTable = fsm::MakeTable<RelayDef>({
  {RelayDef::State::kIdle,   RelayDef::Event::kPost, {"Queues", &Queues}, {"Post", &Post}, RelayDef::State::kQueued},
  {RelayDef::State::kIdle,   RelayDef::Event::kPost, {},                  {"Post", &Post}, RelayDef::State::kSent},
  {RelayDef::State::kSent,   RelayDef::Event::kDone, {},                  {"Finish", &Finish}, RelayDef::State::kDone},
  {RelayDef::State::kQueued, RelayDef::Event::kDone, {},                  {"Finish", &Finish}, RelayDef::State::kDone},
});
using RelayMachine = fsm::Machine<RelayDef, kRelayTable>;
void Post(Relay& r, const int&, fsm::EventsOf<RelayDef>& events) {
  switch (r.raises) {
    case Relay::Raises::kDoneOnItself: events.Raise<RelayMachine>(r, RelayDef::Event::kDone); break;
    case Relay::Raises::kDoneWithPayload: events.Raise<RelayMachine>(r, RelayDef::Event::kDone, 10); break;
    case Relay::Raises::kTwoEvents:
      events.Raise<RelayMachine>(r, RelayDef::Event::kDone);
      events.Raise<RelayMachine>(r, RelayDef::Event::kDone);  // done is final: refused
      break;
    case Relay::Raises::kNothing: break;
    case Relay::Raises::kDoneOnAnother: events.Raise<RelayMachine>(*r.other, RelayDef::Event::kDone); break;
  }
}

// DispatchFromThen runs the one event the post raised on the instance itself
// in line; whatever else happens (another state than expected, a payload,
// two events, none, another instance, a state other than the post's)
// goes the queue's way. The transitions, their order, the actions' effects
// and the status are those of Dispatch in every case.
TEST(FsmTrace, DispatchFromThenDoesWhatDispatchDoes) {
  using RS = RelayDef::State;
  using RE = RelayDef::Event;
  struct Case {
    Relay::Raises raises;
    bool queue;
    bool start_sent;
  };
  const Case cases[] = {{Relay::Raises::kDoneOnItself, false, false},   {Relay::Raises::kDoneOnItself, true, false},
                        {Relay::Raises::kDoneWithPayload, false, false}, {Relay::Raises::kTwoEvents, false, false},
                        {Relay::Raises::kNothing, false, false},        {Relay::Raises::kDoneOnAnother, false, false},
                        {Relay::Raises::kDoneOnItself, false, true}};
  for (const Case& c : cases) {
    std::string text[2];
    absl::Status status[2];
    int done[2][2];
    for (int fused = 0; fused < 2; ++fused) {
      Relay r, other;
      r.id = 1;
      other.id = 2;
      r.raises = c.raises;
      r.queue = c.queue;
      r.other = &other;
      RelayMachine::Reset(r);
      RelayMachine::Reset(other);
      ASSERT_TRUE(RelayMachine::Dispatch(other, RE::kPost).ok());  // other waits in sent (raises nothing)
      other.raises = Relay::Raises::kNothing;
      if (c.start_sent) {
        r.raises = Relay::Raises::kNothing;
        ASSERT_TRUE(RelayMachine::Dispatch(r, RE::kPost).ok());
      }
      fsm::TraceRecorder rec(16);
      {
        fsm::ScopedTraceSink on(&rec);
        status[fused] = fused ? RelayMachine::DispatchFromThen<RS::kIdle, RE::kPost, RS::kSent, RE::kDone>(r)
                              : RelayMachine::Dispatch(r, RE::kPost);
      }
      text[fused] = rec.ToText();
      done[fused][0] = r.done;
      done[fused][1] = other.done;
    }
    const int k = static_cast<int>(c.raises);
    EXPECT_EQ(text[1], text[0]) << k;
    EXPECT_EQ(status[1], status[0]) << k;
    EXPECT_EQ(done[1][0], done[0][0]) << k;
    EXPECT_EQ(done[1][1], done[0][1]) << k;
  }
  // What the cases above compare, for one: post then done, both recorded.
  Relay r;
  r.id = 7;
  RelayMachine::Reset(r);
  fsm::TraceRecorder rec(16);
  fsm::ScopedTraceSink on(&rec);
  ASSERT_TRUE((RelayMachine::DispatchFromThen<RS::kIdle, RE::kPost, RS::kSent, RE::kDone>(r)).ok());
  EXPECT_EQ(rec.ToText(), "relay#7: idle --post--> sent\nrelay#7: sent --done--> done\n");
  EXPECT_EQ(r.done, 1);
}

TEST(FsmTrace, RecorderCountsWhatDoesNotFitAndExportsChromeJson) {
  Turnstile t;
  t.id = 3;
  TurnstileMachine::Reset(t);
  fsm::TraceRecorder rec(3);
  fsm::ScopedTraceSink on(&rec);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(TurnstileMachine::Dispatch(t, E::kCoin, 2).ok());
    ASSERT_TRUE(TurnstileMachine::Dispatch(t, E::kPush).ok());
  }
  EXPECT_EQ(rec.records().size(), 3u);
  EXPECT_EQ(rec.dropped(), 3u);
  const std::string json = rec.ToChromeTraceJson();
  EXPECT_THAT(json, HasSubstr(R"("traceEvents":[)"));
  // Two slices (the state left at the 2nd and 3rd record) and three instants.
  EXPECT_THAT(json, HasSubstr(R"({"name":"unlocked","cat":"turnstile","ph":"X","pid":1,"tid":3,)"));
  EXPECT_THAT(json, HasSubstr(R"({"name":"locked","cat":"turnstile","ph":"X","pid":1,"tid":3,)"));
  EXPECT_THAT(json, HasSubstr(R"("name":"coin","cat":"turnstile","ph":"i")"));
  EXPECT_THAT(json, HasSubstr(R"("args":{"from":"unlocked","to":"locked"})"));
  rec.Clear();
  EXPECT_TRUE(rec.records().empty());
  EXPECT_EQ(rec.dropped(), 0u);
}

}  // namespace
}  // namespace cartage::test
