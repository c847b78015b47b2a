// Collective schedules as CAR graphs. A schedule is a DAG of vertices (send,
// receive, local reduce, copy, pack, unpack, fence) joined by dependency
// edges; every vertex runs as a car_vertex CAR (car/vertex_fsm.h), so its
// states are the table's and `cartage diagrams` draws them (a local step
// that only follows a receive runs in that receive's CAR, and one that
// neither follows nor precedes anything in a send's: RunsWith; a send or
// receive that neither follows nor precedes anything runs as its own
// car_send or car_recv alone: RunsAlone). Built once, validated, started as
// often as needed.
//
//   cartage::ScheduleBuilder b(world, "ring step");
//   cartage::Buf tmp = b.Temp(n * sizeof(double));
//   auto r = b.Recv(tmp, n * sizeof(double), left);
//   auto s = b.Send(cartage::Buf::User(x.data(), "x"), n * sizeof(double), right);
//   b.Reduce(tmp, cartage::Buf::User(x.data(), "x"), n, dbl, sum, {r, s});
//   auto schedule = b.Build();                       // no cycle, sizes agree
//   cartage::Request req;
//   CARTAGE_CHECK_OK((*schedule)->Start(&req));
//   CARTAGE_CHECK_OK(req.Wait());
//   std::cout << (*schedule)->ToDot();
//
// Traffic: a schedule sends on its communicator's collective context, with
// tags made of the schedule's sequence number (engine::NextScheduleSequence)
// and a per-peer step number, so schedules in flight at once on one
// communicator, and point-to-point traffic, never match each other's
// messages. Every rank must build its schedules in the same order.
#ifndef CARTAGE_COLLECTIVES_INCLUDE_CARTAGE_SCHEDULE_H_
#define CARTAGE_COLLECTIVES_INCLUDE_CARTAGE_SCHEDULE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "car/car_pool.h"
#include "fsm/registry.h"
#include "datatype/op.h"
#include "cartage/cartage.h"
#include "cartage/engine.h"

namespace cartage {

namespace internal {
struct ScheduleGraph;
struct RunDef;
struct RunActions;
}  // namespace internal

using Op = datatype::Op;
using OpKind = datatype::OpKind;

// Memory a vertex reads or writes: user memory (named for rendering), or a
// temporary buffer the schedule owns (ScheduleBuilder::Temp), at an offset.
struct Buf {
  void* user = nullptr;
  int temp = -1;  // >= 0: the schedule's temporary buffer number
  uint64_t offset = 0;
  const char* name = "user";  // user memory: how diagrams call it

  static Buf User(const void* p, const char* name = "user") { return {const_cast<void*>(p), -1, 0, name}; }
  Buf operator+(uint64_t n) const {
    Buf b = *this;
    b.offset += n;
    return b;
  }
  bool is_temp() const { return temp >= 0; }
  // How errors and diagrams name it: "tmp2+64", "recv+0".
  std::string Label() const;
};

enum class VertexKind : uint8_t { kSend, kRecv, kReduce, kCopy, kPack, kUnpack, kFence };
// "send", "recv", "reduce", "copy", "pack", "unpack", "fence".
const char* VertexKindName(VertexKind k);

// Why a vertex waits for another (seed 002): its completion, the buffer it
// fills (buf_dep: a forward sends what a receive brought in), or a progress
// dependency (progress_dep). All three order the two vertices; the kind
// says why, and diagrams draw it.
enum class EdgeKind : uint8_t { kCompletion, kBuffer, kProgress };
const char* EdgeKindName(EdgeKind k);

using VertexId = int;

struct Edge {
  VertexId from;
  EdgeKind kind;
};

// One step of a schedule.
struct Vertex {
  VertexKind kind = VertexKind::kFence;
  int peer = -1;       // send, recv: the rank of the communicator
  int ordinal = 0;     // send, recv: the n-th message to / from this peer in the schedule
  Buf src;             // send: what; reduce: the incoming operand; copy, pack, unpack: from
  Buf dst;             // recv: where; reduce: the accumulator; copy, pack, unpack: to
  uint64_t bytes = 0;  // packed bytes moved or reduced
  int64_t count = 0;   // reduce, pack, unpack: elements of `type`
  uint64_t first = 0;  // pack, unpack: where `bytes` start in the packed form of the `count` elements
  std::optional<Datatype> type;
  std::optional<Op> op;
  bool src_is_left = true;  // reduce: dst = src op dst; else dst = dst op src
  int chunk = -1;           // >= 0: which chunk of a cut-up transfer
  std::string note;         // the algorithm's name for the step, for diagrams
  std::vector<Edge> after;  // what it waits for
};

class Schedule;

// Builds one rank's schedule. With a communicator it builds one to run;
// with only (rank, size) one to render (`cartage schedule`), where user
// buffers may be null.
class ScheduleBuilder {
 public:
  ScheduleBuilder(const Comm& comm, std::string name);
  ScheduleBuilder(int rank, int size, std::string name);

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  // The communicator it builds for; null for a schedule to render.
  const Comm* comm() const { return comm_.has_value() ? &*comm_ : nullptr; }

