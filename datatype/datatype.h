// Datatypes: any memory layout a message can have (halo faces, columns,
// structs), built from the basic types with MPI's constructors and committed
// into a compact tree of loops, so that a segment (datatype/segment_walk.h) can
// pack, unpack or list any byte range of a message without flattening it.
//
//   auto column = Datatype::Vector(/*count=*/rows, /*blocklength=*/1, /*stride=*/cols,
//                                  Datatype::Basic(BasicType::kDouble));
//   // column->size() == rows * 8; column->extent() == ((rows - 1) * cols + 1) * 8
//
// A Datatype is immutable and cheap to copy (shared representation).
#ifndef CARTAGE_DATATYPE_DATATYPE_H_
#define CARTAGE_DATATYPE_DATATYPE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "datatype/basic_type.h"

namespace cartage::datatype {

// One node of a committed type: `count` repetitions, `stride` bytes apart,
// starting at `offset`, of either a contiguous block (`body` empty: `bytes`
// bytes of `basic` elements) or a sequence of child nodes.
struct TypeNode {
  int64_t offset = 0;
  int64_t count = 1;
  int64_t stride = 0;
  int64_t bytes = 0;        // leaf: contiguous bytes per repetition
  BasicType basic = BasicType::kByte;  // leaf: what those bytes hold
  std::vector<TypeNode> body;
  int64_t packed = 0;       // packed bytes per repetition (leaf: bytes)
  bool leaf() const { return body.empty(); }
  int64_t total() const { return count * packed; }
};

// Array order for Subarray.
enum class ArrayOrder { kC, kFortran };

class Datatype {
 public:
  // A basic type: one element.
  static Datatype Basic(BasicType t);

  // MPI's constructors; counts and lengths must be >= 0. Errors name the
  // constructor and the argument.
  static absl::StatusOr<Datatype> Contiguous(int64_t count, const Datatype& old);
  // `count` blocks of `blocklength` elements, `stride` elements apart.
  static absl::StatusOr<Datatype> Vector(int64_t count, int64_t blocklength, int64_t stride,
                                         const Datatype& old);
  // The same with the stride in bytes.
  static absl::StatusOr<Datatype> Hvector(int64_t count, int64_t blocklength, int64_t stride_bytes,
                                          const Datatype& old);
  // Blocks of blocklengths[i] elements at displacements[i] elements.
  static absl::StatusOr<Datatype> Indexed(absl::Span<const int64_t> blocklengths,
                                          absl::Span<const int64_t> displacements, const Datatype& old);
  // The same with displacements in bytes.
  static absl::StatusOr<Datatype> Hindexed(absl::Span<const int64_t> blocklengths,
                                           absl::Span<const int64_t> byte_displacements,
                                           const Datatype& old);
  // Blocks of one length at displacements (elements).
  static absl::StatusOr<Datatype> IndexedBlock(int64_t blocklength,
                                               absl::Span<const int64_t> displacements,
                                               const Datatype& old);
  // blocklengths[i] elements of types[i] at byte_displacements[i].
  static absl::StatusOr<Datatype> Struct(absl::Span<const int64_t> blocklengths,
                                         absl::Span<const int64_t> byte_displacements,
                                         absl::Span<const Datatype> types);
  // The sub-block subsizes at starts of an array of sizes (its extent is the
  // whole array's).
  static absl::StatusOr<Datatype> Subarray(absl::Span<const int64_t> sizes,
                                           absl::Span<const int64_t> subsizes,
                                           absl::Span<const int64_t> starts, ArrayOrder order,
                                           const Datatype& old);
  // The same layout with a new lower bound and extent.
  static absl::StatusOr<Datatype> Resized(const Datatype& old, int64_t lb, int64_t extent);
  // A copy (same layout; MPI_Type_dup).
  Datatype Dup() const { return *this; }

  int64_t size() const { return rep_->size; }          // bytes of data in one element
  int64_t lb() const { return rep_->lb; }
  int64_t extent() const { return rep_->extent; }      // what `count` advances by
  int64_t true_lb() const { return rep_->true_lb; }    // first byte of data
  int64_t true_extent() const { return rep_->true_extent; }  // bytes spanned by data
  // One element is one contiguous run of `size()` bytes at offset 0 and the
  // extent equals the size, so `count` elements are `count * size()` bytes.
  bool contiguous() const { return rep_->contiguous; }
  // The committed tree for one element.
  const std::vector<TypeNode>& nodes() const { return rep_->nodes; }
  // The basic type every byte holds, if it is one (for reductions); O(1).
  bool homogeneous(BasicType* type) const;
  // "vector(3, 1, 4, double)": how it was built.
  const std::string& name() const { return rep_->name; }

 private:
  struct Rep {
    std::vector<TypeNode> nodes;
    int64_t size = 0, lb = 0, extent = 0, true_lb = 0, true_extent = 0;
    bool contiguous = false;
    bool homogeneous = false;  // every leaf holds `basic`
    BasicType basic = BasicType::kByte;
    std::string name;
  };
  explicit Datatype(std::shared_ptr<const Rep> rep) : rep_(std::move(rep)) {}
  static Datatype Make(std::vector<TypeNode> nodes, std::string name, bool has_bounds = false,
                       int64_t lb = 0, int64_t extent = 0);
  std::shared_ptr<const Rep> rep_;
};

}  // namespace cartage::datatype

#endif  // CARTAGE_DATATYPE_DATATYPE_H_
