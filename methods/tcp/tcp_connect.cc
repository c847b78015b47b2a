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

fsm::StateWord& ConnDef::Cell(TcpConn& conn) { return conn.state; }
// The peer, and above it the lane: each lane's instance has its own connection to the peer.
uint64_t ConnDef::IdOf(const TcpConn& conn) {
  return static_cast<uint64_t>(conn.peer) | static_cast<uint64_t>(conn.method->lane()) << 32;
}
void ConnDef::Subject(const TcpConn& conn, const ConnSignal&, fsm::TraceRecord& r) { r.peer = conn.peer; }

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
  CARTAGE_RETURN_IF_ERROR(exchange_->Fence());
  // Every record now, while the launcher serves: connections stay lazy, but
  // PeerGone watches any peer's pid without asking the launcher, which may
  // be stopped by then. One that does not parse is named when it is used.
  for (int p = 0; p < size_; ++p) {
    if (p != rank_) (void)Record(p);
  }
  return absl::OkStatus();
}

absl::StatusOr<const PeerRecord*> TcpMethod::Record(int peer) {
  std::optional<PeerRecord>& r = records_[static_cast<std::size_t>(peer)];
  if (!r.has_value()) {
    CARTAGE_ASSIGN_OR_RETURN(std::string text, exchange_->GetFrom(peer, absl::StrCat("tcp.", peer)));
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

void TcpMethod::WatchVc(TcpConn& conn, uint32_t events) {
  Watch(conn.fd, events, Tag(kTagVc, static_cast<uint64_t>(conn.peer)));
}

void TcpMethod::CloseFd(int fd) {
  if (fd < 0) return;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
}

void TcpMethod::DropConnection(TcpConn& conn) {
  CloseFd(conn.fd);
  conn.fd = -1;
}

// The connection actions (tcp_conn_fsm.h).

namespace {
// An action that finds the connection unusable raises `lost` (run to completion).
void RaiseLost(TcpConn& conn, fsm::EventQueue<TcpConn, ConnSignal>& events, absl::Status why) {
  ConnSignal lost;
  lost.error = std::move(why);
  events.Raise<ConnMachine>(conn, ConnEvent::kLost, lost);
}
}  // namespace

bool ConnActions::PeerWins(const TcpConn& conn, const ConnSignal&) { return conn.peer < conn.method->rank_; }

void ConnActions::StartConnect(TcpConn& conn, const ConnSignal&, fsm::EventQueue<TcpConn, ConnSignal>& events) {
  TcpMethod& m = *conn.method;
  absl::StatusOr<sockaddr_in> to = m.AddressOf(conn.peer);
  if (!to.ok()) return RaiseLost(conn, events, to.status());
  conn.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (conn.fd >= 0) ::setsockopt(conn.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  if (conn.fd < 0 || (::connect(conn.fd, reinterpret_cast<const sockaddr*>(&*to), sizeof(*to)) != 0 &&
                    errno != EINPROGRESS)) {
    return RaiseLost(conn, events,
                     absl::UnavailableError(absl::StrFormat("tcp: connecting to rank %d at %s:%d: %s", conn.peer,
                                                            Ipv4(to->sin_addr), ntohs(to->sin_port), std::strerror(errno))));
  }
  m.WatchVc(conn, EPOLLOUT);
}

void ConnActions::SendHello(TcpConn& conn, const ConnSignal&, fsm::EventQueue<TcpConn, ConnSignal>& events) {
  TcpMethod& m = *conn.method;
  Hello hello{};
  hello.magic = kHelloMagic;
  hello.version = kWireVersion;
  hello.key_len = static_cast<uint16_t>(m.job_key_.size());
  hello.rank = m.rank_;
  hello.size = m.size_;
  std::memcpy(hello.key, m.job_key_.data(), m.job_key_.size());
  conn.reply_got = 0;
  if (!SendSmall(conn.fd, &hello, sizeof(hello))) {
    return RaiseLost(conn, events,
                     absl::UnavailableError(absl::StrFormat("tcp: greeting rank %d: %s", conn.peer, std::strerror(errno))));
  }
  m.WatchVc(conn, EPOLLIN);
}

void ConnActions::Adopt(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>& events) {
  conn.fd = s.fd;
  const HelloReply reply{kHelloMagic, kWelcome};
  if (!SendSmall(conn.fd, &reply, sizeof(reply))) {
    return RaiseLost(conn, events,
                     absl::UnavailableError(absl::StrFormat("tcp: answering rank %d: %s", conn.peer, std::strerror(errno))));
  }
  conn.method->WatchVc(conn, EPOLLIN);
  conn.method->BecomeConnected(conn);
}

void ConnActions::DropOwnAndAdopt(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>& events) {
  conn.method->DropConnection(conn);
  Adopt(conn, s, events);
}

void ConnActions::Refuse(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>&) {
  const HelloReply reply{kHelloMagic, kDuplicate};
  (void)SendSmall(s.fd, &reply, sizeof(reply));
  conn.method->CloseFd(s.fd);
}

void ConnActions::Welcomed(TcpConn& conn, const ConnSignal&, fsm::EventQueue<TcpConn, ConnSignal>&) {
  conn.method->BecomeConnected(conn);
}

void ConnActions::DropOwn(TcpConn& conn, const ConnSignal&, fsm::EventQueue<TcpConn, ConnSignal>&) {
  conn.method->DropConnection(conn);
}

void ConnActions::Fail(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>&) {
  conn.method->DropConnection(conn);
  conn.error = s.error.ok() ? absl::UnavailableError(absl::StrFormat("tcp: connection to rank %d lost", conn.peer))
                          : s.error;
  SwapOps(conn.vc, TcpMethod::kFailingOps);
}

void ConnActions::FailCars(TcpConn& conn, const ConnSignal&, fsm::EventQueue<TcpConn, ConnSignal>&) {
  conn.method->FailCars(conn);
}

void ConnActions::Shut(TcpConn& conn, const ConnSignal&, fsm::EventQueue<TcpConn, ConnSignal>&) {
  conn.method->DropConnection(conn);
  conn.error = absl::FailedPreconditionError(absl::StrFormat("tcp: the VC to rank %d is closed (finalized)", conn.peer));
  SwapOps(conn.vc, TcpMethod::kFailingOps);
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
      case kWakeTag >> 32: DrainWake(); break;
      case kTagVc: {
        if (id >= conns_.size()) break;
        TcpConn& conn = conns_[id];
        const ConnState s = ConnMachine::StateOf(conn);
        if (s == ConnState::kConnected) {
          work += PumpRx(conn);
        } else if (s == ConnState::kConnecting || s == ConnState::kHelloSent) {
          OnConnecting(conn, evs[k].events);
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
  if (n <= 0 && p.got == 0) {
    // A connect the other side gave up before greeting: the losing half of
    // two ranks connecting to each other at once, as designed; nothing to say.
    CloseFd(p.fd);
    pending_.erase(it);
    return;
  }
  if (n <= 0) {
    refuse = "closed part-way through its greeting";
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
  const int accepted = p.fd;
  const int claimed = p.hello.rank;
  const std::string from = p.from;
  pending_.erase(it);
  if (!refuse.empty()) {
    std::fprintf(stderr, "cartage tcp (rank %d): refused a connection from %s: %s\n", rank_, from.c_str(),
                 refuse.c_str());
    const HelloReply reply{kHelloMagic, kRefused};
    if (n > 0) (void)SendSmall(accepted, &reply, sizeof(reply));
    CloseFd(accepted);
    return;
  }
  if (ConnMachine::IsFinal(conn(claimed)) || ConnMachine::StateOf(conn(claimed)) == ConnState::kFailing) {
    // failing, in error or closed: nothing to adopt it
    CloseFd(accepted);
    return;
  }
  ConnSignal s;
  s.fd = accepted;
  Conn(conn(claimed), ConnEvent::kAccepted, s);  // adopted, or refused as a duplicate and closed
}

void TcpMethod::OnConnecting(TcpConn& conn, uint32_t events) {
  if (ConnMachine::StateOf(conn) == ConnState::kConnecting) {
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(conn.fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err == 0 && (events & EPOLLOUT) != 0) {
      Conn(conn, ConnEvent::kConnectDone);
    } else if (err != 0 || (events & (EPOLLERR | EPOLLHUP)) != 0) {
      const sockaddr_in& a = addresses_[static_cast<std::size_t>(conn.peer)];
      Lost(conn, absl::UnavailableError(absl::StrFormat("tcp: connecting to rank %d at %s:%d: %s", conn.peer,
                                                      Ipv4(a.sin_addr), ntohs(a.sin_port),
                                                      std::strerror(err != 0 ? err : ECONNREFUSED))));
    }
    return;
  }
  // hello_sent: the reply, exactly its bytes (frames may follow it).
  const ssize_t n = ::recv(conn.fd, reinterpret_cast<char*>(&conn.reply) + conn.reply_got, sizeof(HelloReply) - conn.reply_got,
                           MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
  if (n <= 0) {
    // The peer closed our connection: it kept its own (a duplicate it will
    // use) or went away. Wait for its connection if it is alive.
    if (PeerGone(conn.peer)) {
      Lost(conn, absl::UnavailableError(absl::StrFormat("rank %d exited or finalized (tcp: connection closed)", conn.peer)));
    } else {
      Conn(conn, ConnEvent::kDuplicate);
    }
    return;
  }
  conn.reply_got += static_cast<std::size_t>(n);
  if (conn.reply_got < sizeof(HelloReply)) return;
  if (conn.reply.magic != kHelloMagic || (conn.reply.verdict != kWelcome && conn.reply.verdict != kDuplicate)) {
    Lost(conn, absl::PermissionDeniedError(absl::StrFormat(
                 "tcp: rank %d refused the connection (job key or wire version differ; see its log)", conn.peer)));
  } else if (conn.reply.verdict == kWelcome) {
    Conn(conn, ConnEvent::kWelcome);
  } else {
    Conn(conn, ConnEvent::kDuplicate);
  }
}

}  // namespace cartage::methods::tcp
