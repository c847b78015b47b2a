#include "methods/ofi/ofi_method.h"

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "fsm/check.h"
#include "methods/common/host_keys.h"

namespace cartage::methods::ofi {

using car::Car;
using car::CarSignal;
using car::CarStep;
using car::RecvEvent;
using car::RecvMachine;
using car::RecvState;
using car::SendEvent;
using car::SendMachine;

namespace {

constexpr uint32_t kFiVersion = FI_VERSION(1, 9);
constexpr std::size_t kCqSize = 16384;
constexpr int kMaxBlockUs = 100;  // see Block

std::string FiError(ssize_t rc) { return fi_strerror(static_cast<int>(-rc)); }

// Debian's libfabric links libpsm_infinipath and libpsm2, whose constructors
// (and provider start-up) install backtrace handlers for the fatal signals
// that turn a crashing rank into "exit 1". A rank must die by its signal, so
// that the launcher names it and its exit status says so: those handlers,
// and only those, go back to the default.
void RestoreFatalSignals() {
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) {
    struct sigaction sa {};
    if (::sigaction(sig, nullptr, &sa) != 0) continue;
    void* handler = (sa.sa_flags & SA_SIGINFO) != 0 ? reinterpret_cast<void*>(sa.sa_sigaction)
                                                   : reinterpret_cast<void*>(sa.sa_handler);
    Dl_info where{};
    if (handler == nullptr || ::dladdr(handler, &where) == 0 || where.dli_fname == nullptr) continue;
    if (std::strstr(where.dli_fname, "libpsm") != nullptr) ::signal(sig, SIG_DFL);
  }
}
// Runs once libfabric and its libraries are loaded, before main.
[[gnu::constructor]] void RestoreFatalSignalsAtLoad() { RestoreFatalSignals(); }

std::vector<std::string> List(const char* v) {
  std::vector<std::string> out;
  for (absl::string_view p : absl::StrSplit(v, absl::ByAnyChar(", "), absl::SkipEmpty())) out.emplace_back(p);
  return out;
}

}  // namespace

// ---- Options and provider choice ---------------------------------------------------

std::vector<ParamInfo> Params() {
  return {
      {"PROVIDER_INCLUDE", "", "providers to consider, comma-separated (\"tcp;ofi_rxm\", or a part: \"shm\"); "
                               "default: all, in libfabric's order"},
      {"PROVIDER_EXCLUDE", "", "providers never to use, comma-separated"},
      {"TAG_MODE", "auto", "envelope layout in the 64-bit tag: auto, ofi_tag_1, ofi_tag_2, ofi_tag_full"},
      {"EVENTS", "100", "completions read per fi_cq_read (progress reads until the queue is empty)"},
  };
}

absl::StatusOr<OfiOptions> OfiOptions::FromEnvironment() {
  OfiOptions o;
  if (const char* v = std::getenv("CARTAGE_OFI_PROVIDER_INCLUDE")) o.include = List(v);
  if (const char* v = std::getenv("CARTAGE_OFI_PROVIDER_EXCLUDE")) o.exclude = List(v);
  if (const char* v = std::getenv("CARTAGE_OFI_TAG_MODE")) {
    absl::StatusOr<TagMode> m = ParseTagMode(v);
    if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat("CARTAGE_OFI_TAG_MODE: ", m.status().message()));
    o.tag_mode = *m;
  }
  if (const char* v = std::getenv("CARTAGE_OFI_EVENTS")) {
    if (!absl::SimpleAtoi(v, &o.events) || o.events < 1 || o.events > 4096) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_OFI_EVENTS=%s: need a number 1..4096", v));
    }
  }
  return o;
}

void FiInfoDeleter::operator()(fi_info* info) const { fi_freeinfo(info); }

bool ProviderNamed(const std::string& name, const std::vector<std::string>& list) {
  for (const std::string& want : list) {
    if (want == name) return true;
    for (absl::string_view part : absl::StrSplit(name, ';')) {
      if (part == want) return true;
    }
  }
  return false;
}

