// One-sided communication (RMA): windows of memory that the other ranks of a
// communicator put into, get from and accumulate into, inside epochs opened
// and closed by fences (MPI-3.1's active target), by a start and its
// complete towards a group of targets that posted, or by locks.
//
//   auto win = cartage::Window::Allocate(world, n * sizeof(double), sizeof(double));
//   CARTAGE_CHECK_OK((*win)->Fence());                      // opens the first epoch
//   CARTAGE_CHECK_OK((*win)->Put(x, n * sizeof(double), right, 0));
//   CARTAGE_CHECK_OK((*win)->Accumulate(x, n, dbl, 0, 0, n, dbl, cartage::Op(cartage::OpKind::kSum)));
//   CARTAGE_CHECK_OK((*win)->Fence());                      // every operation of the epoch is done
//   CARTAGE_CHECK_OK((*win)->Free());
//
// Every operation is a chain of CARs (seed 002): at the origin an rma_op
// machine over the sends and receives that carry it; at the target the
// operation's control message makes an rma_serve machine whose receive
// lands a put's data straight in the window, or whose send carries a get's
// (or a fetch's) data back; the window's epochs are an rma_epoch machine (diagrams/).
// The target's agent serves operations whenever it makes progress (any
// wait or test, and every fence), so in an active-target epoch no rank
// waits on one that computes: every rank reaches the fence. A window whose
// ranks are all on one host, made by Allocate or AllocateShared, is shared
// instead: every rank maps every other's memory, an operation is a
// transition of the same rma_op whose action is the origin's own copy or
// accumulate, and the target serves nothing. A window over the caller's
// memory on one host is single-copy: a put or get of 2 KiB or more is the
// origin's one process_vm_writev or readv into the target's memory.
//
// A displacement counts in the target's displacement unit; the origin
// knows every rank's window size and unit (exchanged at creation) and
// refuses an access outside the target's window before anything moves,
// naming window, target, displacement and size; the target checks again.
// Within one epoch, operations from one origin to one target are applied
// in the order they were issued, so accumulates to one location are
// ordered, and each element of an accumulate is applied whole.
#ifndef CARTAGE_RMA_INCLUDE_CARTAGE_RMA_H_
#define CARTAGE_RMA_INCLUDE_CARTAGE_RMA_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "cartage/cartage.h"
#include "datatype/op.h"

namespace cartage {

namespace rma {
class WindowState;
struct Access;
}  // namespace rma

// An accumulate's operator: a predefined reduction of datatype/op.h, or one
// of MPI's two one-sided ones, Replace (MPI_REPLACE) and NoOp (MPI_NO_OP: a
// fetch that changes nothing, for GetAccumulate and FetchAndOp).
class RmaOp {
 public:
  RmaOp(const datatype::Op& op) : code_(static_cast<uint8_t>(op.kind())) {}  // NOLINT: a reduction is one
  static RmaOp Replace() { return RmaOp(0xf0); }
  static RmaOp NoOp() { return RmaOp(0xf1); }
  // The reduction's datatype::OpKind, or 0xf0 (replace), 0xf1 (no-op).
  uint8_t code() const { return code_; }

