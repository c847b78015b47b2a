// Traced jobs of real processes (`cartage run --trace`): the exact
// transitions of a known exchange, the replay against the tables, the
// merged JSON's message arrow, and a hang's dump at the launcher's timeout.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "fsm/trace_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/run_command.h"

namespace cartage::test {
namespace {

using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class TraceJobTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/trace_job_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The files of the one job in dir_, by rank.
  std::vector<fsm::TraceFile> Files() {
    std::vector<fsm::TraceFile> out;
    for (const auto& f : std::filesystem::directory_iterator(dir_)) {
      if (f.path().extension() != ".trace") continue;
      absl::StatusOr<fsm::TraceFile> t = fsm::ReadTraceFile(f.path().string());
      EXPECT_TRUE(t.ok()) << t.status();
      if (t.ok()) out.push_back(*t);
    }
    std::sort(out.begin(), out.end(), [](const fsm::TraceFile& a, const fsm::TraceFile& b) { return a.rank < b.rank; });
    return out;
  }
  // A rank's CAR transitions as "machine#k: from --event--> to [peer tag bytes]",
  // k numbering its CARs in order of appearance.
  static std::vector<std::string> Cars(const fsm::TraceFile& f) {
    std::vector<std::string> out;
    std::vector<std::pair<int32_t, uint64_t>> seen;
    for (const fsm::TraceFile::Entry& e : f.entries) {
      if (e.kind != 't') continue;
      const fsm::TraceFile::Machine& m = f.MachineOf(e);
      if (!absl::StartsWith(m.name, "car_")) continue;
      auto it = std::find(seen.begin(), seen.end(), std::make_pair(e.machine, e.instance));
      if (it == seen.end()) it = seen.insert(seen.end(), {e.machine, e.instance});
      out.push_back(absl::StrFormat("%s#%d: %s --%s--> %s [%d %d %d]", m.name, it - seen.begin() + 1,
                                    m.states[e.from], m.events[e.event], m.states[e.to], e.peer, e.tag, e.bytes));
    }
    return out;
  }
  // A rank's listed live CARs as "machine state [peer tag bytes done D]".
  static std::vector<std::string> Live(const fsm::TraceFile& f) {
    std::vector<std::string> out;
    EXPECT_TRUE(f.live_listed) << "rank " << f.rank;
    for (const fsm::TraceFile::Entry& e : f.live) {
      const fsm::TraceFile::Machine& m = f.MachineOf(e);
      out.push_back(absl::StrFormat("%s %s [%d %d %d done %d]", m.name, m.states[e.to], e.peer, e.tag, e.bytes, e.done));
    }
    return out;
  }
  std::string dir_;
};

TEST_F(TraceJobTest, AKnownExchangeTakesExactlyTheseTransitions) {
  const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "2", "--timeout", "60", "--trace", dir_, HELLO_BIN},
                                     {"CARTAGE_METHODS=shm"});
  ASSERT_EQ(r.code, 0) << r.err;
  const std::vector<fsm::TraceFile> f = Files();
  ASSERT_EQ(f.size(), 2u);
  for (const fsm::TraceFile& t : f) {
    EXPECT_EQ(t.end, "finalize");
    EXPECT_EQ(t.size, 2);
    EXPECT_EQ(t.lost, 0u);
    EXPECT_EQ(t.job, f[0].job);
  }
  // Rank 1 sends 22 bytes, tag 1, to rank 0: eager, done once they left.
  EXPECT_THAT(Cars(f[1]), ElementsAre("car_send#1: idle --post--> eager_in_flight [0 1 22]",
                                      "car_send#1: eager_in_flight --local_done--> done [0 1 22]"));
  // Rank 0 receives from any source: posted before the message came, or
  // the message waited as an unexpected CAR and was handed to the receive.
  EXPECT_THAT(Cars(f[0]),
              AnyOf(ElementsAre("car_recv#1: idle --post--> posted [-1 1 128]",
                                "car_recv#1: posted --eager--> done [1 1 22]"),
                    ElementsAre("car_unexpected#1: new --eager--> buffered [1 1 22]",
                                "car_recv#2: idle --post--> posted [-1 1 128]",
                                "car_unexpected#1: buffered --match--> handed_off [1 1 22]",
                                "car_recv#2: posted --envelope--> receiving [1 1 22]",
                                "car_recv#2: receiving --data--> done [1 1 22]")));

  const CommandResult check = RunCommand({CARTAGE_BIN, "trace", "check", dir_});
  EXPECT_EQ(check.code, 0) << check.out << check.err;
  EXPECT_THAT(check.out, HasSubstr("2 of 2 ranks, every one finalized"));
  EXPECT_THAT(check.out, HasSubstr("as the tables say"));

  const std::string json = dir_ + "/job.json";
  const CommandResult merged = RunCommand({CARTAGE_BIN, "trace", dir_, "--out", json});
  ASSERT_EQ(merged.code, 0) << merged.err;
  const std::string text = Slurp(json);
  EXPECT_THAT(text, HasSubstr(R"("name":"message 1→0 tag 1","cat":"message","ph":"s","id":)"));
  EXPECT_THAT(text, HasSubstr(R"("name":"message 1→0 tag 1","cat":"message","ph":"f","bp":"e","id":)"));
  EXPECT_THAT(text, HasSubstr(R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"rank 1 )"));
}

