// The MPI binding's derived datatypes: each constructor checks its handles
// and counts, builds the type with cartage's constructor (datatype/), and
// hands out a handle; the type moves data once committed.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
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
  const int combiner = envelope.combiner;
  *newtype = NewType(*std::move(made), std::move(envelope));
  if (from != MPI_DATATYPE_NULL) {
    TypeSlot* slot = TypeSlotOf(*newtype);
    slot->align = AlignOf(from);
    const TypeSlot* old = TypeSlotOf(from);
    slot->bounds = combiner == MPI_COMBINER_RESIZED || (old != nullptr && old->bounds);
    slot->native_long = NativeLong(from);
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

// A constructor's integers for MPI_Type_get_contents: `head`, then
// `count` of each array in turn, then `tail`.
std::vector<int> Ints(std::vector<int> head, int count, const int* a, const int* b = nullptr,
                      std::vector<int> tail = {}) {
  for (const int* arr : {a, b}) {
    if (arr != nullptr) head.insert(head.end(), arr, arr + count);
  }
  head.insert(head.end(), tail.begin(), tail.end());
  return head;
}
std::vector<int> Ints(std::vector<int> head, int count, const int* a, std::vector<int> tail) {
  return Ints(std::move(head), count, a, nullptr, std::move(tail));
}

std::vector<MPI_Aint> Addresses(int count, const MPI_Aint* a) { return std::vector<MPI_Aint>(a, a + count); }

}  // namespace

extern "C" {

int PMPI_Type_contiguous(int count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_contiguous", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_contiguous", count);
  return Made("MPI_Type_contiguous", Datatype::Contiguous(count, *old), newtype,
              {MPI_COMBINER_CONTIGUOUS, {count}, {}, {oldtype}}, oldtype);
}

int PMPI_Type_vector(int count, int blocklength, int stride, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_vector", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_vector", count);
  return Made("MPI_Type_vector", Datatype::Vector(count, blocklength, stride, *old), newtype,
              {MPI_COMBINER_VECTOR, {count, blocklength, stride}, {}, {oldtype}}, oldtype);
}

int PMPI_Type_create_hvector(int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype,
                             MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_hvector", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_create_hvector", count);
  return Made("MPI_Type_create_hvector", Datatype::Hvector(count, blocklength, stride, *old), newtype,
              {MPI_COMBINER_HVECTOR, {count, blocklength}, {stride}, {oldtype}}, oldtype);
}

int PMPI_Type_indexed(int count, const int array_of_blocklengths[], const int array_of_displacements[],
                      MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_indexed", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_indexed", count);
  return Made("MPI_Type_indexed",
              Datatype::Indexed(Widen(count, array_of_blocklengths), Widen(count, array_of_displacements), *old),
              newtype, {MPI_COMBINER_INDEXED, Ints({count}, count, array_of_blocklengths, array_of_displacements), {}, {oldtype}},
              oldtype);
}

int PMPI_Type_create_hindexed(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[],
                              MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_hindexed", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_create_hindexed", count);
  return Made("MPI_Type_create_hindexed",
              Datatype::Hindexed(Widen(count, array_of_blocklengths), Widen(count, array_of_displacements), *old),
              newtype, {MPI_COMBINER_HINDEXED, Ints({count}, count, array_of_blocklengths), Addresses(count, array_of_displacements),
               {oldtype}},
              oldtype);
}

int PMPI_Type_create_indexed_block(int count, int blocklength, const int array_of_displacements[],
                                   MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_indexed_block", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_create_indexed_block", count);
  return Made("MPI_Type_create_indexed_block",
              Datatype::IndexedBlock(blocklength, Widen(count, array_of_displacements), *old), newtype,
              {MPI_COMBINER_INDEXED_BLOCK, Ints({count, blocklength}, count, array_of_displacements), {}, {oldtype}}, oldtype);
}

