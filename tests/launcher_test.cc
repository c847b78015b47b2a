// `cartage run`: real processes through the launcher. Exit codes, output
// forwarding, the bootstrap exchange, dead ranks and time-outs.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "tests/run_command.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using Result = cartage::test::CommandResult;
using cartage::test::RunCommand;

const std::string kCartage = CARTAGE_BIN;
const std::string kHelper = HELPER_BIN;

TEST(Launcher, BootstrapExchangeAcrossFourRanks) {
  // A private TMPDIR: the launcher's socket directory must be gone afterwards.
  const std::string tmp = absl::StrCat(testing::TempDir(), "/launcher_tmp_", getpid());
  std::filesystem::create_directories(tmp);
  const Result r = RunCommand({kCartage, "run", "-n", "4", "--prefix", "--timeout", "60", kHelper, "kv"},
                              {absl::StrCat("TMPDIR=", tmp)});
  EXPECT_EQ(r.code, 0) << r.err;
  for (int rank = 0; rank < 4; ++rank) {
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("[", rank, "] rank ", rank, " of 4: read 4 values\n")));
  }
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "the bootstrap socket directory is removed";
  std::filesystem::remove_all(tmp);
}

TEST(Launcher, RepeatedFences) {
  const Result r = RunCommand({kCartage, "run", "-n", "3", "--timeout", "60", kHelper, "rounds"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("rank 2: 10 rounds"));
}

// --hosts places ranks in blocks on named hosts, round again past the slots;
// each rank learns its host's ranks from the launcher and its host's name.
TEST(Launcher, HostsPlaceRanksInBlocksAndEachRankLearnsItsHost) {
  const Result r = RunCommand({kCartage, "run", "-n", "5", "--prefix", "--hosts", "a:2,b:1", "--timeout", "60", "sh",
                               "-c", absl::StrCat("echo \"host $CARTAGE_HOST\"; exec ", kHelper, " hosts")});
  EXPECT_EQ(r.code, 0) << r.err;
  for (const auto& [rank, host, ranks] : std::vector<std::tuple<int, std::string, std::string>>{
           {0, "a", "0,1,3,4"}, {1, "a", "0,1,3,4"}, {2, "b", "2"}, {3, "a", "0,1,3,4"}, {4, "a", "0,1,3,4"}}) {
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("[", rank, "] host ", host, "\n"))) << r.out;
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("[", rank, "] rank ", rank, " of 5: host ranks ", ranks, " on ")));
  }
  for (const char* bad : {"a:0", "a", ":2", "a:2,b", "a:x"}) {
    const Result b = RunCommand({kCartage, "run", "-n", "2", "--hosts", bad, kHelper, "hosts"});
    EXPECT_EQ(b.code, 2) << bad;
    EXPECT_THAT(b.err, HasSubstr("--hosts needs NAME:N,... (N >= 1)")) << bad;
  }
}

TEST(Launcher, DeadRankStopsTheJobAndIsNamed) {
  const Result r = RunCommand({kCartage, "run", "-n", "3", "--timeout", "60", kHelper, "die"});
  EXPECT_EQ(r.code, 128 + 6) << "the exit status is the dead rank's (SIGABRT)";
  EXPECT_THAT(r.err, HasSubstr("cartage run: rank 1 (pid "));
  EXPECT_THAT(r.err, HasSubstr("killed by signal 6 (ABRT); stopping 2 running rank(s)"));
  EXPECT_THAT(r.out, Not(HasSubstr("second fence passed")));
}

// Processes whose command line holds `mark`.
std::vector<int> ProcessesWith(const std::string& mark) {
  std::vector<int> pids;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::string cmdline = cartage::test::Slurp(e.path().string() + "/cmdline");
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (cmdline.find(mark) != std::string::npos) pids.push_back(std::stoi(name));
  }
  return pids;
}

TEST(Launcher, AFailedStartStopsTheRanksItStarted) {
  // 64 descriptors run out part-way through 32 ranks' output pipes.
  const std::string mark = absl::StrCat("31.", ::getpid());
  const Result r = RunCommand(
      {"/bin/sh", "-c", absl::StrCat("ulimit -n 64; exec ", kCartage, " run -n 32 /bin/sleep ", mark)});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_THAT(r.err, ::testing::ContainsRegex("cartage run: pipe for rank [0-9]+: Too many open files\n"));
  const std::vector<int> left = ProcessesWith(absl::StrCat("sleep ", mark));
  EXPECT_TRUE(left.empty()) << left.size() << " ranks left running";
  for (int pid : left) ::kill(pid, SIGKILL);
}

