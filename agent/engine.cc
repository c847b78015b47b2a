// cartage/engine.h over the Runtime: what engine layers need of the agent
// beyond the user's API.
#include "cartage/engine.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "agent/runtime.h"
#include "agent/testing.h"
#include "car/car.h"

namespace cartage::agent {

// The one way into Comm and Request that engine layers have.
class EngineAccess {
 public:
  static Runtime& RuntimeOf(const Comm& c) { return *c.rt_; }
  static Comm DupOn(const Comm& c, uint32_t context) { return c.Made(c.rank_, context, c.group_); }
  static int WorldRank(const Comm& c, int rank) { return c.WorldRank(rank); }

  static absl::Status Launch(const Comm& c, std::shared_ptr<engine::Activity> activity, bool persistent,
                             Request* req) {
    if (req == nullptr || req->active() || req->persistent()) {
      return absl::FailedPreconditionError(
          absl::StrFormat("collective: the request is %s",
                          req == nullptr ? "null" : req->active() ? "still active" : "persistent"));
    }
    if (activity == nullptr) return absl::InvalidArgumentError("collective: no schedule to run");
    Runtime::Entry in(c.rt_);
    if (!in.ok()) return in.status("collective");
    req->runtime_ = c.rt_;
    req->life_ = c.life_;
    req->group_ = c.group_;
    req->type_.reset();
    req->activity_ = std::move(activity);
    req->persistent_ = persistent;
    if (persistent) return absl::OkStatus();  // runs at Request::Start()
    absl::Status s = req->BeginActivity();
    if (!s.ok()) req->activity_.reset();
    return s;
  }

  static absl::Status RunActivity(const Comm& c, engine::Activity& activity) {
    Runtime::Entry in(c.rt_);
    if (!in.ok()) return in.status("collective");
    CARTAGE_RETURN_IF_ERROR(activity.Begin());
    int work = 0;
    std::optional<absl::Status> outcome = activity.Poll(&work);  // every step may have finished as it began
    if (!outcome.has_value() && c.rt_->shared()) {
      // Threads share the runtime: whichever progresses polls the run (the
      // progress thread, another thread's wait), as a nonblocking one's.
      base::Completion done;
      done.Set(1);
      c.rt_->Watch(&activity, &done);
      c.rt_->WaitUntil([&] { return done.done(); });
      return done.status;
    }
    if (!outcome.has_value()) {
      // A round: the methods, then the activity, whose own work (a step that
      // finished, the next one started) counts as progress as the methods' does.
      Runtime& rt = *c.rt_;
      rt.WaitUntil([&] { return outcome.has_value(); },
                   [&] {
                     int round = rt.Progress();
                     outcome = activity.Poll(&round);
                     return round;
                   });
    }
    return *std::move(outcome);
  }

  static absl::Status PrepareStep(const Comm& c, bool send, void* buf, std::size_t bytes, int peer, int tag,
                                  Request* req) {
    return c.Start(send, false, {buf, static_cast<int64_t>(bytes), nullptr}, peer, tag, req,
                   Comm::Persistence::kUnregistered);
  }

  static absl::Status StartCounted(Request& r, base::Completion* counter) {
    if (r.car_ == nullptr || r.in_flight_) {
      return absl::FailedPreconditionError("start: not an idle persistent send or receive");
    }
    if (r.peer_ >= 0 && !r.runtime_->PeerStatus(r.peer_).ok()) [[unlikely]] return r.PeerGone();
    return r.runtime_->Restart(*r.car_, r.peer_, counter);
  }

  static car::Car* CarOf(const Request& r) { return r.car_; }

  static void CapEager(Request& r, uint64_t bytes) {
    if (r.car_ != nullptr) r.car_->CapEager(bytes);
  }

  static absl::StatusOr<std::unique_ptr<Agent>> NewAgent(std::unique_ptr<methods::Exchange> exchange,
                                                         Threading threading) {
    CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Create(std::move(exchange), nullptr, threading));
    return std::unique_ptr<Agent>(new Agent(std::move(rt)));
  }

  static Comm CollectiveChannel(const Comm& c) {
    return Comm(c.rt_, c.life_, c.rank_, c.size_, c.context_ | 1u, c.group_);
  }
  static absl::Status Alive(const Comm& c, absl::string_view op) { return c.Alive(op); }
  static bool IsAlive(const Comm& c) { return c.life_->load(std::memory_order_relaxed); }
  static uint32_t NextScheduleSequence(const Comm& c) {
    Runtime::Entry in(c.rt_);  // cannot refuse: the number is taken either way
    return c.rt_->NextSequence(c.context_ | 1u);
  }
};

absl::StatusOr<std::unique_ptr<Agent>> NewAgentForTesting(std::unique_ptr<methods::Exchange> exchange,
                                                          Threading threading) {
  return EngineAccess::NewAgent(std::move(exchange), threading);
}

}  // namespace cartage::agent

