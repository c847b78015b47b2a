// The agent's internals behind cartage/cartage.h: the CAR pool, the matcher,
// posting, progress, waiting and dead peers; which method carries each peer
// is Routes' (routes.h), how a rank waits WaitPolicy's (wait_policy.h).
#ifndef CARTAGE_AGENT_RUNTIME_H_
#define CARTAGE_AGENT_RUNTIME_H_

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "agent/matcher.h"
#include "agent/routes.h"
#include "agent/temp_buffers.h"
#include "agent/threads.h"
#include "agent/trace.h"
#include "agent/wait_policy.h"
#include "car/car.h"
#include "car/car_pool.h"
#include "cartage/engine.h"
#include "methods/host.h"
#include "methods/method.h"

namespace cartage {
class Request;
}  // namespace cartage

namespace cartage::agent {

class Runtime : public methods::MethodHost {
 public:
  // Joins the job `exchange` describes and opens the methods.
  // `trace` (CARTAGE_TRACE), if any, lives as long as the runtime, so that
  // what finalize does is in it.
  // `threading`: the thread level, whether to run a progress thread, and
  // how many lanes: lanes past the first are runtimes of their own, owned
  // by this one (lane 0), each with its methods opened again.
  static absl::StatusOr<std::unique_ptr<Runtime>> Create(std::unique_ptr<methods::Exchange> exchange,
                                                         std::unique_ptr<ProcessTrace> trace = nullptr,
                                                         Threading threading = {});
  // Finalizes first if Finalize was not called.
  ~Runtime() override;
  // Waits, progressing, for every rank to finalize; takes (and names in the
  // status) messages sent here that no receive took; closes the methods.
  // Comms and Requests fail from then on. Once only; later calls return OK.
  absl::Status Finalize();

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Whether the job counts as oversubscribed (methods::JobOversubscribed).
  bool oversubscribed() const { return oversubscribed_; }
  // Whether it crowds the CPUs: oversubscribed, three or more ranks a CPU
  // (methods::JobCrowded).
  bool crowded() const { return crowded_; }
  // Every lane takes its contexts from lane 0's count. A new communicator's
  // members agree on the largest number any of them proposes (agent/comms.cc),
  // so it is free on each whatever else each made before.
  uint32_t ProposeContext() const { return first_->next_context_.load(std::memory_order_relaxed) + 2; }
  void ClaimContext(uint32_t context) {
    if (context >= kUniqueContexts) {
      std::lock_guard<std::mutex> lock(first_->unique_mu_);
      first_->unique_made_.push_back(context);
      return;
    }
    uint32_t now = first_->next_context_.load(std::memory_order_relaxed);
    while (now < context && !first_->next_context_.compare_exchange_weak(now, context, std::memory_order_relaxed)) {
    }
  }
  // A nonblocking agreement (engine::ProposeUniqueContext: MPI_Comm_idup)
  // may be in flight beside others on communicators that share ranks, and
  // complete in any order, so a rank's count cannot stand for what is free.
  // Its proposals come from a range of their own instead, each number
  // unique to the rank and to the proposal (its k-th:
  // kUniqueContexts + 2 (k size + rank)): two agreements never take one.
  static constexpr uint32_t kUniqueContexts = uint32_t{1} << 31;
  uint32_t ProposeUniqueContext() {
    const uint32_t k = first_->next_unique_.fetch_add(1, std::memory_order_relaxed);
    return kUniqueContexts + 2 * (k * static_cast<uint32_t>(size_) + static_cast<uint32_t>(rank_));
  }
  // The contexts of that range this rank made communicators on.
  std::vector<uint32_t> UniqueContextsMade() const {
    std::lock_guard<std::mutex> lock(first_->unique_mu_);
    return first_->unique_made_;
  }

