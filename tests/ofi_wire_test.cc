// The envelope in libfabric's 64-bit tag (methods/ofi/ofi_wire.h): every
// layout's field widths and maxima, packing and unpacking at the limits,
// receive masks for each wildcard, the protocol bits, provider-reserved
// bits, and the CQ data word.
#include "methods/ofi/ofi_wire.h"

#include <cstdint>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cartage::methods::ofi {
namespace {

using ::testing::HasSubstr;

// Whether a receive posted as `m` matches a message tagged `t` (libfabric's rule).
bool Matches(const TagMatch& m, uint64_t t) { return (m.tag | m.ignore) == (t | m.ignore); }

TEST(OfiTag, ModesParseAndName) {
  EXPECT_EQ(*ParseTagMode("ofi_tag_2"), TagMode::kTag2);
  EXPECT_EQ(*ParseTagMode("auto"), TagMode::kAuto);
  const absl::StatusOr<TagMode> bad = ParseTagMode("ofi_tag_3");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("unknown tag mode 'ofi_tag_3'"));
}

TEST(OfiTag, ReservedBitsAreTheLeadingZerosOfMemTagFormat) {
  EXPECT_EQ(ReservedBits(0), 0);  // no format given
  EXPECT_EQ(ReservedBits(0xaaaaaaaaaaaaaaaaull), 0);
  EXPECT_EQ(ReservedBits(0x0fffffffffffffffull), 4);
  EXPECT_EQ(ReservedBits(0x0000ffffffffffffull), 16);
}

TEST(OfiTag, AutoPicksFullOnlyWithCqDataAndDirectedReceive) {
  EXPECT_EQ(TagLayout::Make(TagMode::kAuto, 0, true)->mode(), TagMode::kFull);
  EXPECT_EQ(TagLayout::Make(TagMode::kAuto, 0, false)->mode(), TagMode::kTag1);
  const absl::StatusOr<TagLayout> full = TagLayout::Make(TagMode::kFull, 0, false);
  ASSERT_FALSE(full.ok());
  EXPECT_THAT(full.status().message(), HasSubstr("needs FI_REMOTE_CQ_DATA and FI_DIRECTED_RECV"));
}

TEST(OfiTag, Seed003FieldWidthsAndMaxima) {
  const TagLayout t1 = *TagLayout::Make(TagMode::kTag1, 0, false);
  EXPECT_EQ(t1.context_bits(), 12);
  EXPECT_EQ(t1.source_bits(), 18);
  EXPECT_EQ(t1.tag_bits(), 32);
  EXPECT_EQ(t1.max_context(), 4095u);
  EXPECT_EQ(t1.max_source(), 262143);
  EXPECT_EQ(t1.max_tag(), 2147483647);
  EXPECT_EQ(t1.sync_bit(), uint64_t{1} << 62);
  EXPECT_EQ(t1.ack_bit(), uint64_t{1} << 63);

  const TagLayout t2 = *TagLayout::Make(TagMode::kTag2, 0, false);
  EXPECT_EQ(t2.context_bits(), 24);
  EXPECT_EQ(t2.max_context(), 16777215u);
  EXPECT_EQ(t2.max_source(), 262143);
  EXPECT_EQ(t2.max_tag(), 524287);
  EXPECT_EQ(t2.sync_bit(), uint64_t{1} << 62);

  const TagLayout full = *TagLayout::Make(TagMode::kFull, 0, true);
  EXPECT_EQ(full.context_bits(), 28);
  EXPECT_EQ(full.max_context(), 268435455u);
  EXPECT_EQ(full.source_bits(), 0);
  EXPECT_TRUE(full.source_in_data());
  EXPECT_EQ(full.max_tag(), 2147483647);
  EXPECT_EQ(full.sync_bit(), uint64_t{1} << 60);  // the top two bits are spare
  EXPECT_EQ(full.Describe(),
            "ofi_tag_full: 2 protocol bits, 28-bit context (max 268435455), source in remote CQ data, 32-bit tag "
            "(max 2147483647)");
}

TEST(OfiTag, ReservedBitsShrinkTheContextAndMoveTheProtocolBitsDown) {
  const TagLayout t1 = *TagLayout::Make(TagMode::kTag1, 4, false);
  EXPECT_EQ(t1.context_bits(), 8);
  EXPECT_EQ(t1.ack_bit(), uint64_t{1} << 59);  // below the provider's 4 bits
  EXPECT_THAT(t1.Describe(), HasSubstr("4 bits reserved by the provider"));
  // ofi_tag_full first gives up its two spare bits.
  EXPECT_EQ(TagLayout::Make(TagMode::kFull, 2, true)->context_bits(), 28);
  EXPECT_EQ(TagLayout::Make(TagMode::kFull, 6, true)->context_bits(), 24);
  // Nothing left for a context: refused, naming the mode.
  const absl::StatusOr<TagLayout> none = TagLayout::Make(TagMode::kTag1, 12, false);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(none.status().message(), HasSubstr("ofi_tag_1: the provider reserves 12 high tag bits"));
}

