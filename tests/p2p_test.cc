// Point-to-point through real processes: kit cases (kit/cases.h, the rank
// program cartage-kit-ranks) under `cartage run` on the shm method's own
// variants (CMA at every size or never, direct stores); every method's
// default configuration runs the whole kit (tests/conformance/).
#include <unistd.h>

#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kit/cases.h"
#include "methods/shm/shm_ring.h"
#include "tests/run_command.h"

namespace cartage::test {
namespace {

using ::testing::HasSubstr;

struct Case {
  const char* mode;
  int ranks;
  const char* env;  // extra environment, or ""
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.mode << " on " << c.ranks << " ranks" << (*c.env ? " with " : "") << c.env;
}

// Whether the case asks shm for direct stores (it needs MOVDIR64B).
bool Direct(const Case& c) { return std::string(c.env).find("DIRECT_STORE=yes") != std::string::npos; }

std::string Name(const ::testing::TestParamInfo<Case>& info) {
  std::string n = absl::StrCat(info.param.mode, "_np", info.param.ranks);
  if (std::string(info.param.env).find("CMA=off") != std::string::npos) n += "_nocma";
  if (std::string(info.param.env).find("CMA_MIN=0") != std::string::npos) n += "_cma";
  if (Direct(info.param)) n += "_direct";
  if (std::string(info.param.env).find("DIRECT_STORE=auto") != std::string::npos) n += "_autodirect";
  return n;
}

class P2p : public ::testing::TestWithParam<Case> {};

TEST_P(P2p, Runs) {
  const Case& c = GetParam();
  if (Direct(c) && !methods::shm::DirectStoreSupported()) GTEST_SKIP() << "this CPU has no MOVDIR64B";
  std::vector<std::string> env;
  if (*c.env != '\0') env.push_back(c.env);
  const CommandResult r = RunCommand(
      {CARTAGE_BIN, "run", "-n", std::to_string(c.ranks), "--timeout", "120", RANKS_BIN, c.mode}, env);
  const kit::Case* kc = kit::FindCase(c.mode);
  ASSERT_NE(kc, nullptr) << c.mode;
  if (kc->leaves) {  // a rank leaves without finalizing: the launcher fails the job, naming it
    EXPECT_EQ(r.code, 1) << r.err << r.out;
    EXPECT_THAT(r.err, ::testing::ContainsRegex("cartage run: rank [0-9]+ \\(pid [0-9]+\\) exited without finalizing "
                                                "\\(its Agent was never destroyed\\)\n"));
  } else {
    EXPECT_EQ(r.code, 0) << r.err << r.out;
  }
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("PASS ", c.mode)));
}

// The shm method's own variants: CMA at every rendezvous size, no CMA
// (pipelined through the rings), and one-line records by direct store
// (always, or chosen per moment). Its default configuration, like every
// method's, runs in the conformance kit (tests/conformance/).
INSTANTIATE_TEST_SUITE_P(
    Shm, P2p,
    ::testing::Values(Case{"sizes", 2, "CARTAGE_SHM_CMA_MIN=0"}, Case{"sizes", 2, "CARTAGE_SHM_CMA=off"},
                      Case{"truncation", 2, "CARTAGE_SHM_CMA_MIN=0"}, Case{"ssend", 2, "CARTAGE_SHM_CMA_MIN=0"},
                      Case{"datatypes", 2, "CARTAGE_SHM_CMA_MIN=0"}, Case{"self", 2, ""},
                      Case{"holdprobe", 2, ""},
                      Case{"peerdies", 2, "CARTAGE_SHM_CMA=off"}, Case{"sizes", 2, "CARTAGE_SHM_DIRECT_STORE=yes"},
                      Case{"ssend", 2, "CARTAGE_SHM_DIRECT_STORE=yes"},
                      Case{"order", 3, "CARTAGE_SHM_DIRECT_STORE=yes"},
                      Case{"sizes", 2, "CARTAGE_SHM_DIRECT_STORE=auto"}, Case{"order", 3, "CARTAGE_SHM_DIRECT_STORE=auto"}),
    Name);

