// The MPI binding's bookkeeping: the process's MPI state, error codes
// and their texts, and what each kind of handle names.
#include "mpi/handles.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_format.h"

namespace cartage::mpi_binding {

namespace {

// The basic type of a predefined datatype handle.
std::optional<BasicType> BasicOf(MPI_Datatype type) {
  switch (type) {
    case MPI_CHAR: case MPI_SIGNED_CHAR: case MPI_INT8_T: return BasicType::kInt8;
    case MPI_UNSIGNED_CHAR: case MPI_UINT8_T: return BasicType::kUint8;
    case MPI_BYTE: case MPI_PACKED: return BasicType::kByte;
    case MPI_SHORT: case MPI_INT16_T: return BasicType::kInt16;
    case MPI_UNSIGNED_SHORT: case MPI_UINT16_T: return BasicType::kUint16;
    case MPI_INT: case MPI_INT32_T: case MPI_WCHAR: return BasicType::kInt32;
    case MPI_UNSIGNED: case MPI_UINT32_T: return BasicType::kUint32;
    case MPI_LONG: case MPI_LONG_LONG_INT: case MPI_INT64_T: case MPI_AINT: case MPI_OFFSET: case MPI_COUNT:
      return BasicType::kInt64;
    case MPI_UNSIGNED_LONG: case MPI_UNSIGNED_LONG_LONG: case MPI_UINT64_T: return BasicType::kUint64;
    case MPI_FLOAT: return BasicType::kFloat;
    case MPI_DOUBLE: return BasicType::kDouble;
    case MPI_LONG_DOUBLE: return BasicType::kLongDouble;
    case MPI_C_BOOL: return BasicType::kBool;
    case MPI_C_FLOAT_COMPLEX: return BasicType::kComplexFloat;
    case MPI_C_DOUBLE_COMPLEX: return BasicType::kComplexDouble;
    case MPI_C_LONG_DOUBLE_COMPLEX: return BasicType::kComplexLongDouble;
    case MPI_FLOAT_INT: return BasicType::kFloatInt;
    case MPI_DOUBLE_INT: return BasicType::kDoubleInt;
    case MPI_LONG_INT: return BasicType::kLongInt;
    case MPI_SHORT_INT: return BasicType::kShortInt;
    case MPI_2INT: return BasicType::kTwoInt;
    case MPI_LONG_DOUBLE_INT: return BasicType::kLongDoubleInt;
    // Fortran's and C++'s: the same layouts.
    case MPI_CHARACTER: case MPI_INTEGER1: return BasicType::kInt8;
    case MPI_INTEGER: case MPI_LOGICAL: case MPI_INTEGER4: return BasicType::kInt32;
    case MPI_REAL: case MPI_REAL4: return BasicType::kFloat;
    case MPI_COMPLEX: case MPI_COMPLEX8: case MPI_CXX_FLOAT_COMPLEX: return BasicType::kComplexFloat;
    case MPI_DOUBLE_PRECISION: case MPI_REAL8: return BasicType::kDouble;
    case MPI_2INTEGER: return BasicType::kTwoInt;
    case MPI_DOUBLE_COMPLEX: case MPI_COMPLEX16: case MPI_CXX_DOUBLE_COMPLEX: return BasicType::kComplexDouble;
    case MPI_INTEGER2: return BasicType::kInt16;
    case MPI_INTEGER8: return BasicType::kInt64;
    case MPI_CXX_BOOL: return BasicType::kBool;
    case MPI_CXX_LONG_DOUBLE_COMPLEX: return BasicType::kComplexLongDouble;
    default: return std::nullopt;
  }
}

}  // namespace

State& S() {
  static State* s = new State;  // never destroyed: calls may come from atexit handlers
  return *s;
}

// ---- Errors ------------------------------------------------------------------

std::string ClassName(int cls) {
  if (cls >= kFirstUserClass) {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mu);
    const auto i = static_cast<std::size_t>(cls - kFirstUserClass);
    return i < s.user_classes.size() && s.user_classes[i].has_value() ? *s.user_classes[i] : "unknown error";
  }
  switch (cls) {
    case MPI_SUCCESS: return "no error";
    case MPI_ERR_BUFFER: return "invalid buffer pointer";
    case MPI_ERR_COUNT: return "invalid count argument";
    case MPI_ERR_TYPE: return "invalid datatype";
    case MPI_ERR_TAG: return "invalid tag";
    case MPI_ERR_COMM: return "invalid communicator";
    case MPI_ERR_RANK: return "invalid rank";
    case MPI_ERR_ROOT: return "invalid root";
    case MPI_ERR_GROUP: return "invalid group";
    case MPI_ERR_OP: return "invalid reduction operator";
    case MPI_ERR_TOPOLOGY: return "invalid topology";
    case MPI_ERR_DIMS: return "invalid dimension argument";
    case MPI_ERR_INFO: return "invalid info object";
    case MPI_ERR_INFO_KEY: return "invalid info key";
    case MPI_ERR_INFO_VALUE: return "invalid info value";
    case MPI_ERR_INFO_NOKEY: return "no such info key";
    case MPI_ERR_NO_MEM: return "out of memory";
    case MPI_ERR_ARG: return "invalid argument";
    case MPI_ERR_TRUNCATE: return "message truncated";
    case MPI_ERR_INTERN: return "internal error";
    case MPI_ERR_IN_STATUS: return "error code is in status";
    case MPI_ERR_REQUEST: return "invalid request";
    case MPI_ERR_KEYVAL: return "invalid keyval";
    case MPI_ERR_OTHER: return "other error";
    default: return "unknown error";
  }
}

