// Window: its making (every rank's size, unit and host exchanged; a shared
// segment mapped, or the service launched), its calls, and its freeing.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

#include "absl/strings/str_format.h"
#include "cartage/collectives.h"
#include "cartage/rma.h"
#include "fsm/registry.h"
#include "rma/window_state.h"

namespace cartage {

namespace rma {

namespace {
std::atomic<uint32_t> g_windows{0};
std::atomic<uint64_t> g_trace_ids{1};
}  // namespace

WindowState::WindowState(const Comm& c, std::byte* b, uint64_t n, int unit, uint32_t num)
    : comm(c), base(b), bytes(n), disp_unit(unit), number(num),
      trace_id(g_trace_ids.fetch_add(1, std::memory_order_relaxed)) {
  const auto ranks = static_cast<std::size_t>(comm.size());
  sent_to.assign(ranks, 0);
  queued.resize(ranks);
  landing.assign(ranks, 0);
  replying.assign(ranks, 0);
  holders.assign(ranks, 0);
  lock_pending.assign(ranks, 0);
  locks.resize(ranks);
  batches.resize(ranks);
  started_to.assign(ranks, 0);
  group_sent.assign(ranks, 0);
  exposed_to.assign(ranks, 0);
  group_served.assign(ranks, 0);
  control_buf.resize(kControlMax);
}

WindowState::~WindowState() { StopService(); }

std::string WindowState::Name() const {
  return absl::StrFormat("window %d (rank %d of %d)", number, comm.rank(), comm.size());
}

void WindowState::StopService() {
  if (exposed_token != 0) {  // every rank is past its last access to it (Free's barrier), or the window is gone
    engine::Unexpose(comm, exposed_token);
    exposed_token = 0;
  }
  if (EpochMachine::StateOf(*this) != EpochState::kFreed) (void)EpochMachine::Dispatch(*this, EpochEvent::kFree);
  if (LockMachine::StateOf(*this) != LockState::kClosed) (void)LockMachine::Dispatch(*this, LockEvent::kClose);
  if (ExposureMachine::StateOf(*this) != ExposureState::kClosed) {
    (void)ExposureMachine::Dispatch(*this, ExposureEvent::kFree);
  }
  lock_waiters.clear();
  // A start's or a post's messages still on their way: nothing more comes
  // of them (each request cancels its receive as it goes).
  start_group.clear();
  exposure_group.clear();
  // The control receive still posted: nothing more is served.
  if (control_req.active()) {
    (void)control_req.Cancel();
    control_req.Wait().IgnoreError();
  }
  if (service_req.active()) service_req.Wait().IgnoreError();  // its poll ends now the window is freed
  for (const std::unique_ptr<ServedOp>& op : serving) {
    if (op->req.active()) {
      (void)op->req.Cancel();
      op->req.Wait().IgnoreError();
    }
  }
  serving.clear();
}

absl::Status WindowState::Free() {
  if (EpochMachine::StateOf(*this) == EpochState::kFreed) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: freed already", Name()));
  }
  const std::size_t unfenced = ops.size();
  const bool started = EpochMachine::StateOf(*this) == EpochState::kStarted;
  const bool exposed = ExposureMachine::StateOf(*this) == ExposureState::kPosted;
  std::size_t locked = 0;
  for (const std::unique_ptr<LockAccess>& a : locks) locked += a != nullptr && !AccessMachine::IsFinal(*a) ? 1 : 0;
  // Every rank is here: nobody sends this window anything more.
  absl::Status st = Barrier(comm);
  StopService();
  // A lock still held ends here, failed: nothing closes it after the free.
  for (const std::unique_ptr<LockAccess>& a : locks) {
    if (a == nullptr || AccessMachine::IsFinal(*a)) continue;
    RmaSignal x;
    x.error = absl::FailedPreconditionError("the window was freed with the lock held");
    (void)AccessMachine::Dispatch(*a, AccessEvent::kError, x);
  }
  if (shared != nullptr) {  // nobody loads or stores any more
    shared.reset();
    base = nullptr;
  }
  if (st.ok() && (started || exposed)) {
    st = absl::FailedPreconditionError(absl::StrFormat("%s: freed with %s (%s first)", Name(),
                                                       started ? "an access epoch started" : "the window exposed",
                                                       started ? "complete it" : "wait"));
  } else if (st.ok() && locked > 0) {
    st = absl::FailedPreconditionError(
        absl::StrFormat("%s: freed with locks on %d ranks held (unlock them first)", Name(), locked));
  } else if (st.ok() && unfenced > 0) {
    st = absl::FailedPreconditionError(
        absl::StrFormat("%s: freed with %d operations not completed (a fence or an unlock completes them)", Name(),
                        unfenced));
  }
  // What the batches still hold never leaves (the error above names the
  // operations; a request's lock failed with the free).
  for (OutBatch& b : batches) b = OutBatch{};
  ops.clear();
  ops_final = 0;
  return st;
}

}  // namespace rma

