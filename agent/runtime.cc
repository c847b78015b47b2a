#include "agent/runtime.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "car/unexpected_fsm.h"
#include "cartage/cartage.h"
#include "base/check.h"

namespace cartage::agent {

using car::Car;
using car::CarKind;

absl::StatusOr<std::unique_ptr<Runtime>> Runtime::Create() {
  auto rt = std::unique_ptr<Runtime>(new Runtime());
  CARTAGE_ASSIGN_OR_RETURN(rt->boot_, Bootstrap::FromEnvironment());
  rt->InstallAgentOps(rt->agent_any_vc_);
  rt->agent_any_vc_.name = "any";
  // Oversubscription steers choices every rank must make alike (the
  // collectives' schedules, shm's copies and ring sizes): checked against
  // rank 0's before the methods set up.
  CARTAGE_ASSIGN_OR_RETURN(rt->oversubscribed_, methods::JobOversubscribed(rt->size()));
  if (rt->rank() == 0 && rt->size() > 1) {
    CARTAGE_RETURN_IF_ERROR(rt->boot_->Put(kOversubscribedKey, rt->oversubscribed_ ? "yes" : "no"));
  }
  CARTAGE_RETURN_IF_ERROR(rt->AgreeOnOversubscription());
  rt->crowded_ = rt->oversubscribed_ && methods::JobCrowded(rt->size());
  CARTAGE_RETURN_IF_ERROR(rt->OpenMethods());
  std::size_t private_bytes = 0;
  for (const auto& m : rt->methods_) private_bytes = std::max(private_bytes, m->private_bytes());
  rt->pool_ = std::make_unique<car::CarPool>(car::CarPool::Options{.method_private_bytes = private_bytes});
  CARTAGE_RETURN_IF_ERROR(rt->pool_->Reserve(256));
  rt->matcher_ = std::make_unique<Matcher>(rt->size());
  rt->dead_.assign(static_cast<std::size_t>(rt->size()), absl::OkStatus());
  // Temporary buffers for unexpected eager messages: the largest finite
  // eager limit of the methods in use (self's is unbounded: exact sizes).
  rt->buffer_bytes_ = kSmallBuffer;
  for (const Route& r : rt->routes_) {
    if (r.eager_limit != std::numeric_limits<uint64_t>::max()) {
      rt->buffer_bytes_ = std::max<std::size_t>(rt->buffer_bytes_, r.eager_limit);
    }
  }
  // A few temporary buffers up front, so steady state never allocates; the
  // large ones written once here, so that their pages fault in now and not
  // under the first unexpected messages (under this VM kind's hypervisor a
  // fresh page costs ~10 µs: the first 64 KiB allgather at 8 ranks took 3-5
  // ms with them untouched, 1.4-2 ms touched; bench/RESULTS.md).
  rt->handed_off_.reserve(64);
  rt->free_small_.reserve(1024);
  rt->free_large_.reserve(1024);
  for (int i = 0; i < 16; ++i) rt->free_small_.push_back(::operator new(kSmallBuffer));
  for (int i = 0; i < 4; ++i) {
    void* b = ::operator new(rt->buffer_bytes_);
    std::memset(b, 0, rt->buffer_bytes_);
    rt->free_large_.push_back(b);
  }
  // Oversubscribed (more ranks than CPUs here): yield almost at once; where
  // three or more ranks share each CPU (crowded), sooner still. A rank that
  // shares its CPU with two or more others mostly waits for a peer that
  // needs that CPU, so an idle round before the yield is spent for nothing:
  // 4 rounds took 0.85-0.93 of 20's time for 8-byte barriers, allreduces and
  // alltoalls at 8 ranks on 2 CPUs. At 4 ranks 20 stays, unless three of
  // them share this rank's CPU (asked after 4 idle rounds): pinned two a
  // CPU 4 rounds took 1.01-1.08 of the time, three on one CPU 0.91-0.94
  // (bench/RESULTS.md). `cartage run` pins oversubscribed ranks
  // round-robin, so that happens where the kernel places them (--no-bind,
  // another launcher) or where the ranks do not divide evenly (5 on 2 CPUs).
  constexpr int kCrowdedSpin = 4;
  if (rt->oversubscribed_) {
    rt->wait_.spin_rounds = rt->crowded_ ? kCrowdedSpin : 20;
    if (!rt->crowded_) rt->wait_.crowded_cpu_spin = kCrowdedSpin;
  }
  if (const char* v = std::getenv("CARTAGE_WAIT_SPIN")) {
    rt->wait_.crowded_cpu_spin = 0;  // a spin the user sets holds everywhere
    if (!absl::SimpleAtoi(v, &rt->wait_.spin_rounds) || rt->wait_.spin_rounds < 1) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_WAIT_SPIN=%s: need a count >= 1", v));
    }
  }
  if (const char* v = std::getenv("CARTAGE_WAIT_YIELD_US")) {
    int us = 0;
    if (!absl::SimpleAtoi(v, &us) || us < 0) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_WAIT_YIELD_US=%s: need microseconds >= 0", v));
    }
    rt->wait_.yield_for = std::chrono::microseconds(us);
  }
  rt->last_peer_check_ = std::chrono::steady_clock::now();
  return rt;
}