// Ends the job: MPI_Abort, and an error under MPI_ERRORS_ARE_FATAL.
[[noreturn]] void AbortJob(int code) {
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code != 0 ? code : 1);
}

// An error of `cls` in `fn` on `comm`: fatal by default; under
// MPI_ERRORS_RETURN a code whose text (MPI_Error_string) is `what`.
int Error(MPI_Comm comm, const char* fn, int cls, const std::string& what) {
  const std::string text = absl::StrFormat("%s: %s", fn, what);
  State& s = S();
  // A handle that names no communicator answers to MPI_COMM_WORLD's handler.
  const CommSlot* slot = s.phase == Phase::kRunning ? CommSlotOf(comm) : nullptr;
  if (slot == nullptr && s.phase == Phase::kRunning) {
    comm = MPI_COMM_WORLD;
    slot = CommSlotOf(MPI_COMM_WORLD);
  }
  const MPI_Errhandler handler = slot != nullptr ? slot->handler : MPI_ERRORS_ARE_FATAL;
  MPI_Comm_errhandler_function* user = UserHandler(handler);
  if (handler != MPI_ERRORS_RETURN && user == nullptr) {
    std::fprintf(stderr, "cartage mpi: rank %d: %s (%s); aborting\n", s.world_rank, text.c_str(),
                 ClassName(cls).c_str());
    AbortJob(cls);
  }
  int code = 0;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (s.messages.size() == kMessages) s.messages.clear();  // old codes then read as their class's text
    s.messages.push_back(text);
    code = cls | static_cast<int>(s.messages.size() << kClassBits);
  }
  if (user != nullptr) user(&comm, &code);  // no lock held: the handler may call MPI
  return code;
}

MPI_Comm_errhandler_function* UserHandler(MPI_Errhandler handler) {
  if ((handler & ~0x03ffffff) != kHandlerBase) return nullptr;
  State& s = S();
  const auto i = static_cast<std::size_t>(handler & 0x03ffffff);
  std::lock_guard<std::mutex> lock(s.mu);
  return i < s.handlers.size() ? s.handlers[i] : nullptr;
}

// A cartage status as an MPI error of `fn`.
int FromStatus(MPI_Comm comm, const char* fn, const absl::Status& st) {
  if (st.ok()) return MPI_SUCCESS;
  int cls = MPI_ERR_OTHER;
  if (st.code() == absl::StatusCode::kOutOfRange) cls = MPI_ERR_TRUNCATE;
  if (st.code() == absl::StatusCode::kInvalidArgument) cls = MPI_ERR_ARG;
  return Error(comm, fn, cls, std::string(st.message()));
}

