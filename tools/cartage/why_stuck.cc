#include "tools/cartage/why_stuck.h"

#include <algorithm>
#include <iostream>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"

namespace cartage::tools {

namespace {

using fsm::TraceFile;
using Entry = fsm::TraceFile::Entry;

// A CAR not in a final state when its rank wrote the dump.
struct Live {
  int rank = 0;
  std::string machine, state;
  uint64_t instance = 0;
  uint32_t context = 0;
  int32_t peer = -1, tag = 0;
  uint64_t bytes = 0;
  int64_t since_ns = 0;  // when it entered its state (0: its transitions fell out of the ring)
  uint64_t done = 0;     // bytes done, where the rank listed it
  uint32_t waits_on = 0;  // dependencies unmet, where the rank listed it
};

// A collective call begun on a communicator.
struct Call {
  uint64_t number = 0;
  std::string name;
  bool open = false;
};

struct RankView {
  const TraceFile* file = nullptr;
  std::vector<Live> live;
  std::map<uint32_t, Call> last_call;  // per context: the last call begun (open if not ended)
  std::vector<std::string> odd_sizes;  // receives whose message was not the size they were posted for
  int64_t last_ns = 0;                 // the last record's time (0: none)
  bool finalizing = false;             // inside finalize when it wrote its dump
};

// Whether `state` is final in machine `name` (an unknown machine's are).
bool IsFinal(const fsm::Registry& registry, const std::string& name, const std::string& state) {
  const fsm::MachineInfo* info = registry.Find(name);
  if (info == nullptr) return true;
  auto it = std::find(info->states.begin(), info->states.end(), state);
  return it == info->states.end() || info->is_final[static_cast<std::size_t>(it - info->states.begin())];
}

RankView View(const TraceFile& f, const fsm::Registry& registry) {
  RankView v;
  v.file = &f;
  std::map<std::pair<int32_t, uint64_t>, std::pair<const Entry*, uint64_t>> last;  // instance -> (last record, posted bytes)
  for (const Entry& e : f.entries) {
    v.last_ns = std::max(v.last_ns, e.time_ns);
    if (e.kind == 'b') {
      const std::string& name = f.span_names[static_cast<std::size_t>(e.peer)];
      if (name == "finalize") {
        v.finalizing = true;
      } else {
        v.last_call[e.context] = {e.instance, name, true};
      }
      continue;
    }
    if (e.kind == 'e') {
      Call& c = v.last_call[e.context];
      if (c.number == e.instance) c.open = false;
      continue;
    }
    const TraceFile::Machine& m = f.MachineOf(e);
    auto& [rec, posted] = last[{e.machine, e.instance}];
    if (m.name == "car_recv" && m.events[e.event] == "post") posted = e.bytes;
    const bool arrives = m.name == "car_recv" && m.states[e.from] == "posted" &&
                         (m.events[e.event] == "envelope" || m.events[e.event] == "eager");
    // Collective traffic (odd contexts) must fill its receives exactly.
    if (arrives && (e.context & 1) != 0 && posted != 0 && e.bytes != posted) {
      v.odd_sizes.push_back(absl::StrFormat(
          "rank %d's receive from rank %d (tag %d, context %d) was posted for %d bytes but the message has %d: the "
          "ranks passed different counts or types to the same collective call",
          f.rank, e.peer, e.tag, e.context, posted, e.bytes));
    }
    rec = &e;
  }
  if (f.live_listed) {
    // The rank's own list is the truth about what lives; the ring adds since when.
    for (const Entry& e : f.live) {
      const TraceFile::Machine& m = f.MachineOf(e);
      if (IsFinal(registry, m.name, m.states[e.to])) continue;  // ended, not yet released
      const auto it = last.find({e.machine, e.instance});
      const int64_t since = it != last.end() && it->second.first->to == e.to ? it->second.first->time_ns : 0;
      v.live.push_back({f.rank, m.name, m.states[e.to], e.instance, e.context, e.peer, e.tag, e.bytes, since, e.done,
                        e.waits_on});
    }
    return v;
  }
  for (const auto& [key, val] : last) {
    const Entry& e = *val.first;
    const TraceFile::Machine& m = f.MachineOf(e);
    if (IsFinal(registry, m.name, m.states[e.to])) continue;
    v.live.push_back({f.rank, m.name, m.states[e.to], e.instance, e.context, e.peer, e.tag, e.bytes, e.time_ns});
  }
  return v;
}

std::string Ordinal(uint64_t n) {
  const char* suffix = (n % 100 >= 11 && n % 100 <= 13) ? "th" : n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
  return absl::StrCat(n, suffix);
}

std::string Ranks(const std::vector<int>& r) {
  return absl::StrCat(r.size() == 1 ? "rank " : "ranks ", absl::StrJoin(r, ", "));
}

// Whom a live CAR waits for, or -1: a receive for its sender's message, a
// rendezvous or synchronous send for its receiver to match it.
int WaitsFor(const Live& l) {
  if (l.machine == "car_recv" && (l.state == "posted" || l.state == "cts_sent" || l.state == "receiving")) return l.peer;
  if (l.machine == "car_send" && (l.state == "rts_sent" || l.state == "wait_ack" || l.state == "eager_in_flight" ||
                                   l.state == "eager_queued" || l.state == "rts_queued")) {
    return l.peer;
  }
  return -1;
}

std::string Describe(const Live& l) {
  const bool recv = l.machine == "car_recv";
  const bool queued = absl::EndsWith(l.state, "_queued");  // its method could not put it on the wire yet
  return absl::StrFormat("rank %d waits %s rank %d (tag %d, context %d, %d bytes) in %s#%d '%s'", l.rank,
                         recv     ? "for a message from"
                         : queued ? "for room on its way to"
                                  : "for its message to be taken by",
                         l.peer, l.tag, l.context, l.bytes, l.machine, l.instance, l.state);
}

}  // namespace

std::string WhyStuck(const TraceJob& job, const fsm::Registry& registry) {
  std::vector<std::string> out;
  const int size = job.ranks.empty() ? 0 : job.ranks.front().size;
  std::map<int, RankView> views;
  for (const TraceFile& f : job.ranks) views[f.rank] = View(f, registry);
  std::vector<int> silent;
  for (int r = 0; r < size; ++r) {
    if (!views.contains(r)) silent.push_back(r);
  }
  if (!silent.empty()) {
    out.push_back(absl::StrFormat("%s wrote no trace: not inside cartage's reach (crashed, killed, or never started it)",
                                  Ranks(silent)));
  }
  // Collective calls: per communicator, where each rank is.
  std::set<uint32_t> contexts;
  for (const auto& [r, v] : views) {
    for (const auto& [ctx, c] : v.last_call) contexts.insert(ctx);
  }
  for (uint32_t ctx : contexts) {
    // (open, call number, name, finalizing) -> ranks
    std::map<std::tuple<bool, uint64_t, std::string, bool>, std::vector<int>> where;
    bool any_open = false;
    for (const auto& [r, v] : views) {
      auto it = v.last_call.find(ctx);
      const Call c = it == v.last_call.end() ? Call{} : it->second;
      any_open = any_open || c.open;
      where[{c.open, c.number, c.open ? c.name : "", !c.open && v.finalizing}].push_back(r);
    }
    if (!any_open || where.size() < 2) continue;
    std::vector<std::pair<std::size_t, std::string>> parts;  // by how many ranks, most first
    for (const auto& [key, ranks] : where) {
      const auto& [open, number, name, finalizing] = key;
      const bool one = ranks.size() == 1;
      parts.emplace_back(ranks.size(),
                         open ? absl::StrFormat("%s %s in %s %s collective call (%s)", Ranks(ranks), one ? "is" : "are",
                                                one ? "its" : "their", Ordinal(number), name)
                              : absl::StrFormat("%s %s in none, having made %d%s", Ranks(ranks), one ? "is" : "are", number,
                                                finalizing ? (one ? "; it is in finalize" : "; they are in finalize") : ""));
    }
    std::stable_sort(parts.begin(), parts.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<std::string> words;
    for (const auto& p : parts) words.push_back(p.second);
    out.push_back(absl::StrFormat("collective calls on context %d disagree: %s", ctx, absl::StrJoin(words, "; ")));
  }
  for (const auto& [r, v] : views) {
    for (const std::string& s : v.odd_sizes) out.push_back(s);
    // A collective message nobody took: the ranks ran different calls (a
    // root that differs, a call one skipped, a different algorithm).
    for (const Live& l : v.live) {
      if (l.machine != "car_unexpected" || (l.context & 1) == 0) continue;
      out.push_back(absl::StrFormat(
          "rank %d holds a collective message from rank %d (tag %d, context %d, %d bytes) that none of its receives "
          "took: the ranks disagree about that call (its root, its algorithm, or whether to make it)",
          r, l.peer, l.tag, l.context, l.bytes));
    }
  }
  // Message waits: a cycle, or the ranks everyone waits for.
  std::map<int, std::vector<const Live*>> waits;
  for (const auto& [r, v] : views) {
    for (const Live& l : v.live) {
      if (WaitsFor(l) >= 0) waits[r].push_back(&l);
    }
  }
  std::set<int> in_cycle;
  for (const auto& [start, ls] : waits) {
    if (in_cycle.contains(start)) continue;
    // Follow the first wait of each rank until a rank repeats.
    std::vector<const Live*> path;
    std::map<int, std::size_t> at;
    int r = start;
    while (waits.contains(r) && !at.contains(r)) {
      at[r] = path.size();
      path.push_back(waits[r].front());
      r = WaitsFor(*path.back());
    }
    if (!at.contains(r)) continue;
    std::vector<std::string> steps;
    for (std::size_t k = at[r]; k < path.size(); ++k) {
      steps.push_back(Describe(*path[k]));
      in_cycle.insert(path[k]->rank);
    }
    out.push_back(absl::StrCat("deadlock: ", absl::StrJoin(steps, ", while "), ": each waits for the next"));
  }
  if (in_cycle.empty()) {
    std::map<int, std::vector<int>> waited;  // rank -> who waits for it
    for (const auto& [r, ls] : waits) {
      for (const Live* l : ls) waited[WaitsFor(*l)].push_back(r);
    }
    for (auto& [p, who] : waited) {
      who.erase(std::unique(who.begin(), who.end()), who.end());
      const auto it = views.find(p);
      const std::string state =
          it == views.end()           ? "wrote no trace"
          : waits.contains(p)         ? "itself waits"
          : it->second.finalizing     ? "is in finalize"
          : it->second.last_ns == 0   ? "recorded no transition at all"
          : it->second.file->live_listed
              ? absl::StrFormat("waits for no message: it answered the dump from a wait inside cartage, %.0f ms "
                                "after its last transition",
                                static_cast<double>(it->second.file->dump_ns - it->second.last_ns) / 1e6)
              : absl::StrFormat("waits for no message and did not answer the dump from inside cartage: it computes "
                                "or waits in its own code; its last transition was %.0f ms before the dump",
                                static_cast<double>(it->second.file->dump_ns - it->second.last_ns) / 1e6);
      out.push_back(absl::StrFormat("%s wait for rank %d, which %s", Ranks(who), p, state));
    }
  }
  if (out.empty()) return "no cause found: no rank waits on another and the collective calls agree\n";
  return absl::StrCat(absl::StrJoin(out, "\n"), "\n");
}

int RunWhyStuck(int argc, char** argv, const fsm::Registry& registry) {
  std::string dir, job_id;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--job" && i + 1 < argc) {
      job_id = argv[++i];
    } else if (a == "--help" || a == "-h" || (!a.empty() && a[0] == '-') || !dir.empty()) {
      std::cerr << "usage: cartage why-stuck DIR [--job ID]\n"
                   "  says why the traced job in DIR (the newest, or ID) stopped, from the dumps its\n"
                   "  ranks wrote (cartage run --trace DIR --timeout S, or SIGUSR1 to cartage run)\n";
      return a == "--help" || a == "-h" ? 0 : 2;
    } else {
      dir = a;
    }
  }
  if (dir.empty()) {
    std::cerr << "cartage why-stuck: need DIR\n";
    return 2;
  }
  absl::StatusOr<std::vector<TraceJob>> jobs = ReadTraceJobs(dir);
  if (!jobs.ok()) {
    std::cerr << "cartage why-stuck: " << jobs.status().message() << "\n";
    return 1;
  }
  const TraceJob* job = &jobs->back();
  for (const TraceJob& j : *jobs) {
    if (j.id == job_id) job = &j;
  }
  const std::string why = WhyStuck(*job, registry);
  std::cout << "job " << job->id << ":\n" << why;
  return absl::StartsWith(why, "no cause found") ? 1 : 0;
}

}  // namespace cartage::tools
