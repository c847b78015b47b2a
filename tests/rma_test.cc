// One-sided communication through real processes: tests/rma_ranks.cc under
// `cartage run`, the whole matrix of operations in one launch per method and
// rank count (2 to 4 ranks on 2 cores, over shm, tcp and ofi, shared and
// served windows), passive epochs, post/start/complete/wait, shared and
// dynamic windows, a target that computes, and a target that dies.
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rma/wire.h"
#include "tests/run_command.h"

namespace cartage::test {
namespace {

using ::testing::HasSubstr;

// One launch of `n` ranks of rma_ranks `mode`, whose allocated windows go
// `path` ("shared", "served" by the target's agent, or "one-sided": the
// method's writes and reads), with `env`; rank 0
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
// Windows neither shared nor single-copy over ofi: puts and gets with one
// target block are the provider's own writes and reads (tcp;ofi_rxm has
// FI_RMA), from 16 KiB (kOneSidedOnOfi) or from one byte (kEveryOneSided).
const std::vector<std::string> kOneSidedOnOfi = {"CARTAGE_METHODS=ofi", "CARTAGE_OFI_PROVIDER_INCLUDE=tcp;ofi_rxm",
                                                 "CARTAGE_RMA_SHARED=0"};
const std::vector<std::string> kEveryOneSided = [] {
  std::vector<std::string> env = kOneSidedOnOfi;
  env.push_back("CARTAGE_RMA_ONE_SIDED_MIN=1");
  return env;
}();
// The same with no order asked for after writes (no FI_ORDER_SAW): each
// unlock waits for its writes to complete before it lets the lock go.
const std::vector<std::string> kUnorderedOneSided = [] {
  std::vector<std::string> env = kEveryOneSided;
  env.push_back("CARTAGE_OFI_RMA=unordered");
  return env;
}();

// Allocated windows over one host are shared (the origin's loads and
// stores), whatever the method; with CARTAGE_RMA_SHARED=0 the target's
// agent serves them, as it always serves windows over the caller's memory.
TEST(RmaRanks, EveryOperationMatchesTheSerialReferenceOnShm) {
  for (int n : {2, 3, 4}) ExpectPass(n, "matrix", "shared", {}, "matrix");
  ExpectPass(3, "matrix", "served", kServedOnShm, "matrix");
}

// On ofi (tcp;ofi_rxm offers FI_RMA) the puts and gets with one target
// block are the provider's writes and reads; with CARTAGE_OFI_RMA=0 they
// are served, as on tcp.
TEST(RmaRanks, EveryOperationMatchesTheSerialReferenceOnTcpAndOfi) {
  for (int n : {2, 3}) {
    ExpectPass(n, "matrix", "served", {"CARTAGE_METHODS=tcp", "CARTAGE_RMA_SHARED=0"}, "matrix");
    ExpectPass(n, "matrix", "one-sided", kOneSidedOnOfi, "matrix");
    ExpectPass(n, "matrix", "one-sided", kEveryOneSided, "matrix");
  }
  ExpectPass(2, "matrix", "one-sided", kUnorderedOneSided, "matrix");
  // Another provider's registration and writes: libfabric's shm (cross-memory attach).
  ExpectPass(2, "matrix", "one-sided",
             {"CARTAGE_METHODS=ofi", "CARTAGE_OFI_PROVIDER_INCLUDE=shm", "CARTAGE_RMA_SHARED=0",
              "CARTAGE_RMA_ONE_SIDED_MIN=1"},
             "matrix");
  std::vector<std::string> served = kOneSidedOnOfi;
  served.push_back("CARTAGE_OFI_RMA=0");
  ExpectPass(2, "matrix", "served", served, "matrix");
}

// Locks: an exclusive read-modify-write of one counter by every rank,
// shared locks on every rank with flushes, the errors outside a lock.
TEST(RmaRanks, PassiveEpochsKeepExclusionAndFlushOnShmAndTcp) {
  for (int n : {2, 3, 4}) ExpectPass(n, "passive", "shared", {}, "passive");
  ExpectPass(3, "passive", "served", kServedOnShm, "passive");
  ExpectPass(3, "passive", "served", {"CARTAGE_METHODS=tcp", "CARTAGE_RMA_SHARED=0"}, "passive");
  ExpectPass(3, "passive", "shared", {"CARTAGE_METHODS=tcp"}, "passive");
  ExpectPass(3, "passive", "one-sided", kEveryOneSided, "passive");
  ExpectPass(3, "passive", "one-sided", kUnorderedOneSided, "passive");
}

// Post, start, complete, wait and test: a ring, many origins into one
// target that tests, every rank to every rank inside a fence's epoch, the
// errors of groups; over the caller's memory (served) and allocated
// (shared on one host), on shm, tcp and ofi.
TEST(RmaRanks, GeneralActiveTargetEpochsMatchTheReferenceOnEveryMethod) {
  for (int n : {2, 3, 4}) ExpectPass(n, "groups", "shared", {}, "groups");
  ExpectPass(3, "groups", "served", kServedOnShm, "groups");
  ExpectPass(3, "groups", "shared", {"CARTAGE_METHODS=tcp"}, "groups");
  ExpectPass(3, "groups", "served", {"CARTAGE_METHODS=tcp", "CARTAGE_RMA_SHARED=0"}, "groups");
  ExpectPass(3, "groups", "one-sided", kEveryOneSided, "groups");
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

// A series of small operations to one target travels as one control
// message, which leaves when full, before data that goes apart, and when
// a fence, an unlock or a request's wait needs it; on shm, tcp and ofi
// (its puts served: CARTAGE_OFI_RMA=0).
TEST(RmaRanks, SmallOperationsToOneTargetTravelInOneControlMessage) {
  ExpectPass(2, "batching", "served", kServedOnShm, "batching");
  ExpectPass(3, "batching", "served", kServedOnShm, "batching");
  for (const char* method : {"tcp", "ofi"}) {
    ExpectPass(3, "batching", "served",
               {absl::StrCat("CARTAGE_METHODS=", method), "CARTAGE_OFI_PROVIDER_INCLUDE=tcp;ofi_rxm",
                "CARTAGE_OFI_RMA=0", "CARTAGE_RMA_SHARED=0"},
               "batching");
  }
}

// A control message's records, as the target splits them: each readable
// one whole, and from the first that cannot be read, that one and every
// one after it refused, so the target still counts every operation.
std::vector<std::byte> Batch(uint32_t magic, uint32_t count, const std::vector<rma::Header>& records,
                             std::size_t data = 0) {
  std::vector<std::byte> m(sizeof(rma::BatchHeader));
  const rma::BatchHeader b{magic, count};
  std::memcpy(m.data(), &b, sizeof(b));
  for (const rma::Header& h : records) {
    const std::size_t at = m.size();
    m.resize(at + sizeof(h));
    std::memcpy(m.data() + at, &h, sizeof(h));
    m.resize(m.size() + h.runs * sizeof(rma::Run) + (h.inline_data != 0 ? h.bytes : 0));
  }
  m.resize(m.size() + data);
  return m;
}

rma::Header Put(uint64_t bytes, bool inline_data) {
  rma::Header h;
  h.magic = rma::kMagic;
  h.kind = static_cast<uint8_t>(rma::OpKind::kPut);
  h.inline_data = inline_data ? 1 : 0;
  h.epoch = 1;
  h.runs = 1;
  h.bytes = bytes;
  return h;
}

TEST(RmaWire, ABatchSplitsIntoItsRecordsAndRefusesFromTheFirstUnreadableOne) {
  rma::Header lock;
  lock.magic = rma::kMagic;
  lock.kind = static_cast<uint8_t>(rma::OpKind::kLock);
  lock.op = rma::kLockShared;
  lock.epoch = rma::kPassiveEpoch;
  const std::vector<std::byte> ok = Batch(rma::kBatchMagic, 3, {lock, Put(8, true), Put(1 << 20, false)});
  std::vector<rma::Record> r;
  rma::SplitBatch(ok.data(), ok.size(), &r);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].at, ok.data() + 8);
  EXPECT_EQ(r[0].n, 32u);
  EXPECT_EQ(r[1].n, 32u + 16u + 8u);
  EXPECT_EQ(r[2].n, 32u + 16u);  // its data goes apart
  EXPECT_EQ(r[2].at + r[2].n, ok.data() + ok.size());
  for (const rma::Record& x : r) EXPECT_EQ(x.why, "");