// ---- Handles -----------------------------------------------------------------

// The communicator a handle names, or an error code in `*rc`.
const cartage::Comm* CommOf(MPI_Comm comm, const char* fn, int* rc) {
  State& s = S();
  if (s.phase != Phase::kRunning) {
    std::fprintf(stderr, "cartage mpi: %s called %s\n", fn,
                 s.phase == Phase::kBefore ? "before MPI_Init" : "after MPI_Finalize");
    AbortJob(MPI_ERR_OTHER);
  }
  if (const CommSlot* slot = CommSlotOf(comm)) return &*slot->comm;
  *rc = Error(MPI_COMM_WORLD, fn, MPI_ERR_COMM,
              absl::StrFormat("communicator 0x%08x is not a communicator (MPI_COMM_WORLD, MPI_COMM_SELF, or one "
                              "made and not freed)",
                              static_cast<unsigned>(comm)));
  return nullptr;
}

const cartage::Comm* IntraOf(MPI_Comm comm, const char* fn, int* rc) {
  const cartage::Comm* c = CommOf(comm, fn, rc);
  if (c == nullptr || !CommSlotOf(comm)->inter) return c;
  *rc = Error(comm, fn, MPI_ERR_COMM,
              absl::StrFormat("communicator 0x%08x is an intercommunicator, which this call does not take",
                              static_cast<unsigned>(comm)));
  return nullptr;
}

CommSlot* CommSlotOf(MPI_Comm comm) {
  State& s = S();
  std::size_t i;
  if (comm == MPI_COMM_WORLD) {
    i = 0;
  } else if (comm == MPI_COMM_SELF) {
    i = 1;
  } else if ((comm & ~0x03ffffff) == kCommBase && (comm & 0x03ffffff) >= 2) {
    i = static_cast<std::size_t>(comm & 0x03ffffff);
  } else {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(s.mu);
  if (i >= s.comms.size() || !s.comms[i]->comm.has_value()) return nullptr;
  return s.comms[i].get();
}

MPI_Comm NewComm(cartage::Comm comm, MPI_Errhandler handler) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  const int i = TakeSlot(s.comms, s.free_comms);
  CommSlot& slot = *s.comms[static_cast<std::size_t>(i)];
  slot = CommSlot{};  // nothing of a freed communicator's (an intercommunicator's groups) stays
  slot.comm = std::move(comm);
  slot.handler = handler;
  return i == 0 ? MPI_COMM_WORLD : i == 1 ? MPI_COMM_SELF : kCommBase | i;
}

void FreeComm(MPI_Comm* comm) {
  State& s = S();
  const int i = *comm & 0x03ffffff;
  std::lock_guard<std::mutex> lock(s.mu);
  CommSlot& slot = *s.comms[static_cast<std::size_t>(i)];
  slot.comm.reset();
  slot.bridge.reset();
  s.free_comms.push_back(i);
  *comm = MPI_COMM_NULL;
}

const Datatype* TypeOf(MPI_Datatype type) {
  // Built once: a handle's cartage type, by basic type.
  static const std::vector<Datatype>* types = [] {
    auto* v = new std::vector<Datatype>;
    for (int b = 0; b < static_cast<int>(BasicType::kCount); ++b) v->push_back(Datatype::Basic(static_cast<BasicType>(b)));
    return v;
  }();
  const std::optional<BasicType> basic = BasicOf(type);
  if (basic.has_value()) return &(*types)[static_cast<std::size_t>(*basic)];
  // MPI-1's bound markers hold no data; Fortran's quad precision has no C
  // type here, so its values move as bytes (a reduction on them is refused).
  static const Datatype* const marker = new Datatype(*Datatype::Contiguous(0, Datatype::Basic(BasicType::kByte)));
  static const Datatype* const quad = new Datatype(*Datatype::Contiguous(16, Datatype::Basic(BasicType::kByte)));
  static const Datatype* const quad_complex = new Datatype(*Datatype::Contiguous(32, Datatype::Basic(BasicType::kByte)));
  switch (type) {
    case MPI_LB: case MPI_UB: return marker;
    case MPI_REAL16: return quad;
    case MPI_COMPLEX32: return quad_complex;
    default: break;
  }
  const TypeSlot* slot = TypeSlotOf(type);
  return slot != nullptr ? &*slot->type : nullptr;
}

