#include "agent/runtime.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "agent/lane_exchange.h"
#include "base/check.h"
#include "car/machines.h"
#include "car/recv_fsm.h"
#include "car/rma_fsm.h"
#include "car/send_fsm.h"
#include "car/unexpected_fsm.h"
#include "cartage/cartage.h"

namespace cartage::agent {

using car::Car;
using car::CarKind;

namespace {

// A live cell for a new runtime. The cells are never freed: a Comm or Request
// may outlive its runtime and must still find its cell.
std::atomic<bool>* NewLifeCell() {
  static std::mutex mu;
  static auto* cells = new std::deque<std::atomic<bool>>();
  std::lock_guard<std::mutex> lock(mu);
  return &cells->emplace_back(true);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create(std::unique_ptr<methods::Exchange> exchange,
                                                         std::unique_ptr<ProcessTrace> trace, Threading threading) {
  if (threading.lanes <= 1) {
    CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt,
                             Open(std::move(exchange), std::move(trace), threading, nullptr, 0));
    rt->StartProgressThread();
    return rt;
  }
  auto shared = std::make_shared<LaneExchange::Shared>();
  shared->base = std::move(exchange);
  CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Open(std::make_unique<LaneExchange>(shared, 0),
                                                            std::move(trace), threading, nullptr, 0));
  for (int lane = 1; lane < threading.lanes; ++lane) {
    absl::StatusOr<std::unique_ptr<Runtime>> l =
        Open(std::make_unique<LaneExchange>(shared, lane), nullptr, threading, rt.get(), lane);
    if (!l.ok()) {
      // Lane 0 and the lanes opened go without a fence: the job never started.
      rt->AbandonLanes();
      return absl::Status(l.status().code(),
                          absl::StrFormat("opening lane %d of %d: %s", lane, threading.lanes, l.status().message()));
    }
    rt->siblings_.push_back(*std::move(l));
  }
  for (const auto& l : rt->siblings_) rt->lanes_.push_back(l.get());
  for (const auto& l : rt->siblings_) l->lanes_ = rt->lanes_;
  rt->StartProgressThread();
  return rt;
}

void Runtime::StartProgressThread() {
  if (!threading_.progress_thread) return;
  for (Runtime* l : lanes_) l->progress_on_.store(true, std::memory_order_relaxed);
  progress_ = std::thread([this] { ProgressThreadMain(); });
}

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Open(std::unique_ptr<methods::Exchange> exchange,
                                                       std::unique_ptr<ProcessTrace> trace, Threading threading,
                                                       Runtime* first, int lane) {
  auto rt = std::unique_ptr<Runtime>(new Runtime());
  rt->lane_ = lane;
  rt->first_ = first != nullptr ? first : rt.get();
  rt->lanes_ = {rt.get()};
  rt->threading_ = threading;
  rt->owner_ = ThisThread();
  rt->owner_only_ = threading.level == ThreadLevel::kSingle || threading.level == ThreadLevel::kFunneled;
  rt->serial_check_ = threading.level == ThreadLevel::kSerialized;
  rt->locked_ = threading.level == ThreadLevel::kMultiple || threading.progress_thread;
  rt->fast_gate_ = rt->owner_only_ && !rt->locked_;
  rt->life_ = NewLifeCell();
  rt->trace_ = std::move(trace);
  rt->exchange_ = std::move(exchange);
  rt->rank_ = rt->exchange_->rank();
  rt->size_ = rt->exchange_->size();
  rt->InstallAgentOps(rt->agent_any_vc_);
  rt->agent_any_vc_.name = "any";
  // Before the methods open: one that buffers unexpected messages itself (ofi's provider) honours it too.
  if (const char* v = std::getenv("CARTAGE_UNEXPECTED_MAX_MB"); v != nullptr && *v != '\0') {
    uint64_t mb = 0;
    if (!absl::SimpleAtoi(v, &mb) || mb < 1 || mb > (uint64_t{1} << 40)) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_UNEXPECTED_MAX_MB=%s: need MiB >= 1", v));
    }
    rt->unexpected_max_ = mb << 20;
  }
  if (const char* v = std::getenv("CARTAGE_FAST_PATH"); v != nullptr && *v != '\0') {
    const absl::string_view f(v);
    if (f != "0" && f != "1") return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_FAST_PATH=%s: need 0 or 1", f));
    rt->fast_path_ = f == "1";
  }
  // Oversubscription steers choices every rank must make alike (the
  // collectives' schedules, shm's copies and ring sizes): agreed before the
  // methods set up. Each host counts the ranks the launcher placed on it.
  if (first == nullptr) {
    const int here = static_cast<int>(rt->exchange_->HostRanks().size());
    CARTAGE_ASSIGN_OR_RETURN(rt->oversubscribed_, methods::JobOversubscribed(here));
    rt->crowded_ = rt->oversubscribed_ && methods::JobCrowded(here);
    CARTAGE_RETURN_IF_ERROR(rt->AgreeOnOversubscription(here));
  } else {
    rt->oversubscribed_ = first->oversubscribed_;
    rt->crowded_ = first->crowded_;
  }
  CARTAGE_RETURN_IF_ERROR(rt->routes_.Open(*rt->exchange_, *rt, rt->size(), &rt->agent_any_vc_));
  // Each lane's CAR ids apart from the others', for the trace.
  rt->pool_ = std::make_unique<car::CarPool>(car::CarPool::Options{
      .method_private_bytes = rt->routes_.private_bytes(), .first_id = 1 + (static_cast<uint64_t>(lane) << 48)});
  CARTAGE_RETURN_IF_ERROR(rt->pool_->Reserve(256));
  if (rt->trace_ != nullptr) {
    // Lane 0's trace lists every lane's CARs (lanes_ is whole by the time a
    // dump asks), each other lane under its lock: lane 0 asks, holding its own.
    rt->trace_->SetLiveLister([r = rt.get()](std::vector<fsm::LiveCar>& out) {
      const int64_t now = absl::GetCurrentTimeNanos();
      for (Runtime* l : r->lanes_) {
        const bool lock = l != r && l->locked_ && l->holder_.load(std::memory_order_relaxed) != ThisThread();
        if (lock) l->Lock();
        l->pool_->ForEachLive([&](const Car& c) { out.push_back(car::DescribeLive(c, now)); });
        if (lock) l->Unlock(false);
      }
    });
  }
  rt->matcher_ = std::make_unique<Matcher>(rt->size());
  rt->dead_.assign(static_cast<std::size_t>(rt->size()), absl::OkStatus());
  rt->temps_ = std::make_unique<TempBuffers>(rt->routes_.largest_eager_limit());
  rt->handed_off_.reserve(64);
  CARTAGE_ASSIGN_OR_RETURN(rt->wait_, WaitPolicy::ForJob(rt->oversubscribed_, rt->crowded_));
  rt->last_peer_check_ = std::chrono::steady_clock::now();
  return rt;
}

