// Reductions against a reference written per element with plain C++
// semantics (128-bit integers wrapped by hand, no memcpy tricks): every
// operator on every basic type it is defined on, the clear error for every
// pair it is not, reductions through derived types at every element split,
// and user operators, commutative or not, on types with gaps.
#include <complex>
#include <cstdio>
#include <type_traits>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "datatype/op.h"
#include "datatype/segment_walk.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cartage::datatype {
namespace {

using ::testing::HasSubstr;

constexpr OpKind kAllOps[] = {OpKind::kSum,  OpKind::kProd, OpKind::kMin,  OpKind::kMax,
                              OpKind::kLand, OpKind::kLor,  OpKind::kLxor, OpKind::kBand,
                              OpKind::kBor,  OpKind::kBxor, OpKind::kMaxloc, OpKind::kMinloc};

__extension__ typedef __int128 I128;
__extension__ typedef unsigned __int128 U128;

template <class T>
T Wrap(U128 v) {
  // Reduce modulo 2^bits into T's range by hand.
  constexpr int kBits = 8 * sizeof(T);
  const U128 m = v & ((static_cast<U128>(1) << kBits) - 1);
  if constexpr (std::is_signed_v<T>) {
    const I128 half = static_cast<I128>(1) << (kBits - 1);
    I128 s = static_cast<I128>(m);
    if (s >= half) s -= static_cast<I128>(1) << kBits;
    return static_cast<T>(s);
  } else {
    return static_cast<T>(m);
  }
}

// The reference: result of (a op b), a the incoming operand.
template <class T>
T RefInteger(OpKind op, T a, T b) {
  switch (op) {
    case OpKind::kSum: return Wrap<T>(static_cast<U128>(static_cast<I128>(a)) + static_cast<U128>(static_cast<I128>(b)));
    case OpKind::kProd: return Wrap<T>(static_cast<U128>(static_cast<I128>(a)) * static_cast<U128>(static_cast<I128>(b)));
    case OpKind::kMin: return a < b ? a : b;
    case OpKind::kMax: return a > b ? a : b;
    case OpKind::kLand: return (a && b) ? 1 : 0;
    case OpKind::kLor: return (a || b) ? 1 : 0;
    case OpKind::kLxor: return (!a != !b) ? 1 : 0;
    case OpKind::kBand: return static_cast<T>(a & b);
    case OpKind::kBor: return static_cast<T>(a | b);
    case OpKind::kBxor: return static_cast<T>(a ^ b);
    default: ADD_FAILURE() << "no reference"; return 0;
  }
}

template <class T>
void CheckInteger(OpKind op, BasicType bt, std::mt19937_64& g) {
  constexpr int kN = 61;
  std::vector<T> a(kN), b(kN);
  for (int i = 0; i < kN; ++i) {
    // Small values (logical ops see zeros), then anything.
    a[i] = i % 3 == 0 ? static_cast<T>(g() % 3) : static_cast<T>(g());
    b[i] = i % 5 == 0 ? static_cast<T>(g() % 3) : static_cast<T>(g());
  }
  std::vector<T> io = b;
  ReduceBasic(op, bt, a.data(), io.data(), kN);
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(io[i], RefInteger<T>(op, a[i], b[i])) << OpName(op) << " on " << TypeName(bt) << " at " << i;
  }
}

template <class T>
void CheckFloating(OpKind op, BasicType bt, std::mt19937_64& g) {
  constexpr int kN = 33;
  std::uniform_real_distribution<double> d(-100, 100);
  std::vector<T> a(kN), b(kN);
  for (int i = 0; i < kN; ++i) {
    a[i] = static_cast<T>(d(g));
    b[i] = i == 7 ? a[i] : static_cast<T>(d(g));
  }
  std::vector<T> io = b;
  ReduceBasic(op, bt, a.data(), io.data(), kN);
  for (int i = 0; i < kN; ++i) {
    T want{};
    if (op == OpKind::kSum) want = a[i] + b[i];
    if (op == OpKind::kProd) want = a[i] * b[i];
    if (op == OpKind::kMin) want = a[i] < b[i] ? a[i] : b[i];
    if (op == OpKind::kMax) want = a[i] > b[i] ? a[i] : b[i];
    ASSERT_EQ(io[i], want) << OpName(op) << " on " << TypeName(bt) << " at " << i;
  }
}

