// cartage: point-to-point communication between the ranks of a job started
// with `cartage run`. Every operation is a CAR run by its state machine
// (diagrams/). This header is the user's API: with cartage/collectives.h
// (MPI's collectives) and cartage/schedule.h (schedules built by hand), it
// is all a program needs.
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
//
// Threads: the agent's thread level (ThreadLevel; CARTAGE_THREADS, or
// AgentOptions) says which threads may call it. Below kMultiple, a call from
// a thread the level does not allow is refused with an error naming the
// level; at kMultiple any thread may call anything at any time, and
// AgentOptions::lanes keeps threads on different communicators apart. A
// Request and a Message belong to one thread at a time.
#ifndef CARTAGE_AGENT_INCLUDE_CARTAGE_CARTAGE_H_
#define CARTAGE_AGENT_INCLUDE_CARTAGE_CARTAGE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "base/check.h"
#include "base/completion.h"
#include "datatype/datatype.h"

namespace cartage {

namespace agent {
class Runtime;
class EngineAccess;  // cartage/engine.h's way in
}  // namespace agent
namespace car {
class Car;
struct MessageSpec;
}  // namespace car
namespace engine {
class Activity;
}  // namespace engine

// Wildcards for receives and probes.
inline constexpr int kAnySource = -1;
inline constexpr int kAnyTag = -1;
// The largest tag.
inline constexpr int kMaxTag = (1 << 30) - 1;

// Datatypes: any memory layout (halo faces, columns, structs), built with
// MPI's constructors (datatype/datatype.h). The typed forms of Comm's
// operations send and receive `count` elements of one; the data travels
// packed, so sender and receiver may use different types with the same type
// signature.
//
//   auto column = cartage::Datatype::Vector(rows, 1, cols, cartage::Datatype::Basic(cartage::BasicType::kDouble));
//   world.Send(&matrix[0][3], 1, *column, /*dest=*/1, /*tag=*/0);
using Datatype = datatype::Datatype;
using BasicType = datatype::BasicType;

// Which threads may call the agent (MPI's thread levels).
enum class ThreadLevel : uint8_t {
  kSingle,      // only the thread that made the agent (the program has one)
  kFunneled,    // only the thread that made the agent (others exist)
  kSerialized,  // any thread, one call at a time
  kMultiple,    // any thread, any time
};
// "single", "funneled", "serialized", "multiple".
absl::string_view ThreadLevelName(ThreadLevel level);

// What a program asks of its agent at start; what it leaves unset comes
// from the environment (CARTAGE_THREADS, CARTAGE_PROGRESS_THREAD,
// CARTAGE_LANES).
struct AgentOptions {
  std::optional<ThreadLevel> threads;
  // A thread of the agent's own that advances operations while the
  // program computes, sleeping on the methods' wake-ups when idle.
  std::optional<bool> progress_thread;
  // kMultiple only: how many lanes (1 to 64) the agent runs, each with its
  // own engine lock, CAR pool, matcher and method instances; a
  // communicator's traffic goes by one lane, chosen by its context, so
  // threads on communicators of different lanes never wait for each other.
  std::optional<int> lanes;
};

// An operation in flight. Not copyable or movable while active: its CAR
// counts down the completion it holds.
class Request {
 public:
  Request() = default;
  // An active request is cancelled if it can be (a posted receive) and then
  // waited for. A finished one, the common case, has nothing to let go of:
  // that test is in line, with no call and no frame.
  ~Request() {
    if (in_flight_ || persistent_) [[unlikely]] Retire();
  }
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

  // Whether it was started and has not been finished by Wait or Test.
  bool active() const { return in_flight_; }
  // Whether it was made by SendInit or RecvInit (and not freed).
  bool persistent() const { return persistent_; }
  // Whether it has completed, without progressing (Test and Wait then
  // return at once).
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
  absl::string_view state() const;

