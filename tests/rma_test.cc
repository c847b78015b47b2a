// One-sided communication through real processes: tests/rma_ranks.cc under
// `cartage run`, the whole matrix of operations in one launch per method and
// rank count (2 to 4 ranks on 2 cores, over shm, tcp and ofi, shared and
// served windows), passive epochs, post/start/complete/wait, shared and
// dynamic windows, a target that computes, and a target that dies.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/run_command.h"

namespace cartage::test {
namespace {

using ::testing::HasSubstr;

// One launch of `n` ranks of rma_ranks `mode`, whose allocated windows go
// `path` ("shared", or "served" by the target's agent), with `env`; rank 0
// must print `pass` for `n` ranks.
void ExpectPass(int n, const std::string& mode, const std::string& path, const std::vector<std::string>& env,
                const std::string& pass) {
  const CommandResult r =
      RunCommand({CARTAGE_BIN, "run", "-n", std::to_string(n), "--timeout", "120", RANKS_BIN, mode, path}, env);
  const std::string where = absl::StrFormat("%s, %d ranks, %s windows, env %s", mode, n, path, absl::StrJoin(env, " "));
  EXPECT_EQ(r.code, 0) << where << ": " << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr(absl::StrFormat("PASS rma %s (%d ranks)", pass, n))) << where << ": " << r.err;
}

const std::vector<std::string> kServedOnShm = {"CARTAGE_RMA_SHARED=0"};

// Allocated windows over one host are shared (the origin's loads and
// stores), whatever the method; with CARTAGE_RMA_SHARED=0 the target's
// agent serves them, as it always serves windows over the caller's memory.
TEST(RmaRanks, EveryOperationMatchesTheSerialReferenceOnShm) {
  for (int n : {2, 3, 4}) ExpectPass(n, "matrix", "shared", {}, "matrix");
  ExpectPass(3, "matrix", "served", kServedOnShm, "matrix");
}

TEST(RmaRanks, EveryOperationMatchesTheSerialReferenceOnTcpAndOfi) {
  for (const char* method : {"tcp", "ofi"}) {
    for (int n : {2, 3}) {
      ExpectPass(n, "matrix", "served",
                 {absl::StrCat("CARTAGE_METHODS=", method), "CARTAGE_OFI_PROVIDER_INCLUDE=tcp;ofi_rxm",
                  "CARTAGE_RMA_SHARED=0"},
                 "matrix");
    }
  }
}

// Locks: an exclusive read-modify-write of one counter by every rank,
// shared locks on every rank with flushes, the errors outside a lock.
TEST(RmaRanks, PassiveEpochsKeepExclusionAndFlushOnShmAndTcp) {
  for (int n : {2, 3, 4}) ExpectPass(n, "passive", "shared", {}, "passive");
  ExpectPass(3, "passive", "served", kServedOnShm, "passive");
  ExpectPass(3, "passive", "served", {"CARTAGE_METHODS=tcp", "CARTAGE_RMA_SHARED=0"}, "passive");
  ExpectPass(3, "passive", "shared", {"CARTAGE_METHODS=tcp"}, "passive");
}

// Post, start, complete, wait and test: a ring, many origins into one
// target that tests, every rank to every rank inside a fence's epoch, the
// errors of groups; over the caller's memory (served) and allocated
// (shared on one host), on shm, tcp and ofi.
TEST(RmaRanks, GeneralActiveTargetEpochsMatchTheReferenceOnEveryMethod) {
  for (int n : {2, 3, 4}) ExpectPass(n, "groups", "shared", {}, "groups");
  ExpectPass(3, "groups", "served", kServedOnShm, "groups");
  ExpectPass(3, "groups", "shared", {"CARTAGE_METHODS=tcp"}, "groups");
  for (const char* method : {"tcp", "ofi"}) {
    ExpectPass(3, "groups", "served",
               {absl::StrCat("CARTAGE_METHODS=", method), "CARTAGE_OFI_PROVIDER_INCLUDE=tcp;ofi_rxm",
                "CARTAGE_RMA_SHARED=0"},
               "groups");
  }
}

// Dynamic windows: regions attached and detached, operations into them by
// address in fence and lock epochs, refusals at the target of accesses in
// no region; on shm, tcp and ofi (never shared).
TEST(RmaRanks, DynamicWindowsReachOnlyTheRegionsAttached) {
  for (int n : {2, 3}) ExpectPass(n, "dynamic", "served", {}, "dynamic");
  for (const char* method : {"tcp", "ofi"}) {
    ExpectPass(3, "dynamic", "served",
               {absl::StrCat("CARTAGE_METHODS=", method), "CARTAGE_OFI_PROVIDER_INCLUDE=tcp;ofi_rxm"}, "dynamic");
  }
}

// A writer under exclusive locks and readers under shared ones, 300 rounds
// of a 64 KiB block (served: it goes by rendezvous both ways): no reader
// sees a block half written.
TEST(RmaRanks, ReadersUnderSharedLocksNeverSeeAHalfWrittenBlock) {
  for (int n : {3, 4}) ExpectPass(n, "torn", "shared", {}, "torn");
  ExpectPass(3, "torn", "served", kServedOnShm, "torn");
}

// A target that computes for 3 s and never calls cartage: with a progress
// thread, the others' locks, operations and unlocks on it complete
// meanwhile (the ranks fail where they took 2.5 s or more); on a shared
// window they need nothing of the target, thread or none.
TEST(RmaRanks, APassiveTargetThatComputesServesThroughItsProgressThread) {
  for (int n : {2, 3}) {
    ExpectPass(n, "computing", "served", {"CARTAGE_PROGRESS_THREAD=1", "CARTAGE_RMA_SHARED=0"}, "passive");
  }
  ExpectPass(3, "computing", "shared", {}, "passive");
}

// AllocateShared: loads and stores across ranks, locks and Sync, queries,
// on shm and tcp; refused on every rank where one rank may not share.
TEST(RmaRanks, SharedWindowsAreLoadedAndStoredDirectly) {
  for (int n : {2, 3, 4}) ExpectPass(n, "shared", "shared", {}, "shared");
  ExpectPass(2, "shared", "shared", {"CARTAGE_METHODS=tcp"}, "shared");
  ExpectPass(2, "shared", "served", kServedOnShm, "shared refused");
  // Three "hosts" (CARTAGE_HOST_TAG apart) over tcp.
  const CommandResult r = RunCommand({CARTAGE_BIN, "run", "-n", "3", "--timeout", "120", "sh", "-c",
                                      absl::StrCat("CARTAGE_HOST_TAG=host$CARTAGE_RANK exec ", RANKS_BIN,
                                                   " shared served")},
                                     {"CARTAGE_METHODS=tcp"});
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("PASS rma shared refused (3 ranks)")) << r.err;
}

