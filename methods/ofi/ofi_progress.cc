// The ofi method's progress: completions read from the queue and turned
// into CAR events, error completions named, operations retried after
// FI_EAGAIN, and waiting on the queue's wait object. ofi_method.cc posts.
#include "methods/ofi/ofi_method.h"

#include <poll.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "car/recv_fsm.h"
#include "car/rma_fsm.h"
#include "car/send_fsm.h"
#include "methods/common/wire_cars.h"

namespace cartage::methods::ofi {

using car::Car;
using car::CarSignal;
using car::RecvEvent;
using car::RecvMachine;
using car::RecvState;
using car::SendEvent;
using car::SendMachine;

namespace {

constexpr int kMaxBlockUs = 100;  // see Block

}  // namespace

int OfiMethod::RetryQueued() {
  int work = 0;
  for (std::deque<OfiOp*>& q : queued_) {
    while (!q.empty()) {
      OfiOp* op = q.front();
      const ssize_t rc = Issue(op);
      if (rc == -FI_EAGAIN) break;
      q.pop_front();
      ++work;
      Posted(op, rc, nullptr);
    }
  }
  return work;
}

// ---- Progress --------------------------------------------------------------------

int OfiMethod::Progress() {
  int work = Drain();
  if (queued() > 0) work += RetryQueued();
  if (holding_ > 0) CheckHeld();
  return work;
}

int OfiMethod::Drain() {
  if (draining_) return 0;
  draining_ = true;
  int work = 0;
  for (;;) {
    const ssize_t n = fi_cq_read(cq_, entries_.data(), entries_.size());
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        OnCompletion(static_cast<OfiOp*>(entries_[static_cast<std::size_t>(i)].op_context),
                     entries_[static_cast<std::size_t>(i)]);
      }
      work += static_cast<int>(n);
      if (static_cast<std::size_t>(n) < entries_.size()) break;
      continue;
    }
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_, &err, 0) != 1) break;
      OnError(err);
      ++work;
      continue;
    }
    break;  // -FI_EAGAIN: empty
  }
  draining_ = false;
  return work;
}

std::string OfiMethod::ErrorText(int err, int prov_errno, const void* err_data, std::size_t err_data_size) {
  std::string text = fi_strerror(err);
  if (prov_errno != 0) {
    char buf[256] = {};
    const char* p = fi_cq_strerror(cq_, prov_errno, err_data_size > 0 ? err_data : nullptr, buf, sizeof(buf));
    if (p != nullptr && *p != '\0') absl::StrAppend(&text, " (", p, ")");
  }
  return text;
}

void OfiMethod::OnCompletion(OfiOp* op, const fi_cq_tagged_entry& e) {
  if (op == nullptr) return;
  live_.erase(op);
  switch (op->kind) {
    case OfiOp::Kind::kPeek: {
      if (op != peek_) {  // a peek given up on
        FreeOp(op);
        return;
      }
      const int64_t size = layout().SizeOf(e.data);
      peeked_ = Probed{layout().SourceOf(e.tag, e.data), layout().TagOf(e.tag),
                       size >= 0 ? static_cast<uint64_t>(size) : e.len};
      peek_done_ = true;
      FreeOp(op);
      return;
    }
    case OfiOp::Kind::kRecv:
      if (op->car == nullptr) {
        FreeOp(op);
        return;
      }
      DeliverRecv(op, e, -1);
      return;
    case OfiOp::Kind::kSend: {
      Car* c = op->car;
      FreeOp(op);
      if (c == nullptr) return;
      StateOf(*c).op = nullptr;
      (void)SendMachine::Dispatch(*c, SendEvent::kLocalDone);
      return;
    }
    case OfiOp::Kind::kAckRecv: {
      Car* c = op->car;
      FreeOp(op);
      if (c == nullptr) return;
      StateOf(*c).ack = nullptr;
      if (!SendMachine::IsFinal(*c)) (void)SendMachine::Dispatch(*c, SendEvent::kAck);
      return;
    }
    case OfiOp::Kind::kWrite:
    case OfiOp::Kind::kRead: {
      Car* c = op->car;
      FreeOp(op);
      if (c == nullptr) return;
      StateOf(*c).op = nullptr;
      (void)car::RmaCarMachine::Dispatch(*c, car::RmaCarEvent::kComplete);
      return;
    }
    case OfiOp::Kind::kAckSend:
    case OfiOp::Kind::kCtlSend:
      FreeOp(op);
      return;
    case OfiOp::Kind::kCtlRecv:
      OnControl(op, e);
      return;
  }
}

