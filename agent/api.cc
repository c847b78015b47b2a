// cartage/cartage.h: Agent, Comm, Request over the Runtime.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>

#include "absl/strings/str_format.h"
#include "agent/bootstrap.h"
#include "agent/runtime.h"
#include "agent/threads.h"
#include "agent/trace.h"
#include "car/car.h"
#include "cartage/cartage.h"
#include "cartage/engine.h"
#include "datatype/segment_walk.h"

namespace cartage {

using agent::Runtime;

// The user's wildcards are the CARs' own.
static_assert(kAnySource == car::kAnySource && kAnyTag == car::kAnyTag);

namespace {
// `s` with `what` (the operation) in front.
absl::Status Named(absl::string_view what, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrFormat("%s: %s", what, s.message()));
}

// Calls that cannot return a status say a refusal on standard error, once.
void SayRefused(const absl::Status& s) {
  static std::atomic<bool> said{false};
  if (said.exchange(true)) return;
  std::fprintf(stderr, "cartage: %s\n", std::string(s.message()).c_str());
}

// How an error names a point-to-point call: "ssend", "to"; "recv", "from".
// Asked for on the error paths only: a name made up front for a message
// that has none costs every call its selects and lengths.
absl::string_view OpName(bool send, bool sync) { return send ? (sync ? "ssend" : "send") : "recv"; }
absl::string_view Toward(bool send) { return send ? "to" : "from"; }

// A Comm or Request whose Agent was destroyed.
absl::Status GoneError(absl::string_view op) {
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s%sthe Agent this was made on was destroyed (finalized); make a new Agent and use its World()", op,
      op.empty() ? "" : ": "));
}
}  // namespace

// ---- Agent ---------------------------------------------------------------------

namespace {
// Agents alive in this process: one per program (tests make more through
// agent::NewAgentForTesting).
std::atomic<int> g_agents{0};
}  // namespace

absl::StatusOr<std::unique_ptr<Agent>> Agent::FromEnvironment() { return FromEnvironment(AgentOptions{}); }

absl::StatusOr<std::unique_ptr<Agent>> Agent::FromEnvironment(const AgentOptions& options) {
  if (g_agents.load() > 0) {
    return absl::FailedPreconditionError(
        "Agent::FromEnvironment: this process has an agent already (one per program; destroy it first)");
  }
  CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<methods::Exchange> boot, agent::OpenJobExchange());
  CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<agent::ProcessTrace> trace, agent::ProcessTrace::FromEnvironment(*boot));
  CARTAGE_ASSIGN_OR_RETURN(agent::Threading threading, agent::ResolveThreading(options));
  CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt,
                           Runtime::Create(std::move(boot), std::move(trace), threading));
  return std::unique_ptr<Agent>(new Agent(std::move(rt)));
}
Agent::Agent(std::unique_ptr<Runtime> rt) : rt_(std::move(rt)) { ++g_agents; }
Agent::~Agent() {
  if (rt_->life()->load()) {
    Runtime::Entry in(rt_.get());  // a thread the level does not allow still finalizes: the agent goes
    const absl::Status s = rt_->Finalize();
    if (!s.ok()) std::fprintf(stderr, "cartage: %s\n", std::string(s.message()).c_str());
  }
  rt_.reset();
  --g_agents;
}
absl::Status Agent::Finalize() {
  if (!rt_->life()->load()) return absl::FailedPreconditionError("finalize: this Agent finalized already");
  Runtime::Entry in(rt_.get());
  if (!in.ok()) return in.status("finalize");
  return rt_->Finalize();
}
Comm Agent::World() const { return Comm(rt_.get(), rt_->life(), rt_->rank(), rt_->size(), 0); }
int Agent::rank() const { return rt_->rank(); }
int Agent::size() const { return rt_->size(); }
int Agent::Progress() {
  if (!rt_->life()->load()) return 0;
  int work = 0;
  for (Runtime* lane : rt_->lanes()) {  // one at a time: no lane's lock is held while another's is taken
    Runtime::Entry in(lane);
    if (!in.ok()) {
      SayRefused(in.status("progress"));
      return 0;
    }
    work += lane->Progress();
  }
  return work;
}
int Agent::registered_buffers() const {
  if (!rt_->life()->load()) return 0;
  int n = 0;
  for (Runtime* lane : rt_->lanes()) {
    Runtime::Entry in(lane);
    n += lane->routes().registered();
  }
  return n;
}
int Agent::lanes() const { return static_cast<int>(rt_->lanes().size()); }
ThreadLevel Agent::thread_level() const { return rt_->thread_level(); }
bool Agent::progress_thread() const { return rt_->has_progress_thread(); }
std::string Agent::method_for(int rank) const {
  if (!rt_->life()->load()) return std::string();
  return rank >= 0 && rank < rt_->size() ? std::string(rt_->routes().MethodFor(rank).name()) : std::string();
}

