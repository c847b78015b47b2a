// The agent's thread level, progress thread and lanes, as the program and
// the environment ask for them (CARTAGE_THREADS, CARTAGE_PROGRESS_THREAD,
// CARTAGE_LANES).
#ifndef CARTAGE_AGENT_THREADS_H_
#define CARTAGE_AGENT_THREADS_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cartage/cartage.h"

namespace cartage::agent {

struct Threading {
  ThreadLevel level = ThreadLevel::kSingle;
  bool progress_thread = false;
  int lanes = 1;
};

// The most lanes an agent runs: each opens every method again.
inline constexpr int kMaxLanes = 64;

// "single", "funneled", "serialized" or "multiple".
absl::StatusOr<ThreadLevel> ParseThreadLevel(absl::string_view text);
// What `options` asks, the environment filling in what it leaves unset.
absl::StatusOr<Threading> ResolveThreading(const AgentOptions& options);

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_THREADS_H_
