// The tcp method's connections: what a rank publishes and where it
// connects, the listening socket, the tcp_connection actions (tcp_conn_fsm.h)
// and the handshake, and the epoll events that drive them.
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/check.h"
#include "methods/common/host_keys.h"
#include "methods/tcp/tcp_method.h"

namespace cartage::methods::tcp {

namespace {

// epoll tags: what kind of descriptor, and which.
enum TagKind : uint64_t { kTagListen = 1, kTagPending = 2, kTagVc = 3 };
uint64_t Tag(TagKind k, uint64_t id) { return (static_cast<uint64_t>(k) << 32) | id; }

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

// Sends all of a small set-up message on a fresh socket (it fits the empty
// send buffer at once); false if it did not go.
bool SendSmall(int fd, const void* p, std::size_t n) {
  return ::send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(n);
}

}  // namespace

fsm::StateWord& ConnDef::Cell(TcpVc& vc) { return vc.state; }
uint64_t ConnDef::IdOf(const TcpVc& vc) { return static_cast<uint64_t>(vc.peer); }

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
  if (listen_fd_ < 0) return absl::InternalError(absl::StrCat("tcp: socket: ", std::strerror(errno)));
  const int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr = bind_to;
  a.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0 || ::listen(listen_fd_, 256) != 0) {
    return absl::UnavailableError(absl::StrFormat("tcp: rank %d cannot listen on %s: %s", rank_, Ipv4(bind_to),
                                                  std::strerror(errno)));
  }
  socklen_t len = sizeof(a);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  Watch(listen_fd_, EPOLLIN, Tag(kTagListen, 0));
  host_key_ = HostKey();
  net_key_ = NetKey();
  std::vector<std::string> addrs;
  for (const Iface& f : ifaces) addrs.push_back(absl::StrCat(Ipv4(f.addr), "/", Ipv4(f.mask)));
  const std::string record =
      absl::StrCat(::getpid(), ";", host_key_, ";", net_key_, ";", port_, ";", absl::StrJoin(addrs, ","));
  CARTAGE_RETURN_IF_ERROR(exchange_->Put(absl::StrCat("tcp.", rank_), record));
  return exchange_->Fence();
}

absl::StatusOr<const PeerRecord*> TcpMethod::Record(int peer) {
  std::optional<PeerRecord>& r = records_[static_cast<std::size_t>(peer)];
  if (!r.has_value()) {
    CARTAGE_ASSIGN_OR_RETURN(std::string text, exchange_->Get(absl::StrCat("tcp.", peer)));
    CARTAGE_ASSIGN_OR_RETURN(r, ParseRecord(peer, text));
  }
  return &*r;
}

