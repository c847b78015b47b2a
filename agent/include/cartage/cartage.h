// cartage: point-to-point communication between the ranks of a job started
// with `cartage run`. Every operation is a CAR run by its state machine
// (diagrams/); this header is all a program needs.
//
//   auto agent = cartage::Agent::FromEnvironment();
//   if (!agent.ok()) { std::cerr << agent.status() << "\n"; return 1; }
//   cartage::Comm world = (*agent)->World();
//   int right = (world.rank() + 1) % world.size();
//   int left = (world.rank() + world.size() - 1) % world.size();
//   std::vector<double> out(1024, world.rank()), in(1024);
//   cartage::Request rq, sq;
//   CARTAGE_CHECK_OK(world.Irecv(absl::MakeSpan(in), left, /*tag=*/7, &rq));
//   CARTAGE_CHECK_OK(world.Isend(absl::MakeConstSpan(out), right, /*tag=*/7, &sq));
//   CARTAGE_CHECK_OK(cartage::WaitAll({&rq, &sq}));
//
// Errors: every call returns absl::Status naming the operation and the peer.
// A request that fails later (a dead peer, truncation) completes with that
// status: Wait() returns it.
#ifndef CARTAGE_AGENT_INCLUDE_CARTAGE_CARTAGE_H_
#define CARTAGE_AGENT_INCLUDE_CARTAGE_CARTAGE_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "car/car.h"
#include "base/check.h"

namespace cartage {

namespace agent {
class Runtime;
}  // namespace agent

// Wildcards for receives and probes.
inline constexpr int kAnySource = car::kAnySource;
inline constexpr int kAnyTag = car::kAnyTag;
// The largest tag.
inline constexpr int kMaxTag = (1 << 30) - 1;

// Datatypes: any memory layout (halo faces, columns, structs), built with
// MPI's constructors (datatype/datatype.h). The typed forms of Comm's operations send
// and receive `count` elements of one; the data travels packed, so sender and
// receiver may use different types with the same type signature.
//
//   auto column = cartage::Datatype::Vector(rows, 1, cols, cartage::Datatype::Basic(cartage::BasicType::kDouble));
//   world.Send(&matrix[0][3], 1, *column, /*dest=*/1, /*tag=*/0);
using Datatype = datatype::Datatype;
using BasicType = datatype::BasicType;

class Request;
class Schedule;

// Work the progress engine drives besides single messages: a collective
// schedule (collectives/). Comm::Launch binds one to a request; from then on
// every round of progress polls it until it reports its outcome, which
// completes the request.
class Activity {
 public:
  virtual ~Activity() = default;
  // Starts one run (Launch, and Request::Start for a persistent one). An
  // error leaves the request inactive.
  virtual absl::Status Begin() = 0;
  // Advances what it can without waiting and adds the work done to `*work`;
  // returns the outcome once the run finished (it is not polled again).
  virtual std::optional<absl::Status> Poll(int* work) = 0;
};

// An operation in flight. Not copyable or movable while active: its CAR
// counts down the completion it holds.
class Request {
 public:
  Request() = default;
  // An active request is cancelled if it can be (a posted receive) and then
  // waited for.
  ~Request();
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // Progresses until the operation completed; returns its status.
  absl::Status Wait();
  // One round of progress; true once completed (then Wait returns at once).
  bool Test();
  // Cancels a receive that has not matched yet (its status becomes kCancelled).
  absl::Status Cancel();

  // Persistent requests (Comm::SendInit / RecvInit): starts the operation
  // again; the CAR and the buffer's registration are reused.
  absl::Status Start();
  // Releases a persistent request (not while active).
  absl::Status Free();

  bool active() const { return in_flight_; }
  bool persistent() const { return persistent_; }
  // Whether it has completed, without progressing (Test and Wait then
  // return at once): for an Activity polling the requests it started.
  bool completed() const { return !in_flight_ || done_.done(); }
  // For a completed receive: who sent it (a rank of the communicator), with
  // which tag, how many bytes.
  int source() const;
  int tag() const { return done_.tag; }
  uint64_t bytes() const { return done_.bytes; }
  // The status the operation completed with (OK until it completed).
  const absl::Status& status() const { return done_.status; }
  // The state of its CAR in the CAR's machine ("posted", "eager_in_flight",
  // "done": car_send, car_recv), for inspection; empty without one.
  absl::string_view state() const { return car_ != nullptr ? car_->state_name() : absl::string_view(); }

