// Who can see whose processes: a host key (boot id and pid namespace) says
// whether a peer's pid means anything here, a net key (boot id and network
// namespace) whether loopback reaches it. Methods publish them beside their
// addresses so that a peer that exits before any connection is noticed by
// pid (tcp, ofi).
#ifndef CARTAGE_METHODS_COMMON_HOST_KEYS_H_
#define CARTAGE_METHODS_COMMON_HOST_KEYS_H_

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/process_watch.h"

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

// Peers are watched for death through base/process_watch.h.
using base::ProcessGone;
using base::ProcessWatch;

}  // namespace cartage::methods

#endif  // CARTAGE_METHODS_COMMON_HOST_KEYS_H_