using rma::WindowState;

Window::Window(std::shared_ptr<WindowState> state) : state_(std::move(state)) {}

Window::~Window() = default;

absl::StatusOr<std::unique_ptr<Window>> Window::Create(const Comm& comm, void* base, uint64_t bytes,
                                                       int disp_unit) {
  return Make(comm, base, bytes, disp_unit, Memory::kCallers);
}

absl::StatusOr<std::unique_ptr<Window>> Window::Allocate(const Comm& comm, uint64_t bytes, int disp_unit) {
  return Make(comm, nullptr, bytes, disp_unit, Memory::kAllocated);
}

absl::StatusOr<std::unique_ptr<Window>> Window::AllocateShared(const Comm& comm, uint64_t bytes, int disp_unit) {
  return Make(comm, nullptr, bytes, disp_unit, Memory::kShared);
}

absl::StatusOr<std::unique_ptr<Window>> Window::CreateDynamic(const Comm& comm) {
  return Make(comm, nullptr, 0, 1, Memory::kDynamic);
}

namespace {

// Equal for two processes that can map one POSIX shared-memory segment:
// one boot of one machine, one mount namespace (/dev/shm), and the same
// CARTAGE_HOST_TAG (ranks with different tags count as on different
// hosts). 0: windows are never shared here (CARTAGE_RMA_SHARED=0).
uint64_t ComputeHostKey() {
  const char* env = std::getenv("CARTAGE_RMA_SHARED");
  if (env != nullptr && std::string_view(env) == "0") return 0;
  std::string key;
  if (std::FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char line[64] = {};
    if (std::fgets(line, sizeof(line), f) != nullptr) key += line;
    std::fclose(f);
  }
  struct stat ns {};
  if (::stat("/proc/self/ns/mnt", &ns) == 0) key += std::to_string(ns.st_ino);
  if (const char* tag = std::getenv("CARTAGE_HOST_TAG")) key += std::string(":") + tag;
  uint64_t h = 1469598103934665603ull;  // FNV-1a: the same in every process
  for (const char c : key) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h | 1;
}

// Read once a process: every window it makes asks.
uint64_t HostKey() {
  static const uint64_t key = ComputeHostKey();
  return key;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Window>> Window::Make(const Comm& comm, void* base, uint64_t bytes, int disp_unit,
                                                     Memory memory) {
  CARTAGE_RETURN_IF_ERROR(engine::Alive(comm, "window"));
  // Checked before any collective call: a bad argument is named on the
  // rank that passed it, which then takes no part in the exchange below
  // (as with any collective call one rank did not make).
  if (disp_unit <= 0) return absl::InvalidArgumentError(absl::StrFormat("window: displacement unit %d", disp_unit));
  if (memory == Memory::kCallers && base == nullptr && bytes > 0) {
    return absl::InvalidArgumentError(absl::StrFormat("window: null base for %d bytes", bytes));
  }
  if (bytes > (uint64_t{1} << 48)) return absl::InvalidArgumentError(absl::StrFormat("window: %d bytes", bytes));
  CARTAGE_ASSIGN_OR_RETURN(const uint64_t one_sided_min, rma::OneSidedMin());
  CARTAGE_ASSIGN_OR_RETURN(Comm own, comm.Dup());
  const uint32_t number = rma::g_windows.fetch_add(1, std::memory_order_relaxed) + 1;
  // Every rank's window, so that an origin checks its accesses itself, and
  // its host: where all are on one, every rank maps every other's memory
  // (whatever method carries their messages, as Open MPI's osc/sm).
  // (And, for a window over the caller's memory, its process and address,
  // which the others may reach with one copy.)
  struct Shape {
    uint64_t bytes;
    int64_t unit;
    uint64_t host;
    uint64_t pid;
    uint64_t base;
    uint64_t probe;
  };
  const bool mapped = memory == Memory::kAllocated || memory == Memory::kShared;
  const Shape mine{bytes,
                   disp_unit,
                   memory != Memory::kDynamic ? HostKey() : 0,
                   static_cast<uint64_t>(::getpid()),
                   static_cast<uint64_t>(reinterpret_cast<uintptr_t>(base)),
                   rma::ProbeAddress()};
  std::vector<Shape> all(static_cast<std::size_t>(own.size()));
  static const Datatype kU64 = Datatype::Basic(datatype::BasicType::kUint64);
  CARTAGE_RETURN_IF_ERROR(Allgather(own, &mine, all.data(), 6, kU64));
  std::vector<uint64_t> sizes;
  std::vector<int> units;
  int apart = -1;  // a rank that cannot map the others' memory
  for (std::size_t r = 0; r < all.size(); ++r) {
    sizes.push_back(all[r].bytes);
    units.push_back(static_cast<int>(all[r].unit));
    if ((all[r].host == 0 || all[r].host != all[0].host) && apart < 0) apart = static_cast<int>(r);
  }
  if (memory == Memory::kShared && apart >= 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "window: allocate_shared over %d ranks: rank %d cannot map every other rank's memory (it is not on rank "
        "0's host, or CARTAGE_RMA_SHARED=0 there)",
        own.size(), apart));
  }
  std::unique_ptr<rma::SharedSegment> shared;
  std::unique_ptr<std::byte, WindowState::FreeMemory> owned;
  if (mapped && apart < 0) {
    absl::StatusOr<std::unique_ptr<rma::SharedSegment>> seg =
        rma::MapShared(own, sizes, /*contiguous=*/memory == Memory::kShared, number);
    // A segment some rank could not map (every rank learns it): an
    // allocated window is served instead.
    if (!seg.ok() && (memory == Memory::kShared || seg.status().code() != absl::StatusCode::kResourceExhausted)) {
      return seg.status();
    }
    if (seg.ok()) {
      shared = *std::move(seg);
      base = shared->bases[static_cast<std::size_t>(own.rank())];
    }
  }
  // Served memory cartage allocates: a rank that cannot says so in the
  // agreement below, so that every rank fails the window, naming it.
  bool ready = true;
  if (memory == Memory::kAllocated && shared == nullptr) {
    const std::size_t rounded = static_cast<std::size_t>((std::max<uint64_t>(bytes, 1) + 63) / 64 * 64);
    owned.reset(static_cast<std::byte*>(std::aligned_alloc(64, rounded)));
    ready = owned != nullptr;
    if (ready) std::memset(owned.get(), 0, rounded);
    base = owned.get();
  }
  // Over the caller's memory on one host: single copy if every rank can
  // reach every other's memory (all agree: one rank that cannot makes the
  // window served everywhere).
  bool single_copy = false;
  std::vector<std::shared_ptr<const base::ProcessHandle>> processes;
  if (memory == Memory::kCallers && apart < 0) {
    int64_t reach = 1;
    for (std::size_t r = 0; r < all.size(); ++r) {
      // Opened before the probe: every rank is alive until the agreement
      // below, so each pid is still its rank's process here.
      processes.push_back(base::OpenProcess(static_cast<int>(all[r].pid)));
      if (!rma::CanReach(static_cast<pid_t>(all[r].pid), all[r].probe)) reach = 0;
    }
    int64_t everywhere = 0;
    static const Datatype kI64 = Datatype::Basic(datatype::BasicType::kInt64);
    CARTAGE_RETURN_IF_ERROR(Allreduce(own, &reach, &everywhere, 1, kI64, datatype::Op(datatype::OpKind::kMin)));
    single_copy = everywhere == 1;
  }
  auto state = std::make_shared<WindowState>(own, static_cast<std::byte*>(base), bytes, disp_unit, number);
  state->single_copy = single_copy;
  if (single_copy) {
    for (const Shape& s : all) {
      state->pids.push_back(static_cast<pid_t>(s.pid));
      state->remote_bases.push_back(static_cast<uintptr_t>(s.base));
    }
    state->processes = std::move(processes);
  }
  state->owned = std::move(owned);
  state->shared = std::move(shared);
  state->sizes = std::move(sizes);
  state->units = std::move(units);
  state->dynamic = memory == Memory::kDynamic;
  // Every rank of a served window agrees: its memory is there, and, where
  // one method with rma carries every rank, each exposes it through that
  // method and all learn what the others are named by (all or none: one
  // rank that could not makes the window served everywhere).
  if (!state->direct() && !single_copy && memory != Memory::kDynamic) {
    CARTAGE_RETURN_IF_ERROR(rma::Agree(own, *state, ready, base, bytes, one_sided_min));
  }
  if (!state->direct()) {  // a shared window's operations need no service
    CARTAGE_RETURN_IF_ERROR(own.Irecv(state->control_buf.data(), state->control_buf.size(), kAnySource,
                                      rma::kTagControl, &state->control_req));
    CARTAGE_RETURN_IF_ERROR(
        engine::Launch(own, std::make_shared<rma::Service>(state.get()), /*persistent=*/false, &state->service_req));
  }
  return std::unique_ptr<Window>(new Window(std::move(state)));
}