absl::Status Runtime::AgreeOnOversubscription(int here) {
  if (size() == 1) return absl::OkStatus();
  const auto word = [](bool over, bool crowded) { return over ? (crowded ? "crowded" : "yes") : "no"; };
  if (here == size()) {
    // One host: every rank counts the same CPUs, so rank 0's answer is every
    // rank's unless CARTAGE_OVERSUBSCRIBED tells them apart.
    if (rank() == 0) CARTAGE_RETURN_IF_ERROR(exchange_->Put(kOversubscribedKey, word(oversubscribed_, crowded_)));
    CARTAGE_RETURN_IF_ERROR(exchange_->Fence());
    if (rank() == 0) return absl::OkStatus();
    // An explicit StatusOr: GCC 12 misreads the macro's string as uninitialized.
    const absl::StatusOr<std::string> first = exchange_->GetFrom(0, kOversubscribedKey);
    if (!first.ok()) return first.status();
    if (*first == word(oversubscribed_, crowded_)) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrFormat(
        "start-up: rank %d counts the job as %soversubscribed but rank 0 as %soversubscribed "
        "(CARTAGE_OVERSUBSCRIBED must be the same on every rank)",
        rank(), oversubscribed_ ? "" : "not ", *first == "no" ? "not " : ""));
  }
  // Several hosts, each with its own answer: the job counts as
  // oversubscribed (crowded) where any host is.
  const std::string key = absl::StrCat(kOversubscribedKey, ".", rank());
  CARTAGE_RETURN_IF_ERROR(exchange_->Put(key, word(oversubscribed_, crowded_)));
  CARTAGE_RETURN_IF_ERROR(exchange_->Fence());
  for (int r = 0; r < size(); ++r) {
    const absl::StatusOr<std::string> w = exchange_->GetFrom(r, absl::StrCat(kOversubscribedKey, ".", r));
    if (!w.ok()) return w.status();
    oversubscribed_ = oversubscribed_ || *w != "no";
    crowded_ = crowded_ || *w == "crowded";
  }
  return absl::OkStatus();
}

