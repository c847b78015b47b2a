// The MPI binding's packing (MPI_Pack, MPI_Unpack, MPI_Pack_size: a
// type's data as one stream, laid out as cartage's datatype library packs
// it) and what a status tells of elements (MPI_Get_elements).
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "datatype/segment_walk.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

uint64_t BytesOf(const MPI_Status* status) {
  return static_cast<uint32_t>(status->count_lo) |
         (static_cast<uint64_t>(static_cast<uint32_t>(status->count_hi_and_cancelled) >> 1) << 32);
}

// Basic elements in one repetition of each node, summed.
int64_t BasicCount(const std::vector<datatype::TypeNode>& nodes) {
  int64_t n = 0;
  for (const datatype::TypeNode& node : nodes) {
    const auto size = static_cast<int64_t>(datatype::SizeOf(node.basic));
    // A value-index pair (MINLOC's MPI_DOUBLE_INT) is two basic elements, as MPI counts them.
    const int64_t per = datatype::ClassOf(node.basic) == datatype::TypeClass::kPair ? 2 : 1;
    n += node.count * (node.leaf() ? (size == 0 ? 0 : per * node.bytes / size) : BasicCount(node.body));
  }
  return n;
}

// Walks the basic elements of one element in packed order while `fn`
// (their size) says to go on; false once it stopped.
template <class Fn>
bool WalkBasic(const std::vector<datatype::TypeNode>& nodes, Fn& fn) {
  for (const datatype::TypeNode& node : nodes) {
    for (int64_t r = 0; r < node.count; ++r) {
      if (node.leaf()) {
        const auto size = static_cast<int64_t>(datatype::SizeOf(node.basic));
        const bool pair = datatype::ClassOf(node.basic) == datatype::TypeClass::kPair;
        const auto index = static_cast<int64_t>(sizeof(int));  // a pair's index comes last
        for (int64_t b = 0; size > 0 && b < node.bytes / size; ++b) {
          if (pair ? !fn(size - index) || !fn(index) : !fn(size)) return false;
        }
      } else if (!WalkBasic(node.body, fn)) {
        return false;
      }
    }
  }
  return true;
}

// What MPI_Get_elements counts in `bytes` of `type`'s packed data: the
// basic elements of the whole elements, then of the part of one.
int64_t BasicElements(const Datatype& type, int64_t bytes) {
  if (type.size() == 0) return 0;
  int64_t n = bytes / type.size() * BasicCount(type.nodes());
  int64_t left = bytes % type.size();
  auto fits = [&](int64_t size) {
    if (left < size) return false;
    left -= size;
    ++n;
    return true;
  };
  WalkBasic(type.nodes(), fits);
  return n;
}

// The packed bytes `count` basic elements of `type` fill.
int64_t BytesOfElements(const Datatype& type, int64_t count) {
  const int64_t per = BasicCount(type.nodes());
  if (per == 0) return 0;
  int64_t bytes = count / per * type.size();
  int64_t left = count % per;
  auto take = [&](int64_t size) {
    if (left == 0) return false;
    --left;
    bytes += size;
    return true;
  };
  WalkBasic(type.nodes(), take);
  return bytes;
}

}  // namespace

extern "C" {

int PMPI_Pack_size(int incount, MPI_Datatype datatype, MPI_Comm comm, int* size) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Pack_size", &rc) == nullptr) return rc;
  const Datatype* t = TypeArg(datatype, "MPI_Pack_size", &rc);
  if (t == nullptr) return rc;
  if (incount < 0) return Error(comm, "MPI_Pack_size", MPI_ERR_COUNT, absl::StrFormat("negative count %d", incount));
  *size = static_cast<int>(incount * t->size());
  return MPI_SUCCESS;
}

