#include "tools/cartage/kit_cmd.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kit/cases.h"
#include "methods/registry.h"

extern char** environ;

namespace cartage::tools {
namespace {

constexpr char kUsage[] =
    "usage: cartage kit [--method NAME] [--plugin LIB.so] [--case A,B,...] [--timeout S] [--env K=V]...\n"
    "  runs the conformance kit: every case a job of real processes under `cartage run`,\n"
    "  with CARTAGE_METHODS naming the method alone (self still carries a rank's own\n"
    "  messages). One line a case, then a summary; exit 1 if any case failed.\n"
    "  --method NAME     a built-in method, or the plugin's (default: the plugin's)\n"
    "  --plugin LIB.so   an out-of-tree method to load (CARTAGE_METHOD_PATH)\n"
    "  --case LIST       only these cases (default: all; --list names them)\n"
    "  --timeout S       each case's bound (default 300)\n"
    "  --env K=V         more environment for every rank (repeatable)\n"
    "  --list            the cases and what each checks\n";

struct Options {
  std::string method;
  std::string plugin;
  std::vector<std::string> cases;
  int timeout = 300;
  std::vector<std::string> env;
  bool list = false;
};

absl::StatusOr<Options> Parse(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> absl::StatusOr<std::string> {
      if (i + 1 >= argc) return absl::InvalidArgumentError(absl::StrCat(a, " needs a value"));
      return std::string(argv[++i]);
    };
    if (a == "--list") {
      o.list = true;
    } else if (a == "--method" || a == "--plugin" || a == "--case" || a == "--timeout" || a == "--env") {
      absl::StatusOr<std::string> v = value();
      if (!v.ok()) return v.status();
      if (a == "--method") o.method = *v;
      if (a == "--plugin") o.plugin = std::filesystem::absolute(*v).string();
      if (a == "--case") o.cases = absl::StrSplit(*v, ',', absl::SkipEmpty());
      if (a == "--env") o.env.push_back(*v);
      if (a == "--timeout" && (!absl::SimpleAtoi(*v, &o.timeout) || o.timeout < 1)) {
        return absl::InvalidArgumentError(absl::StrCat("--timeout ", *v, ": need seconds >= 1"));
      }
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", a, "'"));
    }
  }
  return o;
}

// The rank program, beside this executable (build tree and installation).
std::string RanksProgram() {
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "cartage-kit-ranks").string();
}

struct Outcome {
  int code = -1;
  std::string out;  // stdout and stderr together
  double seconds = 0;
};

// Runs `cartage run -n ranks --timeout S program case` with `env` added.
Outcome RunCase(const kit::Case& c, const Options& o, const std::vector<std::string>& env) {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<std::string> argv = {self,           "run", "-n", std::to_string(c.ranks), "--timeout",
                                   std::to_string(o.timeout), RanksProgram(), c.name};
  // Ours first: getenv takes the first of a name.
  std::vector<std::string> ordered(env.begin(), env.end());
  for (char** e = environ; *e != nullptr; ++e) ordered.emplace_back(*e);
  char path[] = "/tmp/cartage-kit-XXXXXX";
  const int fd = ::mkstemp(path);
  Outcome r;
  if (fd < 0) {
    r.out = "cannot make a temporary file";
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd, 1);
  posix_spawn_file_actions_adddup2(&fa, fd, 2);
  std::vector<char*> args, envp;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  for (std::string& e : ordered) envp.push_back(e.data());
  envp.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = 0;
  if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data()) == 0) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  posix_spawn_file_actions_destroy(&fa);
  ::close(fd);
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  r.out = s.str();
  ::unlink(path);
  return r;
}

// The last `n` lines of `text`.
std::string Tail(const std::string& text, int n) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.size() > static_cast<std::size_t>(n)) lines.erase(lines.begin(), lines.end() - n);
  return absl::StrJoin(lines, "\n");
}

}  // namespace