absl::Status Runtime::AgreeOnOversubscription() {
  if (size() == 1) return absl::OkStatus();
  CARTAGE_RETURN_IF_ERROR(boot_->Fence());
  if (rank() == 0) return absl::OkStatus();
  CARTAGE_ASSIGN_OR_RETURN(const std::string first, boot_->Get(kOversubscribedKey));
  const char* mine = oversubscribed_ ? "yes" : "no";
  if (first == mine) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "start-up: rank %d counts the job as %soversubscribed but rank 0 as %soversubscribed "
      "(CARTAGE_OVERSUBSCRIBED must be the same on every rank)",
      rank(), oversubscribed_ ? "" : "not ", first == "yes" ? "" : "not "));
}

absl::Status Runtime::OpenMethods() {
  CARTAGE_ASSIGN_OR_RETURN(methods::Registry reg, methods::Registry::Load());
  registry_ = std::make_unique<methods::Registry>(std::move(reg));
  CARTAGE_ASSIGN_OR_RETURN(std::vector<const methods::Descriptor*> chosen, registry_->Chosen());
  // Every rank opens the same list in the same order (CARTAGE_METHODS is the
  // job's), so the methods' own exchanges and fences line up.
  for (const methods::Descriptor* d : chosen) {
    absl::StatusOr<std::unique_ptr<methods::Method>> m = d->open({boot_.get(), this});
    if (!m.ok()) {
      return absl::Status(m.status().code(),
                          absl::StrFormat("opening method %s: %s", d->name, m.status().message()));
    }
    methods_.push_back(*std::move(m));
  }
  routes_.resize(static_cast<std::size_t>(size()));
  for (int p = 0; p < size(); ++p) {
    Route& r = routes_[static_cast<std::size_t>(p)];
    for (const auto& m : methods_) {
      if (!m->Reaches(p)) continue;
      r.method = m.get();
      r.vc = m->VcOf(p);
      r.eager_limit = m->caps().eager_limit;
      r.max_context = m->caps().max_context;
      r.max_tag = m->caps().max_tag;
      break;
    }
    if (r.method == nullptr) {
      std::vector<std::string> names;
      for (const auto& m : methods_) names.emplace_back(m->name());
      return absl::UnavailableError(absl::StrFormat("no method of [%s] reaches rank %d (CARTAGE_METHODS)",
                                                    absl::StrJoin(names, ","), p));
    }
  }
  // A method that matches envelopes itself sees only its own messages, so a
  // wildcard receive is right only if it carries every rank (self too).
  for (int p = 0; p < size(); ++p) {
    methods::Method* m = routes_[static_cast<std::size_t>(p)].method;
    if (!m->caps().tag_matching) continue;
    native_ = m;
    for (int q = 0; q < size(); ++q) {
      methods::Method* other = routes_[static_cast<std::size_t>(q)].method;
      if (other == m) continue;
      return absl::FailedPreconditionError(absl::StrFormat(
          "method %s matches envelopes itself and must carry every rank, but rank %d goes through %s "
          "(CARTAGE_METHODS: put %s first)",
          m->name(), q, other->name(), m->name()));
    }
    any_vc_ = m->VcOf(car::kAnySource);
    any_route_ = routes_[static_cast<std::size_t>(p)];
    break;
  }
  for (const auto& m : methods_) {
    const bool used = std::any_of(routes_.begin(), routes_.end(), [&](const Route& r) { return r.method == m.get(); });
    if (!m->caps().needs_polling) continue;
    (used ? polled_ : idle_).push_back(m.get());
  }
  sole_ = polled_.size() == 1 ? polled_.front() : nullptr;
  return absl::OkStatus();
}

void Runtime::InstallAgentOps(car::Vc& vc) {
  vc.post_recv = &Runtime::PostRecv;
  vc.unpost_recv = &Runtime::UnpostRecv;
}

