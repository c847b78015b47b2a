// The MPI binding's attributes: keyvals the program makes, and the values
// it hangs on communicators and datatypes under them, with the copy
// callback a duplicate runs and the delete callback that runs when a value
// is replaced or deleted or its object freed (in the reverse order of
// setting). MPI_Finalize deletes MPI_COMM_SELF's, then MPI_COMM_WORLD's.
// No lock is held while a callback runs: callbacks may call MPI.
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

enum class Kind : uint8_t { kComm, kType };

// Both kinds' callbacks have the same shape, the handle aside (an int either way).
using CopyFn = int (*)(int, int, void*, void*, void*, int*);
using DeleteFn = int (*)(int, int, void*, void*);

struct Keyval {
  Kind kind = Kind::kComm;
  CopyFn copy = nullptr;      // null: values are not copied
  DeleteFn del = nullptr;     // null: nothing runs
  void* extra = nullptr;
  bool freed = true;          // the program freed it (the slot is free once no value uses it)
  int uses = 0;               // values set under it
};

constexpr int kKeyvalBase = static_cast<int>(0xa4000000u);

struct Keyvals {
  std::mutex mu;
  std::vector<Keyval> all;
};

Keyvals& K() {
  static Keyvals* k = new Keyvals;  // never destroyed: MPI_Finalize may come from atexit
  return *k;
}

// The keyval a handle names, of `kind`, not freed; a copy, or an error code.
int KeyvalArg(int keyval, Kind kind, MPI_Comm comm, const char* fn, Keyval* out) {
  Keyvals& k = K();
  const auto i = static_cast<std::size_t>(keyval & 0x03ffffff);
  {
    std::lock_guard<std::mutex> lock(k.mu);
    // A freed keyval still names the values set under it, until the last goes.
    if ((keyval & ~0x03ffffff) == kKeyvalBase && i < k.all.size() && (!k.all[i].freed || k.all[i].uses > 0) &&
        k.all[i].kind == kind) {
      *out = k.all[i];
      return MPI_SUCCESS;
    }
  }
  return Error(comm, fn, MPI_ERR_KEYVAL,
               absl::StrFormat("keyval 0x%08x is not a %s keyval (one made and not freed)",
                               static_cast<unsigned>(keyval), kind == Kind::kComm ? "communicator" : "datatype"));
}

void Use(int keyval, int delta) {
  Keyvals& k = K();
  std::lock_guard<std::mutex> lock(k.mu);
  k.all[static_cast<std::size_t>(keyval & 0x03ffffff)].uses += delta;
}

int CreateKeyval(Kind kind, CopyFn copy, DeleteFn del, int* keyval, void* extra) {
  Keyvals& k = K();
  std::lock_guard<std::mutex> lock(k.mu);
  std::size_t i = 0;
  while (i < k.all.size() && !(k.all[i].freed && k.all[i].uses == 0)) ++i;
  if (i == k.all.size()) k.all.emplace_back();
  k.all[i] = Keyval{kind, copy, del, extra, false, 0};
  *keyval = kKeyvalBase | static_cast<int>(i);
  return MPI_SUCCESS;
}

// A keyval already freed whose values remain is let be (MPICH allows it).
int FreeKeyval(Kind kind, int* keyval, const char* fn) {
  Keyval kv;
  if (int rc = KeyvalArg(*keyval, kind, MPI_COMM_WORLD, fn, &kv); rc != MPI_SUCCESS) return rc;
  Keyvals& k = K();
  std::lock_guard<std::mutex> lock(k.mu);
  k.all[static_cast<std::size_t>(*keyval & 0x03ffffff)].freed = true;  // values set under it stay
  *keyval = MPI_KEYVAL_INVALID;
  return MPI_SUCCESS;
}

// The attribute list of a communicator or a datatype (a predefined
// type's lives here, as long as the process).
Attrs* AttrsOf(Kind kind, int handle) {
  if (kind == Kind::kComm) {
    CommSlot* slot = CommSlotOf(handle);
    return slot != nullptr ? &slot->attrs : nullptr;
  }
  if (TypeSlot* slot = TypeSlotOf(handle)) return &slot->attrs;
  if (TypeOf(handle) == nullptr) return nullptr;
  static auto* predefined = new std::map<int, Attrs>;
  std::lock_guard<std::mutex> lock(K().mu);
  return &(*predefined)[handle];
}

