#include "agent/trace.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/check.h"
#include "fsm/trace_file.h"
#include "fsm/trace_ring.h"

namespace cartage::agent {

class ProcessTrace::State {
 public:
  explicit State(std::size_t capacity) : ring(capacity) {}
  fsm::TraceRing ring;
  fsm::TraceFile header;
  std::string path;
  std::mutex dump_mu;
  // CARTAGE_WATCHDOG: a thread that dumps once no transition was recorded
  // for `watchdog_s` (again after the next stall).
  double watchdog_s = 0;
  std::thread watchdog;
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stop = false;
  // A dump from another thread asks for the live CARs through `live_wanted`;
  // the rank's thread answers into `live` (under live_mu) and sets live_ready.
  ProcessTrace::LiveLister lister;
  std::atomic<bool> live_wanted{false};
  std::mutex live_mu;
  std::condition_variable live_cv;
  std::vector<fsm::LiveCar> live;
  bool live_ready = false;
  std::thread::id owner = std::this_thread::get_id();
};

namespace {

// The live trace, for the exit hook and the signal thread; one per process.
std::atomic<ProcessTrace*> g_trace{nullptr};
std::mutex g_trace_mu;  // held while the signal thread or the exit hook dumps, and while the trace goes
int g_wake[2] = {-1, -1};  // SIGUSR1's handler writes a byte, the helper thread dumps
std::once_flag g_signal_once;

void OnUsr1(int) {
  const int saved = errno;
  const char b = 1;
  if (g_wake[1] >= 0) (void)!::write(g_wake[1], &b, 1);
  errno = saved;
}

void SignalThread() {
  char b;
  while (::read(g_wake[0], &b, 1) == 1 || errno == EINTR) {
    std::lock_guard<std::mutex> lock(g_trace_mu);
    if (ProcessTrace* t = g_trace.load()) (void)t->Dump("signal");
  }
}

void AtExit() {
  std::lock_guard<std::mutex> lock(g_trace_mu);
  if (ProcessTrace* t = g_trace.load()) (void)t->Dump("exit");
}

void InstallSignal() {
  std::call_once(g_signal_once, [] {
    if (::pipe2(g_wake, O_CLOEXEC) != 0) return;
    std::thread(SignalThread).detach();
    struct sigaction sa {};
    sa.sa_handler = &OnUsr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, nullptr);
    std::atexit(&AtExit);
  });
}

// Rank 0's clock minus this rank's, where they are different hosts: the
// median of three rounds of (fence, read the clock, publish it). A fence
// releases the ranks within the bootstrap's round trip, which bounds the
// error; ranks on rank 0's host share its clock and take 0.
absl::StatusOr<int64_t> ClockOffset(methods::Exchange& ex, const std::string& host) {
  if (ex.size() == 1) return 0;
  if (ex.rank() == 0) CARTAGE_RETURN_IF_ERROR(ex.Put("trace.host", host));
  std::vector<int64_t> offsets;
  for (int round = 0; round < 3; ++round) {
    CARTAGE_RETURN_IF_ERROR(ex.Fence());
    const int64_t now = absl::GetCurrentTimeNanos();
    if (ex.rank() == 0) CARTAGE_RETURN_IF_ERROR(ex.Put(absl::StrCat("trace.clock", round), absl::StrCat(now)));
    CARTAGE_RETURN_IF_ERROR(ex.Fence());
    CARTAGE_ASSIGN_OR_RETURN(const std::string zero, ex.GetFrom(0, absl::StrCat("trace.clock", round)));
    int64_t t0 = 0;
    if (!absl::SimpleAtoi(zero, &t0)) return absl::InternalError("trace: rank 0's clock reading is malformed");
    offsets.push_back(t0 - now);
  }
  CARTAGE_ASSIGN_OR_RETURN(const std::string zero_host, ex.GetFrom(0, "trace.host"));
  if (zero_host == host) return 0;
  std::sort(offsets.begin(), offsets.end());
  return offsets[1];
}

}  // namespace