 private:
  friend class Comm;
  friend class agent::Runtime;
  friend class agent::EngineAccess;
  friend absl::StatusOr<std::size_t> WaitAny(absl::Span<Request* const> requests);
  friend std::optional<std::size_t> TestAny(absl::Span<Request* const> requests);
  friend absl::StatusOr<std::vector<std::size_t>> WaitSome(absl::Span<Request* const> requests);
  void Finish();  // once completed: returns the CAR (kept if persistent)
  int CommRank(int world) const;  // a world rank's rank in the communicator (-1: not in it)
  absl::Status BeginActivity();  // runs activity_ once and has the runtime poll it
  // Whether a start must fail because the peer is gone (OK if not): the
  // error it fails with, naming the peer.
  absl::Status PeerGone() const;
  agent::Runtime* runtime_ = nullptr;
  const std::atomic<bool>* life_ = nullptr;  // whether runtime_ lives
  // Whether the Agent it ran on is gone: nothing of it may be touched.
  bool Orphaned() const { return life_ != nullptr && !life_->load(std::memory_order_relaxed); }
  // Lets go of what the gone Agent owned; the status names `op`.
  absl::Status Abandon(absl::string_view op);
  void Retire();  // the destructor's work for a request still active or persistent
  car::Car* car_ = nullptr;
  base::Completion done_;
  bool in_flight_ = false;
  bool persistent_ = false;
  int peer_ = 0;                               // the world rank a persistent CAR is bound to
  static constexpr uint64_t kUnregistered = ~uint64_t{0};
  uint64_t registration_ = 0;                  // the method's registration of the buffer (or kUnregistered)
  std::optional<datatype::Datatype> type_;          // a non-contiguous layout the CAR's segment points to
  std::shared_ptr<const std::vector<int>> group_;  // communicator rank -> world rank
  std::shared_ptr<engine::Activity> activity_;  // a collective: what the progress engine polls
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

// A message a matched probe (Comm::Improbe, Comm::Mprobe) took out of
// matching: no receive but Comm::Mrecv or Comm::Imrecv with this Message
// can get it, so that probe-then-receive cannot race with another thread.
// Moves only; receiving it empties it.
class Message {
 public:
  Message();
  ~Message();
  Message(Message&&) noexcept;
  Message& operator=(Message&&) noexcept;
  Message(const Message&) = delete;
  Message& operator=(const Message&) = delete;
  // Whether it holds a message not yet received.
  bool valid() const { return state_ != nullptr; }
  // Who sent it (a rank of the communicator probed), its tag and size.
  int source() const;
  int tag() const;
  uint64_t bytes() const;
  struct State;  // the agent's; opaque to the program

 private:
  friend class Comm;
  std::unique_ptr<State> state_;
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

  // Blocking send and synchronous send.
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
  // Matched probes: as Iprobe and Probe, but the message found is taken
  // out of matching and only Mrecv/Imrecv with the Message receive it.
  absl::StatusOr<std::optional<Message>> Improbe(int source, int tag) const;
  absl::StatusOr<Message> Mprobe(int source, int tag) const;
  // Receives a matched message into at most `bytes` bytes (a longer one
  // fails with kOutOfRange, writing nothing past the buffer); `message` is
  // emptied.
  absl::Status Mrecv(void* buf, std::size_t bytes, Message* message, ProbeResult* status = nullptr) const;
  absl::Status Imrecv(void* buf, std::size_t bytes, Message* message, Request* req) const;
  absl::Status Mrecv(void* buf, int64_t count, const Datatype& type, Message* message,
                     ProbeResult* status = nullptr) const;
  absl::Status Imrecv(void* buf, int64_t count, const Datatype& type, Message* message, Request* req) const;

  // Persistent operations: set up once (the buffer is registered with the
  // method once), then Request::Start() as often as needed.
  absl::Status SendInit(const void* buf, std::size_t bytes, int dest, int tag, Request* req) const;
  absl::Status RecvInit(void* buf, std::size_t bytes, int source, int tag, Request* req) const;

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

  // The world rank of `rank`, a rank of this communicator (0 <= rank < size).
  int world_rank(int rank) const { return WorldRank(rank); }

  // Making communicators. Each call is collective over the ranks it names
  // and agrees with them on a context free on every one, whatever each made
  // before; calls that make communicators are not made from two threads at
  // once.
  //
  // A communicator over the same ranks with its own context (every rank).
  absl::StatusOr<Comm> Dup() const;
  // Ranks with the same color form a new communicator, ordered by (key,
  // rank here). A negative color joins none (nullopt). Every rank calls it.
  absl::StatusOr<std::optional<Comm>> Split(int color, int key) const;
  // A communicator of `members` (ranks of this one, in the new order),
  // called by those ranks only; `tag` (0..kMaxTag) tells apart creations
  // the same ranks make at once from different threads (MPI_Comm_create_group).
  absl::StatusOr<Comm> CreateGroup(absl::Span<const int> members, int tag) const;
  // Two groups joined (MPI's intercommunicator): collective over this
  // communicator and the other group's; the leaders, `local_leader` here
  // and `remote_leader` in `peer`, exchange the groups over `peer` with
  // `tag`. The groups must not share a rank.
  struct Joined;
  absl::StatusOr<Joined> Join(int local_leader, const Comm& peer, int remote_leader, int tag) const;

