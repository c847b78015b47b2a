// The shm method's parameters: defaults, what the job's size and
// oversubscription change, and CARTAGE_SHM_* overrides (shm_options.cc;
// `cartage info` prints the table).
#ifndef CARTAGE_METHODS_SHM_SHM_OPTIONS_H_
#define CARTAGE_METHODS_SHM_SHM_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "methods/method.h"

namespace cartage::methods::shm {

// Parameters, each overridable by CARTAGE_SHM_<NAME> (see Params()).
struct ShmOptions {
  static constexpr std::size_t kRingBytes = 64 * 1024;
  std::size_t ring_bytes = kRingBytes;  // per ordered pair of ranks
  std::size_t eager_limit = kRingBytes / 8;  // larger messages go by rendezvous; by default an eighth of the ring
  bool ring_bytes_set = false;          // CARTAGE_SHM_RING_BYTES was given
  bool eager_limit_set = false;         // CARTAGE_SHM_EAGER_LIMIT was given
  // Unless set, the rings grow as far as the job's rings stay within this
  // many bytes in all: to kRingMax, where a window of 8 KiB messages no
  // longer waits for the reader to free room (bench/RESULTS.md, bw 8 KiB).
  // Where the ranks outnumber the CPUs, every rendezvous handshake waits for
  // a peer to be scheduled (a context switch, several µs), while an eager
  // message needs none: there they grow to kOversubscribedRingMax, and the
  // eager limit with them (to 64 KiB). Small records keep to a ring's first
  // 64 KiB (RingWriter::set_window); every page is faulted in at attach (ShmSegment).
  static constexpr std::size_t kRingBudget = 32u << 20;
  static constexpr std::size_t kRingMax = 256u << 10;
  static constexpr std::size_t kOversubscribedRingMax = 512u << 10;
  bool cma = true;                     // single copy with process_vm_readv where it works
  std::size_t cma_min = 64u << 20;     // ...for rendezvous messages of at least this many bytes
  // ...and where the ranks outnumber the CPUs (a pipelined copy needs the
  // sender running, a single copy does not): CARTAGE_SHM_CMA_MIN wins over both.
  std::size_t cma_min_oversubscribed = 64u << 10;
  // ...and where the receiving rank has a rendezvous send of its own waiting
  // for its CTS (an exchange: both CPUs copy anyway, and one copy each beats
  // two each).
  std::size_t cma_min_exchange = 64u << 10;
  bool cma_min_set = false;            // CARTAGE_SHM_CMA_MIN was given
  // Below cma_min, rendezvous messages of at least this many bytes (by
  // default all of them) go by CMA unless the pipelined copy was clearly
  // faster lately with their sender (CopyChooser); 0: never choose, as where
  // CARTAGE_SHM_CMA_MIN is set (ForJob).
  std::size_t cma_choose_min = 1;
  // How one-line records are written (shm_ring.h): ordinary stores, one
  // 64-byte direct store each, or chosen per moment
  // (RingWriter::set_direct_auto; only where the CPU has MOVDIR64B).
  enum class DirectStore : uint8_t { kNo, kYes, kAuto };
  DirectStore direct_store = DirectStore::kNo;
  // The defaults that depend on the job (its size, whether it is
  // oversubscribed), for what the environment did not set; every rank of a
  // job gets the same. Fails if the eager limit is more than the ring carries.
  absl::Status ForJob(int ranks, bool oversubscribed);
  // Reads CARTAGE_SHM_RING_BYTES, CARTAGE_SHM_EAGER_LIMIT, CARTAGE_SHM_CMA,
  // CARTAGE_SHM_CMA_MIN, CARTAGE_SHM_CMA_MIN_EXCHANGE, CARTAGE_SHM_CMA_CHOOSE_MIN,
  // CARTAGE_SHM_DIRECT_STORE.
  static absl::StatusOr<ShmOptions> FromEnvironment();
};

// The shm method's parameter table.
std::vector<ParamInfo> Params();

}  // namespace cartage::methods::shm

#endif  // CARTAGE_METHODS_SHM_SHM_OPTIONS_H_
