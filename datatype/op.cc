#include "datatype/op.h"

#include <algorithm>
#include <complex>
#include <cstddef>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "datatype/segment_walk.h"

namespace cartage::datatype {
namespace {

template <class T>
T Load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
void Store(std::byte* p, const T& v) {
  std::memcpy(p, &v, sizeof(T));
}

// inout[i] = f(in[i], inout[i]) over n packed elements of T (any alignment).
template <class T, class F>
void Apply(const std::byte* in, std::byte* io, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) {
    const std::size_t at = static_cast<std::size_t>(i) * sizeof(T);
    Store<T>(io + at, f(Load<T>(in + at), Load<T>(io + at)));
  }
}

// Integers wrap on overflow (computed in uint64_t, converted back modulo 2^n).
template <class T>
void Integer(OpKind op, const std::byte* in, std::byte* io, int64_t n) {
  auto wide = [](T v) { return static_cast<uint64_t>(v); };
  switch (op) {
    case OpKind::kSum: Apply<T>(in, io, n, [&](T a, T b) { return static_cast<T>(wide(a) + wide(b)); }); break;
    case OpKind::kProd: Apply<T>(in, io, n, [&](T a, T b) { return static_cast<T>(wide(a) * wide(b)); }); break;
    case OpKind::kMin: Apply<T>(in, io, n, [](T a, T b) { return std::min(a, b); }); break;
    case OpKind::kMax: Apply<T>(in, io, n, [](T a, T b) { return std::max(a, b); }); break;
    case OpKind::kLand: Apply<T>(in, io, n, [](T a, T b) { return static_cast<T>(a != 0 && b != 0); }); break;
    case OpKind::kLor: Apply<T>(in, io, n, [](T a, T b) { return static_cast<T>(a != 0 || b != 0); }); break;
    case OpKind::kLxor: Apply<T>(in, io, n, [](T a, T b) { return static_cast<T>((a != 0) != (b != 0)); }); break;
    case OpKind::kBand: Apply<T>(in, io, n, [](T a, T b) { return static_cast<T>(a & b); }); break;
    case OpKind::kBor: Apply<T>(in, io, n, [](T a, T b) { return static_cast<T>(a | b); }); break;
    case OpKind::kBxor: Apply<T>(in, io, n, [](T a, T b) { return static_cast<T>(a ^ b); }); break;
    default: break;
  }
}

template <class T>
void Floating(OpKind op, const std::byte* in, std::byte* io, int64_t n) {
  switch (op) {
    case OpKind::kSum: Apply<T>(in, io, n, [](T a, T b) { return a + b; }); break;
    case OpKind::kProd: Apply<T>(in, io, n, [](T a, T b) { return a * b; }); break;
    case OpKind::kMin: Apply<T>(in, io, n, [](T a, T b) { return b < a ? b : a; }); break;
    case OpKind::kMax: Apply<T>(in, io, n, [](T a, T b) { return a < b ? b : a; }); break;
    default: break;
  }
}

template <class T>
void Complex(OpKind op, const std::byte* in, std::byte* io, int64_t n) {
  using C = std::complex<T>;
  if (op == OpKind::kSum) Apply<C>(in, io, n, [](C a, C b) { return a + b; });
  if (op == OpKind::kProd) Apply<C>(in, io, n, [](C a, C b) { return a * b; });
}

void Logical(OpKind op, const std::byte* in, std::byte* io, int64_t n) {
  switch (op) {
    case OpKind::kLand: Apply<bool>(in, io, n, [](bool a, bool b) { return a && b; }); break;
    case OpKind::kLor: Apply<bool>(in, io, n, [](bool a, bool b) { return a || b; }); break;
    case OpKind::kLxor: Apply<bool>(in, io, n, [](bool a, bool b) { return a != b; }); break;
    default: break;
  }
}

void Bytes(OpKind op, const std::byte* in, std::byte* io, int64_t n) {
  switch (op) {
    case OpKind::kBand: Apply<std::byte>(in, io, n, [](std::byte a, std::byte b) { return a & b; }); break;
    case OpKind::kBor: Apply<std::byte>(in, io, n, [](std::byte a, std::byte b) { return a | b; }); break;
    case OpKind::kBxor: Apply<std::byte>(in, io, n, [](std::byte a, std::byte b) { return a ^ b; }); break;
    default: break;
  }
}

// MAXLOC/MINLOC over packed { V value; int index; } records of SizeOf bytes:
// the better value wins; on a tie, the smaller index.
template <class V>
void Located(OpKind op, BasicType t, const std::byte* in, std::byte* io, int64_t n) {
  constexpr std::size_t kIndex = offsetof(ValueIndex<V>, index);
  const std::size_t rec = SizeOf(t);
  const bool max = op == OpKind::kMaxloc;
  for (int64_t i = 0; i < n; ++i) {
    const std::byte* a = in + static_cast<std::size_t>(i) * rec;
    std::byte* b = io + static_cast<std::size_t>(i) * rec;
    const V av = Load<V>(a), bv = Load<V>(b);
    const int ai = Load<int>(a + kIndex), bi = Load<int>(b + kIndex);
    if (max ? bv < av : av < bv) {
      Store<V>(b, av);
      Store<int>(b + kIndex, ai);
    } else if (!(av < bv) && !(bv < av)) {
      Store<int>(b + kIndex, std::min(ai, bi));
    }
  }
}

}  // namespace