  // A temporary buffer of `bytes`, owned by the schedule (freed with it,
  // never while a run that uses it is in flight).
  Buf Temp(uint64_t bytes);
  // The same, lent by the method that reaches `peer` (Comm::LendBuffer):
  // memory that method moves data from and into as it is.
  Buf LentTemp(uint64_t bytes, int peer);

  VertexId Send(Buf src, uint64_t bytes, int peer, absl::Span<const VertexId> after = {});
  VertexId Recv(Buf dst, uint64_t bytes, int peer, absl::Span<const VertexId> after = {});
  // inout = in op inout over `count` packed elements of `type` (in_is_left
  // false: inout = inout op in, for non-commutative operators).
  VertexId Reduce(Buf in, Buf inout, int64_t count, const Datatype& type, const Op& op,
                  absl::Span<const VertexId> after = {}, bool in_is_left = true);
  VertexId Copy(Buf src, Buf dst, uint64_t bytes, absl::Span<const VertexId> after = {});
  // `count` elements of `type` laid out at `layout` <-> packed bytes.
  VertexId Pack(Buf layout, int64_t count, const Datatype& type, Buf packed, absl::Span<const VertexId> after = {});
  VertexId Unpack(Buf packed, int64_t count, const Datatype& type, Buf layout,
                  absl::Span<const VertexId> after = {});
  // Only bytes [first, last) of the packed form of the `count` elements.
  VertexId PackRange(Buf layout, int64_t count, const Datatype& type, uint64_t first, uint64_t last, Buf packed,
                     absl::Span<const VertexId> after = {});
  VertexId UnpackRange(Buf packed, int64_t count, const Datatype& type, uint64_t first, uint64_t last, Buf layout,
                       absl::Span<const VertexId> after = {});
  // Does nothing; joins dependencies.
  VertexId Fence(absl::Span<const VertexId> after = {});

  // An edge more: `later` waits for `earlier` (where it did already, a
  // completion edge takes `kind`).
  void Depend(VertexId earlier, VertexId later, EdgeKind kind = EdgeKind::kCompletion);
  // Labels for diagrams.
  void Note(VertexId v, std::string note);
  void Chunk(VertexId v, int chunk);

  const std::vector<Vertex>& vertices() const { return vertices_; }

  // Builds with this sequence number instead of the communicator's next
  // one (a rebuilt schedule that takes the place of an identical one).
  void UseSequence(uint32_t sequence) { sequence_ = sequence; }
  // Why this algorithm (ExplainSelection), printed at each run under
  // CARTAGE_COLL_EXPLAIN=all.
  void Explain(std::string why) { explain_ = std::move(why); }
  // What its runs are called in a trace (CARTAGE_TRACE) where not its name:
  // a rooted collective's name and root, so that ranks that disagree about
  // the root show it (`cartage why-stuck`).
  void Span(std::string span) { span_ = std::move(span); }

  // Validates and builds: no cycles, every read of a temporary buffer comes
  // after a write covering it, sizes agree with buffers, types and
  // operators, peers exist. The error names the schedule and the vertex.
  absl::StatusOr<std::shared_ptr<Schedule>> Build();