class EveryLayout : public ::testing::TestWithParam<TagMode> {
 protected:
  TagLayout layout_ = *TagLayout::Make(GetParam(), 0, true);
};

TEST_P(EveryLayout, PacksAndUnpacksEveryFieldAtItsLimits) {
  const TagLayout& l = layout_;
  const uint64_t contexts[] = {0, 1, l.max_context()};
  const int sources[] = {0, 1, static_cast<int>(std::min<int64_t>(l.max_source(), 262143))};
  const int tags[] = {0, 1, static_cast<int>(l.max_tag())};
  for (uint64_t c : contexts) {
    for (int s : sources) {
      for (int t : tags) {
        for (bool sync : {false, true}) {
          const uint64_t tag = l.Send(c, s, t, sync);
          const uint64_t data = l.Data(s, 1000);
          EXPECT_EQ(l.ContextOf(tag), c);
          EXPECT_EQ(l.TagOf(tag), t);
          EXPECT_EQ(l.SourceOf(tag, data), s);
          EXPECT_EQ(l.IsSync(tag), sync);
          EXPECT_FALSE(l.IsAck(tag));
          // The exact receive matches it, sync or not.
          EXPECT_TRUE(Matches(l.Recv(c, s, t), tag)) << c << " " << s << " " << t;
          // No other context, tag or (in the tag) source does.
          EXPECT_FALSE(Matches(l.Recv(c ^ 1, s, t), tag));
          EXPECT_FALSE(Matches(l.Recv(c, s, t ^ 1), tag));
          if (!l.source_in_data()) {
            EXPECT_FALSE(Matches(l.Recv(c, s ^ 1, t), tag));
          }
        }
      }
    }
  }
}

TEST_P(EveryLayout, WildcardsIgnoreExactlyTheirField) {
  const TagLayout& l = layout_;
  const uint64_t tag = l.Send(5, 3, 77, false);
  EXPECT_TRUE(Matches(l.Recv(5, -1, 77), tag));   // any source
  EXPECT_TRUE(Matches(l.Recv(5, 3, -1), tag));    // any tag
  EXPECT_TRUE(Matches(l.Recv(5, -1, -1), tag));   // both
  EXPECT_FALSE(Matches(l.Recv(6, -1, -1), tag));  // never another context
  EXPECT_FALSE(Matches(l.Recv(5, -1, 78), tag));
}

TEST_P(EveryLayout, AcknowledgementsMatchOnlyTheirOwnReceive) {
  const TagLayout& l = layout_;
  const uint64_t ack = l.Ack(5, 3, 77);
  EXPECT_TRUE(l.IsAck(ack));
  EXPECT_TRUE(Matches(l.AckRecv(5, 3, 77), ack));
  EXPECT_FALSE(Matches(l.AckRecv(5, 3, 78), ack));
  // No user receive, however wild, takes an acknowledgement...
  EXPECT_FALSE(Matches(l.Recv(5, -1, -1), ack));
  EXPECT_FALSE(Matches(l.Recv(5, 3, 77), ack));
  // ...and an acknowledgement receive takes no message.
  EXPECT_FALSE(Matches(l.AckRecv(5, 3, 77), l.Send(5, 3, 77, true)));
}

INSTANTIATE_TEST_SUITE_P(Layouts, EveryLayout, ::testing::Values(TagMode::kTag1, TagMode::kTag2, TagMode::kFull),
                         [](const ::testing::TestParamInfo<TagMode>& p) {
                           return std::string(TagModeName(p.param));
                         });

TEST(OfiTag, CqDataCarriesTheSourceAndTheSize) {
  const TagLayout full8 = *TagLayout::Make(TagMode::kFull, 0, true, 8);
  EXPECT_EQ(full8.Data(7, 1000), (uint64_t{1000} << 32) | 7);
  EXPECT_EQ(full8.SizeOf(full8.Data(7, 1000)), 1000);
  EXPECT_EQ(full8.SizeOf(full8.Data(7, uint64_t{5} << 30)), -1);  // 4 GiB or more: unknown
  EXPECT_EQ(full8.SourceOf(0, full8.Data(262144, 5)), 262144);
  const TagLayout full4 = *TagLayout::Make(TagMode::kFull, 0, true, 4);
  EXPECT_FALSE(full4.size_in_data());
  EXPECT_EQ(full4.SizeOf(full4.Data(7, 1000)), -1);
  const TagLayout t1 = *TagLayout::Make(TagMode::kTag1, 0, false, 8);
  EXPECT_TRUE(t1.uses_data());
  EXPECT_EQ(t1.SizeOf(t1.Data(7, uint64_t{5} << 30)), int64_t{5} << 30);
  const TagLayout t1none = *TagLayout::Make(TagMode::kTag1, 0, false, 0);
  EXPECT_FALSE(t1none.uses_data());
}

}  // namespace
}  // namespace cartage::methods::ofi