absl::string_view OpName(OpKind op) {
  static constexpr absl::string_view kNames[] = {"sum",  "prod", "min",    "max",    "land", "lor", "lxor",
                                                 "band", "bor",  "bxor", "maxloc", "minloc", "user"};
  static_assert(std::size(kNames) == static_cast<std::size_t>(OpKind::kCount));
  return op < OpKind::kCount ? kNames[static_cast<std::size_t>(op)] : "?";
}

bool Defined(OpKind op, BasicType type) {
  if (type >= BasicType::kCount) return false;
  switch (ClassOf(type)) {
    case TypeClass::kByte: return op == OpKind::kBand || op == OpKind::kBor || op == OpKind::kBxor;
    case TypeClass::kInteger: return op < OpKind::kMaxloc;
    case TypeClass::kFloating: return op <= OpKind::kMax;
    case TypeClass::kLogical: return op == OpKind::kLand || op == OpKind::kLor || op == OpKind::kLxor;
    case TypeClass::kComplex: return op == OpKind::kSum || op == OpKind::kProd;
    case TypeClass::kPair: return op == OpKind::kMaxloc || op == OpKind::kMinloc;
  }
  return false;
}

void ReduceBasic(OpKind op, BasicType type, const void* in_v, void* inout_v, int64_t n) {
  const auto* in = static_cast<const std::byte*>(in_v);
  auto* io = static_cast<std::byte*>(inout_v);
  switch (type) {
    case BasicType::kByte: Bytes(op, in, io, n); break;
    case BasicType::kInt8: Integer<int8_t>(op, in, io, n); break;
    case BasicType::kUint8: Integer<uint8_t>(op, in, io, n); break;
    case BasicType::kInt16: Integer<int16_t>(op, in, io, n); break;
    case BasicType::kUint16: Integer<uint16_t>(op, in, io, n); break;
    case BasicType::kInt32: Integer<int32_t>(op, in, io, n); break;
    case BasicType::kUint32: Integer<uint32_t>(op, in, io, n); break;
    case BasicType::kInt64: Integer<int64_t>(op, in, io, n); break;
    case BasicType::kUint64: Integer<uint64_t>(op, in, io, n); break;
    case BasicType::kFloat: Floating<float>(op, in, io, n); break;
    case BasicType::kDouble: Floating<double>(op, in, io, n); break;
    case BasicType::kLongDouble: Floating<long double>(op, in, io, n); break;
    case BasicType::kBool: Logical(op, in, io, n); break;
    case BasicType::kComplexFloat: Complex<float>(op, in, io, n); break;
    case BasicType::kComplexDouble: Complex<double>(op, in, io, n); break;
    case BasicType::kComplexLongDouble: Complex<long double>(op, in, io, n); break;
    case BasicType::kFloatInt: Located<float>(op, type, in, io, n); break;
    case BasicType::kDoubleInt: Located<double>(op, type, in, io, n); break;
    case BasicType::kLongInt: Located<long>(op, type, in, io, n); break;
    case BasicType::kTwoInt: Located<int>(op, type, in, io, n); break;
    case BasicType::kShortInt: Located<short>(op, type, in, io, n); break;
    case BasicType::kLongDoubleInt: Located<long double>(op, type, in, io, n); break;
    case BasicType::kCount: break;
  }
}

