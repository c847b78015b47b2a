// Collectives: every algorithm builds and renders, the selection table, and
// every algorithm through real processes (tests/coll_ranks.cc under
// `cartage run`, shm method) at 1 to 8 ranks on 2 cores.
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cartage/collectives.h"
#include "cartage/schedule.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sum_of_ints.h"
#include "methods/shm/shm_ring.h"
#include "tests/run_command.h"

namespace cartage::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

TEST(Collectives, EveryAlgorithmBuildsForEveryRankOfEveryJobSize) {
  for (const AlgorithmInfo& a : Algorithms()) {
    for (int n : {1, 2, 3, 5, 8, 13}) {
      for (int r = 0; r < n; ++r) {
        CollectiveCall call;
        call.kind = a.collective;
        call.count = 1001;
        call.type = kI32;
        call.op = Op(OpKind::kSum);
        call.root = n - 1;
        call.algorithm = a.name;
        if (Varying(a.collective)) {  // uneven blocks, one of them empty
          for (int i = 0; i < n; ++i) {
            call.send_counts.push_back(i == 1 ? 0 : 1001 + i);
            call.recv_counts.push_back(i == 1 ? 0 : 1001 + i);
          }
          if (a.collective != Collective::kAlltoallv) call.count = call.recv_counts[static_cast<std::size_t>(r)];
          if (a.collective == Collective::kScatterv) call.count = call.send_counts[static_cast<std::size_t>(r)];
        }
        auto s = BuildCollective(r, n, call);
        ASSERT_TRUE(s.ok()) << a.name << " " << r << "/" << n << ": " << s.status();
      }
    }
  }
}

TEST(Collectives, JobRenderingPairsEverySendWithItsReceive) {
  std::vector<std::shared_ptr<Schedule>> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(*BuildCollective(r, 4, SumOfInts(8, "ring")));
  const std::string dot = JobToDot(ranks);
  // Ring: 2 (n - 1) sends per rank, each drawn as a message edge.
  int messages = 0;
  for (std::size_t at = 0; (at = dot.find("penwidth=2", at)) != std::string::npos; ++at) ++messages;
  EXPECT_EQ(messages, 4 * 2 * 3);
  EXPECT_THAT(dot, HasSubstr("subgraph cluster_rank3"));
  EXPECT_THAT(ranks[0]->ToMermaid(), HasSubstr("flowchart TD"));
  EXPECT_THAT(ranks[0]->ToDot(), HasSubstr("send 8 B to 1"));  // part 0 (2 elements) to the right
}

// The line of the source a "(rule FILE:LINE" in `why` points at.
std::string RuleLine(const std::string& why) {
  const std::string key = "(rule collectives/select.cc:";
  const std::size_t at = why.find(key);
  if (at == std::string::npos) return "";
  const int line = std::atoi(why.c_str() + at + key.size());
  std::ifstream in(std::string(SOURCE_DIR) + "/collectives/select.cc");
  std::string text;
  for (int k = 0; k < line && std::getline(in, text); ++k) {
  }
  return text;
}

TEST(Collectives, ExplainNamesTheRuleItTookAndWhyItPassedOverTheOthers) {
  const std::string why = ExplainSelection(Collective::kAllreduce, 8192, 4, true, /*oversubscribed=*/true, false);
  EXPECT_EQ(why.substr(0, why.find(" (rule")),
            "allreduce of 8192 bytes on 4 ranks, oversubscribed: recursive_doubling");
  EXPECT_EQ(SelectAlgorithm(Collective::kAllreduce, 8192, 4, true, true, false), "recursive_doubling");
  // The rule it names is that line of the built-in table.
  EXPECT_THAT(RuleLine(why), ::testing::MatchesRegex("allreduce +recursive_doubling +bytes=-128K oversubscribed"));
  EXPECT_THAT(why, HasSubstr("passed over: star at collectives/select.cc:"));
  EXPECT_THAT(why, HasSubstr(" (not crowded), linear at collectives/select.cc:"));
  EXPECT_THAT(why, HasSubstr(" (bytes 8192 not in -8192)"));
  const std::string nc = ExplainSelection(Collective::kReduceScatter, 1 << 10, 5, /*commutative=*/false);
  EXPECT_THAT(nc, HasSubstr(", non-commutative: reduce_then_scatter (rule"));
  EXPECT_THAT(nc, HasSubstr("recursive_halving at collectives/select.cc:"));
  EXPECT_THAT(nc, HasSubstr("(the operator is not commutative)"));
}

