// The MPI binding's bookkeeping (handles.cc): the process's MPI state, the
// request table, error codes and their texts, and the cartage object each
// handle names. Internal to the binding; programs see only mpi.h.
#ifndef CARTAGE_MPI_HANDLES_H_
#define CARTAGE_MPI_HANDLES_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "cartage/cartage.h"
#include "cartage/collectives.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {

enum class Phase { kBefore, kRunning, kAfter };

// One slot of the request table; a handle names it by index.
struct Slot {
  cartage::Request req;
  bool used = false;
  bool proc_null = false;  // to or from MPI_PROC_NULL: complete at once, moves nothing
  bool recv = false;
  bool persistent = false;  // MPI_Send_init, MPI_Recv_init: kept when complete
  bool active = false;      // persistent: started and not yet completed
  MPI_Comm comm = MPI_COMM_WORLD;  // whose error handler its completion answers to
  int offset = 0;                  // a status's source is the rank there less this (Args::offset)
  // Run once the operation completed without error, its code the call's
  // (MPI_Comm_idup makes its communicator then).
  std::function<int()> then;
  // MPI_Isendrecv: the send that goes with the receive in `req`; the
  // request completes once both have. `kept`: what a _replace form sends.
  std::optional<cartage::Request> also;
  std::vector<std::byte> kept;
  // A persistent request the binding starts itself (MPI_Bsend_init,
  // MPI_Ssend_init): MPI_Start runs it instead of `req.Start()`.
  std::function<int()> start;
  // A generalized request (MPI_Grequest_start): the program's functions,
  // and whether MPI_Grequest_complete was called (from any thread).
  struct Generalized {
    MPI_Grequest_query_function* query = nullptr;
    MPI_Grequest_free_function* free = nullptr;
    MPI_Grequest_cancel_function* cancel = nullptr;
    void* extra = nullptr;
    std::atomic<bool> complete{false};
  };
  std::unique_ptr<Generalized> greq;
};

// A message a matched probe took out of matching (MPI_Mprobe; handle
// 0xb0000000 | slot), with the communicator it came on.
struct MessageSlot {
  std::optional<cartage::Message> message;  // empty: a free slot
  MPI_Comm comm = MPI_COMM_NULL;
  int offset = 0;  // Args::offset of that communicator
};

// A reduction operator the program made (MPI_Op_create; handle 0x98000000 | slot).
struct OpSlot {
  MPI_User_function* fn = nullptr;  // null: a free slot
  bool commutative = true;
};

// Attributes: (keyval, value) in the order they were set (attributes.cc).
using Attrs = std::vector<std::pair<int, void*>>;

// One communicator: MPI_COMM_WORLD (slot 0), MPI_COMM_SELF (1), and those
// dup and split make (handle 0x84000000 | slot, as MPICH's direct ones).
struct CommSlot {
  std::optional<cartage::Comm> comm;  // empty: a free slot
  MPI_Errhandler handler = MPI_ERRORS_ARE_FATAL;
  std::string name;                   // MPI_Comm_set_name
  Attrs attrs;
  // An intercommunicator: `comm` spans both groups (cartage::Comm::Joined);
  // a local rank r is local_offset + r there, a remote one remote_offset + r.
  bool inter = false;
  std::optional<cartage::Comm> bridge;  // both groups, for its collectives' schedules (intercoll.cc)
  int local_offset = 0;
  int local_size = 0;
  int remote_offset = 0;
  int remote_size = 0;
  // A Cartesian topology (topology.cc): its grid, row-major.
  bool cart = false;
  std::vector<int> dims;
  std::vector<bool> periods;
};

// What MPI_Type_get_envelope and _get_contents tell of a made type: how
// it was made, and the integers, addresses and types its constructor took.
// A made type named here is held (TypeSlot::refs) while this type lives.
struct Envelope {
  int combiner = MPI_COMBINER_NAMED;
  std::vector<int> ints;
  std::vector<MPI_Aint> addresses;
  std::vector<MPI_Datatype> types;
};

// A datatype a program made (handle 0xcc000000 | slot).
struct TypeSlot {
  std::optional<Datatype> type;  // empty: a free slot
  bool committed = false;        // only a committed type may move data
  Envelope envelope;
  int align = 1;                 // the strictest alignment of the basic types in it
  bool bounds = false;           // made by MPI_Type_create_resized, or holds such a type
  bool native_long = false;      // holds MPI_LONG, MPI_UNSIGNED_LONG or MPI_WCHAR (external32 differs: external.cc)
  std::string name;              // MPI_Type_set_name
  Attrs attrs;
  // The program's handle, the types made from this one and the copies
  // MPI_Type_get_contents handed out: the slot goes back at none.
  int refs = 0;
};

