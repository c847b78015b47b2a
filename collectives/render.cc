// Schedules as graphs: DOT (Graphviz) and Mermaid, for one rank or a whole
// job (every rank's schedule, with the messages between them), and a whole
// job as swim lanes (SVG: ranks as columns in rank order, rounds as rows).
#include <algorithm>
#include <map>
#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "cartage/schedule.h"

namespace cartage {

namespace {

// The lines of vertex v's label.
std::vector<std::string> LabelLines(const Schedule& s, std::size_t at) {
  const Vertex& x = s.vertices()[at];
  const auto v = static_cast<VertexId>(at);
  std::vector<std::string> lines;
  switch (x.kind) {
    case VertexKind::kSend:
      lines.push_back(absl::StrFormat("%d: send %d B to %d", v, x.bytes, x.peer));
      lines.push_back(absl::StrCat("from ", x.src.Label()));
      break;
    case VertexKind::kRecv:
      lines.push_back(absl::StrFormat("%d: recv %d B from %d", v, x.bytes, x.peer));
      lines.push_back(absl::StrCat("into ", x.dst.Label()));
      break;
    case VertexKind::kReduce:
      lines.push_back(absl::StrFormat("%d: reduce %d B (%s)", v, x.bytes, datatype::OpName(x.op->kind())));
      lines.push_back(x.src_is_left ? absl::StrCat(x.src.Label(), " op ", x.dst.Label())
                                    : absl::StrCat(x.dst.Label(), " op ", x.src.Label()));
      break;
    case VertexKind::kFence: lines.push_back(absl::StrFormat("%d: fence", v)); break;
    default:
      lines.push_back(absl::StrFormat("%d: %s %d B", v, VertexKindName(x.kind), x.bytes));
      lines.push_back(absl::StrCat(x.src.Label(), " -> ", x.dst.Label()));
  }
  if (x.chunk >= 0) lines.push_back(absl::StrFormat("chunk %d", x.chunk));
  if (!x.note.empty()) lines.push_back(x.note);
  if (s.RunsWith(v) != v) lines.push_back(absl::StrFormat("runs with %d", s.RunsWith(v)));
  if (s.RunsLast(v)) lines.push_back("runs last");
  if (s.StartsLast(v)) lines.push_back("starts last");
  if (s.ForwardsFrom(v) >= 0) lines.push_back(absl::StrFormat("starts as %d ends", s.ForwardsFrom(v)));
  return lines;
}

const char* DotStyle(VertexKind k) {
  switch (k) {
    case VertexKind::kSend: return "shape=box, style=filled, fillcolor=\"#cfe2f3\"";
    case VertexKind::kRecv: return "shape=box, style=filled, fillcolor=\"#d9ead3\"";
    case VertexKind::kReduce: return "shape=ellipse, style=filled, fillcolor=\"#fce5cd\"";
    case VertexKind::kFence: return "shape=diamond";
    default: return "shape=ellipse, style=filled, fillcolor=\"#eeeeee\"";
  }
}

const char* DotEdge(EdgeKind k) {
  switch (k) {
    case EdgeKind::kBuffer: return " [style=dashed, label=\"buffer\"]";
    case EdgeKind::kProgress: return " [style=dotted, label=\"progress\"]";
    default: return "";
  }
}

std::string DotEscape(const std::string& s) { return absl::StrReplaceAll(s, {{"\"", "\\\""}}); }
std::string MermaidEscape(const std::string& s) { return absl::StrReplaceAll(s, {{"\"", "#quot;"}}); }

std::string Title(const Schedule& s) {
  return absl::StrFormat("%s, rank %d of %d, %d vertices", s.name(), s.rank(), s.size(), s.vertices().size());
}

void DotRank(const Schedule& s, const std::string& prefix, const std::string& indent, std::string* out) {
  const auto& vs = s.vertices();
  for (std::size_t v = 0; v < vs.size(); ++v) {
    absl::StrAppendFormat(out, "%s%s%d [label=\"%s\", %s];\n", indent, prefix, v,
                          DotEscape(absl::StrJoin(LabelLines(s, v), "\\n")),
                          DotStyle(vs[v].kind));
  }
  for (std::size_t v = 0; v < vs.size(); ++v) {
    for (const Edge& e : vs[v].after) {
      absl::StrAppendFormat(out, "%s%s%d -> %s%d%s;\n", indent, prefix, e.from, prefix, v, DotEdge(e.kind));
    }
  }
}

void MermaidRank(const Schedule& s, const std::string& prefix, const std::string& indent, std::string* out) {
  const auto& vs = s.vertices();
  for (std::size_t v = 0; v < vs.size(); ++v) {
    const std::string label = MermaidEscape(absl::StrJoin(LabelLines(s, v), "<br/>"));
    const bool local = vs[v].kind != VertexKind::kSend && vs[v].kind != VertexKind::kRecv;
    absl::StrAppendFormat(out, "%s%s%d%s\"%s\"%s\n", indent, prefix, v, local ? "(" : "[", label, local ? ")" : "]");
  }
  for (std::size_t v = 0; v < vs.size(); ++v) {
    for (const Edge& e : vs[v].after) {
      if (e.kind == EdgeKind::kCompletion) {
        absl::StrAppendFormat(out, "%s%s%d --> %s%d\n", indent, prefix, e.from, prefix, v);
      } else {
        absl::StrAppendFormat(out, "%s%s%d -. %s .-> %s%d\n", indent, prefix, e.from, EdgeKindName(e.kind), prefix,
                              v);
      }
    }
  }
}

// The messages of a job: (sending rank, send vertex, receiving rank, recv
// vertex, bytes), paired by the per-peer step numbers.
std::vector<std::tuple<int, int, int, int, uint64_t>> Messages(absl::Span<const std::shared_ptr<Schedule>> ranks) {
  std::map<std::tuple<int, int, int>, int> recvs;  // (to, from, step) -> vertex
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto& vs = ranks[r]->vertices();
    for (std::size_t v = 0; v < vs.size(); ++v) {
      if (vs[v].kind == VertexKind::kRecv) recvs[{static_cast<int>(r), vs[v].peer, vs[v].ordinal}] = static_cast<int>(v);
    }
  }
  std::vector<std::tuple<int, int, int, int, uint64_t>> out;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto& vs = ranks[r]->vertices();
    for (std::size_t v = 0; v < vs.size(); ++v) {
      if (vs[v].kind != VertexKind::kSend) continue;
      auto it = recvs.find({vs[v].peer, static_cast<int>(r), vs[v].ordinal});
      if (it != recvs.end()) out.emplace_back(static_cast<int>(r), static_cast<int>(v), vs[v].peer, it->second, vs[v].bytes);
    }
  }
  return out;
}

}  // namespace

