// One-sided communication through real processes: tests/rma_ranks.cc under
// `cartage run`, the whole matrix of operations in one launch per method and
// rank count (2 to 4 ranks on 2 cores, over shm, tcp and ofi), passive
// epochs, a target that computes, and a target that dies.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/run_command.h"

namespace cartage::test {
namespace {

using ::testing::HasSubstr;

TEST(RmaRanks, EveryOperationMatchesTheSerialReferenceOnShm) {
  for (int n : {2, 3, 4}) {
    const CommandResult r =
        RunCommand({CARTAGE_BIN, "run", "-n", std::to_string(n), "--timeout", "120", RANKS_BIN, "matrix"});
    EXPECT_EQ(r.code, 0) << n << " ranks: " << r.err << r.out;
    EXPECT_THAT(r.out, HasSubstr(absl::StrFormat("PASS rma matrix (%d ranks)", n))) << r.err;
  }
}

TEST(RmaRanks, EveryOperationMatchesTheSerialReferenceOnTcpAndOfi) {
  for (const char* method : {"tcp", "ofi"}) {
    for (int n : {2, 3}) {
      const CommandResult r = RunCommand(
          {CARTAGE_BIN, "run", "-n", std::to_string(n), "--timeout", "120", RANKS_BIN, "matrix"},
          {absl::StrCat("CARTAGE_METHODS=", method), "CARTAGE_OFI_PROVIDER_INCLUDE=tcp;ofi_rxm"});
      EXPECT_EQ(r.code, 0) << method << ", " << n << " ranks: " << r.err << r.out;
      EXPECT_THAT(r.out, HasSubstr(absl::StrFormat("PASS rma matrix (%d ranks)", n))) << method << r.err;
    }
  }
}

// Locks: an exclusive read-modify-write of one counter by every rank,
// shared locks on every rank with flushes, the errors outside a lock.
TEST(RmaRanks, PassiveEpochsKeepExclusionAndFlushOnShmAndTcp) {
  for (int n : {2, 3, 4}) {
    const CommandResult r =
        RunCommand({CARTAGE_BIN, "run", "-n", std::to_string(n), "--timeout", "120", RANKS_BIN, "passive"});
    EXPECT_EQ(r.code, 0) << n << " ranks: " << r.err << r.out;
    EXPECT_THAT(r.out, HasSubstr(absl::StrFormat("PASS rma passive (%d ranks)", n))) << r.err;
  }
  const CommandResult tcp = RunCommand(
      {CARTAGE_BIN, "run", "-n", "3", "--timeout", "120", RANKS_BIN, "passive"}, {"CARTAGE_METHODS=tcp"});
  EXPECT_EQ(tcp.code, 0) << tcp.err << tcp.out;
  EXPECT_THAT(tcp.out, HasSubstr("PASS rma passive (3 ranks)")) << tcp.err;
}

// A writer under exclusive locks and readers under shared ones, 300 rounds
// of a 64 KiB block that goes by rendezvous both ways: no reader sees a
// block half written.
TEST(RmaRanks, ReadersUnderSharedLocksNeverSeeAHalfWrittenBlock) {
  for (int n : {3, 4}) {
    const CommandResult r =
        RunCommand({CARTAGE_BIN, "run", "-n", std::to_string(n), "--timeout", "120", RANKS_BIN, "torn"});
    EXPECT_EQ(r.code, 0) << n << " ranks: " << r.err << r.out;
    EXPECT_THAT(r.out, HasSubstr(absl::StrFormat("PASS rma torn (%d ranks)", n))) << r.err;
  }
}

// A target that computes for 3 s and never calls cartage: with a progress
// thread, the others' locks, operations and unlocks on it complete
// meanwhile (the ranks fail where they took 2.5 s or more).
TEST(RmaRanks, APassiveTargetThatComputesServesThroughItsProgressThread) {
  for (int n : {2, 3}) {
    const CommandResult r = RunCommand(
        {CARTAGE_BIN, "run", "-n", std::to_string(n), "--timeout", "120", RANKS_BIN, "computing"},
        {"CARTAGE_PROGRESS_THREAD=1"});
    EXPECT_EQ(r.code, 0) << n << " ranks: " << r.err << r.out;
    EXPECT_THAT(r.out, HasSubstr(absl::StrFormat("PASS rma passive (%d ranks)", n))) << r.err;
  }
}

// The last rank leaves after the first fence: every other rank's fence
// fails naming it, within the launcher's limit.
TEST(RmaRanks, ADeadTargetFailsTheFenceNamingIt) {
  for (int n : {2, 3}) {
    const CommandResult r =
        RunCommand({CARTAGE_BIN, "run", "-n", std::to_string(n), "--timeout", "60", RANKS_BIN, "dead"});
    EXPECT_EQ(r.code, 1) << n << " ranks: " << r.err << r.out;  // the launcher names the rank that left
    EXPECT_THAT(r.err, HasSubstr(absl::StrFormat("cartage run: rank %d (pid ", n - 1)));
    for (int rank = 0; rank < n - 1; ++rank) {
      EXPECT_THAT(r.out, HasSubstr(absl::StrFormat("rank %d: the fence failed: ", rank))) << r.err;
    }
  }
}

}  // namespace
}  // namespace cartage::test