namespace {

// Tagged, reliable, ordered (MPI's non-overtaking rule), one thread per
// domain; the address vector as a table so that fi_addr_t is the rank.
FiInfoPtr Hints(bool directed) {
  FiInfoPtr hints(fi_allocinfo());
  hints->caps = FI_TAGGED | FI_SEND | FI_RECV | (directed ? FI_DIRECTED_RECV : 0);
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->domain_attr->av_type = FI_AV_TABLE;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  return hints;
}

}  // namespace

absl::StatusOr<ProviderChoice> ChooseProvider(const OfiOptions& options, FiInfoPtr* out) {
  std::vector<std::string> seen;
  // First with FI_DIRECTED_RECV (ofi_tag_full needs it), then without.
  for (bool directed : {true, false}) {
    FiInfoPtr hints = Hints(directed);
    fi_info* list = nullptr;
    const int rc = fi_getinfo(kFiVersion, nullptr, nullptr, 0, hints.get(), &list);
    RestoreFatalSignals();  // providers starting up may have installed theirs
    if (rc != 0) continue;
    FiInfoPtr owner(list);
    for (fi_info* i = list; i != nullptr; i = i->next) {
      const std::string prov = i->fabric_attr->prov_name != nullptr ? i->fabric_attr->prov_name : "?";
      if (std::find(seen.begin(), seen.end(), prov) == seen.end()) seen.push_back(prov);
      if (!options.include.empty() && !ProviderNamed(prov, options.include)) continue;
      if (ProviderNamed(prov, options.exclude)) continue;
      const bool cq_data = i->domain_attr->cq_data_size >= 4 && (i->caps & FI_DIRECTED_RECV) != 0;
      absl::StatusOr<TagLayout> layout =
          TagLayout::Make(options.tag_mode, ReservedBits(i->ep_attr->mem_tag_format), cq_data,
                          static_cast<int>(std::min<std::size_t>(i->domain_attr->cq_data_size, 8)));
      if (!layout.ok()) {
        if (!options.include.empty()) {
          return absl::Status(layout.status().code(), absl::StrCat("ofi: provider ", prov, ": ",
                                                                   layout.status().message()));
        }
        continue;  // another provider may suit the mode
      }
      ProviderChoice c{prov,
                       i->fabric_attr->name != nullptr ? i->fabric_attr->name : "",
                       i->domain_attr->name != nullptr ? i->domain_attr->name : "",
                       *layout,
                       i->ep_attr->max_msg_size,
                       i->tx_attr->inject_size,
                       prov == "shm",
                       (i->caps & FI_RMA) != 0,
                       i->rx_attr->iov_limit};
      if (out != nullptr) out->reset(fi_dupinfo(i));
      return c;
    }
  }
  return absl::NotFoundError(absl::StrFormat(
      "ofi: no tagged reliable-datagram provider suits (libfabric offers [%s]; CARTAGE_OFI_PROVIDER_INCLUDE=%s, "
      "_EXCLUDE=%s)",
      absl::StrJoin(seen, ", "), absl::StrJoin(options.include, ","), absl::StrJoin(options.exclude, ",")));
}

Capabilities OfiMethod::Caps(const OfiOptions& o) {
  Capabilities c;
  // Every message is one tagged operation: the provider picks eager or its
  // own rendezvous, so the agent never splits one into RTS/CTS/DATA.
  c.eager_limit = std::numeric_limits<uint64_t>::max();
  c.tag_matching = true;
  c.reach = Reach::kNetwork;
  absl::StatusOr<ProviderChoice> p = ChooseProvider(o);
  if (p.ok()) {
    c.max_message = p->max_message;
    c.reach = p->host_only ? Reach::kHost : Reach::kNetwork;
    c.max_context = p->layout.max_context();
    c.max_tag = p->layout.max_tag();
    c.max_rank = p->layout.max_source();
  }
  return c;
}

