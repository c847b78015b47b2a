// The PMI exchanges' wire words (PMI-1's lines, PMI-2's messages): values
// survive any bytes, which ranks share a host follows the launcher's
// PMI_process_mapping, and what a launcher sends that does not parse is
// refused, never trusted. A wait the caller gives up on (a rank is gone)
// ends with kAborted, not a hang.
#include "agent/pmi.h"

#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "agent/line_channel.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cartage::agent {
namespace {

TEST(PmiWords, EveryByteSurvivesEncodingAsOneWord) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  const std::string word = PmiExchange::Encode(all);
  EXPECT_EQ(word.find_first_of(" =;\n\r\t"), std::string::npos) << word;
  absl::StatusOr<std::string> back = PmiExchange::Decode(word);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, all);
  EXPECT_EQ(PmiExchange::Encode("tcp.3,127.0.0.1/8"), "tcp.3,127.0.0.1/8");  // plain text stays readable
  EXPECT_EQ(PmiExchange::Encode("a;b"), "a%3Bb");  // PMI-2 ends a pair at ';' 
}

TEST(PmiWords, AMalformedEscapeIsRefused) {
  for (const char* bad : {"%", "ab%4", "%zz", "%4g", "x%-1"}) {
    EXPECT_EQ(PmiExchange::Decode(bad).status().code(), absl::StatusCode::kDataLoss) << bad;
  }
}

TEST(PmiWords, AReplySplitsIntoWordsAtTheFirstEqualsSign) {
  auto w = PmiExchange::Pmi1Words("cmd=get_result rc=0 msg=success value=a=b  stray");
  EXPECT_EQ(w["cmd"], "get_result");
  EXPECT_EQ(w["rc"], "0");
  EXPECT_EQ(w["value"], "a=b");
  EXPECT_FALSE(w.contains("stray"));
}

TEST(PmiWords, APmi2MessageSplitsAtSemicolonsKeepingDoubledOnes) {
  auto w = PmiExchange::Pmi2Words("cmd=kvs-get-response;rc=0;found=TRUE;value=a;;b=c;;;stray;");
  EXPECT_EQ(w["cmd"], "kvs-get-response");
  EXPECT_EQ(w["rc"], "0");
  EXPECT_EQ(w["found"], "TRUE");
  EXPECT_EQ(w["value"], "a;b=c;");
  EXPECT_FALSE(w.contains("stray"));
  EXPECT_EQ(PmiExchange::Pmi2Words("cmd=kvs-fence-response;rc=0")["rc"], "0");  // a last pair without ';'
}

TEST(PmiProcessMapping, BlocksOfRanksPerNodeGiveEachRanksHost) {
  using ::testing::ElementsAre;
  // Hydra on one host: every rank there.
  EXPECT_THAT(*PmiExchange::RanksOnHostOf("(vector,(0,1,4))", 2, 4), ElementsAre(0, 1, 2, 3));
  // Two nodes of three, then one node of two: ranks 0-2, 3-5, 6-7.
  EXPECT_THAT(*PmiExchange::RanksOnHostOf("(vector,(0,2,3),(2,1,2))", 4, 8), ElementsAre(3, 4, 5));
  EXPECT_THAT(*PmiExchange::RanksOnHostOf("(vector,(0,2,3),(2,1,2))", 7, 8), ElementsAre(6, 7));
  // A mapping shorter than the job repeats: one rank a node, round-robin.
  EXPECT_THAT(*PmiExchange::RanksOnHostOf("(vector,(0,2,1))", 1, 5), ElementsAre(1, 3));
  EXPECT_THAT(*PmiExchange::RanksOnHostOf(" (vector,(0,2,1)) ", 4, 5), ElementsAre(0, 2, 4));
  // More hosts and slots than the job fills: the first host's slots take it.
  EXPECT_THAT(*PmiExchange::RanksOnHostOf("(vector,(0,1,2),(1,1,2),(2,1,2))", 1, 2), ElementsAre(0, 1));
  EXPECT_THAT(*PmiExchange::RanksOnHostOf("(vector,(0,1,99))", 3, 4), ElementsAre(0, 1, 2, 3));
}

TEST(PmiProcessMapping, AMalformedMappingIsRefused) {
  for (const char* bad : {"", "(vector)", "(vector,)", "(vector,(0,1))", "(vector,(0,0,4))", "(vector,(0,1,-2))",
                          "(vector,(a,1,4))", "(vector,(0,1,4)", "vector,(0,1,4)",
                          "(vector,(2147483647,2,1))"}) {
    EXPECT_EQ(PmiExchange::RanksOnHostOf(bad, 0, 4).status().code(), absl::StatusCode::kDataLoss) << bad;
  }
}

TEST(LineChannelWait, AReplyComesThroughAndAWaitGivenUpEndsAborted) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
  LineChannel ch(fds[0], "the test launcher", 1024);
  ASSERT_EQ(::write(fds[1], "cmd=barrier_out\n", 16), 16);
  int calls = 0;
  absl::StatusOr<std::string> line = ch.Read("PMI-1 barrier", 3, [&] { return ++calls, 0; });
  ASSERT_TRUE(line.ok()) << line.status();
  EXPECT_EQ(*line, "cmd=barrier_out");
  // Nothing more comes: the third look gives up.
  calls = 0;
  line = ch.Read("PMI-1 barrier", 3, [&] { return ++calls < 3 ? 0 : methods::Exchange::kFenceCannotComplete; });
  EXPECT_EQ(line.status().code(), absl::StatusCode::kAborted) << line.status();
  EXPECT_THAT(std::string(line.status().message()), ::testing::HasSubstr("PMI-1 barrier (rank 3): abandoned"));
  EXPECT_EQ(calls, 3);
  ::close(fds[1]);
}

}  // namespace
}  // namespace cartage::agent
