// The MPI binding's info objects, datatype names, addresses and memory:
// bookkeeping MPI keeps for the program, with no traffic.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

// The pairs an info handle names, or null with an error of `fn` in `*rc`.
// MPI_INFO_ENV holds none here.
Pairs* InfoArg(MPI_Info info, const char* fn, int* rc) {
  static Pairs env;
  if (info == MPI_INFO_ENV) return &env;
  State& s = S();
  if ((info & ~0x03ffffff) == kInfoBase) {
    const auto i = static_cast<std::size_t>(info & 0x03ffffff);
    std::lock_guard<std::mutex> lock(s.mu);
    if (i < s.infos.size() && s.infos[i]->pairs.has_value()) return &*s.infos[i]->pairs;
  }
  *rc = Error(MPI_COMM_WORLD, fn, MPI_ERR_INFO,
              absl::StrFormat("info 0x%08x is not an info object (one made and not freed, or MPI_INFO_ENV)",
                              static_cast<unsigned>(info)));
  return nullptr;
}

MPI_Info NewInfo(Pairs pairs) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  const int i = TakeSlot(s.infos, s.free_infos);
  s.infos[static_cast<std::size_t>(i)]->pairs = std::move(pairs);
  return kInfoBase | i;
}

// A key MPI accepts: 1 to MPI_MAX_INFO_KEY - 1 characters.
int KeyArg(const char* key, const char* fn) {
  const std::size_t n = key == nullptr ? 0 : std::strlen(key);
  if (n == 0 || n >= MPI_MAX_INFO_KEY) {
    return Error(MPI_COMM_WORLD, fn, MPI_ERR_INFO_KEY,
                 absl::StrFormat("a key of %d characters (1..%d)", n, MPI_MAX_INFO_KEY - 1));
  }
  return MPI_SUCCESS;
}

const std::string* Find(const Pairs& pairs, const char* key) {
  for (const auto& [k, v] : pairs) {
    if (k == key) return &v;
  }
  return nullptr;
}

// Copies at most `room` characters of `from` and a terminating NUL
// (room + 1 bytes), as MPI_Info_get does.
void Put(const std::string& from, int room, char* out) {
  const std::size_t n = std::min<std::size_t>(from.size(), static_cast<std::size_t>(room));
  std::memcpy(out, from.data(), n);
  out[n] = '\0';
}

// The names of the predefined types, as MPI_Type_get_name gives them.
const char* PredefinedName(MPI_Datatype type) {
  switch (type) {
    case MPI_CHAR: return "MPI_CHAR";
    case MPI_SIGNED_CHAR: return "MPI_SIGNED_CHAR";
    case MPI_UNSIGNED_CHAR: return "MPI_UNSIGNED_CHAR";
    case MPI_BYTE: return "MPI_BYTE";
    case MPI_PACKED: return "MPI_PACKED";
    case MPI_WCHAR: return "MPI_WCHAR";
    case MPI_SHORT: return "MPI_SHORT";
    case MPI_UNSIGNED_SHORT: return "MPI_UNSIGNED_SHORT";
    case MPI_INT: return "MPI_INT";
    case MPI_UNSIGNED: return "MPI_UNSIGNED";
    case MPI_LONG: return "MPI_LONG";
    case MPI_UNSIGNED_LONG: return "MPI_UNSIGNED_LONG";
    case MPI_LONG_LONG_INT: return "MPI_LONG_LONG_INT";
    case MPI_UNSIGNED_LONG_LONG: return "MPI_UNSIGNED_LONG_LONG";
    case MPI_FLOAT: return "MPI_FLOAT";
    case MPI_DOUBLE: return "MPI_DOUBLE";
    case MPI_LONG_DOUBLE: return "MPI_LONG_DOUBLE";
    case MPI_INT8_T: return "MPI_INT8_T";
    case MPI_INT16_T: return "MPI_INT16_T";
    case MPI_INT32_T: return "MPI_INT32_T";
    case MPI_INT64_T: return "MPI_INT64_T";
    case MPI_UINT8_T: return "MPI_UINT8_T";
    case MPI_UINT16_T: return "MPI_UINT16_T";
    case MPI_UINT32_T: return "MPI_UINT32_T";
    case MPI_UINT64_T: return "MPI_UINT64_T";
    case MPI_C_BOOL: return "MPI_C_BOOL";
    case MPI_C_FLOAT_COMPLEX: return "MPI_C_COMPLEX";  // one handle for both; MPICH gives this name
    case MPI_C_DOUBLE_COMPLEX: return "MPI_C_DOUBLE_COMPLEX";
    case MPI_C_LONG_DOUBLE_COMPLEX: return "MPI_C_LONG_DOUBLE_COMPLEX";
    case MPI_AINT: return "MPI_AINT";
    case MPI_OFFSET: return "MPI_OFFSET";
    case MPI_COUNT: return "MPI_COUNT";
    case MPI_FLOAT_INT: return "MPI_FLOAT_INT";
    case MPI_DOUBLE_INT: return "MPI_DOUBLE_INT";
    case MPI_LONG_INT: return "MPI_LONG_INT";
    case MPI_SHORT_INT: return "MPI_SHORT_INT";
    case MPI_2INT: return "MPI_2INT";
    case MPI_LONG_DOUBLE_INT: return "MPI_LONG_DOUBLE_INT";
    case MPI_CHARACTER: return "MPI_CHARACTER";
    case MPI_INTEGER: return "MPI_INTEGER";
    case MPI_REAL: return "MPI_REAL";
    case MPI_LOGICAL: return "MPI_LOGICAL";
    case MPI_COMPLEX: return "MPI_COMPLEX";
    case MPI_DOUBLE_PRECISION: return "MPI_DOUBLE_PRECISION";
    case MPI_2INTEGER: return "MPI_2INTEGER";
    case MPI_REAL16: return "MPI_REAL16";
    case MPI_COMPLEX32: return "MPI_COMPLEX32";
    case MPI_LB: return "MPI_LB";
    case MPI_UB: return "MPI_UB";
    case MPI_DOUBLE_COMPLEX: return "MPI_DOUBLE_COMPLEX";
    case MPI_REAL4: return "MPI_REAL4";
    case MPI_COMPLEX8: return "MPI_COMPLEX8";
    case MPI_REAL8: return "MPI_REAL8";
    case MPI_COMPLEX16: return "MPI_COMPLEX16";
    case MPI_INTEGER1: return "MPI_INTEGER1";
    case MPI_INTEGER2: return "MPI_INTEGER2";
    case MPI_INTEGER4: return "MPI_INTEGER4";
    case MPI_INTEGER8: return "MPI_INTEGER8";
    case MPI_CXX_BOOL: return "MPI_CXX_BOOL";
    case MPI_CXX_FLOAT_COMPLEX: return "MPI_CXX_FLOAT_COMPLEX";
    case MPI_CXX_DOUBLE_COMPLEX: return "MPI_CXX_DOUBLE_COMPLEX";
    case MPI_CXX_LONG_DOUBLE_COMPLEX: return "MPI_CXX_LONG_DOUBLE_COMPLEX";
    default: return "";
  }
}

}  // namespace