namespace {

std::vector<std::string> Details() {
  absl::StatusOr<OfiOptions> o = OfiOptions::FromEnvironment();
  if (!o.ok()) return {std::string(o.status().message())};
  absl::StatusOr<ProviderChoice> p = ChooseProvider(*o);
  if (!p.ok()) return {std::string(p.status().message())};
  return {absl::StrFormat("provider %s (fabric %s, domain %s): inject %d B, max message %d B%s", p->name, p->fabric,
                          p->domain, p->inject_size, p->max_message, p->rma ? ", FI_RMA" : ""),
          absl::StrCat("tag layout ", p->layout.Describe())};
}

}  // namespace

const Descriptor kDescriptor{"ofi",
                             "libfabric's tagged messaging on a reliable-datagram endpoint: the provider matches",
                             &CapsFromEnvironment<OfiMethod, OfiOptions>, &Params,
                             &OpenFromEnvironment<OfiMethod, OfiOptions>, &Details};

// ---- Opening ---------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<OfiMethod>> OfiMethod::Create(Exchange& exchange, MethodHost* host,
                                                             const OfiOptions& options) {
  std::unique_ptr<OfiMethod> m(new OfiMethod());
  m->options_ = options;
  m->host_ = host;
  m->rank_ = exchange.rank();
  m->size_ = exchange.size();
  FiInfoPtr info;
  CARTAGE_ASSIGN_OR_RETURN(m->provider_, ChooseProvider(options, &info));
  m->caps_ = Caps(options);
  if (m->size_ - 1 > m->layout().max_source()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("ofi: the job has %d ranks but tag layout %s names ranks up to %d (try ofi_tag_full)",
                        m->size_, m->layout().Describe(), m->layout().max_source()));
  }
  CARTAGE_RETURN_IF_ERROR(m->Open(exchange, info.get()));
  return m;
}

