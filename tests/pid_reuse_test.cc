// A peer's pid handed to another process after the peer died: single-copy
// puts, gets and rendezvous reads (process_vm_writev and readv name a pid)
// must fail, naming the rank, and never touch the process that has the pid
// now (tests/reuse_ranks.cc under `cartage run`; /proc/sys/kernel/pid_max is
// 32,768 on many machines, so a long job can see a pid come round again).
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/run_command.h"

namespace cartage::test {
namespace {

using ::testing::HasSubstr;

TEST(PidReuse, CopiesNeverReachTheProcessThatReusesADeadRanksPid) {
  // Rendezvous messages of 64 KiB and more are read with process_vm_readv.
  const CommandResult r =
      RunCommand({CARTAGE_BIN, "run", "-n", "2", "--timeout", "120", RANKS_BIN}, {"CARTAGE_SHM_CMA_MIN=65536"});
  if (r.out.find("SKIP reuse") != std::string::npos) GTEST_SKIP() << r.out;
  EXPECT_EQ(r.code, 1) << r.err << r.out;  // the launcher names the rank that left
  EXPECT_THAT(r.err, HasSubstr("cartage run: rank 1 (pid ")) << r.out;
  for (const char* what : {"put of 4096 bytes", "get of 4096 bytes", "put of 16384 bytes", "get of 16384 bytes",
                           "receive"}) {
    EXPECT_THAT(r.out, HasSubstr(std::string("rank 0: the ") + what + " failed: ")) << r.err;
  }
  EXPECT_THAT(r.out, HasSubstr("PASS reuse")) << r.err;
}

}  // namespace
}  // namespace cartage::test
