// A host's shared-memory segment: a header, one control block per rank on
// the host and one ring (shm_ring.h) per ordered pair of them, the diagonal
// included (a rank's messages to itself). The host's lowest rank creates it
// 0600 under a name with a random part, every rank there maps it (and faults
// in the rings it writes and reads, then reads a word of each of their
// pages: see Populate), and the creator unlinks the name as soon as all have (so a `kill -9` leaves nothing in
// /dev/shm; the launcher also removes any name of its job left by a rank
// killed during set-up).
#ifndef CARTAGE_METHODS_SHM_SHM_SEGMENT_H_
#define CARTAGE_METHODS_SHM_SHM_SEGMENT_H_

#include <linux/futex.h>
#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "methods/host.h"
#include "methods/shm/shm_ring.h"

namespace cartage::methods::shm {

// One rank's control block.
struct alignas(kLine) RankBlock {
  std::atomic<int32_t> pid;
  std::atomic<uint32_t> finalized;  // 1 once the rank finalized
  std::atomic<uint32_t> sleeping;   // 1 while the rank may block on its doorbell
  std::atomic<uint32_t> doorbell;   // futex word senders bump to wake it
  uint64_t probe_address;           // a word in the rank's memory, for the CMA check
  uint64_t probe_value;             // what that word holds
  std::atomic<int32_t> cpu;         // the CPU the rank last said it ran on (-1: not yet)
  // Robust, held by the thread that made the rank's segment: the kernel
  // marks it as that thread ends, before its process can be reaped and its
  // pid handed on, so a peer reads whether the pid is still the rank's
  // with one load where the thread lives (ThreadLives), and asks the
  // kernel (a pidfd) only where it does not.
  pthread_mutex_t life;

  bool ThreadLives() const {
    const int word = __atomic_load_n(&life.__data.__lock, __ATOMIC_ACQUIRE);
    return (word & FUTEX_TID_MASK) != 0 && (word & FUTEX_OWNER_DIED) == 0;
  }
};

// Faults in, for writing, the pages that [p, p + bytes) touches, then reads
// a word of each from user space (shm_segment.cc says why). Fails with
// ResourceExhausted where the kernel cannot have them (a full /dev/shm, a
// range past its file's end: what would be a SIGBUS at the first write);
// before Linux 5.14 only the reads run.
absl::Status FaultInPages(const void* p, std::size_t bytes);

class ShmSegment {
 public:
  // Collective over `exchange`: every rank creates (the lowest of
  // `host_ranks`, the ranks on its host, increasing) or attaches to its
  // host's segment, and fences three times.
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Create(Exchange& exchange, std::size_t ring_bytes,
                                                            const std::vector<int>& host_ranks);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // The ranks on this host.
  int ranks() const { return ranks_; }
  // Whether world rank `rank` is on this host (has a block and rings here).
  bool Holds(int rank) const {
    return rank >= 0 && static_cast<std::size_t>(rank) < local_of_.size() &&
           local_of_[static_cast<std::size_t>(rank)] >= 0;
  }
  // By world rank, of ranks this segment Holds.
  RankBlock& block(int rank) { return *block_of_[static_cast<std::size_t>(rank)]; }
  RingShared* ring(int from, int to);
  // Bytes from one ring to the next (a ring's shared part and its records).
  std::size_t ring_stride() const { return ring_stride_; }
  // The name the segment had (unlinked once every rank attached).
  const std::string& name() const { return name_; }

  // The /dev/shm name prefix of a job's segments (the launcher cleans these).
  static std::string NamePrefix(absl::string_view job_id);

 private:
  ShmSegment() = default;
  // Faults in the pages of `bytes` of rings from `rings` now (Create: the
  // rings `rank` writes and reads): FaultInPages, its error naming `rank`
  // and the segment.
  absl::Status Populate(const RingShared* rings, std::size_t bytes, int rank);
  // By index among the host's ranks.
  RankBlock& BlockAt(int i);
  RingShared* RingAt(int from, int to);
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  RankBlock* mine_ = nullptr;  // this rank's block, whose life it holds (null: not held)
  int ranks_ = 0;
  std::size_t ring_stride_ = 0;
  std::string name_;
  std::vector<int> local_of_;         // world rank -> index on this host (-1: elsewhere)
  std::vector<RankBlock*> block_of_;  // world rank -> its block (nullptr: elsewhere)
};

}  // namespace cartage::methods::shm

#endif  // CARTAGE_METHODS_SHM_SHM_SEGMENT_H_