namespace {

// The call's access in the form WindowState::Issue takes.
rma::Access Of(rma::OpKind kind, const void* origin, int64_t origin_count, const Datatype* origin_type, int target,
               uint64_t disp, int64_t target_count, const Datatype& target_type) {
  rma::Access a;
  a.kind = kind;
  a.origin = origin;
  a.origin_count = origin_count;
  a.origin_type = origin_type;
  a.target = target;
  a.disp = disp;
  a.target_count = target_count;
  a.target_type = &target_type;
  return a;
}

const Datatype& Bytes() {
  static const Datatype kByte = Datatype::Basic(datatype::BasicType::kByte);
  return kByte;
}

}  // namespace

absl::Status Window::Issue(const char* what, const rma::Access& a, Request* req) {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status(what);
  if (req == nullptr) {
    if (a.kind == rma::OpKind::kPut || a.kind == rma::OpKind::kGet) {
      // Contiguous on both sides, the same size: a shared window copies it at once.
      const bool put = a.kind == rma::OpKind::kPut;
      const Datatype& here = put ? *a.origin_type : *a.result_type;
      const int64_t count = put ? a.origin_count : a.result_count;
      const int64_t n = a.target_count * a.target_type->size();
      if (state_->direct() && here.contiguous() && a.target_type->contiguous() && count >= 0 && a.target_count >= 0 &&
          count * here.size() == n &&
          state_->CopyDirect(a.kind, put ? const_cast<void*>(a.origin) : a.result, static_cast<uint64_t>(n), a.target,
                             a.disp)) {
        return absl::OkStatus();
      }
    } else if (std::optional<absl::Status> done = state_->AccumulateDirect(a)) {
      return *std::move(done);
    }
    return state_->Issue(a);
  }
  if (req->active() || req->persistent()) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: r%s to rank %d: the request is %s", state_->Name(), what,
                                                         a.target, req->active() ? "still active" : "persistent"));
  }
  std::shared_ptr<rma::OriginOp> op;
  CARTAGE_RETURN_IF_ERROR(state_->Issue(a, &op));
  return engine::Launch(state_->comm, std::make_shared<rma::OpDone>(state_, std::move(op)), /*persistent=*/false,
                        req);
}