int InfoCheck(MPI_Info info, const char* fn) {
  int rc = MPI_SUCCESS;
  if (info != MPI_INFO_NULL) InfoArg(info, fn, &rc);
  return rc;
}

extern "C" {

// ---- Info objects -------------------------------------------------------------------

int PMPI_Info_create(MPI_Info* info) {
  *info = NewInfo({});
  return MPI_SUCCESS;
}

// MPI_INFO_ENV's keys for a program not yet started: its command and arguments.
int PMPI_Info_create_env(int argc, char* argv[], MPI_Info* info) {
  Pairs pairs;
  if (argc > 0 && argv != nullptr) {
    pairs.emplace_back("command", argv[0]);
    std::string args;
    for (int i = 1; i < argc; ++i) absl::StrAppend(&args, i > 1 ? " " : "", argv[i]);
    if (!args.empty()) pairs.emplace_back("argv", args);
  }
  *info = NewInfo(std::move(pairs));
  return MPI_SUCCESS;
}

int PMPI_Info_free(MPI_Info* info) {
  int rc = MPI_SUCCESS;
  if (InfoArg(*info, "MPI_Info_free", &rc) == nullptr) return rc;
  if (*info == MPI_INFO_ENV) {
    return Error(MPI_COMM_WORLD, "MPI_Info_free", MPI_ERR_INFO, "MPI_INFO_ENV is predefined: it is not freed");
  }
  State& s = S();
  const int i = *info & 0x03ffffff;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.infos[static_cast<std::size_t>(i)]->pairs.reset();
    s.free_infos.push_back(i);
  }
  *info = MPI_INFO_NULL;
  return MPI_SUCCESS;
}

int PMPI_Info_set(MPI_Info info, const char* key, const char* value) {
  int rc = MPI_SUCCESS;
  Pairs* p = InfoArg(info, "MPI_Info_set", &rc);
  if (p == nullptr) return rc;
  if (int err = KeyArg(key, "MPI_Info_set"); err != MPI_SUCCESS) return err;
  const std::size_t n = value == nullptr ? 0 : std::strlen(value);
  if (n == 0 || n >= MPI_MAX_INFO_VAL) {
    return Error(MPI_COMM_WORLD, "MPI_Info_set", MPI_ERR_INFO_VALUE,
                 absl::StrFormat("a value of %d characters (1..%d)", n, MPI_MAX_INFO_VAL - 1));
  }
  for (auto& [k, v] : *p) {
    if (k == key) {
      v = value;
      return MPI_SUCCESS;
    }
  }
  p->emplace_back(key, value);
  return MPI_SUCCESS;
}