int PMPI_Type_create_struct(int count, const int array_of_blocklengths[], const MPI_Aint array_of_displacements[],
                            const MPI_Datatype array_of_types[], MPI_Datatype* newtype) {
  if (count < 0) return NegativeCount("MPI_Type_create_struct", count);
  // As MPI: explicit bounds (MPI-1's MPI_LB and MPI_UB markers, and those
  // of parts that have them: resized types) decide the lower and upper
  // bound where there are any; the data decides the rest.
  std::vector<int64_t> lengths, displs;
  std::vector<Datatype> types;
  std::optional<int64_t> lb, ub;
  int align = 1;
  for (int i = 0; i < count; ++i) {
    const MPI_Datatype h = array_of_types[i];
    const int64_t d = array_of_displacements[i];
    if (h == MPI_LB || h == MPI_UB) {
      std::optional<int64_t>& bound = h == MPI_LB ? lb : ub;
      bound = !bound.has_value() ? d : h == MPI_LB ? std::min(*bound, d) : std::max(*bound, d);
      continue;
    }
    int rc = MPI_SUCCESS;
    const Datatype* t = TypeArg(h, "MPI_Type_create_struct", &rc);
    if (t == nullptr) return rc;
    align = std::max(align, AlignOf(h));
    const TypeSlot* part = TypeSlotOf(h);
    if (part != nullptr && part->bounds && array_of_blocklengths[i] > 0) {
      const int64_t lo = d + t->lb(), hi = lo + array_of_blocklengths[i] * t->extent();
      lb = lb.has_value() ? std::min(*lb, lo) : lo;
      ub = ub.has_value() ? std::max(*ub, hi) : hi;
    }
    lengths.push_back(array_of_blocklengths[i]);
    displs.push_back(d);
    types.push_back(*t);
  }
  absl::StatusOr<Datatype> made = Datatype::Struct(lengths, displs, types);
  const bool bounds = lb.has_value() || ub.has_value();
  if (made.ok() && bounds) {
    const int64_t lo = lb.value_or(made->lb()), hi = ub.value_or(made->lb() + made->extent());
    made = Datatype::Resized(*made, lo, hi - lo);
  } else if (made.ok() && made->extent() % align != 0) {
    // As C: without explicit bounds the extent is padded to a multiple of
    // the strictest alignment among the parts.
    made = Datatype::Resized(*made, made->lb(), (made->extent() + align - 1) / align * align);
  }
  if (int rc = Made("MPI_Type_create_struct", std::move(made), newtype,
                    {MPI_COMBINER_STRUCT, Ints({count}, count, array_of_blocklengths),
                     Addresses(count, array_of_displacements),
                     std::vector<MPI_Datatype>(array_of_types, array_of_types + count)});
      rc != MPI_SUCCESS) {
    return rc;
  }
  TypeSlot* slot = TypeSlotOf(*newtype);
  slot->align = align;
  slot->bounds = bounds;
  for (int i = 0; i < count; ++i) slot->native_long = slot->native_long || NativeLong(array_of_types[i]);
  return MPI_SUCCESS;
}

int PMPI_Type_create_resized(MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_resized", &rc);
  if (old == nullptr) return rc;
  return Made("MPI_Type_create_resized", Datatype::Resized(*old, lb, extent), newtype,
              {MPI_COMBINER_RESIZED, {}, {lb, extent}, {oldtype}}, oldtype);
}

