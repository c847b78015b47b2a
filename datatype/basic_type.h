// The basic element types a segment can hold. Derived (non-contiguous)
// datatypes build on these (datatype/datatype.h); a segment of a basic type is
// contiguous, count elements of SizeOf(type) bytes.
//
// The pair types of MAXLOC/MINLOC (seed 002's MOP) are basic here: one
// element is a value followed by an int index, laid out as the C struct
// { T value; int index; }. SizeOf is the bytes from the value to the end of
// the index (packed on the wire, including short_int's inner 2-byte gap);
// ExtentOf is sizeof of the struct (what an array of them advances by).
#ifndef CARTAGE_DATATYPE_BASIC_TYPE_H_
#define CARTAGE_DATATYPE_BASIC_TYPE_H_

#include <complex>
#include <cstddef>
#include <cstdint>
#include "absl/strings/string_view.h"

namespace cartage::datatype {

// An element type.
enum class BasicType : uint8_t {
  kByte, kInt8, kUint8, kInt16, kUint16, kInt32, kUint32, kInt64, kUint64,
  kFloat, kDouble, kLongDouble,
  kBool,
  kComplexFloat, kComplexDouble, kComplexLongDouble,
  // MAXLOC/MINLOC pairs: { value; int index; }
  kFloatInt, kDoubleInt, kLongInt, kTwoInt, kShortInt, kLongDoubleInt,
  kCount
};

// The C layout of a pair type.
template <class T>
struct ValueIndex {
  T value;
  int index;
};

// What kind of element: decides which reductions are defined on it.
enum class TypeClass : uint8_t { kByte, kInteger, kFloating, kLogical, kComplex, kPair };

namespace internal {
struct BasicInfo {
  uint8_t size;    // packed bytes of one element
  uint8_t extent;  // bytes one element advances by in memory
  TypeClass cls;
};
constexpr BasicInfo kBasicInfo[] = {
    {1, 1, TypeClass::kByte},
    {1, 1, TypeClass::kInteger}, {1, 1, TypeClass::kInteger},
    {2, 2, TypeClass::kInteger}, {2, 2, TypeClass::kInteger},
    {4, 4, TypeClass::kInteger}, {4, 4, TypeClass::kInteger},
    {8, 8, TypeClass::kInteger}, {8, 8, TypeClass::kInteger},
    {sizeof(float), sizeof(float), TypeClass::kFloating},
    {sizeof(double), sizeof(double), TypeClass::kFloating},
    {sizeof(long double), sizeof(long double), TypeClass::kFloating},
    {sizeof(bool), sizeof(bool), TypeClass::kLogical},
    {sizeof(std::complex<float>), sizeof(std::complex<float>), TypeClass::kComplex},
    {sizeof(std::complex<double>), sizeof(std::complex<double>), TypeClass::kComplex},
    {sizeof(std::complex<long double>), sizeof(std::complex<long double>), TypeClass::kComplex},
    {offsetof(ValueIndex<float>, index) + sizeof(int), sizeof(ValueIndex<float>), TypeClass::kPair},
    {offsetof(ValueIndex<double>, index) + sizeof(int), sizeof(ValueIndex<double>), TypeClass::kPair},
    {offsetof(ValueIndex<long>, index) + sizeof(int), sizeof(ValueIndex<long>), TypeClass::kPair},
    {offsetof(ValueIndex<int>, index) + sizeof(int), sizeof(ValueIndex<int>), TypeClass::kPair},
    {offsetof(ValueIndex<short>, index) + sizeof(int), sizeof(ValueIndex<short>), TypeClass::kPair},
    {offsetof(ValueIndex<long double>, index) + sizeof(int), sizeof(ValueIndex<long double>),
     TypeClass::kPair},
};
static_assert(std::size(kBasicInfo) == static_cast<std::size_t>(BasicType::kCount));
}  // namespace internal

// Packed bytes per element.
constexpr std::size_t SizeOf(BasicType t) {
  return t < BasicType::kCount ? internal::kBasicInfo[static_cast<std::size_t>(t)].size : 0;
}
// Bytes an array of them advances by per element (differs from SizeOf only
// for pair types with trailing padding).
constexpr std::size_t ExtentOf(BasicType t) {
  return t < BasicType::kCount ? internal::kBasicInfo[static_cast<std::size_t>(t)].extent : 0;
}
constexpr TypeClass ClassOf(BasicType t) {
  return t < BasicType::kCount ? internal::kBasicInfo[static_cast<std::size_t>(t)].cls : TypeClass::kByte;
}

// "byte", "int32", "double", "double_int", ...
absl::string_view TypeName(BasicType t);

}  // namespace cartage::datatype

#endif  // CARTAGE_DATATYPE_BASIC_TYPE_H_