// ---- Request -------------------------------------------------------------------

void Request::Finish() {
  in_flight_ = false;
  if (persistent_) return;
  if (activity_) {
    activity_.reset();
    return;
  }
  runtime_->Release(car_);
  car_ = nullptr;
}

namespace {
// A world rank's rank in a communicator's `group` (null: the world's own), -1 if not in it.
int CommRankOf(const std::vector<int>* group, int world) {
  if (group == nullptr) return world;
  const auto it = std::find(group->begin(), group->end(), world);
  return it == group->end() ? -1 : static_cast<int>(it - group->begin());
}
}  // namespace

int Request::CommRank(int world) const { return CommRankOf(group_.get(), world); }

int Request::source() const { return CommRank(done_.source); }

absl::string_view Request::state() const { return car_ != nullptr ? car_->state_name() : absl::string_view(); }

absl::Status Request::Abandon(absl::string_view op) {
  // Its CAR went with the Agent's pool; a collective's schedule holds CARs
  // of that pool too and is let go without running its destructor.
  car_ = nullptr;
  in_flight_ = false;
  persistent_ = false;
  if (activity_) {
    static std::mutex mu;
    static auto* kept = new std::vector<std::shared_ptr<engine::Activity>>();
    std::lock_guard<std::mutex> lock(mu);
    kept->push_back(std::move(activity_));
  }
  done_.status = GoneError(op);
  return done_.status;
}

absl::Status Request::Wait() {
  if (!in_flight_) return done_.status;
  if (Orphaned()) return Abandon("wait");
  Runtime::Entry in(runtime_);
  if (!in.ok()) return in.status("wait");
  runtime_->WaitUntil([this] { return done_.done(); });
  Finish();
  return done_.status;
}

bool Request::Test() {
  if (!in_flight_) return true;
  if (Orphaned()) {
    (void)Abandon("test");
    return true;
  }
  Runtime::Entry in(runtime_);
  if (!in.ok()) {
    SayRefused(in.status("test"));
    return false;
  }
  if (!done_.done()) {
    runtime_->Progress();
    runtime_->MaybeProgressOtherLanes();
    if (!done_.done()) return false;
  }
  Finish();
  return true;
}

void Runtime::FinishOnItsLane(Request* req) {
  Entry in(req->runtime_);  // admitted already by the caller's own Entry, on another lane
  req->Finish();
}

absl::Status Request::Cancel() {
  if (!in_flight_) return absl::FailedPreconditionError("cancel: the request is not active");
  if (Orphaned()) return Abandon("cancel");
  if (activity_) return absl::FailedPreconditionError("cancel: a collective cannot be cancelled");
  Runtime::Entry in(runtime_);
  if (!in.ok()) return in.status("cancel");
  return runtime_->Cancel(car_);
}

absl::Status Request::Start() {
  if (Orphaned()) return Abandon("start");
  if (!persistent_ || (car_ == nullptr && !activity_)) {
    return absl::FailedPreconditionError("start: not a persistent request (use Comm::SendInit/RecvInit)");
  }
  if (in_flight_) return absl::FailedPreconditionError("start: the persistent request is still active");
  Runtime::Entry in(runtime_);
  if (!in.ok()) return in.status("start");
  if (activity_) return BeginActivity();
  CARTAGE_RETURN_IF_ERROR(PeerGone());
  runtime_->Rearm(*car_, peer_, &done_);
  return runtime_->Post(this);
}

absl::Status Request::PeerGone() const {
  if (peer_ < 0 || runtime_->PeerStatus(peer_).ok()) return absl::OkStatus();  // as Comm's Isend and Irecv refuse it
  const bool send = car_->kind() == car::CarKind::kSend;
  return absl::UnavailableError(absl::StrFormat("start: persistent %s %s rank %d: %s", OpName(send, false),
                                                Toward(send), CommRank(peer_), runtime_->PeerStatus(peer_).message()));
}

