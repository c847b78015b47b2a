// The engine's set-up of a validated schedule: its temporary buffers, which
// steps need no car_vertex of their own (schedule_shapes.cc), the bursts of
// large sends that go single-copy, and a car_vertex CAR for every other
// step, linked to its successors. schedule_engine.cc runs what this builds.
#include <atomic>
#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "car/vertex_fsm.h"
#include "cartage/schedule.h"
#include "collectives/schedule_graph.h"

namespace cartage {

absl::StatusOr<std::shared_ptr<Schedule>> Schedule::SetUp(const ScheduleBuilder& b,
                                                            const internal::ScheduleGraph& g) {
  const std::vector<std::vector<std::size_t>>& succ = g.succ;
  const std::vector<uint32_t>& indegree = g.indegree;
  const std::vector<std::size_t>& order = g.order;
  const std::size_t n = order.size();
  auto s = std::shared_ptr<Schedule>(new Schedule());
  static std::atomic<uint64_t> runs{0};  // schedule_run instances: one per schedule in the process
  s->run_id_ = runs.fetch_add(1, std::memory_order_relaxed) + 1;
  s->comm_ = b.comm_;
  s->name_ = b.name_;
  s->explain_ = b.explain_;
  s->span_ = b.span_.empty() ? b.name_ : b.span_;
  s->rank_ = b.rank_;
  s->size_ = b.size_;
  s->sequence_ = b.sequence_.has_value()  ? *b.sequence_
                 : b.comm_.has_value() ? engine::NextScheduleSequence(*b.comm_)
                                       : 0;
  s->vertices_ = b.vertices_;
  s->temp_sizes_ = b.temps_;
  s->temp_lenders_ = b.lenders_;
  for (std::size_t t = 0; t < s->temp_sizes_.size(); ++t) {
    const uint64_t bytes = std::max<uint64_t>(s->temp_sizes_[t], 1);
    if (s->temp_lenders_[t] < 0 || !s->comm_.has_value()) {
      s->temps_.emplace_back(new std::byte[bytes](), std::default_delete<std::byte[]>());
      continue;
    }
    absl::StatusOr<std::shared_ptr<std::byte>> lent = s->comm_->LendBuffer(s->temp_lenders_[t], bytes);
    if (!lent.ok()) {
      return absl::Status(lent.status().code(), absl::StrFormat("schedule %s (rank %d): temporary buffer %d: %s",
                                                                s->name_, s->rank_, t, lent.status().message()));
    }
    s->temps_.push_back(*std::move(lent));
  }
  s->FindShapes(succ, indegree, order);
  s->scratch_.resize(n);
  for (std::size_t v = 0; v < n; ++v) {
    const Vertex& x = s->vertices_[v];
    if (x.kind == VertexKind::kReduce && !x.src_is_left && !x.op->commutative()) s->scratch_[v].resize(x.bytes);
  }
  if (!s->comm_.has_value()) return s;

  // A burst: Schedule::kBurstSends or more sends larger than
  // Schedule::kBurstEagerCap that wait for nothing, so start together as the
  // run begins (a linear alltoall or allgather of large blocks from 4 ranks,
  // a binomial bcast's root from 8).
  // Each goes by rendezvous where its path moves one with a single copy:
  // eager, a burst's two copies each outgrow the caches (cartage-bench
  // alltoall 64 KiB); a chain's one send at a time stays eager.
  s->single_copy_.assign(n, false);
  std::vector<std::size_t> burst;
  for (std::size_t v = 0; v < n; ++v) {
    const Vertex& x = s->vertices_[v];
    if (x.kind == VertexKind::kSend && indegree[v] == 0 && x.bytes > Schedule::kBurstEagerCap) burst.push_back(v);
  }
  if (burst.size() >= Schedule::kBurstSends) {
    for (std::size_t v : burst) {
      const absl::StatusOr<PathInfo> path = s->comm_->PathTo(s->vertices_[v].peer);
      s->single_copy_[v] = path.ok() && path->single_copy && path->eager_limit > Schedule::kBurstEagerCap;
    }
  }

  // The vertices as car_vertex CARs; a CAR's private area holds its number.
  s->pool_ = std::make_unique<car::CarPool>(car::CarPool::Options{
      .method_private_bytes = sizeof(VertexId), .cars_per_slab = std::max<std::size_t>(n, 1), .max_cars = 0});
  s->successors_.resize(n);
  s->cars_.assign(n, nullptr);
  s->reqs_ = std::make_unique<Schedule::StepRequest[]>(n);
  static const car::Vc kVertexVc{
      .name = "schedule", .launch = &Schedule::LaunchVertex, .drain = &Schedule::DrainVertex};
  // Sinks first, so that every CAR can name its successors when created. A
  // receive's CAR releases what its last fused step would have.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const std::size_t v = *it;
    if (s->host_[v] != static_cast<VertexId>(v)) continue;
    for (std::size_t t : succ[s->LastOf(v)]) s->successors_[v].push_back(s->cars_[t]);
    if (s->RunsAlone(static_cast<VertexId>(v)) || s->RunsLast(static_cast<VertexId>(v)) ||
        s->ForwardsFrom(static_cast<VertexId>(v)) >= 0 || s->StartsLast(static_cast<VertexId>(v))) {
      continue;
    }
    car::CarSpec spec;
    spec.kind = car::CarKind::kVertex;
    spec.counter = &s->done_;
    spec.vc = &kVertexVc;
    spec.successors = s->successors_[v];
    spec.predecessors = indegree[v];
    spec.owner = s.get();
    CARTAGE_ASSIGN_OR_RETURN(car::Car * c, s->pool_->Create(spec));
    *static_cast<VertexId*>(c->method_private()) = static_cast<VertexId>(v);
    s->cars_[v] = c;
    s->runners_.push_back(c);
  }
  for (std::size_t v = 0; v < n; ++v) s->cars_[v] = s->cars_[static_cast<std::size_t>(s->host_[v])];
  // Begin starts the receives first (each posts its receive), then the
  // rest: a peer's message then finds its receive posted more often than
  // not, and the stores of posting the receives land before a send's ring
  // line is taken from the peer polling it (a store that waits for that
  // line holds up every store behind it). Starting order among vertices
  // that are all ready changes nothing else: each waits for its own
  // predecessors whatever its place.
  s->start_order_ = s->runners_;
  std::stable_partition(s->start_order_.begin(), s->start_order_.end(), [&](car::Car* c) {
    return s->vertices_[static_cast<std::size_t>(*static_cast<const VertexId*>(c->method_private()))].kind ==
           VertexKind::kRecv;
  });
  return s;
}

}  // namespace cartage
