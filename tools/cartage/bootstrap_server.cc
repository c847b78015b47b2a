#include "tools/cartage/bootstrap_server.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "agent/bootstrap_wire.h"

namespace cartage::tools {

namespace wire = agent::bootstrap;

absl::StatusOr<std::unique_ptr<BootstrapServer>> BootstrapServer::Create(int size,
                                                                         std::string job_key) {
  auto s = std::unique_ptr<BootstrapServer>(new BootstrapServer(size, std::move(job_key)));
  std::string dir = (std::filesystem::temp_directory_path() / "cartage-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) {
    return absl::InternalError(absl::StrFormat("cartage run: mkdtemp: %s", std::strerror(errno)));
  }
  s->dir_ = dir;
  s->socket_path_ = dir + "/bootstrap.sock";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (s->socket_path_.size() >= sizeof(addr.sun_path)) {
    return absl::InternalError("cartage run: temporary directory path too long for a socket");
  }
  std::strcpy(addr.sun_path, s->socket_path_.c_str());
  s->listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (s->listen_fd_ < 0 ||
      ::bind(s->listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(s->listen_fd_, size + 8) != 0) {
    return absl::InternalError(
        absl::StrFormat("cartage run: bootstrap socket %s: %s", s->socket_path_, std::strerror(errno)));
  }
  return s;
}

BootstrapServer::~BootstrapServer() {
  for (auto& c : clients_) {
    if (c->fd >= 0) ::close(c->fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (!dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
}

void BootstrapServer::AddPollFds(std::vector<pollfd>& fds) const {
  fds.push_back({listen_fd_, POLLIN, 0});
  for (const auto& c : clients_) {
    if (c->fd >= 0) fds.push_back({c->fd, POLLIN, 0});
  }
}

void BootstrapServer::OnReady(int fd, short revents) {
  if (fd == listen_fd_) {
    Accept();
    return;
  }
  for (auto& c : clients_) {
    if (c->fd != fd) continue;
    if ((revents & (POLLIN | POLLHUP | POLLERR)) == 0) return;
    char buf[8192];
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (n <= 0) {
      // A rank closing its connection is normal at exit; a fence it was in stays counted.
      ::close(c->fd);
      c->fd = -1;
      return;
    }
    c->inbox.append(buf, static_cast<std::size_t>(n));
    if (c->inbox.size() > wire::kMaxLine && c->inbox.find('\n') == std::string::npos) {
      Drop(*c, "request line too long");
      return;
    }
    Serve(*c);
    return;
  }
}

void BootstrapServer::Accept() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    auto c = std::make_unique<Client>();
    c->fd = fd;
    clients_.push_back(std::move(c));
  }
}

void BootstrapServer::Reply(Client& c, const std::string& line) {
  std::string out = line + "\n";
  std::size_t off = 0;
  while (off < out.size() && c.fd >= 0) {
    const ssize_t n = ::write(c.fd, out.data() + off, out.size() - off);
    if (n > 0) {
      off += static_cast<std::size_t>(n);
    } else if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      pollfd p{c.fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
    } else {
      ::close(c.fd);
      c.fd = -1;
    }
  }
}

void BootstrapServer::Drop(Client& c, const std::string& why) {
  const std::string who = c.rank < 0 ? "before HELLO" : absl::StrCat("rank ", c.rank);
  std::fprintf(stderr, "cartage run: bootstrap: dropping a connection (%s): %s\n", who.c_str(),
               why.c_str());
  Reply(c, "ERR " + why);
  if (c.fd >= 0) ::close(c.fd);
  c.fd = -1;
}

void BootstrapServer::Serve(Client& c) {
  std::size_t nl;
  while (c.fd >= 0 && (nl = c.inbox.find('\n')) != std::string::npos) {
    const std::string line = c.inbox.substr(0, nl);
    c.inbox.erase(0, nl + 1);
    std::vector<std::string> w = absl::StrSplit(line, ' ');
    if (c.rank < 0) {
      int rank = -1;
      if (w.size() != 3 || w[0] != "HELLO" || !absl::SimpleAtoi(w[1], &rank) || rank < 0 ||
          rank >= size_) {
        Drop(c, "expected HELLO <rank> <job key>");
      } else if (w[2] != job_key_) {
        Drop(c, absl::StrFormat("wrong job key for rank %d", rank));
      } else {
        c.rank = rank;
        Reply(c, "OK");
      }
    } else if (w.size() == 1 && w[0] == "BYE") {
      c.bye = true;
    } else if (w.size() == 3 && w[0] == "PUT" && wire::ValidKey(w[1]) && w[2].size() % 2 == 0) {
      values_[w[1]] = w[2];
      Reply(c, "OK");
    } else if (w.size() == 2 && w[0] == "GET" && wire::ValidKey(w[1])) {
      auto it = values_.find(w[1]);
      Reply(c, it == values_.end() ? std::string("NONE") : "VAL " + it->second);
    } else if (w.size() == 1 && w[0] == "FENCE" && !fence_error_.empty()) {
      Reply(c, "ERR " + fence_error_);
    } else if (w.size() == 1 && w[0] == "FENCE" && !c.fenced) {
      c.fenced = true;
      if (++fenced_ == size_) {
        fenced_ = 0;
        for (auto& other : clients_) {
          if (other->fenced) {
            other->fenced = false;
            Reply(*other, "OK");
          }
        }
      }
    } else {
      Drop(c, absl::StrFormat("malformed request '%s'", line.substr(0, 60)));
    }
  }
}

void BootstrapServer::RankExited(int rank) {
  if (!fence_error_.empty()) return;
  fence_error_ = absl::StrFormat("rank %d exited; the fence cannot complete", rank);
  for (auto& c : clients_) {
    if (c->fenced) {
      c->fenced = false;
      Reply(*c, "ERR " + fence_error_);
    }
  }
  fenced_ = 0;
}

void BootstrapServer::Drain(int rank) {
  for (auto& c : clients_) {
    if (c->rank != rank) continue;
    while (c->fd >= 0) {
      char buf[8192];
      const ssize_t n = ::read(c->fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;  // its end closed (or nothing more)
      c->inbox.append(buf, static_cast<std::size_t>(n));
      Serve(*c);
    }
  }
}

bool BootstrapServer::LeftWithoutBye(int rank) const {
  bool greeted = false;
  for (const auto& c : clients_) {
    if (c->rank != rank) continue;
    if (c->bye) return false;
    greeted = true;
  }
  return greeted;
}

}  // namespace cartage::tools