absl::Status Request::BeginActivity() {
  CARTAGE_RETURN_IF_ERROR(activity_->Begin());
  done_ = base::Completion();
  in_flight_ = true;
  // A run whose every step finished as it began (eager sends, messages that
  // were waiting) completes here: its Wait then takes no round of progress,
  // which would only drain more incoming messages into the unexpected queue.
  int work = 0;
  if (std::optional<absl::Status> outcome = activity_->Poll(&work)) {
    done_.status = *std::move(outcome);
    return absl::OkStatus();
  }
  done_.Set(1);
  runtime_->Watch(activity_.get(), &done_);
  return absl::OkStatus();
}

absl::Status Request::Free() {
  if (Orphaned()) return Abandon("free");
  if (in_flight_) return absl::FailedPreconditionError("free: the request is still active");
  if (activity_) {
    activity_.reset();
    persistent_ = false;
    return absl::OkStatus();
  }
  if (car_ == nullptr) return absl::OkStatus();
  Runtime::Entry in(runtime_);
  if (!in.ok()) return in.status("free");
  if (registration_ != kUnregistered) runtime_->routes().Unregister(registration_);
  runtime_->Release(car_);
  car_ = nullptr;
  persistent_ = false;
  return absl::OkStatus();
}

void Request::Retire() {
  if (Orphaned()) {
    (void)Abandon("");
    return;
  }
  Runtime::Entry in(runtime_);  // a destructor cannot refuse: it goes on where the level is broken
  if (in_flight_) {
    if (!activity_) (void)runtime_->Cancel(car_);  // fine to fail: it is then waited for
    (void)Wait();
  }
  if (persistent_) (void)Free();
}

absl::Status WaitAll(absl::Span<Request* const> requests) {
  absl::Status first;
  for (Request* r : requests) first.Update(r->Wait());
  return first;
}
absl::Status WaitAll(std::initializer_list<Request*> requests) {
  return WaitAll(absl::MakeConstSpan(requests.begin(), requests.size()));
}

std::optional<std::size_t> TestAny(absl::Span<Request* const> requests) {
  Runtime* rt = nullptr;
  for (Request* r : requests) {
    if (r->in_flight_ && !r->Orphaned()) rt = r->runtime_;
  }
  if (rt == nullptr) return std::nullopt;
  bool progressed = false;
  std::size_t found = requests.size();
  {
    Runtime::Entry in(rt);
    if (!in.ok()) {
      SayRefused(in.status("test any"));
      return std::nullopt;
    }
    for (int round = 0; round < 2 && found == requests.size(); ++round) {
      for (std::size_t i = 0; i < requests.size(); ++i) {
        Request* r = requests[i];
        if (r->in_flight_ && r->done_.done()) {
          found = i;
          break;
        }
        if (r->in_flight_ && !progressed) {
          rt->Progress();
          rt->MaybeProgressOtherLanes();  // requests of several lanes: the others now and then
          progressed = true;
        }
      }
    }
    if (found == requests.size()) return std::nullopt;
    if (requests[found]->runtime_ == rt) {
      requests[found]->Finish();
      return found;
    }
  }
  // A request of another lane finishes under that lane's lock, taken alone.
  Runtime::FinishOnItsLane(requests[found]);
  return found;
}

bool TestAll(absl::Span<Request* const> requests) {
  bool all = true;
  for (Request* r : requests) all = r->Test() && all;
  return all;
}

absl::StatusOr<std::size_t> WaitAny(absl::Span<Request* const> requests) {
  Runtime* rt = nullptr;
  for (Request* r : requests) {
    if (r->in_flight_) rt = r->runtime_;
  }
  if (rt == nullptr) return absl::FailedPreconditionError("WaitAny: no active request");
  std::size_t which = requests.size();
  {
    Runtime::Entry in(rt);
    if (!in.ok()) return in.status("wait any");
    // Requests of several lanes: the wait moves the others now and then.
    rt->WaitUntil([&] {
      for (std::size_t i = 0; i < requests.size(); ++i) {
        if (requests[i]->in_flight_ && requests[i]->done_.done()) {
          which = i;
          return true;
        }
      }
      return false;
    });
    if (requests[which]->runtime_ == rt) {
      requests[which]->Finish();
      return which;
    }
  }
  Runtime::FinishOnItsLane(requests[which]);
  return which;
}

absl::StatusOr<std::vector<std::size_t>> WaitSome(absl::Span<Request* const> requests) {
  CARTAGE_ASSIGN_OR_RETURN(std::size_t first, WaitAny(requests));
  std::vector<std::size_t> done = {first};
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i]->in_flight_ && requests[i]->done_.done()) {
      Runtime::FinishOnItsLane(requests[i]);  // admitted by WaitAny already
      done.push_back(i);
    }
  }
  std::sort(done.begin(), done.end());
  return done;
}