int PMPI_Info_get(MPI_Info info, const char* key, int valuelen, char* value, int* flag) {
  int rc = MPI_SUCCESS;
  Pairs* p = InfoArg(info, "MPI_Info_get", &rc);
  if (p == nullptr) return rc;
  if (int err = KeyArg(key, "MPI_Info_get"); err != MPI_SUCCESS) return err;
  if (valuelen < 0) return Error(MPI_COMM_WORLD, "MPI_Info_get", MPI_ERR_ARG, "negative value length");
  const std::string* v = Find(*p, key);
  *flag = v != nullptr ? 1 : 0;
  if (v != nullptr) Put(*v, valuelen, value);
  return MPI_SUCCESS;
}

int PMPI_Info_get_string(MPI_Info info, const char* key, int* buflen, char* value, int* flag) {
  int rc = MPI_SUCCESS;
  Pairs* p = InfoArg(info, "MPI_Info_get_string", &rc);
  if (p == nullptr) return rc;
  if (int err = KeyArg(key, "MPI_Info_get_string"); err != MPI_SUCCESS) return err;
  const std::string* v = Find(*p, key);
  *flag = v != nullptr ? 1 : 0;
  if (v == nullptr) return MPI_SUCCESS;
  // As MPI 4.0: a buffer of `*buflen` bytes gets what fits, and `*buflen`
  // the size the whole value needs, its NUL included.
  if (*buflen > 0) Put(*v, *buflen - 1, value);
  *buflen = static_cast<int>(v->size()) + 1;
  return MPI_SUCCESS;
}

int PMPI_Info_get_valuelen(MPI_Info info, const char* key, int* valuelen, int* flag) {
  int rc = MPI_SUCCESS;
  Pairs* p = InfoArg(info, "MPI_Info_get_valuelen", &rc);
  if (p == nullptr) return rc;
  if (int err = KeyArg(key, "MPI_Info_get_valuelen"); err != MPI_SUCCESS) return err;
  const std::string* v = Find(*p, key);
  *flag = v != nullptr ? 1 : 0;
  if (v != nullptr) *valuelen = static_cast<int>(v->size());
  return MPI_SUCCESS;
}

int PMPI_Info_get_nkeys(MPI_Info info, int* nkeys) {
  int rc = MPI_SUCCESS;
  Pairs* p = InfoArg(info, "MPI_Info_get_nkeys", &rc);
  if (p == nullptr) return rc;
  *nkeys = static_cast<int>(p->size());
  return MPI_SUCCESS;
}

int PMPI_Info_get_nthkey(MPI_Info info, int n, char* key) {
  int rc = MPI_SUCCESS;
  Pairs* p = InfoArg(info, "MPI_Info_get_nthkey", &rc);
  if (p == nullptr) return rc;
  if (n < 0 || n >= static_cast<int>(p->size())) {
    return Error(MPI_COMM_WORLD, "MPI_Info_get_nthkey", MPI_ERR_ARG,
                 absl::StrFormat("key %d of an info object with %d", n, p->size()));
  }
  Put((*p)[static_cast<std::size_t>(n)].first, MPI_MAX_INFO_KEY - 1, key);
  return MPI_SUCCESS;
}

int PMPI_Info_delete(MPI_Info info, const char* key) {
  int rc = MPI_SUCCESS;
  Pairs* p = InfoArg(info, "MPI_Info_delete", &rc);
  if (p == nullptr) return rc;
  if (int err = KeyArg(key, "MPI_Info_delete"); err != MPI_SUCCESS) return err;
  for (auto it = p->begin(); it != p->end(); ++it) {
    if (it->first == key) {
      p->erase(it);
      return MPI_SUCCESS;
    }
  }
  return Error(MPI_COMM_WORLD, "MPI_Info_delete", MPI_ERR_INFO_NOKEY, absl::StrFormat("no key \"%s\"", key));
}

int PMPI_Info_dup(MPI_Info info, MPI_Info* newinfo) {
  int rc = MPI_SUCCESS;
  Pairs* p = InfoArg(info, "MPI_Info_dup", &rc);
  if (p == nullptr) return rc;
  *newinfo = NewInfo(*p);
  return MPI_SUCCESS;
}

// ---- Communicators' hints ---------------------------------------------------------

// cartage takes no hints on a communicator: set_info checks the object and
// keeps nothing, and get_info hands out an empty one (MPI: the hints in use).
int PMPI_Comm_set_info(MPI_Comm comm, MPI_Info info) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Comm_set_info", &rc) == nullptr) return rc;
  return InfoCheck(info, "MPI_Comm_set_info");
}