 private:
  friend class Comm;
  friend class agent::Runtime;
  friend class Schedule;  // StartCounted, and the CAR of a step so started
  friend absl::StatusOr<std::size_t> WaitAny(absl::Span<Request* const> requests);
  friend std::optional<std::size_t> TestAny(absl::Span<Request* const> requests);
  friend absl::StatusOr<std::vector<std::size_t>> WaitSome(absl::Span<Request* const> requests);
  void Finish();  // once completed: returns the CAR (kept if persistent)
  int CommRank(int world) const;  // a world rank's rank in the communicator (-1: not in it)
  absl::Status BeginActivity();  // runs activity_ once and has the runtime poll it
  // A persistent send or receive, started with its CAR counting down
  // `counter` (a schedule's completion, which its other steps count down
  // too) instead of the request's own: the request stays inactive, and the
  // counter's owner learns of the end with no poll of the step's own.
  absl::Status StartCounted(base::Completion* counter);
  // What both starts do first: fail if the peer is gone, else re-arm the
  // CAR to count down `counter` and bind it to the peer's method again.
  absl::Status Rearm(base::Completion* counter);
  // A persistent send: a message of more than `bytes` goes by rendezvous,
  // whatever its method's eager limit (a schedule's burst of large sends,
  // which a single-copy method moves with one copy instead of two).
  void CapEager(uint64_t bytes);
  agent::Runtime* runtime_ = nullptr;
  car::Car* car_ = nullptr;
  base::Completion done_;
  bool in_flight_ = false;
  bool persistent_ = false;
  int peer_ = 0;                               // the world rank a persistent CAR is bound to
  static constexpr uint64_t kUnregistered = ~uint64_t{0};
  uint64_t registration_ = 0;                  // the method's registration of the buffer (or kUnregistered)
  std::optional<datatype::Datatype> type_;          // a non-contiguous layout the CAR's segment points to
  std::shared_ptr<const std::vector<int>> group_;  // communicator rank -> world rank
  std::shared_ptr<Activity> activity_;         // a collective: what the progress engine polls
};

// Waits for every request; returns the first error.
absl::Status WaitAll(std::initializer_list<Request*> requests);
absl::Status WaitAll(absl::Span<Request* const> requests);
// Waits until one completes; returns its index (or the error of starting none).
absl::StatusOr<std::size_t> WaitAny(absl::Span<Request* const> requests);
// Waits until at least one completes; returns the indices of all that have.
absl::StatusOr<std::vector<std::size_t>> WaitSome(absl::Span<Request* const> requests);
// One round of progress; true if every request has completed (they are finished then).
bool TestAll(absl::Span<Request* const> requests);
// One round of progress; the index of a completed request, if any.
std::optional<std::size_t> TestAny(absl::Span<Request* const> requests);

// What a probe found.
struct ProbeResult {
  int source = 0;
  int tag = 0;
  uint64_t bytes = 0;
};

// What the method that carries traffic to one peer offers. The xfer
// interface's buffer policy (cartage/xfer.h) reads it.
struct PathInfo {
  std::string method;          // "self", "shm", "tcp", "ofi", ...
  uint64_t eager_limit = 0;    // larger messages go by rendezvous
  std::size_t max_buffer = 0;  // the largest buffer it lends (0: any size)
  // Whether its own buffers beat plain memory: it needs memory registered
  // before a transfer, or keeps a pool of buffers of its own.
  bool lends_buffers = false;
  // Whether a rendezvous message moves with one copy (methods::Capabilities).
  bool single_copy = false;
};

// A communicator: a group of ranks and a context that isolates its traffic.
class Comm {
 public:
  int rank() const { return rank_; }
  int size() const { return size_; }
  uint32_t context() const { return context_; }

