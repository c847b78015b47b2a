// Datatypes and the segment engine against an independent reference: a
// RefType is built by the MPI rules in parallel with each Datatype and lists
// the byte offset of every data byte in typemap order, so packing is just
// reading those bytes.
#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "datatype/segment_walk.h"
#include "datatype/datatype.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cartage::datatype {
namespace {

using ::testing::HasSubstr;

struct RefType {
  std::vector<int64_t> bytes;  // offset of each data byte, typemap order
  int64_t lb = 0, extent = 0;
};

RefType RefBasic(BasicType t) {
  RefType r;
  for (int64_t i = 0; i < static_cast<int64_t>(SizeOf(t)); ++i) r.bytes.push_back(i);
  r.extent = static_cast<int64_t>(ExtentOf(t));  // pair types: the C struct's size
  return r;
}
// Blocks of bl[i] copies of `olds[i]` at byte displacement d[i], MPI bounds.
RefType RefBlocks(const std::vector<int64_t>& bl, const std::vector<int64_t>& d, const std::vector<RefType>& olds) {
  RefType r;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (std::size_t i = 0; i < bl.size(); ++i) {
    const RefType& o = olds[i];
    for (int64_t k = 0; k < bl[i]; ++k) {
      for (int64_t b : o.bytes) r.bytes.push_back(d[i] + k * o.extent + b);
    }
    if (bl[i] == 0) continue;
    lo = std::min(lo, d[i] + o.lb);
    hi = std::max(hi, d[i] + o.lb + bl[i] * o.extent);
  }
  if (lo == INT64_MAX) lo = hi = 0;
  r.lb = lo;
  r.extent = hi - lo;
  return r;
}

// A random nested type, built both ways.
struct Pair {
  Datatype type;
  RefType ref;
};

Pair RandomType(std::mt19937_64& g, int depth) {
  static constexpr BasicType kBasics[] = {BasicType::kByte,      BasicType::kInt16,     BasicType::kInt32,
                                          BasicType::kDouble,    BasicType::kDoubleInt, BasicType::kShortInt,
                                          BasicType::kLongDouble};
  if (depth == 0 || g() % 4 == 0) {
    const BasicType t = kBasics[g() % std::size(kBasics)];
    return {Datatype::Basic(t), RefBasic(t)};
  }
  Pair old = RandomType(g, depth - 1);
  auto small = [&](int64_t n) { return static_cast<int64_t>(g() % static_cast<uint64_t>(n)); };
  switch (g() % 7) {
    case 0: {
      const int64_t n = small(4);
      return {*Datatype::Contiguous(n, old.type),
              [&] {
                RefType r = RefBlocks({n}, {0}, {old.ref});
                r.lb = n == 0 ? 0 : old.ref.lb;
                r.extent = n * old.ref.extent;
                return r;
              }()};
    }
    case 1: {
      const int64_t count = 1 + small(3), bl = small(3), stride = small(5) - 1;
      std::vector<int64_t> bls(static_cast<std::size_t>(count), bl), ds;
      for (int64_t i = 0; i < count; ++i) ds.push_back(i * stride * old.ref.extent);
      return {*Datatype::Vector(count, bl, stride, old.type),
              RefBlocks(bls, ds, std::vector<RefType>(static_cast<std::size_t>(count), old.ref))};
    }
    case 2: {
      const int64_t count = 1 + small(3), bl = 1 + small(2), stride = small(40) - 8;
      std::vector<int64_t> bls(static_cast<std::size_t>(count), bl), ds;
      for (int64_t i = 0; i < count; ++i) ds.push_back(i * stride);
      return {*Datatype::Hvector(count, bl, stride, old.type),
              RefBlocks(bls, ds, std::vector<RefType>(static_cast<std::size_t>(count), old.ref))};
    }
    case 3: {
      const std::size_t n = 1 + g() % 3;
      std::vector<int64_t> bls, ds, bytes;
      for (std::size_t i = 0; i < n; ++i) {
        bls.push_back(small(3));
        ds.push_back(small(6) - 1);
        bytes.push_back(ds.back() * old.ref.extent);
      }
      return {*Datatype::Indexed(bls, ds, old.type), RefBlocks(bls, bytes, std::vector<RefType>(n, old.ref))};
    }
    case 4: {
      const std::size_t n = 1 + g() % 3;
      std::vector<int64_t> bls, ds;
      std::vector<Datatype> types;
      std::vector<RefType> refs;
      for (std::size_t i = 0; i < n; ++i) {
        Pair p = i == 0 ? old : RandomType(g, depth - 1);
        bls.push_back(small(3));
        ds.push_back(small(48));
        types.push_back(p.type);
        refs.push_back(p.ref);
      }
      return {*Datatype::Struct(bls, ds, types), RefBlocks(bls, ds, refs)};
    }
    case 5: {
      const int64_t lb = small(8) - 4, extent = old.ref.extent + small(16);
      RefType r = old.ref;
      r.lb = lb;
      r.extent = extent;
      return {*Datatype::Resized(old.type, lb, extent), r};
    }
    default: {
      // 2-D subarray in C order.
      const int64_t rows = 1 + small(4), cols = 1 + small(4);
      const int64_t sr = small(rows + 1), sc = small(cols + 1);
      const int64_t r0 = small(rows - sr + 1), c0 = small(cols - sc + 1);
      RefType r;
      for (int64_t i = 0; i < sr; ++i) {
        for (int64_t j = 0; j < sc; ++j) {
          for (int64_t b : old.ref.bytes) r.bytes.push_back(((r0 + i) * cols + (c0 + j)) * old.ref.extent + b);
        }
      }
      r.lb = 0;
      r.extent = rows * cols * old.ref.extent;
      const int64_t sizes[] = {rows, cols}, subs[] = {sr, sc}, starts[] = {r0, c0};
      return {*Datatype::Subarray(sizes, subs, starts, ArrayOrder::kC, old.type), r};
    }
  }
}

// A buffer wide enough for `count` elements whatever their offsets.
struct Buffer {
  Buffer(const RefType& r, int64_t count) {
    int64_t lo = 0, hi = 1;
    for (int64_t e = 0; e < count; ++e) {
      for (int64_t b : r.bytes) {
        lo = std::min(lo, e * r.extent + b);
        hi = std::max(hi, e * r.extent + b + 1);
      }
    }
    storage.assign(static_cast<std::size_t>(hi - lo), std::byte{0});
    origin = -lo;
  }
  std::byte* base() { return storage.data() + origin; }
  std::vector<std::byte> storage;
  int64_t origin = 0;
};

std::vector<std::byte> RefPack(const RefType& r, int64_t count, std::byte* base) {
  std::vector<std::byte> out;
  for (int64_t e = 0; e < count; ++e) {
    for (int64_t b : r.bytes) out.push_back(base[e * r.extent + b]);
  }
  return out;
}

TEST(Datatype, KnownLayouts) {
  const Datatype d = Datatype::Basic(BasicType::kDouble);
  EXPECT_TRUE(d.contiguous());
  // A column of a 5 x 7 matrix of doubles.
  absl::StatusOr<Datatype> column = Datatype::Vector(5, 1, 7, d);
  ASSERT_TRUE(column.ok());
  EXPECT_EQ(column->size(), 40);
  EXPECT_EQ(column->extent(), (4 * 7 + 1) * 8);
  EXPECT_FALSE(column->contiguous());
  // A vector whose stride equals its block is contiguous.
  EXPECT_TRUE(Datatype::Vector(3, 2, 2, Datatype::Basic(BasicType::kInt32))->contiguous());
  // struct { char c; double x; } with padding: extent 16, size 9.
  const int64_t bl[] = {1, 1}, disp[] = {0, 8};
  const Datatype types[] = {Datatype::Basic(BasicType::kByte), d};
  absl::StatusOr<Datatype> s = Datatype::Struct(bl, disp, types);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->size(), 9);
  EXPECT_EQ(s->extent(), 16);
  EXPECT_EQ(s->true_extent(), 16);
  BasicType h;
  EXPECT_FALSE(s->homogeneous(&h));
  ASSERT_TRUE(column->homogeneous(&h));
  EXPECT_EQ(h, BasicType::kDouble);
  // Resized changes bounds, not data.
  absl::StatusOr<Datatype> r = Datatype::Resized(*column, -8, 8);
  EXPECT_EQ(r->size(), 40);
  EXPECT_EQ(r->lb(), -8);
  EXPECT_EQ(r->extent(), 8);
  EXPECT_EQ(r->true_lb(), 0);
  EXPECT_EQ(r->true_extent(), column->true_extent());
  EXPECT_EQ(column->name(), "vector(5, 1, 7, double)");
  EXPECT_EQ(column->Dup().size(), 40);
  // Pair types: value and index packed, the C struct's padding in the extent.
  const Datatype di = Datatype::Basic(BasicType::kDoubleInt);
  EXPECT_EQ(di.size(), 12);
  EXPECT_EQ(di.extent(), 16);
  EXPECT_FALSE(di.contiguous());
  EXPECT_EQ(Datatype::Basic(BasicType::kTwoInt).extent(), 8);
  EXPECT_TRUE(Datatype::Basic(BasicType::kTwoInt).contiguous());
  EXPECT_EQ(Datatype::Basic(BasicType::kShortInt).size(), 8);  // the inner gap travels
  EXPECT_EQ(Datatype::Basic(BasicType::kLongDoubleInt).extent(), 32);
  EXPECT_EQ(Datatype::Basic(BasicType::kComplexDouble).size(), 16);
  EXPECT_EQ(TypeName(BasicType::kLongDoubleInt), "long_double_int");
}