 private:
  friend class Schedule;  // SetUp reads what was built
  VertexId Add(Vertex v, absl::Span<const VertexId> after);
  VertexId Message(VertexKind kind, Buf at, uint64_t bytes, int peer, absl::Span<const VertexId> after);
  VertexId Typed(VertexKind kind, Buf src, Buf dst, int64_t count, const Datatype& type,
                 absl::Span<const VertexId> after);
  std::optional<Comm> comm_;
  int rank_;
  int size_;
  std::string name_;
  std::vector<Vertex> vertices_;
  std::vector<uint64_t> temps_;      // sizes
  std::vector<int> lenders_;         // per temporary: the peer whose method lends it, or -1
  std::vector<int> sends_to_;        // per peer: sends so far (the next step number)
  std::vector<int> recvs_from_;
  std::optional<uint32_t> sequence_;
  std::string explain_;
  std::string span_;
  // Build's validation (schedule_validate.cc): an error naming the schedule
  // and vertex `v`; one buffer's bounds; every vertex; the dependency order
  // (no cycle); reads of temporary buffers covered by earlier writes.
  absl::Status Bad(std::size_t v, const std::string& why) const;
  absl::Status CheckBuf(std::size_t v, const Buf& b, uint64_t bytes, const char* role) const;
  absl::Status CheckVertices() const;
  absl::StatusOr<internal::ScheduleGraph> Order() const;
  absl::Status CheckTempReads(const internal::ScheduleGraph& g) const;
};

// A built, validated schedule: an Activity the progress engine drives.
class Schedule : public engine::Activity, public std::enable_shared_from_this<Schedule> {
 public:
  // Each run is a schedule_run (collectives/run_fsm.h, collectives/run.cc),
  // whose table holds what no step's CAR does: the steps that run last and
  // the sends that start last.
  ~Schedule() override;

  // Runs it once; `req` completes when every vertex did (or one failed).
  // A schedule runs one run at a time; start it again once `req` completed.
  absl::Status Start(Request* req);
  // Persistent use: binds it to `req`; each req->Start() runs it.
  absl::Status Bind(Request* req);
  // Start and wait.
  absl::Status Run();

  // Points every user buffer called `name` ("send", "recv") at `base`:
  // a blocking collective reuses the schedule of an identical earlier call
  // with this call's buffers. Not while running.
  void RebindUser(const char* name, const void* base);