// A group: world ranks, in the group's order (handle 0x88000000 | slot;
// MPI_GROUP_EMPTY has none).
struct GroupSlot {
  std::optional<std::vector<int>> world;  // empty: a free slot
};

// An info object: keys and values in the order they were first set
// (handle 0x9c000000 | slot).
struct InfoSlot {
  std::optional<std::vector<std::pair<std::string, std::string>>> pairs;  // empty: a free slot
};

// A session (MPI_Session_init; handle 0xb8000000 | slot).
struct SessionSlot {
  bool used = false;
  MPI_Errhandler handler = MPI_ERRORS_ARE_FATAL;
};

struct State {
  // The runtime's phase: running from the first of MPI_Init and
  // MPI_Session_init until the last of MPI_Finalize and the sessions'
  // ends. MPI_Initialized and MPI_Finalized tell of the world model alone.
  Phase phase = Phase::kBefore;
  bool world_started = false;    // MPI_Init (or _thread) was called
  bool world_finalized = false;  // and MPI_Finalize
  std::vector<SessionSlot> sessions;
  int live_sessions = 0;
  std::unique_ptr<cartage::Agent> agent;
  std::thread::id main_thread;  // the one that called MPI_Init (MPI_Is_thread_main)
  int world_rank = -1;
  // The world's ranks on a context of the binding's own, where the groups
  // of MPI_Intercomm_create_from_groups meet (no program's traffic is there).
  std::optional<cartage::Comm> own_world;
  std::mutex mu;  // the tables and the error messages (MPI_THREAD_MULTIPLE)
  std::vector<std::unique_ptr<CommSlot>> comms;
  std::vector<int> free_comms;
  std::vector<std::unique_ptr<TypeSlot>> types;
  std::map<MPI_Datatype, std::string> predefined_names;  // MPI_Type_set_name of a predefined type
  std::vector<int> free_types;
  std::vector<std::unique_ptr<GroupSlot>> groups;
  std::vector<int> free_groups;
  std::vector<std::unique_ptr<InfoSlot>> infos;
  std::vector<int> free_infos;
  std::vector<std::unique_ptr<MessageSlot>> messages_probed;
  std::vector<int> free_messages;
  std::vector<std::unique_ptr<OpSlot>> ops;
  std::vector<int> free_ops;
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<int> free_slots;
  std::vector<int> orphans;  // freed by MPI_Request_free while still active
  std::vector<std::string> messages;  // an error code's text, by the code's upper bits
  std::vector<MPI_Comm_errhandler_function*> handlers;  // the program's (0x94000000 | index; null: freed)
  // MPI_Add_error_class's texts, from kFirstUserClass, and MPI_Add_error_code's,
  // from index kFirstUserCode; empty where MPIX_Delete_error_* let one go
  // (the next added takes it).
  struct AddedCode {
    int cls = 0;
    std::string text;
  };
  std::vector<std::optional<std::string>> user_classes;
  std::vector<std::optional<AddedCode>> user_codes;
  std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
};

constexpr int kRequestBase = static_cast<int>(0xac000000u);  // MPICH's direct request handles
constexpr int kCommBase = static_cast<int>(0x84000000u);     // and communicator handles
constexpr int kTypeBase = static_cast<int>(0xcc000000u);     // the program's datatypes
constexpr int kGroupBase = static_cast<int>(0x88000000u);    // groups
constexpr int kInfoBase = static_cast<int>(0x9c000000u);     // info objects
constexpr int kOpBase = static_cast<int>(0x98000000u);       // the program's reduction operators
constexpr int kMessageBase = static_cast<int>(0xb0000000u);  // matched messages
constexpr int kClassBits = 7;                                 // an error code: class | message index << 7
constexpr std::size_t kMessages = 1024;                       // texts kept for MPI_Error_string
constexpr int kHandlerBase = static_cast<int>(0x94000000u);  // the program's error handlers
constexpr int kSessionBase = static_cast<int>(0xb8000000u);  // sessions
constexpr int kFirstUserClass = 78;                          // above MPICH's last class (77)
constexpr int kFirstUserCode = 1 << 20;                      // message index of the first added code

// The process's state (never destroyed: calls may come from atexit handlers).
State& S();

// A free slot of `table` (one given back, or a new one); s.mu held.
template <class T>
int TakeSlot(std::vector<std::unique_ptr<T>>& table, std::vector<int>& free) {
  if (!free.empty()) {
    const int i = free.back();
    free.pop_back();
    return i;
  }
  table.push_back(std::make_unique<T>());
  return static_cast<int>(table.size()) - 1;
}

// ---- Errors -------------------------------------------------------------------