void Runtime::InstallAgentOps(car::Vc& vc) {
  vc.post_recv = &Runtime::PostRecv;
  vc.unpost_recv = &Runtime::UnpostRecv;
}

absl::StatusOr<std::byte*> Runtime::Lend(int peer, std::size_t bytes) {
  methods::Method& m = routes_.MethodFor(peer);
  CARTAGE_ASSIGN_OR_RETURN(methods::MethodBuffer b, m.AllocBuffer(std::max<std::size_t>(bytes, 1)));
  lent_[b.data] = {&m, b};
  return b.data;
}

void Runtime::GiveBack(std::byte* p) {
  auto it = lent_.find(p);
  if (it == lent_.end()) return;
  it->second.first->FreeBuffer(it->second.second);
  lent_.erase(it);
}

Runtime::~Runtime() { (void)Finalize(); }

absl::StatusOr<std::optional<methods::Method::Probed>> Runtime::Peek(uint32_t context, int source, int tag) const {
  if (methods::Method* native = routes_.native()) return native->Probe({context, source, tag});
  const Car* u = matcher_->PeekUnexpected({context, source, tag});
  const CompactMessage* r = matcher_->PeekCompact({context, source, tag});
  if (r != nullptr && (u == nullptr || r->seq < u->link.seq)) {
    return std::optional<methods::Method::Probed>(methods::Method::Probed{r->envelope.rank, r->envelope.tag, r->bytes});
  }
  if (u == nullptr) return std::optional<methods::Method::Probed>();
  return std::optional<methods::Method::Probed>(
      methods::Method::Probed{u->envelope().rank, u->envelope().tag, u->bytes_total()});
}

// In line in both callers: a blocking call's CAR is then built with no call.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::StatusOr<Car*> Runtime::Build(const car::MessageSpec& m, int peer,
                                                                       base::Completion* counter) {
  absl::StatusOr<Car*> car = pool_->CreateInPlace([&] {
    // A wildcard receive takes its sender's limit when it matches; the
    // limit matters to sends only.
    return car::SpecOf(m, counter, routes_.VcFor(peer), this, peer >= 0 ? routes_.Of(peer).eager_limit : 0);
  });
  if (car.ok()) routes_.Bind(**car, peer);
  return car;
}

// In line in its callers: a nonblocking call's post (CreateAndPost) and a
// blocking one's (RunBlocking) then make no call of their own to get there.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline absl::Status Runtime::PostNow(Car& car) {
  // A CAR is posted from idle (fresh, or re-armed): that state's post rows
  // are compiled in line here (DispatchFrom); any other state goes the
  // general way and gets the table's answer.
  // A send's post most often puts the message out at once and raises its
  // local completion (eager_in_flight, local_done): compiled in line too.
  const absl::Status s =
      car.kind() == CarKind::kSend
          ? car::SendMachine::DispatchFromThen<car::SendState::kIdle, car::SendEvent::kPost,
                                               car::SendState::kEagerInFlight, car::SendEvent::kLocalDone>(car)
          : car::RecvMachine::DispatchFrom<car::RecvState::kIdle, car::RecvEvent::kPost>(car);
  if (!handed_off_.empty()) {  // a revived record's CAR is among them
    for (Car* u : handed_off_) ReleaseUnexpected(u);
    handed_off_.clear();
    if (!revived_.empty()) {
      for (CompactMessage* r : revived_) FreeCompact(r);
      revived_.clear();
    }
  }
  return s;
}

absl::Status Runtime::Create(const car::MessageSpec& m, int peer, Request* req) {
  absl::StatusOr<Car*> car = Build(m, peer, &req->done_);
  if (!car.ok()) return car.status();
  Attach(req, *car, peer);
  return absl::OkStatus();
}

absl::Status Runtime::RunBlocking(const car::MessageSpec& m, int peer, base::Completion* done) {
  absl::StatusOr<Car*> car = Build(m, peer, done);
  if (!car.ok()) return car.status();
  done->Set(1);
  const absl::Status posted = PostNow(**car);
  WaitUntil([done] { return done->done(); });
  Release(*car);
  return posted.ok() ? done->status : posted;
}

absl::Status Runtime::Post(Request* req) {
  ArmRequest(req);
  return PostNow(*req->car_);
}