  const std::string& name() const { return name_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::vector<Vertex>& vertices() const { return vertices_; }
  const std::vector<uint64_t>& temp_sizes() const { return temp_sizes_; }
  // Per temporary: the peer whose method lent it, or -1 (plain memory).
  const std::vector<int>& temp_lenders() const { return temp_lenders_; }
  uint32_t sequence() const { return sequence_; }
  // The tag a send / receive vertex uses on the wire.
  int TagOf(const Vertex& v) const;
  // The car_vertex state of each vertex ("idle", "running", "done", ...);
  // a step run with its receive (RunsWith) shows the receive's, a step
  // that runs alone (RunsAlone) its request's CAR's ("idle" before its
  // first run).
  std::string StateOf(VertexId v) const;
  // The vertex whose CAR runs `v`: `v` itself, or the receive or send it
  // runs with. A local step (reduce, copy, pack, unpack, fence) whose one
  // predecessor is a receive, or a step run with one, and which is that
  // vertex's one successor, runs as the receive completes, in the receive's
  // CAR: seed 002's receive with a MOP. It would be ready then and at no
  // other time. Where the receive runs alone (RunsAlone), its CAR counts
  // down the run's completion as every step running alone does, and the
  // schedule's poll runs the step once that CAR has ended (a 2-rank
  // allreduce's reduce), before the run can end. A local step with no
  // predecessor and no successor (an alltoall's copy of the rank's own
  // block) runs as a send starts: of the sends with no predecessor, the one
  // Begin starts last, so that every send ready at once is on its way
  // before the step runs. Either way the step is spared a CAR's re-arming,
  // start, wait and release.
  VertexId RunsWith(VertexId v) const { return host_[static_cast<std::size_t>(v)]; }
  // Whether send or receive `v` waits for nothing and releases nothing (a
  // 2-rank barrier's, every step of a linear alltoall). Such a step has no
  // car_vertex: Begin starts its request, whose CAR counts down the run's
  // completion itself, and StateOf shows that CAR's state (car_send,
  // car_recv). A vertex CAR would only add its start and complete
  // events and a re-arm (cartage-bench barrier, 2 ranks).
  bool RunsAlone(VertexId v) const;
  // Whether local step `v` runs as the run ends, once every step the run
  // counts has ended well, in dependency order with the others that do: it
  // waits only for sends and receives that run alone (and for other steps
  // that run last), and only steps that run last wait for it (a linear
  // allreduce's reduces, after its receives). Such a step has no
  // car_vertex, and the receives it waits for, no longer releasing a
  // vertex CAR, run alone: at 8 ranks that spared 14 vertex CARs' re-arming,
  // start, completion and wait a call. StateOf shows car_vertex's names:
  // "idle" before the first run, "waiting" while one goes on; after it,
  // "done" if the step ran, "failed" if it failed, "cancelled" if the run
  // failed before it.
  bool RunsLast(VertexId v) const;
  // The receive whose end starts send `v`, or -1. A send that waits for
  // one receive alone (or for its last fused step), where that receive
  // waits for nothing, and that nothing waits for, starts as the receive's
  // CAR ends well, its own CAR counting down the run's completion: a
  // bcast's forward. The receive runs alone, and neither has a car_vertex.
  // Where the receive failed or came short, or the run failed, the send
  // sends an empty message in its place (as a draining vertex does), so its
  // peer's receive fails instead of waiting.
  VertexId ForwardsFrom(VertexId v) const;
  // Whether send `v` starts last: it waits only for steps that run last
  // (and so, through them, only for steps that run alone), and nothing
  // waits for it (a star's rank 0 answering every rank once it has heard
  // from all). Once every step the run counts has ended, the steps that run
  // last run and such sends start, counted as steps that run alone are;
  // the run ends when they have. Neither they nor the receives before them
  // have a car_vertex (a star's rank 0 at 8 ranks: 15 vertex CARs fewer).
  // Where the run failed before them, each sends an empty message in its
  // place, as a draining vertex does, so its peer fails instead of waiting.
  bool StartsLast(VertexId v) const;
  // Whether send `v` goes by rendezvous above kBurstEagerCap bytes, whatever
  // its method's eager limit: it is one of a burst, kBurstSends or more
  // sends of more than kBurstEagerCap bytes that wait for nothing and so
  // start together (a linear alltoall or allgather of 64 KiB blocks from 4
  // ranks, a binomial bcast's root from 8), and its path moves a rendezvous
  // message with one copy (PathInfo::single_copy) where eager takes two
  // (cartage-bench alltoall 64 KiB at 4 and 8 ranks).
  bool SendsSingleCopy(VertexId v) const;
  static constexpr std::size_t kBurstSends = 3;
  static constexpr uint64_t kBurstEagerCap = 32 * 1024;

  // This rank's graph. Vertices are labelled by kind, peer, bytes, buffers
  // and chunk; edges by kind.
  std::string ToDot() const;
  std::string ToMermaid() const;

  // Activity
  absl::Status Begin() override;
  // Small, so that a round with nothing finished costs a test or two: the
  // steps it finishes itself (TakeFinished) and the run's end (EndRun) are
  // out of line.
  std::optional<absl::Status> Poll(int* work) override {
    if (!draining_.empty() || !inflight_.empty() || !fused_pending_.empty()) TakeFinished(work);
    if (done_.pending > 0) return std::nullopt;
    return EndRun();
  }

 private:
  friend class ScheduleBuilder;
  friend struct internal::RunDef;
  friend struct internal::RunActions;
  Schedule() = default;
  // Build's engine set-up of a validated graph (schedule_setup.cc).
  static absl::StatusOr<std::shared_ptr<Schedule>> SetUp(const ScheduleBuilder& b, const internal::ScheduleGraph& g);
  std::byte* Resolve(const Buf& b) const;
  std::string Describe(VertexId v) const;
  // Hands the schedule to `req` through its communicator (Start, Bind),
  // which keeps it alive while it runs; refused for a schedule built for
  // rendering.
  absl::Status Submit(bool persistent, Request* req);
  // OK unless the schedule was built for rendering only (it has no channel).
  // Inline: Run and Begin ask at every call.
  absl::Status Runnable() const { return comm_.has_value() ? absl::OkStatus() : NotRunnable(); }
  absl::Status NotRunnable() const;  // Runnable's error
  // Build's: which steps run with a receive or a send, alone, last, or
  // start as a receive ends or last (the shapes that need no car_vertex),
  // given each vertex's successors, its number of predecessors, and the
  // vertices in dependency order (schedule_shapes.cc).
  void FindShapes(const std::vector<std::vector<std::size_t>>& succ, const std::vector<uint32_t>& indegree,
                  const std::vector<std::size_t>& order);
  // The last step fused to receive `v` (RunsWith), or `v` itself: the one
  // whose successors the receive's CAR releases.
  std::size_t LastOf(std::size_t v) const {
    const std::vector<VertexId>& fused = fused_[v];
    return fused.empty() ? v : static_cast<std::size_t>(fused.back());
  }
  static void LaunchVertex(car::Car& car, car::CarEvents& events);
  void Launch(VertexId v, car::Car& car, car::CarEvents& events);
  // Starts the request of send or receive `v`, prepared for this run's
  // buffer (at its first run, and again when RebindUser moved the buffer),
  // and runs the loose steps if `v` is their host. `counted`: its CAR
  // counts down done_ itself (engine::StartCounted; a step that runs
  // alone), not its request's completion.
  // Inlined into its two callers: StartAlone runs it for every step that runs
  // alone at every call.
  [[gnu::always_inline]] inline absl::Status StartRequest(VertexId v, bool counted);
  // Starts a step that runs alone: its CAR counts down done_, so that the
  // poll never sees it (a failure or a short receive is named as the run
  // ends: NameCountedFailure).
  void StartAlone(VertexId v);
  // A run's counters and lists as a run begins, its vertex CARs re-armed.
  void Rearm();
  // A step that runs alone could not start (`st`): the run has one less to wait for.
  void EndAlone(VertexId v, const absl::Status& st);
  // Of the receives that run alone with steps fused to them or sends to
  // start (alone_fused_), those whose CAR ended since the last poll (taken
  // out of fused_pending_): runs their fused steps if they ended well and
  // the run has not failed (the first step that fails fails the run,
  // naming its receive), then starts their sends, or drains them
  // (DrainSends) where the steps did not run.
  void RunFusedOfEnded(int* work);
  // Counted sends that will not run (a receive's forwarded sends, the
  // sends that start last): each sends an empty message in its place,
  // counted down when it completed.
  void DrainSends(const std::vector<VertexId>& sends);
  // Runs the local steps fused to receive `v`, in order; the first error,
  // naming its step ("then <step>: ...").
  absl::Status RunFused(VertexId v);
  // `st` naming vertex `v` (Describe); the run's error if it is its first.
  absl::Status Fail(VertexId v, const absl::Status& st);
  static void DrainVertex(car::Car& car, car::CarEvents& events);
  void Drain(VertexId v, car::Car& car, car::CarEvents& events);
  // Sends or receives the empty message that settles send or receive `v`
  // with its peer in place of its data (reqs_[v].drain). Still in flight:
  // nullopt, and TakeFinished finishes it (draining_); else how the attempt
  // went.
  std::optional<absl::Status> Settle(VertexId v);
  absl::Status RunLocal(VertexId v);
  void RunLoose();
  // A send or receive completed: its status (a receive must fill its
  // buffer exactly), having run the steps fused with a receive.
  absl::Status Finished(VertexId v, Request& r);
  // A receive must fill its buffer exactly: the error if `received` bytes do not.
  absl::Status CheckSize(const Vertex& x, uint64_t received);
  // The run ended with an error no vertex named, or the steps that run
  // alone carried fewer bytes than they hold (counted_bytes_): names the
  // one that failed or received short, as Finished would have.
  void NameCountedFailure();
  // Poll's parts: finishes the steps in flight that completed (draining_,
  // inflight_, the receives of alone_fused_); ends a run that has nothing
  // left to wait for, running the steps that run last if it went well.
  void TakeFinished(int* work);
  // The run's end: schedule_run's `ended` (and the steps that run last)
  // until the run is final, then its status; nothing while the sends that
  // start last are in flight.
  std::optional<absl::Status> EndRun();
  absl::Status ReduceInto(VertexId v);

  std::optional<Comm> comm_;  // the collective channel; empty: for rendering only
  std::string name_;
  int rank_ = 0;
  int size_ = 1;
  uint32_t sequence_ = 0;
  std::vector<Vertex> vertices_;
  std::vector<uint64_t> temp_sizes_;
  std::vector<int> temp_lenders_;
  std::vector<std::shared_ptr<std::byte>> temps_;  // plain memory, or lent by a method
  std::vector<std::vector<std::byte>> scratch_;  // per vertex: a right-operand reduce's copy
  std::vector<VertexId> host_;                // per vertex: RunsWith
  std::vector<std::vector<VertexId>> fused_;  // per receive: the steps run with it, in order
  std::vector<VertexId> loose_;  // the steps with no predecessor and no successor (RunsWith)
  VertexId loose_host_ = -1;     // the send they run with, if any
  std::unique_ptr<car::CarPool> pool_;
  std::vector<car::Car*> cars_;         // per vertex: the CAR that runs it (RunsWith's)
  std::vector<car::Car*> runners_;      // each CAR once
  std::vector<car::Car*> start_order_;  // runners_ in the order Begin starts them: receives first
  std::vector<bool> alone_;             // per vertex: RunsAlone
  std::vector<VertexId> alone_recvs_;   // the steps that run alone, in Begin's order
  std::vector<VertexId> alone_sends_;
  std::vector<bool> last_;              // per vertex: RunsLast
  std::vector<VertexId> run_last_;      // the steps that run last, in dependency order
  struct LastOutcome {
    std::size_t ran = 0;  // of run_last_, how many ran in this run (or the last one)
    bool failed = false;  // and the next one failed
  };
  LastOutcome last_outcome_;
  std::vector<VertexId> alone_fused_;   // of alone_recvs_, those with steps fused to them or sends they start
  std::vector<std::vector<VertexId>> forwards_;  // per receive run alone: the sends it starts as it ends
  std::vector<VertexId> forwarded_from_;         // per vertex: ForwardsFrom
  std::size_t forwarded_ = 0;                    // how many sends a receive starts
  std::vector<VertexId> fused_pending_;  // of alone_fused_, those whose receive has not ended in this run
  std::vector<VertexId> starts_last_;    // the sends that start last (StartsLast), in dependency order
  uint64_t last_bytes_ = 0;              // what they add to done_.bytes in a full run
  // Whether this run started the sends that start last (or their drains),
  // and what the counted steps carry in a full run, so far as they were started.
  bool StartedLast() const;
  uint64_t CountedBytes() const;
  std::vector<bool> single_copy_;        // per vertex: SendsSingleCopy (empty: built for rendering)
  std::vector<std::vector<car::Car*>> successors_;
  // Per vertex: its send or receive, persistent (engine::PrepareStep) and
  // started at every run, and the buffer it was prepared on.
  struct StepRequest {
    Request req;
    const void* prepared_on = nullptr;
    Request drain;  // the empty send or receive of a draining vertex (Drain)
  };
  std::unique_ptr<StepRequest[]> reqs_;
  std::vector<VertexId> inflight_;   // sends and receives not completed yet
  std::vector<VertexId> draining_;   // drains not completed yet
  base::Completion done_;             // vertex CARs and steps run alone still to finish, first error
  uint64_t counted_bytes_ = 0;       // what the steps run alone (StartAlone) add to done_.bytes in a full run
  fsm::StateWord run_state_;  // schedule_run's (collectives/run_fsm.h)
  uint64_t run_id_ = 0;       // its instance in traces: one number a schedule in the process
  uint64_t trace_call_ = 0;   // this run's collective call number in the trace (CARTAGE_TRACE), else 0
  std::string explain_;  // ScheduleBuilder::Explain's, printed at each run under CARTAGE_COLL_EXPLAIN=all
  std::string span_;     // each run's span in the trace: ScheduleBuilder::Span's, or the name
  // Every step's request is prepared on the buffer it has now: the last run
  // ended well (each send and receive started, StartRequest), and
  // RebindUser moved no buffer since.
  bool prepared_ = false;
  std::optional<absl::Status> failed_;  // the first vertex error of this run
  // Per user buffer name: the vertices' buffers that name it (RebindUser),
  // gathered on its first call.
  struct UserBuf {
    const char* name;
    std::vector<Buf*> bufs;
    std::optional<const void*> base;  // what RebindUser pointed them at last
  };
  std::vector<UserBuf> user_bufs_;
};

// Whole-job rendering: every rank's schedule of one collective (built in
// one process), with the messages between them as edges.
std::string JobToDot(absl::Span<const std::shared_ptr<Schedule>> ranks);
std::string JobToMermaid(absl::Span<const std::shared_ptr<Schedule>> ranks);
// The job as swim lanes, in SVG: ranks as columns in rank order, each step
// in the row of its round (one after the latest step it waits for, on its
// rank or, for a receive, its message's send), messages as arrows.
std::string JobToLanesSvg(absl::Span<const std::shared_ptr<Schedule>> ranks);

// Registers schedule_run for diagrams and trace checks.
absl::Status RegisterScheduleMachines(fsm::Registry& registry);

}  // namespace cartage

#endif  // CARTAGE_COLLECTIVES_INCLUDE_CARTAGE_SCHEDULE_H_
