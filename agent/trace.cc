#include "agent/trace.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
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
    CARTAGE_ASSIGN_OR_RETURN(const std::string zero, ex.Get(absl::StrCat("trace.clock", round)));
    int64_t t0 = 0;
    if (!absl::SimpleAtoi(zero, &t0)) return absl::InternalError("trace: rank 0's clock reading is malformed");
    offsets.push_back(t0 - now);
  }
  CARTAGE_ASSIGN_OR_RETURN(const std::string zero_host, ex.Get("trace.host"));
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
  auto t = std::unique_ptr<ProcessTrace>(new ProcessTrace(std::move(state)));
  fsm::SetTraceSink(&t->state_->ring);
  g_trace.store(t.get());
  InstallSignal();
  return t;
}

ProcessTrace::ProcessTrace(std::unique_ptr<State> state) : state_(std::move(state)), path_(state_->path) {}

ProcessTrace::~ProcessTrace() {
  fsm::SetTraceSink(nullptr);
  {
    std::lock_guard<std::mutex> lock(g_trace_mu);
    g_trace.store(nullptr);
  }
  (void)Dump("finalize");
}

absl::Status ProcessTrace::Dump(const char* why) {
  std::lock_guard<std::mutex> lock(state_->dump_mu);
  fsm::TraceFile h = state_->header;
  h.end = why;
  return fsm::WriteTraceFile(state_->path, h, state_->ring.Take());
}

}  // namespace cartage::agent
