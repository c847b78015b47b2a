// The conformance kit: the cases every method must pass, in one list. Each
// case is the rank side of a small job that checks exact bytes, ordering,
// statuses and error messages; `cartage kit` runs them as real processes
// under `cartage run` (for a built-in method, or one loaded from a plugin
// path), the tests also run most of them with ranks as threads of one
// process (kit_in_process_test), so that a failure stops at its assertion.
//
//   for (const kit::Case& c : kit::Cases()) ...      // the kit, in order
//   const kit::Case* c = kit::FindCase("order");     // also the extra modes
//   c->run(world, agent);                            // on every rank
#ifndef CARTAGE_KIT_CASES_H_
#define CARTAGE_KIT_CASES_H_

#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "cartage/cartage.h"

namespace cartage::kit {

struct Case {
  const char* name;
  int ranks;  // the job's size
  // Runs this rank's side; returns once the rank's part is done (rank 0
  // then prints "PASS <name>" in a rank process).
  void (*run)(const Comm& world, Agent& agent);
  // For a method that reaches only the rank itself (self): a one-rank job.
  bool one_rank;
  // Whether its ranks may be threads of one process (no rank exits or dies).
  bool in_process;
  // Whether a rank leaves without finalizing (the job then exits 1, its
  // launcher naming that rank).
  bool leaves;
  const char* checks;  // one line: what it checks
  // Whether its agent runs at ThreadLevel::kMultiple (threads of a rank
  // call at once); else at the default level.
  bool multiple;
};

// The smallest eager limit the kit passes with: its cases, like many
// programs, leave blocking sends of a few bytes for the receiver to take
// later, which a rendezvous send would wait on for ever.
inline constexpr uint64_t kMinEagerLimit = 8;

// The kit, in the order it runs: every case a method must pass.
absl::Span<const Case> Cases();
// A case of the kit, or one of the extra modes the project's own tests use
// (holdprobe: shm's held envelopes; killself); null for no such name.
const Case* FindCase(absl::string_view name);

// Rank 1 tells rank 0 it is ready (its receives are posted).
void Ready(const Comm& w, int tag);
// A byte pattern that differs per (seed, position).
void Fill(std::vector<unsigned char>& v, uint64_t seed);

// The cases (kit/cases_*.cc).
void Envelope(const Comm& w, Agent& a);
void Order(const Comm& w, Agent& a);
void Wildcard(const Comm& w, Agent& a);
void Unexpected(const Comm& w, Agent& a);
void AnyTagAnySource(const Comm& w, Agent& a);
void Sizes(const Comm& w, Agent& a);
void Truncation(const Comm& w, Agent& a);
void Cancel(const Comm& w, Agent& a);
void Ssend(const Comm& w, Agent& a);
void ProbeThenRecv(const Comm& w, Agent& a);
void HoldThenProbe(const Comm& w, Agent& a);
void DupIsolation(const Comm& w, Agent& a);
void BadArguments(const Comm& w, Agent& a);
void Persistent(const Comm& w, Agent& a);
void WaitVariants(const Comm& w, Agent& a);
void Split(const Comm& w, Agent& a);
void Self(const Comm& w, Agent& a);
void Datatypes(const Comm& w, Agent& a);
void Outstanding(const Comm& w, Agent& a);
void Exhaustion(const Comm& w, Agent& a);
void UnexpectedMemory(const Comm& w, Agent& a);
void UnexpectedCap(const Comm& w, Agent& a);
void FastSender(const Comm& w, Agent& a);
void StrangerKilled(const Comm& w, Agent& a);
void FinalizeDelivers(const Comm& w, Agent& a);
void Threads(const Comm& w, Agent& a);
// The threads case with `threads` threads a rank (2 ranks; the agent at
// ThreadLevel::kMultiple): what tests/thread_ranks.cc runs at 2 to 8.
void ThreadsOf(const Comm& w, Agent& a, int threads);
void FinalizeUnreceived(const Comm& w, Agent& a);
void EarlyExit(const Comm& w, Agent& a);
void PeerDies(const Comm& w, Agent& a);
void VcError(const Comm& w, Agent& a);
void KillSelf(const Comm& w, Agent& a);
void Segv(const Comm& w, Agent& a);
void Abort(const Comm& w, Agent& a);

}  // namespace cartage::kit

#endif  // CARTAGE_KIT_CASES_H_