const Datatype* TypeArg(MPI_Datatype type, const char* fn, int* rc) {
  if (const Datatype* t = TypeOf(type)) return t;
  *rc = Error(MPI_COMM_WORLD, fn, MPI_ERR_TYPE,
              absl::StrFormat("datatype 0x%08x is not a datatype (predefined, or made and not freed)",
                              static_cast<unsigned>(type)));
  return nullptr;
}

int AlignOf(MPI_Datatype type) {
  if (const TypeSlot* made = TypeSlotOf(type)) return made->align;
  switch (type) {
    case MPI_SHORT: case MPI_UNSIGNED_SHORT: case MPI_INT16_T: case MPI_UINT16_T: return alignof(short);
    case MPI_INT: case MPI_UNSIGNED: case MPI_INT32_T: case MPI_UINT32_T: case MPI_WCHAR: case MPI_FLOAT:
    case MPI_C_FLOAT_COMPLEX: case MPI_FLOAT_INT: case MPI_SHORT_INT: case MPI_2INT:
      return alignof(int);
    case MPI_LONG: case MPI_UNSIGNED_LONG: case MPI_LONG_LONG_INT: case MPI_UNSIGNED_LONG_LONG: case MPI_INT64_T:
    case MPI_UINT64_T: case MPI_AINT: case MPI_OFFSET: case MPI_COUNT: case MPI_DOUBLE: case MPI_C_DOUBLE_COMPLEX:
    case MPI_DOUBLE_INT: case MPI_LONG_INT:
      return alignof(double);
    case MPI_LONG_DOUBLE: case MPI_C_LONG_DOUBLE_COMPLEX: case MPI_LONG_DOUBLE_INT: return alignof(long double);
    case MPI_INTEGER: case MPI_REAL: case MPI_LOGICAL: case MPI_COMPLEX: case MPI_2INTEGER: case MPI_REAL4: case MPI_COMPLEX8: case MPI_INTEGER4: case MPI_CXX_FLOAT_COMPLEX:
      return alignof(int);
    case MPI_DOUBLE_PRECISION: case MPI_DOUBLE_COMPLEX: case MPI_REAL8: case MPI_COMPLEX16: case MPI_INTEGER8: case MPI_CXX_DOUBLE_COMPLEX:
      return alignof(double);
    case MPI_INTEGER2:
      return alignof(short);
    case MPI_CXX_LONG_DOUBLE_COMPLEX:
      return alignof(long double);
    default: return 1;
  }
}


namespace {

// A made type's slot by handle, or null; s.mu held.
TypeSlot* MadeLocked(State& s, MPI_Datatype type) {
  if ((type & ~0x03ffffff) != kTypeBase) return nullptr;
  const auto i = static_cast<std::size_t>(type & 0x03ffffff);
  return i < s.types.size() && s.types[i]->type.has_value() ? s.types[i].get() : nullptr;
}

// Drops one hold of a made type; at none its slot goes back, and so do
// its holds of the types it was made from. s.mu held.
void ReleaseLocked(State& s, MPI_Datatype type) {
  TypeSlot* slot = MadeLocked(s, type);
  if (slot == nullptr || --slot->refs > 0) return;
  slot->type.reset();
  s.free_types.push_back(type & 0x03ffffff);
  const std::vector<MPI_Datatype> parts = std::move(slot->envelope.types);
  slot->envelope = Envelope{};
  for (const MPI_Datatype part : parts) ReleaseLocked(s, part);
}

}  // namespace

TypeSlot* TypeSlotOf(MPI_Datatype type) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  return MadeLocked(s, type);
}

