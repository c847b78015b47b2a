#include "fsm/trace_compare.h"

#include <map>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "fsm/trace_check.h"

namespace cartage::fsm {

namespace {

// (rank, machine or "span", life) -> how many.
using Lives = std::map<std::tuple<int, std::string, std::string>, uint64_t>;

// A life's text: "idle --post--> eager_in_flight --local_done--> done".
void AddLives(const Registry& registry, const TraceFile& f, Lives& lives, std::vector<std::string>& problems) {
  if (f.lost > 0) {
    problems.push_back(absl::StrFormat("rank %d: its ring lost %d records (raise CARTAGE_TRACE_RECORDS)", f.rank,
                                       f.lost));
  }
  const std::vector<BoundMachine> bound = BindMachines(registry, f);
  absl::flat_hash_map<std::pair<int32_t, uint64_t>, std::string> open;
  auto end_life = [&](int32_t machine, std::string& text) {
    ++lives[{f.rank, f.machines[static_cast<std::size_t>(machine)].name, text}];
    text.clear();
  };
  absl::flat_hash_map<std::pair<uint32_t, uint64_t>, std::string> calls;  // (context, call) -> name
  for (const TraceFile::Entry& e : f.entries) {
    if (e.kind == 'b') {
      calls[{e.context, e.instance}] = f.span_names[static_cast<std::size_t>(e.peer)];
      continue;
    }
    if (e.kind == 'e') {
      ++lives[{f.rank, "span",
               absl::StrCat(f.span_names[static_cast<std::size_t>(e.peer)], e.ok ? " ended well" : " failed")}];
      calls.erase({e.context, e.instance});
      continue;
    }
    const TraceFile::Machine& m = f.MachineOf(e);
    std::string& text = open[{e.machine, e.instance}];
    if (text.empty()) text = m.states[e.from];
    absl::StrAppend(&text, " --", m.events[e.event], "--> ", m.states[e.to]);
    const BoundMachine& b = bound[static_cast<std::size_t>(e.machine)];
    const int to = b.info != nullptr ? b.state[e.to] : -1;
    if (to >= 0 && b.info->is_final[static_cast<std::size_t>(to)]) end_life(e.machine, text);
  }
  // Lives cut short by the dump, and calls that never ended, count as they stand.
  for (auto& [key, text] : open) {
    if (text.empty()) continue;
    absl::StrAppend(&text, " (unfinished)");
    end_life(key.first, text);
  }
  for (const auto& [key, name] : calls) ++lives[{f.rank, "span", absl::StrCat(name, " unfinished")}];
}

}  // namespace

TraceComparison CompareJobTraces(const Registry& registry, const std::vector<TraceFile>& a,
                                 const std::vector<TraceFile>& b) {
  TraceComparison out;
  if (a.empty() || b.empty() || a.front().size != b.front().size) {
    out.differences.push_back(absl::StrFormat("the jobs have %d and %d ranks", a.empty() ? 0 : a.front().size,
                                              b.empty() ? 0 : b.front().size));
    return out;
  }
  Lives la, lb;
  for (const TraceFile& f : a) AddLives(registry, f, la, out.differences);
  for (const TraceFile& f : b) AddLives(registry, f, lb, out.differences);
  for (const auto& [key, n] : la) (std::get<1>(key) == "span" ? out.spans : out.lives) += n;
  Lives both = la;
  for (const auto& [key, n] : lb) both.try_emplace(key, 0);
  for (const auto& entry : both) {
    const auto& key = entry.first;
    const auto ia = la.find(key), ib = lb.find(key);
    const uint64_t na = ia == la.end() ? 0 : ia->second, nb = ib == lb.end() ? 0 : ib->second;
    if (na == nb) continue;
    const auto& [rank, machine, life] = key;
    out.differences.push_back(absl::StrFormat("rank %d: %s %s: %d in A, %d in B", rank, machine, life, na, nb));
  }
  return out;
}

}  // namespace cartage::fsm
