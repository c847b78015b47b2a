#include "tools/cartage/trace_cmd.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <queue>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "fsm/emit.h"
#include "fsm/trace_check.h"
#include "fsm/trace_compare.h"
#include "tools/cartage/diagrams.h"

namespace cartage::tools {

namespace {

using fsm::TraceFile;
using Entry = fsm::TraceFile::Entry;

constexpr char kUsage[] =
    "usage: cartage trace DIR [--job ID] [--out FILE]\n"
    "         merge one traced job's files (the newest, or ID) into a Trace Event Format\n"
    "         JSON for Perfetto (ui.perfetto.dev) or chrome://tracing (default FILE: DIR/<job>.json)\n"
    "       cartage trace check DIR\n"
    "         replay every job's transitions against the tables; exit 1 on any problem\n"
    "       cartage trace diagram DIR [--machine M] [--out D]\n"
    "         the state diagrams with what DIR's jobs did drawn on them: each edge's count, each\n"
    "         state's p50/p99 stay; edges never taken faint (default D: DIR/diagrams; SVG and DOT)\n"
    "       cartage trace compare DIR_A DIR_B\n"
    "         whether the newest jobs of two folders (the same traffic, a fast path on and off)\n"
    "         took the same lives, rank by rank and machine by machine; exit 1 on any difference\n"
    "DIR holds what CARTAGE_TRACE=DIR (or `cartage run --trace DIR`) wrote.\n";

std::string Json(absl::string_view s) {
  return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\\", "\\\\"}, {"\"", "\\\""}}), "\"");
}

}  // namespace

absl::StatusOr<std::vector<TraceJob>> ReadTraceJobs(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrFormat("trace: %s is not a folder", dir));
  }
  std::map<std::string, TraceJob> jobs;
  std::map<std::string, std::filesystem::file_time_type> newest;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    if (f.path().extension() != ".trace") continue;
    absl::StatusOr<TraceFile> t = fsm::ReadTraceFile(f.path().string());
    if (!t.ok()) return t.status();
    TraceJob& j = jobs[t->job];
    j.id = t->job;
    const auto when = f.last_write_time(ec);
    if (!newest.contains(t->job) || when > newest[t->job]) newest[t->job] = when;
    j.ranks.push_back(*std::move(t));
  }
  if (jobs.empty()) return absl::NotFoundError(absl::StrFormat("trace: %s holds no .trace files", dir));
  std::vector<TraceJob> out;
  for (auto& [id, j] : jobs) {
    std::sort(j.ranks.begin(), j.ranks.end(), [](const TraceFile& a, const TraceFile& b) { return a.rank < b.rank; });
    out.push_back(std::move(j));
  }
  std::sort(out.begin(), out.end(), [&](const TraceJob& a, const TraceJob& b) { return newest[a.id] < newest[b.id]; });
  return out;
}

namespace {

// One instance's life on one rank, or one collective call.
struct Life {
  int rank = 0;
  std::vector<const Entry*> recs;  // a call's: its begin and end (end null while it runs)
  int64_t begin = 0, end = 0;
  int lane = 0;
};

// Puts each life on the lowest-numbered lane free at its start.
void AssignLanes(std::vector<Life*>& lives) {
  std::sort(lives.begin(), lives.end(), [](const Life* a, const Life* b) { return a->begin < b->begin; });
  using Busy = std::pair<int64_t, int>;  // (end, lane)
  std::priority_queue<Busy, std::vector<Busy>, std::greater<>> busy;
  std::priority_queue<int, std::vector<int>, std::greater<>> free;
  int lanes = 0;
  for (Life* l : lives) {
    while (!busy.empty() && busy.top().first < l->begin) {
      free.push(busy.top().second);
      busy.pop();
    }
    if (free.empty()) free.push(lanes++);
    l->lane = free.top();
    free.pop();
    busy.push({l->end, l->lane});
  }
}

constexpr int kCallTid = 1;     // collective calls: tids 1, 2, ...
constexpr int kCarTid = 1000;   // CARs: tids 1000, 1001, ...

}  // namespace

