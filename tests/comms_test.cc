// Making communicators (agent/comms.cc): the members of each new one agree
// on its context, so ranks that made different communicators before (a
// split's halves, a group's members only, two joined groups) still share
// the next one's; ranks as threads of this process over shm.
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "cartage/cartage.h"
#include "cartage/collectives.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agents_in_process.h"

namespace cartage::test {
namespace {

using ::testing::HasSubstr;

constexpr agent::Threading kSingle{.level = ThreadLevel::kSingle, .progress_thread = false, .lanes = 1};

// Whether every rank of `w` holds the same context in `c` (checked over
// `w`, so that a disagreement fails here instead of hanging traffic on `c`).
bool SameEverywhere(const Comm& w, const Comm& c) {
  const int mine = static_cast<int>(c.context());
  std::vector<int> all(static_cast<std::size_t>(w.size()));
  EXPECT_TRUE(Allgather(w, &mine, all.data(), 1, Datatype::Basic(BasicType::kInt32)).ok());
  for (int x : all) {
    if (x != mine) return false;
  }
  return true;
}

// A ring on `c`: each rank sends its world rank right and checks what
// comes from the left.
void Ring(const Comm& c, int tag) {
  const int right = (c.rank() + 1) % c.size(), left = (c.rank() + c.size() - 1) % c.size();
  const int out = c.world_rank(c.rank());
  int in = -1;
  Request r;
  ASSERT_TRUE(c.Irecv(&in, sizeof(in), left, tag, &r).ok());
  ASSERT_TRUE(c.Send(&out, sizeof(out), right, tag).ok());
  ASSERT_TRUE(r.Wait().ok());
  EXPECT_EQ(in, c.world_rank(left));
}

TEST(Comms, ADupAgreesAfterTheHalvesMadeDifferentNumbersOfCommunicators) {
  InProcess(4, kSingle, [](int r, Agent& a) {
    const Comm w = a.World();
    absl::StatusOr<std::optional<Comm>> half = w.Split(r % 2, r);
    ASSERT_TRUE(half.ok() && half->has_value());
    std::vector<Comm> made;
    for (int i = 0; i < (r % 2 == 0 ? 3 : 1); ++i) made.push_back((*half)->Dup().value());
    const Comm d = w.Dup().value();
    ASSERT_TRUE(SameEverywhere(w, d)) << "rank " << r;
    EXPECT_NE(d.context(), w.context());
    for (const Comm& m : made) EXPECT_NE(d.context(), m.context());
    Ring(d, 3);
    Ring(made.back(), 4);
  });
}

// Nonblocking dups of two communicators that share every rank, started in
// one order on even ranks and the other on odd ones (blocking ones would
// wait for each other), and a third on one of them before the first
// completes: every copy has a context of its own, the same on every rank.
TEST(Comms, NonblockingDupsInFlightInAnyOrderNeverShareAContext) {
  InProcess(4, kSingle, [](int r, Agent& a) {
    const Comm w = a.World();
    const Comm x = w.Dup().value();
    const Comm y = w.Split(0, w.size() - r).value().value();  // reversed
    PendingDup dx, dy, dx2;
    Request rx, ry, rx2;
    if (r % 2 == 0) {
      ASSERT_TRUE(dx.Start(x, 1, &rx).ok());
      ASSERT_TRUE(dy.Start(y, 2, &ry).ok());
    } else {
      ASSERT_TRUE(dy.Start(y, 2, &ry).ok());
      ASSERT_TRUE(dx.Start(x, 1, &rx).ok());
    }
    ASSERT_TRUE(dx2.Start(x, 1, &rx2).ok());
    EXPECT_THAT(dx.Take(1).status().message(), HasSubstr("no duplicate 1 of 1"));
    ASSERT_TRUE(ry.Wait().ok());
    ASSERT_TRUE(rx2.Wait().ok());
    ASSERT_TRUE(rx.Wait().ok());
    const std::vector<Comm> copies = {dx.Take(0).value(), dy.Take(0).value(), dy.Take(1).value(),
                                      dx2.Take(0).value()};
    for (std::size_t i = 0; i < copies.size(); ++i) {
      ASSERT_TRUE(SameEverywhere(w, copies[i])) << "rank " << r << " copy " << i;
      for (const Comm& other : {w, x, y}) EXPECT_NE(copies[i].context(), other.context());
      for (std::size_t j = 0; j < i; ++j) EXPECT_NE(copies[i].context(), copies[j].context());
    }
    EXPECT_EQ(copies[1].rank(), y.rank());  // a copy keeps its parent's ranks
    for (std::size_t i = 0; i < copies.size(); ++i) Ring(copies[i], 5);  // one tag: each ring on its own
  });
}

TEST(Comms, CreateGroupIsCollectiveOverItsMembersOnly) {
  InProcess(4, kSingle, [](int r, Agent& a) {
    const Comm w = a.World();
    if (r == 1 || r == 3) {
      const int members[] = {3, 1};
      absl::StatusOr<Comm> g = w.CreateGroup(members, 7);
      ASSERT_TRUE(g.ok()) << g.status();
      EXPECT_EQ(g->size(), 2);
      EXPECT_EQ(g->rank(), r == 3 ? 0 : 1);
      EXPECT_EQ(g->world_rank(0), 3);
      Ring(*g, 5);
    }
    const Comm d = w.Dup().value();
    ASSERT_TRUE(SameEverywhere(w, d)) << "rank " << r;
    Ring(d, 6);
  });
}

TEST(Comms, CreateGroupRefusesACallerNotListedAndARankListedTwice) {
  InProcess(2, kSingle, [](int r, Agent& a) {
    const Comm w = a.World();
    const int other[] = {1 - r};
    absl::StatusOr<Comm> g = w.CreateGroup(other, 0);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), HasSubstr("is not a member"));
    const int twice[] = {r, r};
    g = w.CreateGroup(twice, 0);
    EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), HasSubstr("twice"));
  });
}

