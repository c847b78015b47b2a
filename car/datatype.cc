#include "car/datatype.h"

namespace cartage::car {

std::size_t SizeOf(BasicType t) {
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

absl::string_view TypeName(BasicType t) {
  switch (t) {
    case BasicType::kByte: return "byte";
    case BasicType::kInt8: return "int8";
    case BasicType::kUint8: return "uint8";
    case BasicType::kInt16: return "int16";
    case BasicType::kUint16: return "uint16";
    case BasicType::kInt32: return "int32";
    case BasicType::kUint32: return "uint32";
    case BasicType::kInt64: return "int64";
    case BasicType::kUint64: return "uint64";
    case BasicType::kFloat: return "float";
    case BasicType::kDouble: return "double";
    case BasicType::kCount: break;
  }
  return "?";
}

}  // namespace cartage::car
