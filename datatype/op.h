// Reduction operators (seed 002's MOP): the predefined ones of MPI on every
// basic type they are defined on, and user-defined ones, applied while
// unpacking a packed stream into a segment (ReduceUnpack, the reduction
// counterpart of Unpack in datatype/segment_walk.h).
//
//   const Op sum(OpKind::kSum);
//   CARTAGE_RETURN_IF_ERROR(sum.Check(type));        // defined on every element?
//   CARTAGE_RETURN_IF_ERROR(ReduceUnpack(sum, incoming, n, type, 0, n * type.size(), accum));
//
// The incoming operand is the left one: buf[i] = in[i] op buf[i] (MPI's
// inoutvec = invec op inoutvec), which matters for non-commutative user ops.
#ifndef CARTAGE_DATATYPE_OP_H_
#define CARTAGE_DATATYPE_OP_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "datatype/basic_type.h"
#include "datatype/datatype.h"

namespace cartage::datatype {

enum class OpKind : uint8_t {
  kSum, kProd, kMin, kMax,
  kLand, kLor, kLxor,          // logical: integers and bool
  kBand, kBor, kBxor,          // bitwise: integers and byte
  kMaxloc, kMinloc,            // pair types; ties keep the smaller index
  kUser,
  kCount
};

// "sum", "maxloc", "user", ...
absl::string_view OpName(OpKind op);

// A user reduction: inout[i] = in[i] op inout[i] for `count` elements of
// `type`, both buffers in the type's memory layout (MPI_User_function).
using UserOpFn = void (*)(const void* in, void* inout, int64_t count, const Datatype& type, void* context);

// A reduction operator. Cheap to copy.
class Op {
 public:
  constexpr explicit Op(OpKind kind) : kind_(kind) {}
  // A user-defined operator; `commutative` lets schedules reorder operands.
  static Op User(UserOpFn fn, bool commutative, void* context = nullptr) {
    Op op(OpKind::kUser);
    op.fn_ = fn;
    op.commutative_ = commutative;
    op.context_ = context;
    return op;
  }
  OpKind kind() const { return kind_; }
  bool commutative() const { return commutative_; }
  UserOpFn fn() const { return fn_; }
  void* context() const { return context_; }

  // OK if the operator is defined on every element of `type`; otherwise
  // kInvalidArgument naming the operator and the type ("max is not defined
  // on complex_double"). A user op takes any type of non-zero size.
  absl::Status Check(const Datatype& type) const;

 private:
  OpKind kind_;
  bool commutative_ = true;
  UserOpFn fn_ = nullptr;
  void* context_ = nullptr;
};

// Whether a predefined operator is defined on a basic type.
bool Defined(OpKind op, BasicType type);

// inout[i] = in[i] op inout[i] for `n` elements of `type`, packed one after
// the other (in and inout may be unaligned). A predefined, defined pair only.
void ReduceBasic(OpKind op, BasicType type, const void* in, void* inout, int64_t n);

// The instruction sets ReduceBasic's loops on integers and reals are built
// for; it runs the widest this CPU has (BestIsa) where the operands do not
// overlap, and the baseline loops where they do.
enum class VectorIsa : uint8_t { kBaseline, kAvx2, kAvx512 };
VectorIsa BestIsa();
absl::string_view IsaName(VectorIsa isa);  // "baseline", "avx2", "avx512"
// ReduceBasic at `isa` (or BestIsa, if this CPU lacks it): for tests.
void ReduceBasicAt(VectorIsa isa, OpKind op, BasicType type, const void* in, void* inout, int64_t n);

// Reduces bytes [first, last) of the packed stream of `count` elements of
// `type` from `in` into `buf` (laid out by `type`), where Unpack would copy.
// [first, last) must hold whole elements: of the basic type for predefined
// operators, of `type` for user ones. Errors: Check()'s, and a range that
// cuts an element (kInvalidArgument naming both).
absl::Status ReduceUnpack(const Op& op, const void* in, int64_t count, const Datatype& type, int64_t first,
                          int64_t last, void* buf);

}  // namespace cartage::datatype

#endif  // CARTAGE_DATATYPE_OP_H_