// ---- Comm ----------------------------------------------------------------------

// In line in both callers: out of line, the spec's and the world rank's
// stores through pointers cost a send about 40 instructions.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status Comm::Prepare(bool send, bool sync, const Buffer& data, int peer,
                                                               int tag, uint32_t context, car::MessageSpec* spec,
                                                               int* world) const {
  void* const buf = data.buf;
  // The call's names for an error message, made only where one is made.
  const auto op = [send, sync] { return OpName(send, sync); };
  const auto dir = [send] { return Toward(send); };
  const bool any_source = !send && peer == kAnySource;
  if (!any_source && (peer < 0 || peer >= size_)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %s rank %d (tag %d): no such rank in a communicator of %d", op(), dir(), peer, tag, size_));
  }
  const bool any_tag = !send && tag == kAnyTag;
  if (!any_tag && (tag < 0 || tag > kMaxTag)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %s rank %d: invalid tag %d (0..%d)", op(), dir(), peer, tag, kMaxTag));
  }
  const int64_t unit = data.type != nullptr ? data.type->size() : 1;
  if (data.count < 0 ||
      (data.type != nullptr && unit > 0 && data.count > std::numeric_limits<int64_t>::max() / unit)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s %s rank %d (tag %d): invalid count %d of %s", op(), dir(),
                                                      peer, tag, data.count,
                                                      data.type != nullptr ? data.type->name() : "bytes"));
  }
  const int64_t bytes = data.count * unit;
  // A typed buffer may be null where the type's displacements are
  // addresses (MPI_BOTTOM): then its data starts away from 0.
  if (buf == nullptr && bytes > 0 && (data.type == nullptr || data.type->true_lb() == 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %s rank %d (tag %d): null buffer for %d bytes", op(), dir(), peer, tag, bytes));
  }
  *world = any_source ? kAnySource : WorldRank(peer);
  if (!any_source && !rt_->PeerStatus(*world).ok()) {
    return absl::UnavailableError(absl::StrFormat("%s %s rank %d (tag %d): %s", op(), dir(), peer, tag,
                                                  rt_->PeerStatus(*world).message()));
  }
  const uint32_t ctx = context == kOwnContext ? context_ : context;
  if (!rt_->routes().EnvelopeFits(*world, ctx, any_tag ? 0 : tag)) {
    const absl::Status fits = rt_->routes().CheckEnvelope(*world, ctx, any_tag ? 0 : tag);
    return absl::Status(fits.code(),
                        absl::StrFormat("%s %s rank %d (tag %d): %s", op(), dir(), peer, tag, fits.message()));
  }
  spec->kind = send ? car::CarKind::kSend : car::CarKind::kRecv;
  spec->envelope = {ctx, *world, tag};
  spec->segment = data.type != nullptr && !data.type->contiguous()
                      ? car::Segment::Of(buf, static_cast<uint64_t>(data.count), *data.type)
                      : car::Segment::Of(buf, static_cast<uint64_t>(bytes), datatype::BasicType::kByte);
  spec->synchronous = sync;
  return absl::OkStatus();
}

