// Collectives: the schedule builder's validation and rendering (in one
// process), and every algorithm through real processes (tests/coll_ranks.cc
// under `cartage run`, shm method) at 1 to 8 ranks on 2 cores.
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cartage/collectives.h"
#include "cartage/schedule.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/run_command.h"

namespace cartage::test {
namespace {

using ::testing::HasSubstr;

const Datatype kI32 = Datatype::Basic(BasicType::kInt32);

bool WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  return static_cast<bool>(out);
}

TEST(ScheduleBuilder, RejectsACycleNamingAVertexOnIt) {
  ScheduleBuilder b(0, 2, "cyclic");
  const Buf t = b.Temp(8);
  const VertexId a = b.Recv(t, 8, 1);
  const VertexId s = b.Send(t, 8, 1, {a});
  b.Depend(s, a);
  auto built = b.Build();
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(built.status().message(), HasSubstr("schedule cyclic (rank 0): vertex 0 (recv): is on a dependency cycle"));
}

TEST(ScheduleBuilder, RejectsAReadOfATemporaryNobodyWroteFirst) {
  ScheduleBuilder b(0, 2, "unordered");
  const Buf t = b.Temp(16);
  b.Recv(t, 8, 1);                    // writes [0, 8)
  const VertexId s = b.Send(t, 16, 1);  // reads [0, 16), waits for nothing
  auto built = b.Build();
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.status().message(),
              HasSubstr(absl::StrCat("vertex ", s, " (send): reads source [0, 16) of temporary buffer 0")));
  // Waiting for the receive is not enough either: it wrote only half.
  ScheduleBuilder b2(0, 2, "half");
  const Buf t2 = b2.Temp(16);
  const VertexId r2 = b2.Recv(t2, 8, 1);
  b2.Send(t2, 16, 1, {r2});
  EXPECT_FALSE(b2.Build().ok());
  // Covered by two writes it waits for: fine.
  ScheduleBuilder b3(0, 2, "covered");
  const Buf t3 = b3.Temp(16);
  const VertexId x = b3.Recv(t3, 8, 1);
  const VertexId y = b3.Recv(t3 + 8, 8, 1);
  b3.Send(t3, 16, 1, {x, y});
  EXPECT_TRUE(b3.Build().ok());
}

TEST(ScheduleBuilder, RejectsSizesThatDisagree) {
  ScheduleBuilder b(0, 2, "sizes");
  const Buf t = b.Temp(8);
  b.Copy(Buf::User(nullptr, "x"), t + 4, 8);
  auto built = b.Build();
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.status().message(),
              HasSubstr("vertex 0 (copy): destination [4, 12) is past the end of the 8-byte temporary buffer 0"));
  ScheduleBuilder b2(0, 2, "peer");
  b2.Send(Buf{}, 0, 2);
  EXPECT_THAT(b2.Build().status().message(), HasSubstr("vertex 0 (send): no rank 2 in a communicator of 2"));
  ScheduleBuilder b3(0, 2, "op");
  const Buf t3 = b3.Temp(64);
  b3.Reduce(t3, t3 + 32, 2, Datatype::Basic(BasicType::kComplexDouble), Op(OpKind::kMax));
  EXPECT_THAT(b3.Build().status().message(), HasSubstr("max is not defined on complex_double"));
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
  CollectiveCall call;
  call.kind = Collective::kAllreduce;
  call.count = 8;
  call.type = kI32;
  call.op = Op(OpKind::kSum);
  call.algorithm = "ring";
  for (int r = 0; r < 4; ++r) ranks.push_back(*BuildCollective(r, 4, call));
  const std::string dot = JobToDot(ranks);
  // Ring: 2 (n - 1) sends per rank, each drawn as a message edge.
  int messages = 0;
  for (std::size_t at = 0; (at = dot.find("penwidth=2", at)) != std::string::npos; ++at) ++messages;
  EXPECT_EQ(messages, 4 * 2 * 3);
  EXPECT_THAT(dot, HasSubstr("subgraph cluster_rank3"));
  EXPECT_THAT(ranks[0]->ToMermaid(), HasSubstr("flowchart TD"));
  EXPECT_THAT(ranks[0]->ToDot(), HasSubstr("send 8 B to 1"));  // part 0 (2 elements) to the right
}

TEST(Collectives, SelectionPicksByBytesAndRanks) {
  EXPECT_EQ(SelectAlgorithm(Collective::kAllreduce, 8, 4), "recursive_doubling");
  EXPECT_EQ(SelectAlgorithm(Collective::kAllreduce, 1 << 20, 5), "ring");
  EXPECT_EQ(SelectAlgorithm(Collective::kAllreduce, 1 << 20, 4), "rabenseifner");
  EXPECT_EQ(SelectAlgorithm(Collective::kAllreduce, 1 << 20, 4, /*commutative=*/false), "recursive_doubling");
  EXPECT_EQ(SelectAlgorithm(Collective::kAllreduce, 1 << 20, 8), "rabenseifner");
  EXPECT_EQ(SelectAlgorithm(Collective::kBcast, 1 << 20, 8), "scatter_allgather");
  EXPECT_EQ(SelectAlgorithm(Collective::kReduceScatter, 1 << 10, 5), "recursive_halving");
  EXPECT_EQ(SelectAlgorithm(Collective::kReduceScatter, 1 << 10, 5, /*commutative=*/false), "reduce_then_scatter");
  EXPECT_EQ(SelectAlgorithm(Collective::kAllgather, 64, 8), "recursive_doubling");
  EXPECT_EQ(SelectAlgorithm(Collective::kAllgather, 64, 7), "bruck");
  EXPECT_EQ(SelectAlgorithm(Collective::kAlltoall, 8, 8), "bruck");
  EXPECT_EQ(SelectAlgorithm(Collective::kAlltoall, 8, 4), "bruck");
  EXPECT_EQ(SelectAlgorithm(Collective::kAlltoall, 8, 2), "pairwise");
  EXPECT_EQ(SelectAlgorithm(Collective::kAllreduce, 100 << 10, 4), "recursive_doubling");
  const std::string table = DescribeSelection();
  EXPECT_THAT(table, HasSubstr("allreduce             ring"));
  EXPECT_THAT(table, HasSubstr("bytes=-131072"));
}

TEST(Collectives, SelectionFileRulesParseAndBadOnesAreNamed) {
  auto rules = ParseSelectionFile(
      "# comment\n"
      "allreduce ring bytes=1K-2M ranks=3- # trailing\n"
      "\n"
      "alltoall bruck total=-4K pof2\n",
      "t.sel");
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 2u);
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
              HasSubstr("allreduce has no algorithm 'rong' (there are: recursive_doubling, ring, rabenseifner)"));
  EXPECT_THAT(ParseSelectionFile("bcast chain bytes=9-3\n", "f").status().message(), HasSubstr("'9-3' is empty"));
  EXPECT_THAT(ParseSelectionFile("bcast chain bytes=1X-\n", "f").status().message(), HasSubstr("'1X' is not a size"));
  EXPECT_THAT(ParseSelectionFile("bcast chain colour=red\n", "f").status().message(),
              HasSubstr("'colour=red' is none of"));
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
                                                                          {4, "recursive_doubling"}}) {
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
                      Case{"persistent", 3}, Case{"persistent", 4}, Case{"concurrent", 2}, Case{"concurrent", 5}),
    [](const ::testing::TestParamInfo<Case>& p) { return absl::StrCat(p.param.mode, "_np", p.param.ranks); });

}  // namespace
}  // namespace cartage::test
