// The engine that runs a built schedule: its vertices as car_vertex CARs
// under the progress engine, sends and receives through the communicator's
// collective channel, local steps (reduce, copy, pack, unpack) in place.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "car/recv_fsm.h"
#include "datatype/segment_walk.h"
#include "car/vertex_fsm.h"
#include "collectives/algorithms.h"
#include "collectives/run_fsm.h"
#include "cartage/schedule.h"

namespace cartage {

namespace {

using car::VertexEvent;
using car::VertexMachine;
using internal::RunState;

// Tags: (1 + sequence mod kSlots) * kOrdinals + ordinal mod kOrdinals, so that
// tags stay clear of the small ones the communicator makers (agent/comms.cc)
// use on the same context.
constexpr int kOrdinals = 1024;
constexpr uint32_t kSlots = (static_cast<uint32_t>(kMaxTag) + 1) / kOrdinals - 1;

}  // namespace

// ---- Schedule ------------------------------------------------------------------

Schedule::~Schedule() {
  if (pool_) {
    for (car::Car* c : runners_) pool_->Release(c);
  }
}

int Schedule::TagOf(const Vertex& v) const {
  return static_cast<int>(1 + sequence_ % kSlots) * kOrdinals + v.ordinal % kOrdinals;
}

std::string Schedule::StateOf(VertexId v) const {
  if (!pool_ || v < 0 || static_cast<std::size_t>(v) >= cars_.size()) return "unbuilt";
  if (const car::Car* c = cars_[static_cast<std::size_t>(v)]) return std::string(c->state_name());
  if (RunsLast(v)) {
    const auto run = static_cast<RunState>(run_state_.value());
    if (run == RunState::kIdle) return "idle";  // never run
    if (run == RunState::kRunning) return "waiting";
    const auto i = static_cast<std::size_t>(std::find(run_last_.begin(), run_last_.end(), v) - run_last_.begin());
    if (i < last_outcome_.ran) return "done";
    return i == last_outcome_.ran && last_outcome_.failed ? "failed" : "cancelled";
  }
  const Request& r = reqs_[RunsWith(v)].req;  // runs alone, or with one that does
  return r.persistent() ? std::string(r.state()) : "idle";
}

bool Schedule::RunsAlone(VertexId v) const {
  return v >= 0 && static_cast<std::size_t>(v) < alone_.size() && alone_[static_cast<std::size_t>(v)];
}

bool Schedule::RunsLast(VertexId v) const {
  return v >= 0 && static_cast<std::size_t>(v) < last_.size() && last_[static_cast<std::size_t>(v)];
}

bool Schedule::StartsLast(VertexId v) const {
  return std::find(starts_last_.begin(), starts_last_.end(), v) != starts_last_.end();
}

VertexId Schedule::ForwardsFrom(VertexId v) const {
  return v >= 0 && static_cast<std::size_t>(v) < forwarded_from_.size() ? forwarded_from_[static_cast<std::size_t>(v)]
                                                                          : -1;
}

bool Schedule::SendsSingleCopy(VertexId v) const {
  return v >= 0 && static_cast<std::size_t>(v) < single_copy_.size() && single_copy_[static_cast<std::size_t>(v)];
}

std::byte* Schedule::Resolve(const Buf& b) const {
  std::byte* base =
      b.is_temp() ? temps_[static_cast<std::size_t>(b.temp)].get() : static_cast<std::byte*>(b.user);
  return base == nullptr ? nullptr : base + b.offset;
}

std::string Schedule::Describe(VertexId v) const {
  const Vertex& x = vertices_[static_cast<std::size_t>(v)];
  std::string what;
  switch (x.kind) {
    case VertexKind::kSend: what = absl::StrFormat("send %d B to rank %d from %s", x.bytes, x.peer, x.src.Label()); break;
    case VertexKind::kRecv: what = absl::StrFormat("recv %d B from rank %d into %s", x.bytes, x.peer, x.dst.Label()); break;
    case VertexKind::kReduce:
      what = absl::StrFormat("reduce %d B (%s) %s into %s", x.bytes, datatype::OpName(x.op->kind()), x.src.Label(),
                             x.dst.Label());
      break;
    default: what = absl::StrFormat("%s %d B %s -> %s", VertexKindName(x.kind), x.bytes, x.src.Label(), x.dst.Label());
  }
  return absl::StrFormat("%s (rank %d): vertex %d (%s)", name_, rank_, v, what);
}

void Schedule::RebindUser(const char* name, const void* base) {
  auto same = [](const char* a, const char* b) { return a == b || std::strcmp(a, b) == 0; };
  if (user_bufs_.empty()) {  // the vertices do not change once built: index them once
    auto note = [&](Buf& b) {
      if (b.is_temp() || b.name == nullptr) return;
      for (UserBuf& u : user_bufs_) {
        if (same(u.name, b.name)) return u.bufs.push_back(&b);
      }
      user_bufs_.push_back({b.name, {&b}, std::nullopt});
    };
    for (Vertex& x : vertices_) {
      note(x.src);
      note(x.dst);
    }
  }
  for (UserBuf& u : user_bufs_) {
    if (u.base == base || !same(u.name, name)) continue;  // the same buffer again: nothing to do
    for (Buf* b : u.bufs) b->user = const_cast<void*>(base);
    u.base = base;
    prepared_ = false;  // the steps on it are prepared again (StartRequest)
  }
}

absl::Status Schedule::NotRunnable() const {
  return absl::FailedPreconditionError(absl::StrFormat("schedule %s: built for rendering only", name_));
}

absl::Status Schedule::Submit(bool persistent, Request* req) {
  CARTAGE_RETURN_IF_ERROR(Runnable());
  return engine::Launch(*comm_, shared_from_this(), persistent, req);
}

absl::Status Schedule::Start(Request* req) { return Submit(/*persistent=*/false, req); }

absl::Status Schedule::Bind(Request* req) { return Submit(/*persistent=*/true, req); }

absl::Status Schedule::Run() {
  // Waited for before this returns, so no request and no reference: taking
  // one (shared_from_this) costs a locked instruction a call, which waits
  // for every earlier store to land (cartage-bench bcast 8 B).
  CARTAGE_RETURN_IF_ERROR(Runnable());
  return engine::RunActivity(*comm_, *this);
}

void Schedule::StartAlone(VertexId v) {
  const absl::Status st = StartRequest(v, /*counted=*/true);
  if (!st.ok()) EndAlone(v, st);  // never posted: it will not count down
}

void Schedule::EndAlone(VertexId v, const absl::Status& st) {
  --done_.pending;
  if (!st.ok()) (void)Fail(v, st);
  // A receive that never started: its CAR will not end (it may not exist),
  // its fused steps will not run, and the sends it starts wait no more.
  const auto it = std::find(fused_pending_.begin(), fused_pending_.end(), v);
  if (it == fused_pending_.end()) return;
  fused_pending_.erase(it);
  if (!forwards_[static_cast<std::size_t>(v)].empty()) DrainSends(forwards_[static_cast<std::size_t>(v)]);
}

void Schedule::DrainSends(const std::vector<VertexId>& sends) {
  for (VertexId f : sends) {
    const std::optional<absl::Status> st = Settle(f);
    if (!st.has_value()) continue;  // TakeFinished counts it down
    --done_.pending;
    if (!st->ok()) (void)Fail(f, *st);
  }
}

absl::Status Schedule::Fail(VertexId v, const absl::Status& st) {
  absl::Status named(st.code(), absl::StrFormat("%s: %s", Describe(v), st.message()));
  if (!failed_.has_value()) failed_ = named;
  return named;
}

namespace {

// Takes each vertex of `pending` that `ended` out of the list (order does
// not matter there) and hands it to `finish`.
template <class Ended, class Finish>
void TakeEnded(std::vector<VertexId>& pending, int* work, Ended ended, Finish finish) {
  for (std::size_t i = 0; i < pending.size();) {
    const VertexId v = pending[i];
    if (!ended(v)) {
      ++i;
      continue;
    }
    pending[i] = pending.back();
    pending.pop_back();
    ++*work;
    finish(v);
  }
}

}  // namespace

void Schedule::TakeFinished(int* work) {
  if (!fused_pending_.empty()) RunFusedOfEnded(work);
  TakeEnded(
      draining_, work, [&](VertexId v) { return reqs_[v].drain.completed(); },
      [&](VertexId v) {
        reqs_[v].drain.Wait().IgnoreError();  // settled, whatever came of it (a truncation, a dead peer)
        if (car::Car* c = cars_[static_cast<std::size_t>(v)]) {
          (void)VertexMachine::Dispatch(*c, VertexEvent::kComplete);
        } else {
          --done_.pending;  // a send started as a receive ended, or last (DrainSends)
        }
      });
  TakeEnded(
      inflight_, work, [&](VertexId v) { return reqs_[v].req.completed(); },
      [&](VertexId v) {
        const absl::Status st = Finished(v, reqs_[v].req);
        car::Car& c = *cars_[static_cast<std::size_t>(v)];
        if (st.ok()) {
          (void)VertexMachine::Dispatch(c, VertexEvent::kComplete);
          return;
        }
        car::CarSignal sig;
        sig.error = Fail(v, st);
        (void)VertexMachine::Dispatch(c, VertexEvent::kError, sig);
      });
}

void Schedule::NameCountedFailure() {
  const auto named = [&](VertexId v) {
    const car::Car* c = engine::CarOf(reqs_[v].req);
    if (c == nullptr) return false;  // never prepared: EndAlone named it
    absl::Status st = c->status();
    const Vertex& x = vertices_[static_cast<std::size_t>(v)];
    if (st.ok() && x.kind == VertexKind::kRecv) st = CheckSize(x, std::min(c->bytes_done(), x.bytes));
    if (st.ok()) return false;
    (void)Fail(v, st);
    return true;
  };
  // The receives first: a send they start ran only if its receive ended well.
  for (const std::vector<VertexId>* steps : {&alone_recvs_, &alone_sends_}) {
    for (VertexId v : *steps) {
      if (named(v)) return;
    }
  }
  for (VertexId v : alone_recvs_) {
    for (VertexId f : forwards_[static_cast<std::size_t>(v)]) {
      if (named(f)) return;
    }
  }
  if (StartedLast()) {
    for (VertexId v : starts_last_) {
      if (named(v)) return;
    }
  }
  if (done_.status.ok()) {  // every counted step ended well, yet the bytes disagree: a bug of ours
    failed_ = absl::InternalError(absl::StrFormat("schedule %s: its counted steps carried %d bytes, %d expected",
                                                  name_, done_.bytes, CountedBytes()));
  }
}

void Schedule::RunFusedOfEnded(int* work) {
  // Started, each CAR exists: a receive that could not start left the list (EndAlone).
  TakeEnded(
      fused_pending_, work, [&](VertexId v) { return car::RecvMachine::IsFinal(*engine::CarOf(reqs_[v].req)); },
      [&](VertexId v) {
        const car::Car& c = *engine::CarOf(reqs_[v].req);
        // A receive that failed or came short runs nothing (the run's end
        // names it), nor does one of a run that failed.
        bool well = !failed_.has_value() && c.status().ok() &&
                    c.bytes_done() == vertices_[static_cast<std::size_t>(v)].bytes;
        if (well) {
          if (absl::Status st = RunFused(v); !st.ok()) {
            (void)Fail(v, st);
            well = false;
          }
        }
        if (forwards_[static_cast<std::size_t>(v)].empty()) return;
        if (!well) return DrainSends(forwards_[static_cast<std::size_t>(v)]);
        for (VertexId f : forwards_[static_cast<std::size_t>(v)]) StartAlone(f);
      });
}

absl::Status Schedule::RunFused(VertexId v) {
  for (VertexId f : fused_[static_cast<std::size_t>(v)]) {
    if (absl::Status st = RunLocal(f); !st.ok()) {
      return absl::Status(st.code(), absl::StrFormat("then %s: %s", Describe(f), st.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status Schedule::CheckSize(const Vertex& x, uint64_t received) {
  if (received == x.bytes) return absl::OkStatus();
  if (received != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("received %d bytes, expected %d (the ranks disagree about the sizes)", received, x.bytes));
  }
  // Its peer's part failed: a dead member, if this rank can see one, says why.
  if (const absl::Status gone = engine::GoneMember(*comm_); !gone.ok()) {
    return absl::Status(gone.code(), absl::StrFormat("rank %d sent nothing where %d bytes were expected: its part "
                                                     "of this collective failed (%s)",
                                                     x.peer, x.bytes, gone.message()));
  }
  return absl::InvalidArgumentError(absl::StrFormat(
      "rank %d sent nothing where %d bytes were expected: its part of this collective failed, or the ranks "
      "disagree about the sizes",
      x.peer, x.bytes));
}

absl::Status Schedule::Finished(VertexId v, Request& r) {
  absl::Status st = r.Wait();  // completed: returns at once
  const Vertex& x = vertices_[static_cast<std::size_t>(v)];
  if (st.ok() && x.kind == VertexKind::kRecv) st = CheckSize(x, r.bytes());
  if (st.ok()) st = RunFused(v);
  return st;
}

// The step's persistent request: prepared at its first run, and again only
// when its buffer moved (RebindUser), then started; the loose steps run as
// their host starts. After a run that ended well, with no buffer moved
// since (prepared_), every step is prepared on its buffer: not looked up.
inline absl::Status Schedule::StartRequest(VertexId v, bool counted) {
  Request& r = reqs_[v].req;
  if (!prepared_) {
    const Vertex& x = vertices_[static_cast<std::size_t>(v)];
    const bool send = x.kind == VertexKind::kSend;
    std::byte* buf = Resolve(send ? x.src : x.dst);
    const void*& prepared = reqs_[v].prepared_on;
    if (!r.persistent() || prepared != buf) {
      if (r.persistent()) CARTAGE_RETURN_IF_ERROR(r.Free());  // fails while still active, as a restart would
      prepared = buf;
      CARTAGE_RETURN_IF_ERROR(engine::PrepareStep(*comm_, send, buf, x.bytes, x.peer, TagOf(x), &r));
      if (single_copy_[static_cast<std::size_t>(v)]) engine::CapEager(r, kBurstEagerCap);
    }
  }
  CARTAGE_RETURN_IF_ERROR(counted ? engine::StartCounted(r, &done_) : r.Start());
  if (v == loose_host_) RunLoose();
  return absl::OkStatus();
}

void Schedule::LaunchVertex(car::Car& car, car::CarEvents& events) {
  auto* s = static_cast<Schedule*>(car.spec().owner);
  s->Launch(*static_cast<const VertexId*>(car.method_private()), car, events);
}

void Schedule::Launch(VertexId v, car::Car& car, car::CarEvents& events) {
  const Vertex& x = vertices_[static_cast<std::size_t>(v)];
  absl::Status st;
  if (x.kind == VertexKind::kSend || x.kind == VertexKind::kRecv) {
    Request& r = reqs_[v].req;
    st = StartRequest(v, /*counted=*/false);
    if (st.ok() && r.completed()) {  // an eager send, a message that was waiting: done now
      st = Finished(v, r);
      if (st.ok()) {
        events.Raise<VertexMachine>(car, VertexEvent::kComplete);
        return;
      }
    } else if (st.ok()) {
      inflight_.push_back(v);
      return;  // Poll completes it
    }
  } else {
    st = RunLocal(v);
    if (st.ok()) {
      events.Raise<VertexMachine>(car, VertexEvent::kComplete);
      return;
    }
  }
  car::CarSignal sig;
  sig.error = Fail(v, st);
  events.Raise<VertexMachine>(car, VertexEvent::kError, sig);
}

void Schedule::DrainVertex(car::Car& car, car::CarEvents& events) {
  auto* s = static_cast<Schedule*>(car.spec().owner);
  s->Drain(*static_cast<const VertexId*>(car.method_private()), car, events);
}

// A send or receive that will not run (a predecessor failed) still settles
// its message with its peer: an empty message in place of the data (the
// peer's receive fails, "sent nothing", and its schedule drains in turn), or
// a receive into zero bytes that takes the peer's message, whatever its
// size, and keeps none of it. So no rank waits for ever on a message this
// run will not send, and none of this run's messages is left to meet a
// later run's receive of the same tag. A local step has nothing to settle.
void Schedule::Drain(VertexId v, car::Car& car, car::CarEvents& events) {
  const Vertex& x = vertices_[static_cast<std::size_t>(v)];
  if ((x.kind == VertexKind::kSend || x.kind == VertexKind::kRecv) && !Settle(v).has_value()) {
    return;  // Poll finishes it
  }
  events.Raise<VertexMachine>(car, VertexEvent::kComplete);
}

std::optional<absl::Status> Schedule::Settle(VertexId v) {
  static char nothing;  // zero bytes: never read nor written
  const Vertex& x = vertices_[static_cast<std::size_t>(v)];
  Request& r = reqs_[v].drain;
  const absl::Status st = x.kind == VertexKind::kSend ? comm_->Isend(&nothing, 0, x.peer, TagOf(x), &r)
                                                      : comm_->Irecv(&nothing, 0, x.peer, TagOf(x), &r);
  if (st.ok() && !r.completed()) {
    draining_.push_back(v);
    return std::nullopt;
  }
  if (st.ok()) r.Wait().IgnoreError();
  return st;
}

// The steps that wait for nothing and that nothing waits for, run as the
// send loose_host_ starts. One that fails fails the run (its first error)
// but not the send, whose message is on its way.
void Schedule::RunLoose() {
  for (VertexId f : loose_) {
    const absl::Status st = RunLocal(f);
    if (!st.ok()) (void)Fail(f, st);
  }
}

absl::Status Schedule::RunLocal(VertexId v) {
  const Vertex& x = vertices_[static_cast<std::size_t>(v)];
  switch (x.kind) {
    case VertexKind::kReduce: return ReduceInto(v);
    case VertexKind::kCopy:
      if (x.bytes > 0) std::memmove(Resolve(x.dst), Resolve(x.src), x.bytes);
      return absl::OkStatus();
    case VertexKind::kPack:
      if (x.bytes > 0) {
        datatype::Pack(Resolve(x.src), x.count, *x.type, static_cast<int64_t>(x.first),
                  static_cast<int64_t>(x.first + x.bytes), Resolve(x.dst));
      }
      return absl::OkStatus();
    case VertexKind::kUnpack:
      if (x.bytes > 0) {
        datatype::Unpack(Resolve(x.src), x.count, *x.type, static_cast<int64_t>(x.first),
                    static_cast<int64_t>(x.first + x.bytes), Resolve(x.dst));
      }
      return absl::OkStatus();
    default: return absl::OkStatus();
  }
}

namespace {

// inout = in op inout over `count` packed elements of `type`.
void Apply(const Op& op, const void* in, void* inout, int64_t count, const Datatype& type) {
  datatype::BasicType basic;
  if (op.kind() != OpKind::kUser && type.homogeneous(&basic)) {
    datatype::ReduceBasic(op.kind(), basic, in, inout, count * type.size() / static_cast<int64_t>(datatype::SizeOf(basic)));
    return;
  }
  if (type.contiguous()) {
    op.fn()(in, inout, count, type, op.context());
    return;
  }
  // A user operator on a non-contiguous type works on the type's layout:
  // unpack the accumulator, reduce the packed operand into it, pack it back.
  const int64_t bytes = count * type.size();
  std::vector<std::byte> layout(static_cast<std::size_t>((count - 1) * type.extent() + type.true_extent()));
  std::byte* base = layout.data() - type.true_lb();
  datatype::Unpack(inout, count, type, 0, bytes, base);
  (void)datatype::ReduceUnpack(op, in, count, type, 0, bytes, base);  // Build checked the operator
  datatype::Pack(base, count, type, 0, bytes, inout);
}

}  // namespace

absl::Status Schedule::ReduceInto(VertexId v) {
  const Vertex& x = vertices_[static_cast<std::size_t>(v)];
  if (x.count == 0) return absl::OkStatus();
  const std::byte* in = Resolve(x.src);
  std::byte* inout = Resolve(x.dst);
  if (x.src_is_left || x.op->commutative()) {
    Apply(*x.op, in, inout, x.count, *x.type);
    return absl::OkStatus();
  }
  // inout = inout op in: reduce into a copy of `in`, then move it over.
  std::vector<std::byte>& tmp = scratch_[static_cast<std::size_t>(v)];
  std::memcpy(tmp.data(), in, x.bytes);
  Apply(*x.op, inout, tmp.data(), x.count, *x.type);
  std::memcpy(inout, tmp.data(), x.bytes);
  return absl::OkStatus();
}

}  // namespace cartage
