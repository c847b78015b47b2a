#include "methods/tcp/tcp_method.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "car/car_actions.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "car/unexpected_fsm.h"
#include "fsm/check.h"
#include "methods/common/fail_waiting.h"

namespace cartage::methods::tcp {

using car::Car;
using car::CarSignal;
using car::CarStep;
using car::RecvEvent;
using car::RecvMachine;
using car::SendEvent;
using car::SendMachine;

namespace {

// epoll tags: what kind of descriptor, and which.
enum TagKind : uint64_t { kTagListen = 1, kTagPending = 2, kTagVc = 3 };
uint64_t Tag(TagKind k, uint64_t id) { return (static_cast<uint64_t>(k) << 32) | id; }

constexpr std::size_t kRxMin = 256 * 1024;  // a VC's receive buffer, at least
constexpr int kMaxIov = 64;                 // frames (x2 pieces) written per system call
constexpr uint64_t kSmallFrame = 256;       // payloads copied behind their header for one send()

std::string ErrnoText(int e) { return std::strerror(e); }

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

uint64_t InodeOf(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

std::string Ipv4(in_addr a) {
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &a, text, sizeof(text));
  return text;
}

// One IPv4 interface address of this host.
struct Iface {
  std::string name;
  in_addr addr;
  in_addr mask;
  bool loopback;
};

std::vector<Iface> Interfaces() {
  std::vector<Iface> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_UP) == 0) continue;
    Iface f;
    f.name = i->ifa_name;
    std::memcpy(&f.addr, &reinterpret_cast<const sockaddr_in*>(static_cast<const void*>(i->ifa_addr))->sin_addr,
                sizeof(in_addr));
    f.mask.s_addr = 0;
    if (i->ifa_netmask != nullptr) {
      std::memcpy(&f.mask,
                  &reinterpret_cast<const sockaddr_in*>(static_cast<const void*>(i->ifa_netmask))->sin_addr,
                  sizeof(in_addr));
    }
    f.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    out.push_back(f);
  }
  ::freeifaddrs(list);
  return out;
}

bool IsLoopback(in_addr a) { return (ntohl(a.s_addr) >> 24) == 127; }

// A peer's published record: "pid;host key;net key;port;ip/mask,ip/mask".
struct PeerRecord {
  int32_t pid = 0;
  std::string host_key;
  std::string net_key;
  int port = 0;
  std::vector<std::pair<in_addr, in_addr>> addrs;
};

absl::StatusOr<PeerRecord> ParseRecord(int peer, const std::string& text) {
  std::vector<std::string> f = absl::StrSplit(text, ';');
  PeerRecord r;
  if (f.size() != 5 || !absl::SimpleAtoi(f[0], &r.pid) || !absl::SimpleAtoi(f[3], &r.port)) {
    return absl::DataLossError(absl::StrFormat("tcp: rank %d published a malformed address record '%s'", peer, text));
  }
  r.host_key = f[1];
  r.net_key = f[2];
  for (absl::string_view a : absl::StrSplit(f[4], ',', absl::SkipEmpty())) {
    std::pair<absl::string_view, absl::string_view> ip_mask = absl::StrSplit(a, '/');
    in_addr ip{}, mask{};
    if (::inet_pton(AF_INET, std::string(ip_mask.first).c_str(), &ip) != 1 ||
        ::inet_pton(AF_INET, std::string(ip_mask.second).c_str(), &mask) != 1) {
      return absl::DataLossError(absl::StrFormat("tcp: rank %d published a malformed address '%s'", peer, a));
    }
    r.addrs.emplace_back(ip, mask);
  }
  return r;
}

std::string HostKey() {
  return absl::StrCat(ReadFirstLine("/proc/sys/kernel/random/boot_id"), ":", InodeOf("/proc/self/ns/pid"));
}
std::string NetKey() {
  return absl::StrCat(ReadFirstLine("/proc/sys/kernel/random/boot_id"), ":", InodeOf("/proc/self/ns/net"));
}

// Sends all of a small set-up message on a fresh socket (it fits the empty
// send buffer at once); false if it did not go.
bool SendSmall(int fd, const void* p, std::size_t n) {
  return ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(n);
}

bool IsConnecting(ConnState s) {
  return s == ConnState::kConnecting || s == ConnState::kHelloSent || s == ConnState::kAwaitPeer;
}

}  // namespace

// ---- Options -----------------------------------------------------------------

std::vector<ParamInfo> Params() {
  return {
      {"EAGER_LIMIT", "65536", "largest message sent eagerly; larger ones go by rendezvous (RTS, CTS, DATA)"},
      {"IF", "", "listen on this interface only (e.g. eth0); default: every interface, loopback for "
                 "ranks in the same network namespace"},
  };
}

absl::StatusOr<TcpOptions> TcpOptions::FromEnvironment() {
  TcpOptions o;
  if (const char* v = std::getenv("CARTAGE_TCP_EAGER_LIMIT")) {
    if (!absl::SimpleAtoi(v, &o.eager_limit) || o.eager_limit > (std::size_t{64} << 20)) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_TCP_EAGER_LIMIT=%s: need a number <= 64 MiB", v));
    }
  }
  if (const char* v = std::getenv("CARTAGE_TCP_IF")) o.interface = v;
  return o;
}

Capabilities TcpMethod::Caps(const TcpOptions& o) {
  Capabilities c;
  c.eager_limit = o.eager_limit;
  c.max_message = std::numeric_limits<uint64_t>::max();
  c.reach = Reach::kNetwork;
  return c;
}

namespace {
Capabilities CapsFromEnvironment() {
  absl::StatusOr<TcpOptions> o = TcpOptions::FromEnvironment();
  return TcpMethod::Caps(o.ok() ? *o : TcpOptions{});
}
absl::StatusOr<std::unique_ptr<Method>> Open(const OpenArgs& args) {
  CARTAGE_ASSIGN_OR_RETURN(TcpOptions options, TcpOptions::FromEnvironment());
  CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<TcpMethod> m, TcpMethod::Create(*args.exchange, args.host, options));
  return std::unique_ptr<Method>(std::move(m));
}
}  // namespace

