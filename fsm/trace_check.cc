#include "fsm/trace_check.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"

namespace cartage::fsm {

std::vector<BoundMachine> BindMachines(const Registry& registry, const TraceFile& f) {
  std::vector<BoundMachine> bound(f.machines.size());
  for (std::size_t m = 0; m < f.machines.size(); ++m) {
    const TraceFile::Machine& fm = f.machines[m];
    BoundMachine& b = bound[m];
    b.info = registry.Find(fm.name);
    if (b.info == nullptr) continue;
    for (const std::string& n : fm.states) {
      auto it = std::find(b.info->states.begin(), b.info->states.end(), n);
      b.state.push_back(it == b.info->states.end() ? -1 : static_cast<int>(it - b.info->states.begin()));
    }
    for (const std::string& n : fm.events) {
      auto it = std::find_if(b.info->events.begin(), b.info->events.end(),
                             [&](const EventSpec& e) { return e.name == n; });
      b.event.push_back(it == b.info->events.end() ? -1 : static_cast<int>(it - b.info->events.begin()));
    }
  }
  return bound;
}

TraceCheck CheckJobTrace(const Registry& registry, const std::vector<TraceFile>& ranks) {
  TraceCheck out;
  out.finished = !ranks.empty() && static_cast<int>(ranks.size()) == ranks.front().size &&
                 std::all_of(ranks.begin(), ranks.end(), [](const TraceFile& f) { return f.end == "finalize"; });
  for (const TraceFile& f : ranks) {
    const std::vector<BoundMachine> bound = BindMachines(registry, f);
    for (std::size_t m = 0; m < f.machines.size(); ++m) {
      if (bound[m].info == nullptr) {
        out.problems.push_back(absl::StrFormat("rank %d: machine '%s' is in no table", f.rank, f.machines[m].name));
      }
    }
    // Per (machine, instance): the table state it is in.
    absl::flat_hash_map<std::pair<int32_t, uint64_t>, int> at;
    absl::flat_hash_map<std::pair<uint32_t, uint64_t>, const TraceFile::Entry*> open_spans;
    for (const TraceFile::Entry& e : f.entries) {
      if (e.kind == 'b') {
        open_spans[{e.context, e.instance}] = &e;
        continue;
      }
      if (e.kind == 'e') {
        open_spans.erase({e.context, e.instance});
        continue;
      }
      const BoundMachine& b = bound[static_cast<std::size_t>(e.machine)];
      if (b.info == nullptr) continue;
      const TraceFile::Machine& fm = f.MachineOf(e);
      ++out.transitions;
      const int from = b.state[e.from], to = b.state[e.to], ev = b.event[e.event];
      auto name = [&] { return absl::StrFormat("rank %d: %s#%d", f.rank, fm.name, e.instance); };
      if (from < 0 || to < 0 || ev < 0) {
        out.problems.push_back(absl::StrFormat("%s: %s --%s--> %s names a state or event its table lacks", name(),
                                               fm.states[e.from], fm.events[e.event], fm.states[e.to]));
        continue;
      }
      const bool row = std::any_of(b.info->transitions.begin(), b.info->transitions.end(), [&](const TransitionInfo& t) {
        return t.source == from && t.event == ev && t.target == to;
      });
      if (!row) {
        out.problems.push_back(absl::StrFormat("%s: %s --%s--> %s is no row of the table", name(), fm.states[e.from],
                                               fm.events[e.event], fm.states[e.to]));
      }
      auto [it, fresh] = at.try_emplace({e.machine, e.instance}, to);
      if (fresh) {
        ++out.instances;
        if (from != b.info->initial && f.lost == 0) {
          out.problems.push_back(absl::StrFormat("%s: its first transition leaves '%s', not the initial state '%s'",
                                                 name(), fm.states[e.from], b.info->states[b.info->initial]));
        }
        continue;
      }
      const int was = it->second;
      // A finished instance re-armed (a persistent request, a schedule's step) starts over.
      const bool rearmed = b.info->is_final[static_cast<std::size_t>(was)] && from == b.info->initial;
      if (from != was && !rearmed) {
        out.problems.push_back(absl::StrFormat("%s: leaves '%s' but was in '%s'", name(), fm.states[e.from],
                                               b.info->states[static_cast<std::size_t>(was)]));
      }
      it->second = to;
    }
    if (!out.finished) continue;
    std::vector<std::pair<std::pair<int32_t, uint64_t>, int>> left(at.begin(), at.end());
    std::sort(left.begin(), left.end());
    for (const auto& [key, state] : left) {
      const BoundMachine& b = bound[static_cast<std::size_t>(key.first)];
      if (!b.info->is_final[static_cast<std::size_t>(state)]) {
        out.problems.push_back(absl::StrFormat("rank %d: %s#%d ends the job in '%s', which is not final", f.rank,
                                               b.info->name, key.second, b.info->states[static_cast<std::size_t>(state)]));
      }
    }
    for (const auto& [key, e] : open_spans) {
      out.problems.push_back(absl::StrFormat("rank %d: collective call %d (%s) on context %d never ended", f.rank,
                                             key.second, f.span_names[static_cast<std::size_t>(e->peer)], key.first));
    }
  }
  return out;
}

}  // namespace cartage::fsm