absl::Status Runtime::CreateAndPost(const car::MessageSpec& m, int peer, Request* req) {
  absl::StatusOr<Car*> car = Build(m, peer, &req->done_);
  if (!car.ok()) return car.status();
  Attach(req, *car, peer);
  ArmRequest(req);
  return PostNow(**car);
}

absl::Status Runtime::StartRma(bool write, void* local, uint64_t bytes, int peer, car::RemoteRef remote,
                               Request* req) {
  absl::StatusOr<Car*> car = pool_->CreateInPlace([&] {
    return car::CarSpec{.kind = CarKind::kRma,
                        .flags = write ? car::CarFlag::kSendData : car::CarFlag::kRecvData,
                        .envelope = {.context_id = 0, .rank = peer, .tag = 0},
                        .segment = car::Segment::Of(local, bytes, datatype::BasicType::kByte),
                        .counter = &req->done_,
                        .vc = routes_.VcFor(peer),
                        .owner = this,
                        .remote = remote};
  });
  if (!car.ok()) return car.status();
  routes_.Bind(**car, peer);
  Attach(req, *car, peer);
  ArmRequest(req);
  return car::RmaCarMachine::Dispatch(**car, car::RmaCarEvent::kPost);
}

absl::Status Runtime::Restart(Car& car, int peer, base::Completion* counter) {
  Rearm(car, peer, counter);
  return PostNow(car);
}

int Runtime::ProgressAll(bool idle_due) {
  int work = 0;
  for (methods::Method* m : routes_.polled()) work += m->Progress();
  if (idle_due) {
    for (methods::Method* m : routes_.idle()) work += m->Progress();
  }
  if (!activities_.empty() && !polling_activities_) work += PollActivities();
  return work;
}

int Runtime::PollActivities() {
  polling_activities_ = true;
  int work = 0;
  for (std::size_t i = 0; i < activities_.size();) {
    const Running r = activities_[i];
    std::optional<absl::Status> outcome = r.activity->Poll(&work);
    if (!outcome.has_value()) {
      ++i;
      continue;
    }
    r.done->status = *std::move(outcome);
    r.done->Set(0);
    ++work;
    activities_[i] = activities_.back();  // order among activities does not matter
    activities_.pop_back();
  }
  polling_activities_ = false;
  return work;
}

bool Runtime::CrowdedCpu() {
  for (methods::Method* m : routes_.polled()) {
    if (m->RanksOnThisCpu() >= 3) return true;
  }
  return false;
}

void Runtime::Block(int timeout_us) {
  const std::vector<methods::Method*>& polled = routes_.polled();
  if (polled.empty()) {  // nothing to wait on (a one-rank job): sleep instead of spinning
    ::usleep(static_cast<useconds_t>(timeout_us));
    return;
  }
  const int share = std::max(1, timeout_us / static_cast<int>(polled.size()));
  for (methods::Method* m : polled) m->Block(share);
}

void Runtime::Release(Car* car) { pool_->Release(car); }

absl::Status Runtime::Cancel(Car* car) {
  if (car->kind() != CarKind::kRecv || car::RecvMachine::StateOf(*car) != car::RecvState::kPosted) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cancel: only a receive that has not matched can be cancelled (CAR #%d is %s %s)", car->id(),
        car::KindName(car->kind()), car->state_name()));
  }
  // A method that matches itself holds the receive: it must give it back
  // first (it fails if the receive has matched meanwhile).
  if (methods::Method* native = routes_.native()) {
    if (absl::Status s = native->Cancel(*car); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrFormat("cancel: CAR #%d: %s", car->id(), s.message()));
    }
  }
  return car::RecvMachine::Dispatch(*car, car::RecvEvent::kCancel);
}

void Runtime::ReleaseUnexpected(Car* u) {
  unexpected_bytes_ -= UnexpectedFootprint(u->spec().pack_size);
  if (void* b = u->pack_buf()) temps_->Give(b, u->spec().pack_size);
  pool_->Release(u);
  // A burst of unexpected messages, drained: its CARs' slabs and buffers go
  // back to the system (the trim walks the pool once per such drain).
  if (ABSL_PREDICT_FALSE(pool_->capacity() > kTrimAbove) && pool_->live() * 8 < pool_->capacity()) {
    pool_->Trim(kTrimAbove / 2);
    ::malloc_trim(0);
  }
}

