// A window's state on one rank: its memory and every rank's window size
// (on a shared window, the segment every rank maps), the open epoch, the operations this rank issued (rma_op) and the locks it
// holds on other ranks (rma_access), the lock on its own window (rma_lock),
// and the service that serves the operations issued to it (rma_serve),
// polled by every round of the agent's progress while the window lives.
#ifndef CARTAGE_RMA_WINDOW_STATE_H_
#define CARTAGE_RMA_WINDOW_STATE_H_

#include <sched.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/process_watch.h"
#include "cartage/cartage.h"
#include "cartage/engine.h"
#include "datatype/op.h"
#include "rma/rma_fsm.h"
#include "rma/wire.h"

namespace cartage::rma {

// A batch on its way to one target: its bytes and their send. Each
// operation and request in it holds it until it ends.
struct Packet {
  std::vector<std::byte> bytes;
  Request req;
  absl::Status failure;  // the send could not be posted
  // The send ended (completed, or never posted because it failed): its status.
  absl::Status Result() {
    absl::Status st = req.Wait();  // completed: at once
    st.Update(failure);
    return st;
  }
};

// One operation as its call describes it.
struct Access {
  OpKind kind = OpKind::kPut;
  const void* origin = nullptr;  // what it sends: put, accumulate, the fetches' operand (a get: unused)
  int64_t origin_count = 0;
  const Datatype* origin_type = nullptr;
  void* result = nullptr;        // where what it fetches lands (a get: its origin buffer)
  int64_t result_count = 0;
  const Datatype* result_type = nullptr;
  const void* compare = nullptr;  // compare-and-swap's comparand (one element of origin_type)
  int target = 0;
  uint64_t disp = 0;
  int64_t target_count = 0;
  const Datatype* target_type = nullptr;
  uint8_t op = 0;  // accumulate and the fetches: a reduction's OpKind, kOpReplace or kOpNoOp
};

// A served operation's messages at its origin: its control message, the
// data it sends apart from it (put, accumulate), and where what it fetches
// lands (get: the origin buffer; the others: the result).
struct OpMessages {
  Header header;                    // its record's header: its layout and (inline) data follow it in the batch
  std::shared_ptr<Packet> packet;   // the batch that carries its record
  const void* origin = nullptr;
  int64_t count = 0;
  std::optional<Datatype> type;
  bool data_apart = false;
  void* into = nullptr;
  int64_t into_count = 0;
  std::optional<Datatype> into_type;
  Request data_req, reply_req;
};

// An operation the method moves one-sidedly (a one-sided window's put or
// get): its car_rma CAR's request, and where its data is packed where
// the origin's layout is not one block (a get unpacks it once it landed).
struct RemoteMove {
  Request req;
  std::vector<std::byte> packed;
  void* into = nullptr;
  int64_t into_count = 0;
  std::optional<Datatype> into_type;
};

struct OriginOp {
  fsm::StateWord state;
  uint64_t id = 0;
  WindowState* win = nullptr;
  OpKind kind = OpKind::kPut;
  int target = 0;
  uint64_t disp = 0;
  uint64_t bytes = 0;
  absl::Status status;
  // Only where the target's agent serves it: a shared window's operation
  // sends nothing.
  std::optional<OpMessages> msg;
  // Only where the method moves it one-sidedly (StartRemote).
  std::optional<RemoteMove> remote;
  // While a shared window's operation is issued (Copy, Store): the call's
  // access and its target layout (null: one block, contiguous on every
  // side); a put or get with no layout has only its buffer here, no access.
  const Access* access = nullptr;
  const Layout* runs = nullptr;
  void* local = nullptr;
};

// An operation's error, with why.
inline void RaiseFailed(OriginOp& op, const absl::Status& st, fsm::EventQueue<OriginOp, RmaSignal>& events) {
  RmaSignal x;
  x.error = st;
  events.Raise<OpMachine>(op, OpEvent::kError, x);
}
// The end of an operation the origin moved itself (Store, CrossCopy):
// stored, or error with why.
inline void RaiseMoved(OriginOp& op, const absl::Status& st, fsm::EventQueue<OriginOp, RmaSignal>& events) {
  if (st.ok()) {
    events.Raise<OpMachine>(op, OpEvent::kStored);
    return;
  }
  RaiseFailed(op, st, events);
}

// A shared window's segment: one mapping on every rank of the host, a
// cache line of words per rank (the lock on its window, taken by origins
// with atomic instructions, and the lock every accumulate to it holds
// while it applies), then every rank's memory.
struct alignas(64) WordCell {
  std::atomic<uint64_t> lock{0};  // shared holders (low 32 bits), or the exclusive holder's rank + 1 (<< 32)
  std::atomic<uint32_t> accumulate{0};  // the applying origin's rank + 1
};
static_assert(sizeof(WordCell) == 64 && std::atomic<uint64_t>::is_always_lock_free);

struct SharedSegment {
  SharedSegment() = default;
  ~SharedSegment();
  SharedSegment(const SharedSegment&) = delete;
  SharedSegment& operator=(const SharedSegment&) = delete;
  void* map = nullptr;
  std::size_t map_bytes = 0;
  WordCell* cells = nullptr;
  std::vector<std::byte*> bases;  // every rank's memory, mapped here
};

// Maps a segment over every rank of `comm` (collective; every rank on this
// host), rank r's memory `sizes[r]` bytes, each rounded up to 64 unless
// `contiguous` (then one rank's follows the previous one's directly).
absl::StatusOr<std::unique_ptr<SharedSegment>> MapShared(const Comm& comm, const std::vector<uint64_t>& sizes,
                                                         bool contiguous, uint32_t number);

// A full memory barrier: this process's loads and stores of a shared
// segment ordered against the other processes' (a fence, a flush, Sync).
// ThreadSanitizer takes no fences; a locked read-modify-write is one on x86.
inline void MemoryBarrier() {
#if defined(__SANITIZE_THREAD__)
  static std::atomic<int> word{0};
  word.fetch_add(0, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// The address of this process's probe word, and whether process `pid`'s
// probe word (at `probe` there) can be read from here: cross-memory attach
// reaches that process.
uint64_t ProbeAddress();
bool CanReach(pid_t pid, uint64_t probe);

// CARTAGE_RMA_ONE_SIDED_MIN: the least bytes a one-sided window's put or
// get moves as the method's own write or read (one_sided_min).
absl::StatusOr<uint64_t> OneSidedMin();
// A served window's agreement, collective over its ranks: whether every
// rank's memory is `ready` (cartage's allocation may fail on one rank:
// every rank then fails, naming it), and, where one method with rma
// carries every rank, `base` exposed through it on every rank and every
// rank's address and key learnt (all or none: else the window is served).
absl::Status Agree(const Comm& comm, WindowState& w, bool ready, void* base, uint64_t bytes, uint64_t min);

// Takes `a`'s lock word on a shared window if it is free enough now.
bool TakeLockWord(LockAccess& a);

// A request of a passive epoch: the batch that carries its record, and the
// receive of the target's one-byte answer.
struct Asked {
  std::shared_ptr<Packet> packet;  // the batch that carries it
  Request answer_req;
  std::byte answer{};
  // Both ended, or its batch could not be sent (or it was never asked:
  // an active answer's receive has its packet).
  bool answered() const {
    return !answer_req.active() || !packet->failure.ok() || (answer_req.completed() && packet->req.completed());
  }
};

// A lock this rank holds (or asks for) on one target (rma_access).
struct LockAccess {
  fsm::StateWord state;
  uint64_t id = 0;
  WindowState* win = nullptr;
  int target = 0;
  uint8_t type = kLockShared;
  Asked lock;            // the lock request, sent with the lock's first use; its answer the grant
  Asked closing;         // a flush or the unlock
  absl::Status status;
};

// One member of the group of a start (at the origin: a target, its post
// awaited, then its complete sent) or of a post (at the target: an origin,
// its post sent, then its complete awaited).
struct GroupPeer {
  int rank = 0;
  std::byte post{};
  uint64_t count = 0;  // the operations the origin issued to the target
  Request post_req;
  Request complete_req;
};

struct ServedOp {
  fsm::StateWord state;
  uint64_t id = 0;
  WindowState* win = nullptr;
  int origin = 0;
  Header h;
  std::vector<Run> runs;
  std::vector<std::byte> data;  // the data that came with the control message, or a temporary to receive into
  std::vector<std::byte> old;   // a fetch's answer: the target's data before the operation
  std::string refusal;          // why it is refused (empty: well formed and inside the window)
  std::optional<Datatype> layout;  // a receive's or reply's target layout where it is not one block
  Request req;                  // its data's receive, or its reply
  absl::Status status;
};

// A region of memory attached to a dynamic window: its address and size.
struct Region {
  uintptr_t start = 0;
  uint64_t bytes = 0;
};

class WindowState {
 public:
  WindowState(const Comm& comm, std::byte* base, uint64_t bytes, int disp_unit, uint32_t number);
  ~WindowState();

  // The window's communicator (a Dup of the one it was made on).
  Comm comm;
  std::byte* base;
  uint64_t bytes;
  int disp_unit;
  uint32_t number;        // this process's windows, counted from 1 (names it in errors)
  uint64_t trace_id;
  struct FreeMemory {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, FreeMemory> owned;  // Allocate's memory
  std::vector<uint64_t> sizes;         // every rank's window, in bytes
  std::vector<int> units;              // and displacement unit
  // A shared window: every rank's memory is mapped here, and operations
  // are the origin's loads and stores (null: served by the target's agent).
  std::unique_ptr<SharedSegment> shared;
  // A dynamic window: its memory is the regions attached here, by address
  // (an operation's displacement is an address at its target, and only
  // the target knows its regions: it alone checks them).
  bool dynamic = false;
  std::vector<Region> regions;  // sorted, apart
  // A single-copy window (over the caller's memory, every rank on one
  // host, each able to reach the others' with process_vm_writev): every
  // rank's process and window address. Its puts and gets are the origin's
  // copies; its accumulates are served.
  bool single_copy = false;
  std::vector<pid_t> pids;
  std::vector<uintptr_t> remote_bases;
  // Those processes, their pidfds and memory files opened as the window was
  // made: a copy goes only to the process the pid named then, never to one
  // that reuses it.
  std::vector<std::shared_ptr<const base::ProcessHandle>> processes;
  // Whether a `kind` of `n` bytes goes by one copy: a put or get on a
  // single-copy window, large enough that a system call costs less than
  // the target's serving it (below 2 KiB its control message carries it).
  bool OneCopies(OpKind kind, uint64_t n) const {
    return single_copy && (kind == OpKind::kPut || kind == OpKind::kGet) && n >= kOneCopyMin;
  }
  static constexpr uint64_t kOneCopyMin = 2048;
  // A one-sided window (neither shared nor single-copy, every rank carried
  // by one method with rma: ofi on a provider with FI_RMA): every rank's
  // memory exposed through that method, named by an address and a key. A
  // put or get of at least `one_sided_min` bytes whose target data is one
  // block is the origin's car_rma CAR, which the method moves with nothing
  // for the target's agent to do; the rest, and every accumulate, are
  // served (the one accumulate path). Below the minimum the served batch
  // costs less: it carries a lock, the data and the unlock in one message
  // where the method's write waits for the grant and then for the target
  // to say it is placed (CARTAGE_RMA_ONE_SIDED_MIN, default 16 KiB).
  bool one_sided = false;
  bool remote_ordered = false;  // a message after a write to a rank finds it placed (the method's FI_ORDER_SAW)
  uint64_t one_sided_min = kOneSidedMin;
  static constexpr uint64_t kOneSidedMin = 16384;
  std::vector<uint64_t> remote_addrs;
  std::vector<uint64_t> remote_keys;
  uint64_t exposed_token = 0;  // this rank's exposure's token (0: none)
  bool MovesRemotely(OpKind kind, uint64_t n, const Layout* runs) const {
    return one_sided && (kind == OpKind::kPut || kind == OpKind::kGet) && n >= one_sided_min && n > 0 &&
           (runs == nullptr || runs->size() == 1);
  }

  fsm::StateWord state;   // rma_epoch
  uint32_t epoch = 0;     // the epoch open here (0: none yet)
  std::optional<absl::Status> failure;  // why the last fence failed (NameFailure)

  // Origin side: the operations issued in the open epoch (or under locks,
  // until their target's flush or unlock), and how many to each rank in
  // the fence epoch; the locks held, by target (null: none).
  std::vector<std::shared_ptr<OriginOp>> ops;
  std::size_t ops_final = 0;  // ops[0, ops_final) are final (they end mostly in order: no round walks them again)
  std::vector<uint64_t> sent_to;
  uint64_t issued = 0;
  // An operation's id in traces: the window's, then its count here (the
  // window's calls are one at a time: no atomic counter on the way).
  uint64_t NextOpId() { return (trace_id << 40) | ++op_sequence; }
  uint64_t op_sequence = 0;
  // A new operation of this window's: its id, kind, target and extent.
  void Begin(OriginOp& op, OpKind kind, int target, uint64_t disp, uint64_t n) {
    op.id = NextOpId();
    op.win = this;
    op.kind = kind;
    op.target = target;
    op.disp = disp;
    op.bytes = n;
  }
  std::vector<std::unique_ptr<LockAccess>> locks;
  // The batch being filled for each target: the records of the operations
  // and requests issued to it since its last batch left. It leaves as one
  // control message once the next record would not fit, once an
  // operation's data follows apart, or once a call needs what it holds
  // done (a fence, a flush, an unlock, a complete, a request's progress).
  struct OutBatch {
    std::shared_ptr<Packet> packet;  // null: empty
    uint32_t count = 0;
    std::vector<OriginOp*> ops;  // its operations (rma_op batched)
  };
  std::vector<OutBatch> batches;
  uint64_t control_messages = 0;  // batches sent
  // Packets whose send ended and that nothing holds any more are taken
  // again for the next batch, with their room (no allocation, no growth).
  std::vector<std::shared_ptr<Packet>> packets;
  static constexpr std::size_t kPacketsKept = 8;
  std::shared_ptr<Packet> FreshPacket();
  // Sends `target`'s batch first where a record of `n` bytes would take it
  // past kBatchMax.
  void MakeRoom(int target, std::size_t n);
  // Room for a record of `n` bytes at the end of `target`'s batch (whose
  // packet `*packet` then holds).
  std::byte* AppendRecord(int target, std::size_t n, std::shared_ptr<Packet>* packet);
  // Sends `target`'s batch (nothing if it is empty): its operations
  // depart, or fail with the send's error.
  void SendBatch(int target);
  void SendBatches();
  // The access epoch start opened: its targets, and by rank whether a
  // target is one of them and how many operations it was sent.
  std::deque<GroupPeer> start_group;
  std::vector<uint8_t> started_to;
  std::vector<uint64_t> group_sent;

  // Target side.
  std::vector<std::byte> control_buf;
  Request control_req;
  std::vector<std::unique_ptr<ServedOp>> serving;  // not final yet
  // Final ones kept for the next control messages' operations, with their
  // buffers' capacity (no allocation for an operation served in a steady
  // stream), and the records of the control message being taken.
  std::vector<std::unique_ptr<ServedOp>> spare;
  static constexpr std::size_t kSpareMax = 256;
  std::vector<Record> records;
  std::unique_ptr<ServedOp> NewServed();
  std::vector<std::deque<ServedOp*>> queued;       // by origin, in arrival order
  std::vector<int> landing;                        // by origin: operations whose data is being received
  std::vector<int> replying;                       // by origin: fetches whose data is being sent back
  uint64_t served_in_epoch = 0;   // operations of the fence epoch open here
  // The lock on this window (rma_lock): each origin's hold (0 none, or
  // kLockShared / kLockExclusive), the lock requests waiting in order, and
  // the origin of the lock event being dispatched.
  fsm::StateWord lock_state;
  std::vector<uint8_t> holders;
  int shared_holders = 0;
  std::deque<ServedOp*> lock_waiters;
  std::vector<uint8_t> lock_pending;  // by origin: its lock request waits in lock_waiters (its operations wait behind)
  int lock_origin = -1;
  uint64_t served = 0;
  absl::Status served_failure;  // the first operation of the open epoch that failed or was refused here
  // The exposure post opened (rma_exposure): its origins, and by rank
  // whether an origin is one of them and how many of its operations landed.
  fsm::StateWord exposure;
  std::deque<GroupPeer> exposure_group;
  std::vector<uint8_t> exposed_to;
  std::vector<uint64_t> group_served;
  absl::Status exposure_served_failure;  // the first of the exposure's operations that failed here
  std::optional<absl::Status> exposure_failure;  // why the last exposure failed
  Request service_req;

  // The window, as errors name it: "window 2 (rank 1 of 4)".
  std::string Name() const;
  // Issues one operation (rma_op); `issued` (if given) gets it, for a
  // request that completes with it.
  absl::Status Issue(const Access& a, std::shared_ptr<OriginOp>* issued = nullptr);
  // A put (`kind`) or get of `n` bytes contiguous at `local` here and at
  // `disp` at `target`, on a shared window, with no request, that passes
  // every check Issue makes: issued (rma_op's one row for it, idle
  // -issue/Copy-> done, compiled in line) after only the checks that apply
  // to it. False, with nothing done, where anything else applies: Issue
  // then takes it, and names whatever is wrong.
  bool CopyDirect(OpKind kind, void* local, uint64_t n, int target, uint64_t disp);
  // The same for an accumulate or a get_accumulate of one basic type,
  // contiguous on every side, with a predefined operator (rma_op's rows
  // idle -issue/Store-> issued -stored-> done, compiled in line): its
  // outcome, or nullopt where Issue must take it.
  std::optional<absl::Status> AccumulateDirect(const Access& a);
  // A shared window whose open epoch, lock or start reaches `n` bytes at
  // `disp` of `target`'s memory.
  bool Reaches(int target, uint64_t disp, uint64_t n) const;
  absl::Status Fence();
  // General active target: an access epoch to `targets` once each posted
  // (Start), closed once this rank's operations to them are done here and
  // each was told how many there were (Complete); this rank's window
  // exposed to `origins` (Post) until each completed and its operations
  // landed (WaitExposure; `block` false: one round, `*ended` says whether).
  absl::Status Start(absl::Span<const int> targets);
  absl::Status Complete();
  absl::Status Post(absl::Span<const int> origins);
  absl::Status WaitExposure(bool block, bool* ended);
  absl::Status Free();
  // A dynamic window's regions: `bytes` at `base` attached (apart from
  // every other), or the region at `base` detached.
  absl::Status Attach(void* base, uint64_t bytes);
  absl::Status Detach(const void* base);
  // Whether `n` bytes from `from` lie in one region attached here.
  bool Attached(uint64_t from, uint64_t n) const;
  bool direct() const { return shared != nullptr; }
  // A shared window: holds `target`'s accumulate word while `apply` runs
  // (every accumulate to a rank's window takes it, so each applies whole).
  template <class Apply>
  absl::Status Accumulating(int target, Apply apply);
  // A shared window's wait for another rank's word: fails once a member
  // of the window is gone (it may hold the word for ever).
  absl::Status Waiting(std::chrono::steady_clock::time_point& last_check) const;
  // Passive epochs: a lock on `target` (kLockShared or kLockExclusive),
  // asked for with its first use; its flush (every operation to `target`
  // done there); its release (flushed, then unlocked). `local`: only this
  // side done (flush_local).
  absl::Status Lock(int target, uint8_t type);
  absl::Status Flush(int target, bool local);
  absl::Status FlushAll(bool local);  // every target it holds a lock on
  absl::Status Unlock(int target);
  // A lock asked for (requesting) granted, in rounds of progress: a
  // single-copy window's put or get reaches the target's memory only then.
  absl::Status AwaitGrant(LockAccess& a);
  // Grants the waiting lock requests the lock now allows, in order.
  void GrantWaiting(int* work);
  // Serves what came: control messages, data received, replies sent.
  void Serve(int* work);
  // Advances this rank's operations whose CARs ended; how many are left.
  std::size_t AdvanceOps(int* work);
  // A one-sided operation whose CAR completed: stored (a get's data
  // unpacked where it was packed), or error.
  void FinishRemote(OriginOp& op);
  // Starts the serving of the queued operations whose turn it is.
  void StartQueued(int origin, int* work);
  void StopService();

 private:
  absl::Status PostControlReceive();
  // Rounds of progress until `done` holds (the requests' answers, the
  // operations to a target).
  template <class Done>
  absl::Status RunUntil(Done done);
  // The lock this rank holds on `target`, or why a flush or unlock (`what`)
  // finds none to close.
  absl::StatusOr<LockAccess*> HeldLock(int target, const char* what);
  // Whether every operation of this rank's to `target` (-1: any) is final;
  // `remote`: every one-sided one (an unlock may wait for those alone: the
  // target learns of none of them).
  bool OpsFinal(int target, bool remote = false) const;
  // The operations to `target` (-1: all) are final: their first failure.
  absl::Status TakeFinished(int target);
  void Take(std::unique_ptr<ServedOp> op, int* work);
  // After an event of `op`: a final one counts as served.
  void Settled(ServedOp& op);
  // After `op`'s header or turn moved it on from `from`: the lock's part.
  void AfterStep(ServedOp& op, ServeState from, int* work);
};

// Rounds of progress (serving, this rank's operations) until `done()`.
template <class Done>
class Until : public engine::Activity {
 public:
  Until(WindowState* w, Done done) : w_(w), done_(std::move(done)) {}
  absl::Status Begin() override { return absl::OkStatus(); }
  std::optional<absl::Status> Poll(int* work) override {
    w_->Serve(work);
    w_->AdvanceOps(work);
    if (!done_()) return std::nullopt;
    return absl::OkStatus();
  }

 private:
  WindowState* w_;
  Done done_;
};

template <class Done>
absl::Status WindowState::RunUntil(Done done) {
  Until<Done> until(this, std::move(done));
  return engine::RunActivity(comm, until);
}

template <class Apply>
absl::Status WindowState::Accumulating(int target, Apply apply) {
  std::atomic<uint32_t>& word = shared->cells[target].accumulate;
  const auto me = static_cast<uint32_t>(comm.rank() + 1);
  std::chrono::steady_clock::time_point last_check;  // read from the clock only once it waits
  for (int spins = 0;; ++spins) {
    uint32_t free = 0;
    if (word.load(std::memory_order_relaxed) == 0 &&
        word.compare_exchange_weak(free, me, std::memory_order_acquire, std::memory_order_relaxed)) {
      break;
    }
    // Held only while another origin applies: a short wait, but one that
    // must give the CPU to that origin where ranks outnumber cores.
    if (spins < 64) {
      __builtin_ia32_pause();
      continue;
    }
    if (spins == 64) last_check = std::chrono::steady_clock::now();
    sched_yield();
    CARTAGE_RETURN_IF_ERROR(Waiting(last_check));
  }
  apply();
  word.store(0, std::memory_order_release);
  return absl::OkStatus();
}

// A request-based operation's request: it completes as the operation
// reaches its end here (a put's data sent, a get's arrived).
class OpDone : public engine::Activity {
 public:
  OpDone(std::weak_ptr<WindowState> w, std::shared_ptr<OriginOp> op) : w_(std::move(w)), op_(std::move(op)) {}
  absl::Status Begin() override { return absl::OkStatus(); }
  std::optional<absl::Status> Poll(int* work) override;

 private:
  std::weak_ptr<WindowState> w_;  // a window destroyed first fails the request
  std::shared_ptr<OriginOp> op_;  // a fence or unlock may drop it from the window first
};

// The service: polled by the agent's progress until the window is freed.
class Service : public engine::Activity {
 public:
  explicit Service(WindowState* w) : w_(w) {}
  absl::Status Begin() override { return absl::OkStatus(); }
  std::optional<absl::Status> Poll(int* work) override;

 private:
  WindowState* w_;
};

}  // namespace cartage::rma

#endif  // CARTAGE_RMA_WINDOW_STATE_H_