std::string ChromeTraceJson(const TraceJob& job, const fsm::Registry& registry) {
  int64_t t0 = INT64_MAX;
  for (const TraceFile& f : job.ranks) {
    if (!f.entries.empty()) t0 = std::min(t0, f.entries.front().time_ns + f.clock_offset_ns);
  }
  if (t0 == INT64_MAX) t0 = 0;
  std::vector<std::string> events;
  auto ts = [&](const TraceFile& f, int64_t t) { return absl::StrFormat("%.3f", static_cast<double>(t + f.clock_offset_ns - t0) / 1000.0); };
  int flow_id = 0;
  // Sends by (rank, peer, context, tag), and the receive side's arrivals by
  // (rank, source, context, tag), each in time order: the k-th send pairs
  // with the k-th arrival (messages between two ranks on one context and
  // tag do not overtake one another).
  using Key = std::tuple<int, int, uint32_t, int32_t>;
  struct End {
    const TraceFile* file;
    int64_t time;
    int tid;
  };
  std::map<Key, std::vector<End>> sends, arrivals;

  for (const TraceFile& f : job.ranks) {
    events.push_back(absl::StrFormat(R"({"name":"process_name","ph":"M","pid":%d,"tid":0,"args":{"name":%s}})", f.rank,
                                     Json(absl::StrFormat("rank %d (%s, pid %d)%s", f.rank, f.host, f.pid,
                                                          f.lost > 0 ? absl::StrFormat(", %d records lost", f.lost) : ""))));
    events.push_back(absl::StrFormat(R"({"name":"process_sort_index","ph":"M","pid":%d,"tid":0,"args":{"sort_index":%d}})",
                                     f.rank, f.rank));
    // A re-armed CAR (a persistent request, a schedule's step run again)
    // starts a new life at each run: it leaves its initial state again.
    std::vector<int> initial(f.machines.size(), -1);
    const std::vector<fsm::BoundMachine> bound = fsm::BindMachines(registry, f);
    for (std::size_t m = 0; m < bound.size(); ++m) {
      if (bound[m].info == nullptr) continue;
      auto it = std::find(bound[m].state.begin(), bound[m].state.end(), bound[m].info->initial);
      if (it != bound[m].state.end()) initial[m] = static_cast<int>(it - bound[m].state.begin());
    }
    std::deque<Life> cars;
    std::map<std::pair<int32_t, uint64_t>, Life*> live;
    std::map<std::pair<uint32_t, uint64_t>, Life> calls;
    for (const Entry& e : f.entries) {
      if (e.kind == 't') {
        Life*& l = live[{e.machine, e.instance}];
        if (l == nullptr || e.from == initial[static_cast<std::size_t>(e.machine)]) {
          l = &cars.emplace_back();
          l->begin = e.time_ns;
          l->rank = f.rank;
        }
        l->end = e.time_ns;
        l->recs.push_back(&e);
      } else {
        Life& l = calls[{e.context, e.instance}];
        l.rank = f.rank;
        if (e.kind == 'b') {
          l.begin = l.end = e.time_ns;
          l.recs = {&e, nullptr};
        } else if (!l.recs.empty()) {
          l.end = e.time_ns;
          l.recs[1] = &e;
        }
      }
    }
    const int64_t last = f.entries.empty() ? 0 : f.entries.back().time_ns;
    std::vector<Life*> car_lives, call_lives;
    for (Life& l : cars) car_lives.push_back(&l);
    for (auto& [k, l] : calls) {
      if (l.recs.empty()) continue;  // its begin was lost
      if (l.recs[1] == nullptr) l.end = last;
      call_lives.push_back(&l);
    }
    AssignLanes(car_lives);
    AssignLanes(call_lives);
    int car_lanes = 0, call_lanes = 0;
    for (const Life* l : car_lives) car_lanes = std::max(car_lanes, l->lane + 1);
    for (const Life* l : call_lives) call_lanes = std::max(call_lanes, l->lane + 1);
    for (int k = 0; k < call_lanes; ++k) {
      events.push_back(absl::StrFormat(R"({"name":"thread_name","ph":"M","pid":%d,"tid":%d,"args":{"name":"collective calls%s"}})",
                                       f.rank, kCallTid + k, k == 0 ? "" : absl::StrCat(" ", k + 1)));
    }
    for (int k = 0; k < car_lanes; ++k) {
      events.push_back(absl::StrFormat(R"({"name":"thread_name","ph":"M","pid":%d,"tid":%d,"args":{"name":"CARs %d"}})",
                                       f.rank, kCarTid + k, k + 1));
      events.push_back(absl::StrFormat(R"({"name":"thread_sort_index","ph":"M","pid":%d,"tid":%d,"args":{"sort_index":%d}})",
                                       f.rank, kCarTid + k, kCarTid + k));
    }
    for (const Life* l : call_lives) {
      const Entry& b = *l->recs[0];
      const bool ended = l->recs[1] != nullptr;
      events.push_back(absl::StrFormat(
          R"({"name":%s,"cat":"collective","ph":"X","pid":%d,"tid":%d,"ts":%s,"dur":%.3f,"args":{"call":%d,"context":%d,"ended":%s}})",
          Json(f.span_names[static_cast<std::size_t>(b.peer)]), f.rank, kCallTid + l->lane, ts(f, l->begin),
          static_cast<double>(l->end - l->begin) / 1000.0, b.instance, b.context,
          !ended ? "\"no (still running when written)\"" : (l->recs[1]->ok ? "\"well\"" : "\"with an error\"")));
    }
    for (const Life* l : car_lives) {
      const int tid = kCarTid + l->lane;
      const TraceFile::Machine& m = f.MachineOf(*l->recs.front());
      auto args = [&](const Entry& e) {
        return absl::StrFormat(R"({"car":%s,"event":%s,"peer":%d,"tag":%d,"context":%d,"bytes":%d})",
                               Json(absl::StrCat(m.name, "#", e.instance)), Json(m.events[e.event]), e.peer, e.tag,
                               e.context, e.bytes);
      };
      for (std::size_t k = 0; k + 1 < l->recs.size(); ++k) {
        const Entry& e = *l->recs[k];
        events.push_back(absl::StrFormat(R"({"name":%s,"cat":%s,"ph":"X","pid":%d,"tid":%d,"ts":%s,"dur":%.3f,"args":%s})",
                                         Json(m.states[e.to]), Json(m.name), f.rank, tid, ts(f, e.time_ns),
                                         static_cast<double>(l->recs[k + 1]->time_ns - e.time_ns) / 1000.0, args(e)));
      }
      const Entry& e = *l->recs.back();
      events.push_back(absl::StrFormat(R"({"name":%s,"cat":%s,"ph":"i","s":"t","pid":%d,"tid":%d,"ts":%s,"args":%s})",
                                       Json(m.states[e.to]), Json(m.name), f.rank, tid, ts(f, e.time_ns), args(e)));
      if (m.name == "car_send") {
        // On the wire from when it starts (eager or RTS), which may be
        // later than its post: a schedule's send waits for its steps.
        for (const Entry* r : l->recs) {
          if (m.states[r->to] == "eager_in_flight" || m.states[r->to] == "rts_sent") {
            sends[{f.rank, r->peer, r->context, r->tag}].push_back({&f, r->time_ns, tid});
            break;
          }
        }
      }
    }
    // Arrivals, in record order: an unexpected message's first move, or a
    // posted receive's envelope or eager event that no hand-off raised (a
    // hand-off is an unexpected CAR's match, and the receive's event is the
    // next record: it is drawn as an arrow of its own).
    absl::flat_hash_map<const Entry*, int> tid_of;
    for (const Life* l : car_lives) {
      for (const Entry* e : l->recs) tid_of[e] = kCarTid + l->lane;
    }
    const Entry* prev = nullptr;
    for (const Entry& e : f.entries) {
      if (e.kind != 't') continue;
      const TraceFile::Machine& m = f.MachineOf(e);
      const int tid = tid_of[&e];
      const bool unexpected_arrives = m.name == "car_unexpected" && m.states[e.from] == "new";
      const bool recv_matched = m.name == "car_recv" && m.states[e.from] == "posted" &&
                                (m.events[e.event] == "envelope" || m.events[e.event] == "eager");
      const bool handed = prev != nullptr && f.MachineOf(*prev).name == "car_unexpected" &&
                          f.MachineOf(*prev).events[prev->event] == "match";
      if (unexpected_arrives || (recv_matched && !handed)) {
        arrivals[{f.rank, e.peer, e.context, e.tag}].push_back({&f, e.time_ns, tid});
      } else if (recv_matched && handed) {
        const int id = ++flow_id;
        events.push_back(absl::StrFormat(R"({"name":"hand-off","cat":"hand-off","ph":"s","id":%d,"pid":%d,"tid":%d,"ts":%s})",
                                         id, f.rank, tid_of[prev], ts(f, prev->time_ns)));
        events.push_back(absl::StrFormat(R"({"name":"hand-off","cat":"hand-off","ph":"f","bp":"e","id":%d,"pid":%d,"tid":%d,"ts":%s})",
                                         id, f.rank, tid, ts(f, e.time_ns)));
      }
      prev = &e;
    }
  }
  std::map<int, bool> lost;  // per rank: its ring dropped its oldest records
  for (const TraceFile& f : job.ranks) lost[f.rank] = f.lost > 0;
  int unpaired = 0;
  for (const auto& [key, list] : sends) {
    const auto& [rank, peer, context, tag] = key;
    auto it = arrivals.find({peer, rank, context, tag});
    if (it == arrivals.end()) continue;
    const std::size_t n = std::min(list.size(), it->second.size());
    // Where a ring dropped the oldest records, the newest pair up instead.
    const bool from_end = lost[rank] || lost[peer];
    for (std::size_t k = 0; k < n; ++k) {
      const End& s = from_end ? list[list.size() - n + k] : list[k];
      const End& r = from_end ? it->second[it->second.size() - n + k] : it->second[k];
      if (r.time + r.file->clock_offset_ns < s.time + s.file->clock_offset_ns) {
        ++unpaired;  // not this message's arrival: the records do not line up
        continue;
      }
      const int id = ++flow_id;
      const std::string name = Json(absl::StrFormat("message %d→%d tag %d", rank, peer, tag));
      events.push_back(absl::StrFormat(R"({"name":%s,"cat":"message","ph":"s","id":%d,"pid":%d,"tid":%d,"ts":%s})", name,
                                       id, rank, s.tid, ts(*s.file, s.time)));
      events.push_back(absl::StrFormat(R"({"name":%s,"cat":"message","ph":"f","bp":"e","id":%d,"pid":%d,"tid":%d,"ts":%s})",
                                       name, id, peer, r.tid, ts(*r.file, r.time)));
    }
  }
  std::string out = absl::StrCat("{\"displayTimeUnit\":\"ns\",\"otherData\":{\"job\":", Json(job.id),
                                 ",\"messages_not_drawn\":", unpaired, "},\"traceEvents\":[");
  for (std::size_t k = 0; k < events.size(); ++k) absl::StrAppend(&out, k == 0 ? "\n" : ",\n", events[k]);
  absl::StrAppend(&out, "\n]}\n");
  return out;
}