int RunKit(int argc, char** argv) {
  absl::StatusOr<Options> parsed = Parse(argc, argv);
  if (!parsed.ok()) {
    std::cerr << "cartage kit: " << parsed.status().message() << "\n" << kUsage;
    return 2;
  }
  Options& o = *parsed;
  if (o.list) {
    for (const kit::Case& c : kit::Cases()) {
      std::cout << absl::StrFormat("%-13s %d rank%s  %s\n", c.name, c.ranks, c.ranks == 1 ? " " : "s", c.checks);
    }
    return 0;
  }
  // The method: named, or the one the plugin brings.
  absl::StatusOr<methods::Registry> reg = methods::Registry::Load(o.plugin);
  if (!reg.ok()) {
    std::cerr << "cartage kit: " << reg.status().message() << "\n";
    return 2;
  }
  if (o.method.empty()) {
    for (const methods::Descriptor* d : reg->all()) {
      if (!o.plugin.empty() && reg->origin(d) == o.plugin) o.method = std::string(d->name);
    }
    if (o.method.empty()) {
      std::cerr << "cartage kit: name a method (--method) or load one (--plugin)\n" << kUsage;
      return 2;
    }
  }
  const methods::Descriptor* d = reg->Find(o.method);
  if (d == nullptr) {
    std::cerr << "cartage kit: no method '" << o.method << "'" << (o.plugin.empty() ? "" : " in ") << o.plugin
              << "\n";
    return 2;
  }
  const methods::Capabilities caps = d->caps();
  const bool one_rank = caps.reach == methods::Reach::kProcess;
  if (!one_rank && caps.eager_limit < kit::kMinEagerLimit) {
    std::cout << "kit: " << o.method << "'s eager limit is " << caps.eager_limit << " bytes; the kit's cases, like "
              << "many programs, leave blocking sends of up to " << kit::kMinEagerLimit
              << " bytes for the receiver to take later, which needs them eager\n";
  }
  std::vector<std::string> env = {absl::StrCat("CARTAGE_METHODS=", o.method)};
  if (!o.plugin.empty()) env.push_back(absl::StrCat("CARTAGE_METHOD_PATH=", o.plugin));
  env.insert(env.end(), o.env.begin(), o.env.end());

  int run = 0, passed = 0;
  std::vector<std::string> failed;
  for (const kit::Case& c : kit::Cases()) {
    if (c.one_rank != one_rank) continue;
    if (!o.cases.empty() && std::find(o.cases.begin(), o.cases.end(), c.name) == o.cases.end()) continue;
    ++run;
    const Outcome r = RunCase(c, o, env);
    // A case whose rank leaves without finalizing fails its job, by design, naming that rank.
    const bool ended = c.leaves ? r.code == 1 && r.out.find("exited without finalizing") != std::string::npos
                                : r.code == 0;
    const bool ok = ended && r.out.find(absl::StrCat("PASS ", c.name)) != std::string::npos;
    std::cout << absl::StrFormat("%s %s (%d rank%s, %.1f s)\n", ok ? "PASS" : "FAIL", c.name, c.ranks,
                                 c.ranks == 1 ? "" : "s", r.seconds);
    if (ok) {
      ++passed;
      continue;
    }
    failed.push_back(c.name);
    std::cout << "  exit " << r.code << (r.code == 124 ? " (timed out)" : "") << "; its last lines:\n";
    for (absl::string_view line : absl::StrSplit(Tail(r.out, 20), '\n')) std::cout << "    " << line << "\n";
    if (r.code == 124) {
      std::cout << "  a case that waits until its bound often means a message went to the wrong rank: "
                   "the envelope's rank is the sender's world rank (see the 'envelope' case)\n";
    }
  }
  if (run == 0) {
    std::cerr << "cartage kit: no case matches --case " << absl::StrJoin(o.cases, ",") << "\n";
    return 2;
  }
  std::cout << absl::StrFormat("kit: %d of %d cases passed for method %s", passed, run, o.method);
  if (!failed.empty()) std::cout << " (failed: " << absl::StrJoin(failed, ", ") << ")";
  std::cout << "\n";
  return failed.empty() ? 0 : 1;
}

}  // namespace cartage::tools
