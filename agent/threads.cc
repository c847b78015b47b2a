#include "agent/threads.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <cstdlib>
#include <ctime>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "agent/runtime.h"
#include "base/check.h"

namespace cartage {

absl::string_view ThreadLevelName(ThreadLevel level) {
  switch (level) {
    case ThreadLevel::kSingle: return "single";
    case ThreadLevel::kFunneled: return "funneled";
    case ThreadLevel::kSerialized: return "serialized";
    case ThreadLevel::kMultiple: return "multiple";
  }
  return "?";
}

namespace agent {

absl::StatusOr<ThreadLevel> ParseThreadLevel(absl::string_view text) {
  for (ThreadLevel l : {ThreadLevel::kSingle, ThreadLevel::kFunneled, ThreadLevel::kSerialized,
                        ThreadLevel::kMultiple}) {
    if (text == ThreadLevelName(l)) return l;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("CARTAGE_THREADS=%s: need single, funneled, serialized or multiple", text));
}

absl::StatusOr<Threading> ResolveThreading(const AgentOptions& options) {
  Threading t;
  if (options.threads.has_value()) {
    t.level = *options.threads;
  } else if (const char* v = std::getenv("CARTAGE_THREADS"); v != nullptr && *v != '\0') {
    CARTAGE_ASSIGN_OR_RETURN(t.level, ParseThreadLevel(v));
  }
  if (options.progress_thread.has_value()) {
    t.progress_thread = *options.progress_thread;
  } else if (const char* v = std::getenv("CARTAGE_PROGRESS_THREAD"); v != nullptr && *v != '\0') {
    const absl::string_view s(v);
    if (s != "0" && s != "1") {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_PROGRESS_THREAD=%s: need 0 or 1", s));
    }
    t.progress_thread = s == "1";
  }
  const char* from = "AgentOptions::lanes";
  if (options.lanes.has_value()) {
    t.lanes = *options.lanes;
  } else if (const char* v = std::getenv("CARTAGE_LANES"); v != nullptr && *v != '\0') {
    from = "CARTAGE_LANES";
    if (!absl::SimpleAtoi(v, &t.lanes)) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_LANES=%s: need 1 to %d lanes", v, kMaxLanes));
    }
  }
  if (t.lanes < 1 || t.lanes > kMaxLanes) {
    return absl::InvalidArgumentError(absl::StrFormat("%s=%d: need 1 to %d lanes", from, t.lanes, kMaxLanes));
  }
  // Lanes keep threads apart; below multiple no two threads are inside the
  // agent at once, and each lane would only cost a set of methods.
  if (t.lanes > 1 && t.level != ThreadLevel::kMultiple) {
    return absl::InvalidArgumentError(absl::StrFormat("%s=%d: lanes need thread level multiple, not %s", from,
                                                      t.lanes, ThreadLevelName(t.level)));
  }
  return t;
}

}  // namespace agent
}  // namespace cartage

// ---- The runtime's side: Entry, the engine lock, shared waits ----------------

namespace cartage::agent {

namespace {

void FutexWait(std::atomic<uint32_t>* word, uint32_t seen, int timeout_us) {
  timespec ts{timeout_us / 1000000, static_cast<long>(timeout_us % 1000000) * 1000};
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

// How long a thread that cannot get the lock sleeps before it looks again
// should no unlock wake it (a wake-up lost between its check and its sleep).
constexpr int kShareSleepUs = 1000;

}  // namespace

absl::Status Runtime::Refused(absl::string_view what) const {
  if (serial_check_) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: called while another thread's call is under way, at thread level %s (one call at a time; "
        "CARTAGE_THREADS=multiple lets threads call at once)",
        what, ThreadLevelName(threading_.level)));
  }
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s: called from a thread other than the one that made the agent, at thread level %s "
      "(CARTAGE_THREADS=serialized or multiple lets other threads call)",
      what, ThreadLevelName(threading_.level)));
}