 private:
  explicit RmaOp(uint8_t code) : code_(code) {}
  uint8_t code_;
};

class Window {
 public:
  // A window over `bytes` bytes of the caller's memory at `base`
  // (collective over `comm`: every rank calls it, in the same order as its
  // other collective calls; a rank may expose 0 bytes). `disp_unit` > 0.
  // Where every rank is on one host and may reach the others' memory, it
  // is single-copy (single_copy() below).
  static absl::StatusOr<std::unique_ptr<Window>> Create(const Comm& comm, void* base, uint64_t bytes,
                                                        int disp_unit = 1);
  // A window over `bytes` bytes cartage allocates (64-byte aligned, zeroed),
  // freed with the window.
  // Where every rank is on one host, the window is shared, as
  // AllocateShared's, whatever method carries the ranks' messages (each
  // rank's memory then starts on a 64-byte boundary of one segment).
  static absl::StatusOr<std::unique_ptr<Window>> Allocate(const Comm& comm, uint64_t bytes, int disp_unit = 1);
  // A window every rank maps (MPI_Win_allocate_shared): `bytes` zeroed
  // bytes here, right after the previous rank's, in one segment of the
  // host that every rank loads from and stores to directly (SharedQuery
  // gives each rank's address). Its operations are the origin's own loads,
  // stores and accumulates (under the target's accumulate word, so each
  // applies whole); its locks are words in the segment; a fence is a
  // barrier. Nothing is served by the target's agent. Fails, on every
  // rank, where some rank cannot map the others' memory (another host,
  // CARTAGE_RMA_SHARED=0).
  static absl::StatusOr<std::unique_ptr<Window>> AllocateShared(const Comm& comm, uint64_t bytes,
                                                                int disp_unit = 1);
  // A window with no memory yet (MPI_Win_create_dynamic): each rank
  // attaches regions of its own memory (Attach) and detaches them, and an
  // operation's displacement is an address at the target (Address(p)
  // there, which the program passes on), in bytes. Only the target knows
  // its regions: it refuses an access that lies in none, naming it, and
  // that refusal fails its fence, wait or the operation's flush there.
  // Never shared; served by the target's agent like a Create window's.
  static absl::StatusOr<std::unique_ptr<Window>> CreateDynamic(const Comm& comm);
  // `bytes` of this rank's memory at `base`, apart from every region
  // attached already, reachable from now on; Detach takes the region
  // attached at `base` away (no operation may be reaching it then).
  absl::Status Attach(void* base, uint64_t bytes);
  absl::Status Detach(const void* base);
  // `p` as a dynamic window's displacement (MPI_Get_address).
  static uint64_t Address(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }
  // Whether the window is dynamic.
  bool dynamic() const;
  // Whether its puts and gets of 2 KiB or more are the origin's own copies
  // into the target's memory (process_vm_writev and readv), with no
  // message, once the epoch, lock or start reaches the target: a Create
  // window whose ranks are all on one host and may reach each other's
  // memory (not with CARTAGE_RMA_SHARED=0). Smaller ones, and its
  // accumulates, are served by the target's agent.
  bool single_copy() const;
  // Whether its puts and gets whose target data is one block are the
  // method's own one-sided writes and reads (ofi on a provider with
  // FI_RMA: `tcp;ofi_rxm`), with nothing for the target's agent to do: a
  // window neither shared nor single-copy (ranks on several hosts, or
  // CARTAGE_RMA_SHARED=0) whose ranks one such method carries. Not with
  // CARTAGE_OFI_RMA=0. Its other operations are served.
  bool one_sided() const;

  // Not freed by Free(): its service stops here, locally (operations other
  // ranks still send to it are not served).
  ~Window();
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;

  // `origin_count` elements of `origin_type` at `origin`, into the target's
  // window at `disp` (in its displacement unit) as `target_count` elements
  // of `target_type`: the two must hold the same number of bytes. Returns
  // once the operation is issued; the next Fence completes it (the origin
  // buffer may be reused only then).
  absl::Status Put(const void* origin, int64_t origin_count, const Datatype& origin_type, int target, uint64_t disp,
                   int64_t target_count, const Datatype& target_type);
  absl::Status Put(const void* origin, std::size_t bytes, int target, uint64_t disp);
  // The reverse: the target's data lands at `origin` by the next Fence.
  absl::Status Get(void* origin, int64_t origin_count, const Datatype& origin_type, int target, uint64_t disp,
                   int64_t target_count, const Datatype& target_type);
  absl::Status Get(void* origin, std::size_t bytes, int target, uint64_t disp);
  // target = origin op target, element by element (`op` a predefined
  // operator, defined on the target type's one basic type, or Replace).
  absl::Status Accumulate(const void* origin, int64_t origin_count, const Datatype& origin_type, int target,
                          uint64_t disp, int64_t target_count, const Datatype& target_type, RmaOp op);
  // Accumulate that also fetches: `result` gets the target's data as it
  // was just before, and nothing comes between (NoOp: only fetches; the
  // origin is then not read).
  absl::Status GetAccumulate(const void* origin, int64_t origin_count, const Datatype& origin_type, void* result,
                             int64_t result_count, const Datatype& result_type, int target, uint64_t disp,
                             int64_t target_count, const Datatype& target_type, RmaOp op);
  // GetAccumulate of one element of the basic type `type`.
  absl::Status FetchAndOp(const void* origin, void* result, const Datatype& type, int target, uint64_t disp,
                          RmaOp op);
  // One element of an integer, logical or byte type: `result` gets the
  // target's value, which becomes `*origin` if it equalled `*compare`.
  absl::Status CompareAndSwap(const void* origin, const void* compare, void* result, const Datatype& type,
                              int target, uint64_t disp);