absl::Status OfiMethod::Open(Exchange& exchange, fi_info* info) {
  auto failed = [&](const char* what, ssize_t rc) {
    return absl::UnavailableError(
        absl::StrFormat("ofi: rank %d: %s on %s: %s", rank_, what, provider_.name, FiError(rc)));
  };
  int rc = fi_fabric(info->fabric_attr, &fabric_, nullptr);
  if (rc != 0) return failed("fi_fabric", rc);
  rc = fi_domain(fabric_, info, &domain_, nullptr);
  if (rc != 0) return failed("fi_domain", rc);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = kCqSize;
  cq_attr.wait_obj = FI_WAIT_FD;  // Block sleeps on it; without one, Block naps
  if (fi_cq_open(domain_, &cq_attr, &cq_, nullptr) != 0) {
    cq_attr.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
    if (rc != 0) return failed("fi_cq_open", rc);
  } else if (fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_) != 0) {
    wait_fd_ = -1;
  }
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = static_cast<std::size_t>(size_);
  rc = fi_av_open(domain_, &av_attr, &av_, nullptr);
  if (rc != 0) return failed("fi_av_open", rc);
  rc = fi_endpoint(domain_, info, &ep_, nullptr);
  if (rc != 0) return failed("fi_endpoint", rc);
  rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV);
  if (rc != 0) return failed("binding the completion queue", rc);
  rc = fi_ep_bind(ep_, &av_->fid, 0);
  if (rc != 0) return failed("binding the address vector", rc);
  rc = fi_enable(ep_);
  if (rc != 0) return failed("fi_enable", rc);

  // Publish "endpoint name (hex);pid;host key"; read everyone's.
  std::string name(256, '\0');
  std::size_t len = name.size();
  rc = fi_getname(&ep_->fid, name.data(), &len);
  if (rc != 0) return failed("fi_getname", rc);
  name.resize(len);
  host_key_ = HostKey();
  CARTAGE_RETURN_IF_ERROR(exchange.Put(absl::StrCat("ofi.", rank_),
                                       absl::StrCat(absl::BytesToHexString(name), ";", ::getpid(), ";", host_key_)));
  CARTAGE_RETURN_IF_ERROR(exchange.Fence());
  vcs_.resize(static_cast<std::size_t>(size_));
  addrs_.assign(static_cast<std::size_t>(size_), FI_ADDR_UNSPEC);
  for (int p = 0; p < size_; ++p) {
    PeerVc& vc = vcs_[static_cast<std::size_t>(p)];
    CARTAGE_ASSIGN_OR_RETURN(std::string record, exchange.Get(absl::StrCat("ofi.", p)));
    std::vector<std::string> f = absl::StrSplit(record, ';');
    std::string peer_name;
    if (f.size() != 3 || !absl::SimpleAtoi(f[1], &vc.pid) || f[0].size() % 2 != 0 ||
        !absl::c_all_of(f[0], [](char ch) { return absl::ascii_isxdigit(static_cast<unsigned char>(ch)); })) {
      return absl::DataLossError(absl::StrFormat("ofi: rank %d published a malformed record '%s'", p, record));
    }
    peer_name = absl::HexStringToBytes(f[0]);
    vc.host_key = f[2];
    fi_addr_t a = FI_ADDR_UNSPEC;
    if (fi_av_insert(av_, peer_name.data(), 1, &a, 0, nullptr) != 1) {
      return absl::UnavailableError(absl::StrFormat("ofi: rank %d cannot insert rank %d's address", rank_, p));
    }
    addrs_[static_cast<std::size_t>(p)] = a;
    vc.name = absl::StrFormat("ofi to rank %d", p);
    vc.ops.name = vc.name;
    vc.ops.start_eager = &OfiMethod::StartSend;
    vc.ops.start_rendezvous = &OfiMethod::StartSend;
    vc.ops.post_recv = &OfiMethod::PostRecv;
    vc.ops.unpost_recv = &OfiMethod::UnpostRecv;
    vc.ops.send_ack = &OfiMethod::SendAck;
  }
  any_.name = "ofi from any rank";
  any_.post_recv = &OfiMethod::PostRecv;
  any_.unpost_recv = &OfiMethod::UnpostRecv;
  any_.send_ack = &OfiMethod::SendAck;
  entries_.resize(static_cast<std::size_t>(options_.events));
  if (provider_.rx_iov_limit >= 2) {
    void* sink = ::mmap(nullptr, kSinkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (sink != MAP_FAILED) sink_ = static_cast<std::byte*>(sink);
  }
  return absl::OkStatus();
}

OfiMethod::~OfiMethod() { CloseFabric(); }

void OfiMethod::CloseFabric() {
  if (ep_ != nullptr) fi_close(&ep_->fid);
  if (av_ != nullptr) fi_close(&av_->fid);
  if (cq_ != nullptr) fi_close(&cq_->fid);
  if (domain_ != nullptr) fi_close(&domain_->fid);
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  ep_ = nullptr;
  av_ = nullptr;
  cq_ = nullptr;
  domain_ = nullptr;
  fabric_ = nullptr;
  for (OfiOp& op : ops_) {
    delete[] op.bounce;
    op.bounce = nullptr;
  }
  if (sink_ != nullptr) ::munmap(sink_, kSinkBytes);
  sink_ = nullptr;
}

void OfiMethod::Close() {
  if (closed_) return;
  closed_ = true;
  // Acknowledgements still waiting on FI_EAGAIN go before the endpoint closes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (queued() > 0 && std::chrono::steady_clock::now() < deadline) Progress();
  CloseFabric();
}

// ---- Peers ---------------------------------------------------------------------

VcState OfiMethod::StateOf(int peer) const {
  return vcs_[static_cast<std::size_t>(peer)].error.ok() ? VcState::kConnected : VcState::kError;
}

void OfiMethod::Bind(Car& car, int peer) {
  OfiCarState& st = StateOf(car);
  st = OfiCarState{};
  st.method = this;
  st.peer = peer;
}

bool OfiMethod::PeerGone(int peer) {
  if (peer == rank_) return false;
  const PeerVc& vc = vcs_[static_cast<std::size_t>(peer)];
  return !vc.error.ok() || (vc.host_key == host_key_ && ProcessGone(vc.pid));
}

