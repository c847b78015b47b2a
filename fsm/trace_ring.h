// TraceRing: the sink a traced process records into (CARTAGE_TRACE): a ring
// of fixed size, so that tracing a long job keeps bounded memory; when it
// wraps, the oldest records go and are counted as lost.
//
//   fsm::TraceRing ring(1 << 18);
//   fsm::ScopedTraceSink on(&ring);
//   ... run ...
//   fsm::TraceRing::Snapshot kept = ring.Take();  // oldest first
#ifndef CARTAGE_FSM_TRACE_RING_H_
#define CARTAGE_FSM_TRACE_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "fsm/trace.h"

namespace cartage::fsm {

class TraceRing : public TraceSink {
 public:
  // Keeps the last `capacity` records (rounded up to a power of two, at least 16).
  explicit TraceRing(std::size_t capacity);

  void Record(const TraceRecord& r) override;
  uint64_t BeginSpan(absl::string_view name, uint32_t context) override;
  void EndSpan(uint64_t call, absl::string_view name, uint32_t context, bool ok) override;

  struct Snapshot {
    std::vector<TraceRecord> records;  // oldest first
    uint64_t recorded = 0;             // every record ever made
    uint64_t lost() const { return recorded - records.size(); }
    std::vector<std::string> span_names;  // a span record's peer indexes these
  };
  // A copy of what the ring holds now. Writers may go on meanwhile (a dump
  // on a signal): a record written during the copy may be torn.
  Snapshot Take() const;

  std::size_t capacity() const { return mask_ + 1; }
  // Records made so far (a watchdog's sign of progress).
  uint64_t recorded() const { return next_.load(std::memory_order_relaxed); }

 private:
  int32_t NameIndex(absl::string_view name);

  std::unique_ptr<TraceRecord[]> slots_;
  std::size_t mask_;
  std::atomic<uint64_t> next_{0};
  mutable std::mutex spans_mu_;  // spans are per collective call, not per transition
  absl::flat_hash_map<uint32_t, uint64_t> calls_;  // per context: spans begun
  absl::flat_hash_map<std::string, int32_t> name_index_;
  std::vector<std::string> names_;
};

}  // namespace cartage::fsm

#endif  // CARTAGE_FSM_TRACE_RING_H_
