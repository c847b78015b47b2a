#include "datatype/op.h"

#include <algorithm>
#include <complex>
#include <cstddef>
#include <cstring>
#include <type_traits>
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

// Apply over operands that do not overlap: the form the compiler vectorises.
template <class T, class F>
[[gnu::always_inline]] inline void ApplyApart(const std::byte* __restrict in, std::byte* __restrict io, int64_t n,
                                              F f) {
  for (int64_t i = 0; i < n; ++i) {
    const std::size_t at = static_cast<std::size_t>(i) * sizeof(T);
    Store<T>(io + at, f(Load<T>(in + at), Load<T>(io + at)));
  }
}

template <bool kApart, class T, class F>
[[gnu::always_inline]] inline void Each(const std::byte* in, std::byte* io, int64_t n, F f) {
  if constexpr (kApart) {
    ApplyApart<T>(in, io, n, f);
  } else {
    Apply<T>(in, io, n, f);
  }
}

// Integers wrap on overflow: computed in the unsigned type of their width
// (at least unsigned int, so a product never overflows a promoted int).
template <bool kApart, class T>
[[gnu::always_inline]] inline void Integer(OpKind op, const std::byte* in, std::byte* io, int64_t n) {
  using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
  auto u = [](T v) { return static_cast<U>(v); };
  switch (op) {
    case OpKind::kSum: Each<kApart, T>(in, io, n, [&](T a, T b) { return static_cast<T>(u(a) + u(b)); }); break;
    case OpKind::kProd: Each<kApart, T>(in, io, n, [&](T a, T b) { return static_cast<T>(u(a) * u(b)); }); break;
    case OpKind::kMin: Each<kApart, T>(in, io, n, [](T a, T b) { return b < a ? b : a; }); break;
    case OpKind::kMax: Each<kApart, T>(in, io, n, [](T a, T b) { return a < b ? b : a; }); break;
    case OpKind::kLand:
      Each<kApart, T>(in, io, n, [](T a, T b) { return static_cast<T>(a != 0 && b != 0); });
      break;
    case OpKind::kLor:
      Each<kApart, T>(in, io, n, [](T a, T b) { return static_cast<T>(a != 0 || b != 0); });
      break;
    case OpKind::kLxor:
      Each<kApart, T>(in, io, n, [](T a, T b) { return static_cast<T>((a != 0) != (b != 0)); });
      break;
    case OpKind::kBand: Each<kApart, T>(in, io, n, [](T a, T b) { return static_cast<T>(a & b); }); break;
    case OpKind::kBor: Each<kApart, T>(in, io, n, [](T a, T b) { return static_cast<T>(a | b); }); break;
    case OpKind::kBxor: Each<kApart, T>(in, io, n, [](T a, T b) { return static_cast<T>(a ^ b); }); break;
    default: break;
  }
}

template <bool kApart, class T>
[[gnu::always_inline]] inline void Floating(OpKind op, const std::byte* in, std::byte* io, int64_t n) {
  switch (op) {
    case OpKind::kSum: Each<kApart, T>(in, io, n, [](T a, T b) { return a + b; }); break;
    case OpKind::kProd: Each<kApart, T>(in, io, n, [](T a, T b) { return a * b; }); break;
    case OpKind::kMin: Each<kApart, T>(in, io, n, [](T a, T b) { return b < a ? b : a; }); break;
    case OpKind::kMax: Each<kApart, T>(in, io, n, [](T a, T b) { return a < b ? b : a; }); break;
    default: break;
  }
}

// The integer and real types' loops, on operands that do not overlap: false
// for any other type. Built once for each instruction set below.
[[gnu::always_inline]] inline bool Arithmetic(OpKind op, BasicType type, const std::byte* in, std::byte* io,
                                              int64_t n) {
  switch (type) {
    case BasicType::kInt8: Integer<true, int8_t>(op, in, io, n); return true;
    case BasicType::kUint8: Integer<true, uint8_t>(op, in, io, n); return true;
    case BasicType::kInt16: Integer<true, int16_t>(op, in, io, n); return true;
    case BasicType::kUint16: Integer<true, uint16_t>(op, in, io, n); return true;
    case BasicType::kInt32: Integer<true, int32_t>(op, in, io, n); return true;
    case BasicType::kUint32: Integer<true, uint32_t>(op, in, io, n); return true;
    case BasicType::kInt64: Integer<true, int64_t>(op, in, io, n); return true;
    case BasicType::kUint64: Integer<true, uint64_t>(op, in, io, n); return true;
    case BasicType::kFloat: Floating<true, float>(op, in, io, n); return true;
    case BasicType::kDouble: Floating<true, double>(op, in, io, n); return true;
    default: return false;
  }
}