namespace cartage::engine {

using agent::EngineAccess;

absl::Status Launch(const Comm& comm, std::shared_ptr<Activity> activity, bool persistent, Request* req) {
  return EngineAccess::Launch(comm, std::move(activity), persistent, req);
}

absl::Status RunActivity(const Comm& comm, Activity& activity) { return EngineAccess::RunActivity(comm, activity); }

absl::Status PrepareStep(const Comm& comm, bool send, void* buf, std::size_t bytes, int peer, int tag,
                         Request* req) {
  return EngineAccess::PrepareStep(comm, send, buf, bytes, peer, tag, req);
}

absl::Status StartCounted(Request& req, base::Completion* counter) {
  return EngineAccess::StartCounted(req, counter);
}

car::Car* CarOf(const Request& req) { return EngineAccess::CarOf(req); }

void CapEager(Request& req, uint64_t bytes) { EngineAccess::CapEager(req, bytes); }

namespace {

// The one method with rma that carries every member of `comm`, or null.
methods::Method* OneSidedMethod(const Comm& comm) {
  agent::Runtime& rt = EngineAccess::RuntimeOf(comm);
  methods::Method* m = nullptr;
  for (int r = 0; r < comm.size(); ++r) {
    methods::Method& here = rt.routes().MethodFor(EngineAccess::WorldRank(comm, r));
    if (!here.caps().rma || (m != nullptr && m != &here)) return nullptr;
    m = &here;
  }
  return m;
}

}  // namespace

absl::StatusOr<Exposed> Expose(const Comm& comm, void* base, std::size_t bytes) {
  CARTAGE_RETURN_IF_ERROR(EngineAccess::Alive(comm, "expose"));
  methods::Method* m = OneSidedMethod(comm);
  if (m == nullptr) {
    return absl::FailedPreconditionError("expose: no one method with one-sided transfers carries every rank");
  }
  CARTAGE_ASSIGN_OR_RETURN(methods::Method::Exposed e, m->Expose(base, bytes));
  return Exposed{e.token, e.addr, e.key, m->caps().rma_ordered};
}

void Unexpose(const Comm& comm, uint64_t token) {
  if (!EngineAccess::IsAlive(comm)) return;
  if (methods::Method* m = OneSidedMethod(comm)) m->Unexpose(token);
}

absl::Status StartOneSided(const Comm& comm, bool write, void* local, uint64_t bytes, int peer, uint64_t addr,
                           uint64_t key, Request* req) {
  CARTAGE_RETURN_IF_ERROR(EngineAccess::Alive(comm, write ? "one-sided write" : "one-sided read"));
  if (req == nullptr || req->active() || req->persistent()) {
    return absl::FailedPreconditionError(absl::StrFormat("one-sided %s %s rank %d: the request is not idle",
                                                         write ? "write" : "read", write ? "to" : "from", peer));
  }
  if (peer < 0 || peer >= comm.size()) {
    return absl::InvalidArgumentError(absl::StrFormat("one-sided %s: rank %d is not in a communicator of %d",
                                                      write ? "write" : "read", peer, comm.size()));
  }
  agent::Runtime& rt = EngineAccess::RuntimeOf(comm);
  const int world = EngineAccess::WorldRank(comm, peer);
  if (!rt.routes().MethodFor(world).caps().rma) {
    return absl::FailedPreconditionError(absl::StrFormat("one-sided %s rank %d: its method (%s) has no rma",
                                                         write ? "write to" : "read from", peer,
                                                         rt.routes().MethodFor(world).name()));
  }
  return rt.StartRma(write, local, bytes, world, car::RemoteRef{addr, key}, req);
}

Comm CollectiveChannel(const Comm& comm) { return EngineAccess::CollectiveChannel(comm); }

uint32_t ProposeUniqueContext(const Comm& comm) { return EngineAccess::RuntimeOf(comm).ProposeUniqueContext(); }

absl::StatusOr<Comm> DupOn(const Comm& comm, uint32_t context) {
  CARTAGE_RETURN_IF_ERROR(EngineAccess::Alive(comm, "dup"));
  if (context < agent::Runtime::kUniqueContexts || context % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("dup: context %u is no proposal of ProposeUniqueContext's", context));
  }
  return EngineAccess::DupOn(comm, context);
}

absl::Status Alive(const Comm& comm, absl::string_view op) { return EngineAccess::Alive(comm, op); }

uint32_t NextScheduleSequence(const Comm& comm) { return EngineAccess::NextScheduleSequence(comm); }

absl::Status GoneMember(const Comm& comm) {
  if (!EngineAccess::IsAlive(comm)) return absl::OkStatus();
  agent::Runtime& rt = EngineAccess::RuntimeOf(comm);
  rt.CheckPeers();
  for (int r = 0; r < comm.size(); ++r) {
    const absl::Status& why = rt.PeerStatus(EngineAccess::WorldRank(comm, r));
    if (!why.ok()) {
      return absl::Status(why.code(), absl::StrFormat("rank %d of the communicator is gone: %s", r, why.message()));
    }
  }
  return absl::OkStatus();
}

Call::Call(const Comm& comm) {
  if (!EngineAccess::IsAlive(comm)) return;  // the layer's Alive check says so
  rt_ = &EngineAccess::RuntimeOf(comm);
  admitted_ = rt_->Admit();
}

Call::~Call() {
  if (rt_ != nullptr && admitted_) rt_->Leave();
}

absl::Status Call::status(absl::string_view what) const {
  return rt_ == nullptr || admitted_ ? absl::OkStatus() : rt_->Refused(what);
}

namespace internal {
Extension* ExtensionAt(const Comm& comm, const void* key, MakeExtension make) {
  if (!EngineAccess::IsAlive(comm)) [[unlikely]] return nullptr;
  return &EngineAccess::RuntimeOf(comm).ExtensionAt(key, make);
}
}  // namespace internal

}  // namespace cartage::engine
