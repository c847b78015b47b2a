// The basic element types a segment can hold. Derived (non-contiguous)
// datatypes build on these (the datatypes issue); a segment of a basic type is
// contiguous, count elements of SizeOf(type) bytes.
#ifndef CARTAGE_CAR_DATATYPE_H_
#define CARTAGE_CAR_DATATYPE_H_

#include <cstddef>
#include <cstdint>
#include "absl/strings/string_view.h"

namespace cartage::car {

// An element type of a contiguous segment.
enum class BasicType : uint8_t {
  kByte, kInt8, kUint8, kInt16, kUint16, kInt32, kUint32, kInt64, kUint64,
  kFloat, kDouble, kCount
};

// Bytes per element.
std::size_t SizeOf(BasicType t);

// "byte", "int32", "double", ...
absl::string_view TypeName(BasicType t);

}  // namespace cartage::car

#endif  // CARTAGE_CAR_DATATYPE_H_
