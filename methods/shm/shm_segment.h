// The job's shared-memory segment: a header, one control block per rank and
// one ring (shm_ring.h) per ordered pair of ranks, the diagonal included (a
// rank's messages to itself). Rank 0 creates it 0600 under a name with a
// random part, every rank maps it (and faults in the rings it writes and
// reads, then reads a word of each of their pages: see Populate), and rank 0
// unlinks the name as soon as all have (so a `kill -9` leaves nothing in
// /dev/shm; the launcher also removes any name of its job left by a rank
// killed during set-up).
#ifndef CARTAGE_METHODS_SHM_SHM_SEGMENT_H_
#define CARTAGE_METHODS_SHM_SHM_SEGMENT_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

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
};

// Faults in, for writing, the pages that [p, p + bytes) touches, then reads
// a word of each from user space (shm_segment.cc says why). Fails with
// ResourceExhausted where the kernel cannot have them (a full /dev/shm, a
// range past its file's end: what would be a SIGBUS at the first write);
// before Linux 5.14 only the reads run.
absl::Status FaultInPages(const void* p, std::size_t bytes);

class ShmSegment {
 public:
  // Collective over `exchange`: creates or attaches, fences twice.
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Create(Exchange& exchange,
                                                            std::size_t ring_bytes);
  ~ShmSegment();
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  int ranks() const { return ranks_; }
  RankBlock& block(int rank);
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
  void* base_ = nullptr;
  std::size_t bytes_ = 0;
  int ranks_ = 0;
  std::size_t ring_stride_ = 0;
  std::string name_;
};

}  // namespace cartage::methods::shm

#endif  // CARTAGE_METHODS_SHM_SHM_SEGMENT_H_