void OfiMethod::OnError(const fi_cq_err_entry& err) {
  auto* op = static_cast<OfiOp*>(err.op_context);
  if (op == nullptr) return;
  live_.erase(op);
  if (op->kind == OfiOp::Kind::kPeek) {  // FI_ENOMSG: nothing matches (or one given up on)
    if (op == peek_) peek_done_ = true;
    FreeOp(op);
    return;
  }
  const int code = err.err < 0 ? -err.err : err.err;  // shm reports it negated
  if (code == FI_ETRUNC && op->kind == OfiOp::Kind::kRecv && op->car != nullptr) {
    fi_cq_tagged_entry e{};
    e.len = err.len;
    e.tag = err.tag;
    e.data = err.data;
    DeliverRecv(op, e, static_cast<int64_t>(err.len + err.olen));
    return;
  }
  Car* c = op->car;
  const bool cancelled = op->cancelling && code == FI_ECANCELED;
  const OfiOp::Kind kind = op->kind;
  const int peer = op->peer;
  if (c != nullptr) {
    OfiCarState& st = StateOf(*c);
    if (st.op == op) st.op = nullptr;
    if (st.ack == op) st.ack = nullptr;
  }
  FreeOp(op);
  if (c == nullptr || cancelled) return;  // an orphan, or Cancel() finishes the CAR
  const char* what = kind == OfiOp::Kind::kRecv      ? "receive from"
                     : kind == OfiOp::Kind::kAckRecv ? "acknowledgement from"
                     : kind == OfiOp::Kind::kWrite   ? "one-sided write to"
                     : kind == OfiOp::Kind::kRead    ? "one-sided read from"
                                                     : "send to";
  FailCar(*c, absl::UnavailableError(absl::StrFormat(
                  "ofi: %s rank %d failed on %s: %s", what, peer >= 0 ? peer : PeerOf(*c), provider_.name,
                  ErrorText(code, err.prov_errno, err.err_data, err.err_data_size))));
}

// A receive completed, or was truncated (`truncated_size`: what the provider
// says the message had; -1: it completed).
void OfiMethod::DeliverRecv(OfiOp* op, const fi_cq_tagged_entry& e, int64_t truncated_size) {
  Car& c = *op->car;
  OfiCarState& st = StateOf(c);
  st.op = nullptr;
  const bool truncated = truncated_size >= 0;
  const auto room = static_cast<int64_t>(op->len);
  // The sender's word on the size (and, in ofi_tag_full, its rank) decides
  // where the provider passes it on. Error entries carry the data word
  // unreliably (shm: zero; tcp;ofi_rxm: right but unflagged), so a
  // truncation trusts it only when it says more than fits.
  const int64_t said = layout().SizeOf(e.data);
  const bool data_ok = !truncated || said > room;
  const int named = data_ok || !layout().source_in_data() ? layout().SourceOf(e.tag, e.data) : -1;
  const int source = op->peer >= 0 ? op->peer : named;
  int64_t total = static_cast<int64_t>(e.len);
  if (data_ok && said >= 0) {
    total = said;
  } else if (truncated) {
    total = truncated_size > room ? truncated_size : -1;
  }
  if (truncated && (total < 0 || source < 0)) {
    FreeOp(op);
    FailCar(c, absl::OutOfRangeError(absl::StrFormat(
                   "message of unknown size truncated to the %d-byte receive buffer (%s names neither its size "
                   "nor, for a wildcard receive, its sender)", room, provider_.name)));
    return;
  }
  if (source < 0 || source >= size_ || (named >= 0 && named != source)) {  // not who was asked for
    FreeOp(op);
    FailCar(c, absl::DataLossError(absl::StrFormat(
                   "ofi: a receive from %s completed naming source rank %d in a job of %d",
                   op->peer >= 0 ? absl::StrCat("rank ", op->peer) : std::string("any rank"), named, size_)));
    return;
  }
  if (PeerOf(c) < 0) c.Rebind(&peers_[static_cast<std::size_t>(source)].vc);  // a wildcard receive learns its VC
  CountTaken(source, static_cast<uint64_t>(total));
  st.tag = layout().TagOf(e.tag);
  CarSignal sig;
  sig.bytes = static_cast<uint64_t>(total);
  sig.source = source;
  sig.tag = st.tag;
  sig.proto = layout().IsSync(e.tag) ? static_cast<uint32_t>(car::kProtoSync) : 0u;
  (void)RecvMachine::Dispatch(c, RecvEvent::kEnvelope, sig);
  const RecvState s = RecvMachine::StateOf(c);
  if (s == RecvState::kReceiving || s == RecvState::kTruncating) {
    if (op->bounce != nullptr) c.Land(op->bounce, std::min<uint64_t>(e.len, op->len));
    (void)RecvMachine::Dispatch(c, RecvEvent::kData, sig);
  }
  if (sink_ != nullptr && e.len > op->len + (std::size_t{1} << 20)) {  // a large overflow: pages back
    (void)::madvise(sink_, std::min<std::size_t>(e.len - op->len, kSinkBytes), MADV_DONTNEED);
  }
  FreeOp(op);
}

