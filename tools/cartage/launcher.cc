#include "tools/cartage/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "agent/bootstrap_wire.h"
#include "agent/pmi.h"
#include "methods/shm/shm_segment.h"
#include "tools/cartage/bootstrap_server.h"

extern char** environ;

namespace cartage::tools {
namespace {

namespace wire = agent::bootstrap;
using Clock = std::chrono::steady_clock;

constexpr char kUsage[] =
    "usage: cartage run -n N [--hosts H:N,...] [--prefix] [--bind|--no-bind] [--timeout SECONDS] program [args...]\n"
    "  -n N              number of ranks (1..1024)\n"
    "  --hosts H:N,...   place ranks in blocks of N on the hosts named H, in order (round again\n"
    "                    where the ranks outnumber the slots); each rank gets CARTAGE_HOST=H, and\n"
    "                    shm carries only ranks on one host. All are started here: a program that\n"
    "                    enters each host's namespaces by $CARTAGE_HOST makes them apart\n"
    "  --prefix          prefix every output line with [rank]\n"
    "  --bind            pin rank r to CPU r (mod the CPUs this launcher may use);\n"
    "                    the default when the ranks outnumber those CPUs\n"
    "  --no-bind         never pin: the kernel places the ranks\n"
    "  --timeout S       kill the job after S seconds (exit code 124)\n"
    "  --trace DIR       every rank records its transitions and collective calls into\n"
    "                    DIR/<job>.<rank>.trace (CARTAGE_TRACE; read them with `cartage trace`);\n"
    "                    SIGUSR1 to the launcher has every rank write its file now\n"
    "The exit code is the first failing rank's (128 + signal for a crash; the other\n"
    "ranks are then stopped), else 1 if a rank that started cartage exited without\n"
    "finalizing (destroying its Agent), else 0.\n";

volatile std::sig_atomic_t g_signal = 0;
void OnSignal(int sig) { g_signal = sig; }
volatile std::sig_atomic_t g_dump = 0;
void OnDump(int) { g_dump = 1; }

struct Stream {
  int fd = -1;
  int rank = 0;
  int out_fd = 1;  // where its lines go
  std::string partial;
};

struct Rank {
  pid_t pid = -1;
  bool running = false;
  int status = 0;
};

void WriteAll(int fd, absl::string_view s) {
  while (!s.empty()) {
    const ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    s.remove_prefix(static_cast<std::size_t>(n));
  }
}

// Forwards complete lines (all of it at EOF), with the optional rank prefix.
void Forward(Stream& s, absl::string_view data, bool prefix, bool eof) {
  s.partial.append(data.data(), data.size());
  std::size_t start = 0, nl;
  std::string out;
  while ((nl = s.partial.find('\n', start)) != std::string::npos) {
    if (prefix) absl::StrAppend(&out, "[", s.rank, "] ");
    out.append(s.partial, start, nl - start + 1);
    start = nl + 1;
  }
  s.partial.erase(0, start);
  if (eof && !s.partial.empty()) {
    if (prefix) absl::StrAppend(&out, "[", s.rank, "] ");
    absl::StrAppend(&out, s.partial, "\n");
    s.partial.clear();
  }
  WriteAll(s.out_fd, out);
}

std::string Describe(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return absl::StrFormat("killed by signal %d (%s)", sig, sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
  }
  return absl::StrFormat("exited with code %d", WEXITSTATUS(status));
}

int ExitCodeOf(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

std::string RandomHex(int bytes) {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < bytes; ++i) absl::StrAppendFormat(&out, "%02x", rd() & 0xff);
  return out;
}

// Removes the job's segments a rank killed during set-up may have left
// (normally rank 0 unlinks the name as soon as every rank attached).
void RemoveSharedMemory(const std::string& job_id) {
  const std::string prefix = methods::shm::ShmSegment::NamePrefix(job_id);
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm", ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) ::shm_unlink(("/" + name).c_str());
  }
}

}  // namespace

