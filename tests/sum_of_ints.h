// A collective call the schedule and collective tests build often: an
// allreduce of int32s, summed, by a named algorithm.
#ifndef CARTAGE_TESTS_SUM_OF_INTS_H_
#define CARTAGE_TESTS_SUM_OF_INTS_H_

#include <cstdint>

#include "cartage/collectives.h"

namespace cartage::test {

inline const Datatype kI32 = Datatype::Basic(BasicType::kInt32);

inline CollectiveCall SumOfInts(int64_t count, const char* algorithm) {
  CollectiveCall call;
  call.kind = Collective::kAllreduce;
  call.count = count;
  call.type = kI32;
  call.op = Op(OpKind::kSum);
  call.algorithm = algorithm;
  return call;
}

}  // namespace cartage::test

#endif  // CARTAGE_TESTS_SUM_OF_INTS_H_