  // ---- Lanes ---------------------------------------------------------------
  // Where threads share the runtime (multiple), CARTAGE_LANES splits it: a
  // lane is a runtime of its own (engine lock, CAR pool, matcher, method
  // instances), and a communicator's traffic, point-to-point and
  // collective, goes by the lane its context picks on every rank alike.
  // Threads on communicators of different lanes then never take the same
  // lock. A wait still moves the other lanes now and then, as MPI's
  // progress rule asks; the progress thread moves them all.
  int lane() const override { return lane_; }
  // Every lane, lane 0 first (this one alone where there is one).
  const std::vector<Runtime*>& lanes() const { return lanes_; }
  // The lane that carries communicator context `context`.
  Runtime* LaneFor(uint32_t context) const { return lanes_[(context >> 1) % lanes_.size()]; }
  // The next schedule sequence number of a (collective) context.
  uint32_t NextSequence(uint32_t context) { return sequences_[context]++; }
  // Polls `activity` every round of progress until it finishes, then
  // completes `done` with its outcome.
  void Watch(engine::Activity* activity, base::Completion* done) { activities_.push_back({activity, done}); }

  // ---- Threads -------------------------------------------------------------
  // Every call from the program passes through an Entry, which admits it
  // at the agent's thread level. Single and funneled: only the thread that
  // made the agent (a compare). Serialized: one call at a time (a call
  // that overlaps another is refused). Where several threads share the
  // runtime (multiple, or a progress thread) an Entry also holds the
  // engine lock, which a wait gives up while it sleeps. The lock is
  // recursive: a call made inside another (a blocking receive's wait) takes
  // it again.
  class Entry;
  ThreadLevel thread_level() const { return threading_.level; }
  bool has_progress_thread() const { return progress_on_.load(std::memory_order_relaxed); }
  // Whether threads share the runtime: the engine lock is taken.
  bool shared() const { return locked_; }
  // Whether the call is admitted (Leave then ends it); Refused says why not.
  bool Admit() {
    if (ABSL_PREDICT_TRUE(fast_gate_)) return ThisThread() == owner_;
    return EnterSlow();
  }
  void Leave() {
    if (ABSL_PREDICT_FALSE(!fast_gate_)) LeaveSlow();
  }
  // Why this thread's call of `what` ("send to rank 1 (tag 3)") is not
  // admitted at the agent's level.
  absl::Status Refused(absl::string_view what) const;
  // The calling thread, cheaply: the thread pointer is one register read
  // where pthread_self() is a call for the same value. Never 0.
  static uintptr_t ThisThread() {
#if defined(__x86_64__) || defined(__aarch64__)
    return reinterpret_cast<uintptr_t>(__builtin_thread_pointer());
#else
    return static_cast<uintptr_t>(pthread_self());
#endif
  }
  // A nonblocking call's share of the progress rule (Test, TestAny): every
  // 16th call also moves the other lanes.
  void MaybeProgressOtherLanes() {
    if (ABSL_PREDICT_FALSE(lanes_.size() > 1) && (++progress_turn_ & 15) == 0) ProgressOtherLanes();
  }
  // Finishes `req` under the Entry of its own lane (its CAR goes back to
  // that lane's pool), the caller holding no other lane's.
  static void FinishOnItsLane(Request* req);
  // Stops the progress thread, if one runs (before finalize).
  void StopProgressThread();
  // engine::ExtensionOf: the extension kept under `key`, made by `make` the
  // first time. The last one asked for is remembered: a blocking
  // collective asks at every call.
  engine::Extension& ExtensionAt(const void* key, engine::internal::MakeExtension make) {
    if (key == last_extension_key_) return *last_extension_;
    engine::Extension* found = nullptr;
    for (auto& [k, v] : extensions_) {
      if (k == key) {
        found = v.get();
        break;
      }
    }
    if (found == nullptr) {
      extensions_.emplace_back(key, make());
      found = extensions_.back().second.get();
    }
    last_extension_key_ = key;
    last_extension_ = found;
    return *found;
  }