int PMPI_Pack(const void* inbuf, int incount, MPI_Datatype datatype, void* outbuf, int outsize, int* position,
              MPI_Comm comm) {
  Args a;
  if (int rc = Check(comm, "MPI_Pack", incount, datatype, MPI_PROC_NULL, 0, false, &a); rc != MPI_SUCCESS) return rc;
  const int64_t bytes = incount * a.type->size();
  if (*position < 0 || bytes > outsize - *position) {
    return Error(comm, "MPI_Pack", MPI_ERR_TRUNCATE,
                 absl::StrFormat("%d bytes at position %d of a buffer of %d", bytes, *position, outsize));
  }
  datatype::Pack(inbuf, incount, *a.type, 0, bytes, static_cast<std::byte*>(outbuf) + *position);
  *position += static_cast<int>(bytes);
  return MPI_SUCCESS;
}

int PMPI_Unpack(const void* inbuf, int insize, int* position, void* outbuf, int outcount, MPI_Datatype datatype,
                MPI_Comm comm) {
  Args a;
  if (int rc = Check(comm, "MPI_Unpack", outcount, datatype, MPI_PROC_NULL, 0, false, &a); rc != MPI_SUCCESS) {
    return rc;
  }
  const int64_t bytes = outcount * a.type->size();
  if (*position < 0 || bytes > insize - *position) {
    return Error(comm, "MPI_Unpack", MPI_ERR_TRUNCATE,
                 absl::StrFormat("%d bytes at position %d of a buffer of %d", bytes, *position, insize));
  }
  datatype::Unpack(static_cast<const std::byte*>(inbuf) + *position, outcount, *a.type, 0, bytes, outbuf);
  *position += static_cast<int>(bytes);
  return MPI_SUCCESS;
}

int PMPI_Get_elements_c(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count) {
  int rc = MPI_SUCCESS;
  const Datatype* t = TypeArg(datatype, "MPI_Get_elements", &rc);
  if (t == nullptr) return rc;
  *count = BasicElements(*t, static_cast<int64_t>(BytesOf(status)));
  return MPI_SUCCESS;
}

int PMPI_Get_elements_x(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count) {
  return PMPI_Get_elements_c(status, datatype, count);
}

int PMPI_Get_elements(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  MPI_Count n = 0;
  const int rc = PMPI_Get_elements_c(status, datatype, &n);
  *count = n > INT32_MAX ? MPI_UNDEFINED : static_cast<int>(n);
  return rc;
}

int PMPI_Status_set_elements_x(MPI_Status* status, MPI_Datatype datatype, MPI_Count count) {
  int rc = MPI_SUCCESS;
  const Datatype* t = TypeArg(datatype, "MPI_Status_set_elements", &rc);
  if (t == nullptr) return rc;
  if (count < 0) {
    return Error(MPI_COMM_WORLD, "MPI_Status_set_elements", MPI_ERR_COUNT, absl::StrFormat("negative count %d", count));
  }
  const int64_t bytes = BytesOfElements(*t, count);
  const int cancelled = status->count_hi_and_cancelled & 1;
  status->count_lo = static_cast<int>(static_cast<uint64_t>(bytes) & 0xffffffffu);
  status->count_hi_and_cancelled = static_cast<int>((static_cast<uint64_t>(bytes) >> 32) << 1) | cancelled;
  return MPI_SUCCESS;
}

int PMPI_Status_set_elements(MPI_Status* status, MPI_Datatype datatype, int count) {
  return PMPI_Status_set_elements_x(status, datatype, count);
}

int PMPI_Status_set_cancelled(MPI_Status* status, int flag) {
  status->count_hi_and_cancelled = (status->count_hi_and_cancelled & ~1) | (flag != 0 ? 1 : 0);
  return MPI_SUCCESS;
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Pack_size);
CARTAGE_MPI_ALIAS(MPI_Pack);
CARTAGE_MPI_ALIAS(MPI_Unpack);
CARTAGE_MPI_ALIAS(MPI_Get_elements);
CARTAGE_MPI_ALIAS(MPI_Get_elements_c);
CARTAGE_MPI_ALIAS(MPI_Get_elements_x);
CARTAGE_MPI_ALIAS(MPI_Status_set_elements_x);
CARTAGE_MPI_ALIAS(MPI_Status_set_elements);
CARTAGE_MPI_ALIAS(MPI_Status_set_cancelled);
