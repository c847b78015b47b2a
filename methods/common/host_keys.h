// Who can see whose processes: a host key (boot id and pid namespace) says
// whether a peer's pid means anything here, a net key (boot id and network
// namespace) whether loopback reaches it. Methods publish them beside their
// addresses so that a peer that exits before any connection is noticed by
// pid (tcp, ofi).
#ifndef CARTAGE_METHODS_COMMON_HOST_KEYS_H_
#define CARTAGE_METHODS_COMMON_HOST_KEYS_H_

#include <signal.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <fstream>
#include <string>

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
inline std::string HostKey() {
  return absl::StrCat(ReadFirstLine("/proc/sys/kernel/random/boot_id"), ":", InodeOf("/proc/self/ns/pid"));
}
// Equal for two processes in one network namespace.
inline std::string NetKey() {
  return absl::StrCat(ReadFirstLine("/proc/sys/kernel/random/boot_id"), ":", InodeOf("/proc/self/ns/net"));
}

// Whether process `pid`, which this process can see (same host key), is gone.
inline bool ProcessGone(int pid) { return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH; }

}  // namespace cartage::methods

#endif  // CARTAGE_METHODS_COMMON_HOST_KEYS_H_