  // Builds the send or receive CAR of `req` from `m`, bound to world rank
  // `peer` (-1: any); the runtime adds counter, VC, owner and eager limit.
  // The caller checked the envelope.
  absl::Status Create(const car::MessageSpec& m, int peer, Request* req);
  // A blocking send or receive: builds its CAR as Create does, counting
  // down `done`, posts it, waits for it and releases it; the first error of
  // the post or of the CAR.
  absl::Status RunBlocking(const car::MessageSpec& m, int peer, base::Completion* done);
  // Whether blocking calls run without a Request (CARTAGE_FAST_PATH).
  bool fast_path() const { return fast_path_; }
  // Posts the CAR of `req` (fresh, or re-armed for a persistent request).
  absl::Status Post(Request* req);
  // Create, then Post, in one call: a nonblocking send's or receive's.
  absl::Status CreateAndPost(const car::MessageSpec& m, int peer, Request* req);
  // A one-sided CAR (car_rma) for `req`: writes `bytes` at `local` to world
  // rank `peer`'s memory at `remote`, or reads them from there (`write`
  // false), posted at once. The caller checked that the peer's method has rma.
  absl::Status StartRma(bool write, void* local, uint64_t bytes, int peer, car::RemoteRef remote, Request* req);
  // Rearm, then post: a schedule's step (engine::StartCounted) starts in
  // this one call.
  absl::Status Restart(car::Car& car, int peer, base::Completion* counter);
  const std::atomic<bool>* life() const { return life_; }
  // Which method carries each peer (also: persistent requests' registrations).
  Routes& routes() { return routes_; }
  const Routes& routes() const { return routes_; }
  // Re-arms a persistent request's finished CAR to count down `counter`,
  // bound again to world rank `peer`'s method (its private area fresh).
  void Rearm(car::Car& car, int peer, base::Completion* counter) {
    car.Rearm();
    car.Recount(counter);
    routes_.Bind(car, peer);
  }
  // One round of progress. The usual one, a single method to poll and
  // nothing else due, is a call straight into that method: a waiting rank
  // runs many rounds a message (cartage-bench pingpong).
  int Progress() {
    const bool idle_due = !routes_.idle().empty() && ++round_ % kIdlePollEvery == 0;
    methods::Method* sole = routes_.sole();
    if (ABSL_PREDICT_TRUE(sole != nullptr && !idle_due && activities_.empty())) return sole->Progress();
    return ProgressAll(idle_due);
  }
  // Progresses until done() holds, spinning, then yielding, then blocking.
  template <class Done>
  void WaitUntil(Done done) {
    WaitUntil(done, [this] { return Progress(); });
  }
  // The same with `round` as one round of progress (it returns the work done).
  template <class Done, class Round>
  void WaitUntil(Done done, Round round) {
    if (ABSL_PREDICT_FALSE(locked_)) {
      WaitShared(done, round);
      return;
    }
    agent::WaitUntil(
        wait_, done, round, [this] { return CrowdedCpu(); }, [this](int us) { Block(us); },
        [this] { CheckPeers(); }, last_peer_check_);
  }
  // Returns a finished CAR to the pool.
  void Release(car::Car* car);
  // Cancels a posted receive.
  absl::Status Cancel(car::Car* car);
  // The oldest message (source, tag) matches that no receive took yet, if
  // any: from the agent's unexpected queue, or asked of the method that
  // matches itself.
  absl::StatusOr<std::optional<methods::Method::Probed>> Peek(uint32_t context, int source, int tag) const;
  // A buffer lent by the method that reaches world rank `peer`
  // (Method::AllocBuffer); GiveBack returns it. The runtime returns those
  // still lent when it finalizes.
  absl::StatusOr<std::byte*> Lend(int peer, std::size_t bytes);
  void GiveBack(std::byte* p);
  // Alive while the runtime is: what outlives it (a lent buffer) checks it.
  std::weak_ptr<const void> Liveness() const { return alive_; }
  // Looks for dead peers now (a waiter does every WaitPolicy::peer_check)
  // and fails what waits on them; answers a dump's request for live CARs.
  void CheckPeers();
  // Why `peer` is unusable (OK if it is fine).
  const absl::Status& PeerStatus(int peer) const { return dead_[static_cast<std::size_t>(peer)]; }