TEST(Datatype, BadArgumentsNameTheConstructor) {
  const Datatype i = Datatype::Basic(BasicType::kInt32);
  EXPECT_EQ(Datatype::Contiguous(-1, i).status().message(), "datatype contiguous: count is -1; it must be >= 0");
  const int64_t bl[] = {1, -2}, d[] = {0, 4};
  EXPECT_EQ(Datatype::Indexed(bl, d, i).status().message(),
            "datatype hindexed: blocklengths[1] is -2; it must be >= 0");
  const int64_t d1[] = {0};
  EXPECT_THAT(Datatype::Hindexed(bl, d1, i).status().message(), HasSubstr("2 block lengths but 1 displacements"));
  const int64_t sizes[] = {4, 4}, subs[] = {2, 3}, starts[] = {1, 2};
  EXPECT_THAT(Datatype::Subarray(sizes, subs, starts, ArrayOrder::kC, i).status().message(),
              HasSubstr("dimension 1: size 4, subsize 3, start 2 do not fit"));
  EXPECT_THAT(Datatype::Resized(i, 0, -4).status().message(), HasSubstr("extent is -4"));
}

TEST(Datatype, RandomNestedTypesPackAndUnpackLikeTheReference) {
  std::mt19937_64 g(20261122);
  int nontrivial = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    Pair p = RandomType(g, 3);
    const int64_t count = 1 + static_cast<int64_t>(g() % 3);
    SCOPED_TRACE(p.type.name());
    ASSERT_EQ(p.type.size(), static_cast<int64_t>(p.ref.bytes.size()));
    ASSERT_EQ(p.type.lb(), p.ref.lb);
    ASSERT_EQ(p.type.extent(), p.ref.extent);
    if (!p.type.contiguous()) ++nontrivial;
    Buffer src(p.ref, count);
    for (auto& b : src.storage) b = static_cast<std::byte>(g());
    const std::vector<std::byte> want = RefPack(p.ref, count, src.base());
    const int64_t total = count * p.type.size();
    std::vector<std::byte> got(static_cast<std::size_t>(total) + 1, std::byte{0xee});
    ASSERT_EQ(Pack(src.base(), count, p.type, 0, total, got.data()), total);
    ASSERT_EQ(std::vector<std::byte>(got.begin(), got.begin() + total), want);
    ASSERT_EQ(got.back(), std::byte{0xee}) << "wrote past the packed size";
    // Unpack into a clean buffer: the data bytes come back, nothing else is written.
    Buffer dst(p.ref, count);
    ASSERT_EQ(Unpack(want.data(), count, p.type, 0, total, dst.base()), total);
    ASSERT_EQ(RefPack(p.ref, count, dst.base()), want);
    std::vector<bool> touched(dst.storage.size(), false);
    for (int64_t e = 0; e < count; ++e) {
      for (int64_t b : p.ref.bytes) touched[static_cast<std::size_t>(dst.origin + e * p.ref.extent + b)] = true;
    }
    for (std::size_t k = 0; k < touched.size(); ++k) {
      if (!touched[k]) {
        ASSERT_EQ(dst.storage[k], std::byte{0}) << "byte " << k << " is not data";
      }
    }
    // Pieces cover exactly the packed stream, in order.
    int64_t pieces_bytes = 0;
    for (const Piece& pc : Pieces(src.base(), count, p.type, 0, total)) pieces_bytes += pc.bytes;
    ASSERT_EQ(pieces_bytes, total);
  }
  EXPECT_GT(nontrivial, 1500) << "the generator must produce real layouts";
}

