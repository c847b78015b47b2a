#include "agent/wait_policy.h"

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace cartage::agent {

absl::StatusOr<WaitPolicy> WaitPolicy::ForJob(bool oversubscribed, bool crowded) {
  WaitPolicy p;
  // Oversubscribed: yield almost at once; crowded, sooner still, since an
  // idle round there is mostly spent while the peer waits for this CPU. At
  // 4 ranks on 2 CPUs the short spin pays only where three share this
  // rank's CPU, so it is asked then (cartage-bench barrier, allreduce and
  // alltoall of 8 bytes at 4 and 8 ranks).
  constexpr int kCrowdedSpin = 4;
  if (oversubscribed) {
    p.spin_rounds = crowded ? kCrowdedSpin : 20;
    if (!crowded) p.crowded_cpu_spin = kCrowdedSpin;
  }
  if (const char* v = std::getenv("CARTAGE_WAIT_SPIN")) {
    p.crowded_cpu_spin = 0;  // a spin the user sets holds everywhere
    if (!absl::SimpleAtoi(v, &p.spin_rounds) || p.spin_rounds < 1) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_WAIT_SPIN=%s: need a count >= 1", v));
    }
  }
  if (const char* v = std::getenv("CARTAGE_WAIT_YIELD_US")) {
    int us = 0;
    if (!absl::SimpleAtoi(v, &us) || us < 0) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_WAIT_YIELD_US=%s: need microseconds >= 0", v));
    }
    p.yield_for = std::chrono::microseconds(us);
  }
  return p;
}

}  // namespace cartage::agent
