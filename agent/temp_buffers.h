// The temporary buffers unexpected eager messages wait in until their
// receive is posted, in two size classes (small records, and the largest
// eager message the methods send), kept for reuse so that steady state
// allocates nothing. A message larger than any eager limit (self sends every
// size eagerly) gets a buffer of its exact size.
#ifndef CARTAGE_AGENT_TEMP_BUFFERS_H_
#define CARTAGE_AGENT_TEMP_BUFFERS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cartage::agent {

class TempBuffers {
 public:
  static constexpr std::size_t kSmall = 256;
  // Buffers up to `eager_bytes` (at least kSmall); a few of each class are
  // made and written now, so that their pages fault in at start-up and not
  // under the first unexpected messages.
  explicit TempBuffers(std::size_t eager_bytes);
  ~TempBuffers();
  TempBuffers(const TempBuffers&) = delete;
  TempBuffers& operator=(const TempBuffers&) = delete;

  // A buffer of at least `bytes`.
  void* Take(uint64_t bytes);
  // Gives back a buffer Take returned for `bytes`; a bounded number of each
  // class is kept, so a burst of unexpected messages is freed.
  void Give(void* buffer, uint64_t bytes);

 private:
  static constexpr std::size_t kKept = 1024;
  std::size_t large_;  // the large class's size
  std::vector<void*> small_;
  std::vector<void*> large_free_;
};

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_TEMP_BUFFERS_H_
