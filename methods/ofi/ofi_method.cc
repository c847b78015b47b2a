// The ofi method's VC operations: sends and receives posted as tagged
// operations (or queued behind earlier ones on FI_EAGAIN), cancel and probe,
// failing a peer. ofi_progress.cc reads their completions; ofi_provider.cc
// opens the endpoint.
#include "methods/ofi/ofi_method.h"

#include <rdma/fi_endpoint.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/str_format.h"
#include "car/car_actions.h"
#include "car/recv_fsm.h"
#include "car/rma_fsm.h"
#include "car/send_fsm.h"
#include "methods/common/host_keys.h"
#include "methods/common/wire_cars.h"

namespace cartage::methods::ofi {

using car::Car;
using car::CarSignal;
using car::CarEvents;
using car::RecvEvent;
using car::RecvMachine;
using car::RecvState;
using car::SendEvent;
using car::SendMachine;

// ---- Peers ---------------------------------------------------------------------

VcState OfiMethod::StateOf(int peer) const {
  return peers_[static_cast<std::size_t>(peer)].error.ok() ? VcState::kConnected : VcState::kError;
}

void OfiMethod::Bind(Car& car, int) { new (car.method_private()) OfiCarState(); }

bool OfiMethod::PeerGone(int peer) {
  if (peer == rank_) return false;
  const Peer& p = peers_[static_cast<std::size_t>(peer)];
  return !p.error.ok() || (p.host_key == host_key_ && watch_.Gone(p.pid));
}

void OfiMethod::FailPeer(int peer, const absl::Status& why) {
  Peer& p = peers_[static_cast<std::size_t>(peer)];
  if (p.error.ok()) p.error = why;
  p.vc.start_eager = &OfiMethod::FailAtOnce;
  p.vc.start_rendezvous = &OfiMethod::FailAtOnce;
  p.vc.post_recv = &OfiMethod::FailAtOnce;
  p.vc.start_rma = &OfiMethod::FailAtOnce;
  // Everything the provider holds for the peer: receives are cancelled (the
  // provider reports ECANCELED later, to an orphan), sends orphaned.
  std::vector<OfiOp*> mine;
  for (OfiOp* op : live_) {
    if (op->peer == peer && op->car != nullptr) mine.push_back(op);
  }
  Account& a = account_[static_cast<std::size_t>(peer)];
  if (!a.held.empty()) --holding_;
  for (OfiOp* op : std::exchange(a.held, {})) {
    if (op->car != nullptr) FailCar(*op->car, why);
    FreeOp(op);
  }
  for (std::deque<OfiOp*>* q : {&queued_[0], &queued_[1]}) {  // control messages still go (a give-up)
    for (auto it = q->begin(); it != q->end();) {
      OfiOp* op = *it;
      if (op->peer != peer) {
        ++it;
        continue;
      }
      it = q->erase(it);
      if (op->car != nullptr) FailCar(*op->car, why);
      FreeOp(op);
    }
  }
  for (OfiOp* op : mine) {
    if (op->car == nullptr) continue;  // failing one CAR orphaned its other operation
    Car& c = *op->car;
    if (op->kind == OfiOp::Kind::kRecv) {
      op->cancelling = true;
      (void)fi_cancel(&ep_->fid, &op->ctx);
    }
    FailCar(c, why);
  }
}

void OfiMethod::FailCar(Car& c, const absl::Status& why) {
  OfiCarState& st = StateOf(c);
  if (st.op != nullptr) Orphan(st.op);
  if (st.ack != nullptr) Orphan(st.ack);
  st.op = st.ack = nullptr;
  DispatchError(c, why);
}

void OfiMethod::Orphan(OfiOp* op) {
  op->car = nullptr;
  // Not yet handed to the provider: nobody will return it.
  if (Unqueue(op)) FreeOp(op);
}

bool OfiMethod::Unqueue(OfiOp* op) {
  std::deque<OfiOp*>& q = QueueOf(op);
  auto it = std::find(q.begin(), q.end(), op);
  if (it == q.end()) return false;
  q.erase(it);
  return true;
}

// ---- Operations --------------------------------------------------------------------

OfiOp* OfiMethod::NewOp(OfiOp::Kind kind, Car* car, int peer) {
  OfiOp* op = free_;
  if (op != nullptr) {
    free_ = op->next_free;
  } else {
    op = &ops_.emplace_back();
  }
  *op = OfiOp{};
  op->kind = kind;
  op->car = car;
  op->peer = peer;
  return op;
}

void OfiMethod::FreeOp(OfiOp* op) {
  delete[] op->bounce;
  op->bounce = nullptr;
  op->car = nullptr;
  op->next_free = free_;
  free_ = op;
}

ssize_t OfiMethod::Issue(OfiOp* op) {
  const bool data = layout().uses_data();
  const uint64_t me = layout().Data(rank_, op->len);
  switch (op->kind) {
    case OfiOp::Kind::kCtlSend:
      return op->inject ? fi_inject(ep_, op->buf, op->len, op->addr)
                        : fi_send(ep_, op->buf, op->len, nullptr, op->addr, &op->ctx);
    case OfiOp::Kind::kCtlRecv:
      return fi_recv(ep_, op->buf, op->len, nullptr, FI_ADDR_UNSPEC, &op->ctx);
    case OfiOp::Kind::kSend:
    case OfiOp::Kind::kAckSend:
      if (op->inject) {
        return data ? fi_tinjectdata(ep_, op->buf, op->len, me, op->addr, op->tag)
                    : fi_tinject(ep_, op->buf, op->len, op->addr, op->tag);
      }
      return data ? fi_tsenddata(ep_, op->buf, op->len, nullptr, me, op->addr, op->tag, &op->ctx)
                  : fi_tsend(ep_, op->buf, op->len, nullptr, op->addr, op->tag, &op->ctx);
    case OfiOp::Kind::kRecv:
      if (sink_ != nullptr) {  // the buffer, then the sink for what does not fit
        iovec iov[2] = {{op->buf, op->len}, {sink_, kSinkBytes}};
        return fi_trecvv(ep_, iov, nullptr, 2, op->addr, op->tag, op->ignore, &op->ctx);
      }
      return fi_trecv(ep_, op->buf, op->len, nullptr, op->addr, op->tag, op->ignore, &op->ctx);
    case OfiOp::Kind::kAckRecv:
      return fi_trecv(ep_, op->buf, op->len, nullptr, op->addr, op->tag, op->ignore, &op->ctx);
    case OfiOp::Kind::kWrite: {
      // Complete once placed at the peer: a message sent after the write
      // (a flush's, a fence's) then finds the data there, whatever order
      // the provider keeps between writes and messages.
      iovec iov{op->buf, op->len};
      fi_rma_iov remote{op->tag, op->len, op->ignore};
      fi_msg_rma msg{};
      msg.msg_iov = &iov;
      msg.iov_count = 1;
      msg.addr = op->addr;
      msg.rma_iov = &remote;
      msg.rma_iov_count = 1;
      msg.context = &op->ctx;
      return fi_writemsg(ep_, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
    }
    case OfiOp::Kind::kRead:
      return fi_read(ep_, op->buf, op->len, nullptr, op->addr, op->tag, op->ignore, &op->ctx);
    case OfiOp::Kind::kPeek: {
      fi_msg_tagged msg{};
      msg.addr = op->addr;
      msg.tag = op->tag;
      msg.ignore = op->ignore;
      msg.context = &op->ctx;
      return fi_trecvmsg(ep_, &msg, FI_PEEK | FI_COMPLETION);
    }
  }
  return -FI_EINVAL;
}

void OfiMethod::Post(OfiOp* op, CarEvents* events) {
  std::deque<OfiOp*>& q = QueueOf(op);
  if (!q.empty()) {  // behind earlier operations of its kind: never overtake them
    q.push_back(op);
    return;
  }
  const ssize_t rc = Issue(op);
  if (rc == -FI_EAGAIN) {
    q.push_back(op);
    return;
  }
  Posted(op, rc, events);
}

void OfiMethod::Posted(OfiOp* op, ssize_t rc, CarEvents* events) {
  if (rc != 0) {
    Finish(op, absl::UnavailableError(absl::StrFormat("ofi: posting to rank %d: %s", op->peer, FiError(rc))), events);
  } else if (op->inject) {
    Finish(op, absl::OkStatus(), events);
  } else {
    live_.insert(op);
  }
}

// An injected send is done once posted; a post that failed outright fails
// its CAR.
void OfiMethod::Finish(OfiOp* op, const absl::Status& error, CarEvents* events) {
  Car* c = op->car;
  const bool send = op->kind == OfiOp::Kind::kSend;
  if (c != nullptr) {
    OfiCarState& st = StateOf(*c);
    if (st.op == op) st.op = nullptr;
    if (st.ack == op) st.ack = nullptr;
  }
  FreeOp(op);
  if (c == nullptr) return;
  if (!error.ok()) {
    if (events != nullptr) {
      car::CarActions::RaiseError(*c, *events, error);
    } else {
      FailCar(*c, error);
    }
    return;
  }
  if (!send) return;
  if (events != nullptr) {
    events->Raise<SendMachine>(*c, SendEvent::kLocalDone);
  } else {
    (void)SendMachine::Dispatch(*c, SendEvent::kLocalDone);
  }
}

const car::Vc OfiMethod::kOps{.name = "ofi",
                              .start_eager = &StartSend,
                              .start_rendezvous = &StartSend,
                              .post_recv = &PostRecv,
                              .unpost_recv = &UnpostRecv,
                              .send_ack = &SendAck,
                              .start_rma = &StartRma};

void OfiMethod::StartSend(Car& c, CarEvents& events) {
  OfiCarState& st = StateOf(c);
  OfiMethod& m = MethodOf<OfiMethod>(c);
  const int peer = PeerOf(c);
  const car::Envelope& env = c.envelope();
  const bool sync = c.spec().synchronous;
  const uint64_t bytes = c.payload_bytes();
  const auto addr = m.addrs_[static_cast<std::size_t>(peer)];
  if (sync) {  // its acknowledgement's receive goes first
    OfiOp* ack = m.NewOp(OfiOp::Kind::kAckRecv, &c, peer);
    const TagMatch want = m.layout().AckRecv(env.context_id, peer, env.tag);
    ack->addr = m.layout().source_in_data() ? addr : FI_ADDR_UNSPEC;
    ack->tag = want.tag;
    ack->ignore = want.ignore;
    st.ack = ack;
    m.Post(ack, &events);
  }
  OfiOp* op = m.NewOp(OfiOp::Kind::kSend, &c, peer);
  const std::byte* from = c.ContiguousSource();
  if (from == nullptr && bytes > 0) {  // non-contiguous: packed once
    op->bounce = new std::byte[bytes];
    c.Gather(0, op->bounce, bytes);
    from = op->bounce;
  }
  op->buf = const_cast<std::byte*>(from);
  op->len = bytes;
  op->addr = addr;
  op->tag = m.layout().Send(env.context_id, m.rank_, env.tag, sync);
  op->inject = bytes <= m.provider_.inject_size;
  st.op = op;
  m.SendOrHold(op, &events);
}

void OfiMethod::PostRecv(Car& c, CarEvents& events) {
  OfiCarState& st = StateOf(c);
  OfiMethod& m = MethodOf<OfiMethod>(c);
  const car::Envelope& env = c.envelope();
  OfiOp* op = m.NewOp(OfiOp::Kind::kRecv, &c, env.rank);
  if (c.LandsContiguous()) {
    std::span<std::byte> zone = c.LandingZone();
    op->buf = zone.data();
    op->len = zone.size();
  } else {  // non-contiguous: lands packed, unpacked on completion
    op->len = c.payload_bytes();
    op->bounce = new std::byte[std::max<uint64_t>(op->len, 1)];
    op->buf = op->bounce;
  }
  const TagMatch want = m.layout().Recv(env.context_id, env.rank, env.tag);
  op->tag = want.tag;
  op->ignore = want.ignore;
  op->addr = env.rank >= 0 && m.layout().source_in_data() ? m.addrs_[static_cast<std::size_t>(env.rank)]
                                                            : FI_ADDR_UNSPEC;
  st.op = op;
  m.Post(op, &events);
}

void OfiMethod::UnpostRecv(Car& c, CarEvents&) {
  // Cancel() took it back from the provider; one still queued is dropped.
  OfiCarState& st = StateOf(c);
  if (st.op != nullptr) {
    OfiMethod& m = MethodOf<OfiMethod>(c);
    m.Orphan(st.op);
    if (m.live_.contains(st.op)) {
      st.op->cancelling = true;
      (void)fi_cancel(&m.ep_->fid, &st.op->ctx);
    }
    st.op = nullptr;
  }
}

void OfiMethod::SendAck(Car& c, CarEvents& events) {
  OfiMethod& m = MethodOf<OfiMethod>(c);
  const int peer = PeerOf(c);
  OfiOp* op = m.NewOp(OfiOp::Kind::kAckSend, nullptr, peer);
  op->addr = m.addrs_[static_cast<std::size_t>(peer)];
  op->tag = m.layout().Ack(c.envelope().context_id, m.rank_, StateOf(c).tag);
  op->inject = true;
  m.Post(op, &events);
}

void OfiMethod::StartRma(Car& c, CarEvents& events) {
  OfiMethod& m = MethodOf<OfiMethod>(c);
  const int peer = PeerOf(c);
  if (!m.provider_.rma) {
    car::CarActions::RaiseError(c, events, absl::FailedPreconditionError(absl::StrFormat(
                                               "ofi: %s offers no FI_RMA (or CARTAGE_OFI_RMA=0)", m.provider_.name)));
    return;
  }
  const bool write = c.flags().has(car::CarFlag::kSendData);
  OfiOp* op = m.NewOp(write ? OfiOp::Kind::kWrite : OfiOp::Kind::kRead, &c, peer);
  const car::Segment& g = c.segment();
  op->buf = static_cast<std::byte*>(g.buf) + g.first;
  op->len = g.bytes();
  op->addr = m.addrs_[static_cast<std::size_t>(peer)];
  op->tag = c.spec().remote.addr;
  op->ignore = c.spec().remote.key;
  StateOf(c).op = op;
  m.Post(op, &events);
}

absl::StatusOr<Method::Exposed> OfiMethod::Expose(void* buf, std::size_t bytes) {
  if (!provider_.rma) return Method::Expose(buf, bytes);
  fid_mr* mr = nullptr;
  // Nothing to reach in an empty region: a key of 0 that no access uses
  // (the origin refuses any access to it).
  if (bytes > 0) {
    // A key of our own where the provider takes the one asked for (no
    // FI_MR_PROV_KEY): one per region, never reused.
    const uint64_t requested = exposed_.size() + 1;
    const int rc = fi_mr_reg(domain_, buf, bytes, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, requested, 0, &mr, nullptr);
    if (rc != 0) {
      return absl::UnavailableError(absl::StrFormat("ofi: rank %d: registering %d bytes for one-sided access on %s: %s",
                                                    rank_, bytes, provider_.name, FiError(rc)));
    }
  }
  exposed_.push_back(mr);
  const uint64_t addr = provider_.mr_virt_addr ? static_cast<uint64_t>(reinterpret_cast<uintptr_t>(buf)) : 0;
  return Exposed{exposed_.size(), addr, mr != nullptr ? fi_mr_key(mr) : 0};
}

void OfiMethod::Unexpose(uint64_t token) {
  if (token == 0 || token > exposed_.size()) return;
  fid_mr*& mr = exposed_[token - 1];
  if (mr != nullptr) fi_close(&mr->fid);
  mr = nullptr;
}

void OfiMethod::FailAtOnce(Car& c, CarEvents& events) {
  car::CarActions::RaiseError(c, events, MethodOf<OfiMethod>(c).peers_[static_cast<std::size_t>(PeerOf(c))].error);
}

absl::Status OfiMethod::Cancel(Car& c) {
  if (c.kind() != car::CarKind::kRecv) return Method::Cancel(c);
  OfiCarState& st = StateOf(c);
  OfiOp* op = st.op;
  if (op == nullptr) return absl::OkStatus();  // nothing in the provider's hands
  if (Unqueue(op)) {  // never posted
    FreeOp(op);
    st.op = nullptr;
    return absl::OkStatus();
  }
  op->cancelling = true;
  (void)fi_cancel(&ep_->fid, &op->ctx);
  // The provider answers with ECANCELED, or the receive completes: it had
  // matched already, and then the cancel fails.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (live_.contains(op) && std::chrono::steady_clock::now() < deadline) Drain();
  if (live_.contains(op)) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "ofi cancel: the provider did not answer fi_cancel of the receive from rank %d in 10 s", op->peer));
  }
  if (st.op == nullptr && !RecvMachine::IsFinal(c)) return absl::OkStatus();  // cancelled
  return absl::FailedPreconditionError("ofi cancel: the receive had already matched a message");
}