// In line in Isend, Irecv and Issend (their byte forms), which then pass no
// arguments through a call of Start's and run no persistent branch.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status Comm::Begin(bool send, bool sync, Buffer data, int peer, int tag,
                                                            Request* req, Persistence persistence,
                                                            uint32_t context) const {
  // The call's names for an error message, made only where one is made.
  const auto op = [send, sync] { return OpName(send, sync); };
  const auto dir = [send] { return Toward(send); };
  if (!alive()) [[unlikely]] return Gone(op());
  Runtime::Entry in(rt_);
  if (!in.ok()) return in.status(absl::StrFormat("%s %s rank %d (tag %d)", op(), dir(), peer, tag));
  if (req == nullptr || req->active() || req->persistent()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s %s rank %d (tag %d): the request is %s", op(), dir(), peer, tag,
                        req == nullptr ? "null" : req->active() ? "still active" : "persistent"));
  }
  car::MessageSpec spec;
  int world = 0;
  CARTAGE_RETURN_IF_ERROR(Prepare(send, sync, data, peer, tag, context, &spec, &world));
  if (data.type != nullptr && spec.segment.dtype != nullptr) {  // a byte form's type is null, seen so in line
    req->type_ = *data.type;  // the CAR's segment points here while it lives
    spec.segment.dtype = &*req->type_;
  } else {
    req->type_.reset();
  }
  if (req->group_ != group_) req->group_ = group_;  // a copy of a shared_ptr is a call, and atomics where it holds one
  const bool any_source = world == kAnySource;
  if (persistence == Persistence::kNone) return rt_->CreateAndPost(spec, any_source ? -1 : world, req);
  // A persistent request: its CAR is made now and posted at each Start.
  CARTAGE_RETURN_IF_ERROR(rt_->Create(spec, any_source ? -1 : world, req));
  req->persistent_ = true;
  if (persistence == Persistence::kUnregistered) {
    req->registration_ = Request::kUnregistered;
    return absl::OkStatus();
  }
  // The memory the data lies in.
  const void* span_start = data.buf;
  uint64_t span = spec.segment.last;
  if (const Datatype* t = data.type; t != nullptr && !t->contiguous()) {
    span_start = static_cast<const std::byte*>(data.buf) + t->true_lb();
    span = data.count == 0 ? 0 : static_cast<uint64_t>((data.count - 1) * t->extent() + t->true_extent());
  }
  absl::StatusOr<uint64_t> token = rt_->routes().Register(any_source ? -1 : world, span_start, span);
  if (!token.ok()) {
    rt_->Release(req->car_);
    req->car_ = nullptr;
    return absl::Status(token.status().code(), absl::StrFormat("%s %s rank %d (tag %d): registering the buffer: %s",
                                                               op(), dir(), peer, tag, token.status().message()));
  }
  req->registration_ = *token;
  return absl::OkStatus();
}

absl::Status Comm::Start(bool send, bool sync, Buffer data, int peer, int tag, Request* req, Persistence persistence,
                         uint32_t context) const {
  return Begin(send, sync, data, peer, tag, req, persistence, context);
}

namespace {
// A byte count as the signed count Buffer takes (a size_t past INT64_MAX
// becomes negative and is refused as an invalid count).
int64_t Bytes(std::size_t n) { return static_cast<int64_t>(n); }
}  // namespace

absl::Status Comm::Isend(const void* buf, std::size_t bytes, int dest, int tag, Request* req) const {
  return Begin(true, false, {const_cast<void*>(buf), Bytes(bytes), nullptr}, dest, tag, req);
}
absl::Status Comm::Issend(const void* buf, std::size_t bytes, int dest, int tag, Request* req) const {
  return Begin(true, true, {const_cast<void*>(buf), Bytes(bytes), nullptr}, dest, tag, req);
}
absl::Status Comm::Irecv(void* buf, std::size_t bytes, int source, int tag, Request* req) const {
  return Begin(false, false, {buf, Bytes(bytes), nullptr}, source, tag, req);
}
absl::Status Comm::SendInit(const void* buf, std::size_t bytes, int dest, int tag, Request* req) const {
  return Start(true, false, {const_cast<void*>(buf), Bytes(bytes), nullptr}, dest, tag, req, Persistence::kRegistered);
}
absl::Status Comm::RecvInit(void* buf, std::size_t bytes, int source, int tag, Request* req) const {
  return Start(false, false, {buf, Bytes(bytes), nullptr}, source, tag, req, Persistence::kRegistered);
}

absl::Status Comm::Isend(const void* buf, int64_t count, const Datatype& type, int dest, int tag,
                         Request* req) const {
  return Start(true, false, {const_cast<void*>(buf), count, &type}, dest, tag, req);
}
absl::Status Comm::Issend(const void* buf, int64_t count, const Datatype& type, int dest, int tag,
                          Request* req) const {
  return Start(true, true, {const_cast<void*>(buf), count, &type}, dest, tag, req);
}
absl::Status Comm::Irecv(void* buf, int64_t count, const Datatype& type, int source, int tag,
                         Request* req) const {
  return Start(false, false, {buf, count, &type}, source, tag, req);
}
absl::Status Comm::SendInit(const void* buf, int64_t count, const Datatype& type, int dest, int tag,
                            Request* req) const {
  return Start(true, false, {const_cast<void*>(buf), count, &type}, dest, tag, req, Persistence::kRegistered);
}
absl::Status Comm::RecvInit(void* buf, int64_t count, const Datatype& type, int source, int tag,
                            Request* req) const {
  return Start(false, false, {buf, count, &type}, source, tag, req, Persistence::kRegistered);
}
absl::Status Comm::Send(const void* buf, int64_t count, const Datatype& type, int dest, int tag) const {
  return Blocking(true, false, {const_cast<void*>(buf), count, &type}, dest, tag, nullptr);
}
absl::Status Comm::Recv(void* buf, int64_t count, const Datatype& type, int source, int tag,
                        ProbeResult* status) const {
  return Blocking(false, false, {buf, count, &type}, source, tag, status);
}