  // The same, each with a request that completes as the operation ends
  // here (MPI's Rput, Rget, Raccumulate, Rget_accumulate; a null `req`: as
  // the calls above, with no request): a put's or
  // accumulate's origin buffer is free again, a get's data is in. Its
  // completion at the target still takes a flush, an unlock or a fence.
  absl::Status Rput(const void* origin, int64_t origin_count, const Datatype& origin_type, int target, uint64_t disp,
                    int64_t target_count, const Datatype& target_type, Request* req);
  absl::Status Rget(void* origin, int64_t origin_count, const Datatype& origin_type, int target, uint64_t disp,
                    int64_t target_count, const Datatype& target_type, Request* req);
  absl::Status Raccumulate(const void* origin, int64_t origin_count, const Datatype& origin_type, int target,
                           uint64_t disp, int64_t target_count, const Datatype& target_type, RmaOp op, Request* req);
  absl::Status RgetAccumulate(const void* origin, int64_t origin_count, const Datatype& origin_type, void* result,
                              int64_t result_count, const Datatype& result_type, int target, uint64_t disp,
                              int64_t target_count, const Datatype& target_type, RmaOp op, Request* req);

  // Closes the epoch (every operation this rank issued is done, and every
  // operation issued to it is applied) and opens the next (collective).
  // The first fence opens the first epoch. An operation that failed fails
  // the fence, naming it.
  absl::Status Fence();
  // General active target (MPI's post, start, complete, wait, test), for
  // ranks that synchronise with a few others rather than all: Post exposes
  // this rank's window to `origins` (and returns at once); Start opens an
  // access epoch to `targets`, returning once each of them posted;
  // Complete closes it once this rank's operations are done here and each
  // target was told how many it was sent; Wait returns once every origin
  // of the post completed and each of its operations landed here (Test:
  // whether that is so now, after one round of progress). A rank may
  // expose its window and start an access epoch at once (post, start,
  // operations, complete, wait); a group lists ranks of the window's
  // communicator, each once. An operation that failed fails Complete (at
  // the origin) or Wait (at the target), naming it; a dead member of a
  // group fails Start, Complete or Wait, naming it.
  absl::Status Post(absl::Span<const int> origins);
  absl::Status Start(absl::Span<const int> targets);
  absl::Status Complete();
  absl::Status Wait();
  absl::StatusOr<bool> Test();

  // Passive target: a lock on `target`'s window opens an access epoch to
  // it (granted before Lock returns: shared with other shared holders, or
  // exclusive), Unlock closes it once every operation to `target` is done
  // there. The target need not call anything; it serves the epoch whenever
  // it makes progress, and while it computes only with a progress thread
  // (CARTAGE_PROGRESS_THREAD=1). LockAll takes a shared lock on every rank.
  enum class LockType : uint8_t { kShared, kExclusive };
  absl::Status Lock(int target, LockType type = LockType::kShared);
  absl::Status Unlock(int target);
  absl::Status LockAll();
  absl::Status UnlockAll();
  // Inside a lock: every operation to `target` done there (Flush), or only
  // here, the origin buffers free again and fetched data in (FlushLocal).
  absl::Status Flush(int target);
  absl::Status FlushAll();
  absl::Status FlushLocal(int target);
  absl::Status FlushLocalAll();

  // Frees the window (collective; after the last epoch closed: a fence,
  // or every lock released).
  absl::Status Free();

  // A shared window's memory of `rank`, mapped here (MPI_Win_shared_query).
  struct SharedMemory {
    void* base = nullptr;
    uint64_t bytes = 0;
    int disp_unit = 1;
  };
  absl::StatusOr<SharedMemory> SharedQuery(int rank) const;
  // Orders this rank's loads and stores of the window against the other
  // ranks' (MPI_Win_sync): a full memory barrier. An error once freed.
  absl::Status Sync() const;
  // Whether the window is shared (AllocateShared, or Allocate on one host).
  bool shared() const;

  void* base() const;
  uint64_t bytes() const;
  int disp_unit() const;
  // The window's epoch state (rma_epoch: "idle", "open", "fencing",
  // "passive", "starting", "started", "completing", "failed", "freed") and
  // its exposure to a group (rma_exposure: "idle", "posted", "failed",
  // "closed"), for inspection.
  absl::string_view state() const;
  absl::string_view exposure() const;
  // Operations this rank served as a target, and those it issued, since the window was made.
  uint64_t served() const;
  uint64_t issued() const;
  // Control messages this rank sent (served windows): each carries, in one
  // batch, the operations and lock requests issued to one target since its
  // last (a series of small ones goes as one).
  uint64_t control_messages() const;

 private:
  explicit Window(std::shared_ptr<rma::WindowState> state);
  absl::Status Issue(const char* what, const rma::Access& a, Request* req = nullptr);
  enum class Memory : uint8_t { kCallers, kAllocated, kShared, kDynamic };
  static absl::StatusOr<std::unique_ptr<Window>> Make(const Comm& comm, void* base, uint64_t bytes, int disp_unit,
                                                      Memory memory);
  std::shared_ptr<rma::WindowState> state_;
};

}  // namespace cartage

#endif  // CARTAGE_RMA_INCLUDE_CARTAGE_RMA_H_