template <class T>
void CheckComplex(OpKind op, BasicType bt, std::mt19937_64& g) {
  constexpr int kN = 17;
  std::uniform_real_distribution<double> d(-10, 10);
  std::vector<std::complex<T>> a(kN), b(kN);
  for (int i = 0; i < kN; ++i) {
    a[i] = {static_cast<T>(d(g)), static_cast<T>(d(g))};
    b[i] = {static_cast<T>(d(g)), static_cast<T>(d(g))};
  }
  auto io = b;
  ReduceBasic(op, bt, a.data(), io.data(), kN);
  for (int i = 0; i < kN; ++i) {
    // (ar + i ai)(br + i bi) written out.
    const std::complex<T> want =
        op == OpKind::kSum ? std::complex<T>(a[i].real() + b[i].real(), a[i].imag() + b[i].imag())
                           : std::complex<T>(a[i].real() * b[i].real() - a[i].imag() * b[i].imag(),
                                             a[i].real() * b[i].imag() + a[i].imag() * b[i].real());
    ASSERT_NEAR(static_cast<double>(std::abs(io[i] - want)), 0.0, 1e-4) << OpName(op) << " on " << TypeName(bt);
  }
}

template <class V>
void CheckPair(OpKind op, BasicType bt, std::mt19937_64& g) {
  constexpr int kN = 40;
  // Arrays of the C struct (extent = sizeof), reduced through the datatype.
  std::vector<ValueIndex<V>> a(kN), b(kN);
  for (int i = 0; i < kN; ++i) {
    a[i] = {static_cast<V>(g() % 5), static_cast<int>(g() % 100)};
    b[i] = {static_cast<V>(g() % 5), static_cast<int>(g() % 100)};
  }
  const Datatype t = Datatype::Basic(bt);
  ASSERT_EQ(t.extent(), static_cast<int64_t>(sizeof(ValueIndex<V>)));
  std::vector<std::byte> packed(static_cast<std::size_t>(kN * t.size()));
  Pack(a.data(), kN, t, 0, kN * t.size(), packed.data());
  auto io = b;
  ASSERT_TRUE(ReduceUnpack(Op(op), packed.data(), kN, t, 0, kN * t.size(), io.data()).ok());
  for (int i = 0; i < kN; ++i) {
    const bool better = op == OpKind::kMaxloc ? a[i].value > b[i].value : a[i].value < b[i].value;
    V wv = better ? a[i].value : b[i].value;
    int wi = better ? a[i].index : b[i].index;
    if (a[i].value == b[i].value) wi = std::min(a[i].index, b[i].index);
    ASSERT_EQ(io[i].value, wv) << OpName(op) << " on " << TypeName(bt) << " at " << i;
    ASSERT_EQ(io[i].index, wi) << OpName(op) << " on " << TypeName(bt) << " at " << i;
  }
}

void CheckBool(OpKind op, std::mt19937_64& g) {
  constexpr int kN = 50;
  bool a[kN], b[kN], io[kN];
  for (int i = 0; i < kN; ++i) {
    a[i] = g() % 2 == 1;
    b[i] = io[i] = g() % 2 == 1;
  }
  ReduceBasic(op, BasicType::kBool, a, io, kN);
  for (int i = 0; i < kN; ++i) {
    const bool want = op == OpKind::kLand ? (a[i] && b[i]) : op == OpKind::kLor ? (a[i] || b[i]) : (a[i] != b[i]);
    ASSERT_EQ(io[i], want) << OpName(op) << " at " << i;
  }
}

