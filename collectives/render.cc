// Schedules as graphs: DOT (Graphviz) and Mermaid, for one rank or a whole
// job (every rank's schedule, with the messages between them).
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