void OfiMethod::FailPeer(int peer, const absl::Status& why) {
  PeerVc& vc = vcs_[static_cast<std::size_t>(peer)];
  if (vc.error.ok()) vc.error = why;
  vc.ops.start_eager = &OfiMethod::FailAtOnce;
  vc.ops.start_rendezvous = &OfiMethod::FailAtOnce;
  vc.ops.post_recv = &OfiMethod::FailAtOnce;
  // Everything the provider holds for the peer: receives are cancelled (the
  // provider reports ECANCELED later, to an orphan), sends orphaned.
  std::vector<OfiOp*> mine;
  for (OfiOp* op : live_) {
    if (op->peer == peer && op->car != nullptr) mine.push_back(op);
  }
  for (std::deque<OfiOp*>& q : queued_) {
    for (auto it = q.begin(); it != q.end();) {
      OfiOp* op = *it;
      if (op->peer != peer) {
        ++it;
        continue;
      }
      it = q.erase(it);
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
  CarSignal err;
  err.error = why;
  if (c.kind() == car::CarKind::kSend) {
    if (!SendMachine::IsFinal(c)) (void)SendMachine::Dispatch(c, SendEvent::kError, err);
  } else if (!RecvMachine::IsFinal(c)) {
    (void)RecvMachine::Dispatch(c, RecvEvent::kError, err);
  }
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

void OfiMethod::Post(OfiOp* op, CarStep* step) {
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
  if (rc != 0) {
    Finish(op, absl::UnavailableError(absl::StrFormat("ofi: posting to rank %d: %s", op->peer, FiError(rc))), step);
    return;
  }
  if (op->inject) {
    Finish(op, absl::OkStatus(), step);
    return;
  }
  live_.insert(op);
}

// An injected send is done once posted; a post that failed outright fails
// its CAR.
void OfiMethod::Finish(OfiOp* op, const absl::Status& error, CarStep* step) {
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
    if (step != nullptr) {
      CarSignal err;
      err.error = error;
      if (c->kind() == car::CarKind::kSend) {
        step->Raise<SendMachine>(*c, SendEvent::kError, err);
      } else {
        step->Raise<RecvMachine>(*c, RecvEvent::kError, err);
      }
    } else {
      FailCar(*c, error);
    }
    return;
  }
  if (!send) return;
  if (step != nullptr) {
    step->Raise<SendMachine>(*c, SendEvent::kLocalDone);
  } else {
    (void)SendMachine::Dispatch(*c, SendEvent::kLocalDone);
  }
}

int OfiMethod::RetryQueued() {
  int work = 0;
  for (std::deque<OfiOp*>& q : queued_) {
    while (!q.empty()) {
      OfiOp* op = q.front();
      const ssize_t rc = Issue(op);
      if (rc == -FI_EAGAIN) break;
      q.pop_front();
      ++work;
      if (rc != 0) {
        Finish(op, absl::UnavailableError(absl::StrFormat("ofi: posting to rank %d: %s", op->peer, FiError(rc))),
               nullptr);
      } else if (op->inject) {
        Finish(op, absl::OkStatus(), nullptr);
      } else {
        live_.insert(op);
      }
    }
  }
  return work;
}

void OfiMethod::StartSend(Car& c, CarStep& step) {
  OfiCarState& st = StateOf(c);
  OfiMethod& m = *st.method;
  const int peer = st.peer;
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
    m.Post(ack, &step);
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
  m.Post(op, &step);
}

void OfiMethod::PostRecv(Car& c, CarStep& step) {
  OfiCarState& st = StateOf(c);
  OfiMethod& m = *st.method;
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
  m.Post(op, &step);
}

void OfiMethod::UnpostRecv(Car& c, CarStep&) {
  // Cancel() took it back from the provider; one still queued is dropped.
  OfiCarState& st = StateOf(c);
  if (st.op != nullptr) {
    st.method->Orphan(st.op);
    if (st.method->live_.contains(st.op)) {
      st.op->cancelling = true;
      (void)fi_cancel(&st.method->ep_->fid, &st.op->ctx);
    }
    st.op = nullptr;
  }
}

void OfiMethod::SendAck(Car& c, CarStep& step) {
  OfiCarState& st = StateOf(c);
  OfiMethod& m = *st.method;
  OfiOp* op = m.NewOp(OfiOp::Kind::kAckSend, nullptr, st.peer);
  op->addr = m.addrs_[static_cast<std::size_t>(st.peer)];
  op->tag = m.layout().Ack(c.envelope().context_id, m.rank_, st.tag);
  op->inject = true;
  m.Post(op, &step);
}

void OfiMethod::FailAtOnce(Car& c, CarStep& step) {
  OfiCarState& st = StateOf(c);
  CarSignal err;
  err.error = st.method->vcs_[static_cast<std::size_t>(st.peer)].error;
  if (c.kind() == car::CarKind::kSend) {
    step.Raise<SendMachine>(c, SendEvent::kError, err);
  } else {
    step.Raise<RecvMachine>(c, RecvEvent::kError, err);
  }
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

// ---- Progress --------------------------------------------------------------------

int OfiMethod::Progress() {
  int work = Drain();
  if (queued() > 0) work += RetryQueued();
  return work;
}

int OfiMethod::Drain() {
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
    case OfiOp::Kind::kAckSend:
      FreeOp(op);
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
                                                     : "send to";
  FailCar(*c, absl::UnavailableError(absl::StrFormat(
                  "ofi: %s rank %d failed on %s: %s", what, peer >= 0 ? peer : StateOf(*c).peer, provider_.name,
                  ErrorText(code, err.prov_errno, err.err_data, err.err_data_size))));
}

// A receive completed, or was truncated (`truncated_size`: what the provider
// says the message had; -1: it completed).
void OfiMethod::DeliverRecv(OfiOp* op, const fi_cq_tagged_entry& e, int64_t truncated_size) {
  Car& c = *op->car;
  OfiCarState& st = StateOf(c);
  st.op = nullptr;
  const bool truncated = truncated_size >= 0;
  // Sizes and the data word, by the sender's word where the provider passes
  // it on; error entries carry it unreliably (shm: zero; tcp;ofi_rxm: right,
  // but unflagged), so a truncation trusts only a size beyond the buffer.
  const int64_t said = layout().SizeOf(e.data);
  const bool data_ok = !layout().uses_data() || !truncated || said > static_cast<int64_t>(op->len);
  int source = op->peer;
  if (source < 0 && (data_ok || !layout().source_in_data())) source = layout().SourceOf(e.tag, e.data);
  int64_t total = static_cast<int64_t>(e.len);
  if (said >= 0 && data_ok) {
    total = said;
  } else if (truncated) {
    total = truncated_size > static_cast<int64_t>(op->len) ? truncated_size : -1;
  }
  if (truncated && (total < 0 || source < 0)) {
    const uint64_t room = op->len;
    FreeOp(op);
    FailCar(c, absl::OutOfRangeError(absl::StrFormat(
                   "message of unknown size truncated to the %d-byte receive buffer (%s names neither its size "
                   "nor, for a wildcard receive, its sender)", room, provider_.name)));
    return;
  }
  if (!truncated) {  // a completion names its sender: it must be the one asked for
    const int named = layout().SourceOf(e.tag, e.data);
    source = op->peer >= 0 && named != op->peer ? -1 : named;
  }
  if (source < 0 || source >= size_) {
    FreeOp(op);
    FailCar(c, absl::DataLossError(absl::StrFormat(
                   "ofi: a receive from %s completed naming source rank %d in a job of %d",
                   op->peer >= 0 ? absl::StrCat("rank ", op->peer) : std::string("any rank"),
                   layout().SourceOf(e.tag, e.data), size_)));
    return;
  }
  if (st.peer < 0) {  // a wildcard receive learns its VC
    st.peer = source;
    c.Rebind(&vcs_[static_cast<std::size_t>(source)].ops);
  }
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