TEST_F(TraceJobTest, AHungJobIsDumpedAtTheTimeoutShowingWhatEachRankWaitsFor) {
  const CommandResult r = RunCommand(
      {CARTAGE_BIN, "run", "-n", "2", "--timeout", "2", "--trace", dir_, TRACE_RANKS_BIN, "deadlock"});
  EXPECT_EQ(r.code, 124) << r.err;
  const std::vector<fsm::TraceFile> f = Files();
  ASSERT_EQ(f.size(), 2u);
  for (const fsm::TraceFile& t : f) {
    // Written on the launcher's SIGUSR1; a rank whose receive then failed
    // (its peer gone) and exited wrote it again.
    EXPECT_THAT(t.end, AnyOf("signal", "exit"));
    const int peer = 1 - t.rank;
    EXPECT_THAT(Cars(t), ElementsAre(absl::StrFormat("car_recv#1: idle --post--> posted [%d 7 8]", peer)))
        << "rank " << t.rank;
    // Waiting inside cartage, the rank listed its live CARs itself.
    if (t.end == "signal") {
      EXPECT_THAT(Live(t), ElementsAre(absl::StrFormat("car_recv posted [%d 7 8 done 0]", peer)));
    }
  }
  // Unfinished: no CAR must be final, and the replay says so.
  const CommandResult check = RunCommand({CARTAGE_BIN, "trace", "check", dir_});
  EXPECT_EQ(check.code, 0) << check.out;
  EXPECT_THAT(check.out, HasSubstr("not every one finalized"));
  const CommandResult why = RunCommand({CARTAGE_BIN, "why-stuck", dir_});
  EXPECT_EQ(why.code, 0) << why.err;
  EXPECT_THAT(why.out, HasSubstr("deadlock: rank 0 waits for a message from rank 1 (tag 7, context 0, 8 bytes) in "
                                 "car_recv#1 'posted', while rank 1 waits for a message from rank 0 (tag 7, context 0, "
                                 "8 bytes) in car_recv#1 'posted': each waits for the next\n"));
}

TEST_F(TraceJobTest, ADeadlockWhosePostsTheRingLostIsNamedFromTheListedCars) {
  const CommandResult r = RunCommand(
      {CARTAGE_BIN, "run", "-n", "2", "--timeout", "2", "--trace", dir_, TRACE_RANKS_BIN, "buried"},
      {"CARTAGE_TRACE_RECORDS=16", "CARTAGE_METHODS=shm"});
  EXPECT_EQ(r.code, 124) << r.err;
  const std::vector<fsm::TraceFile> f = Files();
  ASSERT_EQ(f.size(), 2u);
  for (const fsm::TraceFile& t : f) {
    EXPECT_GT(t.lost, 0u) << "rank " << t.rank;
    for (const std::string& c : Cars(t)) EXPECT_THAT(c, ::testing::Not(HasSubstr(" 7 8]"))) << "the ring kept a post";
    // Written on the launcher's SIGUSR1 or at exit (once its peer went, the
    // receive may have failed): either way the rank listed its CARs itself.
    EXPECT_THAT(t.end, AnyOf("signal", "exit"));
    const int peer = 1 - t.rank;
    EXPECT_THAT(Live(t), AnyOf(ElementsAre(absl::StrFormat("car_recv posted [%d 7 8 done 0]", peer)),
                               ElementsAre(absl::StrFormat("car_recv failed [%d 7 8 done 0]", peer))));
  }
  const CommandResult why = RunCommand({CARTAGE_BIN, "why-stuck", dir_});
  EXPECT_EQ(why.code, 0) << why.err;
  EXPECT_THAT(why.out, ::testing::ContainsRegex(
                           "deadlock: rank 0 waits for a message from rank 1 \\(tag 7, context 0, 8 bytes\\) in "
                           "car_recv#[0-9]+ 'posted', while rank 1 waits for a message from rank 0 \\(tag 7, context 0, "
                           "8 bytes\\) in car_recv#[0-9]+ 'posted': each waits for the next\n"))
      << why.out;
}

