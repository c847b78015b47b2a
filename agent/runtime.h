// The agent's internals behind cartage/cartage.h: the CAR pool, the matcher,
// the methods, progress and waiting. One per process.
#ifndef CARTAGE_AGENT_RUNTIME_H_
#define CARTAGE_AGENT_RUNTIME_H_

#include <sched.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "agent/bootstrap.h"
#include "agent/matcher.h"
#include "car/car.h"
#include "car/car_pool.h"
#include "cartage/engine.h"
#include "methods/host.h"
#include "methods/method.h"
#include "methods/registry.h"

namespace cartage {
class Request;
}  // namespace cartage

namespace cartage::agent {

// How a waiting rank spends its time (seed 002: spin, then yield, then block);
// CARTAGE_WAIT_SPIN and CARTAGE_WAIT_YIELD_US set the first two.
struct WaitPolicy {
  int spin_rounds = 2000;                          // progress rounds before yielding
  // After this many idle rounds (0: never) a waiter asks its methods how
  // many ranks share its CPU (Method::RanksOnThisCpu) and, if three or
  // more, yields at once instead of spinning on to spin_rounds.
  int crowded_cpu_spin = 0;
  std::chrono::microseconds yield_for{2000};       // then yield this long
  int block_us = 1000;                             // then block on the doorbell this long at a time
  std::chrono::milliseconds peer_check{50};        // how often a waiter checks for dead peers
};

class Runtime : public methods::MethodHost {
 public:
  static absl::StatusOr<std::unique_ptr<Runtime>> Create();
  ~Runtime() override;

  int rank() const { return boot_->rank(); }
  int size() const { return boot_->size(); }
  // Whether the job counts as oversubscribed (methods::JobOversubscribed).
  bool oversubscribed() const { return oversubscribed_; }
  // Whether it crowds the CPUs: oversubscribed, three or more ranks a CPU
  // (methods::JobCrowded).
  bool crowded() const { return crowded_; }
  uint32_t NewContext() { return next_context_ += 2; }
  // The next schedule sequence number of a (collective) context.
  uint32_t NextSequence(uint32_t context) { return sequences_[context]++; }
  // Polls `activity` every round of progress until it finishes, then
  // completes `req` with its outcome.
  void Watch(engine::Activity* activity, Request* req) { activities_.push_back({activity, req}); }
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