absl::StatusOr<std::optional<Method::Probed>> OfiMethod::Probe(const car::Envelope& pattern) {
  OfiOp* op = NewOp(OfiOp::Kind::kPeek, nullptr, pattern.rank);
  const TagMatch want = layout().Recv(pattern.context_id, pattern.rank, pattern.tag);
  op->tag = want.tag;
  op->ignore = want.ignore;
  op->addr = pattern.rank >= 0 && layout().source_in_data() ? addrs_[static_cast<std::size_t>(pattern.rank)]
                                                              : FI_ADDR_UNSPEC;
  peek_ = op;
  peek_done_ = false;
  peeked_.reset();
  ssize_t rc;
  while ((rc = Issue(op)) == -FI_EAGAIN) Drain();
  if (rc != 0) {
    peek_ = nullptr;
    FreeOp(op);
    return absl::UnavailableError(absl::StrFormat("ofi probe: %s", FiError(rc)));
  }
  live_.insert(op);
  // A provider answers a peek at once (a match, or FI_ENOMSG) or, as shm
  // does for a message still arriving, only later: then the peek is
  // cancelled and reported as nothing yet (a blocking probe asks again).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(1);
  while (!peek_done_ && std::chrono::steady_clock::now() < deadline) Drain();
  if (!peek_done_) {
    op->cancelling = true;
    (void)fi_cancel(&ep_->fid, &op->ctx);
  }
  peek_ = nullptr;
  return peeked_;
}

}  // namespace cartage::methods::ofi
