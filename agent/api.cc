// cartage/cartage.h: Agent, Comm, Request over the Runtime.
#include <optional>

#include "absl/strings/str_format.h"
#include "agent/runtime.h"
#include "cartage/cartage.h"

namespace cartage {

using agent::Runtime;

// ---- Agent ---------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Agent>> Agent::FromEnvironment() {
  CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<Runtime> rt, Runtime::Create());
  return std::unique_ptr<Agent>(new Agent(std::move(rt)));
}
Agent::Agent(std::unique_ptr<Runtime> rt) : rt_(std::move(rt)) {}
Agent::~Agent() = default;
Comm Agent::World() const { return Comm(rt_.get(), rt_->rank(), rt_->size(), 0); }
int Agent::rank() const { return rt_->rank(); }
int Agent::size() const { return rt_->size(); }
int Agent::Progress() { return rt_->Progress(); }

// ---- Request -------------------------------------------------------------------

void Request::Finish() {
  runtime_->Release(car_);
  car_ = nullptr;
}

absl::Status Request::Wait() {
  if (car_ == nullptr) return done_.status;
  runtime_->WaitUntil([this] { return done_.done(); });
  Finish();
  return done_.status;
}

bool Request::Test() {
  if (car_ == nullptr) return true;
  if (!done_.done()) runtime_->Progress();
  if (!done_.done()) return false;
  Finish();
  return true;
}

absl::Status Request::Cancel() {
  if (car_ == nullptr) return absl::FailedPreconditionError("cancel: the request is not active");
  return runtime_->Cancel(car_);
}

Request::~Request() {
  if (car_ == nullptr) return;
  (void)runtime_->Cancel(car_);  // fine to fail: it is then waited for
  (void)Wait();
}

absl::Status WaitAll(absl::Span<Request* const> requests) {
  absl::Status first;
  for (Request* r : requests) first.Update(r->Wait());
  return first;
}
absl::Status WaitAll(std::initializer_list<Request*> requests) {
  return WaitAll(absl::MakeConstSpan(requests.begin(), requests.size()));
}

absl::StatusOr<std::size_t> WaitAny(absl::Span<Request* const> requests) {
  Runtime* rt = nullptr;
  for (Request* r : requests) {
    if (r->active()) rt = r->runtime_;
  }
  if (rt == nullptr) return absl::FailedPreconditionError("WaitAny: no active request");
  std::size_t which = requests.size();
  rt->WaitUntil([&] {
    for (std::size_t i = 0; i < requests.size(); ++i) {
      if (requests[i]->active() && requests[i]->done_.done()) {
        which = i;
        return true;
      }
    }
    return false;
  });
  requests[which]->Finish();
  return which;
}

// ---- Comm ----------------------------------------------------------------------

absl::Status Comm::Start(bool send, bool sync, void* buf, std::size_t bytes, int peer, int tag,
                         Request* req) const {
  const char* op = send ? (sync ? "ssend" : "send") : "recv";
  const char* dir = send ? "to" : "from";
  if (req == nullptr || req->active()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s %s rank %d (tag %d): the request is %s", op, dir, peer, tag,
                        req == nullptr ? "null" : "still active"));
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
  if (buf == nullptr && bytes > 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s %s rank %d (tag %d): null buffer for %d bytes", op, dir, peer, tag, bytes));
  }
  if (!any_source && !rt_->PeerStatus(peer).ok()) {
    return absl::UnavailableError(absl::StrFormat("%s %s rank %d (tag %d): %s", op, dir, peer, tag,
                                                  rt_->PeerStatus(peer).message()));
  }
  car::CarSpec spec;
  spec.kind = send ? car::CarKind::kSend : car::CarKind::kRecv;
  spec.flags = send ? car::CarFlag::kSendData : car::CarFlag::kRecvData;
  spec.envelope = {context_, peer, tag};
  spec.segment = car::Segment::Of(buf, bytes, car::BasicType::kByte);
  spec.synchronous = sync;
  return rt_->Start(spec, any_source ? -1 : peer, req);
}

absl::Status Comm::Isend(const void* buf, std::size_t bytes, int dest, int tag, Request* req) const {
  return Start(true, false, const_cast<void*>(buf), bytes, dest, tag, req);
}
absl::Status Comm::Issend(const void* buf, std::size_t bytes, int dest, int tag, Request* req) const {
  return Start(true, true, const_cast<void*>(buf), bytes, dest, tag, req);
}
absl::Status Comm::Irecv(void* buf, std::size_t bytes, int source, int tag, Request* req) const {
  return Start(false, false, buf, bytes, source, tag, req);
}

absl::Status Comm::Send(const void* buf, std::size_t bytes, int dest, int tag) const {
  Request r;
  CARTAGE_RETURN_IF_ERROR(Isend(buf, bytes, dest, tag, &r));
  return r.Wait();
}
absl::Status Comm::Ssend(const void* buf, std::size_t bytes, int dest, int tag) const {
  Request r;
  CARTAGE_RETURN_IF_ERROR(Issend(buf, bytes, dest, tag, &r));
  return r.Wait();
}
absl::Status Comm::Recv(void* buf, std::size_t bytes, int source, int tag, ProbeResult* status) const {
  Request r;
  CARTAGE_RETURN_IF_ERROR(Irecv(buf, bytes, source, tag, &r));
  const absl::Status s = r.Wait();
  if (status != nullptr) *status = {r.source(), r.tag(), r.bytes()};
  return s;
}

absl::StatusOr<std::optional<ProbeResult>> Comm::Iprobe(int source, int tag) const {
  if (source != kAnySource && (source < 0 || source >= size_)) {
    return absl::InvalidArgumentError(absl::StrFormat("probe from rank %d: no such rank", source));
  }
  rt_->Progress();
  const car::Car* u = rt_->PeekUnexpected(context_, source, tag);
  if (u == nullptr) return std::optional<ProbeResult>();
  return std::optional<ProbeResult>(ProbeResult{u->envelope().rank, u->envelope().tag, u->bytes_total()});
}

absl::StatusOr<ProbeResult> Comm::Probe(int source, int tag) const {
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

Comm Comm::Dup() const { return Comm(rt_, rank_, size_, rt_->NewContext()); }

}  // namespace cartage