// A class's text ("invalid rank"; an added class's, or "").
std::string ClassName(int cls);
// The largest error code or class in use (MPI_LASTUSEDCODE).
int LastUsedCode();
// The error handler a program made that a handle names, or null.
MPI_Comm_errhandler_function* UserHandler(MPI_Errhandler handler);
// MPI_SUCCESS for a predefined error handler or one the program made and
// has not freed, else an error of `fn` (errors.cc).
int HandlerArg(MPI_Errhandler h, const char* fn);
// Ends the job: MPI_Abort, and an error under MPI_ERRORS_ARE_FATAL.
[[noreturn]] void AbortJob(int code);
// An error of `cls` in `fn` on `comm`: fatal by default; under
// MPI_ERRORS_RETURN a code whose text (MPI_Error_string) is `what`.
int Error(MPI_Comm comm, const char* fn, int cls, const std::string& what);
// A cartage status as an MPI error of `fn` (MPI_SUCCESS if ok).
int FromStatus(MPI_Comm comm, const char* fn, const absl::Status& st);

// ---- Handles ------------------------------------------------------------------

// The communicator a handle names, or null with an error code in `*rc`.
const cartage::Comm* CommOf(MPI_Comm comm, const char* fn, int* rc);
// The same for a call an intercommunicator does not take (collectives, split).
const cartage::Comm* IntraOf(MPI_Comm comm, const char* fn, int* rc);
// Its slot (null for a handle that names none; MPI must be running).
CommSlot* CommSlotOf(MPI_Comm comm);
// A handle for `comm`, which answers to `handler`.
MPI_Comm NewComm(cartage::Comm comm, MPI_Errhandler handler);
// Gives a made communicator's slot back; the handle becomes MPI_COMM_NULL.
void FreeComm(MPI_Comm* comm);
// The cartage type a datatype handle names (predefined or made, committed
// or not), or null.
const Datatype* TypeOf(MPI_Datatype type);
// The same, or null with an error code of `fn` in `*rc` (a call with no
// communicator: MPI_COMM_WORLD's handler).
const Datatype* TypeArg(MPI_Datatype type, const char* fn, int* rc);
// The alignment a type's data needs: its C type's for a predefined one
// (alignof), the strictest of its parts' for a made one.
int AlignOf(MPI_Datatype type);
// Whether a type is or holds MPI_LONG, MPI_UNSIGNED_LONG, MPI_WCHAR or
// MPI_LONG_INT, whose external32 widths differ from this machine's.
bool NativeLong(MPI_Datatype type);
// A made type's slot (null for any other handle).
TypeSlot* TypeSlotOf(MPI_Datatype type);
// A handle for a type the program made (not committed yet), and how.
MPI_Datatype NewType(Datatype type, Envelope envelope = {});
// Lets go of the program's hold of a made type (the handle becomes
// MPI_DATATYPE_NULL); its slot goes back once no other type holds it.
void FreeType(MPI_Datatype* type);
// One more hold of a made type (MPI_Type_get_contents hands it out).
void HoldType(MPI_Datatype type);
// The reduction of a predefined operator handle.
std::optional<OpKind> OpOf(MPI_Op op);

// What a point-to-point call passes on, once checked.
struct Args {
  const cartage::Comm* comm = nullptr;
  const Datatype* type = nullptr;
  int peer = 0;    // the peer as a rank of `comm` (a remote rank of an intercommunicator, offset)
  int offset = 0;  // what a remote rank is offset by: a status's source is the rank less this
};

// Checks communicator, count, datatype (committed), peer and tag as MPI
// does. `recv`: MPI_ANY_SOURCE and MPI_ANY_TAG are allowed. `peer`
// kCollective: a collective call, which an intercommunicator refuses.
// Returns MPI_SUCCESS or the code.
constexpr int kCollective = -100;
int Check(MPI_Comm comm, const char* fn, int64_t count, MPI_Datatype type, int peer, int tag, bool recv, Args* a);

inline int SourceArg(int peer) { return peer == MPI_ANY_SOURCE ? cartage::kAnySource : peer; }
inline int TagArg(int tag) { return tag == MPI_ANY_TAG ? cartage::kAnyTag : tag; }

// A completed operation's status; MPI_ERROR is left as it is (as MPI: only
// the calls that complete several set it, where one of them failed).
void SetStatus(MPI_Status* status, int source, int tag, uint64_t bytes);
// The status of an operation with MPI_PROC_NULL.
void SetEmptyStatus(MPI_Status* status);
// The empty status MPI gives for a null or inactive request.
inline void SetInactiveStatus(MPI_Status* status) { SetStatus(status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0); }

// ---- Requests -----------------------------------------------------------------