Car* Runtime::MatchIncoming(car::Envelope envelope) {
  // A rank no job has matches nothing: NewUnexpected refuses it by name.
  if (ABSL_PREDICT_FALSE(static_cast<uint32_t>(envelope.rank) >= static_cast<uint32_t>(size_))) return nullptr;
  Car* r = matcher_->MatchIncoming(envelope);
  if (r != nullptr) r->Rebind(routes_.VcFor(envelope.rank));  // a wildcard receive learns its VC
  return r;
}

absl::StatusOr<Car*> Runtime::NewUnexpected(const car::Envelope& envelope, uint64_t buffer_bytes) {
  if (envelope.rank < 0 || envelope.rank >= size_) {
    return absl::DataLossError(absl::StrFormat(
        "a message arrived naming sender rank %d in a job of %d ranks (a method delivers the sender's world rank)",
        envelope.rank, size_));
  }
  if (ABSL_PREDICT_FALSE(unexpected_bytes_ + UnexpectedFootprint(buffer_bytes) > unexpected_max_)) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "a message from rank %d (context %u, tag %d, %d bytes) found no receive, and the %d messages that "
        "wait for theirs hold %d bytes here: past CARTAGE_UNEXPECTED_MAX_MB=%d (post receives before the "
        "messages come, or raise it)",
        envelope.rank, envelope.context_id, envelope.tag, buffer_bytes, matcher_->unexpected(), unexpected_bytes_,
        unexpected_max_ >> 20));
  }
  absl::StatusOr<Car*> u = MakeUnexpected(envelope, buffer_bytes);
  if (!u.ok()) return u.status();
  matcher_->AddUnexpected(*u);
  if (ABSL_PREDICT_FALSE(matcher_->unexpected() > compact_above_)) CompactUnexpected();
  return u;
}

void Runtime::CompactUnexpected() {
  std::vector<Car*> gone = matcher_->Compact([this](Car& c) -> CompactMessage* {
    if (car::UnexpectedMachine::StateOf(c) != car::UnexpectedState::kBuffered ||
        !car::CarActions::Compactable(c, car::CarSignal{})) {
      return nullptr;
    }
    const uint64_t bytes = c.bytes_total();
    auto* r = new (temps_->Take(sizeof(CompactMessage) + bytes)) CompactMessage();
    r->envelope = c.envelope();
    r->bytes = static_cast<uint32_t>(bytes);
    r->proto = c.proto();
    if (bytes > 0) std::memcpy(r->payload(), c.pack_buf(), bytes);
    unexpected_bytes_ += temps_->Footprint(sizeof(CompactMessage) + bytes);
    (void)car::UnexpectedMachine::Dispatch(c, car::UnexpectedEvent::kCompact);
    return r;
  });
  for (Car* c : gone) ReleaseUnexpected(c);
  compact_peak_ = std::max(compact_peak_, matcher_->compact());
  // What could not be compacted (rendezvous, synchronous, larger messages)
  // is not walked again until as many more came.
  compact_above_ = std::max(kCompactAbove, 2 * matcher_->unexpected());
}

absl::StatusOr<Car*> Runtime::MakeUnexpected(const car::Envelope& envelope, uint64_t buffer_bytes) {
  void* const temp = buffer_bytes > 0 ? temps_->Take(buffer_bytes) : nullptr;
  absl::StatusOr<Car*> u = pool_->CreateInPlace([&] {  // valid by construction
    return car::CarSpec{.kind = CarKind::kUnexpected,
                        .flags = car::CarFlag::kRecvData,
                        .envelope = envelope,
                        .pack_buf = temp,
                        .pack_size = buffer_bytes,
                        .vc = routes_.VcFor(envelope.rank),
                        .owner = this};
  });
  if (!u.ok()) {
    if (temp != nullptr) temps_->Give(temp, buffer_bytes);
    return u.status();
  }
  unexpected_bytes_ += UnexpectedFootprint(buffer_bytes);
  return u;
}

Car* Runtime::Revive(CompactMessage& r, car::CarEvents& events) {
  const car::Envelope e = r.envelope;
  absl::StatusOr<Car*> made = MakeUnexpected(e, r.bytes);
  CARTAGE_CHECK_OK(made.status());  // an unbounded pool fails only where new does
  Car* u = *made;
  routes_.MethodFor(e.rank).Bind(*u, e.rank);  // fresh method state: a compacted message needs none of its sender's
  car::CarSignal eager;
  eager.bytes = r.bytes;
  eager.proto = r.proto;
  eager.source = e.rank;
  eager.tag = e.tag;
  eager.data = r.payload();  // read when the raised event runs; the record goes after the post (PostNow)
  events.Raise<car::UnexpectedMachine>(*u, car::UnexpectedEvent::kEager, eager);
  revived_.push_back(&r);
  return u;
}