std::string Schedule::ToDot() const {
  std::string out = absl::StrFormat("digraph schedule {\n  label=\"%s\";\n  labelloc=t;\n  node [fontsize=10];\n",
                                    DotEscape(Title(*this)));
  DotRank(*this, "v", "  ", &out);
  out += "}\n";
  return out;
}

std::string Schedule::ToMermaid() const {
  std::string out = absl::StrFormat("---\ntitle: %s\n---\nflowchart TD\n", Title(*this));
  MermaidRank(*this, "v", "  ", &out);
  return out;
}

std::string JobToDot(absl::Span<const std::shared_ptr<Schedule>> ranks) {
  std::string out = "digraph job {\n  newrank=true;\n  node [fontsize=10];\n";
  if (!ranks.empty()) {
    absl::StrAppendFormat(&out, "  label=\"%s, %d ranks\";\n  labelloc=t;\n", DotEscape(ranks[0]->name()),
                          ranks.size());
  }
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    absl::StrAppendFormat(&out, "  subgraph cluster_rank%d {\n    label=\"rank %d\";\n", r, r);
    DotRank(*ranks[r], absl::StrFormat("r%dv", r), "    ", &out);
    out += "  }\n";
  }
  for (const auto& [from, sv, to, rv, bytes] : Messages(ranks)) {
    absl::StrAppendFormat(&out, "  r%dv%d -> r%dv%d [color=\"#3c78d8\", penwidth=2, xlabel=\"%d B\"];\n", from, sv, to,
                          rv, bytes);
  }
  out += "}\n";
  return out;
}