  // Completes `spec` (counter, VC, owner, eager limit) and builds the
  // send or receive CAR of `req`, bound to world rank `peer` (-1: any). The
  // caller checked the envelope.
  absl::Status Create(car::CarSpec& spec, int peer, Request* req);
  // Posts the CAR of `req` (fresh, or re-armed for a persistent request).
  absl::Status Post(Request* req);
  // Posts a send or receive CAR that counts down a completion other than a
  // request's (a schedule's step: Request::StartCounted).
  absl::Status PostCar(car::Car& car);
  // Persistent requests: register / unregister a buffer with the method that
  // reaches `peer` (-1: the first network or host method chosen). The token
  // names the method too.
  absl::StatusOr<uint64_t> Register(int peer, const void* buf, std::size_t bytes);
  void Unregister(uint64_t token);
  int registered() const;
  // Re-binds a persistent request's CAR to its peer before a restart.
  void Rebind(car::Car& car, int peer) { Bind(car, peer); }
  // The VC of the method that reaches world rank `peer` (-1: not known
  // yet, e.g. a wildcard receive; rebound when it matches).
  const car::Vc* VcFor(int peer) const {
    return peer < 0 ? any_vc_ : routes_[static_cast<std::size_t>(peer)].vc;
  }
  // The method that reaches world rank `peer`.
  methods::Method& MethodFor(int peer) const { return *routes_[static_cast<std::size_t>(peer)].method; }
  // The methods opened, in order of preference.
  const std::vector<std::unique_ptr<methods::Method>>& methods() const { return methods_; }
  // One round of progress. The usual one, a single method to poll and
  // nothing else due, is a call straight into that method: a waiting rank
  // runs many rounds a message, and the general round's frame and loops
  // cost about 36 instructions a round (bench/RESULTS.md).
  int Progress() {
    const bool idle_due = !idle_.empty() && ++round_ % kIdlePollEvery == 0;
    if (ABSL_PREDICT_TRUE(sole_ != nullptr && !idle_due && activities_.empty())) return sole_->Progress();
    return ProgressAll(idle_due);
  }
  // Progresses until done() holds, spinning, then yielding, then blocking.
  template <class Done>
  void WaitUntil(Done done) {
    WaitUntil(done, [this] { return Progress(); });
  }
  // The same with `round` as one round of progress (it returns the work done).
  template <class Done, class Round>
  void WaitUntil(Done done, Round round);
  // Returns a finished CAR to the pool.
  void Release(car::Car* car);
  // Cancels a posted receive.
  absl::Status Cancel(car::Car* car);
  // The oldest message (source, tag) matches that no receive took yet, if
  // any: from the agent's unexpected queue, or asked of the method that
  // matches itself.
  absl::StatusOr<std::optional<methods::Method::Probed>> Peek(uint32_t context, int source, int tag) const;
  // Whether the method that reaches world rank `peer` (-1: any) can name
  // `context` and `tag` in its envelope (ofi's tag layouts cannot name all).
  absl::Status CheckEnvelope(int peer, uint32_t context, int tag) const;
  // CheckEnvelope's answer without building a status (the per-message path).
  bool EnvelopeFits(int peer, uint32_t context, int tag) const {
    const Route& r = peer >= 0 ? routes_[static_cast<std::size_t>(peer)] : any_route_;
    return context <= r.max_context && tag <= r.max_tag;
  }
  // A buffer lent by the method that reaches world rank `peer`
  // (Method::AllocBuffer); GiveBack returns it. The runtime returns those
  // still lent when it finalizes.
  absl::StatusOr<std::byte*> Lend(int peer, std::size_t bytes);
  void GiveBack(std::byte* p);
  // Alive while the runtime is: what outlives it (a lent buffer) checks it.
  std::weak_ptr<const void> Liveness() const { return alive_; }
  // Why `peer` is unusable (OK if it is fine).
  const absl::Status& PeerStatus(int peer) const { return dead_[static_cast<std::size_t>(peer)]; }

  // methods::MethodHost
  car::Car* MatchIncoming(car::Envelope envelope) override;
  bool AnyPosted() const override { return matcher_->posted() > 0; }
  const methods::HoldControl* Holding() const override { return &hold_; }
  // While `allowed` is false the methods hold back no envelope (an Iprobe's
  // round: what arrived must be in the unexpected queue for it to see).
  void AllowHolding(bool allowed) { hold_.allowed = allowed; }
  absl::StatusOr<car::Car*> NewUnexpected(const car::Envelope& envelope, uint64_t buffer_bytes) override;
  void InstallAgentOps(car::Vc& vc) override;

  // The VC operations the agent provides (car::Vc::post_recv / unpost_recv).
  static void PostRecv(car::Car& c, car::CarEvents& events);
  static void UnpostRecv(car::Car& c, car::CarEvents& events);

 private:
  Runtime() = default;
  void CheckPeers();
  // Every rank must count the job as oversubscribed alike: rank 0 published
  // its answer; another rank whose answer differs fails, naming both.
  absl::Status AgreeOnOversubscription();
  static constexpr char kOversubscribedKey[] = "agent.oversubscribed";
  void FailPeer(int peer, absl::Status why);
  void ReleaseUnexpected(car::Car* u);
  void* TakeBuffer(uint64_t bytes);
  void Bind(car::Car& car, int peer);
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
  absl::Status OpenMethods();

  // Per peer: the method that reaches it and its VC there.
  struct Route {
    methods::Method* method = nullptr;
    car::Vc* vc = nullptr;
    uint64_t eager_limit = 0;
    uint64_t max_context = UINT64_MAX;  // what its envelope can name (CheckEnvelope)
    int64_t max_tag = INT64_MAX;
  };