TEST(Datatype, EverySplitPointAndAnyChunkOrder) {
  std::mt19937_64 g(7);
  for (int iteration = 0; iteration < 200; ++iteration) {
    Pair p = RandomType(g, 3);
    const int64_t count = 2;
    const int64_t total = count * p.type.size();
    if (total == 0) continue;
    Buffer src(p.ref, count);
    for (auto& b : src.storage) b = static_cast<std::byte>(g());
    const std::vector<std::byte> want = RefPack(p.ref, count, src.base());
    SCOPED_TRACE(p.type.name());
    for (int64_t k = 0; k <= total; ++k) {
      std::vector<std::byte> got(static_cast<std::size_t>(total));
      ASSERT_EQ(Pack(src.base(), count, p.type, 0, k, got.data()), k);
      ASSERT_EQ(Pack(src.base(), count, p.type, k, total, got.data() + k), total - k);
      ASSERT_EQ(got, want) << "split at " << k;
    }
    // Random chunks, unpacked in shuffled order.
    std::vector<int64_t> cuts = {0, total};
    for (int c = 0; c < 5; ++c) cuts.push_back(static_cast<int64_t>(g() % static_cast<uint64_t>(total + 1)));
    std::sort(cuts.begin(), cuts.end());
    std::vector<std::size_t> order(cuts.size() - 1);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), g);
    Buffer dst(p.ref, count);
    for (std::size_t c : order) {
      Unpack(want.data() + cuts[c], count, p.type, cuts[c], cuts[c + 1], dst.base());
    }
    ASSERT_EQ(RefPack(p.ref, count, dst.base()), want);
  }
}

}  // namespace
}  // namespace cartage::datatype