TEST_F(TraceJobTest, ARankThatSkipsACollectiveIsNamed) {
  const CommandResult r = RunCommand(
      {CARTAGE_BIN, "run", "-n", "3", "--timeout", "2", "--trace", dir_, TRACE_RANKS_BIN, "skipcoll"});
  EXPECT_EQ(r.code, 124) << r.err;
  const CommandResult why = RunCommand({CARTAGE_BIN, "why-stuck", dir_});
  EXPECT_EQ(why.code, 0) << why.err;
  EXPECT_THAT(why.out, ::testing::MatchesRegex(
                           "job [0-9a-f-]+:\n"
                           "collective calls on context 1 disagree: ranks 0, 2 are in their 1st collective call "
                           "\\(barrier/[a-z_]+\\); rank 1 is in none, having made 0; it is in finalize\n"
                           "ranks 0, 2 wait for rank 1, which is in finalize\n"));
}

TEST_F(TraceJobTest, RanksThatNameDifferentRootsAreNamed) {
  const CommandResult r =
      RunCommand({CARTAGE_BIN, "run", "-n", "3", "--timeout", "2", "--trace", dir_, TRACE_RANKS_BIN, "root"});
  EXPECT_EQ(r.code, 124) << r.err;
  const CommandResult why = RunCommand({CARTAGE_BIN, "why-stuck", dir_});
  EXPECT_EQ(why.code, 0) << why.err;
  EXPECT_THAT(why.out, ::testing::ContainsRegex(
                           "collective calls on context 1 disagree: ranks 1, 2 are in their 1st collective call "
                           "\\(bcast/[a-z_]+ root 0\\); rank 0 is in its 1st collective call \\(bcast/[a-z_]+ root 1\\)\n"))
      << why.out;
}

TEST_F(TraceJobTest, RanksThatPassDifferentCountsAreNamed) {
  const CommandResult r =
      RunCommand({CARTAGE_BIN, "run", "-n", "2", "--timeout", "30", "--trace", dir_, TRACE_RANKS_BIN, "count"});
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const std::vector<fsm::TraceFile> f = Files();
  ASSERT_EQ(f.size(), 2u);
  for (const fsm::TraceFile& t : f) EXPECT_EQ(t.end, "finalize") << "rank " << t.rank << " returned from main";
  const CommandResult why = RunCommand({CARTAGE_BIN, "why-stuck", dir_});
  EXPECT_EQ(why.code, 0) << why.err;
  // Rank 0 passed 2 ints (8 bytes), rank 1 passed 4 (16 bytes).
  EXPECT_THAT(why.out, AnyOf(HasSubstr("rank 0's receive from rank 1 (tag "), HasSubstr("rank 1's receive from rank 0 (tag ")));
  EXPECT_THAT(why.out, AnyOf(HasSubstr(", context 1) was posted for 8 bytes but the message has 16: the ranks passed "
                                       "different counts or types to the same collective call"),
                             HasSubstr(", context 1) was posted for 16 bytes but the message has 8: the ranks passed "
                                       "different counts or types to the same collective call")));
}