// ---- The unexpected-message account ----------------------------------------------

namespace {

// What tcp;ofi_rxm keeps for one message no receive has taken: a receive
// buffer of FI_OFI_RXM_BUFFER_SIZE (16 KiB) and its descriptor, about 17 KB
// measured; a message up to its segmented limit (128 KiB) fills more.
constexpr uint64_t kHeldPerMessage = 17 * 1024;
constexpr uint64_t kSegmentedLimit = 128 * 1024;

}  // namespace

uint64_t OfiMethod::Charge(uint64_t bytes) {
  return kHeldPerMessage + (bytes > kHeldPerMessage && bytes <= kSegmentedLimit ? bytes : 0);
}

void OfiMethod::SendOrHold(OfiOp* op, car::CarEvents* events) {
  Account& a = account_[static_cast<std::size_t>(op->peer)];
  const uint64_t ahead = a.sent - std::min(a.sent, a.peer_took);
  // One message larger than the window still goes when nothing is ahead.
  if (a.held.empty() && (ahead == 0 || ahead + Charge(op->len) <= window_)) {
    Post(op, events);
    CountSent(op->peer, op->len);
    return;
  }
  if (a.held.empty()) {
    a.held_since = std::chrono::steady_clock::now();
    ++holding_;
  }
  a.held.push_back(op);
}

void OfiMethod::Release(int peer) {
  Account& a = account_[static_cast<std::size_t>(peer)];
  bool moved = false;
  while (!a.held.empty()) {
    OfiOp* op = a.held.front();
    const uint64_t ahead = a.sent - std::min(a.sent, a.peer_took);
    if (ahead != 0 && ahead + Charge(op->len) > window_) break;
    a.held.pop_front();
    moved = true;
    Post(op, nullptr);
    CountSent(peer, op->len);
  }
  if (a.held.empty() && moved) --holding_;
  if (moved) a.held_since = std::chrono::steady_clock::now();
}

void OfiMethod::CountSent(int peer, uint64_t bytes) {
  Account& a = account_[static_cast<std::size_t>(peer)];
  a.sent += Charge(bytes);
}

void OfiMethod::CountTaken(int peer, uint64_t bytes) {
  Account& a = account_[static_cast<std::size_t>(peer)];
  a.taken += Charge(bytes);
  if (a.taken - a.taken_said < step_) return;
  a.taken_said = a.taken;
  SendControl(peer, kTook, a.taken);
}