  std::unique_ptr<Bootstrap> boot_;
  std::unique_ptr<car::CarPool> pool_;
  std::unique_ptr<Matcher> matcher_;
  std::unique_ptr<methods::Registry> registry_;            // keeps plugin libraries loaded
  std::vector<std::unique_ptr<methods::Method>> methods_;  // opened, in order of preference
  std::vector<methods::Method*> polled_;  // methods some peer goes through: polled every round
  methods::Method* sole_ = nullptr;        // polled_'s only method, if it has one
  // The others: polled every kIdlePollEvery rounds, in case a peer reaches
  // this rank through one after all. Seldom: an idle tcp method's poll is an
  // epoll_wait now and then (every 16th), a system call, and at one in 64
  // rounds that cost a shm ping-pong 12% (0.51 against 0.44 us one-way on
  // the far placement; bench/RESULTS.md). 65,536 rounds are milliseconds.
  std::vector<methods::Method*> idle_;
  static constexpr uint32_t kIdlePollEvery = 65536;
  uint32_t round_ = 0;
  std::vector<Route> routes_;
  car::Vc agent_any_vc_;  // a wildcard receive before it matches: the agent's operations only
  const car::Vc* any_vc_ = &agent_any_vc_;  // ...or the native matcher's wildcard VC
  methods::Method* native_ = nullptr;           // the method that matches envelopes itself, if any
  Route any_route_;                              // wildcard receives: native_'s limits, if any
  WaitPolicy wait_;
  methods::HoldControl hold_;  // postings counts every receive posted (PostRecv)
  bool oversubscribed_ = false;
  bool crowded_ = false;
  absl::flat_hash_map<std::byte*, std::pair<methods::Method*, methods::MethodBuffer>> lent_;
  std::shared_ptr<const void> alive_ = std::make_shared<int>(0);
  std::vector<absl::Status> dead_;
  std::vector<car::Car*> handed_off_;     // unexpected CARs to release after the current post
  // Temporary buffers for unexpected eager messages, in two size classes.
  static constexpr std::size_t kSmallBuffer = 256;
  std::vector<void*> free_small_;
  std::vector<void*> free_large_;         // eager-limit sized
  std::size_t buffer_bytes_ = 0;
  uint32_t next_context_ = 0;             // world: 0 (point-to-point) and 1 (collectives)
  absl::flat_hash_map<uint32_t, uint32_t> sequences_;  // per collective context: next schedule number
  struct Running {
    engine::Activity* activity;
    Request* req;
  };
  std::vector<Running> activities_;       // collectives in flight, polled every round
  // Per-agent state of the engine layers (engine::ExtensionOf), by key;
  // dropped first when the runtime finalizes.
  std::vector<std::pair<const void*, std::unique_ptr<engine::Extension>>> extensions_;
  const void* last_extension_key_ = nullptr;  // ExtensionAt's last answer
  engine::Extension* last_extension_ = nullptr;
  bool polling_activities_ = false;       // an activity's own progress does not poll them again
  std::chrono::steady_clock::time_point last_peer_check_;
};

template <class Done, class Round>
void Runtime::WaitUntil(Done done, Round round) {
  using Clock = std::chrono::steady_clock;
  int idle = 0;
  Clock::time_point idle_since{};
  while (!done()) {
    if (round() > 0) {
      idle = 0;
      continue;
    }
    if (++idle < wait_.spin_rounds) {
      if (idle != wait_.crowded_cpu_spin || !CrowdedCpu()) {
        // Polling with nothing to do for a while: let an SMT sibling (perhaps
        // the peer copying our data) have the core's pipeline. Not at first,
        // so that a message arriving right away is seen at once.
        if (idle > 64) __builtin_ia32_pause();
        continue;
      }
      idle = wait_.spin_rounds;  // three or more ranks on this CPU: yield now
    }
    const Clock::time_point now = Clock::now();
    if (idle == wait_.spin_rounds) idle_since = now;
    if (now - idle_since < wait_.yield_for) {
      sched_yield();
    } else {
      Block(wait_.block_us);
    }
    if (now - last_peer_check_ > wait_.peer_check) CheckPeers();
  }
}

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_RUNTIME_H_