int PMPI_Type_dup(MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_dup", &rc);
  if (old == nullptr) return rc;
  const TypeSlot* made = TypeSlotOf(oldtype);
  *newtype = NewType(old->Dup(), {MPI_COMBINER_DUP, {}, {}, {oldtype}});
  TypeSlotOf(*newtype)->align = AlignOf(oldtype);
  TypeSlotOf(*newtype)->bounds = made != nullptr && made->bounds;
  TypeSlotOf(*newtype)->native_long = NativeLong(oldtype);
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

int PMPI_Type_struct(int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[],
                     MPI_Datatype array_of_types[], MPI_Datatype* newtype) {
  return PMPI_Type_create_struct(count, array_of_blocklengths, array_of_displacements, array_of_types, newtype);
}

int PMPI_Address(void* location, MPI_Aint* address) {
  *address = reinterpret_cast<MPI_Aint>(location);
  return MPI_SUCCESS;
}

// MPI-1's bounds and extent: the same as MPI_Type_get_extent says.
int PMPI_Type_extent(MPI_Datatype datatype, MPI_Aint* extent) {
  MPI_Aint lb = 0;
  return PMPI_Type_get_extent(datatype, &lb, extent);
}

int PMPI_Type_lb(MPI_Datatype datatype, MPI_Aint* displacement) {
  MPI_Aint extent = 0;
  return PMPI_Type_get_extent(datatype, displacement, &extent);
}

int PMPI_Type_ub(MPI_Datatype datatype, MPI_Aint* displacement) {
  MPI_Aint lb = 0, extent = 0;
  const int rc = PMPI_Type_get_extent(datatype, &lb, &extent);
  *displacement = lb + extent;
  return rc;
}

int PMPI_Type_create_hindexed_block(int count, int blocklength, const MPI_Aint array_of_displacements[],
                                    MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_hindexed_block", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_create_hindexed_block", count);
  const std::vector<int64_t> lengths(static_cast<std::size_t>(count), blocklength);
  return Made("MPI_Type_create_hindexed_block", Datatype::Hindexed(lengths, Widen(count, array_of_displacements), *old),
              newtype, {MPI_COMBINER_HINDEXED_BLOCK, {count, blocklength}, Addresses(count, array_of_displacements), {oldtype}},
              oldtype);
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
              newtype, {MPI_COMBINER_SUBARRAY,
               Ints(Ints(Ints({ndims}, ndims, array_of_sizes), ndims, array_of_subsizes), ndims, array_of_starts, {order}),
               {}, {oldtype}},
              oldtype);
}

int PMPI_Type_get_envelope(MPI_Datatype datatype, int* num_integers, int* num_addresses, int* num_datatypes,
                           int* combiner) {
  int rc = MPI_SUCCESS;
  if (TypeArg(datatype, "MPI_Type_get_envelope", &rc) == nullptr) return rc;
  const TypeSlot* made = TypeSlotOf(datatype);
  const Envelope e = made != nullptr ? made->envelope : Envelope{};
  *num_integers = static_cast<int>(e.ints.size());
  *num_addresses = static_cast<int>(e.addresses.size());
  *num_datatypes = static_cast<int>(e.types.size());
  *combiner = e.combiner;
  return MPI_SUCCESS;
}

