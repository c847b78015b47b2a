// Which steps of a built schedule need no car_vertex (Schedule::RunsWith,
// RunsAlone, RunsLast, ForwardsFrom, StartsLast): the shapes the engine runs
// without one. ScheduleBuilder::Build's part, once the graph is checked.
#include <algorithm>
#include <vector>

#include "cartage/schedule.h"

namespace cartage {

void Schedule::FindShapes(const std::vector<std::vector<std::size_t>>& succ, const std::vector<uint32_t>& indegree,
                          const std::vector<std::size_t>& order) {
  const std::size_t n = vertices_.size();
  // The steps that run with a receive (Schedule::RunsWith), found in
  // dependency order so that a chain of them after one receive is seen
  // whole: each such step is its predecessor's one successor, so the chain
  // is a line and its last step's successors are the receive CAR's.
  host_.resize(n);
  fused_.resize(n);
  for (std::size_t v : order) {
    host_[v] = static_cast<VertexId>(v);
    const Vertex& x = vertices_[v];
    if (x.kind == VertexKind::kSend || x.kind == VertexKind::kRecv || x.after.empty()) continue;
    const VertexId p = x.after.front().from;
    const auto from_p = [p](const Edge& e) { return e.from == p; };
    const auto only_v = [v](std::size_t t) { return t == v; };
    if (!std::all_of(x.after.begin(), x.after.end(), from_p) ||
        !std::all_of(succ[static_cast<std::size_t>(p)].begin(), succ[static_cast<std::size_t>(p)].end(), only_v)) {
      continue;
    }
    const VertexId h = host_[static_cast<std::size_t>(p)];
    if (vertices_[static_cast<std::size_t>(h)].kind != VertexKind::kRecv) continue;
    host_[v] = h;
    fused_[static_cast<std::size_t>(h)].push_back(static_cast<VertexId>(v));
  }
  // A local step that nothing waits for and that waits for nothing (an
  // alltoall's copy of the rank's own block) runs as a send that waits for
  // nothing starts: the first such in dependency order, which Begin starts
  // last, so that every send ready at once is on its way before it runs.
  const auto loose = [&](std::size_t v) {
    const VertexKind k = vertices_[v].kind;
    return k != VertexKind::kSend && k != VertexKind::kRecv && indegree[v] == 0 && succ[v].empty();
  };
  const auto first_send = std::find_if(order.begin(), order.end(), [&](std::size_t v) {
    return vertices_[v].kind == VertexKind::kSend && indegree[v] == 0;
  });
  if (first_send != order.end()) {
    for (std::size_t v = 0; v < n; ++v) {
      if (!loose(v)) continue;
      host_[v] = static_cast<VertexId>(*first_send);
      loose_.push_back(static_cast<VertexId>(v));
    }
    // Only a host of some: starting any other send never looks at loose_.
    if (!loose_.empty()) loose_host_ = static_cast<VertexId>(*first_send);
  }
  // The local steps that run as the run ends (Schedule::RunsLast): each
  // waits only for sends and receives that run alone and for other such
  // steps, and only such steps wait for it. The largest set that holds
  // (a send or receive runs alone only if every step after it runs last):
  // start from every local step that runs with nothing, drop those that
  // break the rule until none does.
  // A send that nothing waits for and that waits only for such steps
  // starts last (Schedule::StartsLast): they may precede it. Only where
  // every other step the run counts comes before each such send: a send
  // that starts last waits for all of them, which must add no wait the
  // graph does not have (a peer's receive that a step of this run waits
  // for could depend on it), so that no schedule waits for ever that would
  // not have before. Else no send starts last.
  bool may_start_last = true;
  const auto starts_last = [&](std::size_t t) {
    const Vertex& x = vertices_[t];
    return may_start_last && x.kind == VertexKind::kSend && succ[t].empty() && !x.after.empty() &&
           std::all_of(x.after.begin(), x.after.end(),
                       [&](const Edge& e) { return static_cast<bool>(last_[static_cast<std::size_t>(e.from)]); });
  };
  const auto all_last = [&](const std::vector<std::size_t>& steps) {
    return std::all_of(steps.begin(), steps.end(), [&](std::size_t t) { return last_[t] || starts_last(t); });
  };
  // A send that waits for one receive that waits for nothing (through its
  // last fused step, if any), and that nothing waits for, can start as that
  // receive's CAR ends (Schedule::ForwardsFrom): a bcast's forward.
  const auto forwardable = [&](std::size_t v) {
    const Vertex& x = vertices_[v];
    if (x.kind != VertexKind::kSend || x.after.size() != 1 || !succ[v].empty()) return false;
    const auto p = static_cast<std::size_t>(x.after.front().from);
    const auto h = static_cast<std::size_t>(host_[p]);
    return vertices_[h].kind == VertexKind::kRecv && p == LastOf(h) && indegree[h] == 0;
  };
  const auto could_run_alone = [&](std::size_t h) {
    if (indegree[h] != 0) return false;
    const std::vector<std::size_t>& after = succ[LastOf(h)];
    return std::all_of(after.begin(), after.end(), [&](std::size_t t) {
      return last_[t] || (vertices_[h].kind == VertexKind::kRecv && forwardable(t));
    });
  };
  const auto find_last = [&] {
    for (std::size_t v = 0; v < n; ++v) {
      const VertexKind k = vertices_[v].kind;
      last_[v] = k != VertexKind::kSend && k != VertexKind::kRecv && host_[v] == static_cast<VertexId>(v);
    }
    // Sinks first: a step dropped for its successors is seen by its
    // predecessors in the same pass.
    for (bool dropped = true; dropped;) {
      dropped = false;
      for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const std::size_t v = *it;
        if (!last_[v]) continue;
        const bool holds = all_last(succ[v]) && std::all_of(vertices_[v].after.begin(), vertices_[v].after.end(),
                                                             [&](const Edge& e) {
                                                               const auto p = static_cast<std::size_t>(e.from);
                                                               const auto h = static_cast<std::size_t>(host_[p]);
                                                               const VertexKind k = vertices_[h].kind;
                                                               if (k != VertexKind::kSend && k != VertexKind::kRecv) {
                                                                 return static_cast<bool>(last_[p]);
                                                               }
                                                               return could_run_alone(h);
                                                             });
        if (!holds) {
          last_[v] = false;
          dropped = true;
        }
      }
    }
  };
  last_.assign(n, false);
  find_last();
  // Whether every step that neither runs last nor starts last comes before `t`.
  const auto waits_for_the_rest = [&](std::size_t t) {
    std::vector<bool> before(n, false);
    std::vector<std::size_t> stack = {t};
    while (!stack.empty()) {
      const std::size_t v = stack.back();
      stack.pop_back();
      for (const Edge& e : vertices_[v].after) {
        const auto p = static_cast<std::size_t>(e.from);
        if (!before[p]) {
          before[p] = true;
          stack.push_back(p);
        }
      }
    }
    for (std::size_t v = 0; v < n; ++v) {
      if (v != t && !before[v] && !last_[v] && !starts_last(v)) return false;
    }
    return true;
  };
  for (std::size_t t = 0; t < n && may_start_last; ++t) {
    if (starts_last(t) && !waits_for_the_rest(t)) {
      may_start_last = false;
      find_last();
    }
  }
  for (std::size_t v : order) {
    if (last_[v]) run_last_.push_back(static_cast<VertexId>(v));
    if (starts_last(v)) {
      starts_last_.push_back(static_cast<VertexId>(v));
      last_bytes_ += vertices_[v].bytes;
    }
  }
  // The sends and receives that wait for nothing and release nothing but
  // steps that run last (their last fused step included) run as their
  // request's CAR alone (Schedule::RunsAlone), in the order Begin starts
  // them: sinks first, as the vertex CARs, so that a loose_host_ that runs
  // alone is the last of them started.
  alone_.assign(n, false);
  forwards_.resize(n);
  forwarded_from_.assign(n, -1);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const std::size_t v = *it;
    const VertexKind kind = vertices_[v].kind;
    if (kind != VertexKind::kSend && kind != VertexKind::kRecv) continue;
    const std::vector<VertexId>& fused = fused_[v];
    if (!could_run_alone(v)) continue;
    (kind == VertexKind::kRecv ? alone_recvs_ : alone_sends_).push_back(static_cast<VertexId>(v));
    alone_[v] = true;
    counted_bytes_ += vertices_[v].bytes;
    if (kind == VertexKind::kRecv) {
      for (std::size_t t : succ[LastOf(v)]) {
        if (last_[t]) continue;
        forwards_[v].push_back(static_cast<VertexId>(t));
        forwarded_from_[t] = static_cast<VertexId>(v);
        counted_bytes_ += vertices_[t].bytes;
        ++forwarded_;
      }
    }
    if (!fused.empty() || !forwards_[v].empty()) alone_fused_.push_back(static_cast<VertexId>(v));
  }
}

}  // namespace cartage