namespace {

int Check(const std::string& dir, const fsm::Registry& registry) {
  absl::StatusOr<std::vector<TraceJob>> jobs = ReadTraceJobs(dir);
  if (!jobs.ok()) {
    std::cerr << "cartage trace check: " << jobs.status().message() << "\n";
    return 1;
  }
  int bad = 0;
  uint64_t transitions = 0;
  for (const TraceJob& j : *jobs) {
    const fsm::TraceCheck c = fsm::CheckJobTrace(registry, j.ranks);
    transitions += c.transitions;
    uint64_t lost = 0;
    for (const TraceFile& f : j.ranks) lost += f.lost;
    std::cout << absl::StrFormat("job %s: %d of %d ranks, %s; %d transitions of %d instances replayed%s: %s\n", j.id,
                                 j.ranks.size(), j.ranks.front().size,
                                 c.finished ? "every one finalized" : "not every one finalized", c.transitions,
                                 c.instances, lost > 0 ? absl::StrFormat(" (%d records lost to the ring)", lost) : "",
                                 c.problems.empty() ? "as the tables say" : absl::StrCat(c.problems.size(), " problems"));
    for (std::size_t k = 0; k < c.problems.size() && k < 20; ++k) std::cout << "  " << c.problems[k] << "\n";
    if (c.problems.size() > 20) std::cout << "  ... and " << c.problems.size() - 20 << " more\n";
    if (!c.problems.empty()) ++bad;
  }
  std::cout << absl::StrFormat("cartage trace check: %d jobs, %d transitions, %d with problems\n", jobs->size(),
                               transitions, bad);
  return bad == 0 ? 0 : 1;
}

int Compare(const std::string& dir_a, const std::string& dir_b, const fsm::Registry& registry) {
  absl::StatusOr<std::vector<TraceJob>> a = ReadTraceJobs(dir_a);
  absl::StatusOr<std::vector<TraceJob>> b = a.ok() ? ReadTraceJobs(dir_b) : a;
  if (!a.ok() || !b.ok()) {
    std::cerr << "cartage trace compare: " << (a.ok() ? b : a).status().message() << "\n";
    return 1;
  }
  const TraceJob& ja = a->back();
  const TraceJob& jb = b->back();
  const fsm::TraceComparison c = fsm::CompareJobTraces(registry, ja.ranks, jb.ranks);
  if (c.differences.empty()) {
    std::cout << absl::StrFormat("jobs %s (A) and %s (B): the same %d lives and %d spans on %d ranks\n", ja.id,
                                 jb.id, c.lives, c.spans, ja.ranks.size());
    return 0;
  }
  std::cout << absl::StrFormat("jobs %s (A) and %s (B) differ in %d ways:\n", ja.id, jb.id, c.differences.size());
  for (std::size_t k = 0; k < c.differences.size() && k < 40; ++k) std::cout << "  " << c.differences[k] << "\n";
  if (c.differences.size() > 40) std::cout << "  ... and " << c.differences.size() - 40 << " more\n";
  return 1;
}

int Merge(const std::string& dir, const std::string& job_id, std::string out, const fsm::Registry& registry) {
  absl::StatusOr<std::vector<TraceJob>> jobs = ReadTraceJobs(dir);
  if (!jobs.ok()) {
    std::cerr << "cartage trace: " << jobs.status().message() << "\n";
    return 1;
  }
  const TraceJob* job = &jobs->back();
  if (!job_id.empty()) {
    auto it = std::find_if(jobs->begin(), jobs->end(), [&](const TraceJob& j) { return j.id == job_id; });
    if (it == jobs->end()) {
      std::cerr << "cartage trace: no job " << job_id << " in " << dir << "\n";
      return 1;
    }
    job = &*it;
  }
  if (out.empty()) out = absl::StrCat(dir, "/", job->id, ".json");
  std::ofstream f(out);
  f << ChromeTraceJson(*job, registry);
  if (!f.flush()) {
    std::cerr << "cartage trace: cannot write " << out << "\n";
    return 1;
  }
  std::cout << absl::StrFormat("cartage trace: job %s, %d ranks -> %s (open it in ui.perfetto.dev)\n", job->id,
                               job->ranks.size(), out);
  return 0;
}

}  // namespace