MPI_Datatype NewType(Datatype type, Envelope envelope) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  for (const MPI_Datatype part : envelope.types) {
    if (TypeSlot* held = MadeLocked(s, part); held != nullptr) ++held->refs;
  }
  const int i = TakeSlot(s.types, s.free_types);
  TypeSlot& slot = *s.types[static_cast<std::size_t>(i)];
  slot.type = std::move(type);
  slot.committed = false;
  slot.envelope = std::move(envelope);
  slot.align = 1;
  slot.bounds = false;
  slot.native_long = false;
  slot.name.clear();
  slot.attrs.clear();
  slot.refs = 1;
  return kTypeBase | i;
}

void FreeType(MPI_Datatype* type) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  ReleaseLocked(s, *type);
  *type = MPI_DATATYPE_NULL;
}

void HoldType(MPI_Datatype type) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  if (TypeSlot* held = MadeLocked(s, type); held != nullptr) ++held->refs;
}

std::optional<OpKind> OpOf(MPI_Op op) {
  switch (op) {
    case MPI_MAX: return OpKind::kMax;
    case MPI_MIN: return OpKind::kMin;
    case MPI_SUM: return OpKind::kSum;
    case MPI_PROD: return OpKind::kProd;
    case MPI_LAND: return OpKind::kLand;
    case MPI_BAND: return OpKind::kBand;
    case MPI_LOR: return OpKind::kLor;
    case MPI_BOR: return OpKind::kBor;
    case MPI_LXOR: return OpKind::kLxor;
    case MPI_BXOR: return OpKind::kBxor;
    case MPI_MINLOC: return OpKind::kMinloc;
    case MPI_MAXLOC: return OpKind::kMaxloc;
    default: return std::nullopt;
  }
}

// Checks communicator, count, datatype, peer and tag as MPI does. `recv`:
// MPI_ANY_SOURCE and MPI_ANY_TAG are allowed. Returns MPI_SUCCESS or the code.
int Check(MPI_Comm comm, const char* fn, int64_t count, MPI_Datatype type, int peer, int tag, bool recv, Args* a) {
  int rc = MPI_SUCCESS;
  a->comm = peer == kCollective ? IntraOf(comm, fn, &rc) : CommOf(comm, fn, &rc);
  if (a->comm == nullptr) return rc;
  if (peer == kCollective) peer = MPI_PROC_NULL;
  const CommSlot* slot = CommSlotOf(comm);
  const int peers = slot->inter ? slot->remote_size : a->comm->size();
  a->offset = slot->inter ? slot->remote_offset : 0;
  a->peer = peer >= 0 ? peer + a->offset : peer;
  if (count < 0) return Error(comm, fn, MPI_ERR_COUNT, absl::StrFormat("negative count %d", count));
  a->type = TypeOf(type);
  if (a->type == nullptr) {
    return Error(comm, fn, MPI_ERR_TYPE,
                 absl::StrFormat("datatype 0x%08x is not a datatype (predefined, or made and not freed)",
                                 static_cast<unsigned>(type)));
  }
  if (const TypeSlot* made = TypeSlotOf(type); made != nullptr && !made->committed) {
    return Error(comm, fn, MPI_ERR_TYPE,
                 absl::StrFormat("datatype 0x%08x (%s) is not committed (MPI_Type_commit)", static_cast<unsigned>(type),
                                 a->type->name()));
  }
  const bool any = recv && peer == MPI_ANY_SOURCE;
  if (peer != MPI_PROC_NULL && !any && (peer < 0 || peer >= peers)) {
    return Error(comm, fn, MPI_ERR_RANK,
                 absl::StrFormat("rank %d: no such rank in a %scommunicator of %d", peer,
                                 slot->inter ? "remote group of an inter" : "", peers));
  }
  if (!(recv && tag == MPI_ANY_TAG) && (tag < 0 || tag > cartage::kMaxTag)) {
    return Error(comm, fn, MPI_ERR_TAG, absl::StrFormat("tag %d is outside 0..%d", tag, cartage::kMaxTag));
  }
  return MPI_SUCCESS;
}

