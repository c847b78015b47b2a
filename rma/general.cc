// General active target (MPI's post, start, complete, wait and test): the
// access epoch a start opens to a group of targets (rma_epoch) and the
// exposure a post opens to a group of origins (rma_exposure). A target's
// post is a message to each origin of its group; an origin's start waits
// for the post of each of its targets, so that nothing it sends can reach
// a window not yet exposed; its complete tells each target how many
// operations it issued there, and the target's exposure ends once that
// many have landed. On a shared window the count is 0 (the origin stored
// them itself) and memory barriers order the stores around the messages.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "absl/strings/str_format.h"
#include "rma/window_state.h"

namespace cartage::rma {

namespace {

// Marks `ranks` in `in` (one byte a rank of the window), or says why they
// cannot be the group of `what`.
absl::Status MarkGroup(const WindowState& w, const char* what, absl::Span<const int> ranks, std::vector<uint8_t>& in) {
  in.assign(static_cast<std::size_t>(w.comm.size()), 0);
  for (const int r : ranks) {
    if (r < 0 || r >= w.comm.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: %s: no rank %d in a window of %d", w.Name(), what, r, w.comm.size()));
    }
    uint8_t& mark = in[static_cast<std::size_t>(r)];
    if (mark != 0) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: %s: rank %d is in the group twice", w.Name(), what, r));
    }
    mark = 1;
  }
  return absl::OkStatus();
}

// Whether every request of `group`'s of kind `which` ended.
template <class Which>
bool AllEnded(std::deque<GroupPeer>& group, Which which) {
  return std::all_of(group.begin(), group.end(), [&](GroupPeer& p) { return (p.*which).completed(); });
}

// The first failure of `group`'s requests of kind `which`, naming the rank
// (each is waited on: they have ended).
template <class Which>
absl::Status FirstFailure(std::deque<GroupPeer>& group, Which which, const char* what) {
  absl::Status first;
  for (GroupPeer& p : group) {
    if (!(p.*which).active()) continue;
    const absl::Status s = (p.*which).Wait();
    if (!s.ok() && first.ok()) {
      first = absl::Status(s.code(), absl::StrFormat("%s rank %d: %s", what, p.rank, s.message()));
    }
  }
  return first;
}

}  // namespace

bool EpochActions::Fenced(const WindowState& w, const RmaSignal&) { return w.epoch > 0; }

// ---- the origin: start and complete ---------------------------------------------------------

absl::Status WindowState::Start(absl::Span<const int> targets) {
  const EpochState st = EpochMachine::StateOf(*this);
  if (st == EpochState::kFailed) return *failure;
  if (st != EpochState::kIdle && !(st == EpochState::kOpen && ops.empty())) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: start: %s", Name(),
        st == EpochState::kOpen      ? "the fence epoch has operations (a fence completes them first)"
        : st == EpochState::kPassive ? "this rank holds locks (unlock them first)"
        : st == EpochState::kStarted ? "an access epoch is started already (complete it first)"
                                     : absl::StrFormat("the window is %s", EpochDef::kStates[state.value()])));
  }
  std::vector<uint8_t> in;
  CARTAGE_RETURN_IF_ERROR(MarkGroup(*this, "start", targets, in));
  started_to = std::move(in);
  std::fill(group_sent.begin(), group_sent.end(), 0);
  start_group.clear();
  for (const int r : targets) start_group.emplace_back().rank = r;
  (void)EpochMachine::Dispatch(*this, EpochEvent::kStart);
  // Each target's post: what this rank sends it then finds its window
  // exposed. Meanwhile this rank serves (it may be another's target).
  absl::Status s;
  for (GroupPeer& p : start_group) {
    s = comm.Irecv(&p.post, 1, p.rank, kTagPost, &p.post_req);
    if (!s.ok()) {
      s = absl::Status(s.code(), absl::StrFormat("the post of rank %d: %s", p.rank, s.message()));
      break;
    }
  }
  if (s.ok()) s = RunUntil([this] { return AllEnded(start_group, &GroupPeer::post_req); });
  s.Update(FirstFailure(start_group, &GroupPeer::post_req, "the post of"));
  RmaSignal x;
  if (!s.ok()) {
    x.error = absl::Status(s.code(), absl::StrFormat("%s: start: %s", Name(), s.message()));
    (void)EpochMachine::Dispatch(*this, EpochEvent::kError, x);
    return *failure;
  }
  (void)EpochMachine::Dispatch(*this, EpochEvent::kPosted);
  return absl::OkStatus();
}

absl::Status WindowState::Complete() {
  const EpochState st = EpochMachine::StateOf(*this);
  if (st == EpochState::kFailed) return *failure;
  if (st != EpochState::kStarted) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: complete: no access epoch is started (start opens one)",
                                                         Name()));
  }
  (void)EpochMachine::Dispatch(*this, EpochEvent::kComplete);
  // This rank's operations done here (a put's data sent, a get's in); then
  // each target learns how many it was sent, and has them all once it has
  // served that many. A shared window's were stored as they were issued.
  absl::Status s;
  if (direct()) {
    MemoryBarrier();
  } else {
    SendBatches();
    s = RunUntil([this] { return OpsFinal(-1); });
  }
  // Every target is told, even after a failure, so that none waits for ever.
  absl::Status sent;
  for (GroupPeer& p : start_group) {
    p.count = group_sent[static_cast<std::size_t>(p.rank)];
    const absl::Status one = comm.Isend(&p.count, sizeof(p.count), p.rank, kTagComplete, &p.complete_req);
    if (!one.ok() && sent.ok()) {
      sent = absl::Status(one.code(), absl::StrFormat("the complete to rank %d: %s", p.rank, one.message()));
    }
  }
  s.Update(RunUntil([this] { return AllEnded(start_group, &GroupPeer::complete_req); }));
  s.Update(sent);
  s.Update(FirstFailure(start_group, &GroupPeer::complete_req, "the complete to"));
  s.Update(TakeFinished(-1));
  std::fill(started_to.begin(), started_to.end(), 0);
  if (!s.ok()) {
    RmaSignal x;
    x.error = absl::Status(s.code(), absl::StrFormat("%s: complete: %s", Name(), s.message()));
    (void)EpochMachine::Dispatch(*this, EpochEvent::kError, x);
    return *failure;
  }
  (void)EpochMachine::Dispatch(*this, EpochEvent::kEnded);
  return absl::OkStatus();
}