bool Runtime::EnterSlow() {
  const uintptr_t me = ThisThread();
  // A call made while this thread holds the lock is nested in one already
  // admitted, or made by the runtime's own work (a collective's step that
  // the progress thread starts): admitted as it is.
  const bool inside = locked_ && holder_.load(std::memory_order_relaxed) == me;
  if (!inside && owner_only_ && me != owner_) return false;
  if (serial_check_) {
    if (serial_holder_.load(std::memory_order_relaxed) == me) {
      ++serial_depth_;
    } else if (!inside) {
      uintptr_t none = 0;
      if (!serial_holder_.compare_exchange_strong(none, me, std::memory_order_acquire)) return false;
      serial_depth_ = 1;
    }
  }
  if (locked_) Lock();
  return true;
}

void Runtime::LeaveSlow() {
  if (locked_) Unlock();
  if (serial_check_ && serial_holder_.load(std::memory_order_relaxed) == ThisThread() &&
      --serial_depth_ == 0) {
    serial_holder_.store(0, std::memory_order_release);
  }
}

void Runtime::Lock() {
  const uintptr_t me = ThisThread();
  if (holder_.load(std::memory_order_relaxed) == me) {
    ++depth_;
    return;
  }
  if (!mu_.try_lock()) {
    // Its holder may be asleep on the methods (BlockHeld): wake it. Either
    // it sees wanted_ before it blocks, or this sees blocking_.
    wanted_.fetch_add(1, std::memory_order_seq_cst);
    if (blocking_.load(std::memory_order_seq_cst)) {
      for (methods::Method* m : routes_.polled()) m->Wake();
    }
    mu_.lock();
    wanted_.fetch_sub(1, std::memory_order_relaxed);
  }
  holder_.store(me, std::memory_order_relaxed);
  depth_ = 1;
}

bool Runtime::TryLock() {
  if (!mu_.try_lock()) return false;
  holder_.store(ThisThread(), std::memory_order_relaxed);
  depth_ = 1;
  return true;
}

void Runtime::Unlock(bool changed) {
  if (--depth_ > 0) return;
  holder_.store(0, std::memory_order_relaxed);
  mu_.unlock();
  // What the holder did may have completed a sleeper's request.
  if (changed) WakeSleepers();
}

void Runtime::WakeSleepers() {
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    epoch_.fetch_add(1, std::memory_order_release);
    FutexWakeAll(&epoch_);
  }
}

int Runtime::ReleaseAll() {
  if (holder_.load(std::memory_order_relaxed) != ThisThread()) return 0;
  const int depth = depth_;
  depth_ = 1;
  Unlock();
  return depth;
}

void Runtime::Reacquire(int depth) {
  if (depth == 0) return;
  Lock();
  depth_ = depth;
}

bool Runtime::CheckPeersWhenDue() {
  if (std::chrono::steady_clock::now() - last_peer_check_ <= wait_.peer_check) return false;
  CheckPeers();
  return true;
}

void Runtime::BlockHeld(int timeout_us) {
  blocking_.store(true, std::memory_order_seq_cst);
  if (wanted_.load(std::memory_order_seq_cst) == 0) Block(timeout_us);
  blocking_.store(false, std::memory_order_relaxed);
}

