#include "methods/method.h"

#include <algorithm>
#include <limits>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"

namespace cartage::methods {

absl::string_view ReachName(Reach r) {
  switch (r) {
    case Reach::kProcess: return "process";
    case Reach::kHost: return "host";
    case Reach::kNetwork: return "network";
  }
  return "?";
}

absl::string_view VcStateName(VcState s) {
  switch (s) {
    case VcState::kIdle: return "idle";
    case VcState::kConnecting: return "connecting";
    case VcState::kConnected: return "connected";
    case VcState::kError: return "error";
  }
  return "?";
}

namespace {
std::string Bytes(uint64_t n) {
  if (n == std::numeric_limits<uint64_t>::max()) return "any size";
  if (n >= (uint64_t{1} << 30) && n % (uint64_t{1} << 30) == 0) return absl::StrCat(n >> 30, " GiB");
  if (n >= (uint64_t{1} << 20) && n % (uint64_t{1} << 20) == 0) return absl::StrCat(n >> 20, " MiB");
  if (n >= 1024 && n % 1024 == 0) return absl::StrCat(n >> 10, " KiB");
  return absl::StrCat(n, " B");
}
}  // namespace

std::string Describe(const Capabilities& c) {
  std::vector<std::string> f;
  f.push_back(absl::StrCat("reach ", ReachName(c.reach)));
  f.push_back(absl::StrCat("eager ", Bytes(c.eager_limit)));
  f.push_back(absl::StrCat("max message ", Bytes(c.max_message)));
  f.push_back(c.ordered ? "ordered" : "unordered");
  f.push_back(c.reliable ? "reliable" : "unreliable");
  f.push_back(c.tag_matching ? "native tag matching" : "agent tag matching");
  f.push_back(!c.rma ? "no RMA" : c.rma_ordered ? "RMA (sends after writes in order)" : "RMA");
  f.push_back(c.atomics ? "atomics" : "no atomics");
  f.push_back(c.needs_registration ? "needs registration" : "no registration");
  if (c.single_copy) f.push_back("single-copy rendezvous");
  f.push_back(c.thread_safe ? "thread-safe" : "serialised by the agent");
  if (c.max_buffer > 0) f.push_back(absl::StrCat("buffers ", Bytes(c.min_buffer), "..", Bytes(c.max_buffer)));
  if (c.max_context != UINT64_MAX) f.push_back(absl::StrCat("context ids <= ", c.max_context));
  if (c.max_tag != INT64_MAX) f.push_back(absl::StrCat("tags <= ", c.max_tag));
  if (c.max_rank != INT64_MAX) f.push_back(absl::StrCat("ranks <= ", c.max_rank));
  return absl::StrJoin(f, ", ");
}

namespace {
// Posts every CAR of `cars` (each must be of `kind`) through machine M, in
// order, emptying the list; the first error is returned, the rest still go.
template <class M>
absl::Status PostList(absl::string_view method, absl::string_view what, int peer, car::CarKind kind,
                      car::CarList& cars) {
  absl::Status first;
  while (car::Car* c = cars.PopFront()) {
    if (c->kind() != kind) {
      first.Update(absl::InvalidArgumentError(absl::StrFormat("%s %s rank %d: CAR #%d is a %s", method, what, peer,
                                                              c->id(), car::KindName(c->kind()))));
      continue;
    }
    first.Update(M::Dispatch(*c, M::Event::kPost));
  }
  return first;
}
}  // namespace

absl::Status Method::Send(int peer, car::CarList& cars) {
  return PostList<car::SendMachine>(name(), "send list to", peer, car::CarKind::kSend, cars);
}

absl::Status Method::Recv(int peer, car::CarList& cars) {
  return PostList<car::RecvMachine>(name(), "receive list from", peer, car::CarKind::kRecv, cars);
}

absl::Status Method::Cancel(car::Car& c) {
  if (c.kind() == car::CarKind::kSend && car::SendMachine::StateOf(c) == car::SendState::kIdle) {
    return car::SendMachine::Dispatch(c, car::SendEvent::kCancel);
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s cancel: CAR #%d (%s %s) is already on the wire", name(), c.id(), car::KindName(c.kind()), c.state_name()));
}

absl::StatusOr<std::optional<Method::Probed>> Method::Probe(const car::Envelope&) {
  return absl::UnimplementedError(absl::StrFormat("%s matches no envelopes itself: the agent probes", name()));
}

absl::StatusOr<uint64_t> Method::RegisterMemory(const void* buf, std::size_t bytes) {
  registrations_.push_back({next_token_, buf, bytes});
  return next_token_++;
}

void Method::UnregisterMemory(uint64_t token) {
  std::erase_if(registrations_, [token](const Registration& r) { return r.token == token; });
}

absl::StatusOr<MethodBuffer> Method::AllocBuffer(std::size_t min) {
  const Capabilities& c = caps();
  if (c.max_buffer != 0 && min > c.max_buffer) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s buffer of %d bytes: larger than its %d-byte maximum", name(), min, c.max_buffer));
  }
  const std::size_t size = std::max(min, c.min_buffer);
  auto* p = static_cast<std::byte*>(::operator new(size, std::nothrow));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(absl::StrFormat("%s buffer of %d bytes: out of memory", name(), size));
  }
  return MethodBuffer{p, size};
}

void Method::FreeBuffer(MethodBuffer buf) { ::operator delete(buf.data); }

absl::StatusOr<Method::Exposed> Method::Expose(void*, std::size_t bytes) {
  return absl::UnimplementedError(
      absl::StrFormat("%s cannot expose %d bytes to one-sided access: it has no rma", name(), bytes));
}

void Method::Unexpose(uint64_t) {}

void Method::RecvReady(car::Car& send) {
  (void)car::SendMachine::Dispatch(send, car::SendEvent::kProgress);
}

void Method::ProvideBufs(car::Car& send, void* buf, uint64_t bytes) {
  car::CarSignal s;
  s.buffer = buf;
  s.bytes = bytes;
  (void)car::SendMachine::Dispatch(send, car::SendEvent::kBufferSupplied, s);
}

void Method::ReportProgress(car::Car& c, uint64_t bytes) {
  car::CarSignal s;
  s.bytes = bytes;
  if (c.kind() == car::CarKind::kSend) {
    (void)car::SendMachine::Dispatch(c, car::SendEvent::kProgress, s);
  } else {
    (void)car::RecvMachine::Dispatch(c, car::RecvEvent::kProgress, s);
  }
}

}  // namespace cartage::methods
