// The MPI binding's "external32" representation (MPI_Pack_external): each
// basic element big-endian at the size MPI fixes for it, whatever this
// machine's is. The type is packed natively first, then each element of
// the packed stream converted in turn (and the reverse to unpack).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "datatype/segment_walk.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

using datatype::BasicType;

// The external32 size of a C `long` (and of wchar_t): MPI fixes 4 (and 2),
// where this machine's are 8 (and 4).
constexpr int64_t kExternalLong = 4;
constexpr int64_t kExternalWchar = 2;

// The external size of one native element of `basic` whose integers are
// `native` bytes wide but `external` bytes in external32 (a predefined
// MPI_LONG, say); 0 where they agree.
struct Width {
  int64_t native = 0;
  int64_t external = 0;
};

// Big-endian copies of an integer or float of `n` native bytes as `m`
// external bytes: truncated, or sign- (or zero-) extended.
void ToBig(const std::byte* in, int64_t n, std::byte* out, int64_t m, bool is_signed) {
  for (int64_t k = 0; k < m; ++k) {
    const int64_t from = m - 1 - k;  // the k-th most significant of m bytes
    std::byte b{0};
    if (from < n) {
      b = in[from];
    } else if (is_signed && (std::to_integer<uint8_t>(in[n - 1]) & 0x80) != 0) {
      b = std::byte{0xff};
    }
    out[k] = b;
  }
}

void FromBig(const std::byte* in, int64_t m, std::byte* out, int64_t n, bool is_signed) {
  for (int64_t k = 0; k < n; ++k) {
    std::byte b{0};
    if (k < m) {
      b = in[m - 1 - k];
    } else if (is_signed && (std::to_integer<uint8_t>(in[0]) & 0x80) != 0) {
      b = std::byte{0xff};
    }
    out[k] = b;
  }
}

// x87's 80-bit long double as IEEE quad precision, both with a 15-bit
// exponent of the same bias: the fraction moves up 49 bits and the
// explicit integer bit goes.
void LongDoubleToQuad(const std::byte* in, std::byte* out) {
  uint64_t mantissa = 0;
  uint16_t sign_exponent = 0;
  std::memcpy(&mantissa, in, 8);
  std::memcpy(&sign_exponent, in + 8, 2);
  const uint64_t fraction = mantissa & 0x7fffffffffffffffu;  // 63 bits, shifted up 49 of 128
  const uint64_t hi = (uint64_t{sign_exponent} << 48) | (fraction >> 15);
  const uint64_t lo = (fraction & 0x7fff) << 49;
  for (int k = 0; k < 8; ++k) {
    out[k] = static_cast<std::byte>(static_cast<uint8_t>(hi >> (8 * (7 - k))));
    out[8 + k] = static_cast<std::byte>(static_cast<uint8_t>(lo >> (8 * (7 - k))));
  }
}

void QuadToLongDouble(const std::byte* in, std::byte* out) {
  uint64_t hi = 0, lo = 0;
  for (int k = 0; k < 8; ++k) {
    hi = (hi << 8) | std::to_integer<uint8_t>(in[k]);
    lo = (lo << 8) | std::to_integer<uint8_t>(in[8 + k]);
  }
  const auto sign_exponent = static_cast<uint16_t>(hi >> 48);
  uint64_t mantissa = ((hi & 0xffffffffffffu) << 15) | (lo >> 49);
  if ((sign_exponent & 0x7fff) != 0) mantissa |= uint64_t{1} << 63;  // normal, infinite or NaN
  std::memset(out, 0, sizeof(long double));
  std::memcpy(out, &mantissa, 8);
  std::memcpy(out + 8, &sign_exponent, 2);
}

// One scalar of a basic type: its native and external bytes, how it converts.
enum class Kind { kUnsigned, kSigned, kFloat, kQuad };
struct Scalar {
  int64_t native;
  int64_t external;
  Kind kind;
};