const Descriptor kDescriptor{
    "tcp", "ranks anywhere on the network: one lazy TCP connection per pair, epoll, eager and rendezvous",
    &CapsFromEnvironment, &Params, &Open};

absl::Status RegisterTcpMachines(fsm::Registry& registry) { return registry.Register(ConnMachine::Describe()); }

fsm::StateWord& ConnDef::Cell(TcpVc& vc) { return vc.state; }
uint64_t ConnDef::IdOf(const TcpVc& vc) { return static_cast<uint64_t>(vc.peer); }

// ---- Set-up ------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<TcpMethod>> TcpMethod::Create(Exchange& ex, MethodHost* host,
                                                             const TcpOptions& options) {
  auto m = std::unique_ptr<TcpMethod>(new TcpMethod());
  m->options_ = options;
  m->caps_ = Caps(options);
  m->exchange_ = &ex;
  m->host_ = host;
  m->rank_ = ex.rank();
  m->size_ = ex.size();
  m->job_key_ = ex.job_id().substr(0, kJobKeyBytes);
  const auto n = static_cast<std::size_t>(m->size_);
  m->vcs_.resize(n);
  for (int p = 0; p < m->size_; ++p) {
    TcpVc& vc = m->vcs_[static_cast<std::size_t>(p)];
    vc.method = m.get();
    vc.peer = p;
    vc.ops.name = "tcp";
    host->InstallAgentOps(vc.ops);
    SwapOps(vc.ops, kQueueingOps);
  }
  m->live_.reserve(n);
  m->handles_.Reserve(4096);
  m->peer_host_keys_.resize(n);
  m->peer_pids_.assign(n, 0);
  m->fetched_.assign(n, false);
  m->addresses_.resize(n);
  m->my_host_key_ = HostKey();
  m->epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (m->epoll_fd_ < 0) return absl::InternalError(absl::StrCat("tcp: epoll_create1: ", ErrnoText(errno)));
  CARTAGE_RETURN_IF_ERROR(m->Listen());
  return m;
}

absl::Status TcpMethod::Listen() {
  std::vector<Iface> ifaces = Interfaces();
  in_addr bind_to{};
  bind_to.s_addr = htonl(INADDR_ANY);
  if (!options_.interface.empty()) {
    auto it = std::find_if(ifaces.begin(), ifaces.end(), [&](const Iface& f) { return f.name == options_.interface; });
    if (it == ifaces.end()) {
      return absl::NotFoundError(absl::StrFormat("CARTAGE_TCP_IF=%s: no such interface with an IPv4 address that is up",
                                                 options_.interface));
    }
    bind_to = it->addr;
    ifaces = {*it};
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return absl::InternalError(absl::StrCat("tcp: socket: ", ErrnoText(errno)));
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = bind_to;
  a.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listen_fd_, 256) != 0) {
    return absl::UnavailableError(absl::StrFormat("tcp: rank %d cannot listen on %s: %s", rank_, Ipv4(bind_to),
                                                  ErrnoText(errno)));
  }
  socklen_t len = sizeof(a);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  Watch(listen_fd_, EPOLLIN, Tag(kTagListen, 0));
  std::vector<std::string> addrs;
  for (const Iface& f : ifaces) addrs.push_back(absl::StrCat(Ipv4(f.addr), "/", Ipv4(f.mask)));
  const std::string record =
      absl::StrCat(::getpid(), ";", my_host_key_, ";", NetKey(), ";", port_, ";", absl::StrJoin(addrs, ","));
  CARTAGE_RETURN_IF_ERROR(exchange_->Put(absl::StrCat("tcp.", rank_), record));
  return exchange_->Fence();
}