// ---- the target: post, wait and test ----------------------------------------------------------

fsm::StateWord& ExposureDef::Cell(WindowState& w) { return w.exposure; }
uint64_t ExposureDef::IdOf(const WindowState& w) { return w.trace_id; }
void ExposureDef::Subject(const WindowState& w, const RmaSignal&, fsm::TraceRecord& r) {
  r.context = w.comm.context();
  r.tag = static_cast<int32_t>(w.exposure_group.size());
}

void ExposureActions::SendPosts(WindowState& w, const RmaSignal&, WindowEvents& events) {
  absl::Status s;
  for (GroupPeer& p : w.exposure_group) {
    s = w.comm.Irecv(&p.count, sizeof(p.count), p.rank, kTagComplete, &p.complete_req);
    if (s.ok()) s = w.comm.Isend(&p.post, 1, p.rank, kTagPost, &p.post_req);
    if (!s.ok()) {
      s = absl::Status(s.code(), absl::StrFormat("the post to rank %d: %s", p.rank, s.message()));
      break;
    }
  }
  if (s.ok()) return;
  RmaSignal x;
  x.error = absl::Status(s.code(), absl::StrFormat("%s: post: %s", w.Name(), s.message()));
  events.Raise<ExposureMachine>(w, ExposureEvent::kError, x);
}

void ExposureActions::NameFailure(WindowState& w, const RmaSignal& x, WindowEvents&) { w.exposure_failure = x.error; }

absl::Status WindowState::Post(absl::Span<const int> origins) {
  const ExposureState xs = ExposureMachine::StateOf(*this);
  if (xs == ExposureState::kFailed) return *exposure_failure;
  if (xs != ExposureState::kIdle || EpochMachine::StateOf(*this) == EpochState::kFreed) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: post: %s", Name(),
        xs == ExposureState::kPosted ? "the window is exposed already (wait or test ends that first)"
                                     : "the window is freed"));
  }
  std::vector<uint8_t> in;
  CARTAGE_RETURN_IF_ERROR(MarkGroup(*this, "post", origins, in));
  exposed_to = std::move(in);
  std::fill(group_served.begin(), group_served.end(), 0);
  exposure_served_failure = absl::OkStatus();
  exposure_group.clear();
  for (const int r : origins) exposure_group.emplace_back().rank = r;
  // On a shared window this rank's own stores come before the origins'
  // loads of the exposure.
  if (direct()) MemoryBarrier();
  (void)ExposureMachine::Dispatch(*this, ExposureEvent::kPost);
  return ExposureMachine::StateOf(*this) == ExposureState::kPosted ? absl::OkStatus() : *exposure_failure;
}

absl::Status WindowState::WaitExposure(bool block, bool* ended) {
  const char* what = block ? "wait" : "test";
  *ended = false;
  const ExposureState xs = ExposureMachine::StateOf(*this);
  if (xs == ExposureState::kFailed) return *exposure_failure;
  if (xs != ExposureState::kPosted) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: %s: no exposure is posted (post opens one)", Name(), what));
  }
  // Every origin completed, and as many of its operations landed here as
  // it says it issued.
  const auto all_landed = [this] {
    for (GroupPeer& p : exposure_group) {
      if (!p.complete_req.completed() || !p.post_req.completed() ||
          group_served[static_cast<std::size_t>(p.rank)] < p.count) {
        return false;
      }
    }
    return true;
  };
  absl::Status s;
  if (block) {
    s = RunUntil(all_landed);
  } else {
    int polls = 0;  // its first poll comes before any progress, its second after one round
    s = RunUntil([&] { return all_landed() || ++polls >= 2; });
    if (s.ok() && !all_landed()) return absl::OkStatus();
  }
  s.Update(FirstFailure(exposure_group, &GroupPeer::post_req, "the post to"));
  s.Update(FirstFailure(exposure_group, &GroupPeer::complete_req, "the complete of"));
  s.Update(exposure_served_failure);
  if (!s.ok()) {
    RmaSignal x;
    x.error = absl::Status(s.code(), absl::StrFormat("%s: %s: %s", Name(), what, s.message()));
    (void)ExposureMachine::Dispatch(*this, ExposureEvent::kError, x);
    return *exposure_failure;
  }
  // The origins' stores on a shared window come before this rank's loads.
  if (direct()) MemoryBarrier();
  std::fill(exposed_to.begin(), exposed_to.end(), 0);
  (void)ExposureMachine::Dispatch(*this, ExposureEvent::kCompleted);
  *ended = true;
  return absl::OkStatus();
}

}  // namespace cartage::rma