  // The second record says it carries more data than the message holds.
  rma::Header big = Put(64, true);
  std::vector<std::byte> cut = Batch(rma::kBatchMagic, 3, {Put(8, true), big, Put(8, true)});
  cut.resize(sizeof(rma::BatchHeader) + 56 + 80);
  std::vector<rma::Record> c;
  rma::SplitBatch(cut.data(), cut.size(), &c);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].why, "");
  EXPECT_THAT(c[1].why, HasSubstr("record 2 of 3 in a control message of 144 bytes: 112 bytes, 32 past"));
  EXPECT_EQ(c[2].why, c[1].why);

  // A foreign record header.
  rma::Header foreign = Put(8, true);
  foreign.magic = 7;
  const std::vector<std::byte> f = Batch(rma::kBatchMagic, 2, {foreign, Put(8, true)});
  std::vector<rma::Record> fr;
  rma::SplitBatch(f.data(), f.size(), &fr);
  ASSERT_EQ(fr.size(), 2u);
  EXPECT_THAT(fr[0].why, HasSubstr("record 1 of 2"));
  EXPECT_THAT(fr[0].why, HasSubstr("a foreign header"));

  // Bytes past the last record.
  const std::vector<std::byte> tail = Batch(rma::kBatchMagic, 1, {Put(8, true)}, 5);
  std::vector<rma::Record> t;
  rma::SplitBatch(tail.data(), tail.size(), &t);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_THAT(t[0].why, HasSubstr("5 bytes past its last record"));

  // A batch header that cannot be trusted: one refused record.
  for (const auto& [magic, count] : {std::pair<uint32_t, uint32_t>{0x1234, 1}, {rma::kBatchMagic, 0},
                                     {rma::kBatchMagic, 1000}}) {
    const std::vector<std::byte> m = Batch(magic, count, {Put(8, true)});
    std::vector<rma::Record> one;
    rma::SplitBatch(m.data(), m.size(), &one);
    ASSERT_EQ(one.size(), 1u);
    EXPECT_THAT(one[0].why, HasSubstr("malformed batch header"));
  }
  std::vector<rma::Record> none;
  rma::SplitBatch(ok.data(), 5, &none);
  ASSERT_EQ(none.size(), 1u);
  EXPECT_THAT(none[0].why, HasSubstr("a control message of 5 bytes"));
}

