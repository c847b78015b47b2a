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
constexpr std::size_t SizeOf(BasicType t) {
  switch (t) {
    case BasicType::kByte:
    case BasicType::kInt8:
    case BasicType::kUint8: return 1;
    case BasicType::kInt16:
    case BasicType::kUint16: return 2;
    case BasicType::kInt32:
    case BasicType::kUint32:
    case BasicType::kFloat: return 4;
    case BasicType::kInt64:
    case BasicType::kUint64:
    case BasicType::kDouble: return 8;
    case BasicType::kCount: break;
  }
  return 0;
}

// "byte", "int32", "double", ...
absl::string_view TypeName(BasicType t);

}  // namespace cartage::car

#endif  // CARTAGE_CAR_DATATYPE_H_
