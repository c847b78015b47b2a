// shm's parameters: what the job's size and oversubscription change, what
// the environment sets, and bad values refused by name.
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "car/car_pool.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "methods/shm/shm_method.h"
#include "methods/shm/shm_wire.h"
#include "tests/in_process_job.h"

namespace cartage::methods::shm {
namespace {

TEST(ShmOptions, ABadOversubscriptionValueIsRefusedByName) {
  ::setenv("CARTAGE_OVERSUBSCRIBED", "maybe", 1);
  SharedJob job;
  TestHost host;
  InProcessExchange ex(&job, 0);
  auto m = ShmMethod::Create(ex, &host, ShmOptions());
  ::unsetenv("CARTAGE_OVERSUBSCRIBED");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), "CARTAGE_OVERSUBSCRIBED=maybe: use auto, yes or no");
}

// The rings grow within 32 MiB for the job: with a CPU each to 256 KiB (for
// up to 9 ranks; 128 KiB for 16, the default from 17), the eager limit
// staying; oversubscribed to 512 KiB (for up to 8 ranks, 256 KiB for 9,
// 128 KiB for 16, the default from 17) and the eager limit with them (an
// eighth of the ring); what the environment sets is kept.
TEST(ShmOptions, RingsGrowWithinTheJobsBudgetAndOversubscribedTheEagerLimitWithThem) {
  struct Case {
    int ranks;
    bool oversubscribed;
    std::size_t ring, eager, cma_min;
  };
  for (const Case& c : {Case{2, false, 256u << 10, 8192, 64u << 20}, Case{8, false, 256u << 10, 8192, 64u << 20},
                        Case{9, false, 256u << 10, 8192, 64u << 20}, Case{16, false, 128u << 10, 8192, 64u << 20},
                        Case{17, false, 64u << 10, 8192, 64u << 20},
                        Case{3, true, 512u << 10, 64u << 10, 64u << 10},
                        Case{8, true, 512u << 10, 64u << 10, 64u << 10}, Case{9, true, 256u << 10, 32u << 10, 64u << 10},
                        Case{16, true, 128u << 10, 16u << 10, 64u << 10}, Case{17, true, 64u << 10, 8192, 64u << 10}}) {
    ShmOptions o;
    ASSERT_TRUE(o.ForJob(c.ranks, c.oversubscribed).ok());
    EXPECT_EQ(o.ring_bytes, c.ring) << c.ranks << (c.oversubscribed ? " oversubscribed" : "");
    EXPECT_EQ(o.eager_limit, c.eager) << c.ranks;
    EXPECT_EQ(o.cma_min, c.cma_min) << c.ranks;
  }
  ::setenv("CARTAGE_SHM_EAGER_LIMIT", "4096", 1);
  absl::StatusOr<ShmOptions> eager = ShmOptions::FromEnvironment();
  ::unsetenv("CARTAGE_SHM_EAGER_LIMIT");
  ::setenv("CARTAGE_SHM_RING_BYTES", "131072", 1);
  absl::StatusOr<ShmOptions> ring = ShmOptions::FromEnvironment();
  ::unsetenv("CARTAGE_SHM_RING_BYTES");
  ASSERT_TRUE(eager.ok()) << eager.status();
  ASSERT_TRUE(ring.ok()) << ring.status();
  ASSERT_TRUE(eager->ForJob(4, true).ok());
  EXPECT_EQ(eager->ring_bytes, 512u << 10) << "the ring still grows";
  EXPECT_EQ(eager->eager_limit, 4096u) << "the limit set stays";
  EXPECT_EQ(ring->eager_limit, 16384u) << "an eighth of the ring set";
  ASSERT_TRUE(ring->ForJob(4, true).ok());
  EXPECT_EQ(ring->ring_bytes, 128u << 10) << "the ring set stays";
  EXPECT_EQ(ring->eager_limit, 16384u);
  // An eager limit the grown ring carries, but the default one does not.
  ShmOptions big;
  big.eager_limit = 65536;
  big.eager_limit_set = true;
  ShmOptions same = big;
  EXPECT_TRUE(big.ForJob(8, true).ok());
  const absl::Status refused = same.ForJob(17, false);
  EXPECT_EQ(refused.message(), "shm: eager limit 65536 exceeds what a 65536-byte ring carries (16336)")
      << "checked against the ring in use";
}

// CARTAGE_SHM_CMA_MIN, set, holds everywhere: nothing is chosen below it.
TEST(ShmOptions, ACmaMinimumSetLeavesNothingToChoose) {
  ShmOptions o;
  ASSERT_TRUE(o.ForJob(2, false).ok());
  EXPECT_EQ(o.cma_choose_min, 1u) << "every rendezvous message is chosen";
  ::setenv("CARTAGE_SHM_CMA_MIN", "1048576", 1);
  absl::StatusOr<ShmOptions> set = ShmOptions::FromEnvironment();
  ::unsetenv("CARTAGE_SHM_CMA_MIN");
  ASSERT_TRUE(set.ok()) << set.status();
  ASSERT_TRUE(set->ForJob(2, false).ok());
  EXPECT_EQ(set->cma_min, 1u << 20);
  EXPECT_EQ(set->cma_choose_min, 0u);
}

TEST(ShmOptions, DirectStoreTakesYesNoOrAuto) {
  ::setenv("CARTAGE_SHM_DIRECT_STORE", "sometimes", 1);
  absl::StatusOr<ShmOptions> bad = ShmOptions::FromEnvironment();
  ::setenv("CARTAGE_SHM_DIRECT_STORE", "yes", 1);
  absl::StatusOr<ShmOptions> yes = ShmOptions::FromEnvironment();
  ::setenv("CARTAGE_SHM_DIRECT_STORE", "no", 1);
  absl::StatusOr<ShmOptions> no = ShmOptions::FromEnvironment();
  ::setenv("CARTAGE_SHM_DIRECT_STORE", "auto", 1);
  absl::StatusOr<ShmOptions> chosen = ShmOptions::FromEnvironment();
  ::unsetenv("CARTAGE_SHM_DIRECT_STORE");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "CARTAGE_SHM_DIRECT_STORE=sometimes: use yes, no or auto");
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->direct_store, DirectStoreSupported() ? ShmOptions::DirectStore::kAuto : ShmOptions::DirectStore::kNo)
      << "auto without MOVDIR64B: ordinary stores";
  if (DirectStoreSupported()) {
    ASSERT_TRUE(yes.ok()) << yes.status();
    EXPECT_EQ(yes->direct_store, ShmOptions::DirectStore::kYes);
  } else {
    ASSERT_FALSE(yes.ok());
    EXPECT_EQ(yes.status().message(), "CARTAGE_SHM_DIRECT_STORE=yes: this CPU has no MOVDIR64B");
  }
  ASSERT_TRUE(no.ok()) << no.status();
  EXPECT_EQ(no->direct_store, ShmOptions::DirectStore::kNo);
  EXPECT_EQ(ShmOptions().direct_store, ShmOptions::DirectStore::kNo) << "off unless asked";
}

}  // namespace
}  // namespace cartage::methods::shm