absl::StatusOr<sockaddr_in> TcpMethod::AddressOf(int peer) {
  CARTAGE_ASSIGN_OR_RETURN(const PeerRecord* r, Record(peer));
  const bool same_net = r->net_key == net_key_;
  const std::pair<in_addr, in_addr>* pick = nullptr;
  if (same_net) {  // one network namespace: loopback if it listens there
    for (const auto& a : r->addrs) {
      if (IsLoopback(a.first)) pick = &a;
    }
  }
  const std::vector<Iface> mine = Interfaces();
  for (const auto& a : r->addrs) {  // else an address on a subnet we share
    if (pick != nullptr) break;
    if (IsLoopback(a.first)) continue;
    for (const Iface& f : mine) {
      if (!f.loopback && (f.addr.s_addr & f.mask.s_addr) == (a.first.s_addr & f.mask.s_addr)) pick = &a;
    }
  }
  for (const auto& a : r->addrs) {  // else any address that is not loopback
    if (pick == nullptr && (same_net || !IsLoopback(a.first))) pick = &a;
  }
  if (pick == nullptr) {
    return absl::UnavailableError(absl::StrFormat("tcp: rank %d published no address this rank can reach", peer));
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr = pick->first;
  sa.sin_port = htons(static_cast<uint16_t>(r->port));
  addresses_[static_cast<std::size_t>(peer)] = sa;
  return sa;
}

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

void TcpMethod::DropConnection(TcpVc& vc) {
  CloseFd(vc.fd);
  vc.fd = -1;
}

// The connection actions (tcp_conn_fsm.h).

namespace {
// An action that finds the connection unusable raises `lost` (run to completion).
void RaiseLost(TcpVc& vc, fsm::Step<TcpVc, ConnSignal>& step, absl::Status why) {
  ConnSignal lost;
  lost.error = std::move(why);
  step.Raise<ConnMachine>(vc, ConnEvent::kLost, lost);
}
}  // namespace

bool ConnActions::PeerWins(const TcpVc& vc, const ConnSignal&) { return vc.peer < vc.method->rank_; }

void ConnActions::StartConnect(TcpVc& vc, const ConnSignal&, fsm::Step<TcpVc, ConnSignal>& step) {
  TcpMethod& m = *vc.method;
  absl::StatusOr<sockaddr_in> to = m.AddressOf(vc.peer);
  if (!to.ok()) return RaiseLost(vc, step, to.status());
  vc.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (vc.fd >= 0) ::setsockopt(vc.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (vc.fd < 0 || (::connect(vc.fd, reinterpret_cast<const sockaddr*>(&*to), sizeof(*to)) != 0 &&
                    errno != EINPROGRESS)) {
    return RaiseLost(vc, step,
                     absl::UnavailableError(absl::StrFormat("tcp: connecting to rank %d at %s:%d: %s", vc.peer,
                                                            Ipv4(to->sin_addr), ntohs(to->sin_port), std::strerror(errno))));
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
    return RaiseLost(vc, step,
                     absl::UnavailableError(absl::StrFormat("tcp: greeting rank %d: %s", vc.peer, std::strerror(errno))));
  }
  m.Watch(vc.fd, EPOLLIN, Tag(kTagVc, static_cast<uint64_t>(vc.peer)));
}

void ConnActions::Adopt(TcpVc& vc, const ConnSignal& s, fsm::Step<TcpVc, ConnSignal>& step) {
  vc.fd = s.fd;
  const HelloReply reply{kHelloMagic, kWelcome};
  if (!SendSmall(vc.fd, &reply, sizeof(reply))) {
    return RaiseLost(vc, step,
                     absl::UnavailableError(absl::StrFormat("tcp: answering rank %d: %s", vc.peer, std::strerror(errno))));
  }
  vc.method->Watch(vc.fd, EPOLLIN, Tag(kTagVc, static_cast<uint64_t>(vc.peer)));
  vc.method->BecomeConnected(vc);
}

void ConnActions::DropOwnAndAdopt(TcpVc& vc, const ConnSignal& s, fsm::Step<TcpVc, ConnSignal>& step) {
  vc.method->DropConnection(vc);
  Adopt(vc, s, step);
}

void ConnActions::Refuse(TcpVc& vc, const ConnSignal& s, fsm::Step<TcpVc, ConnSignal>&) {
  const HelloReply reply{kHelloMagic, kDuplicate};
  (void)SendSmall(s.fd, &reply, sizeof(reply));
  vc.method->CloseFd(s.fd);
}

void ConnActions::Welcomed(TcpVc& vc, const ConnSignal&, fsm::Step<TcpVc, ConnSignal>&) {
  vc.method->BecomeConnected(vc);
}

void ConnActions::DropOwn(TcpVc& vc, const ConnSignal&, fsm::Step<TcpVc, ConnSignal>&) {
  vc.method->DropConnection(vc);
}

void ConnActions::Fail(TcpVc& vc, const ConnSignal& s, fsm::Step<TcpVc, ConnSignal>&) {
  vc.method->DropConnection(vc);
  vc.error = s.error.ok() ? absl::UnavailableError(absl::StrFormat("tcp: connection to rank %d lost", vc.peer))
                          : s.error;
  SwapOps(vc.ops, TcpMethod::kFailingOps);
}

void ConnActions::Shut(TcpVc& vc, const ConnSignal&, fsm::Step<TcpVc, ConnSignal>&) {
  vc.method->DropConnection(vc);
  vc.error = absl::FailedPreconditionError(absl::StrFormat("tcp: the VC to rank %d is closed (finalized)", vc.peer));
  SwapOps(vc.ops, TcpMethod::kFailingOps);
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
                                                      std::strerror(err != 0 ? err : ECONNREFUSED))));
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
  if (vc.reply.magic != kHelloMagic || (vc.reply.verdict != kWelcome && vc.reply.verdict != kDuplicate)) {
    Lost(vc, absl::PermissionDeniedError(absl::StrFormat(
                 "tcp: rank %d refused the connection (job key or wire version differ; see its log)", vc.peer)));
  } else if (vc.reply.verdict == kWelcome) {
    Conn(vc, ConnEvent::kWelcome);
  } else {
    Conn(vc, ConnEvent::kDuplicate);
  }
}

}  // namespace cartage::methods::tcp