absl::Status Op::Check(const Datatype& type) const {
  if (kind_ == OpKind::kUser) {
    if (fn_ == nullptr) return absl::InvalidArgumentError("user reduction without a function");
    return absl::OkStatus();
  }
  if (kind_ >= OpKind::kCount) return absl::InvalidArgumentError("unknown reduction operator");
  if (type.size() == 0) return absl::OkStatus();  // nothing to reduce
  BasicType basic;
  if (!type.homogeneous(&basic)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s is not defined on %s: its elements are not all of one basic type (use a user "
                        "reduction)",
                        OpName(kind_), type.name()));
  }
  if (!Defined(kind_, basic)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s is not defined on %s", OpName(kind_),
                                                      type.name() == TypeName(basic)
                                                          ? std::string(type.name())
                                                          : absl::StrFormat("%s (of %s)", type.name(),
                                                                            TypeName(basic))));
  }
  return absl::OkStatus();
}

absl::Status ReduceUnpack(const Op& op, const void* in, int64_t count, const Datatype& type, int64_t first,
                          int64_t last, void* buf) {
  if (absl::Status s = op.Check(type); !s.ok()) return s;
  last = std::min(last, count * type.size());
  if (first >= last) return absl::OkStatus();
  BasicType basic = BasicType::kByte;
  const int64_t unit = op.kind() == OpKind::kUser || !type.homogeneous(&basic)
                           ? type.size()
                           : static_cast<int64_t>(SizeOf(basic));
  if (first % unit != 0 || last % unit != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s reduction on %s: bytes [%d, %d) cut an element of %d bytes", OpName(op.kind()), type.name(), first,
        last, unit));
  }
  const auto* from = static_cast<const std::byte*>(in);
  if (op.kind() != OpKind::kUser) {
    WalkSegment(buf, count, type, first, last, [&](std::byte* at, int64_t n) {
      ReduceBasic(op.kind(), basic, from, at, n / unit);
      from += n;
    });
    return absl::OkStatus();
  }
  // A user function sees whole elements in the type's layout: unpack the
  // incoming ones into scratch memory laid out alike, then call it once.
  const int64_t e0 = first / unit, n = last / unit - e0;
  auto* target = static_cast<std::byte*>(buf) + e0 * type.extent();
  if (type.contiguous()) {
    op.fn()(from, target, n, type, op.context());
    return absl::OkStatus();
  }
  const int64_t reach = (n - 1) * type.extent();
  const int64_t lo = type.true_lb() + std::min<int64_t>(0, reach);
  const int64_t hi = type.true_lb() + type.true_extent() + std::max<int64_t>(0, reach);
  std::vector<std::byte> scratch(static_cast<std::size_t>(hi - lo));
  std::byte* base = scratch.data() - lo;
  Unpack(from, n, type, 0, n * type.size(), base);
  op.fn()(base, target, n, type, op.context());
  return absl::OkStatus();
}

}  // namespace cartage::datatype