void CheckBytes(OpKind op, std::mt19937_64& g) {
  constexpr int kN = 50;
  unsigned char a[kN], b[kN], io[kN];
  for (int i = 0; i < kN; ++i) {
    a[i] = static_cast<unsigned char>(g());
    b[i] = io[i] = static_cast<unsigned char>(g());
  }
  ReduceBasic(op, BasicType::kByte, a, io, kN);
  for (int i = 0; i < kN; ++i) {
    const int want = op == OpKind::kBand ? (a[i] & b[i]) : op == OpKind::kBor ? (a[i] | b[i]) : (a[i] ^ b[i]);
    ASSERT_EQ(io[i], want) << OpName(op) << " at " << i;
  }
}

// Which pairs MPI defines, spelled out independently of Defined().
bool Expected(OpKind op, BasicType t) {
  const bool arith = op == OpKind::kSum || op == OpKind::kProd;
  const bool order = op == OpKind::kMin || op == OpKind::kMax;
  const bool logic = op == OpKind::kLand || op == OpKind::kLor || op == OpKind::kLxor;
  const bool bits = op == OpKind::kBand || op == OpKind::kBor || op == OpKind::kBxor;
  const bool loc = op == OpKind::kMaxloc || op == OpKind::kMinloc;
  switch (t) {
    case BasicType::kByte: return bits;
    case BasicType::kInt8: case BasicType::kUint8: case BasicType::kInt16: case BasicType::kUint16:
    case BasicType::kInt32: case BasicType::kUint32: case BasicType::kInt64: case BasicType::kUint64:
      return arith || order || logic || bits;
    case BasicType::kFloat: case BasicType::kDouble: case BasicType::kLongDouble: return arith || order;
    case BasicType::kBool: return logic;
    case BasicType::kComplexFloat: case BasicType::kComplexDouble: case BasicType::kComplexLongDouble:
      return arith;
    default: return loc;
  }
}

TEST(Op, EveryOperatorOnEveryBasicTypeMatchesTheReference) {
  std::mt19937_64 g(20261122);
  int checked = 0, refused = 0;
  for (OpKind op : kAllOps) {
    for (int ti = 0; ti < static_cast<int>(BasicType::kCount); ++ti) {
      const auto t = static_cast<BasicType>(ti);
      const Datatype type = Datatype::Basic(t);
      const absl::Status s = Op(op).Check(type);
      ASSERT_EQ(s.ok(), Expected(op, t)) << OpName(op) << " on " << TypeName(t) << ": " << s;
      ASSERT_EQ(Defined(op, t), Expected(op, t));
      if (!s.ok()) {
        EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
        EXPECT_EQ(s.message(), std::string(OpName(op)) + " is not defined on " + std::string(TypeName(t)));
        // ReduceUnpack refuses it too and writes nothing.
        std::vector<std::byte> in(64), io(64, std::byte{7});
        EXPECT_FALSE(ReduceUnpack(Op(op), in.data(), 1, type, 0, type.size(), io.data()).ok());
        EXPECT_EQ(io, std::vector<std::byte>(64, std::byte{7}));
        ++refused;
        continue;
      }
      ++checked;
      switch (t) {
        case BasicType::kByte: CheckBytes(op, g); break;
        case BasicType::kInt8: CheckInteger<int8_t>(op, t, g); break;
        case BasicType::kUint8: CheckInteger<uint8_t>(op, t, g); break;
        case BasicType::kInt16: CheckInteger<int16_t>(op, t, g); break;
        case BasicType::kUint16: CheckInteger<uint16_t>(op, t, g); break;
        case BasicType::kInt32: CheckInteger<int32_t>(op, t, g); break;
        case BasicType::kUint32: CheckInteger<uint32_t>(op, t, g); break;
        case BasicType::kInt64: CheckInteger<int64_t>(op, t, g); break;
        case BasicType::kUint64: CheckInteger<uint64_t>(op, t, g); break;
        case BasicType::kFloat: CheckFloating<float>(op, t, g); break;
        case BasicType::kDouble: CheckFloating<double>(op, t, g); break;
        case BasicType::kLongDouble: CheckFloating<long double>(op, t, g); break;
        case BasicType::kBool: CheckBool(op, g); break;
        case BasicType::kComplexFloat: CheckComplex<float>(op, t, g); break;
        case BasicType::kComplexDouble: CheckComplex<double>(op, t, g); break;
        case BasicType::kComplexLongDouble: CheckComplex<long double>(op, t, g); break;
        case BasicType::kFloatInt: CheckPair<float>(op, t, g); break;
        case BasicType::kDoubleInt: CheckPair<double>(op, t, g); break;
        case BasicType::kLongInt: CheckPair<long>(op, t, g); break;
        case BasicType::kTwoInt: CheckPair<int>(op, t, g); break;
        case BasicType::kShortInt: CheckPair<short>(op, t, g); break;
        case BasicType::kLongDoubleInt: CheckPair<long double>(op, t, g); break;
        case BasicType::kCount: break;
      }
      if (HasFatalFailure()) return;
    }
  }
  // 8 integer types x 10 + 3 floats x 4 + bool 3 + byte 3 + 3 complex x 2 + 6 pairs x 2.
  EXPECT_EQ(checked, 80 + 12 + 3 + 3 + 6 + 12);
  EXPECT_EQ(refused, 12 * 22 - checked);
}

