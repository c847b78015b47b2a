#include "datatype/basic_type.h"

namespace cartage::datatype {

absl::string_view TypeName(BasicType t) {
  static constexpr absl::string_view kNames[] = {
      "byte",          "int8",           "uint8",      "int16",   "uint16",    "int32",
      "uint32",        "int64",          "uint64",     "float",   "double",    "long_double",
      "bool",          "complex_float",  "complex_double",        "complex_long_double",
      "float_int",     "double_int",     "long_int",   "2int",    "short_int", "long_double_int"};
  static_assert(std::size(kNames) == static_cast<std::size_t>(BasicType::kCount));
  return t < BasicType::kCount ? kNames[static_cast<std::size_t>(t)] : "?";
}

}  // namespace cartage::datatype
