#include "car/datatype.h"

namespace cartage::car {

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
