#include "fsm/trace_ring.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace cartage::fsm {

TraceRing::TraceRing(std::size_t capacity) {
  std::size_t n = 16;
  while (n < capacity) n <<= 1;
  slots_ = std::make_unique<TraceRecord[]>(n);
  mask_ = n - 1;
}

void TraceRing::Record(const TraceRecord& r) {
  const uint64_t i = next_.fetch_add(1, std::memory_order_relaxed);
  slots_[i & mask_] = r;
}

int32_t TraceRing::NameIndex(absl::string_view name) {
  auto [it, fresh] = name_index_.try_emplace(std::string(name), static_cast<int32_t>(names_.size()));
  if (fresh) names_.emplace_back(name);
  return it->second;
}

uint64_t TraceRing::BeginSpan(absl::string_view name, uint32_t context) {
  TraceRecord r{.time_ns = absl::GetCurrentTimeNanos(), .from = 0, .context = context};
  {
    std::lock_guard<std::mutex> lock(spans_mu_);
    r.instance = ++calls_[context];
    r.peer = NameIndex(name);
  }
  Record(r);
  return r.instance;
}

void TraceRing::EndSpan(uint64_t call, absl::string_view name, uint32_t context, bool ok) {
  TraceRecord r{.time_ns = absl::GetCurrentTimeNanos(), .instance = call, .from = 1,
                .event = static_cast<uint8_t>(ok ? 1 : 0), .context = context};
  {
    std::lock_guard<std::mutex> lock(spans_mu_);
    r.peer = NameIndex(name);
  }
  Record(r);
}

TraceRing::Snapshot TraceRing::Take() const {
  Snapshot s;
  s.recorded = next_.load(std::memory_order_acquire);
  const uint64_t kept = std::min<uint64_t>(s.recorded, mask_ + 1);
  s.records.reserve(kept);
  for (uint64_t i = s.recorded - kept; i < s.recorded; ++i) s.records.push_back(slots_[i & mask_]);
  std::lock_guard<std::mutex> lock(spans_mu_);
  s.span_names = names_;
  return s;
}

}  // namespace cartage::fsm