  // methods::MethodHost
  car::Car* MatchIncoming(car::Envelope envelope) override;
  bool AnyPosted() const override { return matcher_->posted() > 0; }
  const methods::HoldControl* Holding() const override { return &hold_; }
  // While `allowed` is false the methods hold back no envelope (an Iprobe's
  // round: what arrived must be in the unexpected queue for it to see).
  void AllowHolding(bool allowed) { hold_.allowed = allowed; }
  uint64_t UnexpectedMax() const override { return unexpected_max_; }
  absl::StatusOr<car::Car*> NewUnexpected(const car::Envelope& envelope, uint64_t buffer_bytes) override;
  void InstallAgentOps(car::Vc& vc) override;

  // The VC operations the agent provides (car::Vc::post_recv / unpost_recv).
  static void PostRecv(car::Car& c, car::CarEvents& events);
  static void UnpostRecv(car::Car& c, car::CarEvents& events);

 private:
  Runtime() = default;
  // Opens lane `lane` of the lanes `first` leads (null: this is lane 0).
  static absl::StatusOr<std::unique_ptr<Runtime>> Open(std::unique_ptr<methods::Exchange> exchange,
                                                       std::unique_ptr<ProcessTrace> trace, Threading threading,
                                                       Runtime* first, int lane);
  // Lane 0, its set-up failed: it and the lanes opened close without a fence.
  void AbandonLanes();
  // Lane 0: starts the progress thread, if asked for, over every lane.
  void StartProgressThread();
  struct Leftovers;  // finalize.cc
  // Finalize's steps for each lane: before the fence (the lane's
  // extensions go, nothing is held back) and after it (its methods close;
  // what arrived unreceived is noted in `left`).
  void BeginFinalize();
  void CloseLane(Leftovers& left);
  // Rounds of progress on the lanes but this one whose locks are free now,
  // each with its peer check when due: a wait's share of MPI's progress rule.
  int ProgressOtherLanes();
  // A waiter's idle round: every 16th moves the other lanes; whether they
  // had work (the waiter then keeps spinning).
  bool OtherLanesDue(int idle) {
    return ABSL_PREDICT_FALSE(lanes_.size() > 1) && (idle & 15) == 15 && ProgressOtherLanes() > 0;
  }
  // Receives into scratch memory what no receive took, naming it in `left`;
  // returns how many it took.
  int TakeLeftovers(Leftovers& left);
  // Every rank must count the job as oversubscribed alike. On one host rank
  // 0 publishes its answer and a rank whose answer differs fails, naming
  // both; on several (`here`: the ranks on this rank's host) the job is
  // oversubscribed where any host is.
  absl::Status AgreeOnOversubscription(int here);
  static constexpr char kOversubscribedKey[] = "agent.oversubscribed";
  // Builds the CAR of `m` counting down `counter`, its spec completed (VC,
  // owner, eager limit) in its slot, bound to world rank `peer` (-1: any).
  absl::StatusOr<car::Car*> Build(const car::MessageSpec& m, int peer, base::Completion* counter);
  // A post's work, in line in the runtime's own callers.
  absl::Status PostNow(car::Car& car);
  // `req` takes `car`, bound to world rank `peer` (-1: any).
  void Attach(Request* req, car::Car* car, int peer) {
    req->runtime_ = this;
    req->life_ = life_;
    req->car_ = car;
    req->peer_ = peer;
  }
  // A request about to be posted: in flight, its completion counting one.
  static void ArmRequest(Request* req) {
    req->done_ = base::Completion{};
    req->done_.Set(1);
    req->in_flight_ = true;
  }
  void FailPeer(int peer, absl::Status why);
  // Passes the news of `gone`'s death to every live peer (Method::TellGone).
  void TellGone(int gone);
  // The lowest rank found gone (exited, its line lost), or -1.
  int FirstGone() const;
  void ReleaseUnexpected(car::Car* u);
  // What an unexpected message with a `buffer_bytes` buffer holds of memory:
  // its CAR's slot and its temporary buffer.
  uint64_t UnexpectedFootprint(uint64_t buffer_bytes) const {
    return pool_->slot_bytes() + (buffer_bytes > 0 ? temps_->Footprint(buffer_bytes) : 0);
  }
  // Past this many unexpected CARs, the small buffered ones become compact
  // records (car_unexpected's compact): a flood of unexpected messages costs
  // a record each, not a CAR.
  static constexpr std::size_t kCompactAbove = 1024;
  void CompactUnexpected();
  // An unexpected CAR with a temporary buffer of `buffer_bytes`, counted in
  // unexpected_bytes_ (not yet in the matcher).
  absl::StatusOr<car::Car*> MakeUnexpected(const car::Envelope& envelope, uint64_t buffer_bytes);
  // A compacted message's CAR made again, its eager event raised on `events`
  // (ahead of the match); the record is freed after the post.
  car::Car* Revive(CompactMessage& r, car::CarEvents& events);
  void FreeCompact(CompactMessage* r);
  // Past this many slots, a pool mostly empty gives slabs back (CarPool::Trim).
  static constexpr std::size_t kTrimAbove = 16384;
  // Threads (Admit's slow path; the engine lock).
  bool EnterSlow();
  void LeaveSlow();
  void Lock();
  bool TryLock();
  // `changed`: what the holder did may have completed a request, so the
  // threads asleep in WaitShared are woken.
  void Unlock(bool changed = true);
  // Wakes the threads asleep in WaitShared, if any: a completion may be theirs.
  void WakeSleepers();
  // Gives up this thread's hold of the engine lock, however deep, and
  // returns the depth; Reacquire takes it back to that depth.
  int ReleaseAll();
  void Reacquire(int depth);
  // WaitUntil where threads share the runtime: whoever holds the lock runs
  // the rounds, and a thread that cannot get it sleeps until an unlock
  // says the runtime changed (a completion may be its own).
  void WaitShared(absl::FunctionRef<bool()> done, absl::FunctionRef<int()> round);
  // The lock held: blocks on the methods unless a thread wants the lock.
  void BlockHeld(int timeout_us);
  // The lock held: CheckPeers if a WaitPolicy::peer_check has passed
  // (whether it did).
  bool CheckPeersWhenDue();
  void ProgressThreadMain();
  // A round in general: every polled method, the idle ones if `idle_due`,
  // then the running activities.
  int ProgressAll(bool idle_due);
  // Polls the running activities; completes and drops the finished ones.
  int PollActivities();
  // Blocks on the polled methods (each its share of `timeout_us`).
  void Block(int timeout_us);
  // Whether three or more ranks share this rank's CPU now, as far as a
  // polled method can tell (Method::RanksOnThisCpu).
  bool CrowdedCpu();