int PMPI_Type_get_contents(MPI_Datatype datatype, int max_integers, int max_addresses, int max_datatypes,
                           int array_of_integers[], MPI_Aint array_of_addresses[],
                           MPI_Datatype array_of_datatypes[]) {
  int rc = MPI_SUCCESS;
  if (TypeArg(datatype, "MPI_Type_get_contents", &rc) == nullptr) return rc;
  const TypeSlot* made = TypeSlotOf(datatype);
  if (made == nullptr) {
    return Error(MPI_COMM_WORLD, "MPI_Type_get_contents", MPI_ERR_TYPE,
                 absl::StrFormat("datatype 0x%08x is predefined: it has no contents", static_cast<unsigned>(datatype)));
  }
  const Envelope& e = made->envelope;
  if (std::cmp_less(max_integers, e.ints.size()) || std::cmp_less(max_addresses, e.addresses.size()) ||
      std::cmp_less(max_datatypes, e.types.size())) {
    return Error(MPI_COMM_WORLD, "MPI_Type_get_contents", MPI_ERR_ARG,
                 absl::StrFormat("room for %d integers, %d addresses and %d types; the type has %d, %d and %d",
                                 max_integers, max_addresses, max_datatypes, e.ints.size(), e.addresses.size(),
                                 e.types.size()));
  }
  std::copy(e.ints.begin(), e.ints.end(), array_of_integers);
  std::copy(e.addresses.begin(), e.addresses.end(), array_of_addresses);
  std::copy(e.types.begin(), e.types.end(), array_of_datatypes);
  // As MPI: a made type handed out is the program's to free.
  for (const MPI_Datatype t : e.types) HoldType(t);
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

// ---- Distributed arrays --------------------------------------------------------

int PMPI_Type_create_darray(int size, int rank, int ndims, const int array_of_gsizes[], const int array_of_distribs[],
                            const int array_of_dargs[], const int array_of_psizes[], int order, MPI_Datatype oldtype,
                            MPI_Datatype* newtype) {
  const char* fn = "MPI_Type_create_darray";
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, fn, &rc);
  if (old == nullptr) return rc;
  auto bad = [&](const std::string& what) { return Error(MPI_COMM_WORLD, fn, MPI_ERR_ARG, what); };
  if (ndims <= 0) return bad(absl::StrFormat("ndims %d is not positive", ndims));
  if (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN) {
    return bad(absl::StrFormat("order %d is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN", order));
  }
  int64_t procs = 1;
  for (int i = 0; i < ndims; ++i) procs *= array_of_psizes[i];
  if (procs != size || rank < 0 || rank >= size) {
    return bad(absl::StrFormat("a grid of %d processes for a group of %d (rank %d)", procs, size, rank));
  }
  // The process grid is row-major whatever the array's order (MPI).
  std::vector<int> coords(static_cast<std::size_t>(ndims));
  for (int i = ndims - 1, r = rank; i >= 0; --i) {
    coords[static_cast<std::size_t>(i)] = r % array_of_psizes[i];
    r /= array_of_psizes[i];
  }
  // Dimension by dimension from the fastest: this process's indices of it
  // as blocks of the type so far, resized to the whole dimension, so the
  // next dimension steps over it (the standard's construction).
  Datatype t = *old;
  for (int k = 0; k < ndims; ++k) {
    const int i = order == MPI_ORDER_FORTRAN ? k : ndims - 1 - k;
    const int64_t gsize = array_of_gsizes[i], psize = array_of_psizes[i], r = coords[static_cast<std::size_t>(i)];
    const int darg = array_of_dargs[i];
    if (gsize <= 0) return bad(absl::StrFormat("dimension %d has %d elements", i, gsize));
    int64_t block = 0, cycle = 0;  // a block of `block` indices every `cycle`, from r * block
    switch (array_of_distribs[i]) {
      case MPI_DISTRIBUTE_NONE:
        if (psize != 1) return bad(absl::StrFormat("dimension %d is not distributed over %d processes", i, psize));
        block = cycle = gsize;
        break;
      case MPI_DISTRIBUTE_BLOCK:
        block = darg == MPI_DISTRIBUTE_DFLT_DARG ? (gsize + psize - 1) / psize : darg;
        if (block <= 0 || block * psize < gsize) {
          return bad(absl::StrFormat("blocks of %d over %d processes do not cover dimension %d of %d", block, psize,
                                     i, gsize));
        }
        cycle = block * psize;
        break;
      case MPI_DISTRIBUTE_CYCLIC:
        block = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
        if (block <= 0) return bad(absl::StrFormat("cyclic blocks of %d in dimension %d", block, i));
        cycle = block * psize;
        break;
      default: return bad(absl::StrFormat("distribution %d of dimension %d", array_of_distribs[i], i));
    }
    std::vector<int64_t> lengths, displs;
    for (int64_t start = r * block; start < gsize; start += cycle) {
      lengths.push_back(std::min(block, gsize - start));
      displs.push_back(start * t.extent());
    }
    absl::StatusOr<Datatype> mine = Datatype::Hindexed(lengths, displs, t);
    if (mine.ok()) mine = Datatype::Resized(*mine, 0, gsize * t.extent());
    if (!mine.ok()) return FromStatus(MPI_COMM_WORLD, fn, mine.status());
    t = *std::move(mine);
  }
  std::vector<int> ints = {size, rank, ndims};
  for (const int* a : {array_of_gsizes, array_of_distribs, array_of_dargs, array_of_psizes}) {
    ints.insert(ints.end(), a, a + ndims);
  }
  ints.push_back(order);
  return Made(fn, std::move(t), newtype, {MPI_COMBINER_DARRAY, std::move(ints), {}, {oldtype}}, oldtype);
}

