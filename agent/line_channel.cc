#include "agent/line_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/check.h"
#include "methods/host.h"

namespace cartage::agent {

namespace {

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrFormat("bootstrap: %s: %s", what, std::strerror(errno)));
}

}  // namespace

LineChannel::~LineChannel() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status LineChannel::Write(absl::string_view line) { return WriteBytes(absl::StrCat(line, "\n")); }

absl::Status LineChannel::WriteBytes(absl::string_view data) {
  absl::string_view rest = data;
  while (!rest.empty()) {
    const ssize_t n = ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno(absl::StrCat("writing to ", who_));
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status LineChannel::Fill(absl::string_view what, int rank, absl::FunctionRef<int()> progress) {
  if (inbox_.size() > max_line_) {
    return absl::DataLossError(absl::StrFormat("bootstrap %s (rank %d): %s's reply is too long", what, rank, who_));
  }
  for (;;) {
    const int work = progress();
    if (work == methods::Exchange::kFenceCannotComplete) {
      return absl::AbortedError(absl::StrFormat("bootstrap %s (rank %d): abandoned, a rank is gone", what, rank));
    }
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, work < 0 ? -1 : work == 0 ? 1 : 0);
    if (ready < 0 && errno != EINTR) return Errno(absl::StrCat(what, ": waiting for ", who_));
    if (ready <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fd_, buf, sizeof(buf));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return Errno(absl::StrCat(what, ": reading from ", who_));
    if (n == 0) {
      return absl::UnavailableError(
          absl::StrFormat("bootstrap %s (rank %d): %s closed the connection", what, rank, who_));
    }
    inbox_.append(buf, static_cast<std::size_t>(n));
    return absl::OkStatus();
  }
}

absl::StatusOr<std::string> LineChannel::Read(absl::string_view what, int rank, absl::FunctionRef<int()> progress) {
  std::size_t nl;
  while ((nl = inbox_.find('\n')) == std::string::npos) CARTAGE_RETURN_IF_ERROR(Fill(what, rank, progress));
  std::string line = inbox_.substr(0, nl);
  inbox_.erase(0, nl + 1);
  return line;
}

absl::StatusOr<std::string> LineChannel::ReadBytes(std::size_t n, absl::string_view what, int rank,
                                                   absl::FunctionRef<int()> progress) {
  if (n > max_line_) {
    return absl::DataLossError(
        absl::StrFormat("bootstrap %s (rank %d): %s announced a reply of %d bytes", what, rank, who_, n));
  }
  while (inbox_.size() < n) CARTAGE_RETURN_IF_ERROR(Fill(what, rank, progress));
  std::string bytes = inbox_.substr(0, n);
  inbox_.erase(0, n);
  return bytes;
}

void LineChannel::WriteAndClose(absl::string_view line) {
  if (fd_ < 0) return;
  const std::string data = absl::StrCat(line, "\n");
  (void)!::send(fd_, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::close(std::exchange(fd_, -1));
}

}  // namespace cartage::agent