TEST(Collectives, SelectionPicksByBytesAndRanks) {
  struct Case {
    Collective collective;
    uint64_t bytes;
    int ranks;
    bool commutative;
    bool oversubscribed;  // ranks outnumber CPUs
    const char* algorithm;
  };
  const Case kCases[] = {
      // A CPU per rank.
      {Collective::kAllreduce, 8, 4, true, false, "recursive_doubling"},
      {Collective::kAllreduce, 8, 2, true, false, "recursive_doubling"},
      {Collective::kAllreduce, 8, 9, true, false, "recursive_doubling"},
      {Collective::kAllreduce, 8 << 10, 4, true, false, "recursive_doubling"},
      {Collective::kAllreduce, 100 << 10, 4, true, false, "recursive_doubling"},
      {Collective::kAllreduce, 64 << 10, 8, true, false, "rabenseifner"},
      {Collective::kAllreduce, 1 << 20, 5, true, false, "ring"},
      {Collective::kAllreduce, 1 << 20, 4, true, false, "rabenseifner"},
      {Collective::kAllreduce, 1 << 20, 4, false, false, "recursive_doubling"},
      {Collective::kAllreduce, 1 << 20, 8, true, false, "rabenseifner"},
      {Collective::kBarrier, 0, 8, true, false, "dissemination"},
      {Collective::kBarrier, 0, 2, true, false, "dissemination"},
      {Collective::kBcast, 8, 16, true, false, "binomial"},
      {Collective::kBcast, 8, 8, true, false, "binomial"},
      {Collective::kBcast, 64 << 10, 8, true, false, "chain"},
      {Collective::kBcast, 1 << 20, 16, true, false, "chain"},
      {Collective::kBcast, 1 << 20, 17, true, false, "scatter_allgather"},
      {Collective::kBcast, 1 << 20, 2, true, false, "binomial"},
      {Collective::kReduceScatter, 1 << 10, 5, true, false, "recursive_halving"},
      {Collective::kReduceScatter, 1 << 10, 5, false, false, "reduce_then_scatter"},
      {Collective::kAllgather, 64, 8, true, false, "recursive_doubling"},
      {Collective::kAllgather, 64, 16, true, false, "recursive_doubling"},
      {Collective::kAllgather, 64, 15, true, false, "bruck"},
      {Collective::kAllgather, 1 << 20, 3, true, false, "linear"},
      {Collective::kAllgather, 1 << 20, 16, true, false, "linear"},
      {Collective::kAllgather, 1 << 20, 17, true, false, "ring"},
      {Collective::kAllgather, 1 << 20, 2, true, false, "ring"},
      {Collective::kAlltoall, 8, 8, true, false, "linear"},
      {Collective::kAlltoall, 8, 16, true, false, "linear"},
      {Collective::kAlltoall, 1 << 20, 16, true, false, "linear"},
      {Collective::kAlltoall, 8, 17, true, false, "bruck"},
      {Collective::kAlltoall, 1 << 20, 17, true, false, "pairwise"},
      {Collective::kAlltoall, 8, 2, true, false, "pairwise"},
      // Where ranks outnumber CPUs: one-round algorithms from 3 to 16 ranks,
      // binomial bcast with whole pieces (grown by doubling from 5 ranks, and
      // above 64 KiB at 4), and no chain; where ranks crowd the
      // CPUs, the
      // star algorithms for small calls from 6 ranks.
      {Collective::kAllreduce, 8, 4, true, true, "linear"},
      {Collective::kAllreduce, 8, 5, true, true, "linear"},
      {Collective::kAllreduce, 8, 16, true, true, "star"},
      {Collective::kAllreduce, 8, 17, true, true, "recursive_doubling"},
      {Collective::kAllreduce, 64 << 10, 8, true, true, "star"},
      {Collective::kAllreduce, 128 << 10, 8, true, true, "rabenseifner"},
      {Collective::kAllreduce, 64 << 10, 4, true, true, "recursive_doubling"},
      {Collective::kAllreduce, 1 << 20, 8, true, true, "rabenseifner"},
      {Collective::kBarrier, 0, 5, true, true, "linear"},
      {Collective::kBarrier, 0, 6, true, true, "star"},
      {Collective::kBarrier, 0, 12, true, true, "star"},
      {Collective::kBarrier, 0, 17, true, true, "dissemination"},
      {Collective::kBcast, 8, 4, true, true, "linear"},
      {Collective::kBcast, 1 << 10, 16, true, true, "linear"},
      {Collective::kBcast, 1 << 10, 17, true, true, "binomial_near"},
      {Collective::kBcast, 2 << 10, 8, true, true, "binomial_near"},
      {Collective::kBcast, 64 << 10, 5, true, true, "binomial_near"},
      {Collective::kBcast, 64 << 10, 4, true, true, "binomial"},
      {Collective::kBcast, (64 << 10) + 1, 4, true, true, "binomial_near"},
      {Collective::kBcast, 1 << 20, 3, true, true, "binomial"},
      {Collective::kBcast, 1 << 20, 4, true, true, "binomial_near"},
      {Collective::kBcast, 1 << 20, 16, true, true, "binomial_near"},
      {Collective::kBcast, 1 << 20, 17, true, true, "binomial_near"},
      {Collective::kAllgather, 64, 5, true, true, "linear"},
      {Collective::kAllgather, 64, 6, true, true, "star"},
      {Collective::kAllgather, 64, 8, true, true, "star"},
      {Collective::kAllgather, 4 << 10, 8, true, true, "linear"},
      {Collective::kAllgather, 1 << 20, 16, true, true, "linear"},
      {Collective::kAllgather, 1 << 20, 17, true, true, "ring"},
      {Collective::kAlltoall, 8, 5, true, true, "linear"},
      {Collective::kAlltoall, 8, 6, true, true, "star"},
      {Collective::kAlltoall, 8, 8, true, true, "star"},
      {Collective::kAlltoall, 256, 8, true, true, "star"},
      {Collective::kAlltoall, 1 << 10, 8, true, true, "linear"},
  };
  for (const Case& c : kCases) {
    // Oversubscribed as on 2 CPUs: crowded from 6 ranks.
    const bool crowded = c.oversubscribed && c.ranks >= 6;
    EXPECT_EQ(SelectAlgorithm(c.collective, c.bytes, c.ranks, c.commutative, c.oversubscribed, crowded), c.algorithm)
        << CollectiveName(c.collective) << " " << c.bytes << " B, " << c.ranks << " ranks"
        << (c.commutative ? "" : ", not commutative") << (c.oversubscribed ? ", oversubscribed" : "");
  }
  // Oversubscribed but not crowded (8 or 12 ranks on 4 CPUs): no star.
  EXPECT_EQ(SelectAlgorithm(Collective::kBarrier, 0, 8, true, true, false), "linear");
  EXPECT_EQ(SelectAlgorithm(Collective::kAllreduce, 8, 8, true, true, false), "linear");
  EXPECT_EQ(SelectAlgorithm(Collective::kAllgather, 8, 12, true, true, false), "linear");
  EXPECT_EQ(SelectAlgorithm(Collective::kAlltoall, 8, 12, true, true, false), "linear");
  // Crowded past 16 ranks: not measured, no star.
  EXPECT_EQ(SelectAlgorithm(Collective::kBarrier, 0, 17, true, true, true), "dissemination");
  const std::string table = DescribeSelection();
  EXPECT_THAT(table, HasSubstr("ranks=-17 crowded"));
  EXPECT_THAT(table, HasSubstr("allreduce             ring"));
  EXPECT_THAT(table, HasSubstr("bytes=-131072"));
}