int PMPI_Type_match_size(int typeclass, int size, MPI_Datatype* datatype) {
  // The predefined type of the class with that size (MPI: Fortran's where it has one).
  MPI_Datatype found = MPI_DATATYPE_NULL;
  switch (typeclass) {
    case MPI_TYPECLASS_REAL:
      found = size == 4 ? MPI_REAL4 : size == 8 ? MPI_REAL8 : size == sizeof(long double) ? MPI_LONG_DOUBLE
                                                                                          : MPI_DATATYPE_NULL;
      break;
    case MPI_TYPECLASS_INTEGER:
      found = size == 1 ? MPI_INTEGER1 : size == 2 ? MPI_INTEGER2 : size == 4 ? MPI_INTEGER4
            : size == 8 ? MPI_INTEGER8 : MPI_DATATYPE_NULL;
      break;
    case MPI_TYPECLASS_COMPLEX:
      found = size == 8 ? MPI_COMPLEX8 : size == 16 ? MPI_COMPLEX16
            : size == 2 * sizeof(long double) ? MPI_C_LONG_DOUBLE_COMPLEX : MPI_DATATYPE_NULL;
      break;
    default:
      return Error(MPI_COMM_WORLD, "MPI_Type_match_size", MPI_ERR_ARG,
                   absl::StrFormat("type class %d is none of MPI_TYPECLASS_REAL, _INTEGER, _COMPLEX", typeclass));
  }
  if (found == MPI_DATATYPE_NULL) {
    return Error(MPI_COMM_WORLD, "MPI_Type_match_size", MPI_ERR_ARG,
                 absl::StrFormat("no predefined type of class %d has %d bytes", typeclass, size));
  }
  *datatype = found;
  return MPI_SUCCESS;
}

// ---- Large counts (MPI-4's _c, MPI-3's _x) ---------------------------------------

int PMPI_Type_contiguous_c(MPI_Count count, MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_contiguous_c", &rc);
  if (old == nullptr) return rc;
  return Made("MPI_Type_contiguous_c", Datatype::Contiguous(count, *old), newtype,
              {MPI_COMBINER_CONTIGUOUS, {static_cast<int>(count)}, {}, {oldtype}}, oldtype);
}

int PMPI_Type_vector_c(MPI_Count count, MPI_Count blocklength, MPI_Count stride, MPI_Datatype oldtype,
                       MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_vector_c", &rc);
  if (old == nullptr) return rc;
  return Made("MPI_Type_vector_c", Datatype::Vector(count, blocklength, stride, *old), newtype,
              {MPI_COMBINER_VECTOR,
               {static_cast<int>(count), static_cast<int>(blocklength), static_cast<int>(stride)},
               {},
               {oldtype}},
              oldtype);
}

int PMPI_Type_create_hindexed_c(MPI_Count count, const MPI_Count array_of_blocklengths[],
                                const MPI_Count array_of_displacements[], MPI_Datatype oldtype,
                                MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_hindexed_c", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_create_hindexed_c", static_cast<int>(count));
  std::vector<int64_t> lengths(array_of_blocklengths, array_of_blocklengths + count);
  std::vector<int64_t> displs(array_of_displacements, array_of_displacements + count);
  std::vector<int> ints = {static_cast<int>(count)};
  for (const int64_t l : lengths) ints.push_back(static_cast<int>(l));
  return Made("MPI_Type_create_hindexed_c", Datatype::Hindexed(lengths, displs, *old), newtype,
              {MPI_COMBINER_HINDEXED, std::move(ints), std::vector<MPI_Aint>(displs.begin(), displs.end()), {oldtype}},
              oldtype);
}