void Runtime::FreeCompact(CompactMessage* r) {
  const std::size_t bytes = sizeof(CompactMessage) + r->bytes;
  unexpected_bytes_ -= temps_->Footprint(bytes);
  r->~CompactMessage();
  temps_->Give(r, bytes);
  // A flood of records, drained: their memory goes back to the system.
  if (ABSL_PREDICT_FALSE(compact_peak_ > kTrimAbove) && matcher_->compact() * 8 < compact_peak_) {
    compact_peak_ = matcher_->compact();
    ::malloc_trim(0);
  }
}

void Runtime::PostRecv(Car& c, car::CarEvents& events) {
  auto* rt = static_cast<Runtime*>(c.spec().owner);
  ++rt->hold_.postings;  // a held envelope may match it
  CompactMessage* compact = nullptr;
  Car* u = rt->matcher_->PostReceive(&c, &compact);
  if (compact != nullptr) u = rt->Revive(*compact, events);  // a CAR again, buffered before it matches
  if (u == nullptr) return;  // posted; an arriving envelope will match it
  // The unexpected message carries what the method knows of its sender.
  std::memcpy(c.method_private(), u->method_private(), rt->pool_->method_private_bytes());
  c.Rebind(u->vc());
  car::CarSignal match;
  match.peer = &c;
  events.Raise<car::UnexpectedMachine>(*u, car::UnexpectedEvent::kMatch, match);
  rt->handed_off_.push_back(u);
}

void Runtime::UnpostRecv(Car& c, car::CarEvents&) {
  static_cast<Runtime*>(c.spec().owner)->matcher_->RemovePosted(&c);
}

void Runtime::CheckPeers() {
  last_peer_check_ = std::chrono::steady_clock::now();
  if (trace_ != nullptr) trace_->AnswerLive();  // a dump on another thread asked for the live CARs
  for (int p = 0; p < size(); ++p) {
    if (p == rank() || !dead_[static_cast<std::size_t>(p)].ok()) continue;
    methods::Method& m = routes_.MethodFor(p);
    if (m.StateOf(p) == methods::VcState::kError) {  // the method failed the VC (lost, malformed)
      const absl::Status why = m.PeerStatus(p);
      FailPeer(p, why);
      // A lost line (or news of a death) is passed on; a peer refused for
      // what it sent (malformed, past a cap) is this rank's business only.
      if (why.code() == absl::StatusCode::kUnavailable) TellGone(p);
      continue;
    }
    if (!m.PeerGone(p)) continue;
    hold_.allowed = false;
    m.Progress();  // what it sent before it went is still delivered (none held back)
    hold_.allowed = true;
    FailPeer(p, absl::UnavailableError(absl::StrFormat("rank %d exited or finalized", p)));
    TellGone(p);
  }
}

int Runtime::FirstGone() const {
  for (int p = 0; p < size(); ++p) {
    if (dead_[static_cast<std::size_t>(p)].code() == absl::StatusCode::kUnavailable) return p;
  }
  return -1;
}

void Runtime::TellGone(int gone) {
  for (int q = 0; q < size(); ++q) {
    if (q != rank() && q != gone && dead_[static_cast<std::size_t>(q)].ok()) routes_.MethodFor(q).TellGone(q, gone);
  }
}

void Runtime::FailPeer(int peer, absl::Status why) {
  dead_[static_cast<std::size_t>(peer)] = why;
  routes_.MethodFor(peer).FailPeer(peer, why);
  std::vector<Car*> posted, unexpected;
  matcher_->TakeAllFrom(peer, &posted, &unexpected);
  car::CarSignal err;
  err.error = why;
  for (Car* r : posted) (void)car::RecvMachine::Dispatch(*r, car::RecvEvent::kError, err);
  for (Car* u : unexpected) {
    if (car::UnexpectedMachine::StateOf(*u) == car::UnexpectedState::kBuffered) {
      matcher_->AddUnexpected(u);  // complete: still deliverable
    } else {
      (void)car::UnexpectedMachine::Dispatch(*u, car::UnexpectedEvent::kError, err);
      ReleaseUnexpected(u);
    }
  }
}

}  // namespace cartage::agent