TEST(Collectives, SelectionFileRulesParseAndBadOnesAreNamed) {
  auto rules = ParseSelectionFile(
      "# comment\n"
      "allreduce ring bytes=1K-2M ranks=3- # trailing\n"
      "\n"
      "alltoall bruck total=-4K pof2\n"
      "bcast binomial oversubscribed\n"
      "barrier star crowded\n",
      "t.sel");
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 4u);
  EXPECT_FALSE((*rules)[0].oversubscribed);
  EXPECT_TRUE((*rules)[2].oversubscribed);
  EXPECT_FALSE((*rules)[2].crowded);
  EXPECT_TRUE((*rules)[3].crowded && !(*rules)[3].oversubscribed);
  const SelectionRule& a = (*rules)[0];
  EXPECT_EQ(a.collective, Collective::kAllreduce);
  EXPECT_EQ(a.algorithm, "ring");
  EXPECT_EQ(a.min_bytes, 1024u);
  EXPECT_EQ(a.max_bytes, 2u << 20);
  EXPECT_EQ(a.min_ranks, 3u);
  EXPECT_EQ(a.max_ranks, UINT64_MAX);
  EXPECT_EQ(a.source, "t.sel:2");
  EXPECT_TRUE((*rules)[1].pof2);
  EXPECT_EQ((*rules)[1].max_total, 4096u);
  EXPECT_THAT(ParseSelectionFile("allreduce\n", "f").status().message(), HasSubstr("f:1: a rule is COLLECTIVE"));
  EXPECT_THAT(ParseSelectionFile("\nallreduse ring\n", "f").status().message(),
              HasSubstr("f:2: no collective 'allreduse'"));
  EXPECT_THAT(ParseSelectionFile("allreduce rong\n", "f").status().message(),
              HasSubstr("allreduce has no algorithm 'rong' (there are: recursive_doubling, ring, linear, star, rabenseifner)"));
  EXPECT_THAT(ParseSelectionFile("bcast chain bytes=9-3\n", "f").status().message(), HasSubstr("'9-3' is empty"));
  EXPECT_THAT(ParseSelectionFile("bcast chain bytes=1X-\n", "f").status().message(), HasSubstr("'1X' is not a size"));
  EXPECT_THAT(ParseSelectionFile("bcast chain colour=red\n", "f").status().message(),
              HasSubstr("'colour=red' is none of bytes=, ranks=, total=, pof2, oversubscribed, crowded"));
}

