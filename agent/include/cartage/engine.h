// What the layers that run their own CARs on the agent (collectives/, and
// any engine layer after it) need of it beyond the user's API in
// cartage/cartage.h: work the progress engine polls (Activity), requests for
// a schedule's steps, the collective channel, and state kept per agent. A
// program written against cartage.h never needs this header.
//
//   class MySchedule : public cartage::engine::Activity { ... };
//   auto s = std::make_shared<MySchedule>(...);
//   CARTAGE_RETURN_IF_ERROR(cartage::engine::Launch(comm, s, /*persistent=*/false, &req));
//
//   struct Cache : cartage::engine::Extension { ... };   // one per agent
//   Cache* cache = cartage::engine::ExtensionOf<Cache>(comm);  // null: the agent is gone
#ifndef CARTAGE_AGENT_INCLUDE_CARTAGE_ENGINE_H_
#define CARTAGE_AGENT_INCLUDE_CARTAGE_ENGINE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>

#include "absl/status/status.h"
#include "base/completion.h"
#include "cartage/cartage.h"

namespace cartage::engine {

// Work the progress engine drives besides single messages: a collective
// schedule. Launch binds one to a request; from then on every round of
// progress polls it until it reports its outcome, which completes the
// request.
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

// Runs `activity` under `req`: Begin() now, then polled by every round of
// progress until it finishes; `req` keeps it alive while it runs. A
// persistent request keeps it until Free() and runs it again at every
// Request::Start().
absl::Status Launch(const Comm& comm, std::shared_ptr<Activity> activity, bool persistent, Request* req);
// Runs `activity` to its end on this thread (a blocking collective):
// Begin(), then rounds of progress, polling it, until it finishes. No
// request: the caller holds the activity throughout.
absl::Status RunActivity(const Comm& comm, Activity& activity);

// A persistent send or receive of `bytes` bytes for one step of a schedule:
// Comm::SendInit or RecvInit, except that the buffer is not registered with
// the method (every start hands it over as Isend or Irecv would), so a step
// whose buffer moved is freed and prepared again at no registration cost.
absl::Status PrepareStep(const Comm& comm, bool send, void* buf, std::size_t bytes, int peer, int tag,
                         Request* req);
// Starts a step prepared by PrepareStep with its CAR counting down `counter`
// (the run's completion, which its other steps count down too) instead of
// the request's own: the request stays inactive, and the counter's owner
// learns of the end with no poll of the step's own.
absl::Status StartCounted(Request& req, base::Completion* counter);
// The CAR a prepared step runs on (null before PrepareStep): a counted
// step's outcome (its state, status and bytes) is read from it.
car::Car* CarOf(const Request& req);
// A prepared send: a message of more than `bytes` goes by rendezvous,
// whatever its method's eager limit (a burst of large sends, which a
// single-copy method moves with one copy instead of two).
void CapEager(Request& req, uint64_t bytes);

// One-sided transfers through the method that carries a communicator's
// ranks, where it moves data into and out of a peer's memory itself
// (Capabilities::rma: ofi on a provider with FI_RMA). A region is exposed
// on each rank (`addr` and `key` are what the others name it by, passed
// on by the caller); a transfer is a car_rma CAR that completes `req` once
// a write is placed at the peer (a message sent after it finds it there)
// or a read has landed.
struct Exposed {
  uint64_t token = 0;
  uint64_t addr = 0;
  uint64_t key = 0;
  // A message sent after a write to a peer arrives after the write is
  // placed there (Capabilities::rma_ordered): it need not wait for the
  // write's completion.
  bool ordered = false;
};
// [base, base + bytes) exposed through the one method with rma that
// carries every member of `comm`, this rank included, or why not (there
// is no such method, or it could not register the memory).
absl::StatusOr<Exposed> Expose(const Comm& comm, void* base, std::size_t bytes);
void Unexpose(const Comm& comm, uint64_t token);
// Writes (`write`) `bytes` at `local` to `addr` at rank `peer` of `comm`,
// whose region `key` names, or reads them from there into `local`.
absl::Status StartOneSided(const Comm& comm, bool write, void* local, uint64_t bytes, int peer, uint64_t addr,
                           uint64_t key, Request* req);

// A nonblocking Dup (collectives.h's PendingDup: MPI_Comm_idup) agrees on
// its context while other agreements may be in flight on communicators
// that share ranks, completing in any order. ProposeUniqueContext is this
// rank's proposal: from a range of its own, unique to the rank and to the
// call, so two agreements never take one number; the members take the
// largest (an allreduce), and DupOn makes the duplicate on it. A context
// not of that range is refused.
uint32_t ProposeUniqueContext(const Comm& comm);
absl::StatusOr<Comm> DupOn(const Comm& comm, uint32_t context);

// `comm` on its collective context: the same ranks, traffic that never
// matches point-to-point traffic (schedules send on it).
Comm CollectiveChannel(const Comm& comm);
// kFailedPrecondition naming `op` where `comm`'s Agent was destroyed: an
// engine layer checks before it touches anything of the agent's.
absl::Status Alive(const Comm& comm, absl::string_view op);
// Why a member of `comm` is gone, after a look for dead peers now (OK if
// none is): a collective whose peer sent nothing where data was expected
// names the rank that began it.
absl::Status GoneMember(const Comm& comm);
// The next number of `comm`'s sequence of collective schedules. Every rank
// builds its schedules in the same order, so the same schedule gets the
// same number everywhere (its tags derive from it).
uint32_t NextScheduleSequence(const Comm& comm);

// A call of the program's into an engine layer (a collective), admitted at
// the agent's thread level for as long as it lives: where it is not (a
// thread the level does not allow), status(what) says why, naming the call.
// Where threads share the agent it holds the engine lock (released while
// the call waits), so what the layer keeps per agent (Extension) is
// touched by one thread at a time.
class Call {
 public:
  explicit Call(const Comm& comm);
  ~Call();
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;
  bool ok() const { return rt_ == nullptr || admitted_; }
  absl::Status status(absl::string_view what) const;

 private:
  agent::Runtime* rt_ = nullptr;  // null: the agent is gone (the layer's Alive says so)
  bool admitted_ = false;
};

// State an engine layer keeps per agent (the collectives' cache of built
// schedules). It lives until the agent finalizes and goes before the
// agent's CARs and methods do; a new agent starts with none.
class Extension {
 public:
  virtual ~Extension() = default;
};
namespace internal {
using MakeExtension = std::unique_ptr<Extension> (*)();
Extension* ExtensionAt(const Comm& comm, const void* key, MakeExtension make);
template <class T>
inline constexpr char kExtensionKey = 0;  // its address names T
}  // namespace internal
// The agent's one `T` (made on first use); every communicator of one agent
// sees the same. Null once the agent was destroyed (Alive says so in words).
template <class T>
T* ExtensionOf(const Comm& comm) {
  static_assert(std::is_base_of_v<Extension, T>);
  return static_cast<T*>(internal::ExtensionAt(comm, &internal::kExtensionKey<T>,
                                               []() -> std::unique_ptr<Extension> { return std::make_unique<T>(); }));
}

}  // namespace cartage::engine

#endif  // CARTAGE_AGENT_INCLUDE_CARTAGE_ENGINE_H_
