// The PMI-1 exchange's wire words: values survive any bytes, and what a
// launcher sends that does not parse is refused, never trusted.
#include "agent/pmi1.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cartage::agent {
namespace {

TEST(Pmi1Words, EveryByteSurvivesEncodingAsOneWord) {
  std::string all;
  for (int c = 0; c < 256; ++c) all.push_back(static_cast<char>(c));
  const std::string word = Pmi1Exchange::Encode(all);
  EXPECT_EQ(word.find_first_of(" =\n\r\t"), std::string::npos) << word;
  absl::StatusOr<std::string> back = Pmi1Exchange::Decode(word);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, all);
  EXPECT_EQ(Pmi1Exchange::Encode("tcp.3;127.0.0.1/8"), "tcp.3;127.0.0.1/8");  // plain text stays readable
}

TEST(Pmi1Words, AMalformedEscapeIsRefused) {
  for (const char* bad : {"%", "ab%4", "%zz", "%4g", "x%-1"}) {
    EXPECT_EQ(Pmi1Exchange::Decode(bad).status().code(), absl::StatusCode::kDataLoss) << bad;
  }
}

TEST(Pmi1Words, AReplySplitsIntoWordsAtTheFirstEqualsSign) {
  auto w = Pmi1Exchange::Words("cmd=get_result rc=0 msg=success value=a=b  stray");
  EXPECT_EQ(w["cmd"], "get_result");
  EXPECT_EQ(w["rc"], "0");
  EXPECT_EQ(w["value"], "a=b");
  EXPECT_FALSE(w.contains("stray"));
}

}  // namespace
}  // namespace cartage::agent