TEST(Collectives, BadCountsAreRefusedNamingTheArgument) {
  CollectiveCall call;
  call.kind = Collective::kAllgatherv;
  call.type = kI32;
  call.count = 2;
  call.recv_counts = {2, 2};
  auto s = BuildCollective(0, 3, call);
  EXPECT_THAT(s.status().message(), HasSubstr("allgatherv (rank 0 of 3): recv_counts has 2 entries for a communicator of 3"));
  call.recv_counts = {2, -1, 2};
  EXPECT_THAT(BuildCollective(0, 3, call).status().message(), HasSubstr("recv_counts[1] = -1"));
  call.recv_counts = {3, 2, 2};
  EXPECT_THAT(BuildCollective(0, 3, call).status().message(), HasSubstr("count 2 for this rank's own block but recv_counts[0] = 3"));
  call.kind = Collective::kAlltoallv;  // its own block: sent to itself, so the two counts must agree
  call.send_counts = {1, 2, 3};
  call.recv_counts = {2, 2, 3};
  EXPECT_THAT(BuildCollective(0, 3, call).status().message(),
              HasSubstr("send_counts[0] = 1 but recv_counts[0] = 2 (its own block)"));
  EXPECT_TRUE(BuildCollective(1, 3, call).ok());
  call.kind = Collective::kGatherv;  // off the root, recv_counts do not count
  call.recv_counts = {};
  EXPECT_TRUE(BuildCollective(1, 3, call).ok());
  call.send = kInPlace;
  call.kind = Collective::kBcast;
  EXPECT_THAT(BuildCollective(0, 3, call).status().message(), HasSubstr("kInPlace is not allowed here"));
}