  // Whether this runtime lives: a cell that outlives it (never freed), which
  // its Comms and Requests read, so that one used after its Agent went gets
  // an error, not a wild pointer.
  std::atomic<bool>* life_ = nullptr;
  std::unique_ptr<ProcessTrace> trace_;  // first, so that it goes last
  std::unique_ptr<methods::Exchange> exchange_;
  int rank_ = 0;
  int size_ = 1;
  std::unique_ptr<car::CarPool> pool_;
  std::unique_ptr<Matcher> matcher_;
  Routes routes_;
  // The methods no peer goes through are polled every kIdlePollEvery rounds,
  // in case a peer reaches this rank through one after all: an idle tcp
  // method's poll is now and then a system call, which a shm ping-pong would
  // feel at every round. 65,536 rounds are milliseconds.
  static constexpr uint32_t kIdlePollEvery = 65536;
  uint32_t round_ = 0;
  car::Vc agent_any_vc_;  // a wildcard receive before it matches: the agent's operations only
  WaitPolicy wait_;
  methods::HoldControl hold_;  // postings counts every receive posted (PostRecv)
  bool oversubscribed_ = false;
  bool crowded_ = false;
  absl::flat_hash_map<std::byte*, std::pair<methods::Method*, methods::MethodBuffer>> lent_;
  std::shared_ptr<const void> alive_ = std::make_shared<int>(0);
  std::vector<absl::Status> dead_;
  std::vector<car::Car*> handed_off_;     // unexpected CARs to release after the current post
  std::unique_ptr<TempBuffers> temps_;    // unexpected eager messages wait in these
  uint64_t unexpected_bytes_ = 0;         // what the unexpected messages hold (UnexpectedFootprint)
  uint64_t unexpected_max_ = uint64_t{1} << 30;  // CARTAGE_UNEXPECTED_MAX_MB
  std::size_t compact_above_ = kCompactAbove;     // unexpected CARs that make CompactUnexpected walk
  std::vector<CompactMessage*> revived_;          // records to free after the current post
  std::size_t compact_peak_ = 0;                  // the most records since the last trim
  std::atomic<uint32_t> next_context_{0};  // lane 0's: world: 0 (point-to-point) and 1 (collectives)
  std::atomic<uint32_t> next_unique_{0};   // lane 0's: ProposeUniqueContext's count
  mutable std::mutex unique_mu_;           // lane 0's: guards unique_made_
  std::vector<uint32_t> unique_made_;      // lane 0's: ClaimContext's of the unique range
  absl::flat_hash_map<uint32_t, uint32_t> sequences_;  // per collective context: next schedule number
  struct Running {
    engine::Activity* activity;
    base::Completion* done;
  };
  std::vector<Running> activities_;       // collectives in flight, polled every round
  // Per-agent state of the engine layers (engine::ExtensionOf), by key;
  // dropped first when the runtime finalizes.
  std::vector<std::pair<const void*, std::unique_ptr<engine::Extension>>> extensions_;
  const void* last_extension_key_ = nullptr;  // ExtensionAt's last answer
  engine::Extension* last_extension_ = nullptr;
  bool finalized_ = false;
  bool polling_activities_ = false;       // an activity's own progress does not poll them again
  bool fast_path_ = true;                 // CARTAGE_FAST_PATH
  std::chrono::steady_clock::time_point last_peer_check_;

