// Flag combinations and fields that make no sense are rejected when the CAR
// is built, with the rule in words.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "car/car.h"
#include "car/car_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cartage::car {
namespace {

using datatype::BasicType;
using datatype::Datatype;
using datatype::Op;
using datatype::OpKind;
using ::testing::HasSubstr;

const Vc kVc{.name = "test"};
const Op kSumOp(OpKind::kSum);
const Op* const kSum = &kSumOp;

struct Case {
  std::string name;
  std::function<void(CarSpec&)> mutate;
  std::string error;  // "" when the spec is valid
};

class CarSpecTest : public ::testing::Test {
 protected:
  CarSpec Send() {
    CarSpec s;
    s.kind = CarKind::kSend;
    s.flags = CarFlag::kSendData;
    s.envelope = {0, 1, 7};
    s.segment = Segment::Of(buf_, sizeof(buf_), BasicType::kByte);
    s.counter = &done_;
    s.vc = &kVc;
    return s;
  }
  CarSpec Recv() {
    CarSpec s = Send();
    s.kind = CarKind::kRecv;
    s.flags = CarFlag::kRecvData;
    return s;
  }
  char buf_[64] = {};
  base::Completion done_;
  CarPool pool_{{}};
};

TEST_F(CarSpecTest, EveryRule) {
  const std::vector<Case> send_cases = {
      {"plain send", [](CarSpec&) {}, ""},
      {"both directions", [](CarSpec& s) { s.flags = CarFlag::kSendData | CarFlag::kRecvData; },
       "SEND_DATA and RECV_DATA on one CAR"},
      {"send without SEND_DATA", [](CarSpec& s) { s.flags = CarFlag::kNone; },
       "a send CAR needs SEND_DATA"},
      {"unpack on send", [](CarSpec& s) { s.flags = CarFlag::kSendData | CarFlag::kUnpack; },
       "UNPACK on a CAR that does not receive"},
      {"mop without function", [](CarSpec& s) { s.flags = CarFlag::kSendData | CarFlag::kPack | CarFlag::kMop; },
       "MOP and a reduction function go together"},
      {"function without mop", [](CarSpec& s) { s.mop = kSum; }, "MOP and a reduction function go together"},
      {"mop without pack", [](CarSpec& s) { s.flags = CarFlag::kSendData | CarFlag::kMop; s.mop = kSum; },
       "MOP needs PACK or UNPACK"},
      {"pack with mop", [](CarSpec& s) { s.flags = CarFlag::kSendData | CarFlag::kPack | CarFlag::kMop; s.mop = kSum; },
       "MOP while packing is not supported"},
      {"buffer dep without supplier", [](CarSpec& s) { s.flags = CarFlag::kSendData | CarFlag::kPackedBufDependency; },
       "PACKED_BUF_DEPENDENCY without a supplier (buf_dep)"},
      {"supplier without buffer", [](CarSpec& s) { s.flags = CarFlag::kSendData | CarFlag::kSupplyPackedBuf; },
       "SUPPLY_PACKED_BUF without a packed buffer to supply"},
      {"supply and depend", [](CarSpec& s) { s.flags = CarFlag::kSendData | CarFlag::kSupplyPackedBuf | CarFlag::kPackedBufDependency; },
       "SUPPLY_PACKED_BUF and PACKED_BUF_DEPENDENCY on one CAR"},
      {"supply progress, no dependent yet", [](CarSpec& s) { s.flags = CarFlag::kSendData | CarFlag::kSupplyProgress; }, ""},
      {"range past buffer", [](CarSpec& s) { s.segment.last = 65; }, "segment range ends at byte 65 past the 64-byte buffer"},
      {"range reversed", [](CarSpec& s) { s.segment.first = 10; s.segment.last = 5; }, "segment range first > last"},
      {"non-empty range without buffer", [](CarSpec& s) { s.segment.buf = nullptr; },
       "segment of non-zero length without a buffer"},
      {"pack without segment", [](CarSpec& s) { s.flags = CarFlag::kSendData | CarFlag::kPack; s.segment = Segment{}; },
       "PACK without a segment to pack"},
      {"wildcard rank on send", [](CarSpec& s) { s.envelope.rank = kAnySource; }, "invalid rank -1"},
      {"negative tag on send", [](CarSpec& s) { s.envelope.tag = -5; }, "invalid tag -5"},
      {"no counter", [](CarSpec& s) { s.counter = nullptr; }, "no completion counter"},
      {"no VC", [](CarSpec& s) { s.vc = nullptr; }, "no VC"},
      {"successors on a send", [](CarSpec& s) { s.predecessors = 2; }, "successors and predecessors belong to schedule vertices"},
  };
  for (const Case& c : send_cases) {
    CarSpec s = Send();
    c.mutate(s);
    const absl::Status st = ValidateSpec(s);
    if (c.error.empty()) {
      EXPECT_TRUE(st.ok()) << c.name << ": " << st;
    } else {
      EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << c.name;
      EXPECT_THAT(st.message(), HasSubstr(c.error)) << c.name;
      EXPECT_THAT(st.message(), HasSubstr("building send CAR (context 0, rank ")) << c.name;
    }
  }
}

TEST_F(CarSpecTest, ReceiveRules) {
  CarSpec r = Recv();
  EXPECT_TRUE(ValidateSpec(r).ok());
  r.envelope.rank = kAnySource;
  r.envelope.tag = kAnyTag;
  EXPECT_TRUE(ValidateSpec(r).ok()) << "wildcards are for receives";
  r.envelope.rank = -2;
  EXPECT_THAT(ValidateSpec(r).message(), HasSubstr("invalid rank -2"));
  r = Recv();
  r.flags = CarFlag::kRecvData | CarFlag::kPack;
  EXPECT_THAT(ValidateSpec(r).message(), HasSubstr("PACK on a CAR that does not send"));
  r = Recv();
  r.flags = CarFlag::kNone;
  EXPECT_THAT(ValidateSpec(r).message(), HasSubstr("a receive CAR needs RECV_DATA"));
  r = Recv();
  r.synchronous = true;
  EXPECT_THAT(ValidateSpec(r).message(), HasSubstr("only a send can be synchronous"));
  r = Recv();
  r.segment = Segment{nullptr, 0, BasicType::kByte, 0, 0, nullptr};
  EXPECT_TRUE(ValidateSpec(r).ok()) << "a zero-byte receive needs no buffer";
  // Reduce while unpacking: into a packed buffer first, on a type the op is defined on.
  r = Recv();
  r.flags = CarFlag::kRecvData | CarFlag::kUnpack | CarFlag::kMop;
  r.mop = kSum;
  EXPECT_THAT(ValidateSpec(r).message(), HasSubstr("UNPACK|MOP needs a packed buffer"));
  char temp[64];
  r.pack_buf = temp;
  r.pack_size = sizeof(temp);
  EXPECT_THAT(ValidateSpec(r).message(), HasSubstr("sum is not defined on byte"));
  r.segment = Segment::Of(buf_, 16, BasicType::kInt32);
  EXPECT_TRUE(ValidateSpec(r).ok()) << ValidateSpec(r);
}

TEST_F(CarSpecTest, DependentsNameTheirSuppliers) {
  // Seed 002's forward (RECEIVER_SUPPLIES_BUF): a receive supplies its packed
  // buffer and its progress to a send. The receive is built first; the send
  // names it for both, and the pool links the receive back.
  char staging[64];
  CarSpec supplier = Recv();
  supplier.flags = CarFlag::kRecvData | CarFlag::kSupplyPackedBuf | CarFlag::kSupplyProgress;
  supplier.pack_buf = staging;
  supplier.pack_size = sizeof(staging);
  Car* r = *pool_.Create(supplier);

  CarSpec fwd = Send();
  fwd.flags = CarFlag::kSendData | CarFlag::kPackedBufDependency | CarFlag::kProgressDependency;
  fwd.buf_dep = r;
  fwd.progress_dep = r;
  absl::StatusOr<Car*> s = pool_.Create(fwd);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(r->buf_consumer(), *s);
  EXPECT_EQ(r->progress_dependent(), *s);
  EXPECT_EQ((*s)->deps_pending(), 2u);

  // One consumer per supplier.
  EXPECT_THAT(pool_.Create(fwd).status().message(),
              HasSubstr(absl::StrFormat("CAR #%d already supplies its buffer to CAR #%d", r->id(),
                                        (*s)->id())));
  // The supplier must carry the matching SUPPLY flag.
  Car* plain = *pool_.Create(Send());
  CarSpec wrong = Send();
  wrong.flags = CarFlag::kSendData | CarFlag::kProgressDependency;
  wrong.progress_dep = plain;
  EXPECT_THAT(pool_.Create(wrong).status().message(),
              HasSubstr(absl::StrFormat("progress_dep CAR #%d does not have SUPPLY_PROGRESS", plain->id())));
  wrong.flags = CarFlag::kSendData | CarFlag::kPackedBufDependency;
  wrong.progress_dep = nullptr;
  wrong.buf_dep = plain;
  EXPECT_THAT(pool_.Create(wrong).status().message(),
              HasSubstr(absl::StrFormat("buf_dep CAR #%d does not have SUPPLY_PACKED_BUF", plain->id())));
  wrong.buf_dep = nullptr;
  EXPECT_THAT(ValidateSpec(wrong).message(), HasSubstr("PACKED_BUF_DEPENDENCY without a supplier (buf_dep)"));
  wrong.flags = CarFlag::kSendData | CarFlag::kProgressDependency;
  EXPECT_THAT(ValidateSpec(wrong).message(), HasSubstr("PROGRESS_DEPENDENCY without a supplier (progress_dep)"));
  CarSpec consumer = fwd;
  consumer.pack_buf = staging;
  EXPECT_THAT(ValidateSpec(consumer).message(), HasSubstr("PACKED_BUF_DEPENDENCY but a pack_buf is already set"));
  CarSpec stray = Send();
  stray.buf_dep = r;
  EXPECT_THAT(ValidateSpec(stray).message(), HasSubstr("buf_dep set without PACKED_BUF_DEPENDENCY"));
  stray = Send();
  stray.progress_dep = r;
  EXPECT_THAT(ValidateSpec(stray).message(), HasSubstr("progress_dep set without PROGRESS_DEPENDENCY"));

  // Releasing either side unlinks the other: no pointer to a freed slot stays.
  pool_.Release(*s);
  EXPECT_EQ(r->buf_consumer(), nullptr);
  EXPECT_EQ(r->progress_dependent(), nullptr);
  absl::StatusOr<Car*> again = pool_.Create(fwd);
  ASSERT_TRUE(again.ok()) << "the supplier is free to supply again: " << again.status();
  pool_.Release(r);
  EXPECT_EQ((*again)->buf_dep(), nullptr);
  EXPECT_EQ((*again)->progress_dep(), nullptr);
  for (Car* c : {*again, plain}) pool_.Release(c);
  EXPECT_EQ(pool_.live(), 0u);
}

TEST(CarFlags, Names) {
  EXPECT_EQ(FlagsToString(CarFlag::kSendData | CarFlag::kPack), "SEND_DATA|PACK");
  EXPECT_EQ(FlagsToString(CarFlags()), "NONE");
  EXPECT_EQ(FlagsToString(CarFlag::kRecvData | CarFlag::kUnpack | CarFlag::kMop |
                          CarFlag::kPackedBufDependency | CarFlag::kSupplyProgress),
            "RECV_DATA|PACKED_BUF_DEPENDENCY|UNPACK|MOP|SUPPLY_PROGRESS");
}

// A send's or receive's spec made in its slot carries exactly what the
// message and the builder gave, the rest zero, whether a slot was free or
// the pool had to grow first.
TEST(CarInPlace, SpecOfTheMessage) {
  CarPool pool({.method_private_bytes = 16, .cars_per_slab = 2});
  char buf[24] = {};
  base::Completion done;
  const Vc vc{.name = "test"};
  int owner = 0;
  const MessageSpec send{.kind = CarKind::kSend,
                         .synchronous = true,
                         .envelope = {4, 1, 9},
                         .segment = Segment::Of(buf, sizeof(buf), BasicType::kByte)};
  const MessageSpec recv{.kind = CarKind::kRecv, .envelope = {4, 1, 9},
                         .segment = Segment::Of(buf, 8, BasicType::kByte)};
  std::vector<Car*> made;
  for (int i = 0; i < 5; ++i) {  // slabs of 2: the first, third and fifth grow the pool
    const MessageSpec& m = i % 2 == 0 ? send : recv;
    absl::StatusOr<Car*> c = pool.CreateInPlace([&] { return SpecOf(m, &done, &vc, &owner, 4096); });
    ASSERT_TRUE(c.ok()) << c.status();
    const CarSpec& got = (*c)->spec();
    EXPECT_EQ(got.kind, m.kind);
    EXPECT_EQ(FlagsToString(got.flags), i % 2 == 0 ? "SEND_DATA" : "RECV_DATA");
    EXPECT_EQ(got.envelope.context_id, 4u);
    EXPECT_EQ(got.envelope.rank, 1);
    EXPECT_EQ(got.envelope.tag, 9);
    EXPECT_EQ(got.segment.buf, buf);
    EXPECT_EQ(got.segment.bytes(), i % 2 == 0 ? sizeof(buf) : 8u);
    EXPECT_EQ(got.synchronous, i % 2 == 0);
    EXPECT_EQ(got.counter, &done);
    EXPECT_EQ(got.vc, &vc);
    EXPECT_EQ(got.owner, &owner);
    EXPECT_EQ(got.eager_limit, 4096u);
    EXPECT_EQ(got.buf_dep, nullptr);
    EXPECT_EQ(got.progress_dep, nullptr);
    EXPECT_EQ(got.pack_buf, nullptr);
    EXPECT_EQ(got.pack_size, 0u);
    EXPECT_EQ(got.mop, nullptr);
    EXPECT_TRUE(got.successors.empty());
    EXPECT_EQ(got.predecessors, 0u);
    EXPECT_EQ((*c)->deps_pending(), 0u);
    made.push_back(*c);
  }
  EXPECT_EQ(pool.live(), 5u);
  for (Car* c : made) pool.Release(c);
  EXPECT_EQ(pool.live(), 0u);
}

// Every length from 0 to 64 bytes, at every alignment of 0 to 7, lands
// exactly its bytes and nothing beside them.
TEST(CopyBytes, ExactBytesAtEveryLengthAndAlignment) {
  for (std::size_t align = 0; align < 8; ++align) {
    for (std::size_t n = 0; n <= 64; ++n) {
      std::vector<std::byte> from(80), to(96, std::byte{0xee});
      for (std::size_t i = 0; i < from.size(); ++i) from[i] = static_cast<std::byte>(i * 7 + n);
      CopyBytes(to.data() + 8 + align, from.data() + align, n);
      for (std::size_t i = 0; i < to.size(); ++i) {
        const bool inside = i >= 8 + align && i < 8 + align + n;
        ASSERT_EQ(to[i], inside ? from[i - 8] : std::byte{0xee}) << "n " << n << " align " << align << " at " << i;
      }
    }
  }
}

// Blocks of 1 MiB and more go in pieces of 256 KiB (base::CopyMemory):
// every byte lands, at lengths on and beside the pieces' edges.
TEST(CopyBytes, LargeBlocksLandWholeInPieces) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  std::vector<std::byte> from(2 * kMiB + 64);
  for (std::size_t i = 0; i < from.size(); ++i) from[i] = static_cast<std::byte>((i * 131) ^ (i >> 11));
  for (std::size_t n : {kMiB - 1, kMiB, kMiB + 1, kMiB + kMiB / 4 + 7, 2 * kMiB}) {
    std::vector<std::byte> to(n + 16, std::byte{0xee});
    CopyBytes(to.data() + 3, from.data() + 5, n);
    ASSERT_EQ(to[0], std::byte{0xee});
    ASSERT_EQ(to[2], std::byte{0xee});
    ASSERT_EQ(std::memcmp(to.data() + 3, from.data() + 5, n), 0) << n;
    for (std::size_t i = n + 3; i < to.size(); ++i) ASSERT_EQ(to[i], std::byte{0xee}) << n << " at " << i;
  }
}

}  // namespace
}  // namespace cartage::car