// A selection file steers a real job's choice, `cartage info` lists its
// rules with their lines, and a broken one refuses the calls, naming the line.
TEST(CollectiveSelectionFile, SteersTheJobAndABrokenOneIsRefused) {
  const std::string dir = ::testing::TempDir();
  const std::string good = dir + "/good.sel", broken = dir + "/broken.sel";
  ASSERT_TRUE(WriteFile(good, "# test\nallreduce ring ranks=3-4\nallreduce rabenseifner ranks=2-3\n"));
  ASSERT_TRUE(WriteFile(broken, "allreduce ring\nallreduce sideways\n"));
  for (const auto& [ranks, algo] : std::vector<std::pair<int, std::string>>{{2, "rabenseifner"}, {3, "ring"},
                                                                          {4, "linear"}}) {
    const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", std::to_string(ranks), "--timeout", "60", RANKS_BIN,
                                        "selection"},
                                       {"CARTAGE_COLLECTIVES_FILE=" + good});
    EXPECT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("selected allreduce/" + algo)) << ranks;
    EXPECT_THAT(r.out, HasSubstr("PASS selection"));
  }
  CommandResult info = RunCommand({CARTAGE_BIN, "info"}, {"CARTAGE_COLLECTIVES_FILE=" + good});
  EXPECT_THAT(info.out, HasSubstr(good + ":2"));
  const CommandResult r =
      RunCommand({CARTAGE_BIN, "run", "-n", "2", "--timeout", "60", RANKS_BIN, "selection"},
                 {"CARTAGE_COLLECTIVES_FILE=" + broken});
  EXPECT_THAT(r.out, HasSubstr("refused: allreduce (rank 0 of 2): collective selection file " + broken +
                                  ":2: allreduce has no algorithm 'sideways'"));
  info = RunCommand({CARTAGE_BIN, "info"}, {"CARTAGE_COLLECTIVES_FILE=" + broken});
  EXPECT_THAT(info.out, HasSubstr("ERROR: collective selection file"));
}

// Every algorithm against the serial reference with one-line records sent by
// direct store (shm's CARTAGE_SHM_DIRECT_STORE), on 3 ranks.
TEST(CollectiveRanks, MatchTheSerialReferenceWithDirectStores) {
  if (!methods::shm::DirectStoreSupported()) GTEST_SKIP() << "this CPU has no MOVDIR64B";
  const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "3", "--timeout", "240", RANKS_BIN, "algorithms"},
                                     {"CARTAGE_SHM_DIRECT_STORE=yes"});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("PASS algorithms"));
}

// Binomial bcast pipelines chunks where every rank has a CPU and sends pieces
// whole where ranks outnumber them: both forms, whichever this machine is,
// against the serial reference (40009 elements: past the 64 KiB chunk).
TEST(CollectiveRanks, BinomialBcastWithAndWithoutACpuPerRank) {
  for (const char* v : {"no", "yes"}) {
    const CommandResult r = RunCommand(
        {CARTAGE_BIN, "run", "-n", "4", "--timeout", "120", RANKS_BIN, "algorithms", "bcast"},
        {absl::StrCat("CARTAGE_OVERSUBSCRIBED=", v)});
    EXPECT_EQ(r.code, 0) << v << ": " << r.err << r.out;
    EXPECT_THAT(r.out, HasSubstr("PASS algorithms")) << v;
  }
  const CommandResult bad = RunCommand({CARTAGE_BIN, "run", "-n", "2", "--timeout", "60", RANKS_BIN, "selection"},
                                       {"CARTAGE_OVERSUBSCRIBED=maybe"});
  EXPECT_NE(bad.code, 0);
  EXPECT_THAT(bad.out + bad.err, HasSubstr("CARTAGE_OVERSUBSCRIBED=maybe: use auto, yes or no"));
}

// A burst of three or more sends over 32 KiB (a linear alltoall or
// allgather of 64 KiB blocks from 4 ranks, a binomial bcast's root from 8)
// goes single-copy where ranks outnumber CPUs (eager up to 64 KiB there);
// 32 KiB blocks, 3 ranks and a 4-rank bcast's root (two sends) stay eager;
// every byte checked (coll_ranks burst, whose rank 0 reports).
TEST(CollectiveRanks, ABurstOfLargeSendsGoesSingleCopy) {
  for (const int n : {8, 4, 3}) {
    const CommandResult r =
        RunCommand({CARTAGE_BIN, "run", "-n", std::to_string(n), "--timeout", "120", RANKS_BIN, "burst"},
                   {"CARTAGE_OVERSUBSCRIBED=yes"});
    EXPECT_EQ(r.code, 0) << n << ": " << r.err << r.out;
    EXPECT_THAT(r.out, HasSubstr("PASS burst")) << n;
    const int root_sends = n == 8 ? 3 : 2;
    EXPECT_THAT(r.out, HasSubstr(absl::StrFormat("bcast/binomial of 65536-byte blocks at %d ranks: %d of %d", n,
                                                 n == 8 ? root_sends : 0, root_sends)));
    EXPECT_THAT(r.out, HasSubstr(absl::StrFormat("alltoall/linear of 65536-byte blocks at %d ranks: %d of %d", n,
                                                 n >= 4 ? n - 1 : 0, n - 1)));
    EXPECT_THAT(r.out, HasSubstr(absl::StrFormat("alltoall/linear of 32768-byte blocks at %d ranks: 0 of", n)));
  }
}