// A duration for a diagram's note.
std::string Human(int64_t ns) {
  if (ns < 10'000) return absl::StrFormat("%d ns", ns);
  if (ns < 10'000'000) return absl::StrFormat("%.1f µs", static_cast<double>(ns) / 1e3);
  return absl::StrFormat("%.1f ms", static_cast<double>(ns) / 1e6);
}

int Diagram(const std::string& dir, const std::string& only, std::string out, const fsm::Registry& registry) {
  absl::StatusOr<std::vector<TraceJob>> jobs = ReadTraceJobs(dir);
  if (!jobs.ok()) {
    std::cerr << "cartage trace diagram: " << jobs.status().message() << "\n";
    return 1;
  }
  if (!only.empty() && registry.Find(only) == nullptr) {
    std::cerr << "cartage trace diagram: no machine '" << only << "'\n";
    return 2;
  }
  struct Tally {
    fsm::LiveCounts live;
    std::vector<std::vector<int64_t>> dwell;  // per state: how long each stay lasted
    uint64_t transitions = 0;
  };
  std::map<std::string, Tally> tally;
  for (const TraceJob& j : *jobs) {
    for (const TraceFile& f : j.ranks) {
      // The file's machines bound to the tables by name.
      const std::vector<fsm::BoundMachine> bound = fsm::BindMachines(registry, f);
      std::map<std::pair<int32_t, uint64_t>, const Entry*> prev;
      for (const Entry& e : f.entries) {
        if (e.kind != 't') continue;
        const auto m = static_cast<std::size_t>(e.machine);
        const fsm::MachineInfo* mi = bound[m].info;
        if (mi == nullptr || (!only.empty() && mi->name != only)) continue;
        Tally& t = tally[std::string(mi->name)];
        if (t.live.taken.empty()) {
          t.live.taken.assign(mi->transitions.size(), 0);
          t.dwell.resize(mi->states.size());
        }
        ++t.transitions;
        const int from = bound[m].state[e.from], to = bound[m].state[e.to], ev = bound[m].event[e.event];
        for (std::size_t r = 0; r < mi->transitions.size(); ++r) {
          const fsm::TransitionInfo& row = mi->transitions[r];
          if (row.source == from && row.event == ev && row.target == to) {
            ++t.live.taken[r];
            break;
          }
        }
        const Entry*& p = prev[{e.machine, e.instance}];
        if (p != nullptr && p->to == e.from && from >= 0) {
          t.dwell[static_cast<std::size_t>(from)].push_back(e.time_ns - p->time_ns);
        }
        p = &e;
      }
    }
  }
  if (tally.empty()) {
    std::cerr << "cartage trace diagram: no transition of " << (only.empty() ? "any machine" : only) << " in " << dir
              << "\n";
    return 1;
  }
  if (out.empty()) out = absl::StrCat(dir, "/diagrams");
  std::filesystem::create_directories(out);
  for (auto& [name, t] : tally) {
    const fsm::MachineInfo& mi = *registry.Find(name);
    t.live.state_notes.resize(mi.states.size());
    for (std::size_t s = 0; s < mi.states.size(); ++s) {
      std::vector<int64_t>& d = t.dwell[s];
      if (d.empty()) continue;
      std::sort(d.begin(), d.end());
      t.live.state_notes[s] = absl::StrFormat("p50 %s, p99 %s (%d stays)", Human(d[d.size() / 2]),
                                              Human(d[std::min(d.size() - 1, d.size() * 99 / 100)]), d.size());
    }
    t.live.caption = absl::StrFormat("live: %d transitions of %d traced jobs in %s", t.transitions, jobs->size(),
                                     std::filesystem::path(dir).filename().string());
    const std::string dot = fsm::ToDot(mi, &t.live);
    std::ofstream(absl::StrCat(out, "/", name, ".dot")) << dot;
    absl::StatusOr<std::string> svg = RenderSvg(dot);
    if (!svg.ok()) {
      std::cerr << "cartage trace diagram: " << svg.status().message() << "\n";
      return 1;
    }
    std::ofstream(absl::StrCat(out, "/", name, ".svg")) << *svg;
    const uint64_t rows = static_cast<uint64_t>(std::count_if(t.live.taken.begin(), t.live.taken.end(), [](uint64_t n) { return n > 0; }));
    std::cout << absl::StrFormat("%s: %d transitions, %d of %d rows taken -> %s/%s.svg\n", name, t.transitions, rows,
                                 t.live.taken.size(), out, name);
  }
  return 0;
}

int RunTrace(int argc, char** argv, const fsm::Registry& registry) {
  std::vector<std::string> pos;
  std::string job, out, machine;
  for (int i = 0; i < argc; ++i) {
    const absl::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (a == "--job" && i + 1 < argc) {
      job = argv[++i];
    } else if (a == "--out" && i + 1 < argc) {
      out = argv[++i];
    } else if (a == "--machine" && i + 1 < argc) {
      machine = argv[++i];
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "cartage trace: unknown option '" << a << "'\n" << kUsage;
      return 2;
    } else {
      pos.emplace_back(a);
    }
  }
  if (pos.size() == 2 && pos[0] == "check") return Check(pos[1], registry);
  if (pos.size() == 3 && pos[0] == "compare") return Compare(pos[1], pos[2], registry);
  if (pos.size() == 2 && pos[0] == "diagram") return Diagram(pos[1], machine, out, registry);
  if (pos.size() == 1) return Merge(pos[0], job, out, registry);
  std::cerr << kUsage;
  return 2;
}

}  // namespace cartage::tools