absl::StatusOr<sockaddr_in> TcpMethod::AddressOf(int peer) {
  const auto i = static_cast<std::size_t>(peer);
  CARTAGE_ASSIGN_OR_RETURN(std::string text, exchange_->Get(absl::StrCat("tcp.", peer)));
  CARTAGE_ASSIGN_OR_RETURN(PeerRecord r, ParseRecord(peer, text));
  peer_host_keys_[i] = r.host_key;
  peer_pids_[i] = r.pid;
  fetched_[i] = true;
  const bool same_net = r.net_key == NetKey();
  const std::pair<in_addr, in_addr>* pick = nullptr;
  if (same_net) {  // one network namespace: loopback if it listens there
    for (const auto& a : r.addrs) {
      if (IsLoopback(a.first)) pick = &a;
    }
  }
  const std::vector<Iface> mine = Interfaces();
  for (const auto& a : r.addrs) {  // else an address on a subnet we share
    if (pick != nullptr) break;
    if (IsLoopback(a.first)) continue;
    for (const Iface& f : mine) {
      if (!f.loopback && (f.addr.s_addr & f.mask.s_addr) == (a.first.s_addr & f.mask.s_addr)) pick = &a;
    }
  }
  for (const auto& a : r.addrs) {  // else any address that is not loopback
    if (pick == nullptr && (same_net || !IsLoopback(a.first))) pick = &a;
  }
  if (pick == nullptr) {
    return absl::UnavailableError(absl::StrFormat("tcp: rank %d published no address this rank can reach", peer));
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr = pick->first;
  sa.sin_port = htons(static_cast<uint16_t>(r.port));
  addresses_[i] = sa;
  return sa;
}

TcpMethod::~TcpMethod() {
  for (TcpVc& vc : vcs_) {
    if (vc.fd >= 0) ::close(vc.fd);
  }
  for (Pending& p : pending_) ::close(p.fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

void TcpMethod::Close() {
  for (TcpVc& vc : vcs_) {
    if (!ConnMachine::IsFinal(vc)) Conn(vc, ConnEvent::kClose);
  }
  for (Pending& p : pending_) CloseFd(p.fd);
  pending_.clear();
}

void TcpMethod::Bind(Car& c, int peer) {
  TcpCarState& s = *new (c.method_private()) TcpCarState();
  s.method = this;
  s.peer = peer;
}

VcState TcpMethod::StateOf(int peer) const {
  const TcpVc& vc = vcs_[static_cast<std::size_t>(peer)];
  switch (static_cast<ConnState>(vc.state.value())) {
    case ConnState::kIdle: return VcState::kIdle;
    case ConnState::kConnected: return VcState::kConnected;
    case ConnState::kError:
    case ConnState::kClosed: return VcState::kError;
    default: return VcState::kConnecting;
  }
}

bool TcpMethod::Busy() const {
  if (connecting_ > 0 || handles_.live() > 0) return true;
  return std::any_of(live_.begin(), live_.end(), [](const TcpVc* vc) { return !vc->out.empty() || vc->data_left > 0; });
}

bool TcpMethod::PeerGone(int peer) {
  const auto i = static_cast<std::size_t>(peer);
  if (peer == rank_) return false;
  if (ConnMachine::StateOf(vcs_[i]) == ConnState::kError) return true;
  if (!fetched_[i] && !AddressOf(peer).ok()) return false;
  // A peer whose pid this rank can see (same boot, same pid namespace).
  return peer_host_keys_[i] == my_host_key_ && peer_pids_[i] > 0 && ::kill(peer_pids_[i], 0) != 0 && errno == ESRCH;
}

// ---- VC operations, by state -----------------------------------------------------

namespace {
void NobodyToTell(Car&, CarStep&) {}  // an ACK for a peer that is gone: the receive completed
}  // namespace

// The VC's operations in each state of tcp_connection (SwapOps keeps the
// agent's post_recv / unpost_recv and the name).
const car::Carrier TcpMethod::kQueueingOps{"tcp",   &QueueEager, &QueueRendezvous, &StartData, nullptr,
                                           nullptr, &SendCts,    &SendAck,         nullptr};
const car::Carrier TcpMethod::kConnectedOps{"tcp",   &StartEager, &StartRendezvous, &StartData, nullptr,
                                            nullptr, &SendCts,    &SendAck,         nullptr};
const car::Carrier TcpMethod::kFailingOps{"tcp",   &FailAtOnce, &FailAtOnce,    &FailAtOnce, nullptr,
                                          nullptr, &FailAtOnce, &NobodyToTell, nullptr};

void TcpMethod::FailAtOnce(Car& c, CarStep& step) {
  TcpCarState& s = StateOf(c);
  car::CarActions::RaiseError(c, step, s.method->vc(s.peer).error);
}

namespace {
FrameHeader Envelope(const Car& c, uint8_t type, uint32_t proto, uint64_t handle) {
  const car::Envelope& e = c.envelope();
  FrameHeader h{};
  h.type = type;
  h.proto = proto;
  h.context = e.context_id;
  h.tag = e.tag;
  h.length = c.payload_bytes();
  h.a = handle;
  return h;
}
}  // namespace

OutFrame& TcpMethod::Queue(TcpVc& vc, const FrameHeader& h, Car* payload_of) {
  OutFrame& f = vc.out.emplace_back();
  f.h = h;
  f.car = payload_of;
  if (payload_of != nullptr) {
    f.payload_bytes = h.length;
    f.payload = payload_of->ContiguousSource();
    if (f.payload == nullptr && f.payload_bytes > 0) {
      f.packed.resize(f.payload_bytes);
      payload_of->Gather(0, f.packed.data(), f.payload_bytes);
      f.payload = f.packed.data();
    }
  }
  return f;
}

void TcpMethod::QueueControl(TcpVc& vc, const FrameHeader& h) {
  if (vc.out.empty() && ConnMachine::StateOf(vc) == ConnState::kConnected) {
    const ssize_t n = ::send(vc.fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(sizeof(h))) return;
    Queue(vc, h, nullptr).sent = n > 0 ? static_cast<uint64_t>(n) : 0;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      Lost(vc, absl::UnavailableError(absl::StrFormat("tcp: sending to rank %d: %s", vc.peer, ErrnoText(errno))));
    }
    return;
  }
  Queue(vc, h, nullptr);
}

void TcpMethod::QueueEager(Car& c, CarStep&) {
  TcpCarState& s = StateOf(c);
  TcpMethod& m = *s.method;
  OpScope scope(m);
  TcpVc& vc = m.vc(s.peer);
  if (c.spec().synchronous) s.local_handle = m.handles_.Insert(&c);
  m.Queue(vc, Envelope(c, kFrameEager, c.spec().synchronous ? car::kProtoSync : car::kProtoEager, s.local_handle),
          &c);
  m.Conn(vc, ConnEvent::kSend);
}

void TcpMethod::QueueRendezvous(Car& c, CarStep&) {
  TcpCarState& s = StateOf(c);
  TcpMethod& m = *s.method;
  OpScope scope(m);
  TcpVc& vc = m.vc(s.peer);
  s.local_handle = m.handles_.Insert(&c);
  const uint32_t proto = car::kProtoRendezvous | (c.spec().synchronous ? uint32_t{car::kProtoSync} : 0u);
  FrameHeader h = Envelope(c, kFrameRts, proto, s.local_handle);
  m.Queue(vc, h, nullptr);
  m.Conn(vc, ConnEvent::kSend);
}

void TcpMethod::StartEager(Car& c, CarStep& step) {
  TcpCarState& s = StateOf(c);
  TcpMethod& m = *s.method;
  OpScope scope(m);
  TcpVc& vc = m.vc(s.peer);
  if (c.spec().synchronous) s.local_handle = m.handles_.Insert(&c);
  const FrameHeader h =
      Envelope(c, kFrameEager, c.spec().synchronous ? car::kProtoSync : car::kProtoEager, s.local_handle);
  const std::byte* payload = c.ContiguousSource();
  if (vc.out.empty() && (payload != nullptr || h.length == 0)) {
    // The common case: header and payload in one system call, nothing
    // queued. A small message is copied behind its header (one plain send is
    // cheaper than a gather); a larger one goes as an iovec pair.
    ssize_t n;
    if (h.length <= kSmallFrame) {
      alignas(64) std::byte frame[sizeof(FrameHeader) + kSmallFrame];
      std::memcpy(frame, &h, sizeof(h));
      if (h.length > 0) std::memcpy(frame + sizeof(h), payload, h.length);
      n = ::send(vc.fd, frame, sizeof(h) + h.length, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      iovec iov[2] = {{const_cast<FrameHeader*>(&h), sizeof(h)},
                      {const_cast<std::byte*>(payload), static_cast<std::size_t>(h.length)}};
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = 2;
      n = ::sendmsg(vc.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (n == static_cast<ssize_t>(sizeof(h) + h.length)) {
      step.Raise<SendMachine>(c, SendEvent::kLocalDone);
      return;
    }
    OutFrame& f = m.Queue(vc, h, &c);
    if (n > 0) f.sent = static_cast<uint64_t>(n);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      m.Lost(vc, absl::UnavailableError(absl::StrFormat("tcp: sending to rank %d: %s", vc.peer, ErrnoText(errno))));
    }
    return;
  }
  m.Queue(vc, h, &c);
  m.Flush(vc, &step);
}

void TcpMethod::StartRendezvous(Car& c, CarStep&) {
  TcpCarState& s = StateOf(c);
  TcpMethod& m = *s.method;
  OpScope scope(m);
  s.local_handle = m.handles_.Insert(&c);
  const uint32_t proto = car::kProtoRendezvous | (c.spec().synchronous ? uint32_t{car::kProtoSync} : 0u);
  m.QueueControl(m.vc(s.peer), Envelope(c, kFrameRts, proto, s.local_handle));
}

void TcpMethod::StartData(Car& c, CarStep& step) {
  TcpCarState& s = StateOf(c);
  TcpMethod& m = *s.method;
  OpScope scope(m);
  TcpVc& vc = m.vc(s.peer);
  FrameHeader h{};
  h.type = kFrameData;
  h.length = c.payload_bytes();
  h.a = s.remote_handle;
  h.b = 0;
  m.Queue(vc, h, &c);  // the payload stays in the user's buffer when it is one run
  m.Flush(vc, &step);
}

void TcpMethod::SendCts(Car& c, CarStep&) {
  TcpCarState& s = StateOf(c);
  TcpMethod& m = *s.method;
  OpScope scope(m);
  s.local_handle = m.handles_.Insert(&c);
  FrameHeader h{};
  h.type = kFrameCts;
  h.a = s.remote_handle;
  h.b = s.local_handle;
  m.QueueControl(m.vc(s.peer), h);
}

void TcpMethod::SendAck(Car& c, CarStep&) {
  TcpCarState& s = StateOf(c);
  OpScope scope(*s.method);
  FrameHeader h{};
  h.type = kFrameAck;
  h.a = s.remote_handle;
  s.method->QueueControl(s.method->vc(s.peer), h);
}

// ---- Writing -------------------------------------------------------------------

void TcpMethod::Complete(OutFrame& f, CarStep* step) {
  if (f.car == nullptr) return;
  TcpCarState& s = StateOf(*f.car);
  if (f.h.type == kFrameData && s.local_handle != 0) {
    // The last the peer hears of this send: its handle goes now (the CAR is
    // done once the event below runs).
    handles_.Remove(s.local_handle);
    s.local_handle = 0;
  }
  if (step != nullptr) {
    step->Raise<SendMachine>(*f.car, SendEvent::kLocalDone);
  } else {
    (void)SendMachine::Dispatch(*f.car, SendEvent::kLocalDone);
    FinishIfFinal(*f.car);
  }
}

int TcpMethod::Flush(TcpVc& vc, CarStep* step) {
  int done = 0;
  while (!vc.out.empty() && ConnMachine::StateOf(vc) == ConnState::kConnected) {
    iovec iov[kMaxIov];
    int n_iov = 0;
    uint64_t want = 0;
    for (std::size_t k = 0; k < vc.out.size() && n_iov + 2 <= kMaxIov; ++k) {
      OutFrame& f = vc.out[k];
      uint64_t skip = f.sent;
      if (skip < sizeof(FrameHeader)) {
        iov[n_iov++] = {reinterpret_cast<std::byte*>(&f.h) + skip, sizeof(FrameHeader) - skip};
        want += sizeof(FrameHeader) - skip;
        skip = 0;
      } else {
        skip -= sizeof(FrameHeader);
      }
      if (f.payload_bytes > skip) {
        // Large payloads go in pieces of at most 1 GiB (sendmsg's limit is 2 GiB).
        const uint64_t piece = std::min<uint64_t>(f.payload_bytes - skip, uint64_t{1} << 30);
        iov[n_iov++] = {const_cast<std::byte*>(f.payload) + skip, static_cast<std::size_t>(piece)};
        want += piece;
        if (piece < f.payload_bytes - skip) break;
      }
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<std::size_t>(n_iov);
    const ssize_t n = ::sendmsg(vc.fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      Lost(vc, absl::UnavailableError(absl::StrFormat("tcp: sending to rank %d: %s", vc.peer, ErrnoText(errno))));
      break;
    }
    uint64_t left = static_cast<uint64_t>(n);
    while (left > 0) {
      OutFrame& f = vc.out.front();
      const uint64_t rest = sizeof(FrameHeader) + f.payload_bytes - f.sent;
      const uint64_t take = std::min(rest, left);
      f.sent += take;
      left -= take;
      if (f.sent < sizeof(FrameHeader) + f.payload_bytes) break;
      OutFrame finished = std::move(f);
      vc.out.pop_front();
      Complete(finished, step);
      ++done;
    }
    if (static_cast<uint64_t>(n) < want) break;  // the socket is full
  }
  return done;
}

// ---- Connections ----------------------------------------------------------------

void TcpMethod::Watch(int fd, uint32_t events, uint64_t tag) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = tag;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) != 0) ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
}

void TcpMethod::CloseFd(int fd) {
  if (fd < 0) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
}

void TcpMethod::Conn(TcpVc& vc, ConnEvent e, const ConnSignal& s) {
  const ConnState before = ConnMachine::StateOf(vc);
  (void)ConnMachine::Dispatch(vc, e, s);
  const ConnState after = ConnMachine::StateOf(vc);
  connecting_ += static_cast<int>(IsConnecting(after)) - static_cast<int>(IsConnecting(before));
  if (after == ConnState::kConnected && !vc.live) {
    vc.live = true;
    live_.push_back(&vc);
  } else if (after != ConnState::kConnected && vc.live) {
    vc.live = false;
    live_.erase(std::find(live_.begin(), live_.end(), &vc));
  }
  AfterTransition(vc);
}

void TcpMethod::AfterTransition(TcpVc& vc) {
  const ConnState s = ConnMachine::StateOf(vc);
  if (s == ConnState::kError && !vc.cars_failed) {
    // Not from inside a CAR's operation: failing CARs dispatches their
    // machines, and the CAR whose operation runs is mid-transition. Progress
    // picks it up.
    if (in_op_ > 0) {
      failed_later_ = true;
      return;
    }
    FailCars(vc);
  }
}

void TcpMethod::Lost(TcpVc& vc, absl::Status why) {
  ConnSignal s;
  s.error = std::move(why);
  if (!ConnMachine::IsFinal(vc)) Conn(vc, ConnEvent::kLost, s);
}

void TcpMethod::FailPeer(int peer, const absl::Status& why) {
  TcpVc& vc = this->vc(peer);
  if (!ConnMachine::IsFinal(vc)) {
    Lost(vc, why);
  } else if (ConnMachine::StateOf(vc) == ConnState::kError && !vc.cars_failed && in_op_ == 0) {
    FailCars(vc);
  }
}

void TcpMethod::FailCars(TcpVc& vc) {
  vc.cars_failed = true;
  CarSignal err;
  err.error = vc.error;
  std::deque<OutFrame> out;
  out.swap(vc.out);
  for (OutFrame& f : out) {
    if (f.car != nullptr && !SendMachine::IsFinal(*f.car)) (void)SendMachine::Dispatch(*f.car, SendEvent::kError, err);
  }
  vc.data_car = nullptr;
  vc.data_left = 0;
  FailWaiting(
      handles_, vc.peer, vc.error, [](Car& c) { return StateOf(c).peer; },
      [](Car& c) { StateOf(c).local_handle = 0; });
}

// The connection actions (tcp_conn_fsm.h).

bool ConnActions::PeerWins(const TcpVc& vc, const ConnSignal&) { return vc.peer < vc.method->rank_; }

void ConnActions::StartConnect(TcpVc& vc, const ConnSignal&, fsm::Step<TcpVc, ConnSignal>& step) {
  TcpMethod& m = *vc.method;
  ConnSignal lost;
  absl::StatusOr<sockaddr_in> to = m.AddressOf(vc.peer);
  if (!to.ok()) {
    lost.error = to.status();
    step.Raise<ConnMachine>(vc, ConnEvent::kLost, lost);
    return;
  }
  vc.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (vc.fd >= 0) ::setsockopt(vc.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (vc.fd < 0 || (::connect(vc.fd, reinterpret_cast<const sockaddr*>(&*to), sizeof(*to)) != 0 &&
                    errno != EINPROGRESS)) {
    lost.error = absl::UnavailableError(absl::StrFormat("tcp: connecting to rank %d at %s:%d: %s", vc.peer,
                                                        Ipv4(to->sin_addr), ntohs(to->sin_port), ErrnoText(errno)));
    step.Raise<ConnMachine>(vc, ConnEvent::kLost, lost);
    return;
  }
  m.Watch(vc.fd, EPOLLOUT, Tag(kTagVc, static_cast<uint64_t>(vc.peer)));
}

void ConnActions::SendHello(TcpVc& vc, const ConnSignal&, fsm::Step<TcpVc, ConnSignal>& step) {
  TcpMethod& m = *vc.method;
  Hello hello{};
  hello.magic = kHelloMagic;
  hello.version = kWireVersion;
  hello.key_len = static_cast<uint16_t>(m.job_key_.size());
  hello.rank = m.rank_;
  hello.size = m.size_;
  std::memcpy(hello.key, m.job_key_.data(), m.job_key_.size());
  vc.reply_got = 0;
  if (!SendSmall(vc.fd, &hello, sizeof(hello))) {
    ConnSignal lost;
    lost.error = absl::UnavailableError(absl::StrFormat("tcp: greeting rank %d: %s", vc.peer, ErrnoText(errno)));
    step.Raise<ConnMachine>(vc, ConnEvent::kLost, lost);
    return;
  }
  m.Watch(vc.fd, EPOLLIN, Tag(kTagVc, static_cast<uint64_t>(vc.peer)));
}

void ConnActions::Adopt(TcpVc& vc, const ConnSignal& s, fsm::Step<TcpVc, ConnSignal>& step) {
  TcpMethod& m = *vc.method;
  vc.fd = s.fd;
  const HelloReply reply{kHelloMagic, kWelcome};
  if (!SendSmall(vc.fd, &reply, sizeof(reply))) {
    ConnSignal lost;
    lost.error = absl::UnavailableError(absl::StrFormat("tcp: answering rank %d: %s", vc.peer, ErrnoText(errno)));
    step.Raise<ConnMachine>(vc, ConnEvent::kLost, lost);
    return;
  }
  m.Watch(vc.fd, EPOLLIN, Tag(kTagVc, static_cast<uint64_t>(vc.peer)));
  SwapOps(vc.ops, TcpMethod::kConnectedOps);
  if (vc.rx.empty()) vc.rx.resize(std::max(kRxMin, m.options_.eager_limit + sizeof(FrameHeader) + 4096));
}

void ConnActions::DropOwnAndAdopt(TcpVc& vc, const ConnSignal& s, fsm::Step<TcpVc, ConnSignal>& step) {
  vc.method->CloseFd(vc.fd);
  vc.fd = -1;
  Adopt(vc, s, step);
}

void ConnActions::Refuse(TcpVc& vc, const ConnSignal& s, fsm::Step<TcpVc, ConnSignal>&) {
  const HelloReply reply{kHelloMagic, kDuplicate};
  (void)SendSmall(s.fd, &reply, sizeof(reply));
  vc.method->CloseFd(s.fd);
}

void ConnActions::Welcomed(TcpVc& vc, const ConnSignal&, fsm::Step<TcpVc, ConnSignal>&) {
  TcpMethod& m = *vc.method;
  SwapOps(vc.ops, TcpMethod::kConnectedOps);
  if (vc.rx.empty()) vc.rx.resize(std::max(kRxMin, m.options_.eager_limit + sizeof(FrameHeader) + 4096));
}

void ConnActions::DropOwn(TcpVc& vc, const ConnSignal&, fsm::Step<TcpVc, ConnSignal>&) {
  vc.method->CloseFd(vc.fd);
  vc.fd = -1;
}

void ConnActions::Fail(TcpVc& vc, const ConnSignal& s, fsm::Step<TcpVc, ConnSignal>&) {
  vc.error = s.error.ok() ? absl::UnavailableError(absl::StrFormat("tcp: connection to rank %d lost", vc.peer))
                          : s.error;
  vc.method->CloseFd(vc.fd);
  vc.fd = -1;
  SwapOps(vc.ops, TcpMethod::kFailingOps);
}

void ConnActions::Shut(TcpVc& vc, const ConnSignal&, fsm::Step<TcpVc, ConnSignal>&) {
  vc.method->CloseFd(vc.fd);
  vc.fd = -1;
  vc.error = absl::FailedPreconditionError(absl::StrFormat("tcp: the VC to rank %d is closed (finalized)", vc.peer));
  SwapOps(vc.ops, TcpMethod::kFailingOps);
}

// ---- Progress ----------------------------------------------------------------

int TcpMethod::Progress() {
  int work = 0;
  if (failed_later_) {
    failed_later_ = false;
    for (TcpVc& vc : vcs_) {
      if (ConnMachine::StateOf(vc) == ConnState::kError && !vc.cars_failed) FailCars(vc);
    }
  }
  for (std::size_t i = live_.size(); i-- > 0;) {
    if (i >= live_.size()) continue;
    TcpVc& vc = *live_[i];
    if (!vc.out.empty()) work += Flush(vc, nullptr);
    if (vc.live) work += PumpRx(vc);
  }
  // Connections being made and accepted: every round while some are under
  // way, else now and then (a peer may connect at any time; rarely once
  // connections are up, since each epoll_wait delays the next read).
  if (connecting_ > 0 || !pending_.empty() || (++tick_ & (live_.empty() ? 15 : 127)) == 0) work += PollEvents(0);
  return work;
}

void TcpMethod::Block(int timeout_us) {
  epoll_event evs[16];
  const int ms = std::max(1, (timeout_us + 999) / 1000);
  // Level-triggered: what this reports is still there for Progress.
  (void)::epoll_wait(epoll_fd_, evs, 16, ms);
}

int TcpMethod::PollEvents(int timeout_ms) {
  epoll_event evs[64];
  const int n = ::epoll_wait(epoll_fd_, evs, 64, timeout_ms);
  int work = 0;
  for (int k = 0; k < n; ++k) {
    const uint64_t tag = evs[k].data.u64;
    const uint64_t id = tag & 0xffffffffu;
    switch (tag >> 32) {
      case kTagListen: OnListen(); ++work; break;
      case kTagPending: OnPending(static_cast<std::size_t>(id)); ++work; break;
      case kTagVc: {
        if (id >= vcs_.size()) break;
        TcpVc& vc = vcs_[id];
        const ConnState s = ConnMachine::StateOf(vc);
        if (s == ConnState::kConnected) {
          work += PumpRx(vc);
        } else if (s == ConnState::kConnecting || s == ConnState::kHelloSent) {
          OnConnecting(vc, evs[k].events);
          ++work;
        }
        break;
      }
      default: break;
    }
  }
  return work;
}

void TcpMethod::OnListen() {
  for (;;) {
    sockaddr_in from{};
    socklen_t len = sizeof(from);
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    Pending p;
    p.fd = fd;
    p.from = absl::StrCat(Ipv4(from.sin_addr), ":", ntohs(from.sin_port));
    pending_.push_back(p);
    Watch(fd, EPOLLIN, Tag(kTagPending, static_cast<uint64_t>(fd)));
  }
}

void TcpMethod::OnPending(std::size_t fd) {
  auto it = std::find_if(pending_.begin(), pending_.end(), [fd](const Pending& p) { return p.fd == static_cast<int>(fd); });
  if (it == pending_.end()) return;
  Pending& p = *it;
  const ssize_t n = ::recv(p.fd, reinterpret_cast<char*>(&p.hello) + p.got, sizeof(Hello) - p.got, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  std::string refuse;
  if (n <= 0) {
    refuse = "closed before its greeting";
  } else {
    p.got += static_cast<std::size_t>(n);
    if (p.got < sizeof(Hello)) return;
    const Hello& h = p.hello;
    if (h.magic != kHelloMagic) {
      refuse = "not a cartage connection (bad magic)";
    } else if (h.version != kWireVersion) {
      refuse = absl::StrFormat("wire version %d, this rank speaks %d", h.version, kWireVersion);
    } else if (h.key_len != job_key_.size() || std::memcmp(h.key, job_key_.data(), job_key_.size()) != 0) {
      refuse = "wrong job key";
    } else if (h.size != size_ || h.rank < 0 || h.rank >= size_ || h.rank == rank_) {
      refuse = absl::StrFormat("claims rank %d of %d (this job: %d ranks, this is rank %d)", h.rank, h.size, size_,
                               rank_);
    }
  }
  const int conn = p.fd;
  const int claimed = p.hello.rank;
  const std::string from = p.from;
  pending_.erase(it);
  if (!refuse.empty()) {
    std::fprintf(stderr, "cartage tcp (rank %d): refused a connection from %s: %s\n", rank_, from.c_str(),
                 refuse.c_str());
    const HelloReply reply{kHelloMagic, kRefused};
    if (n > 0) (void)SendSmall(conn, &reply, sizeof(reply));
    CloseFd(conn);
    return;
  }
  if (ConnMachine::IsFinal(vc(claimed))) {  // in error or closed: nothing to adopt it
    CloseFd(conn);
    return;
  }
  ConnSignal s;
  s.fd = conn;
  Conn(vc(claimed), ConnEvent::kAccepted, s);  // adopted, or refused as a duplicate and closed
}

void TcpMethod::OnConnecting(TcpVc& vc, uint32_t events) {
  if (ConnMachine::StateOf(vc) == ConnState::kConnecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(vc.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == 0 && (events & EPOLLOUT) != 0) {
      Conn(vc, ConnEvent::kConnectDone);
    } else if (err != 0 || (events & (EPOLLERR | EPOLLHUP)) != 0) {
      const sockaddr_in& a = addresses_[static_cast<std::size_t>(vc.peer)];
      Lost(vc, absl::UnavailableError(absl::StrFormat("tcp: connecting to rank %d at %s:%d: %s", vc.peer,
                                                      Ipv4(a.sin_addr), ntohs(a.sin_port),
                                                      ErrnoText(err != 0 ? err : ECONNREFUSED))));
    }
    return;
  }
  // hello_sent: the reply, exactly its bytes (frames may follow it).
  const ssize_t n = ::recv(vc.fd, reinterpret_cast<char*>(&vc.reply) + vc.reply_got, sizeof(HelloReply) - vc.reply_got,
                           MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {
    // The peer closed our connection: it kept its own (a duplicate it will
    // use) or went away. Wait for its connection if it is alive.
    if (PeerGone(vc.peer)) {
      Lost(vc, absl::UnavailableError(absl::StrFormat("rank %d exited or finalized (tcp: connection closed)", vc.peer)));
    } else {
      Conn(vc, ConnEvent::kDuplicate);
    }
    return;
  }
  vc.reply_got += static_cast<std::size_t>(n);
  if (vc.reply_got < sizeof(HelloReply)) return;
  if (vc.reply.magic != kHelloMagic || vc.reply.verdict == kRefused || vc.reply.verdict > kRefused ||
      vc.reply.verdict == 0) {
    Lost(vc, absl::PermissionDeniedError(absl::StrFormat(
                 "tcp: rank %d refused the connection (job key or wire version differ; see its log)", vc.peer)));
  } else if (vc.reply.verdict == kWelcome) {
    Conn(vc, ConnEvent::kWelcome);
  } else {
    Conn(vc, ConnEvent::kDuplicate);
  }
}

// ---- Reading -------------------------------------------------------------------

int TcpMethod::PumpRx(TcpVc& vc) {
  int work = 0;
  for (int round = 0; round < 8 && ConnMachine::StateOf(vc) == ConnState::kConnected; ++round) {
    ssize_t n;
    std::size_t asked;
    std::size_t direct = 0;  // bytes read straight into a receive buffer
    if (vc.data_left > 0 && vc.head == vc.tail && vc.data_car->LandsContiguous() &&
        !vc.data_car->LandingZone().empty()) {
      // A DATA stream with nothing buffered: read into the receive buffer
      // itself, and what follows the stream into rx.
      std::span<std::byte> zone = vc.data_car->LandingZone();
      const std::size_t room = static_cast<std::size_t>(std::min<uint64_t>(zone.size(), vc.data_left));
      vc.head = vc.tail = 0;
      iovec iov[2] = {{zone.data(), room}, {vc.rx.data(), vc.rx.size()}};
      n = ::readv(vc.fd, iov, 2);
      asked = room + vc.rx.size();
      if (n > 0) {
        direct = std::min(static_cast<std::size_t>(n), room);
        vc.tail = static_cast<std::size_t>(n) - direct;
      }
    } else {
      if (vc.head == vc.tail) vc.head = vc.tail = 0;
      if (vc.rx.size() - vc.tail < 4096 && vc.head > 0) {
        std::memmove(vc.rx.data(), vc.rx.data() + vc.head, vc.tail - vc.head);
        vc.tail -= vc.head;
        vc.head = 0;
      }
      asked = vc.rx.size() - vc.tail;
      n = ::recv(vc.fd, vc.rx.data() + vc.tail, asked, MSG_DONTWAIT);
      if (n > 0) vc.tail += static_cast<std::size_t>(n);
    }
    if (n == 0) {
      Lost(vc, absl::UnavailableError(absl::StrFormat("rank %d exited or finalized (tcp: connection closed)", vc.peer)));
      return work + 1;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      if (errno == EINTR) continue;
      Lost(vc, absl::UnavailableError(absl::StrFormat("tcp: connection to rank %d lost: %s", vc.peer, ErrnoText(errno))));
      return work + 1;
    }
    ++work;
    if (direct > 0) {
      Car* r = vc.data_car;
      vc.data_left -= direct;
      if (vc.data_left == 0) vc.data_car = nullptr;
      CarSignal d;
      d.bytes = direct;
      (void)RecvMachine::Dispatch(*r, RecvEvent::kData, d);
      FinishIfFinal(*r);
    }
    Parse(vc);
    if (static_cast<std::size_t>(n) < asked) break;  // drained
  }
  return work;
}

void TcpMethod::Parse(TcpVc& vc) {
  while (ConnMachine::StateOf(vc) == ConnState::kConnected) {
    const std::size_t avail = vc.tail - vc.head;
    if (vc.data_left > 0) {
      const std::size_t k = static_cast<std::size_t>(std::min<uint64_t>(vc.data_left, avail));
      if (k == 0) break;
      Car* r = vc.data_car;
      r->Land(vc.rx.data() + vc.head, k);
      vc.head += k;
      vc.data_left -= k;
      if (vc.data_left == 0) vc.data_car = nullptr;
      CarSignal d;
      d.bytes = k;
      (void)RecvMachine::Dispatch(*r, RecvEvent::kData, d);
      FinishIfFinal(*r);
      continue;
    }
    if (avail < sizeof(FrameHeader)) break;
    FrameHeader h;
    std::memcpy(&h, vc.rx.data() + vc.head, sizeof(h));
    if (!OnFrame(vc, h)) break;
  }
  if (vc.head == vc.tail) vc.head = vc.tail = 0;
}

void TcpMethod::Malformed(TcpVc& vc, absl::string_view what) {
  Lost(vc, absl::DataLossError(absl::StrFormat("tcp: malformed frame from rank %d: %s", vc.peer, what)));
}

Car* TcpMethod::Lookup(uint64_t handle, car::CarKind kind, int source) const {
  Car* c = handles_.Find(handle);
  return c != nullptr && c->kind() == kind && StateOf(*c).peer == source ? c : nullptr;
}

void TcpMethod::FinishIfFinal(Car& c) {
  TcpCarState& s = StateOf(c);
  if (s.local_handle == 0) return;
  const bool final = c.kind() == car::CarKind::kSend ? SendMachine::IsFinal(c) : RecvMachine::IsFinal(c);
  if (final) {
    handles_.Remove(s.local_handle);
    s.local_handle = 0;
  }
}

bool TcpMethod::OnFrame(TcpVc& vc, const FrameHeader& h) {
  const int source = vc.peer;
  switch (h.type) {
    case kFrameEager: {
      if (h.length > options_.eager_limit) {
        Malformed(vc, absl::StrFormat("eager length %d exceeds the %d-byte eager limit", h.length, options_.eager_limit));
        return false;
      }
      const std::size_t need = sizeof(FrameHeader) + static_cast<std::size_t>(h.length);
      if (vc.tail - vc.head < need) {
        if (vc.rx.size() - vc.head < need) {  // make room for the whole frame
          std::memmove(vc.rx.data(), vc.rx.data() + vc.head, vc.tail - vc.head);
          vc.tail -= vc.head;
          vc.head = 0;
        }
        return false;
      }
      const std::byte* payload = vc.rx.data() + vc.head + sizeof(FrameHeader);
      vc.head += need;
      OnEnvelope(vc, h, payload);
      return true;
    }
    case kFrameRts:
      vc.head += sizeof(FrameHeader);
      OnEnvelope(vc, h, nullptr);
      return true;
    case kFrameCts: {
      Car* c = Lookup(h.a, car::CarKind::kSend, source);
      if (c == nullptr || SendMachine::StateOf(*c) != car::SendState::kRtsSent) {
        Malformed(vc, "CTS for an unknown send");
        return false;
      }
      vc.head += sizeof(FrameHeader);
      StateOf(*c).remote_handle = h.b;
      (void)SendMachine::Dispatch(*c, SendEvent::kCts);
      FinishIfFinal(*c);
      return true;
    }
    case kFrameData: {
      Car* r = Lookup(h.a, car::CarKind::kRecv, source);
      if (r == nullptr) {
        Malformed(vc, "DATA for an unknown receive");
        return false;
      }
      if (h.b != r->bytes_done() || h.length != r->bytes_total() - r->bytes_done()) {
        Malformed(vc, absl::StrFormat("DATA of %d bytes at offset %d for a %d-byte message with %d bytes in", h.length,
                                      h.b, r->bytes_total(), r->bytes_done()));
        return false;
      }
      vc.head += sizeof(FrameHeader);
      if (h.length == 0) return true;
      vc.data_car = r;
      vc.data_left = h.length;
      return true;
    }
    case kFrameAck: {
      Car* c = Lookup(h.a, car::CarKind::kSend, source);
      if (c == nullptr) {
        Malformed(vc, "ACK for an unknown send");
        return false;
      }
      vc.head += sizeof(FrameHeader);
      (void)SendMachine::Dispatch(*c, SendEvent::kAck);
      FinishIfFinal(*c);
      return true;
    }
    default:
      Malformed(vc, absl::StrFormat("unknown frame type %d", h.type));
      return false;
  }
}

void TcpMethod::OnEnvelope(TcpVc& vc, const FrameHeader& h, const std::byte* payload) {
  const int source = vc.peer;
  const bool rendezvous = payload == nullptr;
  if (h.tag < 0) return Malformed(vc, absl::StrFormat("negative tag %d", h.tag));
  const car::Envelope env{h.context, source, h.tag};
  CarSignal sig;
  sig.bytes = h.length;
  sig.proto = rendezvous ? (h.proto | car::kProtoRendezvous) : (h.proto & ~car::kProtoRendezvous);
  sig.source = source;
  sig.tag = h.tag;
  sig.data = payload;  // eager: the whole message, one event
  auto adopt = [&](Car& c) {
    Bind(c, source);
    StateOf(c).remote_handle = h.a;
  };
  if (Car* r = host_->MatchIncoming(env)) {
    adopt(*r);
    (void)RecvMachine::Dispatch(*r, rendezvous ? RecvEvent::kEnvelope : RecvEvent::kEager, sig);
    FinishIfFinal(*r);
    return;
  }
  absl::StatusOr<Car*> u = host_->NewUnexpected(env, rendezvous ? 0 : h.length);
  if (!u.ok()) return Lost(vc, u.status());
  adopt(**u);
  (void)car::UnexpectedMachine::Dispatch(
      **u, rendezvous ? car::UnexpectedEvent::kEnvelope : car::UnexpectedEvent::kEager, sig);
}

}  // namespace cartage::methods::tcp