// 10^6 unexpected 8-byte messages on shm and tcp: the bytes each holds while
// queued stay bounded, and a drained burst gives its memory back (the case
// checks both and prints the figures). ASan's allocator pads every block, so
// the figures mean nothing there.
TEST(Unexpected, MemoryPerMessageIsBoundedAndGivenBackAfterTheDrain) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "ASan pads every allocation";
#endif
  for (const char* method : {"shm", "tcp"}) {
    const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "2", "--timeout", "120", RANKS_BIN, "unexpectedmem"},
                                       {absl::StrCat("CARTAGE_METHODS=", method)});
    EXPECT_EQ(r.code, 0) << method << ": " << r.err << r.out;
    EXPECT_THAT(r.out, HasSubstr("unexpected 8 B x 1000000: ")) << method;
    EXPECT_THAT(r.out, HasSubstr("PASS unexpectedmem")) << method;
  }
}

// Past CARTAGE_UNEXPECTED_MAX_MB a clear error, never an out-of-memory kill;
// the finalize of the rank that refused them names what it never received.
// On ofi the provider holds them: the sender, held back once the receiver
// holds its share of the cap, gives up after CARTAGE_OFI_HOLD_S and says so;
// what the provider still holds of it cannot be taken.
TEST(Unexpected, PastTheCapTheSendersVcFailsNamingTheCap) {
  for (const char* method : {"shm", "tcp", "ofi"}) {
    const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "2", "--timeout", "120", RANKS_BIN, "unexpectedcap"},
                                       {absl::StrCat("CARTAGE_METHODS=", method), "CARTAGE_UNEXPECTED_MAX_MB=1",
                                        "CARTAGE_OFI_PROVIDER_INCLUDE=tcp;ofi_rxm", "CARTAGE_OFI_HOLD_S=2"});
    EXPECT_EQ(r.code, 0) << method << ": " << r.err << r.out;
    EXPECT_THAT(r.out, HasSubstr("PASS unexpectedcap")) << method;
    EXPECT_THAT(r.err, ::testing::ContainsRegex("cartage: finalize \\(rank 1\\): [0-9]+ messages? sent to this rank "
                                                "(was|were) never received; the first: from rank 0 \\(context 0, "
                                                "tag 1, 8 bytes\\)"))
        << method;
    if (std::string(method) == "ofi") {
      EXPECT_THAT(r.out, ::testing::ContainsRegex("unexpected cap: .*ofi: rank 0 gave up sending to rank 1: this "
                                                  "rank holds [0-9]+ bytes of its messages that no receive took"));
    }
  }
}

// A sender 100,000 messages ahead of a receiver that keeps progressing: what
// waits for receives stays within the cap on every method (ofi's provider,
// which would keep 17 KB a message, has its sender held back), and every
// message arrives in order once the receives come.
TEST(Unexpected, AFastSenderIsHeldWithinTheCap) {
  for (const char* method : {"shm", "tcp", "ofi"}) {
    const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "2", "--timeout", "120", RANKS_BIN, "fastsender"},
                                       {absl::StrCat("CARTAGE_METHODS=", method), "CARTAGE_UNEXPECTED_MAX_MB=16",
                                        "CARTAGE_OFI_PROVIDER_INCLUDE=tcp;ofi_rxm"});
    EXPECT_EQ(r.code, 0) << method << ": " << r.err << r.out;
    EXPECT_THAT(r.out, HasSubstr("PASS fastsender")) << method;
  }
}

// The launcher stopped, a rank killed and left unreaped: a rank that never
// talked to it still sees it gone within 2 s (it watches the pid it learnt
// at set-up) and its receive fails naming it, on every method.
TEST(DeadPeer, ARankThatNeverTalkedToTheKilledOneLearnsWithoutTheLauncher) {
  for (const char* method : {"shm", "tcp", "ofi"}) {
    const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "3", "--timeout", "60", RANKS_BIN, "strangerkilled"},
                                       {absl::StrCat("CARTAGE_METHODS=", method),
                                        "CARTAGE_OFI_PROVIDER_INCLUDE=tcp;ofi_rxm"});
    EXPECT_EQ(r.code, 128 + 9) << method << ": " << r.err << r.out;
    EXPECT_THAT(r.err, HasSubstr("rank 1 (pid ")) << method;
    EXPECT_THAT(r.out, ::testing::ContainsRegex("stranger killed: the receive from rank 1 failed after [01]\\.[0-9]+ "
                                                "s: UNAVAILABLE: .*rank 1 exited"))
        << method << ": " << r.out;
    EXPECT_THAT(r.err, ::testing::Not(HasSubstr("cases_faults.cc"))) << method << ": " << r.err;  // no failed check
  }
}