// Rank 0 cannot allocate its window's memory: every rank's Allocate fails,
// naming it (none waits in a collective rank 0 never joins), and the next
// window is made; on shm (where its segment cannot be mapped either) and
// over ofi.
TEST(RmaRanks, AnAllocationOneRankCannotMakeFailsTheWindowOnEveryRank) {
  // Under AddressSanitizer the allocation must fail as the C library's
  // does, not abort.
  const char* asan = std::getenv("ASAN_OPTIONS");
  const std::string may_fail =
      absl::StrCat("ASAN_OPTIONS=", asan != nullptr ? absl::StrCat(asan, ":") : "", "allocator_may_return_null=1");
  std::vector<std::string> served = kServedOnShm, ofi = kOneSidedOnOfi;
  served.push_back(may_fail);
  ofi.push_back(may_fail);
  ExpectPass(3, "unallocatable", "shared", {may_fail}, "unallocatable");  // no segment either: served, then refused
  ExpectPass(3, "unallocatable", "served", served, "unallocatable");
  ExpectPass(2, "unallocatable", "one-sided", ofi, "unallocatable");
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
  // The provider's writes into the computing rank need its progress too.
  std::vector<std::string> ofi = kEveryOneSided;
  ofi.push_back("CARTAGE_PROGRESS_THREAD=1");
  ExpectPass(2, "computing", "one-sided", ofi, "passive");
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
                                   {"dead", 3, "one-sided", kEveryOneSided, "fence"},
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