  // Nonblocking send of `bytes` bytes. The buffer must stay untouched until
  // the request completes.
  absl::Status Isend(const void* buf, std::size_t bytes, int dest, int tag, Request* req) const;
  // Nonblocking synchronous send: completes only once the receiver matched it.
  absl::Status Issend(const void* buf, std::size_t bytes, int dest, int tag, Request* req) const;
  // Nonblocking receive into at most `bytes` bytes; a longer message fails
  // the request with kOutOfRange and writes nothing past the buffer.
  absl::Status Irecv(void* buf, std::size_t bytes, int source, int tag, Request* req) const;

  absl::Status Send(const void* buf, std::size_t bytes, int dest, int tag) const;
  absl::Status Ssend(const void* buf, std::size_t bytes, int dest, int tag) const;
  // Blocking receive; `status` (optional) gets source, tag and byte count.
  absl::Status Recv(void* buf, std::size_t bytes, int source, int tag,
                    ProbeResult* status = nullptr) const;

  // `count` elements of `type` (the request keeps its own reference to the
  // type). A receive's bytes() need not be a whole number of elements.
  absl::Status Isend(const void* buf, int64_t count, const Datatype& type, int dest, int tag, Request* req) const;
  absl::Status Issend(const void* buf, int64_t count, const Datatype& type, int dest, int tag, Request* req) const;
  absl::Status Irecv(void* buf, int64_t count, const Datatype& type, int source, int tag, Request* req) const;
  absl::Status Send(const void* buf, int64_t count, const Datatype& type, int dest, int tag) const;
  absl::Status Recv(void* buf, int64_t count, const Datatype& type, int source, int tag,
                    ProbeResult* status = nullptr) const;
  absl::Status SendInit(const void* buf, int64_t count, const Datatype& type, int dest, int tag,
                        Request* req) const;
  absl::Status RecvInit(void* buf, int64_t count, const Datatype& type, int source, int tag,
                        Request* req) const;
  // Typed conveniences over the byte forms.
  template <class T>
  absl::Status Isend(absl::Span<const T> data, int dest, int tag, Request* req) const {
    return Isend(data.data(), data.size() * sizeof(T), dest, tag, req);
  }
  template <class T>
  absl::Status Irecv(absl::Span<T> data, int source, int tag, Request* req) const {
    return Irecv(data.data(), data.size() * sizeof(T), source, tag, req);
  }

  // A message waiting to be received, if any (one round of progress first).
  absl::StatusOr<std::optional<ProbeResult>> Iprobe(int source, int tag) const;
  // Waits until a message matching (source, tag) is waiting.
  absl::StatusOr<ProbeResult> Probe(int source, int tag) const;

  // Persistent operations: set up once (the buffer is registered with the
  // method once), then Request::Start() as often as needed.
  absl::Status SendInit(const void* buf, std::size_t bytes, int dest, int tag, Request* req) const;
  absl::Status RecvInit(void* buf, std::size_t bytes, int source, int tag, Request* req) const;

  // A persistent send or receive of `bytes` bytes for one step of a
  // collective schedule: SendInit or RecvInit on this communicator, except
  // that the buffer is not registered with the method (every start hands it
  // over as Isend or Irecv would), so a step whose buffer moved is freed and
  // prepared again at no registration cost. A schedule prepares each send
  // and receive step once and starts it at every run.
  absl::Status StepInit(bool send, void* buf, std::size_t bytes, int peer, int tag, Request* req) const;

  // Runs `activity` (a collective schedule) under `req`: Begin() now, then
  // polled by every round of progress until it finishes; `req` keeps it
  // alive while it runs. A persistent request keeps it until Free() and
  // runs it again at every Request::Start().
  absl::Status Launch(std::shared_ptr<Activity> activity, bool persistent, Request* req) const;
  // Runs `activity` to its end on this thread (a blocking collective):
  // Begin(), then rounds of progress, polling it, until it finishes. No
  // request: the caller holds the activity throughout.
  absl::Status RunActivity(Activity& activity) const;

  // This communicator on its collective context: the same ranks, traffic
  // that never matches point-to-point traffic (schedules send on it).
  Comm CollectiveChannel() const { return Comm(rt_, rank_, size_, context_ | 1u, group_); }
  // The next number of this communicator's sequence of collective
  // schedules. Every rank builds its schedules in the same order, so the
  // same schedule gets the same number everywhere (its tags derive from it).
  uint32_t NextScheduleSequence() const;

