// The MPI binding's derived datatypes: each constructor checks its handles
// and counts, builds the type with cartage's constructor (datatype/), and
// hands out a handle; the type moves data once committed.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

// A constructor's outcome: the new handle, or the error naming `fn`.
// A type made from `from` needs its alignment and keeps its bounds.
int Made(const char* fn, absl::StatusOr<Datatype> made, MPI_Datatype* newtype, Envelope envelope,
         MPI_Datatype from = MPI_DATATYPE_NULL) {
  if (!made.ok()) return FromStatus(MPI_COMM_WORLD, fn, made.status());
  *newtype = NewType(*std::move(made), envelope);
  if (from != MPI_DATATYPE_NULL) {
    TypeSlot* slot = TypeSlotOf(*newtype);
    slot->align = AlignOf(from);
    const TypeSlot* old = TypeSlotOf(from);
    slot->bounds = envelope.combiner == MPI_COMBINER_RESIZED || (old != nullptr && old->bounds);
  }
  return MPI_SUCCESS;
}

int NegativeCount(const char* fn, int count) {
  return Error(MPI_COMM_WORLD, fn, MPI_ERR_COUNT, absl::StrFormat("negative count %d", count));
}

template <class T>
std::vector<int64_t> Widen(int count, const T* values) {
  return std::vector<int64_t>(values, values + count);
}

}  // namespace

extern "C" {

int PMPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_contiguous", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_contiguous", count);
  return Made("MPI_Type_contiguous", Datatype::Contiguous(count, *old), newtype,
              {MPI_COMBINER_CONTIGUOUS, 1, 0, 1}, oldtype);
}

int PMPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_vector", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_vector", count);
  return Made("MPI_Type_vector", Datatype::Vector(count, blocklength, stride, *old), newtype,
              {MPI_COMBINER_VECTOR, 3, 0, 1}, oldtype);
}

int PMPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                             MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_hvector", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_create_hvector", count);
  return Made("MPI_Type_create_hvector", Datatype::Hvector(count, blocklength, stride, *old), newtype,
              {MPI_COMBINER_HVECTOR, 2, 1, 1}, oldtype);
}

int PMPI_Type_indexed(int count, const int array_of_blocklengths[], const int array_of_displacements[],
                      MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_indexed", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_indexed", count);
  return Made("MPI_Type_indexed",
              Datatype::Indexed(Widen(count, array_of_blocklengths), Widen(count, array_of_displacements), *old),
              newtype, {MPI_COMBINER_INDEXED, 2 * count + 1, 0, 1}, oldtype);
}

int PMPI_Type_create_hindexed(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[],
                              MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_hindexed", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_create_hindexed", count);
  return Made("MPI_Type_create_hindexed",
              Datatype::Hindexed(Widen(count, array_of_blocklengths), Widen(count, array_of_displacements), *old),
              newtype, {MPI_COMBINER_HINDEXED, count + 1, count, 1}, oldtype);
}

int PMPI_Type_create_indexed_block(int count, int blocklength, const int array_of_displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_indexed_block", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_create_indexed_block", count);
  return Made("MPI_Type_create_indexed_block",
              Datatype::IndexedBlock(blocklength, Widen(count, array_of_displacements), *old), newtype,
              {MPI_COMBINER_INDEXED_BLOCK, count + 2, 0, 1}, oldtype);
}