 private:
  friend class Agent;
  friend class agent::EngineAccess;
  Comm(agent::Runtime* rt, const std::atomic<bool>* life, int rank, int size, uint32_t context,
       std::shared_ptr<const std::vector<int>> group = nullptr)
      : rt_(rt), life_(life), rank_(rank), size_(size), context_(context), group_(std::move(group)) {}
  // Whether the Agent this was made on still lives.
  bool alive() const { return life_->load(std::memory_order_relaxed); }
  // kFailedPrecondition naming `op` once the Agent is gone.
  absl::Status Alive(absl::string_view op) const {
    if (alive()) [[likely]] return absl::OkStatus();
    return Gone(op);
  }
  static absl::Status Gone(absl::string_view op);
  // What an operation moves: `count` bytes (type null) or elements of `type`.
  struct Buffer {
    void* buf;
    int64_t count;
    const Datatype* type;
  };
  // What Start makes: an operation posted now, or a persistent one (whose
  // buffer is registered with the method, or not: engine::PrepareStep).
  enum class Persistence : uint8_t { kNone, kRegistered, kUnregistered };
  absl::Status Start(bool send, bool sync, Buffer data, int peer, int tag, Request* req,
                     Persistence persistence = Persistence::kNone, uint32_t context = kOwnContext) const;
  // Start's body, which the byte forms of Isend, Irecv and Issend take in line.
  absl::Status Begin(bool send, bool sync, Buffer data, int peer, int tag, Request* req,
                     Persistence persistence = Persistence::kNone, uint32_t context = kOwnContext) const;
  // What a send or receive checks before its CAR exists, the message the
  // CAR is built from (its segment refers to data.type) and the peer's
  // world rank (kAnySource for any); an error names the operation.
  absl::Status Prepare(bool send, bool sync, const Buffer& data, int peer, int tag, uint32_t context,
                       car::MessageSpec* spec, int* world) const;
  // The context the ranks `members` agree on for a new communicator:
  // gathered at the first member and sent back over the collective context
  // with `tag` (agent/comms.cc).
  absl::StatusOr<uint32_t> AgreeContext(absl::Span<const int> members, int tag) const;
  // The communicator of `group` (world ranks) in which this rank is `rank`.
  Comm Made(int rank, uint32_t context, std::shared_ptr<const std::vector<int>> group) const;
  // Start, then wait; `status` (optional) gets source, tag and byte count.
  absl::Status Blocking(bool send, bool sync, Buffer data, int peer, int tag, ProbeResult* status) const;
  int WorldRank(int rank) const { return group_ ? (*group_)[static_cast<std::size_t>(rank)] : rank; }
  static constexpr uint32_t kOwnContext = ~0u;
  agent::Runtime* rt_;
  const std::atomic<bool>* life_;  // whether rt_ lives (agent/runtime.h)
  int rank_;
  int size_;
  uint32_t context_;  // even: point-to-point; context_ | 1 carries this communicator's collective traffic
  std::shared_ptr<const std::vector<int>> group_;  // null: the world's ranks
};

// What Comm::Join makes: one communicator over both groups, the group whose
// leader has the lower world rank first. A rank of the local group is
// local_offset + its rank here; of the remote group, remote_offset + its
// rank there.
struct Comm::Joined {
  Comm comm;
  int local_offset = 0;
  int remote_offset = 0;
  int remote_size = 0;
};

// The runtime of this process: one per program.
class Agent {
 public:
  // Joins the job described by the launcher's environment (a job of one
  // when started by hand) and sets up the methods. A second agent while the
  // first lives is refused (kFailedPrecondition).
  static absl::StatusOr<std::unique_ptr<Agent>> FromEnvironment();
  // The same with `options`, which take precedence over the environment.
  static absl::StatusOr<std::unique_ptr<Agent>> FromEnvironment(const AgentOptions& options);
  // Waits, progressing, for every rank to finalize, then detaches. What
  // this rank sent is still delivered while it waits. A message sent to
  // this rank that no receive took is taken and thrown away (its sender is
  // not left waiting) and named in the status (kFailedPrecondition). A Comm
  // or Request made on it and used afterwards fails with
  // kFailedPrecondition; so does a second Finalize.
  absl::Status Finalize();
  // Finalizes if Finalize was not called, writing a failed status to stderr.
  ~Agent();

  Comm World() const;
  int rank() const;
  int size() const;
  // One round of progress; returns how much work it did (none once finalized).
  int Progress();
  // The name of the method world rank `rank` is reached by ("self", "shm",
  // "tcp", ...; CARTAGE_METHODS chooses), or "" for no such rank.
  std::string method_for(int rank) const;
  // Buffers currently registered with the methods (persistent requests).
  int registered_buffers() const;
  // The thread level it runs at, and whether it runs a progress thread.
  ThreadLevel thread_level() const;
  bool progress_thread() const;
  // How many lanes it runs (AgentOptions::lanes).
  int lanes() const;

 private:
  friend class agent::EngineAccess;
  explicit Agent(std::unique_ptr<agent::Runtime> rt);
  std::unique_ptr<agent::Runtime> rt_;
};

}  // namespace cartage

#endif  // CARTAGE_AGENT_INCLUDE_CARTAGE_CARTAGE_H_
