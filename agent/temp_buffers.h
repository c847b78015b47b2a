// The temporary buffers unexpected eager messages wait in until their
// receive is posted: power-of-two size classes from 64 bytes up to the
// largest eager message the methods send, so that an 8-byte message holds
// 64 bytes and a 1 KiB one 1 KiB (not the eager limit). A bounded number of
// each class is kept for reuse, so that steady state allocates nothing and a
// burst is given back once drained. A message larger than any eager limit
// (self sends every size eagerly) gets a buffer of its exact size.
#ifndef CARTAGE_AGENT_TEMP_BUFFERS_H_
#define CARTAGE_AGENT_TEMP_BUFFERS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace cartage::agent {

class TempBuffers {
 public:
  static constexpr std::size_t kMinClass = 64;
  // Buffers up to `eager_bytes`; a few of the smallest and the largest class
  // are made and written now, so that their pages fault in at start-up and
  // not under the first unexpected messages.
  explicit TempBuffers(std::size_t eager_bytes);
  ~TempBuffers();
  TempBuffers(const TempBuffers&) = delete;
  TempBuffers& operator=(const TempBuffers&) = delete;

  // What a buffer for `bytes` holds of memory (its class, or exactly `bytes`).
  std::size_t Footprint(uint64_t bytes) const;
  // A buffer of at least `bytes`.
  void* Take(uint64_t bytes);
  // Gives back a buffer Take returned for `bytes`.
  void Give(void* buffer, uint64_t bytes);

 private:
  // At most this many bytes of each class are kept for reuse (at least one buffer).
  static constexpr std::size_t kKeptBytes = 256 * 1024;
  std::size_t ClassOf(uint64_t bytes) const;  // index into free_
  std::size_t largest_;                      // the largest class's size
  std::vector<std::vector<void*>> free_;     // per class, smallest first
};

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_TEMP_BUFFERS_H_