  // State a layer above the agent keeps per agent (the collectives: their
  // cache of built schedules): the object under `key`, made by `make` on
  // first use. It lives until the agent finalizes, and goes before the
  // agent's CARs and methods do; a new agent starts with none. Every
  // communicator of one agent sees the same object.
  void* AgentState(const void* key, std::shared_ptr<void> (*make)()) const;

  // The method that reaches `peer` (a rank of this communicator) and what
  // it offers; an error for a rank that does not exist.
  absl::StatusOr<PathInfo> PathTo(int peer) const;
  // Whether the job counts as oversubscribed: its ranks outnumber the
  // host's CPUs, or CARTAGE_OVERSUBSCRIBED says so (every rank agrees, or
  // start-up fails). Then a rank runs only while another waits, and a
  // pipeline whose stages must run at once does not pay.
  bool Oversubscribed() const;
  // Whether it also crowds the CPUs: three or more ranks a CPU. Then every
  // rank of a call runs about once a call whatever the algorithm, and what
  // a call costs is its ranks' CPU work added up.
  bool Crowded() const;
  // A buffer of at least `bytes` lent by the method that reaches `peer`
  // (seed 002's method alloc: memory that method sends from and receives
  // into as it is). It goes back to the method with its last reference, or
  // when the agent finalizes, whichever comes first (not to be used after).
  absl::StatusOr<std::shared_ptr<std::byte>> LendBuffer(int peer, std::size_t bytes) const;

  // A communicator over the same ranks with its own context. Every rank
  // must call it, in the same order relative to other Dup/Split calls.
  Comm Dup() const;
  // Collective over this communicator: ranks with the same color form a new
  // communicator, ordered by (key, rank here). A negative color joins none
  // (nullopt). Every rank must call it, in the same order as Dup/Split.
  absl::StatusOr<std::optional<Comm>> Split(int color, int key) const;

 private:
  friend class Agent;
  Comm(agent::Runtime* rt, int rank, int size, uint32_t context,
       std::shared_ptr<const std::vector<int>> group = nullptr)
      : rt_(rt), rank_(rank), size_(size), context_(context), group_(std::move(group)) {}
  // What an operation moves: `count` bytes (type null) or elements of `type`.
  struct Buffer {
    void* buf;
    int64_t count;
    const Datatype* type;
  };
  // What Start makes: an operation posted now, or a persistent one (whose
  // buffer is registered with the method, or not: StepInit).
  enum class Persistence : uint8_t { kNone, kRegistered, kUnregistered };
  absl::Status Start(bool send, bool sync, Buffer data, int peer, int tag, Request* req,
                     Persistence persistence = Persistence::kNone, uint32_t context = kOwnContext) const;
  // Start, then wait; `status` (optional) gets source, tag and byte count.
  absl::Status Blocking(bool send, bool sync, Buffer data, int peer, int tag, ProbeResult* status) const;
  int WorldRank(int rank) const { return group_ ? (*group_)[static_cast<std::size_t>(rank)] : rank; }
  static constexpr uint32_t kOwnContext = ~0u;
  agent::Runtime* rt_;
  int rank_;
  int size_;
  uint32_t context_;  // even: point-to-point; context_ | 1 carries this communicator's collective traffic
  std::shared_ptr<const std::vector<int>> group_;  // null: the world's ranks
};

// The runtime of this process: one per program.
class Agent {
 public:
  // Joins the job described by the launcher's environment (a job of one
  // when started by hand) and sets up the methods.
  static absl::StatusOr<std::unique_ptr<Agent>> FromEnvironment();
  // Finalize: waits for every rank to finalize, then detaches.
  ~Agent();

  Comm World() const;
  int rank() const;
  int size() const;
  // One round of progress; returns how much work it did.
  int Progress();
  // The name of the method world rank `rank` is reached by ("self", "shm",
  // "tcp", ...; CARTAGE_METHODS chooses), or "" for no such rank.
  std::string method_for(int rank) const;
  // Buffers currently registered with the methods (persistent requests).
  int registered_buffers() const;

 private:
  explicit Agent(std::unique_ptr<agent::Runtime> rt);
  std::unique_ptr<agent::Runtime> rt_;
};

}  // namespace cartage

#endif  // CARTAGE_AGENT_INCLUDE_CARTAGE_CARTAGE_H_