  // Threads (Entry).
  Threading threading_;
  bool fast_gate_ = true;       // single or funneled, no progress thread: Enter is a compare
  bool owner_only_ = true;      // single or funneled: only owner_ may call
  bool serial_check_ = false;   // serialized: calls must not overlap
  bool locked_ = false;         // multiple, or a progress thread: the engine lock is taken
  uintptr_t owner_ = 0;         // the thread that made the agent (ThisThread)
  std::atomic<uintptr_t> serial_holder_{0};  // serialized: the thread inside a call
  int serial_depth_ = 0;
  std::mutex mu_;                            // the engine lock
  std::atomic<uintptr_t> holder_{0};         // who holds it, for recursion
  int depth_ = 0;
  std::atomic<int> wanted_{0};        // threads waiting for the lock
  std::atomic<bool> blocking_{false};  // its holder blocks on the methods (BlockHeld)
  // Bumped at an unlock while threads sleep in WaitShared, which wakes them.
  std::atomic<uint32_t> epoch_{0};
  std::atomic<int> sleepers_{0};
  std::thread progress_;
  std::atomic<bool> progress_on_{false};  // progress_ runs (read by any thread; progress_ is the finalizer's)
  std::atomic<bool> stop_progress_{false};

  // Lanes.
  int lane_ = 0;
  Runtime* first_ = this;          // lane 0
  std::vector<Runtime*> lanes_;    // every lane, lane 0 first
  int progress_turn_ = 0;          // MaybeProgressOtherLanes: the calls counted
  std::vector<std::unique_ptr<Runtime>> siblings_;  // lane 0: the other lanes (last: they go first)
};

class Runtime::Entry {
 public:
  explicit Entry(Runtime* rt) : rt_(rt), admitted_(rt->Admit()) {}
  ~Entry() {
    if (admitted_) rt_->Leave();
  }
  Entry(const Entry&) = delete;
  Entry& operator=(const Entry&) = delete;
  bool ok() const { return admitted_; }
  // The refusal of `what` (OK where admitted).
  absl::Status status(absl::string_view what) const { return admitted_ ? absl::OkStatus() : rt_->Refused(what); }

 private:
  Runtime* rt_;
  bool admitted_;
};

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_RUNTIME_H_