int PMPI_Type_create_indexed_block_c(MPI_Count count, MPI_Count blocklength, const MPI_Count array_of_displacements[],
                                     MPI_Datatype oldtype, MPI_Datatype* newtype) {
  int rc = MPI_SUCCESS;
  const Datatype* old = TypeArg(oldtype, "MPI_Type_create_indexed_block_c", &rc);
  if (old == nullptr) return rc;
  if (count < 0) return NegativeCount("MPI_Type_create_indexed_block_c", static_cast<int>(count));
  std::vector<int64_t> displs(array_of_displacements, array_of_displacements + count);
  std::vector<int> ints = {static_cast<int>(count), static_cast<int>(blocklength)};
  for (const int64_t d : displs) ints.push_back(static_cast<int>(d));
  return Made("MPI_Type_create_indexed_block_c", Datatype::IndexedBlock(blocklength, displs, *old), newtype,
              {MPI_COMBINER_INDEXED_BLOCK, std::move(ints), {}, {oldtype}}, oldtype);
}

int PMPI_Type_size_c(MPI_Datatype datatype, MPI_Count* size) {
  int rc = MPI_SUCCESS;
  const Datatype* t = TypeArg(datatype, "MPI_Type_size_c", &rc);
  if (t == nullptr) return rc;
  *size = t->size();
  return MPI_SUCCESS;
}

int PMPI_Type_size_x(MPI_Datatype datatype, MPI_Count* size) { return PMPI_Type_size_c(datatype, size); }

int PMPI_Type_get_extent_c(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent) {
  return PMPI_Type_get_extent(datatype, lb, extent);  // MPI_Aint and MPI_Count are both long here
}

int PMPI_Type_get_extent_x(MPI_Datatype datatype, MPI_Count* lb, MPI_Count* extent) {
  return PMPI_Type_get_extent(datatype, lb, extent);
}

int PMPI_Type_get_true_extent_c(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent) {
  return PMPI_Type_get_true_extent(datatype, true_lb, true_extent);
}

int PMPI_Type_get_true_extent_x(MPI_Datatype datatype, MPI_Count* true_lb, MPI_Count* true_extent) {
  return PMPI_Type_get_true_extent(datatype, true_lb, true_extent);
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
CARTAGE_MPI_ALIAS(MPI_Type_get_contents);
CARTAGE_MPI_ALIAS(MPI_Type_struct);
CARTAGE_MPI_ALIAS(MPI_Address);
CARTAGE_MPI_ALIAS(MPI_Type_extent);
CARTAGE_MPI_ALIAS(MPI_Type_lb);
CARTAGE_MPI_ALIAS(MPI_Type_ub);
CARTAGE_MPI_ALIAS(MPI_Type_create_darray);
CARTAGE_MPI_ALIAS(MPI_Type_match_size);
CARTAGE_MPI_ALIAS(MPI_Type_contiguous_c);
CARTAGE_MPI_ALIAS(MPI_Type_vector_c);
CARTAGE_MPI_ALIAS(MPI_Type_create_hindexed_c);
CARTAGE_MPI_ALIAS(MPI_Type_create_indexed_block_c);
CARTAGE_MPI_ALIAS(MPI_Type_size_c);
CARTAGE_MPI_ALIAS(MPI_Type_size_x);
CARTAGE_MPI_ALIAS(MPI_Type_get_extent_c);
CARTAGE_MPI_ALIAS(MPI_Type_get_extent_x);
CARTAGE_MPI_ALIAS(MPI_Type_get_true_extent_c);
CARTAGE_MPI_ALIAS(MPI_Type_get_true_extent_x);