TEST(Launcher, WrongJobKeyIsRefused) {
  const Result r = RunCommand({kCartage, "run", "-n", "2", "--timeout", "60", kHelper, "badkey"});
  EXPECT_EQ(r.code, 3);
  EXPECT_THAT(r.err, HasSubstr("the launcher refused: wrong job key for rank"));
  EXPECT_THAT(r.err, HasSubstr("bootstrap: dropping a connection"));
}

TEST(Launcher, FirstFailingExitCodeIsReturned) {
  const Result r = RunCommand({kCartage, "run", "-n", "2", "sh", "-c", "exit $((CARTAGE_RANK * 7))"});
  EXPECT_EQ(r.code, 7);
  EXPECT_THAT(r.err, HasSubstr("rank 1 (pid"));
  EXPECT_THAT(r.err, HasSubstr("exited with code 7"));
}

TEST(Launcher, TimeoutKillsTheJob) {
  const Result r = RunCommand({kCartage, "run", "-n", "2", "--timeout", "0.3", "sleep", "30"});
  EXPECT_EQ(r.code, 124);
  EXPECT_THAT(r.err, HasSubstr("cartage run: timed out after 0.3 s; stopping 2 running rank(s)"));
}

TEST(Launcher, OutputLinesStayWholeAndPrefixed) {
  const Result r = RunCommand({kCartage, "run", "-n", "1", "--prefix", "sh", "-c",
                        "printf a; sleep 0.1; printf 'b\\nc'; printf 'x\\n' >&2"});
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "[0] ab\n[0] c\n");
  EXPECT_EQ(r.err, "[0] x\n");
}

TEST(Launcher, UsageErrors) {
  EXPECT_EQ(RunCommand({kCartage, "run", "sleep", "1"}).code, 2);
  EXPECT_EQ(RunCommand({kCartage, "run", "-n", "0", "sleep", "1"}).code, 2);
  EXPECT_EQ(RunCommand({kCartage, "run", "-n", "2", "--timeout", "-1", "sleep", "1"}).code, 2);
  const Result missing = RunCommand({kCartage, "run", "-n", "2", "/nonexistent/program"});
  EXPECT_EQ(missing.code, 127);
  EXPECT_THAT(missing.err, HasSubstr("cannot start '/nonexistent/program' for rank 0"));
}

// The CPUs this test may use, which the launcher inherits.
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// Runs the cpus helper on n ranks; expects rank r to report cpus_of(r).
template <class CpusOf>
void ExpectCpus(std::vector<std::string> options, int n, CpusOf cpus_of) {
  std::vector<std::string> argv = {kCartage, "run", "-n", absl::StrCat(n), "--prefix", "--timeout", "60"};
  argv.insert(argv.end(), options.begin(), options.end());
  argv.insert(argv.end(), {kHelper, "cpus"});
  const Result r = RunCommand(argv);
  ASSERT_EQ(r.code, 0) << r.err;
  for (int rank = 0; rank < n; ++rank) {
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("[", rank, "] rank ", rank, " cpus ", cpus_of(rank), "\n")))
        << absl::StrJoin(options, " ");
  }
}

TEST(Launcher, RanksThatOutnumberTheCpusArePinnedRoundRobin) {
  const std::vector<int> cpus = AllowedCpus();
  if (cpus.size() > 64) GTEST_SKIP() << "a job larger than the CPUs would be " << cpus.size() + 1 << " ranks";
  const int n = static_cast<int>(cpus.size()) + 1;
  const auto one = [&](int rank) { return absl::StrCat(cpus[static_cast<std::size_t>(rank) % cpus.size()]); };
  ExpectCpus({}, n, one);
  ExpectCpus({"--bind"}, n, one);
  ExpectCpus({"--no-bind"}, n, [&](int) { return absl::StrJoin(cpus, ","); });
}

TEST(Launcher, RanksThatFitAreLeftUnpinnedUnlessAsked) {
  const std::vector<int> cpus = AllowedCpus();
  const int n = static_cast<int>(std::min<std::size_t>(cpus.size(), 4));
  ExpectCpus({}, n, [&](int) { return absl::StrJoin(cpus, ","); });
  ExpectCpus({"--bind"}, n, [&](int rank) { return absl::StrCat(cpus[static_cast<std::size_t>(rank)]); });
}

TEST(Bootstrap, ProgramStartedByHandIsAJobOfOne) {
  const Result r = RunCommand({kHelper, "kv"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "rank 0 of 1: read 1 values\n");
}

}  // namespace