TEST(Comms, JoinConnectsTwoGroupsLowerLeaderFirst) {
  InProcess(4, kSingle, [](int r, Agent& a) {
    const Comm w = a.World();
    // Groups {2, 3} (leader world rank 2) and {0, 1} (leader 0), each in its own order.
    absl::StatusOr<std::optional<Comm>> half = w.Split(r < 2 ? 1 : 0, -r);
    ASSERT_TRUE(half.ok() && half->has_value());
    const Comm& local = **half;
    const int leader = local.size() - 1;  // the group's lowest world rank, last by key
    absl::StatusOr<Comm::Joined> j = local.Join(leader, w, r < 2 ? 2 : 0, 9);
    ASSERT_TRUE(j.ok()) << j.status();
    EXPECT_EQ(j->remote_size, 2);
    EXPECT_EQ(j->local_offset, r < 2 ? 0 : 2);
    EXPECT_EQ(j->remote_offset, r < 2 ? 2 : 0);
    EXPECT_EQ(j->comm.rank(), j->local_offset + local.rank());
    // Each rank sends its world rank to the remote rank of its own local rank.
    const int out = r;
    int in = -1;
    Request got;
    const int peer = j->remote_offset + local.rank();
    ASSERT_TRUE(j->comm.Irecv(&in, sizeof(in), peer, 1, &got).ok());
    ASSERT_TRUE(j->comm.Send(&out, sizeof(out), peer, 1).ok());
    ASSERT_TRUE(got.Wait().ok());
    EXPECT_EQ(in, j->comm.world_rank(peer));
    ASSERT_TRUE(SameEverywhere(w, j->comm));
  });
}

// The collectives' schedule cache drops its least recently used entry per
// agent, so which it drops depends on what a rank ran on every
// communicator; a call rebuilt on one rank must still meet the schedule
// the others kept (the same tags).
TEST(Comms, ACallOneRanksCacheDroppedStillMeetsTheOthersKeptSchedule) {
  InProcess(2, kSingle, [](int r, Agent& a) {
    const Comm w = a.World();
    const Datatype i32 = Datatype::Basic(BasicType::kInt32);
    const Op sum(OpKind::kSum);
    int one = 1, total = 0;
    ASSERT_TRUE(Allreduce(w, &one, &total, 1, i32, sum).ok());
    absl::StatusOr<std::optional<Comm>> alone = w.Split(r, 0);
    ASSERT_TRUE(alone.ok() && alone->has_value());
    if (r == 0) {  // calls of 20 shapes on its own: the world's drops out of rank 0's cache
      for (int n = 1; n <= 20; ++n) {
        std::vector<int> x(static_cast<std::size_t>(n), 1), y(static_cast<std::size_t>(n));
        ASSERT_TRUE(Allreduce(**alone, x.data(), y.data(), n, i32, sum).ok());
      }
    }
    total = 0;
    ASSERT_TRUE(Allreduce(w, &one, &total, 1, i32, sum).ok());
    EXPECT_EQ(total, 2);
  });
}

}  // namespace
}  // namespace cartage::test
