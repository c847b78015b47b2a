#include "fsm/trace_file.h"

#include <cstdio>
#include <fstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace cartage::fsm {

absl::Status WriteTraceFile(const std::string& path, const TraceFile& h, const TraceRing::Snapshot& snap,
                            const std::vector<LiveCar>* live) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return absl::UnavailableError(absl::StrFormat("trace: cannot write %s", tmp));
  std::string out;
  absl::StrAppend(&out, "cartage-trace 1\njob ", h.job, "\nrank ", h.rank, "\nsize ", h.size, "\nhost ", h.host,
                  "\npid ", h.pid, "\nclock_offset_ns ", h.clock_offset_ns, "\ncapacity ", h.capacity,
                  "\nrecorded ", snap.recorded, "\nlost ", snap.lost(), "\nend ", h.end, "\ndump_ns ", h.dump_ns,
                  "\nlive_listed ", live != nullptr ? 1 : 0, "\n");
  absl::flat_hash_map<const MachineNames*, int> index;
  auto declare = [&](const MachineNames* m) {
    if (m == nullptr || index.contains(m)) return;
    const int i = static_cast<int>(index.size());
    index[m] = i;
    std::vector<absl::string_view> events;
    for (const EventSpec& e : m->events) events.push_back(e.name);
    absl::StrAppend(&out, "machine ", i, " ", m->machine, " ", absl::StrJoin(m->states, ","), " ",
                    absl::StrJoin(events, ","), "\n");
  };
  for (const TraceRecord& r : snap.records) declare(r.machine);
  if (live != nullptr) {
    for (const LiveCar& l : *live) declare(l.at.machine);
  }
  for (std::size_t i = 0; i < snap.span_names.size(); ++i) absl::StrAppend(&out, "span ", i, " ", snap.span_names[i], "\n");
  for (const TraceRecord& r : snap.records) {
    if (r.machine != nullptr) {
      absl::StrAppend(&out, "t ", r.time_ns, " ", index[r.machine], " ", r.instance, " ", r.from, " ", r.event, " ",
                      r.to, " ", r.context, " ", r.peer, " ", r.tag, " ", r.bytes, "\n");
    } else if (r.from == 0) {
      absl::StrAppend(&out, "b ", r.time_ns, " ", r.instance, " ", r.context, " ", r.peer, "\n");
    } else {
      absl::StrAppend(&out, "e ", r.time_ns, " ", r.instance, " ", r.context, " ", r.peer, " ", r.event, "\n");
    }
    if (out.size() > (1 << 20)) {
      std::fwrite(out.data(), 1, out.size(), f);
      out.clear();
    }
  }
  if (live != nullptr) {
    for (const LiveCar& l : *live) {
      const TraceRecord& r = l.at;
      absl::StrAppend(&out, "l ", r.time_ns, " ", index[r.machine], " ", r.instance, " ", r.to, " ", r.context, " ",
                      r.peer, " ", r.tag, " ", r.bytes, " ", l.done, " ", l.waits_on, "\n");
    }
  }
  std::fwrite(out.data(), 1, out.size(), f);
  const bool ok = std::ferror(f) == 0;
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::UnavailableError(absl::StrFormat("trace: cannot write %s", path));
  }
  return absl::OkStatus();
}

namespace {

template <class T>
bool Num(absl::string_view s, T* out) {
  if constexpr (std::is_same_v<T, uint8_t>) {
    uint32_t v = 0;
    if (!absl::SimpleAtoi(s, &v) || v > 255) return false;
    *out = static_cast<uint8_t>(v);
    return true;
  } else {
    return absl::SimpleAtoi(s, out);
  }
}

}  // namespace