// Deletes one value (its callback first; an error from it keeps the value).
int DeleteOne(Kind kind, int handle, int keyval, const char* fn) {
  Keyval kv;
  {
    Keyvals& k = K();
    std::lock_guard<std::mutex> lock(k.mu);
    kv = k.all[static_cast<std::size_t>(keyval & 0x03ffffff)];
  }
  Attrs* attrs = AttrsOf(kind, handle);
  void* value = nullptr;
  bool found = false;
  for (const auto& [key, v] : *attrs) {
    if (key == keyval) {
      value = v;
      found = true;
    }
  }
  if (!found) return MPI_SUCCESS;
  if (kv.del != nullptr) {
    if (int rc = kv.del(handle, keyval, value, kv.extra); rc != MPI_SUCCESS) {
      return Error(kind == Kind::kComm ? handle : MPI_COMM_WORLD, fn, rc & 0x7f,
                   absl::StrFormat("the delete callback of keyval 0x%08x returned %d", static_cast<unsigned>(keyval),
                                   rc));
    }
  }
  attrs = AttrsOf(kind, handle);  // the callback may have set others
  std::erase_if(*attrs, [&](const std::pair<int, void*>& a) { return a.first == keyval; });
  Use(keyval, -1);
  return MPI_SUCCESS;
}

int SetAttr(Kind kind, int handle, int keyval, void* value, const char* fn) {
  Keyval kv;
  const MPI_Comm err = kind == Kind::kComm ? handle : MPI_COMM_WORLD;
  if (int rc = KeyvalArg(keyval, kind, err, fn, &kv); rc != MPI_SUCCESS) return rc;
  if (AttrsOf(kind, handle) == nullptr) {
    return Error(err, fn, kind == Kind::kComm ? MPI_ERR_COMM : MPI_ERR_TYPE,
                 absl::StrFormat("0x%08x holds no attributes", static_cast<unsigned>(handle)));
  }
  if (int rc = DeleteOne(kind, handle, keyval, fn); rc != MPI_SUCCESS) return rc;
  AttrsOf(kind, handle)->emplace_back(keyval, value);
  Use(keyval, +1);
  return MPI_SUCCESS;
}

int GetAttr(Kind kind, int handle, int keyval, void* attribute_val, int* flag, const char* fn) {
  Keyval kv;
  const MPI_Comm err = kind == Kind::kComm ? handle : MPI_COMM_WORLD;
  if (int rc = KeyvalArg(keyval, kind, err, fn, &kv); rc != MPI_SUCCESS) return rc;
  *flag = 0;
  const Attrs* attrs = AttrsOf(kind, handle);
  if (attrs == nullptr) return MPI_SUCCESS;
  for (const auto& [key, v] : *attrs) {
    if (key == keyval) {
      std::memcpy(attribute_val, &v, sizeof(v));  // attribute_val is a void** passed as void*
      *flag = 1;
    }
  }
  return MPI_SUCCESS;
}

int DeleteAttr(Kind kind, int handle, int keyval, const char* fn) {
  Keyval kv;
  const MPI_Comm err = kind == Kind::kComm ? handle : MPI_COMM_WORLD;
  if (int rc = KeyvalArg(keyval, kind, err, fn, &kv); rc != MPI_SUCCESS) return rc;
  const Attrs* attrs = AttrsOf(kind, handle);
  bool found = false;
  for (const auto& a : *attrs) found = found || a.first == keyval;
  if (!found) {
    return Error(err, fn, MPI_ERR_KEYVAL,
                 absl::StrFormat("no attribute under keyval 0x%08x", static_cast<unsigned>(keyval)));
  }
  return DeleteOne(kind, handle, keyval, fn);
}

}  // namespace