absl::Status Comm::Blocking(bool send, bool sync, Buffer data, int peer, int tag, ProbeResult* status) const {
  if (!alive()) [[unlikely]] return Gone(OpName(send, sync));
  if (!rt_->fast_path()) [[unlikely]] {
    Request r;
    CARTAGE_RETURN_IF_ERROR(Start(send, sync, data, peer, tag, &r));
    const absl::Status s = r.Wait();
    if (status != nullptr) *status = {r.source(), r.tag(), r.bytes()};
    return s;
  }
  // The same CAR, posted and waited for alike, counting down a completion
  // of this call's own: no Request is made, entered and finished.
  Runtime::Entry in(rt_);
  if (!in.ok()) {
    return in.status(absl::StrFormat("%s %s rank %d (tag %d)", OpName(send, sync), Toward(send), peer, tag));
  }
  car::MessageSpec spec;
  int world = 0;
  CARTAGE_RETURN_IF_ERROR(Prepare(send, sync, data, peer, tag, kOwnContext, &spec, &world));
  base::Completion done;
  const absl::Status s = rt_->RunBlocking(spec, world == kAnySource ? -1 : world, &done);
  if (status != nullptr) *status = {CommRankOf(group_.get(), done.source), done.tag, done.bytes};
  return s;
}

absl::Status Comm::Send(const void* buf, std::size_t bytes, int dest, int tag) const {
  return Blocking(true, false, {const_cast<void*>(buf), Bytes(bytes), nullptr}, dest, tag, nullptr);
}
absl::Status Comm::Ssend(const void* buf, std::size_t bytes, int dest, int tag) const {
  return Blocking(true, true, {const_cast<void*>(buf), Bytes(bytes), nullptr}, dest, tag, nullptr);
}
absl::Status Comm::Recv(void* buf, std::size_t bytes, int source, int tag, ProbeResult* status) const {
  return Blocking(false, false, {buf, Bytes(bytes), nullptr}, source, tag, status);
}

absl::StatusOr<std::optional<ProbeResult>> Comm::Iprobe(int source, int tag) const {
  CARTAGE_RETURN_IF_ERROR(Alive("probe"));
  if (source != kAnySource && (source < 0 || source >= size_)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("probe from rank %d (tag %d): no such rank in a communicator of %d", source, tag, size_));
  }
  if (tag != kAnyTag && (tag < 0 || tag > kMaxTag)) {
    return absl::InvalidArgumentError(absl::StrFormat("probe from rank %d: invalid tag %d (0..%d)", source, tag, kMaxTag));
  }
  Runtime::Entry in(rt_);
  if (!in.ok()) return in.status(absl::StrFormat("probe from rank %d (tag %d)", source, tag));
  rt_->AllowHolding(false);  // what has arrived goes to the unexpected queue, where Peek looks
  rt_->Progress();
  rt_->AllowHolding(true);
  const int world = source == kAnySource ? kAnySource : WorldRank(source);
  absl::StatusOr<std::optional<methods::Method::Probed>> u = rt_->Peek(context_, world, tag);
  if (!u.ok()) {
    return absl::Status(u.status().code(), absl::StrFormat("probe from rank %d (tag %d): %s", source, tag,
                                                           u.status().message()));
  }
  if (!u->has_value()) return std::optional<ProbeResult>();
  int from = (*u)->source;
  if (group_) {
    from = static_cast<int>(std::find(group_->begin(), group_->end(), from) - group_->begin());
  }
  return std::optional<ProbeResult>(ProbeResult{from, (*u)->tag, (*u)->bytes});
}

absl::StatusOr<ProbeResult> Comm::Probe(int source, int tag) const {
  CARTAGE_RETURN_IF_ERROR(Alive("probe"));
  Runtime::Entry in(rt_);
  if (!in.ok()) return in.status(absl::StrFormat("probe from rank %d (tag %d)", source, tag));
  std::optional<ProbeResult> found;
  absl::Status error;
  rt_->WaitUntil([&] {
    absl::StatusOr<std::optional<ProbeResult>> p = Iprobe(source, tag);
    if (!p.ok()) error = p.status();
    else found = *p;
    return !error.ok() || found.has_value();
  });
  if (!error.ok()) return error;
  return *found;
}

