// The trace a traced process keeps and writes (fsm/trace_ring.h,
// fsm/trace_file.h) and the replay that checks it against the tables
// (fsm/trace_check.h), on the turnstile machine.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "fsm/registry.h"
#include "fsm/trace_check.h"
#include "fsm/trace_compare.h"
#include "fsm/trace_file.h"
#include "fsm/trace_ring.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/turnstile_machine.h"

namespace cartage::test {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using turnstile::E;
using turnstile::S;

TEST(TraceRingTest, KeepsTheLastRecordsAndCountsWhatItLost) {
  fsm::TraceRing ring(10);  // rounded up to 16
  EXPECT_EQ(ring.capacity(), 16u);
  for (uint64_t i = 0; i < 40; ++i) ring.Record({.time_ns = static_cast<int64_t>(i), .instance = i});
  const fsm::TraceRing::Snapshot s = ring.Take();
  EXPECT_EQ(s.recorded, 40u);
  EXPECT_EQ(s.lost(), 24u);
  ASSERT_EQ(s.records.size(), 16u);
  for (std::size_t k = 0; k < 16; ++k) EXPECT_EQ(s.records[k].instance, 24 + k) << "oldest first";
}

TEST(TraceRingTest, NumbersCollectiveCallsPerCommunicator) {
  fsm::TraceRing ring(64);
  EXPECT_EQ(ring.BeginSpan("allreduce/ring", 1), 1u);
  EXPECT_EQ(ring.BeginSpan("bcast/linear", 3), 1u);
  ring.EndSpan(1, "allreduce/ring", 1, true);
  EXPECT_EQ(ring.BeginSpan("allreduce/ring", 1), 2u);
  const fsm::TraceRing::Snapshot s = ring.Take();
  EXPECT_THAT(s.span_names, ElementsAre("allreduce/ring", "bcast/linear"));
  ASSERT_EQ(s.records.size(), 4u);
  EXPECT_EQ(s.records[2].machine, nullptr);
  EXPECT_EQ(s.records[2].from, 1) << "an end";
  EXPECT_EQ(s.records[2].event, 1) << "ended well";
  EXPECT_EQ(s.records[3].instance, 2u);
}

// Records the transitions of `steps`, each event with a payload of 2, through the real dispatcher.
fsm::TraceRing::Snapshot Drive(const std::vector<std::pair<Turnstile*, E>>& steps) {
  fsm::TraceRing ring(64);
  fsm::ScopedTraceSink on(&ring);
  for (const auto& [t, e] : steps) (void)TurnstileMachine::Dispatch(*t, e, 2);
  return ring.Take();
}

// A file name no other test process uses: ctest runs the tests of this
// binary in parallel, each in its own process, over one TempDir.
std::string Unique(const std::string& name) {
  return ::testing::TempDir() + "/trace_test." + std::to_string(::getpid()) + "." + name;
}

fsm::TraceFile Header(int rank, int size, const char* end) {
  fsm::TraceFile h;
  h.job = "j1";
  h.rank = rank;
  h.size = size;
  h.host = "h";
  h.end = end;
  return h;
}

class TraceFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(reg_.Register(TurnstileMachine::Describe()).ok());
  }
  // Writes and reads back one rank's file.
  fsm::TraceFile RoundTrip(const fsm::TraceFile& h, const fsm::TraceRing::Snapshot& s) {
    const std::string path = Unique("t." + std::to_string(h.rank) + ".trace");
    EXPECT_TRUE(fsm::WriteTraceFile(path, h, s).ok());
    absl::StatusOr<fsm::TraceFile> f = fsm::ReadTraceFile(path);
    EXPECT_TRUE(f.ok()) << f.status();
    std::remove(path.c_str());
    return f.ok() ? *f : fsm::TraceFile{};
  }
  fsm::Registry reg_;
};

TEST_F(TraceFileTest, RoundTripsEveryField) {
  Turnstile a;
  a.id = 7;
  fsm::TraceRing::Snapshot s = Drive({{&a, E::kCoin}, {&a, E::kPush}});
  s.span_names = {"barrier/star"};
  s.records.push_back({.time_ns = 99, .instance = 3, .from = 1, .event = 0, .context = 5, .peer = 0});
  const fsm::TraceFile f = RoundTrip(Header(2, 4, "finalize"), s);
  EXPECT_EQ(f.job, "j1");
  EXPECT_EQ(f.rank, 2);
  EXPECT_EQ(f.size, 4);
  EXPECT_EQ(f.end, "finalize");
  ASSERT_EQ(f.machines.size(), 1u);
  EXPECT_EQ(f.machines[0].name, "turnstile");
  EXPECT_THAT(f.machines[0].states, ElementsAre("locked", "unlocked", "broken"));
  ASSERT_EQ(f.entries.size(), 3u);
  EXPECT_EQ(f.entries[0].kind, 't');
  EXPECT_EQ(f.entries[0].instance, 7u);
  EXPECT_EQ(f.entries[0].time_ns, s.records[0].time_ns);
  EXPECT_EQ(f.machines[0].states[f.entries[0].to], "unlocked");
  EXPECT_EQ(f.machines[0].events[f.entries[1].event], "push");
  EXPECT_EQ(f.entries[2].kind, 'e');
  EXPECT_FALSE(f.entries[2].ok);
  EXPECT_EQ(f.span_names[static_cast<std::size_t>(f.entries[2].peer)], "barrier/star");
}

