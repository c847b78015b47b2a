// Who can see whose processes: a host key (boot id and pid namespace) says
// whether a peer's pid means anything here, a net key (boot id and network
// namespace) whether loopback reaches it. Methods publish them beside their
// addresses so that a peer that exits before any connection is noticed by
// pid (tcp, ofi).
#ifndef CARTAGE_METHODS_COMMON_HOST_KEYS_H_
#define CARTAGE_METHODS_COMMON_HOST_KEYS_H_

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace cartage::methods {

inline std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

inline uint64_t InodeOf(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
}

// Equal for two processes that see each other's pids.
// CARTAGE_HOST_TAG, where set, joins it: ranks with different tags count as
// on different hosts, which runs the multi-host paths on one machine.
inline std::string HostKey() {
  const char* tag = std::getenv("CARTAGE_HOST_TAG");
  return absl::StrCat(ReadFirstLine("/proc/sys/kernel/random/boot_id"), ":", InodeOf("/proc/self/ns/pid"),
                      tag != nullptr ? ":" : "", tag != nullptr ? tag : "");
}
// Equal for two processes in one network namespace.
inline std::string NetKey() {
  return absl::StrCat(ReadFirstLine("/proc/sys/kernel/random/boot_id"), ":", InodeOf("/proc/self/ns/net"));
}

// Whether process `pid`, which this process can see (same host key), is
// gone: no such process, or a zombie nobody reaped (its launcher stopped).
inline bool ProcessGone(int pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  // kill(2) succeeds on a zombie; its state in /proc/PID/stat does not.
  const std::string stat = ReadFirstLine(absl::StrCat("/proc/", pid, "/stat").c_str());
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return stat.empty();
  const char state = stat[close + 2];
  return state == 'Z' || state == 'X';
}

// The peer processes this rank can see, each watched through a pidfd,
// opened at the first look: readable once the process ended, reaped or not,
// and never mistaken for a later process that reuses the pid. Where pidfds
// are not to be had (an old kernel, out of descriptors), ProcessGone.
class ProcessWatch {
 public:
  ProcessWatch() = default;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;
  ~ProcessWatch() {
    for (const auto& [pid, fd] : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }

  bool Gone(int pid) {
    if (pid <= 0) return false;
    auto it = fds_.find(pid);
    if (it == fds_.end()) {
      const long fd = ::syscall(SYS_pidfd_open, pid, 0);
      if (fd < 0 && errno == ESRCH) return true;
      it = fds_.emplace(pid, static_cast<int>(fd)).first;  // -1: watched by ProcessGone
    }
    if (it->second < 0) return ProcessGone(pid);
    pollfd p{it->second, POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  }

 private:
  absl::flat_hash_map<int, int> fds_;  // pid -> pidfd (-1: none)
};

}  // namespace cartage::methods

#endif  // CARTAGE_METHODS_COMMON_HOST_KEYS_H_