// A new request slot and its handle.
Slot* NewSlot(MPI_Request* handle);
// The slot an active request's handle names, or null with an error code
// of `fn` in `*rc`.
Slot* ActiveSlot(MPI_Request handle, const char* fn, int* rc);
// Gives the slot back; the handle becomes MPI_REQUEST_NULL.
void FreeSlot(MPI_Request* handle);
// Whether an active slot's operations have all completed, without
// progressing (the receive and an MPI_Isendrecv's send; a generalized
// request once MPI_Grequest_complete was called).
bool Completed(const Slot& slot);
// Lets go of a completed slot whose request nobody waits for (freed by
// MPI_Request_free): its errors have nobody to hear them; a generalized
// request's free function runs.
void Retire(Slot& slot);

// A point-to-point request: checked, given a slot and posted (binding.cc);
// to or from MPI_PROC_NULL it moves nothing and completes at once.
enum class Posted : uint8_t { kSend, kSsend, kRecv, kSendInit, kSsendInit, kRecvInit };
int Post(const void* buf, int64_t count, MPI_Datatype type, int peer, int tag, MPI_Comm comm, MPI_Request* request,
         const char* fn, Posted what);
// Runs the copy callbacks of `from`'s attributes onto `to` (a duplicate;
// `comm`: communicators, else datatypes), and the delete callbacks of all
// of `handle`'s, newest first (it is freed); an error from a callback is
// returned (attributes.cc).
int CopyAttrs(int from, int to, bool comm, const char* fn);
int DeleteAttrs(int handle, bool comm, const char* fn);
// The value of a predefined attribute of a communicator (MPI_TAG_UB, ...), or null.
const int* PredefinedAttr(int keyval);

// A collective on an intercommunicator (intercoll.cc): what its call
// passed (a type MPI_DATATYPE_NULL where that side means nothing here).
struct InterCall {
  MPI_Comm comm = MPI_COMM_NULL;
  const char* fn = "";
  Collective kind = Collective::kBarrier;
  const void* send = nullptr;
  int64_t count = 0;  // sent (or, Bcast and the reductions, the one count)
  MPI_Datatype send_type = MPI_DATATYPE_NULL;
  void* recv = nullptr;
  int64_t recv_count = 0;
  MPI_Datatype recv_type = MPI_DATATYPE_NULL;
  int root = 0;  // MPI_ROOT, MPI_PROC_NULL, or a rank of the other group
  std::optional<Op> op;
  std::vector<int64_t> send_counts, send_displs, recv_counts, recv_displs;  // by remote rank
  std::vector<MPI_Datatype> send_types, recv_types;  // alltoallw: by remote rank (displacements in bytes)
};
// The schedule of an intercommunicator's collective call, on its bridge;
// MPI_SUCCESS or the code.
int InterSchedule(const InterCall& call, std::shared_ptr<Schedule>* out);
// A schedule step of `count` elements of `t` at `p` to or from `peer`,
// packed through a temporary where `t` is not contiguous (intercoll.cc).
VertexId SendTyped(ScheduleBuilder& b, const void* p, int64_t count, const Datatype& t, int peer,
                   std::vector<VertexId> after = {});
VertexId RecvTyped(ScheduleBuilder& b, void* p, int64_t count, const Datatype& t, int peer,
                   std::vector<VertexId> after = {});
// Gives a new intercommunicator its `bridge` (collective over both groups).
int MakeInter(MPI_Comm handle, const char* fn);

// MPI_SUCCESS for MPI_INFO_NULL or an info object, else an error of `fn` (info.cc).
int InfoCheck(MPI_Info info, const char* fn);

// MPI_Comm_split of an intercommunicator (groups.cc).
int SplitInter(MPI_Comm comm, int color, int key, MPI_Comm* newcomm);
// MPI_Request_free of an active request: the handle becomes
// MPI_REQUEST_NULL, and the slot goes back once its operation completes
// (NewSlot looks; MPI_Finalize waits for the rest).
void OrphanSlot(MPI_Request* handle);
// Waits for every orphaned operation (MPI_Finalize).
void WaitOrphans();
// Starts the runtime (MPI_Init, or the first session; binding.cc), and
// stops it once neither the world model nor a session needs it.
void StartRuntime(std::optional<cartage::ThreadLevel> level, const char* fn);
int StopRuntime(const char* fn);
// A group handle for world ranks, and the world ranks a group handle
// names, or null with an error of `fn` in `*rc` (groups.cc).
MPI_Group NewGroup(std::vector<int> world);
const std::vector<int>* GroupArg(MPI_Group group, const char* fn, int* rc);
// Waits for every buffered send still in the attached buffer (buffered.cc).
void FlushBuffered();

}  // namespace cartage::mpi_binding

// Each call is PMPI_<name>, and MPI_<name> a weak alias of it: a tool that
// defines MPI_<name> itself interposes and calls PMPI_<name>.
#define CARTAGE_MPI_ALIAS(name) extern "C" __attribute__((weak, alias("P" #name))) decltype(P##name) name

#endif  // CARTAGE_MPI_HANDLES_H_