const int* PredefinedAttr(int keyval) {
  // Values that live as long as MPI does (MPI hands out a pointer to each).
  static int tag_ub = cartage::kMaxTag, host = MPI_PROC_NULL, io = MPI_ANY_SOURCE, wtime_is_global = 0,
             last_code = MPI_ERR_LASTCODE, appnum = 0;
  static int universe = 0;
  switch (keyval) {
    case MPI_TAG_UB: return &tag_ub;
    case MPI_HOST: return &host;
    case MPI_IO: return &io;
    case MPI_WTIME_IS_GLOBAL: return &wtime_is_global;
    case MPI_LASTUSEDCODE:
      last_code = LastUsedCode();
      return &last_code;
    case MPI_APPNUM: return &appnum;
    case MPI_UNIVERSE_SIZE:
      universe = S().agent->size();
      return &universe;
    default: return nullptr;
  }
}

int CopyAttrs(int from, int to, bool comm, const char* fn) {
  const Kind kind = comm ? Kind::kComm : Kind::kType;
  const Attrs list = *AttrsOf(kind, from);
  for (const auto& [keyval, value] : list) {
    Keyval kv;
    {
      Keyvals& k = K();
      std::lock_guard<std::mutex> lock(k.mu);
      kv = k.all[static_cast<std::size_t>(keyval & 0x03ffffff)];
    }
    if (kv.copy == nullptr) continue;
    void* copied = nullptr;
    int flag = 0;
    if (int rc = kv.copy(from, keyval, kv.extra, value, &copied, &flag); rc != MPI_SUCCESS) {
      return Error(comm ? from : MPI_COMM_WORLD, fn, rc & 0x7f,
                   absl::StrFormat("the copy callback of keyval 0x%08x returned %d", static_cast<unsigned>(keyval),
                                   rc));
    }
    if (flag != 0) {
      AttrsOf(kind, to)->emplace_back(keyval, copied);
      Use(keyval, +1);
    }
  }
  return MPI_SUCCESS;
}

int DeleteAttrs(int handle, bool comm, const char* fn) {
  const Kind kind = comm ? Kind::kComm : Kind::kType;
  for (;;) {
    const Attrs* attrs = AttrsOf(kind, handle);
    if (attrs == nullptr || attrs->empty()) return MPI_SUCCESS;
    if (int rc = DeleteOne(kind, handle, attrs->back().first, fn); rc != MPI_SUCCESS) return rc;
  }
}

extern "C" {

int MPIR_Dup_fn(MPI_Comm, int, void*, void* attribute_val_in, void* attribute_val_out, int* flag) {
  std::memcpy(attribute_val_out, &attribute_val_in, sizeof(attribute_val_in));
  *flag = 1;
  return MPI_SUCCESS;
}

// ---- Communicators' -------------------------------------------------------------

int PMPI_Comm_create_keyval(MPI_Comm_copy_attr_function* comm_copy_attr_fn,
                            MPI_Comm_delete_attr_function* comm_delete_attr_fn, int* comm_keyval,
                            void* extra_state) {
  return CreateKeyval(Kind::kComm, comm_copy_attr_fn, comm_delete_attr_fn, comm_keyval, extra_state);
}

int PMPI_Comm_free_keyval(int* comm_keyval) { return FreeKeyval(Kind::kComm, comm_keyval, "MPI_Comm_free_keyval"); }

int PMPI_Comm_set_attr(MPI_Comm comm, int comm_keyval, void* attribute_val) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Comm_set_attr", &rc) == nullptr) return rc;
  return SetAttr(Kind::kComm, comm, comm_keyval, attribute_val, "MPI_Comm_set_attr");
}

int PMPI_Comm_get_attr(MPI_Comm comm, int comm_keyval, void* attribute_val, int* flag) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Comm_get_attr", &rc) == nullptr) return rc;
  if (const int* value = PredefinedAttr(comm_keyval)) {
    const void* v = value;
    std::memcpy(attribute_val, &v, sizeof(v));
    *flag = 1;
    return MPI_SUCCESS;
  }
  return GetAttr(Kind::kComm, comm, comm_keyval, attribute_val, flag, "MPI_Comm_get_attr");
}