TEST(Op, MixedOrUndefinedDerivedTypesAreClearErrors) {
  const int64_t bl[] = {1, 1}, disp[] = {0, 8};
  const Datatype types[] = {Datatype::Basic(BasicType::kInt32), Datatype::Basic(BasicType::kDouble)};
  const Datatype mixed = *Datatype::Struct(bl, disp, types);
  EXPECT_THAT(Op(OpKind::kSum).Check(mixed).message(), HasSubstr("sum is not defined on struct("));
  EXPECT_THAT(Op(OpKind::kSum).Check(mixed).message(), HasSubstr("not all of one basic type"));
  const Datatype cvec = *Datatype::Vector(2, 1, 3, Datatype::Basic(BasicType::kComplexDouble));
  EXPECT_EQ(Op(OpKind::kMax).Check(cvec).message(),
            "max is not defined on vector(2, 1, 3, complex_double) (of complex_double)");
  EXPECT_EQ(Op::User(nullptr, true).Check(mixed).message(), "user reduction without a function");
}

TEST(Op, ReduceThroughAVectorAtEverySplitPoint) {
  // A column of a 9 x 5 int64 matrix, 3 columns side by side (resized).
  const Datatype i64 = Datatype::Basic(BasicType::kInt64);
  const Datatype col = *Datatype::Resized(*Datatype::Vector(9, 1, 5, i64), 0, 8);
  constexpr int64_t kCount = 3;
  const int64_t bytes = kCount * col.size();
  std::vector<int64_t> in(9 * 3), base(9 * 5);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int64_t>(i * 7 + 1);
  for (std::size_t i = 0; i < base.size(); ++i) base[i] = static_cast<int64_t>(1000 + i);
  // Reference: element j of the packed stream goes to row j % 9 of column j / 9.
  std::vector<int64_t> want = base;
  for (int64_t j = 0; j < 27; ++j) want[static_cast<std::size_t>((j % 9) * 5 + j / 9)] += in[static_cast<std::size_t>(j)];
  for (int64_t cut = 0; cut <= bytes; cut += 8) {
    std::vector<int64_t> got = base;
    const Op sum(OpKind::kSum);
    // The second piece first: any order.
    ASSERT_TRUE(ReduceUnpack(sum, reinterpret_cast<std::byte*>(in.data()) + cut, kCount, col, cut, bytes, got.data()).ok());
    ASSERT_TRUE(ReduceUnpack(sum, in.data(), kCount, col, 0, cut, got.data()).ok());
    ASSERT_EQ(got, want) << "split at byte " << cut;
  }
  std::vector<int64_t> got = base;
  const absl::Status s = ReduceUnpack(Op(OpKind::kSum), in.data(), kCount, col, 4, 16, got.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bytes [4, 16) cut an element of 8 bytes"));
  EXPECT_EQ(got, base);
}

// A non-commutative user op on struct { int32 a; [gap] double x; }:
// inout = in * 10 + inout on both fields, so operand order shows.
struct Rec {
  int32_t a;
  int32_t gap;
  double x;
};
void TenfoldPlus(const void* in, void* inout, int64_t count, const Datatype& type, void* ctx) {
  ++*static_cast<int*>(ctx);
  for (int64_t i = 0; i < count; ++i) {
    const auto* s = reinterpret_cast<const Rec*>(static_cast<const std::byte*>(in) + i * type.extent());
    auto* d = reinterpret_cast<Rec*>(static_cast<std::byte*>(inout) + i * type.extent());
    d->a = s->a * 10 + d->a;
    d->x = s->x * 10 + d->x;
  }
}

TEST(Op, UserOperatorSeesWholeElementsInTheTypeLayout) {
  const int64_t bl[] = {1, 1}, disp[] = {offsetof(Rec, a), offsetof(Rec, x)};
  const Datatype types[] = {Datatype::Basic(BasicType::kInt32), Datatype::Basic(BasicType::kDouble)};
  const Datatype rec = *Datatype::Struct(bl, disp, types);
  ASSERT_EQ(rec.size(), 12);
  ASSERT_EQ(rec.extent(), 16);
  constexpr int kN = 10;
  std::vector<Rec> src(kN), dst(kN);
  for (int i = 0; i < kN; ++i) {
    src[i] = {i + 1, -1, 0.5 * i};
    dst[i] = {100 * i, -2, 3.0};
  }
  std::vector<std::byte> packed(kN * 12);
  Pack(src.data(), kN, rec, 0, kN * 12, packed.data());
  int calls = 0;
  const Op op = Op::User(&TenfoldPlus, /*commutative=*/false, &calls);
  ASSERT_TRUE(op.Check(rec).ok());
  // Two pieces of whole elements: [0, 4) and [4, 10).
  ASSERT_TRUE(ReduceUnpack(op, packed.data() + 48, kN, rec, 48, kN * 12, dst.data()).ok());
  ASSERT_TRUE(ReduceUnpack(op, packed.data(), kN, rec, 0, 48, dst.data()).ok());
  EXPECT_EQ(calls, 2);
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(dst[i].a, (i + 1) * 10 + 100 * i);
    EXPECT_EQ(dst[i].x, 0.5 * i * 10 + 3.0);
    EXPECT_EQ(dst[i].gap, -2) << "the gap is not the op's to write";
  }
  EXPECT_THAT(ReduceUnpack(op, packed.data(), kN, rec, 0, 20, dst.data()).message(),
              HasSubstr("cut an element of 12 bytes"));
}

