// What a method sees of the agent: the key-value exchange it sets up with,
// and the matching hooks it calls when envelopes arrive. A method never
// includes agent internals (docs/architecture.md, "Layers").
#ifndef CARTAGE_METHODS_HOST_H_
#define CARTAGE_METHODS_HOST_H_

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "car/car.h"

namespace cartage::methods {

// Whether a job of `ranks` on this host counts as oversubscribed:
// CARTAGE_OVERSUBSCRIBED=yes|no says so, and by default (auto) it is whether
// the ranks outnumber the host's CPUs (a job runs on one host, so every rank
// finds the same). The agent's wait policy, the shm method's choice of copy
// and the collectives' choices all turn on it: a rank that waits yields at
// once, and a copy or pipeline that needs its peer scheduled is avoided.
inline absl::StatusOr<bool> JobOversubscribed(int ranks) {
  if (const char* v = std::getenv("CARTAGE_OVERSUBSCRIBED")) {
    const absl::string_view s = v;
    if (s == "yes" || s == "no") return s == "yes";
    if (s != "auto") {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_OVERSUBSCRIBED=%s: use auto, yes or no", v));
    }
  }
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > 0 && ranks > cpus;
}

// Whether a job of `ranks` on this host crowds its CPUs: three or more
// ranks a CPU. Then every rank of a call is scheduled about once a call
// whatever the algorithm, and a call's time is the CPU work of all its
// ranks added up: the collectives' star algorithms turn on it. Every rank
// of a one-host job finds the same.
inline bool JobCrowded(int ranks) {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > 0 && ranks >= 3 * cpus;
}

// The job-wide key-value exchange (the bootstrap implements it).
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& job_id() const = 0;
  // Publishes `value` under `key`, visible to all after the next Fence.
  virtual absl::Status Put(absl::string_view key, absl::string_view value) = 0;
  // Returns once every rank called Fence.
  virtual absl::Status Fence() = 0;
  // A fence that calls `progress` while it waits (it returns the work it
  // did; none lets the wait sleep a little): finalize's, during which every
  // method still moves what was sent, and whoever was sent to still takes it.
  // `progress` returns kFenceCannotComplete where a rank is gone: not every
  // launcher fails a fence for it (PMI's wait for ever), so the fence returns
  // kAborted and the exchange is not used again.
  virtual absl::Status FenceWhile(absl::FunctionRef<int()> progress) = 0;
  static constexpr int kFenceCannotComplete = std::numeric_limits<int>::min();
  // The value under `key`; kNotFound if none.
  virtual absl::StatusOr<std::string> Get(absl::string_view key) = 0;
  // The value rank `from` put under `key`: what callers use, since they know
  // who put it. An exchange that keeps each rank's values apart (PMIx) looks
  // only there; the others hold one table for the job.
  virtual absl::StatusOr<std::string> GetFrom(int from, absl::string_view key) {
    (void)from;
    return Get(key);
  }
  // The ranks on this rank's host, in increasing order, this one included,
  // as the launcher placed them. The default is every rank: a launcher that
  // starts the whole job on one machine.
  virtual std::vector<int> HostRanks() const {
    std::vector<int> all(static_cast<std::size_t>(size()));
    for (int r = 0; r < size(); ++r) all[static_cast<std::size_t>(r)] = r;
    return all;
  }
};

// What a method may hold back (MethodHost::Holding): an envelope no posted
// receive matches, left where it lies, unread, until `postings` moves (a
// receive was posted since) or `allowed` turns false (a probe of the
// unexpected queue, a peer found gone), or something arrives behind it.
struct HoldControl {
  uint64_t postings = 0;  // receives posted so far
  bool allowed = true;
};

// The agent's side of find-or-allocate, for a method that has an envelope.
class MethodHost {
 public:
  virtual ~MethodHost() = default;
  // The posted receive `envelope` (context, source rank, tag) matches, taken
  // out of the posted queues; nullptr if none. By value, in two registers: a
  // method builds the envelope from its wire header field by field, and
  // through a reference the host read it back with loads that span those
  // stores, which cannot take their bytes from the store buffer and wait
  // for the stores to land (a store-forwarding stall on every message).
  virtual car::Car* MatchIncoming(car::Envelope envelope) = 0;
  // False while no receive is posted at all, when MatchIncoming would give
  // nullptr for any envelope: a method that defers unmatched envelopes
  // (DeliverEnvelope) may then leave one where it lies without reading it.
  virtual bool AnyPosted() const { return true; }
  // The agent's hold control, read in place (null: hold nothing). Holding
  // the next call's message of a collective until that call posts its
  // receive spares it the unexpected queue's CAR, buffer and second copy.
  virtual const HoldControl* Holding() const { return nullptr; }
  // The most bytes the unexpected messages may hold at this rank
  // (CARTAGE_UNEXPECTED_MAX_MB). A method whose provider buffers them out of
  // the agent's sight (ofi) keeps its own account against it.
  virtual uint64_t UnexpectedMax() const { return uint64_t{1} << 30; }
  // A new unexpected-message CAR for `envelope`, stored in the unexpected
  // queue, with a temporary buffer of `buffer_bytes` (0: none, e.g. an RTS).
  // Its machine is still in `new`: the method dispatches the envelope.
  virtual absl::StatusOr<car::Car*> NewUnexpected(const car::Envelope& envelope,
                                                  uint64_t buffer_bytes) = 0;
  // Fills the agent's operations of a VC (post_recv, unpost_recv: matching
  // against the unexpected queue). A method calls it once per VC it makes.
  virtual void InstallAgentOps(car::Vc& vc) = 0;
  // Which of the agent's lanes (CARTAGE_LANES) this host is: a rank opens
  // each method once a lane. What a method traces by peer (tcp's
  // connections) keeps its lanes' instances apart by it.
  virtual int lane() const { return 0; }
};

}  // namespace cartage::methods

#endif  // CARTAGE_METHODS_HOST_H_
