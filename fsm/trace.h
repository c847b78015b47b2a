// Transition tracing: a hook on every transition of every machine.
//
// Off by default. When off, a transition pays one relaxed atomic load and a
// predictable branch (measured in bench/fsm_bench.cc); a machine dispatched
// with TraceMode::kCompiledOut pays nothing at all. When on, each transition
// hands a TraceRecord to the installed sink.
//
//   fsm::TraceRecorder rec(1 << 16);
//   fsm::ScopedTraceSink on(&rec);
//   ... run traffic ...
//   std::ofstream("trace.json") << rec.ToChromeTraceJson();  // open in Perfetto
#ifndef CARTAGE_FSM_TRACE_H_
#define CARTAGE_FSM_TRACE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/strings/string_view.h"

#include "fsm/machine_info.h"

namespace cartage::fsm {

// The names of one machine, fixed at compile time; traces point at it.
struct MachineNames {
  absl::string_view machine;
  std::span<const absl::string_view> states;
  std::span<const EventSpec> events;
};

// One transition as the hook sees it, or (machine null) one edge of a span.
struct TraceRecord {
  int64_t time_ns = 0;  // absl::GetCurrentTimeNanos() as the transition started (before its action)
  uint64_t instance = 0;  // a span's: its call number
  const MachineNames* machine = nullptr;
  uint8_t from = 0;   // a span's: 0 begins, 1 ends
  uint8_t event = 0;  // a span's end: 1 if it ended well
  uint8_t to = 0;
  // What the instance is about, where its machine says (a Def's Subject):
  // a CAR's context id, peer (world rank, -1 none yet), tag and bytes; a
  // span's communicator context, its name's index (TraceSink::SpanName) in peer.
  uint32_t context = 0;
  int32_t peer = -1;
  int32_t tag = 0;
  uint64_t bytes = 0;
};

// Receives every transition while installed. Called on the dispatching thread.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  // Records one transition; must not dispatch events.
  virtual void Record(const TraceRecord& r) = 0;
  // A span (a collective call) begins on communicator `context`; returns its
  // call number on that communicator (1, 2, ...), 0 where spans are not kept.
  virtual uint64_t BeginSpan(absl::string_view /*name*/, uint32_t /*context*/) { return 0; }
  // The span `call` (BeginSpan's number) ended, well or not.
  virtual void EndSpan(uint64_t /*call*/, absl::string_view /*name*/, uint32_t /*context*/, bool /*ok*/) {}
};

namespace internal {
extern std::atomic<TraceSink*> g_trace_sink;
// Fills a record's subject from the instance and the event's payload.
using SubjectFn = void (*)(const void* ctx, const void* payload, TraceRecord& r);
// The time a traced transition starts (before its action), which the
// dispatch hands to its EmitTrace: an action may dispatch another machine
// (a schedule's step run as a vertex launches) and record in between.
ABSL_ATTRIBUTE_NOINLINE ABSL_ATTRIBUTE_COLD int64_t TransitionStart();
// Out of line (under LTO too), so the dispatch fast path stays small.
// `started`: TransitionStart()'s answer.
ABSL_ATTRIBUTE_NOINLINE ABSL_ATTRIBUTE_COLD void EmitTrace(TraceSink* sink, int64_t started, uint64_t instance,
                                                           const MachineNames* m, uint8_t from, uint8_t event,
                                                           uint8_t to, SubjectFn subject, const void* ctx,
                                                           const void* payload);
}  // namespace internal

// Collective call spans, for whoever runs one: nothing while no sink is installed.
inline uint64_t BeginSpan(absl::string_view name, uint32_t context) {
  TraceSink* sink = internal::g_trace_sink.load(std::memory_order_relaxed);
  return ABSL_PREDICT_FALSE(sink != nullptr) ? sink->BeginSpan(name, context) : 0;
}
inline void EndSpan(uint64_t call, absl::string_view name, uint32_t context, bool ok) {
  if (call == 0) return;
  if (TraceSink* sink = internal::g_trace_sink.load(std::memory_order_relaxed)) sink->EndSpan(call, name, context, ok);
}

// Installs `sink` (nullptr turns tracing off); returns the previous one.
TraceSink* SetTraceSink(TraceSink* sink);

// Installs a sink for the lifetime of the object, restoring the previous one.
class ScopedTraceSink {
 public:
  explicit ScopedTraceSink(TraceSink* sink) : previous_(SetTraceSink(sink)) {}
  ~ScopedTraceSink() { SetTraceSink(previous_); }
  ScopedTraceSink(const ScopedTraceSink&) = delete;
  ScopedTraceSink& operator=(const ScopedTraceSink&) = delete;

 private:
  TraceSink* previous_;
};

// A sink that keeps up to `capacity` records (preallocated; later records are
// counted as dropped) and exports them.
class TraceRecorder : public TraceSink {
 public:
  explicit TraceRecorder(std::size_t capacity);
  void Record(const TraceRecord& r) override;

  // The records kept, in order.
  std::span<const TraceRecord> records() const { return records_; }
  // Records that did not fit.
  uint64_t dropped() const { return dropped_; }
  void Clear();

  // "machine#id: from --event--> to", one line per record.
  std::string ToText() const;
  // Chrome trace-event JSON (Perfetto, chrome://tracing): one track per
  // instance, one slice per state it sat in, an instant per event.
  std::string ToChromeTraceJson() const;

 private:
  std::vector<TraceRecord> records_;
  std::size_t capacity_;
  uint64_t dropped_ = 0;
};

}  // namespace cartage::fsm

#endif  // CARTAGE_FSM_TRACE_H_