absl::Status Window::Put(const void* origin, int64_t origin_count, const Datatype& origin_type, int target,
                         uint64_t disp, int64_t target_count, const Datatype& target_type) {
  return Rput(origin, origin_count, origin_type, target, disp, target_count, target_type, nullptr);
}

absl::Status Window::Put(const void* origin, std::size_t bytes, int target, uint64_t disp) {
  {
    engine::Call in(state_->comm);
    // (Its buffer is only read.)
    if (in.ok() && state_->CopyDirect(rma::OpKind::kPut, const_cast<void*>(origin), bytes, target, disp)) {
      return absl::OkStatus();
    }
  }
  const auto n = static_cast<int64_t>(bytes);
  return Put(origin, n, Bytes(), target, disp, n, Bytes());
}

absl::Status Window::Get(void* origin, int64_t origin_count, const Datatype& origin_type, int target, uint64_t disp,
                         int64_t target_count, const Datatype& target_type) {
  return Rget(origin, origin_count, origin_type, target, disp, target_count, target_type, nullptr);
}

absl::Status Window::Get(void* origin, std::size_t bytes, int target, uint64_t disp) {
  {
    engine::Call in(state_->comm);
    if (in.ok() && state_->CopyDirect(rma::OpKind::kGet, origin, bytes, target, disp)) return absl::OkStatus();
  }
  const auto n = static_cast<int64_t>(bytes);
  return Get(origin, n, Bytes(), target, disp, n, Bytes());
}