int RunLauncher(int argc, char** argv) {
  int n = 0;
  bool prefix = false;
  enum class Bind { kAuto, kAlways, kNever } bind_mode = Bind::kAuto;
  double timeout_s = 0;
  std::string trace_dir;
  std::vector<std::pair<std::string, int>> hosts;  // --hosts, in order
  int i = 0;
  for (; i < argc; ++i) {
    const absl::string_view a = argv[i];
    if ((a == "-n" || a == "--np") && i + 1 < argc) {
      if (!absl::SimpleAtoi(argv[++i], &n)) n = 0;
    } else if (a == "--prefix") {
      prefix = true;
    } else if (a == "--bind") {
      bind_mode = Bind::kAlways;
    } else if (a == "--no-bind") {
      bind_mode = Bind::kNever;
    } else if (a == "--timeout" && i + 1 < argc) {
      if (!absl::SimpleAtod(argv[++i], &timeout_s) || timeout_s <= 0) {
        std::fprintf(stderr, "cartage run: --timeout needs a positive number of seconds\n%s", kUsage);
        return 2;
      }
    } else if (a == "--trace" && i + 1 < argc) {
      trace_dir = argv[++i];
      if (!trace_dir.empty()) trace_dir = std::filesystem::absolute(trace_dir).string();
      if (trace_dir.empty()) {
        std::fprintf(stderr, "cartage run: --trace needs a folder\n%s", kUsage);
        return 2;
      }
    } else if (a == "--hosts" && i + 1 < argc) {
      for (absl::string_view h : absl::StrSplit(argv[++i], ',')) {
        const std::size_t colon = h.rfind(':');
        int slots = 0;
        const absl::string_view name = h.substr(0, colon);
        if (colon == absl::string_view::npos || name.empty() || !absl::SimpleAtoi(h.substr(colon + 1), &slots) ||
            slots < 1 || name.find_first_of(" =()\n") != absl::string_view::npos) {
          std::fprintf(stderr, "cartage run: --hosts needs NAME:N,... (N >= 1), not '%s'\n%s",
                       std::string(h).c_str(), kUsage);
          return 2;
        }
        hosts.emplace_back(std::string(name), slots);
      }
    } else if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "cartage run: unknown option '%s'\n%s", argv[i], kUsage);
      return 2;
    } else {
      break;
    }
  }
  if (n < 1 || n > 1024 || i >= argc) {
    std::fprintf(stderr, "cartage run: need -n N (1..1024) and a program\n%s", kUsage);
    return 2;
  }
  char** program = argv + i;
  // Each rank's host, as PMI's process mapping says it (a block of ranks a
  // host, in order, the list repeated where the ranks outnumber its slots),
  // read by the rule the ranks read it by.
  std::vector<std::string> host_of(static_cast<std::size_t>(n));
  std::string mapping;
  if (!hosts.empty()) {
    mapping = "(vector";
    for (std::size_t h = 0; h < hosts.size(); ++h) absl::StrAppend(&mapping, ",(", h, ",1,", hosts[h].second, ")");
    mapping += ")";
    const absl::StatusOr<std::vector<int>> node_of = agent::PmiExchange::NodeOfEachRank(mapping, n);
    if (!node_of.ok()) {
      std::fprintf(stderr, "cartage run: --hosts: %s\n", std::string(node_of.status().message()).c_str());
      return 2;
    }
    for (int r = 0; r < n; ++r) {
      host_of[static_cast<std::size_t>(r)] = hosts[static_cast<std::size_t>((*node_of)[static_cast<std::size_t>(r)])].first;
    }
  }

  const std::string job_key = RandomHex(16);
  const std::string job_id = absl::StrCat(getpid(), "-", RandomHex(4));
  auto server = BootstrapServer::Create(n, job_key);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = &OnSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  struct sigaction dump {};
  dump.sa_handler = &OnDump;
  sigaction(SIGUSR1, &dump, nullptr);
  const bool tracing = !trace_dir.empty() || (std::getenv("CARTAGE_TRACE") != nullptr && *std::getenv("CARTAGE_TRACE") != 0);

  std::vector<Rank> ranks(static_cast<std::size_t>(n));
  std::vector<Stream> streams;
  // Binding: a child inherits the launcher's CPU mask at spawn. By default
  // ranks that outnumber the CPUs are pinned round-robin: left to the
  // kernel, 4 ranks on 2 CPUs spent stretches three on one CPU and one on
  // the other, where a barrier is far slower (cartage-bench barrier, 4
  // ranks, --no-bind). Ranks that fit stay unpinned unless --bind asks.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  sched_getaffinity(0, sizeof(allowed), &allowed);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  const bool bind = bind_mode == Bind::kAlways ||
                    (bind_mode == Bind::kAuto && static_cast<std::size_t>(n) > cpus.size());
  // A start that fails part-way stops (and reaps) the ranks it started.
  auto abandon = [&](int code) {
    for (Rank& k : ranks) {
      if (k.running) ::kill(k.pid, SIGKILL);
    }
    for (Rank& k : ranks) {
      if (k.running) (void)::waitpid(k.pid, nullptr, 0);
    }
    for (const Stream& st : streams) ::close(st.fd);
    return code;
  };
  for (int r = 0; r < n; ++r) {
    if (bind && !cpus.empty()) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpus[static_cast<std::size_t>(r) % cpus.size()], &one);
      sched_setaffinity(0, sizeof(one), &one);
    }
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
      std::fprintf(stderr, "cartage run: pipe for rank %d: %s\n", r, std::strerror(errno));
      return abandon(1);
    }
    if (::pipe2(err, O_CLOEXEC) != 0) {
      std::fprintf(stderr, "cartage run: pipe for rank %d: %s\n", r, std::strerror(errno));
      ::close(out[0]);
      ::close(out[1]);
      return abandon(1);
    }
    std::vector<std::string> env_store;
    for (char** e = environ; *e != nullptr; ++e) {
      const absl::string_view v = *e;
      if (!absl::StartsWith(v, "CARTAGE_RANK=") && !absl::StartsWith(v, "CARTAGE_SIZE=") &&
          !absl::StartsWith(v, "CARTAGE_BOOTSTRAP") && !absl::StartsWith(v, "CARTAGE_JOB_") &&
          !absl::StartsWith(v, "CARTAGE_HOST=") && !absl::StartsWith(v, "CARTAGE_PROCESS_MAPPING=") &&
          !(trace_dir.size() > 0 && absl::StartsWith(v, "CARTAGE_TRACE="))) {
        env_store.emplace_back(v);
      }
    }
    env_store.push_back(absl::StrCat(wire::kEnvRank, "=", r));
    env_store.push_back(absl::StrCat(wire::kEnvSize, "=", n));
    env_store.push_back(absl::StrCat(wire::kEnvSocket, "=", (*server)->socket_path()));
    env_store.push_back(absl::StrCat(wire::kEnvJobKey, "=", job_key));
    env_store.push_back(absl::StrCat(wire::kEnvJobId, "=", job_id));
    if (!trace_dir.empty()) env_store.push_back(absl::StrCat("CARTAGE_TRACE=", trace_dir));
    if (!mapping.empty()) {
      env_store.push_back(absl::StrCat(wire::kEnvHost, "=", host_of[static_cast<std::size_t>(r)]));
      env_store.push_back(absl::StrCat(wire::kEnvMapping, "=", mapping));
    }
    // libinfinipath and libhfi (under Debian's libfabric) would catch a
    // crash, print a backtrace, leave a *.btr file and exit 1: a crashed rank
    // must die by its signal, for the launcher to name it.
    for (const char* quiet : {"IPATH_NO_BACKTRACE", "HFI_NO_BACKTRACE"}) {
      if (std::getenv(quiet) == nullptr) env_store.push_back(absl::StrCat(quiet, "=1"));
    }
    std::vector<char*> envp;
    for (std::string& e : env_store) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    pid_t pid = -1;
    const int rc = posix_spawnp(&pid, program[0], &fa, nullptr, program, envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    ::close(err[1]);
    if (rc != 0) {
      std::fprintf(stderr, "cartage run: cannot start '%s' for rank %d: %s\n", program[0], r,
                   std::strerror(rc));
      ::close(out[0]);
      ::close(err[0]);
      return abandon(127);
    }
    ranks[static_cast<std::size_t>(r)] = {pid, true, 0};
    ::fcntl(out[0], F_SETFL, O_NONBLOCK);
    ::fcntl(err[0], F_SETFL, O_NONBLOCK);
    streams.push_back({out[0], r, 1, {}});
    streams.push_back({err[0], r, 2, {}});
  }

  if (bind) sched_setaffinity(0, sizeof(allowed), &allowed);
  const Clock::time_point start = Clock::now();
  Clock::time_point kill_deadline = Clock::time_point::max();
  bool killing = false, timed_out = false;
  int running = n;
  int first_failure = -1;  // exit code of the first rank that died abnormally
  auto kill_all = [&](int sig) {
    for (Rank& k : ranks) {
      if (k.running) ::kill(k.pid, sig);
    }
  };
  auto begin_kill = [&](const std::string& why) {
    if (killing) return;
    killing = true;
    if (running > 0) {
      std::fprintf(stderr, "cartage run: %s; stopping %d running rank(s)\n", why.c_str(), running);
    } else {
      std::fprintf(stderr, "cartage run: %s\n", why.c_str());
    }
    if (tracing && running > 0) {
      // Traced ranks write what they hold before they go (a hang's last
      // moves): a rank lists its live CARs within 200 ms, then writes.
      kill_all(SIGUSR1);
      ::usleep(800 * 1000);
    }
    kill_all(SIGTERM);
    kill_deadline = Clock::now() + std::chrono::seconds(2);
  };

  bool unfinalized = false;  // a rank ended without finalizing
  std::vector<pollfd> fds;
  while (running > 0 || !streams.empty()) {
    fds.clear();
    for (const Stream& s : streams) fds.push_back({s.fd, POLLIN, 0});
    (*server)->AddPollFds(fds);
    ::poll(fds.data(), fds.size(), 20);
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      bool handled = false;
      for (std::size_t k = 0; k < streams.size(); ++k) {
        if (streams[k].fd != p.fd) continue;
        handled = true;
        char buf[65536];
        const ssize_t got = ::read(p.fd, buf, sizeof(buf));
        if (got > 0) {
          Forward(streams[k], absl::string_view(buf, static_cast<std::size_t>(got)), prefix, false);
        } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
          Forward(streams[k], {}, prefix, true);
          ::close(streams[k].fd);
          streams.erase(streams.begin() + static_cast<std::ptrdiff_t>(k));
        }
        break;
      }
      if (!handled) (*server)->OnReady(p.fd, p.revents);
    }
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      for (std::size_t r = 0; r < ranks.size(); ++r) {
        if (ranks[r].pid != pid || !ranks[r].running) continue;
        ranks[r].running = false;
        ranks[r].status = status;
        --running;
        if (running > 0) (*server)->RankExited(static_cast<int>(r));
        const bool abnormal = WIFSIGNALED(status) || WEXITSTATUS(status) != 0;
        (*server)->Drain(static_cast<int>(r));
        if (!abnormal && !killing && (*server)->LeftWithoutBye(static_cast<int>(r))) {
          // As MPI launchers do: the job fails, though the others run on
          // (they fail as they reach it, naming it).
          std::fprintf(stderr, "cartage run: rank %zu (pid %d) exited without finalizing (its Agent was never destroyed)\n",
                       r, pid);
          unfinalized = true;
        }
        if (abnormal && first_failure < 0 && !killing) first_failure = ExitCodeOf(status);
        if (abnormal && !killing) {
          begin_kill(absl::StrFormat("rank %d (pid %d) %s", r, pid, Describe(status)));
        }
      }
    }
    if (g_dump != 0) {
      g_dump = 0;
      kill_all(SIGUSR1);
    }
    if (g_signal != 0 && !killing) {
      begin_kill(absl::StrFormat("received signal %d (%s)", static_cast<int>(g_signal),
                                 sigabbrev_np(g_signal) ? sigabbrev_np(g_signal) : "?"));
    }
    if (timeout_s > 0 && !killing &&
        Clock::now() - start > std::chrono::duration<double>(timeout_s)) {
      timed_out = true;
      begin_kill(absl::StrFormat("timed out after %g s", timeout_s));
    }
    if (killing && Clock::now() > kill_deadline) {
      kill_all(SIGKILL);
      kill_deadline = Clock::time_point::max();
    }
    // Output pipes held open by a rank's own children must not keep us here:
    // forward what is already in them, then close.
    if (running == 0 && killing && !streams.empty()) {
      for (Stream& s : streams) {
        char buf[65536];
        ssize_t got;
        while ((got = ::read(s.fd, buf, sizeof(buf))) > 0) {
          Forward(s, absl::string_view(buf, static_cast<std::size_t>(got)), prefix, false);
        }
        Forward(s, {}, prefix, true);
        ::close(s.fd);
      }
      streams.clear();
    }
  }

  RemoveSharedMemory(job_id);
  if (timed_out) return 124;
  if (first_failure >= 0) return first_failure;  // not the SIGTERM we sent the others
  int worst = unfinalized ? 1 : 0;
  for (const Rank& k : ranks) worst = std::max(worst, ExitCodeOf(k.status));
  if (g_signal != 0 && worst == 0) worst = 128 + g_signal;
  return worst;
}

}  // namespace cartage::tools
