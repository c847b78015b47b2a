// cartage/cartage.h: Agent, Comm, Request over the Runtime.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <limits>
#include <mutex>
#include <optional>
#include <tuple>

#include "absl/strings/str_format.h"
#include "agent/bootstrap.h"
#include "agent/runtime.h"
#include "agent/trace.h"
#include "car/car.h"
#include "cartage/cartage.h"
#include "cartage/engine.h"

namespace cartage {

using agent::Runtime;

// The user's wildcards are the CARs' own.
static_assert(kAnySource == car::kAnySource && kAnyTag == car::kAnyTag);

namespace {
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

absl::StatusOr<std::unique_ptr<Agent>> Agent::FromEnvironment() {
  if (g_agents.load() > 0) {
    return absl::FailedPreconditionError(
        "Agent::FromEnvironment: this process has an agent already (one per program; destroy it first)");
  }
  CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<methods::Exchange> boot, agent::OpenJobExchange());
  CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<agent::ProcessTrace> trace, agent::ProcessTrace::FromEnvironment(*boot));
  CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Create(std::move(boot), std::move(trace)));
  return std::unique_ptr<Agent>(new Agent(std::move(rt)));
}
Agent::Agent(std::unique_ptr<Runtime> rt) : rt_(std::move(rt)) { ++g_agents; }
Agent::~Agent() {
  if (rt_->life()->load()) {
    const absl::Status s = rt_->Finalize();
    if (!s.ok()) std::fprintf(stderr, "cartage: %s\n", std::string(s.message()).c_str());
  }
  rt_.reset();
  --g_agents;
}
absl::Status Agent::Finalize() {
  if (!rt_->life()->load()) return absl::FailedPreconditionError("finalize: this Agent finalized already");
  return rt_->Finalize();
}
Comm Agent::World() const { return Comm(rt_.get(), rt_->life(), rt_->rank(), rt_->size(), 0); }
int Agent::rank() const { return rt_->rank(); }
int Agent::size() const { return rt_->size(); }
int Agent::Progress() { return rt_->life()->load() ? rt_->Progress() : 0; }
int Agent::registered_buffers() const { return rt_->life()->load() ? rt_->routes().registered() : 0; }
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

int Request::CommRank(int world) const {
  if (!group_) return world;
  const auto it = std::find(group_->begin(), group_->end(), world);
  return it == group_->end() ? -1 : static_cast<int>(it - group_->begin());
}

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
  if (!done_.done()) runtime_->Progress();
  if (!done_.done()) return false;
  Finish();
  return true;
}

absl::Status Request::Cancel() {
  if (!in_flight_) return absl::FailedPreconditionError("cancel: the request is not active");
  if (Orphaned()) return Abandon("cancel");
  if (activity_) return absl::FailedPreconditionError("cancel: a collective cannot be cancelled");
  return runtime_->Cancel(car_);
}

absl::Status Request::Start() {
  if (Orphaned()) return Abandon("start");
  if (!persistent_ || (car_ == nullptr && !activity_)) {
    return absl::FailedPreconditionError("start: not a persistent request (use Comm::SendInit/RecvInit)");
  }
  if (in_flight_) return absl::FailedPreconditionError("start: the persistent request is still active");
  if (activity_) return BeginActivity();
  CARTAGE_RETURN_IF_ERROR(Rearm(&done_));
  return runtime_->Post(this);
}

absl::Status Request::Rearm(base::Completion* counter) {
  if (peer_ >= 0 && !runtime_->PeerStatus(peer_).ok()) {  // as Comm's Isend and Irecv refuse it
    const bool send = car_->kind() == car::CarKind::kSend;
    return absl::UnavailableError(absl::StrFormat("start: persistent %s %s rank %d: %s", send ? "send" : "recv",
                                                  send ? "to" : "from", CommRank(peer_),
                                                  runtime_->PeerStatus(peer_).message()));
  }
  car_->Rearm();
  car_->Recount(counter);
  runtime_->Rebind(*car_, peer_);
  return absl::OkStatus();
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
  done_.pending = 1;
  runtime_->Watch(activity_.get(), this);
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
  if (registration_ != kUnregistered) runtime_->routes().Unregister(registration_);
  runtime_->Release(car_);
  car_ = nullptr;
  persistent_ = false;
  return absl::OkStatus();
}

Request::~Request() {
  if (Orphaned()) {
    (void)Abandon("");
    return;
  }
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
  bool progressed = false;
  for (int round = 0; round < 2; ++round) {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      Request* r = requests[i];
      if (r->in_flight_ && r->done_.done()) {
        r->Finish();
        return i;
      }
      if (r->in_flight_ && !progressed) {
        r->runtime_->Progress();
        progressed = true;
      }
    }
  }
  return std::nullopt;
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
  rt->WaitUntil([&] {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (requests[i]->in_flight_ && requests[i]->done_.done()) {
        which = i;
        return true;
      }
    }
    return false;
  });
  requests[which]->Finish();
  return which;
}