absl::Status Window::Accumulate(const void* origin, int64_t origin_count, const Datatype& origin_type, int target,
                                uint64_t disp, int64_t target_count, const Datatype& target_type, RmaOp op) {
  return Raccumulate(origin, origin_count, origin_type, target, disp, target_count, target_type, op, nullptr);
}

absl::Status Window::GetAccumulate(const void* origin, int64_t origin_count, const Datatype& origin_type,
                                   void* result, int64_t result_count, const Datatype& result_type, int target,
                                   uint64_t disp, int64_t target_count, const Datatype& target_type, RmaOp op) {
  return RgetAccumulate(origin, origin_count, origin_type, result, result_count, result_type, target, disp,
                        target_count, target_type, op, nullptr);
}

absl::Status Window::FetchAndOp(const void* origin, void* result, const Datatype& type, int target, uint64_t disp,
                                RmaOp op) {
  return GetAccumulate(origin, 1, type, result, 1, type, target, disp, 1, type, op);
}

absl::Status Window::CompareAndSwap(const void* origin, const void* compare, void* result, const Datatype& type,
                                    int target, uint64_t disp) {
  rma::Access a = Of(rma::OpKind::kCompareAndSwap, origin, 1, &type, target, disp, 1, type);
  a.compare = compare;
  a.result = result;
  a.result_count = 1;
  a.result_type = &type;
  return Issue("compare_and_swap", a);
}

absl::Status Window::Rput(const void* origin, int64_t origin_count, const Datatype& origin_type, int target,
                          uint64_t disp, int64_t target_count, const Datatype& target_type, Request* req) {
  return Issue("put", Of(rma::OpKind::kPut, origin, origin_count, &origin_type, target, disp, target_count,
                         target_type),
               req);
}

absl::Status Window::Rget(void* origin, int64_t origin_count, const Datatype& origin_type, int target, uint64_t disp,
                          int64_t target_count, const Datatype& target_type, Request* req) {
  rma::Access a = Of(rma::OpKind::kGet, nullptr, 0, &origin_type, target, disp, target_count, target_type);
  a.result = origin;
  a.result_count = origin_count;
  a.result_type = &origin_type;
  return Issue("get", a, req);
}

absl::Status Window::Raccumulate(const void* origin, int64_t origin_count, const Datatype& origin_type, int target,
                                 uint64_t disp, int64_t target_count, const Datatype& target_type, RmaOp op,
                                 Request* req) {
  if (op.code() == RmaOp::NoOp().code()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: accumulate to rank %d: NoOp only fetches (GetAccumulate, FetchAndOp)", state_->Name(),
                        target));
  }
  rma::Access a =
      Of(rma::OpKind::kAccumulate, origin, origin_count, &origin_type, target, disp, target_count, target_type);
  a.op = op.code();
  return Issue("accumulate", a, req);
}

absl::Status Window::RgetAccumulate(const void* origin, int64_t origin_count, const Datatype& origin_type,
                                    void* result, int64_t result_count, const Datatype& result_type, int target,
                                    uint64_t disp, int64_t target_count, const Datatype& target_type, RmaOp op,
                                    Request* req) {
  rma::Access a =
      Of(rma::OpKind::kGetAccumulate, origin, origin_count, &origin_type, target, disp, target_count, target_type);
  a.result = result;
  a.result_count = result_count;
  a.result_type = &result_type;
  a.op = op.code();
  return Issue("get_accumulate", a, req);
}

absl::Status Window::Fence() {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("fence");
  return state_->Fence();
}

absl::Status Window::Post(absl::Span<const int> origins) {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("post");
  return state_->Post(origins);
}