bool Comm::Oversubscribed() const { return Alive("").ok() && rt_->oversubscribed(); }

bool Comm::Crowded() const { return Alive("").ok() && rt_->crowded(); }

absl::Status Comm::Gone(absl::string_view op) { return GoneError(op); }

absl::StatusOr<PathInfo> Comm::PathTo(int peer) const {
  CARTAGE_RETURN_IF_ERROR(Alive("path"));
  if (peer < 0 || peer >= size_) {
    return absl::InvalidArgumentError(absl::StrFormat("path: no rank %d in a communicator of %d", peer, size_));
  }
  const methods::Method& m = rt_->routes().MethodFor(WorldRank(peer));
  const methods::Capabilities& c = m.caps();
  return PathInfo{.method = std::string(m.name()),
                  .eager_limit = c.eager_limit,
                  .max_buffer = c.max_buffer,
                  .lends_buffers = c.needs_registration || c.max_buffer > 0,
                  .single_copy = c.single_copy};
}

absl::StatusOr<std::shared_ptr<std::byte>> Comm::LendBuffer(int peer, std::size_t bytes) const {
  CARTAGE_RETURN_IF_ERROR(Alive("lend buffer"));
  if (peer < 0 || peer >= size_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("lend buffer: no rank %d in a communicator of %d", peer, size_));
  }
  Runtime::Entry in(rt_);
  if (!in.ok()) return in.status(absl::StrFormat("lend buffer (rank %d)", peer));
  CARTAGE_ASSIGN_OR_RETURN(std::byte * p, rt_->Lend(WorldRank(peer), bytes));
  std::weak_ptr<const void> alive = rt_->Liveness();
  Runtime* rt = rt_;
  return std::shared_ptr<std::byte>(p, [rt, alive](std::byte* q) {
    if (alive.lock() == nullptr) return;  // the runtime gave it back when it finalized
    // From a thread the level does not allow, it waits for finalize instead.
    Runtime::Entry admitted(rt);
    if (admitted.ok()) rt->GiveBack(q);
  });
}

// ---- Matched probes ------------------------------------------------------------

// A matched message is received at once into memory of its own, by a
// receive posted in the same step as the probe that found it (the oldest
// message the probe matches is the oldest its exact source and tag match,
// so it is that one); Mrecv copies it out. No other receive, on any thread,
// can take it in between.
struct Message::State {
  Request req;                  // the receive into `data`
  std::vector<std::byte> data;
  uint32_t context = 0;
  int source = 0;               // a rank of the communicator probed
  int world_source = 0;         // the same as a world rank
  int tag = 0;
  uint64_t bytes = 0;
};

Message::Message() = default;
Message::~Message() = default;
Message::Message(Message&&) noexcept = default;
Message& Message::operator=(Message&&) noexcept = default;
int Message::source() const { return state_ != nullptr ? state_->source : kAnySource; }
int Message::tag() const { return state_ != nullptr ? state_->tag : kAnyTag; }
uint64_t Message::bytes() const { return state_ != nullptr ? state_->bytes : 0; }

