// The bootstrap protocol between `cartage run` and its ranks: one Unix stream
// socket per rank, one request per line, values hex-encoded.
//
//   rank -> launcher            launcher -> rank
//   HELLO <rank> <job key>      OK | ERR <why>
//   PUT <key> <hex value>       OK | ERR <why>
//   FENCE                       OK (once every rank has fenced) | ERR <why>
//   GET <key>                   VAL <hex value> | NONE
//   BYE                         (none: the rank finalized, and closes)
//
// A rank that said HELLO and exits without BYE ended without finalizing
// (its Agent was never destroyed): the launcher says so and fails the job.
// Keys are one word of [A-Za-z0-9_.:/-]; the launcher refuses anything else.
#ifndef CARTAGE_AGENT_BOOTSTRAP_WIRE_H_
#define CARTAGE_AGENT_BOOTSTRAP_WIRE_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace cartage::agent::bootstrap {

// Environment the launcher gives every rank.
inline constexpr char kEnvRank[] = "CARTAGE_RANK";
inline constexpr char kEnvSize[] = "CARTAGE_SIZE";
inline constexpr char kEnvSocket[] = "CARTAGE_BOOTSTRAP_SOCKET";
// Which exchange a rank opens (OpenJobExchange); unset or "auto": the
// launcher's own, as its environment shows.
inline constexpr char kEnvChoice[] = "CARTAGE_BOOTSTRAP";
inline constexpr char kEnvJobKey[] = "CARTAGE_JOB_KEY";
inline constexpr char kEnvJobId[] = "CARTAGE_JOB_ID";
// With `cartage run --hosts`: the rank's host, and every rank's placement
// in PMI_process_mapping's form ("(vector,(0,1,2),(1,1,2))").
inline constexpr char kEnvHost[] = "CARTAGE_HOST";
inline constexpr char kEnvMapping[] = "CARTAGE_PROCESS_MAPPING";

// Longest line either side accepts (a value of 32 KiB, hex-encoded, plus the key).
inline constexpr std::size_t kMaxLine = 64 * 1024 + 256;

// Whether `key` may be used as a bootstrap key.
inline bool ValidKey(absl::string_view key) {
  if (key.empty() || key.size() > 200) return false;
  for (char c : key) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == ':' || c == '/' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace cartage::agent::bootstrap

#endif  // CARTAGE_AGENT_BOOTSTRAP_WIRE_H_