absl::StatusOr<std::vector<std::size_t>> WaitSome(absl::Span<Request* const> requests) {
  CARTAGE_ASSIGN_OR_RETURN(std::size_t first, WaitAny(requests));
  std::vector<std::size_t> done = {first};
  for (std::size_t i = 0; i < requests.size(); ++i) {
    if (requests[i]->in_flight_ && requests[i]->done_.done()) {
      requests[i]->Finish();
      done.push_back(i);
    }
  }
  std::sort(done.begin(), done.end());
  return done;
}

// ---- Comm ----------------------------------------------------------------------

absl::Status Comm::Start(bool send, bool sync, Buffer data, int peer, int tag, Request* req, Persistence persistence,
                         uint32_t context) const {
  void* const buf = data.buf;
  const char* op = send ? (sync ? "ssend" : "send") : "recv";
  const char* dir = send ? "to" : "from";
  CARTAGE_RETURN_IF_ERROR(Alive(op));
  if (req == nullptr || req->active() || req->persistent()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s %s rank %d (tag %d): the request is %s", op, dir, peer, tag,
                        req == nullptr ? "null" : req->active() ? "still active" : "persistent"));
  }
  const bool any_source = !send && peer == kAnySource;
  if (!any_source && (peer < 0 || peer >= size_)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s %s rank %d (tag %d): no such rank in a communicator of %d", op, dir, peer, tag, size_));
  }
  const bool any_tag = !send && tag == kAnyTag;
  if (!any_tag && (tag < 0 || tag > kMaxTag)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %s rank %d: invalid tag %d (0..%d)", op, dir, peer, tag, kMaxTag));
  }
  const int64_t unit = data.type != nullptr ? data.type->size() : 1;
  if (data.count < 0 ||
      (data.type != nullptr && unit > 0 && data.count > std::numeric_limits<int64_t>::max() / unit)) {
    return absl::InvalidArgumentError(absl::StrFormat("%s %s rank %d (tag %d): invalid count %d of %s", op, dir,
                                                      peer, tag, data.count,
                                                      data.type != nullptr ? data.type->name() : "bytes"));
  }
  const int64_t bytes = data.count * unit;
  if (buf == nullptr && bytes > 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %s rank %d (tag %d): null buffer for %d bytes", op, dir, peer, tag, bytes));
  }
  const int world = any_source ? kAnySource : WorldRank(peer);
  if (!any_source && !rt_->PeerStatus(world).ok()) {
    return absl::UnavailableError(absl::StrFormat("%s %s rank %d (tag %d): %s", op, dir, peer, tag,
                                                  rt_->PeerStatus(world).message()));
  }
  const uint32_t ctx = context == kOwnContext ? context_ : context;
  if (!rt_->routes().EnvelopeFits(world, ctx, any_tag ? 0 : tag)) {
    const absl::Status fits = rt_->routes().CheckEnvelope(world, ctx, any_tag ? 0 : tag);
    return absl::Status(fits.code(), absl::StrFormat("%s %s rank %d (tag %d): %s", op, dir, peer, tag, fits.message()));
  }
  car::CarSpec spec;
  spec.kind = send ? car::CarKind::kSend : car::CarKind::kRecv;
  spec.flags = send ? car::CarFlag::kSendData : car::CarFlag::kRecvData;
  spec.envelope = {ctx, world, tag};
  const auto n = static_cast<uint64_t>(bytes);
  const void* span_start = buf;  // the memory the data lies in, for registration
  uint64_t span = n;
  if (data.type != nullptr && !data.type->contiguous()) {
    req->type_ = *data.type;  // the CAR's segment points here while it lives
    spec.segment = car::Segment::Of(buf, static_cast<uint64_t>(data.count), *req->type_);
    const Datatype& t = *req->type_;
    span_start = static_cast<const std::byte*>(buf) + t.true_lb();
    span = data.count == 0 ? 0 : static_cast<uint64_t>((data.count - 1) * t.extent() + t.true_extent());
  } else {
    req->type_.reset();
    spec.segment = car::Segment::Of(buf, n, datatype::BasicType::kByte);
  }
  spec.synchronous = sync;
  req->group_ = group_;
  CARTAGE_RETURN_IF_ERROR(rt_->Create(spec, any_source ? -1 : world, req));
  if (persistence == Persistence::kUnregistered) {
    req->persistent_ = true;
    req->registration_ = Request::kUnregistered;
    return absl::OkStatus();
  }
  if (persistence == Persistence::kRegistered) {
    req->persistent_ = true;
    absl::StatusOr<uint64_t> token = rt_->routes().Register(any_source ? -1 : world, span_start, span);
    if (!token.ok()) {
      rt_->Release(req->car_);
      req->car_ = nullptr;
      return absl::Status(token.status().code(), absl::StrFormat("%s %s rank %d (tag %d): registering the buffer: %s",
                                                                 op, dir, peer, tag, token.status().message()));
    }
    req->registration_ = *token;
    return absl::OkStatus();
  }
  return rt_->Post(req);
}