// The scalars one element of `basic` is made of, in order, with the
// padding a pair has in memory before its index (skipped, not sent).
std::vector<Scalar> ScalarsOf(BasicType basic, Width w) {
  auto integer = [&](int64_t n, bool is_signed) {
    const Kind k = is_signed ? Kind::kSigned : Kind::kUnsigned;
    return Scalar{n, w.native == n && w.external != 0 ? w.external : n, k};
  };
  const Scalar ld{static_cast<int64_t>(sizeof(long double)), 16, Kind::kQuad};
  const Scalar index{4, 4, Kind::kSigned};
  auto pair = [&](Scalar value) {
    const int64_t pad = static_cast<int64_t>(datatype::SizeOf(basic)) - value.native - 4;
    std::vector<Scalar> v = {value};
    if (pad > 0) v.push_back(Scalar{pad, 0, Kind::kUnsigned});
    v.push_back(index);
    return v;
  };
  switch (basic) {
    case BasicType::kByte: case BasicType::kUint8: case BasicType::kBool: return {integer(1, false)};
    case BasicType::kInt8: return {integer(1, true)};
    case BasicType::kInt16: return {integer(2, true)};
    case BasicType::kUint16: return {integer(2, false)};
    case BasicType::kInt32: return {integer(4, true)};
    case BasicType::kUint32: return {integer(4, false)};
    case BasicType::kInt64: return {integer(8, true)};
    case BasicType::kUint64: return {integer(8, false)};
    case BasicType::kFloat: return {Scalar{4, 4, Kind::kFloat}};
    case BasicType::kDouble: return {Scalar{8, 8, Kind::kFloat}};
    case BasicType::kLongDouble: return {ld};
    case BasicType::kComplexFloat: return {Scalar{4, 4, Kind::kFloat}, Scalar{4, 4, Kind::kFloat}};
    case BasicType::kComplexDouble: return {Scalar{8, 8, Kind::kFloat}, Scalar{8, 8, Kind::kFloat}};
    case BasicType::kComplexLongDouble: return {ld, ld};
    case BasicType::kFloatInt: return pair(Scalar{4, 4, Kind::kFloat});
    case BasicType::kDoubleInt: return pair(Scalar{8, 8, Kind::kFloat});
    case BasicType::kLongInt: return pair(Scalar{8, kExternalLong, Kind::kSigned});
    case BasicType::kTwoInt: return pair(index);
    case BasicType::kShortInt: return pair(Scalar{2, 2, Kind::kSigned});
    case BasicType::kLongDoubleInt: return pair(ld);
    case BasicType::kCount: break;
  }
  return {};
}

// Calls fn(basic) for each basic element of `count` of `type`, in packed order.
template <class Fn>
void EachBasic(const std::vector<datatype::TypeNode>& nodes, Fn& fn) {
  for (const datatype::TypeNode& node : nodes) {
    for (int64_t r = 0; r < node.count; ++r) {
      if (!node.leaf()) {
        EachBasic(node.body, fn);
        continue;
      }
      const auto size = static_cast<int64_t>(datatype::SizeOf(node.basic));
      for (int64_t b = 0; size > 0 && b < node.bytes / size; ++b) fn(node.basic);
    }
  }
}

// What a call converts: the type, and how its integers differ from native.
struct Conversion {
  const Datatype* type = nullptr;
  Width width;
};

// Checks the representation's name and the type; a predefined MPI_LONG,
// MPI_UNSIGNED_LONG or MPI_WCHAR has external widths of its own. A made
// type holding one of them is refused: the binding's types keep only the
// layout (a long is an 8-byte integer there), not which C type it was.
int Convert(const char* datarep, MPI_Datatype datatype, const char* fn, Conversion* c) {
  if (std::string(datarep) != "external32") {
    return Error(MPI_COMM_WORLD, fn, MPI_ERR_ARG,
                 absl::StrFormat("data representation \"%s\": only \"external32\" is known", datarep));
  }
  int rc = MPI_SUCCESS;
  c->type = TypeArg(datatype, fn, &rc);
  if (c->type == nullptr) return rc;
  if (const TypeSlot* made = TypeSlotOf(datatype); made != nullptr) {
    if (!made->committed) {
      return Error(MPI_COMM_WORLD, fn, MPI_ERR_TYPE,
                   absl::StrFormat("datatype 0x%08x is not committed", static_cast<unsigned>(datatype)));
    }
    if (made->native_long) {
      return Error(MPI_COMM_WORLD, fn, MPI_ERR_TYPE,
                   absl::StrFormat("datatype 0x%08x holds MPI_LONG, MPI_UNSIGNED_LONG or MPI_WCHAR, whose external32 "
                                   "width differs from this machine's; cartage packs those only as predefined types",
                                   static_cast<unsigned>(datatype)));
    }
  }
  if (datatype == MPI_LONG || datatype == MPI_UNSIGNED_LONG) c->width = {8, kExternalLong};
  if (datatype == MPI_WCHAR) c->width = {4, kExternalWchar};
  return MPI_SUCCESS;
}