TEST_F(TraceFileTest, RoundTripsTheListedLiveCars) {
  fsm::TraceRing::Snapshot s;
  std::vector<fsm::LiveCar> live(1);
  live[0].at = {.time_ns = 42, .instance = 9, .machine = &fsm::kNamesOf<TurnstileDef>, .from = 1, .to = 1,
                .context = 3, .peer = 1, .tag = 7, .bytes = 64};
  live[0].done = 16;
  live[0].waits_on = 2;
  const std::string path = Unique("live.trace");
  ASSERT_TRUE(fsm::WriteTraceFile(path, Header(0, 2, "signal"), s, &live).ok());
  absl::StatusOr<fsm::TraceFile> f = fsm::ReadTraceFile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->live_listed);
  EXPECT_TRUE(f->entries.empty());
  ASSERT_EQ(f->live.size(), 1u);
  const fsm::TraceFile::Entry& e = f->live[0];
  EXPECT_EQ(e.kind, 'l');
  EXPECT_EQ(f->MachineOf(e).name, "turnstile");
  EXPECT_EQ(f->MachineOf(e).states[e.to], "unlocked");
  EXPECT_EQ(e.time_ns, 42);
  EXPECT_EQ(e.instance, 9u);
  EXPECT_EQ(e.context, 3u);
  EXPECT_EQ(e.peer, 1);
  EXPECT_EQ(e.tag, 7);
  EXPECT_EQ(e.bytes, 64u);
  EXPECT_EQ(e.done, 16u);
  EXPECT_EQ(e.waits_on, 2u);
  // Not listed: the header says so.
  EXPECT_FALSE(RoundTrip(Header(0, 2, "signal"), s).live_listed);
}