namespace {
// A byte count as the signed count Buffer takes (a size_t past INT64_MAX
// becomes negative and is refused as an invalid count).
int64_t Bytes(std::size_t n) { return static_cast<int64_t>(n); }
}  // namespace

absl::Status Comm::Isend(const void* buf, std::size_t bytes, int dest, int tag, Request* req) const {
  return Start(true, false, {const_cast<void*>(buf), Bytes(bytes), nullptr}, dest, tag, req);
}
absl::Status Comm::Issend(const void* buf, std::size_t bytes, int dest, int tag, Request* req) const {
  return Start(true, true, {const_cast<void*>(buf), Bytes(bytes), nullptr}, dest, tag, req);
}
absl::Status Comm::Irecv(void* buf, std::size_t bytes, int source, int tag, Request* req) const {
  return Start(false, false, {buf, Bytes(bytes), nullptr}, source, tag, req);
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
  Request r;
  CARTAGE_RETURN_IF_ERROR(Start(send, sync, data, peer, tag, &r));
  const absl::Status s = r.Wait();
  if (status != nullptr) *status = {r.source(), r.tag(), r.bytes()};
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
  CARTAGE_ASSIGN_OR_RETURN(std::byte * p, rt_->Lend(WorldRank(peer), bytes));
  std::weak_ptr<const void> alive = rt_->Liveness();
  Runtime* rt = rt_;
  return std::shared_ptr<std::byte>(p, [rt, alive](std::byte* q) {
    if (alive.lock() != nullptr) rt->GiveBack(q);  // else the runtime gave it back when it finalized
  });
}

Comm Comm::Dup() const {
  if (!Alive("dup").ok()) return *this;  // as gone as this one: every call on it says so
  return Comm(rt_, life_, rank_, size_, rt_->NewContext(), group_);
}

absl::StatusOr<std::optional<Comm>> Comm::Split(int color, int key) const {
  CARTAGE_RETURN_IF_ERROR(Alive("split"));
  // Everyone learns everyone's (color, key) over this communicator's
  // collective context, so the exchange never meets point-to-point traffic.
  constexpr int kSplitTag = 1;
  const uint32_t collective = context_ + 1;
  const int mine[2] = {color, key};
  std::vector<int> all(2 * static_cast<std::size_t>(size_));
  std::vector<Request> reqs(2 * static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    CARTAGE_RETURN_IF_ERROR(Start(false, false, {&all[2 * static_cast<std::size_t>(r)], sizeof(mine), nullptr}, r,
                                  kSplitTag, &reqs[static_cast<std::size_t>(r)], Persistence::kNone, collective));
    CARTAGE_RETURN_IF_ERROR(Start(true, false, {const_cast<int*>(mine), sizeof(mine), nullptr}, r, kSplitTag,
                                  &reqs[static_cast<std::size_t>(size_ + r)], Persistence::kNone, collective));
  }
  for (Request& r : reqs) {
    if (absl::Status s = r.Wait(); !s.ok()) {
      return absl::Status(s.code(), absl::StrFormat("split: exchanging colors: %s", s.message()));
    }
  }
  const uint32_t context = rt_->NewContext();  // every rank takes one, whatever its color
  if (color < 0) return std::optional<Comm>();
  std::vector<std::tuple<int, int, int>> members;  // (key, rank here, world rank)
  for (int r = 0; r < size_; ++r) {
    if (all[2 * static_cast<std::size_t>(r)] == color) {
      members.emplace_back(all[2 * static_cast<std::size_t>(r) + 1], r, WorldRank(r));
    }
  }
  std::sort(members.begin(), members.end());
  auto group = std::make_shared<std::vector<int>>();
  int my_rank = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    group->push_back(std::get<2>(members[i]));
    if (std::get<1>(members[i]) == rank_) my_rank = static_cast<int>(i);
  }
  const int n = static_cast<int>(group->size());
  return std::optional<Comm>(Comm(rt_, life_, my_rank, n, context, std::move(group)));
}

}  // namespace cartage