// The same on "three hosts" (CARTAGE_HOST_TAG apart: nobody watches
// another's pid) over tcp: rank 0 sees rank 1's connection close and passes
// the news to rank 2, which never talked to rank 1, over their connection.
TEST(DeadPeer, NewsOfADeathReachesARankOnAnotherHostThatNeverTalkedToIt) {
  const CommandResult r =
      RunCommand({CARTAGE_BIN, "run", "-n", "3", "--timeout", "60", "sh", "-c",
                  absl::StrCat("CARTAGE_HOST_TAG=host$CARTAGE_RANK exec ", RANKS_BIN, " strangerkilled")},
                 {"CARTAGE_METHODS=tcp"});
  EXPECT_EQ(r.code, 128 + 9) << r.err << r.out;
  EXPECT_THAT(r.out, ::testing::ContainsRegex("stranger killed: the receive from rank 1 failed after [01]\\.[0-9]+ "
                                              "s: UNAVAILABLE: .*rank 1 exited \\(rank 0 saw it go\\)"))
      << r.out;
  EXPECT_THAT(r.err, ::testing::Not(HasSubstr("cases_faults.cc"))) << r.err;
}

// Names in /dev/shm of the job the launcher with `pid` ran (job ids start with it).
int SharedMemoryNames(int pid) {
  const std::string prefix = absl::StrCat("cartage-", pid, "-");
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
    if (e.path().filename().string().rfind(prefix, 0) == 0) ++n;
  }
  return n;
}

TEST(ShmSegment, KillNineLeavesNothingInDevShm) {
  // Rank 1 kills itself once the job is up; the launcher stops the rest.
  const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "3", "--timeout", "60", "sh", "-c",
                                      absl::StrCat("if [ $CARTAGE_RANK = 1 ]; then exec ", RANKS_BIN,
                                                   " killself; else exec ", RANKS_BIN, " order; fi")});
  EXPECT_EQ(r.code, 128 + 9) << r.err;
  EXPECT_THAT(r.err, HasSubstr("killed by signal 9"));
  EXPECT_EQ(SharedMemoryNames(r.pid), 0);
}

// A rank that crashes dies by its signal, named by the launcher, leaving no
// files behind: the backtrace handlers of the libraries under libfabric are
// kept from installing (the launcher's IPATH_NO_BACKTRACE / HFI_NO_BACKTRACE)
// or, where a rank starts without them, put back to the default at load.
TEST(Crash, ARankThatCrashesIsNamedByItsSignalAndLeavesNoFiles) {
  const std::string dir = ::testing::TempDir() + "/crash_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
#if defined(__SANITIZE_ADDRESS__)
  constexpr bool kAsan = true;
#else
  constexpr bool kAsan = false;
#endif
  for (const char* how : {"", "env -u IPATH_NO_BACKTRACE -u HFI_NO_BACKTRACE "}) {
    for (const auto& [mode, sig, abbrev] : {std::tuple{"segv", 11, "SEGV"}, std::tuple{"abort", 6, "ABRT"}}) {
      const bool launcher_env = how[0] == '\0';
      SCOPED_TRACE(absl::StrCat(mode, launcher_env ? " with the launcher's environment" : " without it"));
      const CommandResult r = RunCommand({"/bin/sh", "-c", absl::StrCat("cd ", dir, " && exec ", CARTAGE_BIN,
                                                                   " run -n 1 --timeout 60 ", how, RANKS_BIN, " ", mode)});
      const bool asan_report = r.err.find("ERROR: AddressSanitizer: SEGV on unknown address") != std::string::npos;
      if (kAsan && sig == 11 && (launcher_env || asan_report)) {
        // ASan's own handler was never replaced (or came back): its report,
        // then its exit (code 1, or SIGABRT under abort_on_error=1).
        EXPECT_TRUE(asan_report) << r.err;
        EXPECT_THAT(r.err, ::testing::AnyOf(HasSubstr("exited with code 1"), HasSubstr("killed by signal 6 (ABRT)")));
      } else {
        EXPECT_EQ(r.code, 128 + sig) << r.err;
        EXPECT_THAT(r.err, HasSubstr(absl::StrCat("killed by signal ", sig, " (", abbrev, ")")));
      }
      EXPECT_THAT(r.err, ::testing::Not(HasSubstr("Backtrace:")));
      EXPECT_TRUE(std::filesystem::is_empty(dir)) << "a crash left files in the working directory";
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cartage::test