int PMPI_Type_create_struct(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[],
                            const MPI_Datatype array_of_types[], MPI_Datatype* newtype) {
  if (count < 0) return NegativeCount("MPI_Type_create_struct", count);
  std::vector<Datatype> types;
  for (int i = 0; i < count; ++i) {
    int rc = MPI_SUCCESS;
    const Datatype* t = TypeArg(array_of_types[i], "MPI_Type_create_struct", &rc);
    if (t == nullptr) return rc;
    types.push_back(*t);
  }
  absl::StatusOr<Datatype> made =
      Datatype::Struct(Widen(count, array_of_blocklengths), Widen(count, array_of_displacements), types);
  // As MPI (and C): without explicit bounds in its parts, the extent is
  // padded to a multiple of the strictest alignment among them.
  int align = 1;
  bool bounds = false;
  for (int i = 0; i < count; ++i) {
    align = std::max(align, AlignOf(array_of_types[i]));
    const TypeSlot* part = TypeSlotOf(array_of_types[i]);
    bounds = bounds || (part != nullptr && part->bounds);
  }
  if (made.ok() && !bounds && made->extent() % align != 0) {
    made = Datatype::Resized(*made, made->lb(), (made->extent() + align - 1) / align * align);
  }
  if (int rc = Made("MPI_Type_create_struct", std::move(made), newtype, {MPI_COMBINER_STRUCT, count + 1, count, count});
      rc != MPI_SUCCESS) {
    return rc;
  }
  TypeSlot* slot = TypeSlotOf(*newtype);
  slot->align = align;
  slot->bounds = bounds;
  return MPI_SUCCESS;
}

int PMPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_resized", &rc);
  if (old == nullptr) return rc;
  return Made("MPI_Type_create_resized", Datatype::Resized(*old, lb, extent), newtype,
              {MPI_COMBINER_RESIZED, 0, 2, 1}, oldtype);
}

int PMPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_dup", &rc);
  if (old == nullptr) return rc;
  const TypeSlot* made = TypeSlotOf(oldtype);
  *newtype = NewType(old->Dup(), {MPI_COMBINER_DUP, 0, 0, 1});
  TypeSlotOf(*newtype)->align = AlignOf(oldtype);
  TypeSlotOf(*newtype)->bounds = made != nullptr && made->bounds;
  // As MPI: a duplicate of a committed type (or of a predefined one) is committed.
  TypeSlotOf(*newtype)->committed = made == nullptr || made->committed;
  if (made == nullptr) return MPI_SUCCESS;
  if (rc = CopyAttrs(oldtype, *newtype, false, "MPI_Type_dup"); rc != MPI_SUCCESS) FreeType(newtype);
  return rc;
}

int PMPI_Type_commit(MPI_Datatype* datatype) {
  int rc = MPI_SUCCESS;
  if (TypeArg(*datatype, "MPI_Type_commit", &rc) == nullptr) return rc;
  if (TypeSlot* made = TypeSlotOf(*datatype)) made->committed = true;  // a predefined one is already
  return MPI_SUCCESS;
}

int PMPI_Type_free(MPI_Datatype* datatype) {
  int rc = MPI_SUCCESS;
  if (TypeArg(*datatype, "MPI_Type_free", &rc) == nullptr) return rc;
  if (TypeSlotOf(*datatype) == nullptr) {
    return Error(MPI_COMM_WORLD, "MPI_Type_free", MPI_ERR_TYPE,
                 absl::StrFormat("datatype 0x%08x is predefined: it is not freed", static_cast<unsigned>(*datatype)));
  }
  if (int rc2 = DeleteAttrs(*datatype, false, "MPI_Type_free"); rc2 != MPI_SUCCESS) return rc2;
  // Operations under way keep their own reference to the layout.
  FreeType(datatype);
  return MPI_SUCCESS;
}

int PMPI_Type_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return PMPI_Type_create_hvector(count, blocklength, stride, oldtype, newtype);
}

int PMPI_Type_hindexed(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                       MPI_Datatype oldtype, MPI_Datatype* newtype) {
  return PMPI_Type_create_hindexed(count, array_of_blocklengths, array_of_displacements, oldtype, newtype);
}

int PMPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint array_of_displacements[],
                                    MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_hindexed_block", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_create_hindexed_block", count);
  const std::vector<int64_t> lengths(static_cast<std::size_t>(count), blocklength);
  return Made("MPI_Type_create_hindexed_block", Datatype::Hindexed(lengths, Widen(count, array_of_displacements), *old),
              newtype, {MPI_COMBINER_HINDEXED_BLOCK, 2, count, 1}, oldtype);
}