// The reference for one element of an integer or real type.
template <class T>
T RefArithmetic(OpKind op, T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (op) {
      case OpKind::kSum: return a + b;
      case OpKind::kProd: return a * b;
      case OpKind::kMin: return a < b ? a : b;
      default: return a > b ? a : b;
    }
  } else {
    return RefInteger<T>(op, a, b);
  }
}

// n elements of T reduced at `isa`, the operands at byte offsets `skew`
// (odd addresses included) of separate buffers, against the reference.
template <class T>
void CheckAt(VectorIsa isa, OpKind op, BasicType bt, int64_t n, std::size_t skew, std::mt19937_64& g) {
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
  std::vector<std::byte> in(bytes + skew + 1), io(bytes + skew + 1);
  std::vector<T> a(static_cast<std::size_t>(n)), b(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    if constexpr (std::is_floating_point_v<T>) {
      a[i] = static_cast<T>(static_cast<int>(g() % 2001) - 1000) / static_cast<T>(8);
      b[i] = i % 9 == 0 ? a[i] : static_cast<T>(static_cast<int>(g() % 2001) - 1000) / static_cast<T>(8);
    } else {
      a[i] = static_cast<T>(g());
      b[i] = i % 7 == 0 ? static_cast<T>(0) : static_cast<T>(g());
    }
  }
  if (bytes > 0) {  // (an empty vector's data may be null)
    std::memcpy(in.data() + skew, a.data(), bytes);
    std::memcpy(io.data() + skew, b.data(), bytes);
  }
  const std::byte guard = io[skew + bytes];
  ReduceBasicAt(isa, op, bt, in.data() + skew, io.data() + skew, n);
  for (std::size_t i = 0; i < a.size(); ++i) {
    T got;
    std::memcpy(&got, io.data() + skew + i * sizeof(T), sizeof(T));
    ASSERT_EQ(got, RefArithmetic<T>(op, a[i], b[i]))
        << OpName(op) << " on " << TypeName(bt) << " at " << IsaName(isa) << ", " << n << " elements, offset "
        << skew << ", element " << i;
  }
  ASSERT_EQ(io[skew + bytes], guard) << "wrote past the end at " << IsaName(isa);
}