// Ranks that disagree about the count, and a rank that dies: every call on
// every rank returns with an error naming the collective and the step (a
// failed step's successors drain, so no peer waits for ever and no message
// is left behind), with and without a CPU per rank. A 60 s limit: a hang
// fails the test instead of the suite.
TEST(CollectiveRanks, DisagreeingCountsAndADeadRankEndEveryCallWithAnError) {
  for (const char* over : {"yes", "no"}) {
    for (const char* n : {"2", "3", "4", "5", "7"}) {
      const CommandResult r =
          RunCommand({CARTAGE_BIN, "run", "-n", n, "--timeout", "60", RANKS_BIN, "faults", "sizes"},
                     {absl::StrCat("CARTAGE_OVERSUBSCRIBED=", over)});
      EXPECT_EQ(r.code, 0) << n << " ranks, oversubscribed " << over << ": " << r.err << r.out;
      EXPECT_THAT(r.out, HasSubstr("PASS faults")) << n << " ranks, oversubscribed " << over;
    }
    for (int n : {3, 4, 5}) {
      const CommandResult r = RunCommand(
          {CARTAGE_BIN, "run", "-n", std::to_string(n), "--timeout", "60", RANKS_BIN, "faults", "dead"},
          {absl::StrCat("CARTAGE_OVERSUBSCRIBED=", over)});
      // The last rank left without finalizing: the launcher fails the job, naming it.
      EXPECT_EQ(r.code, 1) << n << " ranks, oversubscribed " << over << ": " << r.err << r.out;
      EXPECT_THAT(r.err, HasSubstr(absl::StrFormat("cartage run: rank %d (pid ", n - 1)));
      EXPECT_THAT(r.err, HasSubstr("exited without finalizing (its Agent was never destroyed)\n"));
      for (int rank = 0; rank < n - 1; ++rank) {
        EXPECT_THAT(r.out, HasSubstr(absl::StrFormat("rank %d: every call returned", rank)))
            << n << " ranks, oversubscribed " << over << ": " << r.err;
      }
    }
  }
}

// A rank killed while the launcher is stopped stays an unreaped zombie,
// which kill(pid, 0) still finds: every survivor must see it gone by itself
// (a pidfd) and fail its allreduce within 2 s, naming it, on every method
// that carries ranks of one host.
TEST(CollectiveRanks, AKilledRankNobodyReapedFailsEverySurvivorsCallNamingIt) {
  for (const char* method : {"shm", "tcp", "ofi"}) {
    const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "8", "--timeout", "60", RANKS_BIN, "faults", "killed"},
                                       {absl::StrCat("CARTAGE_METHODS=", method)});
    EXPECT_EQ(r.code, 128 + SIGKILL) << method << ": " << r.err << r.out;
    EXPECT_THAT(r.err, HasSubstr("cartage run: rank 7 (pid ")) << method;
    EXPECT_THAT(r.err, HasSubstr("killed by signal 9 (KILL)")) << method;
    for (int rank = 0; rank < 7; ++rank) {
      EXPECT_THAT(r.out, HasSubstr(absl::StrFormat("rank %d: allreduce 300 failed after ", rank)))
          << method << ": " << r.err << r.out;
    }
    EXPECT_THAT(r.err, Not(HasSubstr(".cc:"))) << method << ": a rank's check failed: " << r.err;
  }
}