int PMPI_Comm_delete_attr(MPI_Comm comm, int comm_keyval) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Comm_delete_attr", &rc) == nullptr) return rc;
  return DeleteAttr(Kind::kComm, comm, comm_keyval, "MPI_Comm_delete_attr");
}

// MPI-1's names for the same.
int PMPI_Keyval_create(MPI_Copy_function* copy_fn, MPI_Delete_function* delete_fn, int* keyval, void* extra_state) {
  return CreateKeyval(Kind::kComm, copy_fn, delete_fn, keyval, extra_state);
}
int PMPI_Keyval_free(int* keyval) { return FreeKeyval(Kind::kComm, keyval, "MPI_Keyval_free"); }
int PMPI_Attr_put(MPI_Comm comm, int keyval, void* attribute_val) {
  return PMPI_Comm_set_attr(comm, keyval, attribute_val);
}
int PMPI_Attr_get(MPI_Comm comm, int keyval, void* attribute_val, int* flag) {
  return PMPI_Comm_get_attr(comm, keyval, attribute_val, flag);
}
int PMPI_Attr_delete(MPI_Comm comm, int keyval) { return PMPI_Comm_delete_attr(comm, keyval); }

// ---- Datatypes' --------------------------------------------------------------------

int PMPI_Type_create_keyval(MPI_Type_copy_attr_function* type_copy_attr_fn,
                            MPI_Type_delete_attr_function* type_delete_attr_fn, int* type_keyval,
                            void* extra_state) {
  return CreateKeyval(Kind::kType, type_copy_attr_fn, type_delete_attr_fn, type_keyval, extra_state);
}

int PMPI_Type_free_keyval(int* type_keyval) { return FreeKeyval(Kind::kType, type_keyval, "MPI_Type_free_keyval"); }

int PMPI_Type_set_attr(MPI_Datatype datatype, int type_keyval, void* attribute_val) {
  int rc = MPI_SUCCESS;
  if (TypeArg(datatype, "MPI_Type_set_attr", &rc) == nullptr) return rc;
  return SetAttr(Kind::kType, datatype, type_keyval, attribute_val, "MPI_Type_set_attr");
}

int PMPI_Type_get_attr(MPI_Datatype datatype, int type_keyval, void* attribute_val, int* flag) {
  int rc = MPI_SUCCESS;
  if (TypeArg(datatype, "MPI_Type_get_attr", &rc) == nullptr) return rc;
  return GetAttr(Kind::kType, datatype, type_keyval, attribute_val, flag, "MPI_Type_get_attr");
}

int PMPI_Type_delete_attr(MPI_Datatype datatype, int type_keyval) {
  int rc = MPI_SUCCESS;
  if (TypeArg(datatype, "MPI_Type_delete_attr", &rc) == nullptr) return rc;
  return DeleteAttr(Kind::kType, datatype, type_keyval, "MPI_Type_delete_attr");
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Comm_create_keyval);
CARTAGE_MPI_ALIAS(MPI_Comm_free_keyval);
CARTAGE_MPI_ALIAS(MPI_Comm_set_attr);
CARTAGE_MPI_ALIAS(MPI_Comm_get_attr);
CARTAGE_MPI_ALIAS(MPI_Comm_delete_attr);
CARTAGE_MPI_ALIAS(MPI_Keyval_create);
CARTAGE_MPI_ALIAS(MPI_Keyval_free);
CARTAGE_MPI_ALIAS(MPI_Attr_put);
CARTAGE_MPI_ALIAS(MPI_Attr_get);
CARTAGE_MPI_ALIAS(MPI_Attr_delete);
CARTAGE_MPI_ALIAS(MPI_Type_create_keyval);
CARTAGE_MPI_ALIAS(MPI_Type_free_keyval);
CARTAGE_MPI_ALIAS(MPI_Type_set_attr);
CARTAGE_MPI_ALIAS(MPI_Type_get_attr);
CARTAGE_MPI_ALIAS(MPI_Type_delete_attr);