TEST(Op, EveryVectorWidthThisCpuHasMatchesTheReference) {
  std::mt19937_64 g(20261201);
  const VectorIsa widths[] = {VectorIsa::kBaseline, VectorIsa::kAvx2, VectorIsa::kAvx512};
  int ran = 0;
  for (VectorIsa isa : widths) {
    if (isa > BestIsa()) continue;  // (ReduceBasicAt would run BestIsa's again)
    ++ran;
    // Lengths that leave every remainder after a vector body of 64 bytes
    // and its unrolled copies.
    for (int64_t n : {0, 1, 3, 7, 8, 15, 16, 17, 63, 64, 65, 129, 1000}) {
      for (std::size_t skew : {0, 1, 8}) {
        for (OpKind op : {OpKind::kSum, OpKind::kProd, OpKind::kMin, OpKind::kMax}) {
          CheckAt<int8_t>(isa, op, BasicType::kInt8, n, skew, g);
          CheckAt<uint16_t>(isa, op, BasicType::kUint16, n, skew, g);
          CheckAt<int32_t>(isa, op, BasicType::kInt32, n, skew, g);
          CheckAt<uint64_t>(isa, op, BasicType::kUint64, n, skew, g);
          CheckAt<float>(isa, op, BasicType::kFloat, n, skew, g);
          CheckAt<double>(isa, op, BasicType::kDouble, n, skew, g);
        }
        for (OpKind op : {OpKind::kLxor, OpKind::kBand, OpKind::kBxor}) {
          CheckAt<int16_t>(isa, op, BasicType::kInt16, n, skew, g);
          CheckAt<uint32_t>(isa, op, BasicType::kUint32, n, skew, g);
          CheckAt<int64_t>(isa, op, BasicType::kInt64, n, skew, g);
        }
        if (HasFatalFailure()) return;
      }
    }
  }
  EXPECT_GE(ran, 1);
  std::printf("vector widths checked: %d (this CPU's widest: %s)\n", ran, std::string(IsaName(BestIsa())).c_str());
}

TEST(Op, OverlappingOperandsReduceElementByElementInOrder) {
  // The same buffer on both sides: each element with itself.
  std::vector<double> same = {1.5, -2, 3, 0.25, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20};
  const std::vector<double> before = same;
  ReduceBasic(OpKind::kSum, BasicType::kDouble, same.data(), same.data(), static_cast<int64_t>(same.size()));
  for (std::size_t i = 0; i < same.size(); ++i) ASSERT_EQ(same[i], 2 * before[i]) << i;
  // The incoming operand one element ahead: element i meets i + 1 before
  // i + 1 changes; one behind, it meets i - 1 after it changed (a running sum).
  std::vector<int32_t> ahead(40), behind(40);
  for (int i = 0; i < 40; ++i) ahead[static_cast<std::size_t>(i)] = behind[static_cast<std::size_t>(i)] = i + 1;
  ReduceBasic(OpKind::kSum, BasicType::kInt32, ahead.data() + 1, ahead.data(), 39);
  for (int i = 0; i < 39; ++i) ASSERT_EQ(ahead[static_cast<std::size_t>(i)], 2 * i + 3) << i;
  ReduceBasic(OpKind::kSum, BasicType::kInt32, behind.data(), behind.data() + 1, 39);
  for (int i = 0; i < 40; ++i) ASSERT_EQ(behind[static_cast<std::size_t>(i)], (i + 1) * (i + 2) / 2) << i;
}

}  // namespace
}  // namespace cartage::datatype