std::string JobToLanesSvg(absl::Span<const std::shared_ptr<Schedule>> ranks) {
  // Rounds: a step's round is one more than the latest of what it waits
  // for, on its rank or (a receive) its message's send on another; the
  // job's steps and messages form a graph without cycles, so relaxing it
  // as many times as it has steps settles every round.
  const int n = static_cast<int>(ranks.size());
  std::vector<std::vector<int>> round(ranks.size());
  for (int r = 0; r < n; ++r) round[static_cast<std::size_t>(r)].assign(ranks[static_cast<std::size_t>(r)]->vertices().size(), 0);
  const auto messages = Messages(ranks);
  std::map<std::pair<int, int>, std::pair<int, int>> sender_of;  // (rank, recv vertex) -> (rank, send vertex)
  for (const auto& [from, sv, to, rv, bytes] : messages) sender_of[{to, rv}] = {from, sv};
  std::size_t total = 0;
  for (const auto& r : round) total += r.size();
  for (std::size_t pass = 0; pass <= total; ++pass) {
    bool changed = false;
    for (int r = 0; r < n; ++r) {
      const auto& vs = ranks[static_cast<std::size_t>(r)]->vertices();
      auto& rr = round[static_cast<std::size_t>(r)];
      for (std::size_t v = 0; v < vs.size(); ++v) {
        int at = 0;
        for (const Edge& e : vs[v].after) at = std::max(at, rr[static_cast<std::size_t>(e.from)] + 1);
        if (auto it = sender_of.find({r, static_cast<int>(v)}); it != sender_of.end()) {
          at = std::max(at, round[static_cast<std::size_t>(it->second.first)][static_cast<std::size_t>(it->second.second)] + 1);
        }
        if (at != rr[v]) {
          rr[v] = at;
          changed = true;
        }
      }
    }
    if (!changed) break;
  }
  // Rows: a round has as many rows as its busiest rank has steps in it.
  int rounds = 0;
  for (const auto& rr : round) {
    for (int x : rr) rounds = std::max(rounds, x + 1);
  }
  std::vector<int> rows_in(static_cast<std::size_t>(rounds), 1);
  std::vector<std::vector<int>> slot(ranks.size());  // per vertex: its row within its round
  for (int r = 0; r < n; ++r) {
    const auto& rr = round[static_cast<std::size_t>(r)];
    std::vector<int> used(static_cast<std::size_t>(rounds), 0);
    for (int x : rr) slot[static_cast<std::size_t>(r)].push_back(used[static_cast<std::size_t>(x)]++);
    for (int k = 0; k < rounds; ++k) rows_in[static_cast<std::size_t>(k)] = std::max(rows_in[static_cast<std::size_t>(k)], used[static_cast<std::size_t>(k)]);
  }
  std::vector<int> first_row(static_cast<std::size_t>(rounds) + 1, 0);
  for (int k = 0; k < rounds; ++k) first_row[static_cast<std::size_t>(k) + 1] = first_row[static_cast<std::size_t>(k)] + rows_in[static_cast<std::size_t>(k)];
  constexpr int kCol = 150, kRow = 34, kBoxW = 126, kBoxH = 24, kLeft = 70, kTop = 60;
  const int width = kLeft + n * kCol + 20, height = kTop + first_row.back() * kRow + 20;
  auto cx = [&](int r) { return kLeft + r * kCol + kCol / 2; };
  auto cy = [&](int r, int v) {
    const auto rv = static_cast<std::size_t>(v);
    return kTop + (first_row[static_cast<std::size_t>(round[static_cast<std::size_t>(r)][rv])] + slot[static_cast<std::size_t>(r)][rv]) * kRow + kRow / 2;
  };
  std::string out = absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"Helvetica,sans-serif\" "
      "font-size=\"10\">\n<defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"6\" "
      "markerHeight=\"6\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"#3c78d8\"/></marker></defs>\n"
      "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
      width, height);
  if (!ranks.empty()) {
    absl::StrAppendFormat(&out, "<text x=\"%d\" y=\"18\" font-size=\"13\">%s, %d ranks: ranks as columns, rounds as rows, messages as arrows</text>\n",
                          kLeft, ranks[0]->name(), n);
  }
  for (int k = 0; k < rounds; ++k) {
    const int y = kTop + first_row[static_cast<std::size_t>(k)] * kRow;
    if (k % 2 == 1) {
      absl::StrAppendFormat(&out, "<rect x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f4f6f8\"/>\n", y, width,
                            rows_in[static_cast<std::size_t>(k)] * kRow);
    }
    absl::StrAppendFormat(&out, "<text x=\"8\" y=\"%d\" fill=\"#777\">round %d</text>\n", y + kRow / 2 + 4, k);
  }
  for (int r = 0; r < n; ++r) {
    absl::StrAppendFormat(&out, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">rank %d</text>\n", cx(r),
                          kTop - 12, r);
    absl::StrAppendFormat(&out, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#ccc\"/>\n", cx(r), kTop - 6,
                          cx(r), height - 10);
  }
  for (int r = 0; r < n; ++r) {
    const Schedule& s = *ranks[static_cast<std::size_t>(r)];
    for (std::size_t v = 0; v < s.vertices().size(); ++v) {
      const Vertex& x = s.vertices()[v];
      const std::string label =
          x.kind == VertexKind::kSend   ? absl::StrFormat("%d: send %d B to %d", v, x.bytes, x.peer)
          : x.kind == VertexKind::kRecv ? absl::StrFormat("%d: recv %d B from %d", v, x.bytes, x.peer)
          : x.kind == VertexKind::kFence ? absl::StrFormat("%d: fence", v)
                                         : absl::StrFormat("%d: %s %d B", v, VertexKindName(x.kind), x.bytes);
      const char* fill = x.kind == VertexKind::kSend ? "#dbe8fb" : x.kind == VertexKind::kRecv ? "#e3f3e1" : "#fdf1d8";
      absl::StrAppendFormat(&out,
                            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" rx=\"4\" fill=\"%s\" stroke=\"#888\"/>"
                            "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n",
                            cx(r) - kBoxW / 2, cy(r, static_cast<int>(v)) - kBoxH / 2, kBoxW, kBoxH, fill, cx(r),
                            cy(r, static_cast<int>(v)) + 4, label);
    }
  }
  for (const auto& [from, sv, to, rv, bytes] : messages) {
    const int x1 = cx(from) + (to > from ? kBoxW / 2 : -kBoxW / 2), y1 = cy(from, sv);
    const int x2 = cx(to) + (to > from ? -kBoxW / 2 : kBoxW / 2), y2 = cy(to, rv);
    absl::StrAppendFormat(&out,
                          "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#3c78d8\" stroke-width=\"1.5\" "
                          "marker-end=\"url(#arrow)\"/>\n",
                          x1, y1, x2, y2);
  }
  out += "</svg>\n";
  return out;
}

std::string JobToMermaid(absl::Span<const std::shared_ptr<Schedule>> ranks) {
  std::string out;
  if (!ranks.empty()) absl::StrAppendFormat(&out, "---\ntitle: %s, %d ranks\n---\n", ranks[0]->name(), ranks.size());
  out += "flowchart TD\n";
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    absl::StrAppendFormat(&out, "  subgraph rank%d [rank %d]\n", r, r);
    MermaidRank(*ranks[r], absl::StrFormat("r%dv", r), "    ", &out);
    out += "  end\n";
  }
  for (const auto& [from, sv, to, rv, bytes] : Messages(ranks)) {
    absl::StrAppendFormat(&out, "  r%dv%d == %d B ==> r%dv%d\n", from, sv, bytes, to, rv);
  }
  return out;
}

}  // namespace cartage