void Runtime::WaitShared(absl::FunctionRef<bool()> done, absl::FunctionRef<int()> round) {
  using Clock = std::chrono::steady_clock;
  if (done()) return;  // done already (an eager send, a message that was waiting): the lock stays
  int idle = 0;
  // While no other thread asks for the lock, the spinning rounds run under
  // the hold this call already has: giving it up and taking it back at every
  // round is two atomic operations a round for nobody. A thread that wants
  // it says so in wanted_ (Lock), and sleepers are woken as an unlock would.
  if (!progress_on_.load(std::memory_order_relaxed) && holder_.load(std::memory_order_relaxed) == ThisThread()) {
    while (idle < wait_.spin_rounds && wanted_.load(std::memory_order_relaxed) == 0) {
      const int work = round();
      if (work > 0) WakeSleepers();
      if (done()) return;
      if (work > 0 || OtherLanesDue(idle)) {
        idle = 0;
      } else if (++idle > 64) {
        __builtin_ia32_pause();
      }
    }
    // Spun out: the loop below yields next (its idle_since starts there).
    if (idle == wait_.spin_rounds) idle = wait_.spin_rounds - 1;
  }
  const int depth = ReleaseAll();
  Clock::time_point idle_since{};
  for (;;) {
    // The progress thread runs the rounds; else whoever gets the lock does.
    if (!progress_on_.load(std::memory_order_relaxed) && TryLock()) {
      const int work = round();
      if (done()) {
        Unlock(work > 0);
        break;
      }
      if (work > 0) {
        idle = 0;
        Unlock();
        continue;
      }
      if (OtherLanesDue(idle)) {
        idle = 0;
        Unlock(false);
        continue;
      }
      // An idle round changed nothing a sleeper waits on: no wake-up.
      const bool checked = CheckPeersWhenDue();
      if (++idle < wait_.spin_rounds) {
        Unlock(checked);
        if (idle > 64) __builtin_ia32_pause();
        continue;
      }
      const Clock::time_point now = Clock::now();
      if (idle == wait_.spin_rounds) idle_since = now;
      if (now - idle_since < wait_.yield_for) {
        Unlock(checked);
        sched_yield();
        continue;
      }
      BlockHeld(wait_.block_us);
      Unlock(checked);
      continue;
    }
    // Another thread progresses: sleep until an unlock says something changed.
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seen = epoch_.load(std::memory_order_acquire);
    const bool finished = done();
    if (!finished) FutexWait(&epoch_, seen, kShareSleepUs);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    if (finished) break;
  }
  Reacquire(depth);
}

int Runtime::ProgressOtherLanes() {
  int work = 0;
  const uintptr_t me = ThisThread();
  for (Runtime* l : lanes_) {
    // A lane this thread holds already is inside a call of its own: left alone.
    if (l == this || l->holder_.load(std::memory_order_relaxed) == me || !l->TryLock()) continue;
    const int w = l->Progress();
    const bool checked = l->CheckPeersWhenDue();
    l->Unlock(w > 0 || checked);
    work += w;
  }
  return work;
}

void Runtime::ProgressThreadMain() {
  // A thread of its own: it spins briefly (a reply often follows at once),
  // then sleeps on the methods, leaving the CPUs to the program. Its sleeps
  // are short: a sender's wake-up can be missed (shm rings its peer's
  // doorbell without a fence), and a missed one then costs 100 µs, not a
  // millisecond.
  constexpr int kSpin = 64;
  constexpr int kBlockUs = 100;
  int idle = 0;
  // Every lane, one at a time (this is lane 0); it sleeps on lane 0's
  // methods, so another lane's wake-up waits out the sleep.
  const auto wanted = [this] {
    for (Runtime* l : lanes_) {
      if (l->wanted_.load(std::memory_order_relaxed) > 0) return true;
    }
    return false;
  };
  while (!stop_progress_.load(std::memory_order_acquire)) {
    // A lane whose lock is taken is moved by its holder; the next round tries it again.
    const int others = ProgressOtherLanes();
    Lock();
    const int work = Progress();
    const bool checked = CheckPeersWhenDue();
    if (work + others > 0) {
      idle = 0;
    } else if (++idle > kSpin) {
      BlockHeld(kBlockUs);
    }
    Unlock(work > 0 || checked);
    // A thread that wants a lock gets it before this one takes it again.
    for (int i = 0; i < 64 && wanted(); ++i) sched_yield();
  }
}

void Runtime::StopProgressThread() {
  if (!progress_.joinable()) return;
  const int depth = ReleaseAll();
  stop_progress_.store(true, std::memory_order_release);
  for (methods::Method* m : routes_.polled()) m->Wake();
  progress_.join();
  progress_on_.store(false, std::memory_order_relaxed);
  Reacquire(depth);
}

}  // namespace cartage::agent
