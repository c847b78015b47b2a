// A run of a schedule: its start (Begin), its end (EndRun), and the guards
// and actions of its table, schedule_run (collectives/run_fsm.h).
#include "absl/strings/str_format.h"
#include "car/vertex_fsm.h"
#include "cartage/schedule.h"
#include "collectives/algorithms.h"
#include "collectives/run_fsm.h"

namespace cartage {

namespace {

using car::VertexEvent;
using car::VertexMachine;
using internal::RunEvent;
using internal::RunMachine;
using internal::RunSignal;
using internal::RunState;

}  // namespace

absl::Status Schedule::Begin() {
  CARTAGE_RETURN_IF_ERROR(Runnable());
  if (RunMachine::IsFinal(*this)) {
    RunMachine::Reset(*this);  // the next run
  } else if (RunMachine::StateOf(*this) != RunState::kIdle) {
    return absl::FailedPreconditionError(absl::StrFormat("schedule %s: started again while still running", name_));
  }
  Rearm();
  // The receives that wait for nothing are posted first, as early as a call
  // can post them, so that a message already on its way finds its receive;
  // then the run starts, and the other steps in it.
  for (VertexId v : alone_recvs_) StartAlone(v);
  (void)RunMachine::DispatchFrom<RunState::kIdle, RunEvent::kStart>(*this);
  for (car::Car* c : start_order_) {
    if (VertexMachine::IsFinal(*c)) continue;  // failed already, through a predecessor
    if (absl::Status st = VertexMachine::Dispatch(*c, VertexEvent::kStart); !st.ok()) {
      fsm::EndSpan(trace_call_, span_, comm_->context(), false);
      return st;
    }
  }
  for (VertexId v : alone_sends_) StartAlone(v);
  return absl::OkStatus();
}

void Schedule::Rearm() {
  done_ = base::Completion();
  done_.pending = static_cast<int64_t>(runners_.size() + alone_recvs_.size() + alone_sends_.size() + forwarded_);
  failed_.reset();
  last_outcome_ = LastOutcome{};
  inflight_.clear();
  draining_.clear();
  for (car::Car* c : runners_) c->Rearm();
  if (!alone_fused_.empty()) fused_pending_.assign(alone_fused_.begin(), alone_fused_.end());
}

std::optional<absl::Status> Schedule::EndRun() {
  for (;;) {
    // Every state but idle and the final ones takes it; most runs end from running.
    (void)RunMachine::DispatchFrom<RunState::kRunning, RunEvent::kEnded>(*this);
    if (RunMachine::StateOf(*this) == RunState::kLast) {
      for (VertexId v : run_last_) {
        RunSignal step;
        step.step = v;
        (void)RunMachine::Dispatch(*this, RunEvent::kStep, step);
      }
      continue;
    }
    if (RunMachine::IsFinal(*this)) break;
    if (done_.pending > 0) return std::nullopt;  // the sends that start last, or their drains
  }
  prepared_ = RunMachine::StateOf(*this) == RunState::kDone;  // every send and receive started on its buffer
  fsm::EndSpan(trace_call_, span_, comm_->context(), prepared_);
  if (failed_.has_value()) return *failed_;
  return done_.status;
}


bool Schedule::StartedLast() const {
  const auto run = static_cast<RunState>(run_state_.value());
  return run == RunState::kStartingLast || run == RunState::kDrainingLast;
}

uint64_t Schedule::CountedBytes() const { return counted_bytes_ + (StartedLast() ? last_bytes_ : 0); }

// ---- schedule_run ----------------------------------------------------------------

namespace internal {

fsm::StateWord& RunDef::Cell(Schedule& s) { return s.run_state_; }
uint64_t RunDef::IdOf(const Schedule& s) { return s.run_id_; }
void RunDef::Subject(const Schedule& s, const RunSignal& x, fsm::TraceRecord& r) {
  if (s.comm_.has_value()) r.context = s.comm_->context();
  r.tag = x.step;
  if (x.step >= 0) r.bytes = s.vertices_[static_cast<std::size_t>(x.step)].bytes;
}

bool RunActions::EndsWell(const Schedule& s, const RunSignal& x) {
  return s.run_last_.empty() && s.starts_last_.empty() && !Failed(s, x);
}
bool RunActions::Failed(const Schedule& s, const RunSignal&) {
  return s.failed_.has_value() || !s.done_.status.ok() || s.done_.bytes != s.CountedBytes();
}
bool RunActions::FailedStartsLast(const Schedule& s, const RunSignal& x) {
  return !s.starts_last_.empty() && Failed(s, x);
}
bool RunActions::HasRunLast(const Schedule& s, const RunSignal&) { return !s.run_last_.empty(); }
bool RunActions::HasStartsLast(const Schedule& s, const RunSignal&) { return !s.starts_last_.empty(); }

void RunActions::BeginCall(Schedule& s, const RunSignal&, RunEvents&) {
  s.trace_call_ = fsm::BeginSpan(s.span_, s.comm_->context());
  if (!s.explain_.empty()) alg::PrintExplanation(s.rank_, s.explain_);
}

void RunActions::RunLastStep(Schedule& s, const RunSignal& x, RunEvents&) {
  if (absl::Status st = s.RunLocal(x.step); !st.ok()) {
    s.last_outcome_.failed = true;
    (void)s.Fail(x.step, st);
    return;
  }
  ++s.last_outcome_.ran;
}

void RunActions::NameFailure(Schedule& s, const RunSignal&, RunEvents&) {
  if (!s.failed_.has_value()) s.NameCountedFailure();
}

void RunActions::NameFailureDrainLast(Schedule& s, const RunSignal& x, RunEvents& events) {
  NameFailure(s, x, events);
  DrainLast(s, x, events);
}

void RunActions::StartLast(Schedule& s, const RunSignal&, RunEvents&) {
  s.done_.pending += static_cast<int64_t>(s.starts_last_.size());
  for (VertexId v : s.starts_last_) s.StartAlone(v);
}

void RunActions::DrainLast(Schedule& s, const RunSignal&, RunEvents&) {
  s.done_.pending += static_cast<int64_t>(s.starts_last_.size());
  s.DrainSends(s.starts_last_);
}

}  // namespace internal

absl::Status RegisterScheduleMachines(fsm::Registry& registry) {
  return registry.Register(RunMachine::Describe());
}

}  // namespace cartage