// The loops at each vector width: the CPU runs the widest it has (as Open
// MPI's op/avx component does); a reduction of doubles at AVX-512 does
// eight elements an instruction where the baseline x86-64 does two.
bool ArithmeticBaseline(OpKind op, BasicType type, const std::byte* in, std::byte* io, int64_t n) {
  return Arithmetic(op, type, in, io, n);
}
#if defined(__x86_64__)
[[gnu::target("avx2")]] bool ArithmeticAvx2(OpKind op, BasicType type, const std::byte* in, std::byte* io,
                                            int64_t n) {
  return Arithmetic(op, type, in, io, n);
}
[[gnu::target("avx512f,avx512bw,avx512dq,avx512vl")]] bool ArithmeticAvx512(OpKind op, BasicType type,
                                                                           const std::byte* in, std::byte* io,
                                                                           int64_t n) {
  return Arithmetic(op, type, in, io, n);
}
#endif

// Whether n elements at `in` and at `io` share no byte.
bool Apart(const void* in, const void* io, int64_t n, BasicType type) {
  const auto bytes = static_cast<uintptr_t>(n) * SizeOf(type);
  const auto a = reinterpret_cast<uintptr_t>(in), b = reinterpret_cast<uintptr_t>(io);
  return a + bytes <= b || b + bytes <= a;
}

using ArithmeticFn = bool (*)(OpKind, BasicType, const std::byte*, std::byte*, int64_t);

ArithmeticFn ArithmeticAt(VectorIsa isa) {
#if defined(__x86_64__)
  if (isa == VectorIsa::kAvx512) return ArithmeticAvx512;
  if (isa == VectorIsa::kAvx2) return ArithmeticAvx2;
#endif
  (void)isa;
  return ArithmeticBaseline;
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

VectorIsa BestIsa() {
#if defined(__x86_64__)
  static const VectorIsa best = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
      return VectorIsa::kAvx512;
    }
    return __builtin_cpu_supports("avx2") ? VectorIsa::kAvx2 : VectorIsa::kBaseline;
  }();
  return best;
#else
  return VectorIsa::kBaseline;
#endif
}

absl::string_view IsaName(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kBaseline: return "baseline";
    case VectorIsa::kAvx2: return "avx2";
    case VectorIsa::kAvx512: return "avx512";
  }
  return "?";
}

namespace {

// Element by element, in order: the types without vectorised loops, and
// operands that overlap.
void InOrder(OpKind op, BasicType type, const std::byte* in, std::byte* io, int64_t n) {
  switch (type) {
    case BasicType::kByte: Bytes(op, in, io, n); break;
    case BasicType::kInt8: Integer<false, int8_t>(op, in, io, n); break;
    case BasicType::kUint8: Integer<false, uint8_t>(op, in, io, n); break;
    case BasicType::kInt16: Integer<false, int16_t>(op, in, io, n); break;
    case BasicType::kUint16: Integer<false, uint16_t>(op, in, io, n); break;
    case BasicType::kInt32: Integer<false, int32_t>(op, in, io, n); break;
    case BasicType::kUint32: Integer<false, uint32_t>(op, in, io, n); break;
    case BasicType::kInt64: Integer<false, int64_t>(op, in, io, n); break;
    case BasicType::kUint64: Integer<false, uint64_t>(op, in, io, n); break;
    case BasicType::kFloat: Floating<false, float>(op, in, io, n); break;
    case BasicType::kDouble: Floating<false, double>(op, in, io, n); break;
    case BasicType::kLongDouble: Floating<false, long double>(op, in, io, n); break;
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

}  // namespace

void ReduceBasic(OpKind op, BasicType type, const void* in, void* inout, int64_t n) {
  const auto* from = static_cast<const std::byte*>(in);
  auto* io = static_cast<std::byte*>(inout);
  // One element (an RMA counter's fetch_and_op or accumulate): the loop
  // folds away, and what is left is two switches and the operator.
  if (n == 1 && Arithmetic(op, type, from, io, 1)) return;
  static const ArithmeticFn best = ArithmeticAt(BestIsa());
  if (!Apart(in, inout, n, type) || !best(op, type, from, io, n)) InOrder(op, type, from, io, n);
}

void ReduceBasicAt(VectorIsa isa, OpKind op, BasicType type, const void* in, void* inout, int64_t n) {
  const auto* from = static_cast<const std::byte*>(in);
  auto* io = static_cast<std::byte*>(inout);
  if (isa > BestIsa()) isa = BestIsa();
  if (!Apart(in, inout, n, type) || !ArithmeticAt(isa)(op, type, from, io, n)) InOrder(op, type, from, io, n);
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