int PMPI_Comm_get_info(MPI_Comm comm, MPI_Info* info_used) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Comm_get_info", &rc) == nullptr) return rc;
  *info_used = NewInfo({});
  return MPI_SUCCESS;
}

int PMPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
  if (int rc = InfoCheck(info, "MPI_Comm_dup_with_info"); rc != MPI_SUCCESS) return rc;
  return PMPI_Comm_dup(comm, newcomm);
}

int PMPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm, MPI_Request* request) {
  if (int rc = InfoCheck(info, "MPI_Comm_idup_with_info"); rc != MPI_SUCCESS) return rc;
  return PMPI_Comm_idup(comm, newcomm, request);
}

// ---- Datatype names ---------------------------------------------------------------

int PMPI_Type_set_name(MPI_Datatype datatype, const char* type_name) {
  int rc = MPI_SUCCESS;
  if (TypeArg(datatype, "MPI_Type_set_name", &rc) == nullptr) return rc;
  std::string name = std::string(type_name).substr(0, MPI_MAX_OBJECT_NAME - 1);
  if (TypeSlot* made = TypeSlotOf(datatype); made != nullptr) {
    made->name = std::move(name);
  } else {
    // MPI lets a program rename a predefined type too.
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    s.predefined_names[datatype] = std::move(name);
  }
  return MPI_SUCCESS;
}

int PMPI_Type_get_name(MPI_Datatype datatype, char* type_name, int* resultlen) {
  int rc = MPI_SUCCESS;
  if (TypeArg(datatype, "MPI_Type_get_name", &rc) == nullptr) return rc;
  const TypeSlot* made = TypeSlotOf(datatype);
  std::string name = made != nullptr ? made->name : PredefinedName(datatype);
  if (made == nullptr) {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    if (const auto it = s.predefined_names.find(datatype); it != s.predefined_names.end()) name = it->second;
  }
  Put(name, MPI_MAX_OBJECT_NAME - 1, type_name);
  *resultlen = static_cast<int>(std::strlen(type_name));
  return MPI_SUCCESS;
}

// ---- Addresses and memory -----------------------------------------------------------

int PMPI_Get_address(const void* location, MPI_Aint* address) {
  *address = static_cast<MPI_Aint>(reinterpret_cast<std::uintptr_t>(location));
  return MPI_SUCCESS;
}

// Memory for the program; cartage's methods register what they send from
// as they need it, so plain memory serves.
int PMPI_Alloc_mem(MPI_Aint size, MPI_Info info, void* baseptr) {
  if (int rc = InfoCheck(info, "MPI_Alloc_mem"); rc != MPI_SUCCESS) return rc;
  if (size < 0) return Error(MPI_COMM_WORLD, "MPI_Alloc_mem", MPI_ERR_ARG, absl::StrFormat("size %d", size));
  void* p = std::malloc(size == 0 ? 1 : static_cast<std::size_t>(size));
  if (p == nullptr) {
    return Error(MPI_COMM_WORLD, "MPI_Alloc_mem", MPI_ERR_NO_MEM, absl::StrFormat("%d bytes", size));
  }
  std::memcpy(baseptr, &p, sizeof(p));  // baseptr is a void** passed as void*
  return MPI_SUCCESS;
}

int PMPI_Free_mem(void* base) {
  std::free(base);
  return MPI_SUCCESS;
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Info_create);
CARTAGE_MPI_ALIAS(MPI_Info_create_env);
CARTAGE_MPI_ALIAS(MPI_Info_free);
CARTAGE_MPI_ALIAS(MPI_Info_set);
CARTAGE_MPI_ALIAS(MPI_Info_get);
CARTAGE_MPI_ALIAS(MPI_Info_get_string);
CARTAGE_MPI_ALIAS(MPI_Info_get_valuelen);
CARTAGE_MPI_ALIAS(MPI_Info_get_nkeys);
CARTAGE_MPI_ALIAS(MPI_Info_get_nthkey);
CARTAGE_MPI_ALIAS(MPI_Info_delete);
CARTAGE_MPI_ALIAS(MPI_Info_dup);
CARTAGE_MPI_ALIAS(MPI_Comm_set_info);
CARTAGE_MPI_ALIAS(MPI_Comm_get_info);
CARTAGE_MPI_ALIAS(MPI_Comm_dup_with_info);
CARTAGE_MPI_ALIAS(MPI_Comm_idup_with_info);
CARTAGE_MPI_ALIAS(MPI_Type_set_name);
CARTAGE_MPI_ALIAS(MPI_Type_get_name);
CARTAGE_MPI_ALIAS(MPI_Get_address);
CARTAGE_MPI_ALIAS(MPI_Alloc_mem);
CARTAGE_MPI_ALIAS(MPI_Free_mem);