namespace {

// Mrecv's request: done once the matched message's own receive is, its
// bytes then copied (unpacked) into the user's buffer.
class MatchedReceive : public engine::Activity {
 public:
  MatchedReceive(std::unique_ptr<Message::State> st, void* buf, int64_t count, std::optional<Datatype> type,
                 base::Completion* out)
      : st_(std::move(st)), buf_(buf), count_(count), type_(std::move(type)), out_(out) {}
  absl::Status Begin() override { return absl::OkStatus(); }
  std::optional<absl::Status> Poll(int* work) override {
    if (!st_->req.completed()) return std::nullopt;
    ++*work;
    const absl::Status s = st_->req.Wait();  // completed: returns at once
    out_->source = st_->world_source;
    out_->tag = st_->tag;
    if (!s.ok()) return s;
    const int64_t room = type_.has_value() ? count_ * type_->size() : count_;
    const auto n = static_cast<int64_t>(st_->data.size());
    if (n > room) {
      return absl::OutOfRangeError(absl::StrFormat(
          "mrecv from rank %d (tag %d): the message has %d bytes, the buffer room for %d", st_->source, st_->tag, n,
          room));
    }
    if (n > 0) {
      if (type_.has_value()) {
        datatype::Unpack(st_->data.data(), count_, *type_, 0, n, buf_);
      } else {
        std::memcpy(buf_, st_->data.data(), static_cast<std::size_t>(n));
      }
    }
    out_->bytes = static_cast<uint64_t>(n);
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<Message::State> st_;
  void* buf_;
  int64_t count_;
  std::optional<Datatype> type_;
  base::Completion* out_;
};

}  // namespace

absl::StatusOr<std::optional<Message>> Comm::Improbe(int source, int tag) const {
  CARTAGE_RETURN_IF_ERROR(Alive("mprobe"));
  // The probe and the receive it posts are one step to every other thread.
  Runtime::Entry in(rt_);
  if (!in.ok()) return in.status(absl::StrFormat("mprobe from rank %d (tag %d)", source, tag));
  absl::StatusOr<std::optional<ProbeResult>> found = Iprobe(source, tag);
  if (!found.ok()) return found.status();
  if (!found->has_value()) return std::optional<Message>();
  const ProbeResult& p = **found;
  auto st = std::make_unique<Message::State>();
  st->context = context_;
  st->source = p.source;
  st->world_source = WorldRank(p.source);
  st->tag = p.tag;
  st->bytes = p.bytes;
  st->data.resize(p.bytes);
  if (absl::Status s = Irecv(st->data.data(), st->data.size(), p.source, p.tag, &st->req); !s.ok()) {
    return Named("mprobe", s);
  }
  Message m;
  m.state_ = std::move(st);
  return std::optional<Message>(std::move(m));
}

absl::StatusOr<Message> Comm::Mprobe(int source, int tag) const {
  CARTAGE_RETURN_IF_ERROR(Alive("mprobe"));
  Runtime::Entry in(rt_);
  if (!in.ok()) return in.status(absl::StrFormat("mprobe from rank %d (tag %d)", source, tag));
  std::optional<Message> found;
  absl::Status error;
  rt_->WaitUntil([&] {
    absl::StatusOr<std::optional<Message>> m = Improbe(source, tag);
    if (!m.ok()) {
      error = m.status();
    } else if (m->has_value()) {
      found = std::move(*m);
    }
    return !error.ok() || found.has_value();
  });
  if (!error.ok()) return error;
  return std::move(*found);
}

absl::Status Comm::Imrecv(void* buf, int64_t count, const Datatype& type, Message* message, Request* req) const {
  CARTAGE_RETURN_IF_ERROR(Alive("mrecv"));
  if (message == nullptr || !message->valid()) {
    return absl::InvalidArgumentError("mrecv: no message (the matched probe found none, or it was received already)");
  }
  if (message->state_->context != context_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "mrecv from rank %d (tag %d): the message was probed on another communicator", message->source(),
        message->tag()));
  }
  if (count < 0 || (count > 0 && buf == nullptr)) {
    return absl::InvalidArgumentError(absl::StrFormat("mrecv from rank %d (tag %d): invalid buffer (count %d)",
                                                      message->source(), message->tag(), count));
  }
  if (req == nullptr || req->active() || req->persistent()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "mrecv from rank %d (tag %d): the request is %s", message->source(), message->tag(),
        req == nullptr ? "null" : req->active() ? "still active" : "persistent"));
  }
  Runtime::Entry in(rt_);
  if (!in.ok()) return in.status(absl::StrFormat("mrecv from rank %d (tag %d)", message->source(), message->tag()));
  std::optional<Datatype> layout;
  if (!type.contiguous() || type.size() != 1) layout = type;
  const int64_t n = layout.has_value() ? count : count * type.size();
  auto activity = std::make_shared<MatchedReceive>(std::move(message->state_), buf, n, std::move(layout), &req->done_);
  return engine::Launch(*this, std::move(activity), /*persistent=*/false, req);
}

absl::Status Comm::Imrecv(void* buf, std::size_t bytes, Message* message, Request* req) const {
  static const Datatype kByte = Datatype::Basic(BasicType::kByte);
  return Imrecv(buf, Bytes(bytes), kByte, message, req);
}

absl::Status Comm::Mrecv(void* buf, int64_t count, const Datatype& type, Message* message,
                         ProbeResult* status) const {
  Request r;
  CARTAGE_RETURN_IF_ERROR(Imrecv(buf, count, type, message, &r));
  const absl::Status s = r.Wait();
  if (status != nullptr) *status = {r.source(), r.tag(), r.bytes()};
  return s;
}

absl::Status Comm::Mrecv(void* buf, std::size_t bytes, Message* message, ProbeResult* status) const {
  static const Datatype kByte = Datatype::Basic(BasicType::kByte);
  return Mrecv(buf, Bytes(bytes), kByte, message, status);
}

}  // namespace cartage