TEST_F(TraceJobTest, TheWatchdogWritesTheTraceOnceProgressStops) {
  const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "1", "--timeout", "30", "--trace", dir_,
                                      TRACE_RANKS_BIN, "stall"},
                                     {"CARTAGE_WATCHDOG=0.3"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, ::testing::ContainsRegex("cartage\\[0\\]: no progress for 0.3 s \\(CARTAGE_WATCHDOG\\): trace written to "
                                              ".*\\.0\\.trace; this rank listed no live CARs: it is not waiting in "
                                              "cartage \\(it computes or waits in its own code\\) \\(cartage why-stuck "
                                              "reads it\\)"));
  const CommandResult bad = RunCommand({CARTAGE_BIN, "run", "-n", "1", "--timeout", "30", "--trace", dir_, HELLO_BIN},
                                       {"CARTAGE_WATCHDOG=soon"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_THAT(bad.err, HasSubstr("CARTAGE_WATCHDOG='soon': seconds without progress, > 0"));
}

TEST_F(TraceJobTest, AWatchdogDumpListsTheCarsOfARankWaitingInCartageOnly) {
  const CommandResult r = RunCommand(
      {CARTAGE_BIN, "run", "-n", "2", "--timeout", "30", "--trace", dir_, TRACE_RANKS_BIN, "late"},
      {"CARTAGE_WATCHDOG=0.3", "CARTAGE_METHODS=shm"});
  EXPECT_EQ(r.code, 0) << r.err;
  // Rank 0 waits in its receive and answers the watchdog's thread; rank 1 sleeps in its own code.
  EXPECT_THAT(r.err, ::testing::ContainsRegex("cartage\\[0\\]: no progress for 0.3 s \\(CARTAGE_WATCHDOG\\): trace written to "
                                              ".*\\.0\\.trace, with the live CARs this rank listed as it waits in "
                                              "cartage \\(cartage why-stuck reads it\\)"));
  EXPECT_THAT(r.err, ::testing::ContainsRegex("cartage\\[1\\]: no progress for 0.3 s \\(CARTAGE_WATCHDOG\\): trace written to "
                                              ".*\\.1\\.trace; this rank listed no live CARs"));
}

// The fast-path rule's check: two runs of traffic whose order is fixed take
// the same lives; a run over another method does not.
TEST_F(TraceJobTest, TwoRunsOfTheSameTrafficCompareLifeForLife) {
  const std::string a = dir_ + "/a", b = dir_ + "/b", c = dir_ + "/c";
  for (const auto& [d, methods] : {std::pair{a, "shm"}, std::pair{b, "shm"}, std::pair{c, "tcp"}}) {
    const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "2", "--timeout", "30", "--trace", d, TRACE_RANKS_BIN,
                                        "late"},
                                       {absl::StrCat("CARTAGE_METHODS=", methods)});
    ASSERT_EQ(r.code, 0) << r.err;
  }
  const CommandResult same = RunCommand({CARTAGE_BIN, "trace", "compare", a, b});
  EXPECT_EQ(same.code, 0) << same.out << same.err;
  EXPECT_THAT(same.out, ::testing::MatchesRegex("jobs [0-9a-f-]+ \\(A\\) and [0-9a-f-]+ \\(B\\): the same 2 lives and 2 spans "
                                                "on 2 ranks\n"));
  const CommandResult other = RunCommand({CARTAGE_BIN, "trace", "compare", a, c});
  EXPECT_EQ(other.code, 1) << other.out << other.err;
  EXPECT_THAT(other.out, ::testing::ContainsRegex("rank 0: tcp_connection [a-z_ >-]+: 0 in A, [0-9]+ in B\n"));
}

// Dumps written by hand in the file format, for what a job on this machine
// does not reliably produce.
TEST_F(TraceJobTest, ACollectiveMessageNoReceiveTookIsNamed) {
  std::filesystem::create_directories(dir_);
  const std::string machine =
      "machine 0 car_unexpected new,arriving,buffered,rts_held,handed_off,dropped envelope,data,eager,match,error\n";
  for (int rank = 0; rank < 2; ++rank) {
    std::ofstream f(absl::StrCat(dir_, "/j9.", rank, ".trace"));
    f << "cartage-trace 1\njob j9\nrank " << rank << "\nsize 2\nhost h\npid 1\nclock_offset_ns 0\ncapacity 16\n"
      << "recorded 1\nlost 0\nend signal\ndump_ns 2000000\n";
    if (rank == 0) f << machine << "t 1000000 0 5 0 2 2 1 1 1024 4\n";
  }
  const CommandResult why = RunCommand({CARTAGE_BIN, "why-stuck", dir_});
  EXPECT_EQ(why.code, 0) << why.err;
  EXPECT_EQ(why.out,
            "job j9:\nrank 0 holds a collective message from rank 1 (tag 1024, context 1, 4 bytes) that none of its "
            "receives took: the ranks disagree about that call (its root, its algorithm, or whether to make it)\n");
}

TEST_F(TraceJobTest, ABadRecordCountIsRefused) {
  const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "1", "--timeout", "60", "--trace", dir_, HELLO_BIN},
                                     {"CARTAGE_TRACE_RECORDS=lots"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("CARTAGE_TRACE_RECORDS='lots': a number of records from 1 to 2^30"));
}

}  // namespace
}  // namespace cartage::test