void OfiMethod::SendControl(int peer, Control what, uint64_t figure) {
  OfiOp* op = NewOp(OfiOp::Kind::kCtlSend, nullptr, peer);
  op->ctl[0] = what;
  op->ctl[1] = figure;
  op->ctl[2] = static_cast<uint64_t>(rank_);
  op->buf = op->ctl;
  op->len = sizeof(op->ctl);
  op->addr = addrs_[static_cast<std::size_t>(peer)];
  op->inject = op->len <= provider_.inject_size;
  Post(op, nullptr);  // behind the messages it reports on
}

void OfiMethod::PostControlRecv(OfiOp* op) {
  op->ctl[0] = op->ctl[1] = 0;
  op->ctl[2] = ~uint64_t{0};
  op->buf = op->ctl;
  op->len = sizeof(op->ctl);
  op->addr = FI_ADDR_UNSPEC;
  Post(op, nullptr);
}

void OfiMethod::OnControl(OfiOp* op, const fi_cq_tagged_entry& e) {
  const uint64_t what = op->ctl[0], figure = op->ctl[1], sender = op->ctl[2];
  PostControlRecv(op);
  if (sender >= static_cast<uint64_t>(size_) || e.len != sizeof(op->ctl)) return;  // not one of ours
  const int from = static_cast<int>(sender);
  Account& a = account_[static_cast<std::size_t>(from)];
  switch (what) {
    case kTook:
      a.peer_took = std::max(a.peer_took, figure);
      Release(from);
      return;
    case kGaveUp:
      FailForCap(from, absl::StrFormat(
                           "ofi: rank %d gave up sending to rank %d: this rank holds %d bytes of its messages that no "
                           "receive took, its share of CARTAGE_UNEXPECTED_MAX_MB=%d, and took none for %d s (post "
                           "receives before the messages come, or raise it)",
                           from, rank_, figure, held_max_ >> 20, options_.hold_s));
      return;
    case kGone:
      if (figure < static_cast<uint64_t>(size_) && figure != static_cast<uint64_t>(rank_) &&
          figure != sender && peers_[static_cast<std::size_t>(figure)].error.ok()) {
        FailPeer(static_cast<int>(figure),
                 absl::UnavailableError(absl::StrFormat("rank %d exited (rank %d saw it go)", figure, from)));
      }
      return;
    default:
      return;
  }
}

void OfiMethod::CheckHeld() {
  if (options_.hold_s == 0) return;
  const auto now = std::chrono::steady_clock::now();
  for (int p = 0; p < size_ && holding_ > 0; ++p) {
    Account& a = account_[static_cast<std::size_t>(p)];
    if (a.held.empty() || now - a.held_since < std::chrono::seconds(options_.hold_s)) continue;
    const uint64_t ahead = a.sent - std::min(a.sent, a.peer_took);
    SendControl(p, kGaveUp, ahead);
    FailForCap(p, absl::StrFormat(
                      "ofi: rank %d holds %d bytes of this rank's messages that no receive took, its share of "
                      "CARTAGE_UNEXPECTED_MAX_MB=%d, and took none for %d s: %d sends held back fail (post "
                      "receives before the messages come, or raise it)",
                      p, ahead, held_max_ >> 20, options_.hold_s, a.held.size()));
  }
}

void OfiMethod::FailForCap(int peer, const std::string& why) {
  FailPeer(peer, absl::ResourceExhaustedError(why));
}

// ---- Waiting ---------------------------------------------------------------------

void OfiMethod::Block(int timeout_us) {
  // The CQ's wait object wakes us for completions, but not for every step
  // of a provider's own protocol (tcp;ofi_rxm's rendezvous and flow control
  // advance only inside fi_cq_read), so a wait is short: the engine calls
  // Progress between waits.
  const int us = std::min(timeout_us, kMaxBlockUs);
  if (wait_fd_ >= 0) {
    fid* fids[1] = {&cq_->fid};
    if (fi_trywait(fabric_, fids, 1) != FI_SUCCESS) return;  // something to read already
    pollfd p{wait_fd_, POLLIN, 0};
    timespec ts{0, static_cast<long>(us) * 1000};
    (void)::ppoll(&p, 1, &ts, nullptr);
    return;
  }
  ::usleep(static_cast<useconds_t>(us));  // no wait object: a nap lets other ranks run
}

}  // namespace cartage::methods::ofi