int PMPI_Type_create_subarray(int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                              const int array_of_starts[], int order, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_subarray", &rc);
  if (old == nullptr) return rc;
  if (ndims <= 0) return NegativeCount("MPI_Type_create_subarray", ndims);
  if (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN) {
    return Error(MPI_COMM_WORLD, "MPI_Type_create_subarray", MPI_ERR_ARG,
                 absl::StrFormat("order %d is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN", order));
  }
  return Made("MPI_Type_create_subarray",
              Datatype::Subarray(Widen(ndims, array_of_sizes), Widen(ndims, array_of_subsizes),
                                 Widen(ndims, array_of_starts),
                                 order == MPI_ORDER_C ? datatype::ArrayOrder::kC : datatype::ArrayOrder::kFortran, *old),
              newtype, {MPI_COMBINER_SUBARRAY, 3 * ndims + 2, 0, 1}, oldtype);
}

int PMPI_Type_get_envelope(MPI_Datatype datatype, int* num_integers, int* num_addresses, int* num_datatypes,
                           int* combiner) {
  int rc = MPI_SUCCESS;
  if (TypeArg(datatype, "MPI_Type_get_envelope", &rc) == nullptr) return rc;
  const TypeSlot* made = TypeSlotOf(datatype);
  const Envelope e = made != nullptr ? made->envelope : Envelope{};
  *num_integers = e.integers;
  *num_addresses = e.addresses;
  *num_datatypes = e.types;
  *combiner = e.combiner;
  return MPI_SUCCESS;
}

int PMPI_Type_get_extent(MPI_Datatype datatype, MPI_Aint* lb, MPI_Aint* extent) {
  int rc = MPI_SUCCESS;
  const Datatype* t = TypeArg(datatype, "MPI_Type_get_extent", &rc);
  if (t == nullptr) return rc;
  *lb = t->lb();
  *extent = t->extent();
  return MPI_SUCCESS;
}

int PMPI_Type_get_true_extent(MPI_Datatype datatype, MPI_Aint* true_lb, MPI_Aint* true_extent) {
  int rc = MPI_SUCCESS;
  const Datatype* t = TypeArg(datatype, "MPI_Type_get_true_extent", &rc);
  if (t == nullptr) return rc;
  *true_lb = t->true_lb();
  *true_extent = t->true_extent();
  return MPI_SUCCESS;
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Type_contiguous);
CARTAGE_MPI_ALIAS(MPI_Type_vector);
CARTAGE_MPI_ALIAS(MPI_Type_create_hvector);
CARTAGE_MPI_ALIAS(MPI_Type_indexed);
CARTAGE_MPI_ALIAS(MPI_Type_create_hindexed);
CARTAGE_MPI_ALIAS(MPI_Type_create_indexed_block);
CARTAGE_MPI_ALIAS(MPI_Type_create_struct);
CARTAGE_MPI_ALIAS(MPI_Type_create_resized);
CARTAGE_MPI_ALIAS(MPI_Type_dup);
CARTAGE_MPI_ALIAS(MPI_Type_commit);
CARTAGE_MPI_ALIAS(MPI_Type_free);
CARTAGE_MPI_ALIAS(MPI_Type_get_extent);
CARTAGE_MPI_ALIAS(MPI_Type_get_true_extent);
CARTAGE_MPI_ALIAS(MPI_Type_hvector);
CARTAGE_MPI_ALIAS(MPI_Type_hindexed);
CARTAGE_MPI_ALIAS(MPI_Type_create_hindexed_block);
CARTAGE_MPI_ALIAS(MPI_Type_create_subarray);
CARTAGE_MPI_ALIAS(MPI_Type_get_envelope);
