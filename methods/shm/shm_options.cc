// shm's parameters and their reading from the environment (CARTAGE_SHM_*),
// the capabilities they give, and the registry's entry.
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "methods/shm/shm_method.h"
#include "methods/shm/shm_wire.h"

namespace cartage::methods::shm {

std::vector<ParamInfo> Params() {
  return {
      {"RING_BYTES", "65536", "bytes of each ring (one per ordered pair of ranks), a power of two; unless set, "
                              "it grows to 262144 (524288 where ranks outnumber CPUs) while the job's rings "
                              "stay within 32 MiB, so that a window of eager messages fits, and where ranks "
                              "outnumber CPUs messages up to 64 KiB need no handshake"},
      {"EAGER_LIMIT", "8192", "largest message sent eagerly; larger ones go by rendezvous (default: an eighth "
                              "of the ring where RING_BYTES is set or ranks outnumber CPUs, up to 65536)"},
      {"CMA", "auto", "auto: single-copy rendezvous with process_vm_readv where the start-up probe finds it "
                      "works; off: the pipelined copy through the rings"},
      {"CMA_MIN", "67108864", "smallest rendezvous message that always uses CMA (65536 where ranks outnumber "
                              "CPUs, since CMA frees the sender's CPU); below it the receiver chooses "
                              "(CMA_CHOOSE_MIN). When set, it holds everywhere"},
      {"CMA_CHOOSE_MIN", "1", "below CMA_MIN, rendezvous messages of at least this many bytes go by CMA "
                              "unless the pipelined copy moved a byte faster by more than 10 % lately with "
                              "their sender (timed per peer, the other way tried three messages in a row "
                              "16 messages after a change of way, then less often, down to once in 256, or "
                              "4096 where it took twice as long); 0: never choose; ignored when CMA_MIN is set"},
      {"CMA_MIN_EXCHANGE", "65536", "smallest rendezvous message that uses CMA while the receiving rank "
                                     "has a rendezvous send of its own waiting for its CTS (an exchange)"},
      {"DIRECT_STORE", "no", "yes: write each one-line record (an eager message of up to 16 bytes, a control "
                             "record) with one 64-byte direct store (MOVDIR64B; refused on a CPU without it), "
                             "which wins where a cache-line hand-off between CPUs is slow and loses where it "
                             "is fast (cartage-bench pingpong); auto: direct stores for an exchange's records "
                             "while a timed ordinary store (one in 256) takes over 120 ns"},
  };
}

absl::Status ShmOptions::ForJob(int ranks, bool oversubscribed) {
  if (oversubscribed && !cma_min_set) cma_min = cma_min_oversubscribed;
  if (cma_min_set) cma_choose_min = 0;  // a CMA_MIN given holds everywhere: nothing to choose
  if (!ring_bytes_set) {
    const auto n = static_cast<std::size_t>(ranks);
    const std::size_t most = oversubscribed ? kOversubscribedRingMax : kRingMax;
    while (ring_bytes < most && 2 * ring_bytes * n * n <= kRingBudget) ring_bytes *= 2;
    // With a CPU each, a larger eager message through the ring loses to the
    // rendezvous (16 KiB ping-pong); the room is for a window of them.
    if (oversubscribed && !eager_limit_set) eager_limit = ring_bytes / 8;
  }
  const std::size_t max_eager = ring_bytes / 4 - kRecordHeader - sizeof(MatchHeader);
  if (eager_limit > max_eager) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "shm: eager limit %d exceeds what a %d-byte ring carries (%d)", eager_limit, ring_bytes, max_eager));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShmOptions> ShmOptions::FromEnvironment() {
  ShmOptions o;
  if (const char* v = std::getenv("CARTAGE_SHM_RING_BYTES")) {
    if (!absl::SimpleAtoi(v, &o.ring_bytes) || o.ring_bytes < 4096 || (o.ring_bytes & (o.ring_bytes - 1))) {
      return absl::InvalidArgumentError(
          absl::StrFormat("CARTAGE_SHM_RING_BYTES=%s: need a power of two >= 4096", v));
    }
    o.ring_bytes_set = true;
    o.eager_limit = o.ring_bytes / 8;
  }
  if (const char* v = std::getenv("CARTAGE_SHM_EAGER_LIMIT")) {
    if (!absl::SimpleAtoi(v, &o.eager_limit)) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_SHM_EAGER_LIMIT=%s: not a number", v));
    }
    o.eager_limit_set = true;
  }
  if (const char* v = std::getenv("CARTAGE_SHM_CMA")) {
    const std::string s = v;
    if (s != "auto" && s != "off") {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_SHM_CMA=%s: use auto or off", v));
    }
    o.cma = s == "auto";
  }
  if (const char* v = std::getenv("CARTAGE_SHM_CMA_MIN")) {
    if (!absl::SimpleAtoi(v, &o.cma_min)) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_SHM_CMA_MIN=%s: not a number", v));
    }
    o.cma_min_set = true;
  }
  if (const char* v = std::getenv("CARTAGE_SHM_DIRECT_STORE")) {
    const std::string s = v;
    if (s != "yes" && s != "no" && s != "auto") {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_SHM_DIRECT_STORE=%s: use yes, no or auto", v));
    }
    if (s == "yes" && !DirectStoreSupported()) {
      return absl::FailedPreconditionError("CARTAGE_SHM_DIRECT_STORE=yes: this CPU has no MOVDIR64B");
    }
    o.direct_store = s == "yes"                              ? DirectStore::kYes
                     : s == "auto" && DirectStoreSupported() ? DirectStore::kAuto
                                                             : DirectStore::kNo;
  }
  if (const char* v = std::getenv("CARTAGE_SHM_CMA_CHOOSE_MIN")) {
    if (!absl::SimpleAtoi(v, &o.cma_choose_min)) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_SHM_CMA_CHOOSE_MIN=%s: not a number", v));
    }
  }
  if (const char* v = std::getenv("CARTAGE_SHM_CMA_MIN_EXCHANGE")) {
    if (!absl::SimpleAtoi(v, &o.cma_min_exchange)) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_SHM_CMA_MIN_EXCHANGE=%s: not a number", v));
    }
  }
  return o;
}

Capabilities ShmMethod::Caps(const ShmOptions& o) {
  Capabilities c;
  c.eager_limit = o.eager_limit;
  c.max_message = std::numeric_limits<uint64_t>::max();
  c.reach = Reach::kHost;
  c.single_copy = o.cma;  // CMA; an open method says so only where its probe reached every peer
  return c;
}

const Descriptor kDescriptor{
    "shm", "the other ranks on this host: lock-free rings, eager records, pipelined or CMA rendezvous",
    &CapsFromEnvironment<ShmMethod, ShmOptions>, &Params, &OpenFromEnvironment<ShmMethod, ShmOptions>};

}  // namespace cartage::methods::shm