void SetStatus(MPI_Status* status, int source, int tag, uint64_t bytes) {
  if (status == MPI_STATUS_IGNORE) return;
  status->MPI_SOURCE = source;
  status->MPI_TAG = tag;
  status->count_lo = static_cast<int>(bytes & 0xffffffffu);
  status->count_hi_and_cancelled = static_cast<int>((bytes >> 32) << 1);  // bit 0: cancelled (requests.cc sets it)
}

void SetEmptyStatus(MPI_Status* status) { SetStatus(status, MPI_PROC_NULL, MPI_ANY_TAG, 0); }

// ---- Requests ----------------------------------------------------------------

// A new request slot and its handle.
Slot* NewSlot(MPI_Request* handle) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  // Orphans whose operations have completed go back first (no progress here).
  for (std::size_t k = 0; k < s.orphans.size();) {
    const int o = s.orphans[k];
    if (!Completed(*s.slots[static_cast<std::size_t>(o)])) {
      ++k;
      continue;
    }
    Retire(*s.slots[static_cast<std::size_t>(o)]);
    s.slots[static_cast<std::size_t>(o)]->used = false;
    s.free_slots.push_back(o);
    s.orphans[k] = s.orphans.back();
    s.orphans.pop_back();
  }
  const int i = TakeSlot(s.slots, s.free_slots);
  Slot* slot = s.slots[static_cast<std::size_t>(i)].get();
  slot->used = true;
  slot->proc_null = false;
  slot->persistent = false;
  slot->active = false;
  slot->recv = false;
  slot->offset = 0;
  slot->then = nullptr;
  slot->also.reset();
  slot->kept.clear();
  slot->start = nullptr;
  slot->greq.reset();
  *handle = kRequestBase | i;
  return slot;
}

Slot* ActiveSlot(MPI_Request handle, const char* fn, int* rc) {
  State& s = S();
  if ((handle & ~0x03ffffff) == kRequestBase) {
    const auto i = static_cast<std::size_t>(handle & 0x03ffffff);
    std::lock_guard<std::mutex> lock(s.mu);
    if (i < s.slots.size() && s.slots[i]->used) return s.slots[i].get();
  }
  *rc = Error(MPI_COMM_WORLD, fn, MPI_ERR_REQUEST,
              absl::StrFormat("request 0x%08x is not an active request", static_cast<unsigned>(handle)));
  return nullptr;
}

void FreeSlot(MPI_Request* handle) {
  State& s = S();
  const int i = *handle & 0x03ffffff;
  std::lock_guard<std::mutex> lock(s.mu);
  s.slots[static_cast<std::size_t>(i)]->used = false;
  s.free_slots.push_back(i);
  *handle = MPI_REQUEST_NULL;
}

bool Completed(const Slot& slot) {
  if (slot.greq != nullptr) return slot.greq->complete.load(std::memory_order_acquire);
  return (slot.proc_null || slot.req.completed()) && (!slot.also.has_value() || slot.also->completed());
}

void Retire(Slot& slot) {
  // Completed: each Wait returns at once; errors have nobody left to hear them.
  (void)slot.req.Wait();
  if (slot.also.has_value()) (void)slot.also->Wait();
  if (slot.greq != nullptr) (void)slot.greq->free(slot.greq->extra);
}

void OrphanSlot(MPI_Request* handle) {
  State& s = S();
  const int i = *handle & 0x03ffffff;
  std::lock_guard<std::mutex> lock(s.mu);
  s.orphans.push_back(i);
  *handle = MPI_REQUEST_NULL;
}

void WaitOrphans() {
  State& s = S();
  std::vector<int> orphans;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    orphans.swap(s.orphans);
  }
  for (const int o : orphans) {
    Slot& slot = *s.slots[static_cast<std::size_t>(o)];
    while (!Completed(slot)) {
      (void)s.agent->Progress();
      std::this_thread::yield();
    }
    Retire(slot);
    MPI_Request handle = kRequestBase | o;
    FreeSlot(&handle);
  }
}

}  // namespace cartage::mpi_binding