int64_t ExternalSize(const Conversion& c, int64_t count) {
  int64_t per = 0;
  auto add = [&](BasicType b) {
    for (const Scalar& s : ScalarsOf(b, c.width)) per += s.external;
  };
  EachBasic(c.type->nodes(), add);
  return per * count;
}

}  // namespace

bool NativeLong(MPI_Datatype type) {
  if (type == MPI_LONG || type == MPI_UNSIGNED_LONG || type == MPI_WCHAR || type == MPI_LONG_INT) return true;
  const TypeSlot* made = TypeSlotOf(type);
  return made != nullptr && made->native_long;
}

extern "C" {

int PMPI_Pack_external_size(const char datarep[], int incount, MPI_Datatype datatype, MPI_Aint* size) {
  Conversion c;
  if (int rc = Convert(datarep, datatype, "MPI_Pack_external_size", &c); rc != MPI_SUCCESS) return rc;
  *size = ExternalSize(c, incount);
  return MPI_SUCCESS;
}

int PMPI_Pack_external(const char datarep[], const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf,
                       MPI_Aint outsize, MPI_Aint* position) {
  const char* fn = "MPI_Pack_external";
  Conversion c;
  if (int rc = Convert(datarep, datatype, fn, &c); rc != MPI_SUCCESS) return rc;
  if (incount < 0) return Error(MPI_COMM_WORLD, fn, MPI_ERR_COUNT, absl::StrFormat("negative count %d", incount));
  const int64_t external = ExternalSize(c, incount);
  if (*position < 0 || external > outsize - *position) {
    return Error(MPI_COMM_WORLD, fn, MPI_ERR_TRUNCATE,
                 absl::StrFormat("%d bytes at position %d of a buffer of %d", external, *position, outsize));
  }
  std::vector<std::byte> native(static_cast<std::size_t>(incount * c.type->size()));
  datatype::Pack(inbuf, incount, *c.type, 0, static_cast<int64_t>(native.size()), native.data());
  const std::byte* in = native.data();
  std::byte* out = static_cast<std::byte*>(outbuf) + *position;
  auto convert = [&](BasicType b) {
    for (const Scalar& s : ScalarsOf(b, c.width)) {
      if (s.kind == Kind::kQuad) {
        LongDoubleToQuad(in, out);
      } else if (s.external > 0) {
        ToBig(in, s.native, out, s.external, s.kind == Kind::kSigned);
      }
      in += s.native;
      out += s.external;
    }
  };
  for (int k = 0; k < incount; ++k) EachBasic(c.type->nodes(), convert);
  *position += external;
  return MPI_SUCCESS;
}

int PMPI_Unpack_external(const char datarep[], const void* inbuf, MPI_Aint insize, MPI_Aint* position, void* outbuf,
                         int outcount, MPI_Datatype datatype) {
  const char* fn = "MPI_Unpack_external";
  Conversion c;
  if (int rc = Convert(datarep, datatype, fn, &c); rc != MPI_SUCCESS) return rc;
  if (outcount < 0) return Error(MPI_COMM_WORLD, fn, MPI_ERR_COUNT, absl::StrFormat("negative count %d", outcount));
  const int64_t external = ExternalSize(c, outcount);
  if (*position < 0 || external > insize - *position) {
    return Error(MPI_COMM_WORLD, fn, MPI_ERR_TRUNCATE,
                 absl::StrFormat("%d bytes at position %d of a buffer of %d", external, *position, insize));
  }
  std::vector<std::byte> native(static_cast<std::size_t>(outcount * c.type->size()));
  const std::byte* in = static_cast<const std::byte*>(inbuf) + *position;
  std::byte* out = native.data();
  auto convert = [&](BasicType b) {
    for (const Scalar& s : ScalarsOf(b, c.width)) {
      if (s.kind == Kind::kQuad) {
        QuadToLongDouble(in, out);
      } else {
        FromBig(in, s.external, out, s.native, s.kind == Kind::kSigned);
      }
      in += s.external;
      out += s.native;
    }
  };
  for (int k = 0; k < outcount; ++k) EachBasic(c.type->nodes(), convert);
  datatype::Unpack(native.data(), outcount, *c.type, 0, static_cast<int64_t>(native.size()), outbuf);
  *position += external;
  return MPI_SUCCESS;
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Pack_external_size);
CARTAGE_MPI_ALIAS(MPI_Pack_external);
CARTAGE_MPI_ALIAS(MPI_Unpack_external);