absl::StatusOr<TraceFile> ReadTraceFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrFormat("trace: cannot read %s", path));
  TraceFile t;
  std::string line;
  int n = 0;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrFormat("trace: %s:%d: %s: '%s'", path, n, why, line));
  };
  while (std::getline(in, line)) {
    ++n;
    if (n == 1) {
      if (line != "cartage-trace 1") return bad("not a cartage trace (version 1)");
      continue;
    }
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (f.empty()) continue;
    const absl::string_view k = f[0];
    if (k == "t") {
      TraceFile::Entry e;
      if (f.size() != 11 || !Num(f[1], &e.time_ns) || !Num(f[2], &e.machine) || !Num(f[3], &e.instance) ||
          !Num(f[4], &e.from) || !Num(f[5], &e.event) || !Num(f[6], &e.to) || !Num(f[7], &e.context) ||
          !Num(f[8], &e.peer) || !Num(f[9], &e.tag) || !Num(f[10], &e.bytes)) {
        return bad("malformed transition");
      }
      if (e.machine < 0 || static_cast<std::size_t>(e.machine) >= t.machines.size()) return bad("undeclared machine");
      const TraceFile::Machine& m = t.MachineOf(e);
      if (e.from >= m.states.size() || e.to >= m.states.size() || e.event >= m.events.size()) {
        return bad("state or event out of its machine's range");
      }
      t.entries.push_back(e);
    } else if (k == "l") {
      TraceFile::Entry e;
      e.kind = 'l';
      if (f.size() != 11 || !Num(f[1], &e.time_ns) || !Num(f[2], &e.machine) || !Num(f[3], &e.instance) ||
          !Num(f[4], &e.to) || !Num(f[5], &e.context) || !Num(f[6], &e.peer) || !Num(f[7], &e.tag) ||
          !Num(f[8], &e.bytes) || !Num(f[9], &e.done) || !Num(f[10], &e.waits_on)) {
        return bad("malformed live CAR");
      }
      if (e.machine < 0 || static_cast<std::size_t>(e.machine) >= t.machines.size()) return bad("undeclared machine");
      if (e.to >= t.MachineOf(e).states.size()) return bad("state out of its machine's range");
      e.from = e.to;
      t.live.push_back(e);
    } else if (k == "b" || k == "e") {
      TraceFile::Entry e;
      e.kind = k[0];
      int ok = 1;
      if (f.size() != (k == "b" ? 5u : 6u) || !Num(f[1], &e.time_ns) || !Num(f[2], &e.instance) ||
          !Num(f[3], &e.context) || !Num(f[4], &e.peer) || (k == "e" && !Num(f[5], &ok))) {
        return bad("malformed span");
      }
      if (e.peer < 0 || static_cast<std::size_t>(e.peer) >= t.span_names.size()) return bad("undeclared span name");
      e.ok = ok != 0;
      t.entries.push_back(e);
    } else if (k == "machine") {
      int i = 0;
      if (f.size() != 5 || !Num(f[1], &i) || i != static_cast<int>(t.machines.size())) return bad("malformed machine");
      t.machines.push_back({std::string(f[2]), absl::StrSplit(f[3], ','), absl::StrSplit(f[4], ',')});
    } else if (k == "span") {
      // The name is the rest of the line (a schedule's name may have spaces).
      std::vector<absl::string_view> g = absl::StrSplit(line, absl::MaxSplits(' ', 2));
      int i = 0;
      if (g.size() != 3 || !Num(g[1], &i) || i != static_cast<int>(t.span_names.size())) return bad("malformed span name");
      t.span_names.emplace_back(g[2]);
    } else if (f.size() == 2) {
      bool ok = true;
      if (k == "job") t.job = std::string(f[1]);
      else if (k == "host") t.host = std::string(f[1]);
      else if (k == "end") t.end = std::string(f[1]);
      else if (k == "rank") ok = Num(f[1], &t.rank);
      else if (k == "size") ok = Num(f[1], &t.size);
      else if (k == "pid") ok = Num(f[1], &t.pid);
      else if (k == "clock_offset_ns") ok = Num(f[1], &t.clock_offset_ns);
      else if (k == "capacity") ok = Num(f[1], &t.capacity);
      else if (k == "recorded") ok = Num(f[1], &t.recorded);
      else if (k == "lost") ok = Num(f[1], &t.lost);
      else if (k == "dump_ns") ok = Num(f[1], &t.dump_ns);
      else if (k == "live_listed") {
        int v = 0;
        ok = Num(f[1], &v) && (v == 0 || v == 1);
        t.live_listed = v == 1;
      }
      else return bad("unknown header field");
      if (!ok) return bad("malformed number");
    } else {
      return bad("unknown line");
    }
  }
  if (n == 0) return absl::InvalidArgumentError(absl::StrFormat("trace: %s is empty", path));
  if (t.job.empty() || t.end.empty()) return absl::InvalidArgumentError(absl::StrFormat("trace: %s has no job or end line", path));
  return t;
}

}  // namespace cartage::fsm
