#include "fsm/trace.h"

#include <algorithm>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace cartage::fsm {

namespace internal {
std::atomic<TraceSink*> g_trace_sink{nullptr};

int64_t TransitionStart() { return absl::GetCurrentTimeNanos(); }

void EmitTrace(TraceSink* sink, int64_t started, uint64_t instance, const MachineNames* m, uint8_t from,
               uint8_t event, uint8_t to, SubjectFn subject, const void* ctx, const void* payload) {
  TraceRecord r{.time_ns = started, .instance = instance, .machine = m, .from = from, .event = event, .to = to};
  if (subject != nullptr) subject(ctx, payload, r);
  sink->Record(r);
}
}  // namespace internal

TraceSink* SetTraceSink(TraceSink* sink) {
  return internal::g_trace_sink.exchange(sink, std::memory_order_acq_rel);
}

TraceRecorder::TraceRecorder(std::size_t capacity) : capacity_(capacity) {
  records_.reserve(capacity);
}

void TraceRecorder::Record(const TraceRecord& r) {
  if (records_.size() < capacity_) {
    records_.push_back(r);
  } else {
    ++dropped_;
  }
}

void TraceRecorder::Clear() {
  records_.clear();
  dropped_ = 0;
}

namespace {
absl::string_view StateName(const TraceRecord& r, uint8_t s) {
  return s < r.machine->states.size() ? r.machine->states[s] : absl::string_view("?");
}
absl::string_view EventName(const TraceRecord& r) {
  return r.event < r.machine->events.size() ? r.machine->events[r.event].name
                                            : absl::string_view("?");
}
}  // namespace

std::string TraceRecorder::ToText() const {
  std::string out;
  for (const TraceRecord& r : records_) {
    absl::StrAppendFormat(&out, "%s#%d: %s --%s--> %s\n", r.machine->machine, r.instance,
                          StateName(r, r.from), EventName(r), StateName(r, r.to));
  }
  return out;
}

std::string TraceRecorder::ToChromeTraceJson() const {
  // Each instance is a track (tid); a state is a slice from the transition
  // that entered it to the one that left it; each event is an instant.
  const int64_t t0 = records_.empty() ? 0 : records_.front().time_ns;
  auto us = [t0](int64_t ns) { return static_cast<double>(ns - t0) / 1000.0; };
  absl::flat_hash_map<uint64_t, int64_t> entered;  // instance -> time it entered its state
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[";
  bool first = true;
  auto add = [&](const std::string& ev) {
    absl::StrAppend(&out, first ? "\n" : ",\n", ev);
    first = false;
  };
  for (const TraceRecord& r : records_) {
    auto [it, fresh] = entered.try_emplace(r.instance, r.time_ns);
    if (!fresh) {
      add(absl::StrFormat(
          R"({"name":"%s","cat":"%s","ph":"X","pid":1,"tid":%d,"ts":%.3f,"dur":%.3f})",
          StateName(r, r.from), r.machine->machine, r.instance, us(it->second),
          us(r.time_ns) - us(it->second)));
    }
    it->second = r.time_ns;
    add(absl::StrFormat(
        R"({"name":"%s","cat":"%s","ph":"i","s":"t","pid":1,"tid":%d,"ts":%.3f,)"
        R"("args":{"from":"%s","to":"%s"}})",
        EventName(r), r.machine->machine, r.instance, us(r.time_ns), StateName(r, r.from),
        StateName(r, r.to)));
  }
  absl::StrAppend(&out, "\n]}\n");
  return out;
}

}  // namespace cartage::fsm
