// How a waiting rank spends its time (seed 002's wait): it runs rounds of
// progress while there is work, spins idle rounds for a while, then yields
// its CPU, then blocks on what its methods can wake it with. Ranks that
// outnumber the CPUs spin far less, since the peer they wait for needs the
// CPU they spin on. CARTAGE_WAIT_SPIN and CARTAGE_WAIT_YIELD_US override the
// first two stages.
#ifndef CARTAGE_AGENT_WAIT_POLICY_H_
#define CARTAGE_AGENT_WAIT_POLICY_H_

#include <sched.h>

#include <chrono>

#include "absl/status/statusor.h"

namespace cartage::agent {

struct WaitPolicy {
  int spin_rounds = 2000;  // idle progress rounds before yielding
  // After this many idle rounds (0: never) a waiter asks its methods how
  // many ranks share its CPU and, if three or more, yields at once instead
  // of spinning on to spin_rounds.
  int crowded_cpu_spin = 0;
  std::chrono::microseconds yield_for{2000};  // then yield this long
  int block_us = 1000;                        // then block this long at a time
  std::chrono::milliseconds peer_check{50};   // how often a waiter checks for dead peers

  // The policy for a job that is oversubscribed (ranks outnumber CPUs) or
  // crowded (three or more ranks a CPU), with the environment's overrides.
  static absl::StatusOr<WaitPolicy> ForJob(bool oversubscribed, bool crowded);
};

// Waits until `done()` holds: `round()` is one round of progress (it
// returns the work done), `crowded_cpu()` whether three or more ranks share
// this CPU now, `block(us)` sleeps on the methods' wake-ups, and
// `check_peers()` looks for dead peers (every `peer_check`).
template <class Done, class Round, class CrowdedCpu, class Block, class CheckPeers>
void WaitUntil(const WaitPolicy& policy, Done done, Round round, CrowdedCpu crowded_cpu, Block block,
               CheckPeers check_peers, std::chrono::steady_clock::time_point& last_peer_check) {
  using Clock = std::chrono::steady_clock;
  int idle = 0;
  Clock::time_point idle_since{};
  while (!done()) {
    if (round() > 0) {
      idle = 0;
      continue;
    }
    if (++idle < policy.spin_rounds) {
      if (idle != policy.crowded_cpu_spin || !crowded_cpu()) {
        // Polling with nothing to do for a while: let an SMT sibling (perhaps
        // the peer copying our data) have the core's pipeline. Not at first,
        // so that a message arriving right away is seen at once.
        if (idle > 64) __builtin_ia32_pause();
        continue;
      }
      idle = policy.spin_rounds;  // three or more ranks on this CPU: yield now
    }
    const Clock::time_point now = Clock::now();
    if (idle == policy.spin_rounds) idle_since = now;
    if (now - idle_since < policy.yield_for) {
      sched_yield();
    } else {
      block(policy.block_us);
    }
    if (now - last_peer_check > policy.peer_check) {
      last_peer_check = now;
      check_peers();
    }
  }
}

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_WAIT_POLICY_H_