// The last rank leaves after the first fence: every other rank's fence
// fails naming it, within the launcher's limit; on a shared window, one
// that dies holding a lock fails the others' locks, naming it; one that
// is gone fails the start towards it and the wait for it.
TEST(RmaRanks, ADeadRankFailsTheFenceOrTheLockNamingIt) {
  struct Case {
    const char* mode;
    int n;
    const char* path;
    std::vector<std::string> env;
    const char* failed;
  };
  const std::vector<Case> cases = {{"dead", 2, "shared", {}, "fence"},
                                   {"dead", 3, "shared", {}, "fence"},
                                   {"dead", 3, "served", kServedOnShm, "fence"},
                                   {"lockdead", 2, "shared", {}, "lock"},
                                   {"lockdead", 3, "shared", {}, "lock"},
                                   {"groupdead", 2, "shared", {}, "start"},
                                   {"groupdead", 3, "served", kServedOnShm, "wait"}};
  for (const Case& c : cases) {
    const CommandResult r = RunCommand(
        {CARTAGE_BIN, "run", "-n", std::to_string(c.n), "--timeout", "60", RANKS_BIN, c.mode, c.path}, c.env);
    const std::string where = absl::StrFormat("%s, %d ranks, %s", c.mode, c.n, c.path);
    EXPECT_EQ(r.code, 1) << where << ": " << r.err << r.out;  // the launcher names the rank that left
    EXPECT_THAT(r.err, HasSubstr(absl::StrFormat("cartage run: rank %d (pid ", c.n - 1))) << where;
    for (int rank = 0; rank < c.n - 1; ++rank) {
      EXPECT_THAT(r.out, HasSubstr(absl::StrFormat("rank %d: the %s failed: ", rank, c.failed))) << where << r.err;
    }
  }
}

}  // namespace
}  // namespace cartage::test