absl::Status Window::Start(absl::Span<const int> targets) {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("start");
  return state_->Start(targets);
}

absl::Status Window::Complete() {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("complete");
  return state_->Complete();
}

absl::Status Window::Wait() {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("wait");
  bool ended = false;
  return state_->WaitExposure(/*block=*/true, &ended);
}

absl::StatusOr<bool> Window::Test() {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("test");
  bool ended = false;
  CARTAGE_RETURN_IF_ERROR(state_->WaitExposure(/*block=*/false, &ended));
  return ended;
}

absl::string_view Window::exposure() const { return rma::ExposureDef::kStates[state_->exposure.value()]; }

absl::Status Window::Lock(int target, LockType type) {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("lock");
  return state_->Lock(target, type == LockType::kExclusive ? rma::kLockExclusive : rma::kLockShared);
}

absl::Status Window::Unlock(int target) {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("unlock");
  return state_->Unlock(target);
}

absl::Status Window::LockAll() {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("lock_all");
  for (int r = 0; r < state_->comm.size(); ++r) {
    if (absl::Status s = state_->Lock(r, rma::kLockShared); !s.ok()) {
      for (int k = 0; k < r; ++k) state_->Unlock(k).IgnoreError();  // the ones taken go back
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status Window::UnlockAll() {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("unlock_all");
  absl::Status first;
  for (int r = 0; r < state_->comm.size(); ++r) first.Update(state_->Unlock(r));
  return first;
}

absl::Status Window::Flush(int target) {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("flush");
  return state_->Flush(target, /*local=*/false);
}

absl::Status Window::FlushLocal(int target) {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("flush_local");
  return state_->Flush(target, /*local=*/true);
}

absl::Status Window::FlushAll() {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("flush_all");
  return state_->FlushAll(/*local=*/false);
}

absl::Status Window::FlushLocalAll() {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("flush_local_all");
  return state_->FlushAll(/*local=*/true);
}

absl::Status Window::Free() {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("window free");
  return state_->Free();
}

absl::StatusOr<Window::SharedMemory> Window::SharedQuery(int rank) const {
  if (!state_->direct()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("%s: shared_query: the window is not shared (AllocateShared makes one)", state_->Name()));
  }
  if (rank < 0 || rank >= state_->comm.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: shared_query: no rank %d in a window of %d", state_->Name(), rank, state_->comm.size()));
  }
  const auto r = static_cast<std::size_t>(rank);
  return SharedMemory{state_->shared->bases[r], state_->sizes[r], state_->units[r]};
}

absl::Status Window::Sync() const {
  if (rma::EpochMachine::StateOf(*state_) == rma::EpochState::kFreed) {
    return absl::FailedPreconditionError(absl::StrFormat("%s: sync: freed", state_->Name()));
  }
  rma::MemoryBarrier();
  return absl::OkStatus();
}

bool Window::shared() const { return state_->direct(); }
bool Window::dynamic() const { return state_->dynamic; }
bool Window::single_copy() const { return state_->single_copy; }
bool Window::one_sided() const { return state_->one_sided; }

absl::Status Window::Attach(void* base, uint64_t bytes) {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("attach");
  return state_->Attach(base, bytes);
}

absl::Status Window::Detach(const void* base) {
  engine::Call in(state_->comm);
  if (!in.ok()) return in.status("detach");
  return state_->Detach(base);
}
void* Window::base() const { return state_->base; }
uint64_t Window::bytes() const { return state_->bytes; }
int Window::disp_unit() const { return state_->disp_unit; }
absl::string_view Window::state() const { return rma::EpochDef::kStates[state_->state.value()]; }
uint64_t Window::served() const { return state_->served; }
uint64_t Window::issued() const { return state_->issued; }
uint64_t Window::control_messages() const { return state_->control_messages; }

namespace rma {

absl::Status RegisterRmaMachines(fsm::Registry& registry) {
  absl::Status s = registry.Register(EpochMachine::Describe());
  s.Update(registry.Register(ExposureMachine::Describe()));
  s.Update(registry.Register(OpMachine::Describe()));
  s.Update(registry.Register(AccessMachine::Describe()));
  s.Update(registry.Register(LockMachine::Describe()));
  s.Update(registry.Register(ServeMachine::Describe()));
  return s;
}

}  // namespace rma

}  // namespace cartage