absl::StatusOr<std::unique_ptr<ProcessTrace>> ProcessTrace::FromEnvironment(methods::Exchange& exchange) {
  const char* dir = std::getenv("CARTAGE_TRACE");
  if (dir == nullptr || *dir == '\0') return nullptr;
  std::size_t capacity = 1 << 18;
  if (const char* n = std::getenv("CARTAGE_TRACE_RECORDS"); n != nullptr && *n != '\0') {
    if (!absl::SimpleAtoi(n, &capacity) || capacity == 0 || capacity > (std::size_t{1} << 30)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("CARTAGE_TRACE_RECORDS='%s': a number of records from 1 to 2^30", n));
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // ranks racing to create it all succeed
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_TRACE='%s': cannot create that folder", dir));
  }
  if (g_trace.load() != nullptr) return absl::FailedPreconditionError("trace: this process traces already");
  auto state = std::make_unique<State>(capacity);
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  fsm::TraceFile& h = state->header;
  h.job = exchange.job_id().empty() ? absl::StrCat("pid", ::getpid()) : exchange.job_id();
  h.rank = exchange.rank();
  h.size = exchange.size();
  h.host = host[0] != '\0' ? host : "localhost";
  h.pid = ::getpid();
  h.capacity = state->ring.capacity();
  CARTAGE_ASSIGN_OR_RETURN(h.clock_offset_ns, ClockOffset(exchange, h.host));
  state->path = absl::StrCat(dir, "/", h.job, ".", h.rank, ".trace");
  if (const char* w = std::getenv("CARTAGE_WATCHDOG"); w != nullptr && *w != '\0') {
    if (!absl::SimpleAtod(w, &state->watchdog_s) || !(state->watchdog_s > 0) || state->watchdog_s > 1e6) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_WATCHDOG='%s': seconds without progress, > 0", w));
    }
  }
  auto t = std::unique_ptr<ProcessTrace>(new ProcessTrace(std::move(state)));
  fsm::SetTraceSink(&t->state_->ring);
  g_trace.store(t.get());
  InstallSignal();
  if (t->state_->watchdog_s > 0) t->state_->watchdog = std::thread([p = t.get()] { p->Watch(); });
  return t;
}

ProcessTrace::ProcessTrace(std::unique_ptr<State> state) : state_(std::move(state)), path_(state_->path) {}

void ProcessTrace::Watch() {
  State& s = *state_;
  const auto period = std::chrono::duration<double>(std::min(s.watchdog_s / 4, 1.0));
  uint64_t seen = s.ring.recorded();
  auto still_since = std::chrono::steady_clock::now();
  bool dumped = false;
  std::unique_lock<std::mutex> lock(s.stop_mu);
  while (!s.stop_cv.wait_for(lock, period, [&] { return s.stop; })) {
    const uint64_t now = s.ring.recorded();
    if (now != seen) {
      seen = now;
      still_since = std::chrono::steady_clock::now();
      dumped = false;
    } else if (!dumped && std::chrono::steady_clock::now() - still_since > std::chrono::duration<double>(s.watchdog_s)) {
      bool listed = false;
      const absl::Status st = Dump("watchdog", &listed);
      const std::string what = absl::StrCat(
          "trace written to ", s.path,
          listed ? ", with the live CARs this rank listed as it waits in cartage"
                 : "; this rank listed no live CARs: it is not waiting in cartage (it computes or waits in its own code)",
          " (cartage why-stuck reads it)");
      std::fprintf(stderr, "cartage[%d]: no progress for %g s (CARTAGE_WATCHDOG): %s\n", s.header.rank, s.watchdog_s,
                   st.ok() ? what.c_str() : std::string(st.message()).c_str());
      dumped = true;
    }
  }
}

ProcessTrace::~ProcessTrace() {
  if (state_->watchdog.joinable()) {
    {
      std::lock_guard<std::mutex> lock(state_->stop_mu);
      state_->stop = true;
    }
    state_->stop_cv.notify_all();
    state_->watchdog.join();
  }
  fsm::SetTraceSink(nullptr);
  {
    std::lock_guard<std::mutex> lock(g_trace_mu);
    g_trace.store(nullptr);
  }
  (void)Dump("finalize");
}

void ProcessTrace::SetLiveLister(LiveLister lister) { state_->lister = std::move(lister); }

void ProcessTrace::AnswerLive() {
  State& s = *state_;
  if (!s.live_wanted.load(std::memory_order_relaxed) || !s.live_wanted.exchange(false)) return;
  std::vector<fsm::LiveCar> live;
  if (s.lister) s.lister(live);
  std::lock_guard<std::mutex> lock(s.live_mu);
  s.live = std::move(live);
  s.live_ready = s.lister != nullptr;
  s.live_cv.notify_all();
}

absl::Status ProcessTrace::Dump(const char* why, bool* listed_out) {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.dump_mu);
  fsm::TraceFile h = s.header;
  h.end = why;
  h.dump_ns = absl::GetCurrentTimeNanos();
  // The rank's own thread lists its CARs itself (at exit too; not at
  // finalize, where the runtime took its lister as the pool went); another
  // thread asks it, and waits at most kLiveWait, longer than a waiting
  // rank's peer-check period.
  std::vector<fsm::LiveCar> live;
  bool listed = false;
  if (std::this_thread::get_id() == s.owner) {
    if (s.lister) {
      s.lister(live);
      listed = true;
    }
  } else {
    constexpr auto kLiveWait = std::chrono::milliseconds(200);
    std::unique_lock<std::mutex> wait(s.live_mu);
    s.live_ready = false;
    s.live_wanted.store(true);
    if (s.live_cv.wait_for(wait, kLiveWait, [&] { return s.live_ready; })) {
      live = std::move(s.live);
      listed = true;
    }
    s.live_wanted.store(false);
  }
  if (listed_out != nullptr) *listed_out = listed;
  return fsm::WriteTraceFile(s.path, h, s.ring.Take(), listed ? &live : nullptr);
}

}  // namespace cartage::agent