absl::StatusOr<std::byte*> Runtime::Lend(int peer, std::size_t bytes) {
  methods::Method& m = MethodFor(peer);
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

Runtime::~Runtime() {
  // What the layers above keep per agent (cached collective schedules, with
  // their CARs and registrations) goes first, while the pool and methods live.
  extensions_.clear();
  last_extension_key_ = nullptr;
  last_extension_ = nullptr;
  // A runtime whose set-up failed part-way (a method that did not open, a
  // plugin that did not load) has nothing to finalize with its peers.
  const bool up = matcher_ != nullptr;
  // Every rank reaches finalize before anyone detaches.
  if (up) (void)boot_->Fence();
  for (auto& [p, lent] : lent_) lent.first->FreeBuffer(lent.second);
  lent_.clear();
  for (const auto& m : methods_) m->Close();
  // Messages nobody received: their CARs and buffers go back.
  std::vector<Car*> left;
  if (up) matcher_->TakeAllUnexpected(&left);
  for (Car* u : left) ReleaseUnexpected(u);
  for (void* b : free_small_) ::operator delete(b);
  for (void* b : free_large_) ::operator delete(b);
}

void Runtime::Bind(Car& car, int peer) {
  // A wildcard receive is bound by the method whose message it matches (or
  // by the one method that matches everything).
  if (peer >= 0) {
    MethodFor(peer).Bind(car, peer);
  } else if (native_ != nullptr) {
    native_->Bind(car, peer);
  }
}

absl::Status Runtime::CheckEnvelope(int peer, uint32_t context, int tag) const {
  if (EnvelopeFits(peer, context, tag)) return absl::OkStatus();
  const Route& r = peer >= 0 ? routes_[static_cast<std::size_t>(peer)] : any_route_;
  if (context > r.max_context) {
    return absl::OutOfRangeError(absl::StrFormat(
        "context id %d does not fit method %s's envelope (context ids up to %d): too many communicators", context,
        r.method->name(), r.max_context));
  }
  return absl::OutOfRangeError(
      absl::StrFormat("tag %d does not fit method %s's envelope (tags up to %d)", tag, r.method->name(), r.max_tag));
}

absl::StatusOr<std::optional<methods::Method::Probed>> Runtime::Peek(uint32_t context, int source, int tag) const {
  if (native_ != nullptr) return native_->Probe({context, source, tag});
  const Car* u = matcher_->PeekUnexpected({context, source, tag});
  if (u == nullptr) return std::optional<methods::Method::Probed>();
  return std::optional<methods::Method::Probed>(
      methods::Method::Probed{u->envelope().rank, u->envelope().tag, u->bytes_total()});
}

absl::StatusOr<uint64_t> Runtime::Register(int peer, const void* buf, std::size_t bytes) {
  std::size_t index = 0;
  if (peer >= 0) {
    while (methods_[index].get() != &MethodFor(peer)) ++index;
  } else if (!polled_.empty()) {
    while (methods_[index].get() != polled_.front()) ++index;
  }
  CARTAGE_ASSIGN_OR_RETURN(uint64_t token, methods_[index]->RegisterMemory(buf, bytes));
  return (static_cast<uint64_t>(index) << 56) | token;
}

void Runtime::Unregister(uint64_t token) {
  const std::size_t index = token >> 56;
  if (index < methods_.size()) methods_[index]->UnregisterMemory(token & ((uint64_t{1} << 56) - 1));
}

int Runtime::registered() const {
  int n = 0;
  for (const auto& m : methods_) n += m->registered();
  return n;
}

absl::Status Runtime::Create(car::CarSpec& spec, int peer, Request* req) {
  spec.counter = &req->done_;
  spec.vc = VcFor(peer);
  spec.owner = this;
  // A wildcard receive takes its sender's limit when it matches; the limit
  // matters to sends only.
  spec.eager_limit = peer >= 0 ? routes_[static_cast<std::size_t>(peer)].eager_limit : 0;
  absl::StatusOr<Car*> car = pool_->CreateUnchecked(spec);
  if (!car.ok()) return car.status();
  Bind(**car, peer);
  req->runtime_ = this;
  req->car_ = *car;
  req->peer_ = peer;
  return absl::OkStatus();
}

absl::Status Runtime::Post(Request* req) {
  req->done_ = base::Completion{};
  req->done_.pending = 1;
  req->in_flight_ = true;
  return PostCar(*req->car_);
}

absl::Status Runtime::PostCar(Car& car) {
  const absl::Status s = car.kind() == CarKind::kSend
                             ? car::SendMachine::Dispatch(car, car::SendEvent::kPost)
                             : car::RecvMachine::Dispatch(car, car::RecvEvent::kPost);
  if (!handed_off_.empty()) {
    for (Car* u : handed_off_) ReleaseUnexpected(u);
    handed_off_.clear();
  }
  return s;
}

int Runtime::ProgressAll(bool idle_due) {
  int work = 0;
  for (methods::Method* m : polled_) work += m->Progress();
  if (idle_due) {
    for (methods::Method* m : idle_) work += m->Progress();
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
    r.req->done_.status = *std::move(outcome);
    r.req->done_.pending = 0;
    ++work;
    activities_[i] = activities_.back();  // order among activities does not matter
    activities_.pop_back();
  }
  polling_activities_ = false;
  return work;
}

bool Runtime::CrowdedCpu() {
  for (methods::Method* m : polled_) {
    if (m->RanksOnThisCpu() >= 3) return true;
  }
  return false;
}

void Runtime::Block(int timeout_us) {
  if (polled_.empty()) {  // nothing to wait on (a one-rank job): sleep instead of spinning
    ::usleep(static_cast<useconds_t>(timeout_us));
    return;
  }
  const int share = std::max(1, timeout_us / static_cast<int>(polled_.size()));
  for (methods::Method* m : polled_) m->Block(share);
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
  if (native_ != nullptr) {
    if (absl::Status s = native_->Cancel(*car); !s.ok()) {
      return absl::FailedPreconditionError(absl::StrFormat("cancel: CAR #%d: %s", car->id(), s.message()));
    }
  }
  return car::RecvMachine::Dispatch(*car, car::RecvEvent::kCancel);
}

void* Runtime::TakeBuffer(uint64_t bytes) {
  if (bytes > buffer_bytes_) return ::operator new(bytes);  // beyond eager (self): exact size
  std::vector<void*>& free = bytes <= kSmallBuffer ? free_small_ : free_large_;
  if (!free.empty()) {
    void* b = free.back();
    free.pop_back();
    return b;
  }
  return ::operator new(bytes <= kSmallBuffer ? kSmallBuffer : buffer_bytes_);
}

void Runtime::ReleaseUnexpected(Car* u) {
  if (void* b = u->pack_buf()) {
    const uint64_t size = u->spec().pack_size;
    std::vector<void*>& free = size <= kSmallBuffer ? free_small_ : free_large_;
    // Keep a bounded number for reuse; a burst of unexpected messages is freed.
    if (size <= buffer_bytes_ && free.size() < 1024) {
      free.push_back(b);
    } else {
      ::operator delete(b);
    }
  }
  pool_->Release(u);
}

Car* Runtime::MatchIncoming(car::Envelope envelope) {
  Car* r = matcher_->MatchIncoming(envelope);
  if (r != nullptr) r->Rebind(VcFor(envelope.rank));  // a wildcard receive learns its VC
  return r;
}

absl::StatusOr<Car*> Runtime::NewUnexpected(const car::Envelope& envelope, uint64_t buffer_bytes) {
  car::CarSpec spec;
  spec.kind = CarKind::kUnexpected;
  spec.flags = car::CarFlag::kRecvData;
  spec.envelope = envelope;
  spec.owner = this;
  spec.vc = VcFor(envelope.rank);
  if (buffer_bytes > 0) {
    spec.pack_buf = TakeBuffer(buffer_bytes);
    spec.pack_size = buffer_bytes;
  }
  absl::StatusOr<Car*> u = pool_->CreateUnchecked(spec);  // valid by construction
  if (!u.ok()) return u.status();
  matcher_->AddUnexpected(*u);
  return u;
}

void Runtime::PostRecv(Car& c, car::CarEvents& events) {
  auto* rt = static_cast<Runtime*>(c.spec().owner);
  ++rt->hold_.postings;  // a held envelope may match it
  Car* u = rt->matcher_->PostReceive(&c);
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
  for (int p = 0; p < size(); ++p) {
    if (p == rank() || !dead_[static_cast<std::size_t>(p)].ok()) continue;
    methods::Method& m = MethodFor(p);
    if (m.StateOf(p) == methods::VcState::kError) {  // the method failed the VC (lost, malformed)
      FailPeer(p, m.PeerStatus(p));
      continue;
    }
    if (!m.PeerGone(p)) continue;
    hold_.allowed = false;
    m.Progress();  // what it sent before it went is still delivered (none held back)
    hold_.allowed = true;
    FailPeer(p, absl::UnavailableError(absl::StrFormat("rank %d exited or finalized", p)));
  }
}

void Runtime::FailPeer(int peer, absl::Status why) {
  dead_[static_cast<std::size_t>(peer)] = why;
  MethodFor(peer).FailPeer(peer, why);
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