TEST_F(TraceFileTest, MalformedFilesAreRefusedByLine) {
  const std::string path = Unique("bad.trace");
  std::FILE* f = std::fopen(path.c_str(), "w");
  std::fputs("cartage-trace 1\njob j\nend finalize\nmachine 0 m a,b e\nt 1 0 1 0 0 5 0 0 0 0\n", f);
  std::fclose(f);
  absl::StatusOr<fsm::TraceFile> t = fsm::ReadTraceFile(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(t.status().message(), HasSubstr("bad.trace:5: state or event out of its machine's range"));
  std::remove(path.c_str());
}

TEST_F(TraceFileTest, ARunOfTheTableChecksClean) {
  Turnstile a, b;
  a.id = 1;
  b.id = 2;
  const fsm::TraceRing::Snapshot s =
      Drive({{&a, E::kCoin}, {&b, E::kKick}, {&a, E::kPush}, {&a, E::kKick}});
  const fsm::TraceCheck c = fsm::CheckJobTrace(reg_, {RoundTrip(Header(0, 1, "finalize"), s)});
  EXPECT_TRUE(c.problems.empty()) << c.problems.front();
  EXPECT_TRUE(c.finished);
  EXPECT_EQ(c.transitions, 4u);
  EXPECT_EQ(c.instances, 2u);
}

TEST_F(TraceFileTest, EveryBrokenRuleIsNamed) {
  Turnstile a;
  a.id = 1;
  fsm::TraceRing::Snapshot s = Drive({{&a, E::kCoin}, {&a, E::kPush}});
  const fsm::MachineNames* m = s.records[0].machine;
  // Not a row: locked --push--> broken.
  s.records.push_back({.time_ns = 5, .instance = 1, .machine = m, .from = 0, .event = 1, .to = 2});
  // A life that begins outside the initial state.
  s.records.push_back({.time_ns = 6, .instance = 9, .machine = m, .from = 1, .event = 0, .to = 1});
  // Leaves a state it is not in (instance 1 is in broken now).
  s.records.push_back({.time_ns = 7, .instance = 1, .machine = m, .from = 1, .event = 1, .to = 0});
  s.recorded = s.records.size();  // nothing lost: every life's start is there
  const fsm::TraceCheck c = fsm::CheckJobTrace(reg_, {RoundTrip(Header(0, 1, "finalize"), s)});
  EXPECT_THAT(c.problems, ElementsAre("rank 0: turnstile#1: locked --push--> broken is no row of the table",
                                      "rank 0: turnstile#9: its first transition leaves 'unlocked', not the initial "
                                      "state 'locked'",
                                      "rank 0: turnstile#1: leaves 'unlocked' but was in 'broken'",
                                      "rank 0: turnstile#1 ends the job in 'locked', which is not final",
                                      "rank 0: turnstile#9 ends the job in 'unlocked', which is not final"));
}

// Two runs of the same traffic compare life for life, whatever the
// instances' ids and the order of their lives; a life taken another way is named.
TEST_F(TraceFileTest, RunsCompareLifeForLife) {
  Turnstile a, b, c, d;
  a.id = 1;
  b.id = 2;
  c.id = 7;
  d.id = 8;
  fsm::TraceRing::Snapshot one = Drive({{&a, E::kCoin}, {&a, E::kPush}, {&a, E::kKick}, {&b, E::kKick}});
  TurnstileMachine::Reset(b);  // re-armed: a second life of b
  const fsm::TraceRing::Snapshot again = Drive({{&b, E::kKick}});
  one.records.insert(one.records.end(), again.records.begin(), again.records.end());
  one.recorded = one.records.size();
  fsm::TraceRing::Snapshot two = Drive({{&c, E::kKick}, {&d, E::kCoin}, {&d, E::kPush}, {&d, E::kKick}});
  TurnstileMachine::Reset(c);
  const fsm::TraceRing::Snapshot later = Drive({{&c, E::kKick}});
  two.records.insert(two.records.end(), later.records.begin(), later.records.end());
  two.recorded = two.records.size();
  const fsm::TraceFile fa = RoundTrip(Header(0, 1, "finalize"), one);
  const fsm::TraceFile fb = RoundTrip(Header(0, 1, "finalize"), two);
  const fsm::TraceComparison same = fsm::CompareJobTraces(reg_, {fa}, {fb});
  EXPECT_TRUE(same.differences.empty()) << same.differences.front();
  EXPECT_EQ(same.lives, 3u);

  Turnstile e, g;
  e.id = 1;
  g.id = 2;
  const fsm::TraceRing::Snapshot other = Drive(
      {{&e, E::kCoin}, {&e, E::kPush}, {&e, E::kCoin}, {&e, E::kPush}, {&e, E::kKick}, {&g, E::kCoin}});
  const fsm::TraceComparison diff = fsm::CompareJobTraces(reg_, {fa}, {RoundTrip(Header(0, 1, "signal"), other)});
  EXPECT_THAT(diff.differences,
              ElementsAre("rank 0: turnstile locked --coin--> unlocked (unfinished): 0 in A, 1 in B",
                          "rank 0: turnstile locked --coin--> unlocked --push--> locked --coin--> unlocked --push--> "
                          "locked --kick--> broken: 0 in A, 1 in B",
                          "rank 0: turnstile locked --coin--> unlocked --push--> locked --kick--> broken: 1 in A, 0 in B",
                          "rank 0: turnstile locked --kick--> broken: 2 in A, 0 in B"));
  // A ring that lost records cannot be compared life for life.
  fsm::TraceRing::Snapshot lost = two;
  lost.recorded += 5;
  EXPECT_THAT(fsm::CompareJobTraces(reg_, {fa}, {RoundTrip(Header(0, 1, "finalize"), lost)}).differences,
              ElementsAre("rank 0: its ring lost 5 records (raise CARTAGE_TRACE_RECORDS)"));
}

TEST_F(TraceFileTest, OnlyAFinishedJobMustEndInFinalStates) {
  Turnstile a;
  a.id = 1;
  const fsm::TraceRing::Snapshot s = Drive({{&a, E::kCoin}});
  EXPECT_THAT(fsm::CheckJobTrace(reg_, {RoundTrip(Header(0, 1, "finalize"), s)}).problems,
              ElementsAre("rank 0: turnstile#1 ends the job in 'unlocked', which is not final"));
  const fsm::TraceCheck dumped = fsm::CheckJobTrace(reg_, {RoundTrip(Header(0, 1, "signal"), s)});
  EXPECT_FALSE(dumped.finished);
  EXPECT_TRUE(dumped.problems.empty());
  // Two ranks, one file: not finished either.
  EXPECT_TRUE(fsm::CheckJobTrace(reg_, {RoundTrip(Header(0, 2, "finalize"), s)}).problems.empty());
}

TEST_F(TraceFileTest, AnUnknownMachineAndAnOpenCallAreNamed) {
  fsm::TraceRing ring(16);
  static constexpr absl::string_view kStates[] = {"x"};
  static constexpr fsm::EventSpec kEvents[] = {{"go", fsm::EventKind::kUser}};
  static constexpr fsm::MachineNames kOther{"other", kStates, kEvents};
  ring.Record({.instance = 1, .machine = &kOther});
  (void)ring.BeginSpan("gather/linear", 1);
  const fsm::TraceCheck c = fsm::CheckJobTrace(reg_, {RoundTrip(Header(0, 1, "finalize"), ring.Take())});
  EXPECT_THAT(c.problems, ElementsAre("rank 0: machine 'other' is in no table",
                                      "rank 0: collective call 1 (gather/linear) on context 1 never ended"));
}

}  // namespace
}  // namespace cartage::test
