// The MPI binding's bookkeeping (handles.cc): the process's MPI state, the
// request table, error codes and their texts, and the cartage object each
// handle names. Internal to the binding; programs see only mpi.h.
#ifndef CARTAGE_MPI_HANDLES_H_
#define CARTAGE_MPI_HANDLES_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
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
};

// One communicator: MPI_COMM_WORLD (slot 0), MPI_COMM_SELF (1), and those
// dup and split make (handle 0x84000000 | slot, as MPICH's direct ones).
struct CommSlot {
  std::optional<cartage::Comm> comm;  // empty: a free slot
  MPI_Errhandler handler = MPI_ERRORS_ARE_FATAL;
};

// A datatype a program made (handle 0xcc000000 | slot).
struct TypeSlot {
  std::optional<Datatype> type;  // empty: a free slot
  bool committed = false;        // only a committed type may move data
};

struct State {
  Phase phase = Phase::kBefore;
  std::unique_ptr<cartage::Agent> agent;
  int world_rank = -1;
  std::mutex mu;  // the tables and the error messages (MPI_THREAD_MULTIPLE)
  std::vector<std::unique_ptr<CommSlot>> comms;
  std::vector<int> free_comms;
  std::vector<std::unique_ptr<TypeSlot>> types;
  std::vector<int> free_types;
  std::vector<std::unique_ptr<Slot>> slots;
  std::vector<int> free_slots;
  std::vector<int> orphans;  // freed by MPI_Request_free while still active
  std::vector<std::string> messages;  // an error code's text, by the code's upper bits
  std::chrono::steady_clock::time_point epoch = std::chrono::steady_clock::now();
};

constexpr int kRequestBase = static_cast<int>(0xac000000u);  // MPICH's direct request handles
constexpr int kCommBase = static_cast<int>(0x84000000u);     // and communicator handles
constexpr int kTypeBase = static_cast<int>(0xcc000000u);     // the program's datatypes
constexpr int kClassBits = 7;                                 // an error code: class | message index << 7
constexpr std::size_t kMessages = 1024;                       // texts kept for MPI_Error_string

// The process's state (never destroyed: calls may come from atexit handlers).
State& S();

// ---- Errors -------------------------------------------------------------------

// A class's text ("invalid rank").
const char* ClassName(int cls);
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
// A made type's slot (null for any other handle).
TypeSlot* TypeSlotOf(MPI_Datatype type);
// A handle for a type the program made (not committed yet).
MPI_Datatype NewType(Datatype type);
// Gives a made type's slot back; the handle becomes MPI_DATATYPE_NULL.
void FreeType(MPI_Datatype* type);
// The reduction of a predefined operator handle.
std::optional<OpKind> OpOf(MPI_Op op);

// What a point-to-point call passes on, once checked.
struct Args {
  const cartage::Comm* comm = nullptr;
  const Datatype* type = nullptr;
};

// Checks communicator, count, datatype (committed), peer and tag as MPI
// does. `recv`:
// MPI_ANY_SOURCE and MPI_ANY_TAG are allowed. Returns MPI_SUCCESS or the code.
int Check(MPI_Comm comm, const char* fn, int count, MPI_Datatype type, int peer, int tag, bool recv, Args* a);

inline int SourceArg(int peer) { return peer == MPI_ANY_SOURCE ? cartage::kAnySource : peer; }
inline int TagArg(int tag) { return tag == MPI_ANY_TAG ? cartage::kAnyTag : tag; }

void SetStatus(MPI_Status* status, int source, int tag, uint64_t bytes, int error);
// The status of an operation with MPI_PROC_NULL (or MPI_REQUEST_NULL).
void SetEmptyStatus(MPI_Status* status);

// ---- Requests -----------------------------------------------------------------

// A new request slot and its handle.
Slot* NewSlot(MPI_Request* handle);
// The slot an active request's handle names, or null with an error code
// of `fn` in `*rc`.
Slot* ActiveSlot(MPI_Request handle, const char* fn, int* rc);
// Gives the slot back; the handle becomes MPI_REQUEST_NULL.
void FreeSlot(MPI_Request* handle);

// A point-to-point request: checked, given a slot and posted (binding.cc);
// to or from MPI_PROC_NULL it moves nothing and completes at once.
enum class Posted : uint8_t { kSend, kSsend, kRecv, kSendInit, kRecvInit };
int Post(const void* buf, int count, MPI_Datatype type, int peer, int tag, MPI_Comm comm, MPI_Request* request,
         const char* fn, Posted what);
// MPI_Request_free of an active request: the handle becomes
// MPI_REQUEST_NULL, and the slot goes back once its operation completes
// (NewSlot looks; MPI_Finalize waits for the rest).
void OrphanSlot(MPI_Request* handle);
// Waits for every orphaned operation (MPI_Finalize).
void WaitOrphans();

}  // namespace cartage::mpi_binding

// Each call is PMPI_<name>, and MPI_<name> a weak alias of it: a tool that
// defines MPI_<name> itself interposes and calls PMPI_<name>.
#define CARTAGE_MPI_ALIAS(name) extern "C" __attribute__((weak, alias("P" #name))) decltype(P##name) name

#endif  // CARTAGE_MPI_HANDLES_H_