// The same for every algorithm of every collective but barrier (roots 0 and
// n-1; rank 0 passes count c, the others 2c): every call returns on every
// rank, at least one rank reports the disagreement, nothing is left behind.
TEST(CollectiveRanks, EveryAlgorithmEndsADisagreeingCallOnEveryRank) {
  for (const char* over : {"yes", "no"}) {
    for (const char* n : {"2", "3", "5", "8"}) {
      const CommandResult r =
          RunCommand({CARTAGE_BIN, "run", "-n", n, "--timeout", "120", RANKS_BIN, "faults", "all"},
                     {absl::StrCat("CARTAGE_OVERSUBSCRIBED=", over)});
      EXPECT_EQ(r.code, 0) << n << " ranks, oversubscribed " << over << ": " << r.err << r.out;
      EXPECT_THAT(r.out, HasSubstr(absl::StrCat("disagreeing calls ended on ", n, " ranks")))
          << n << " ranks, oversubscribed " << over;
    }
  }
}

// Ranks told differently whether the job is oversubscribed would build
// different schedules for one collective: start-up stops the one that
// disagrees with rank 0, naming both answers, before any traffic.
TEST(CollectiveRanks, RanksThatDisagreeOnOversubscriptionStopAtStartUp) {
  const std::string split = absl::StrCat(
      "if [ \"$CARTAGE_RANK\" = 1 ]; then export CARTAGE_OVERSUBSCRIBED=yes; else export CARTAGE_OVERSUBSCRIBED=no; fi; "
      "exec ",
      RANKS_BIN, " selection");
  const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "3", "--timeout", "60", "sh", "-c", split});
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_THAT(r.out + r.err, HasSubstr("start-up: rank 1 counts the job as oversubscribed but rank 0 as not "
                                       "oversubscribed (CARTAGE_OVERSUBSCRIBED must be the same on every rank)"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("PASS")));
}

// The wait strategy's knobs: a job that yields at once (no spinning, no
// yielding before it blocks) still completes its collectives; a bad value
// stops every rank at start-up, naming the variable.
TEST(WaitPolicy, KnobsSteerTheJobAndBadValuesAreNamed) {
  CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "3", "--timeout", "60", RANKS_BIN, "selection"},
                               {"CARTAGE_WAIT_SPIN=1", "CARTAGE_WAIT_YIELD_US=0"});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("PASS selection"));
  r = RunCommand({CARTAGE_BIN, "run", "-n", "2", "--timeout", "60", RANKS_BIN, "selection"}, {"CARTAGE_WAIT_SPIN=0"});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.out + r.err, HasSubstr("CARTAGE_WAIT_SPIN=0: need a count >= 1"));
  r = RunCommand({CARTAGE_BIN, "run", "-n", "2", "--timeout", "60", RANKS_BIN, "selection"},
                 {"CARTAGE_WAIT_YIELD_US=soon"});
  EXPECT_NE(r.code, 0);
  EXPECT_THAT(r.out + r.err, HasSubstr("CARTAGE_WAIT_YIELD_US=soon: need microseconds >= 0"));
}

struct Case {
  const char* mode;
  int ranks;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.mode << " on " << c.ranks << " ranks"; }

class CollectiveRanks : public ::testing::TestWithParam<Case> {};

TEST_P(CollectiveRanks, MatchTheSerialReference) {
  const Case& c = GetParam();
  const CommandResult r =
      RunCommand({CARTAGE_BIN, "run", "-n", std::to_string(c.ranks), "--timeout", "240", RANKS_BIN, c.mode});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("PASS ", c.mode)));
}

INSTANTIATE_TEST_SUITE_P(
    Shm, CollectiveRanks,
    ::testing::Values(Case{"algorithms", 1}, Case{"algorithms", 2}, Case{"algorithms", 3}, Case{"algorithms", 4},
                      Case{"algorithms", 5}, Case{"algorithms", 7}, Case{"algorithms", 8}, Case{"persistent", 1},
                      Case{"persistent", 3}, Case{"persistent", 4}, Case{"concurrent", 2}, Case{"concurrent", 5},
                      Case{"types", 1}, Case{"types", 2}, Case{"types", 3}, Case{"types", 5},
                      Case{"xfer", 2}, Case{"xfer", 3}, Case{"xfer", 5}, Case{"reinit", 2}, Case{"reinit", 3}),
    [](const ::testing::TestParamInfo<Case>& p) { return absl::StrCat(p.param.mode, "_np", p.param.ranks); });

}  // namespace
}  // namespace cartage::test
