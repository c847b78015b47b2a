// The MPI binding's derived datatypes: each constructor checks its handles
// and counts, builds the type with cartage's constructor (datatype/), and
// hands out a handle; the type moves data once committed.
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

// A constructor's outcome: the new handle, or the error naming `fn`.
int Made(const char* fn, absl::StatusOr<Datatype> made, MPI_Datatype* newtype) {
  if (!made.ok()) return FromStatus(MPI_COMM_WORLD, fn, made.status());
  *newtype = NewType(*std::move(made));
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
  return Made("MPI_Type_contiguous", Datatype::Contiguous(count, *old), newtype);
}

int PMPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_vector", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_vector", count);
  return Made("MPI_Type_vector", Datatype::Vector(count, blocklength, stride, *old), newtype);
}

int PMPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                             MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_hvector", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_create_hvector", count);
  return Made("MPI_Type_create_hvector", Datatype::Hvector(count, blocklength, stride, *old), newtype);
}

int PMPI_Type_indexed(int count, const int array_of_blocklengths[], const int array_of_displacements[],
                      MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_indexed", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_indexed", count);
  return Made("MPI_Type_indexed",
              Datatype::Indexed(Widen(count, array_of_blocklengths), Widen(count, array_of_displacements), *old),
              newtype);
}

int PMPI_Type_create_hindexed(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[],
                              MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_hindexed", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_create_hindexed", count);
  return Made("MPI_Type_create_hindexed",
              Datatype::Hindexed(Widen(count, array_of_blocklengths), Widen(count, array_of_displacements), *old),
              newtype);
}

int PMPI_Type_create_indexed_block(int count, int blocklength, const int array_of_displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_indexed_block", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_create_indexed_block", count);
  return Made("MPI_Type_create_indexed_block",
              Datatype::IndexedBlock(blocklength, Widen(count, array_of_displacements), *old), newtype);
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
  return Made("MPI_Type_create_struct",
              Datatype::Struct(Widen(count, array_of_blocklengths), Widen(count, array_of_displacements), types),
              newtype);
}

int PMPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_resized", &rc);
  if (old == nullptr) return rc;
  return Made("MPI_Type_create_resized", Datatype::Resized(*old, lb, extent), newtype);
}

int PMPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_dup", &rc);
  if (old == nullptr) return rc;
  const TypeSlot* made = TypeSlotOf(oldtype);
  *newtype = NewType(old->Dup());
  // As MPI: a duplicate of a committed type (or of a predefined one) is committed.
  TypeSlotOf(*newtype)->committed = made == nullptr || made->committed;
  return MPI_SUCCESS;
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
  // Operations under way keep their own reference to the layout.
  FreeType(datatype);
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
