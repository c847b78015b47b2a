// shm's rendezvous copies between two method instances in one process:
// where the pipelined copy goes, where CMA reads with one copy (an exchange,
// an oversubscribed job), how the receiver chooses between the two, and the
// chooser alone.
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
#include <string>
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

// A host whose receive is posted: it takes the first message that comes.
class PostedHost : public TestHost {
 public:
  car::Car* MatchIncoming(car::Envelope) override { return std::exchange(posted, nullptr); }
  car::Car* posted = nullptr;
};

// Rendezvous CMA thresholds. Rank 1 sends rank 0 a 96 KiB message, between
// CMA_MIN_EXCHANGE (64 KiB) and CMA_MIN (64 MiB). Alone, rank 0 answers CTS
// and waits for the pipelined copy. While rank 0's own rendezvous send to
// rank 1 waits for its answer (an exchange), rank 0 reads the message at once
// with process_vm_readv. Either way the bytes are the sender's.
class ShmCmaTest : public ::testing::Test {
 protected:
  static constexpr std::size_t kBytes = 96 * 1024;
  virtual ShmOptions Options() const { return ShmOptions(); }
  void SetUp() override {
    std::thread other([&] {
      InProcessExchange ex(&job_, 1);
      auto m = ShmMethod::Create(ex, &host_[1], Options());
      ASSERT_TRUE(m.ok()) << m.status();
      rank_[1] = std::move(*m);
    });
    InProcessExchange ex(&job_, 0);
    auto m = ShmMethod::Create(ex, &host_[0], Options());
    other.join();
    ASSERT_TRUE(m.ok()) << m.status();
    rank_[0] = std::move(*m);
    if (!rank_[0]->cma(1)) GTEST_SKIP() << "process_vm_readv does not work here";
    for (int r = 0; r < 2; ++r) {
      for (std::size_t i = 0; i < kBytes; ++i) out_[r][i] = static_cast<char>(i * 7 + 3 + r);
    }
  }
  // kBytes of `buf` to or from `peer` (tag 5), completing `done`.
  static car::CarSpec Spec(bool send, int peer, char* buf, base::Completion* done) {
    car::CarSpec s;
    s.kind = send ? car::CarKind::kSend : car::CarKind::kRecv;
    s.flags = send ? car::CarFlag::kSendData : car::CarFlag::kRecvData;
    s.envelope = {0, peer, 5};
    s.segment = car::Segment::Of(buf, kBytes, datatype::BasicType::kByte);
    s.counter = done;
    done->pending = 1;
    return s;
  }
  // A rendezvous send of out_[from] to the other rank.
  car::Car* Send(int from) {
    const int to = 1 - from;
    car::CarSpec s = Spec(true, to, out_[from].data(), &sent_[from]);
    s.vc = rank_[from]->VcOf(to);
    s.eager_limit = rank_[from]->eager_limit();
    car::Car* c = *host_[from].pool.Create(s);
    rank_[from]->Bind(*c, to);
    EXPECT_TRUE(car::SendMachine::Dispatch(*c, car::SendEvent::kPost).ok());
    EXPECT_EQ(car::SendMachine::StateOf(*c), car::SendState::kRtsSent);
    return c;
  }
  // Posts rank `at`'s receive into in_[at] (the matcher's part is PostedHost's).
  void PostRecv(int at) {
    const int from = 1 - at;
    vc_[at] = *rank_[at]->VcOf(from);
    vc_[at].post_recv = [](car::Car&, car::CarEvents&) {};
    car::CarSpec s = Spec(false, from, in_[at].data(), &got_[at]);
    s.vc = &vc_[at];
    car::Car* r = *host_[at].pool.Create(s);
    rank_[at]->Bind(*r, from);
    EXPECT_TRUE(car::RecvMachine::Dispatch(*r, car::RecvEvent::kPost).ok());
    host_[at].posted = r;
  }
  // Both ranks progress until `c` is done (at most 1000 rounds).
  void Drain(const base::Completion& c) {
    for (int i = 0; i < 1000 && !c.done(); ++i) {
      rank_[0]->Progress();
      rank_[1]->Progress();
    }
  }

  SharedJob job_;
  PostedHost host_[2];
  std::unique_ptr<ShmMethod> rank_[2];
  car::Vc vc_[2];
  std::vector<char> out_[2] = {std::vector<char>(kBytes), std::vector<char>(kBytes)};
  std::vector<char> in_[2] = {std::vector<char>(kBytes), std::vector<char>(kBytes)};
  base::Completion sent_[2], got_[2];
};

TEST_F(ShmCmaTest, OneWayGoesByThePipelinedCopy) {
  PostRecv(0);
  Send(1);
  rank_[0]->Progress();  // matches the RTS, answers CTS
  EXPECT_FALSE(got_[0].done()) << "below CMA_MIN a lone receive waits for the streamed DATA";
  Drain(got_[0]);
  ASSERT_TRUE(got_[0].done());
  EXPECT_TRUE(got_[0].status.ok()) << got_[0].status;
  EXPECT_EQ(in_[0], out_[1]);
}

TEST_F(ShmCmaTest, AnExchangeReadsWithOneCopyEachWay) {
  PostRecv(0);
  PostRecv(1);
  Send(0);
  Send(1);
  rank_[0]->Progress();  // rank 0's own RTS is out: it reads rank 1's message at once
  ASSERT_TRUE(got_[0].done()) << "with its own send waiting, rank 0 reads with CMA";
  EXPECT_TRUE(got_[0].status.ok()) << got_[0].status;
  EXPECT_EQ(in_[0], out_[1]);
  rank_[1]->Progress();  // the same for rank 1, and rank 0's CTS completes rank 1's send
  ASSERT_TRUE(got_[1].done()) << "rank 1's RTS was out too";
  EXPECT_EQ(in_[1], out_[0]);
  EXPECT_TRUE(sent_[1].done() && sent_[1].status.ok()) << sent_[1].status;
  rank_[0]->Progress();
  EXPECT_TRUE(sent_[0].done() && sent_[0].status.ok()) << sent_[0].status;
}

TEST_F(ShmCmaTest, AnAnsweredSendNoLongerMakesAnExchange) {
  // Rank 0's send is answered and done; a receive after it is one-way again.
  PostRecv(1);
  Send(0);
  Drain(sent_[0]);
  ASSERT_TRUE(sent_[0].done() && sent_[0].status.ok()) << sent_[0].status;
  Drain(got_[1]);
  EXPECT_EQ(in_[1], out_[0]);
  PostRecv(0);
  Send(1);
  rank_[0]->Progress();
  EXPECT_FALSE(got_[0].done()) << "no send of rank 0 waits any more: the pipelined copy";
  Drain(got_[0]);
  ASSERT_TRUE(got_[0].done());
  EXPECT_EQ(in_[0], out_[1]);
}

// A job that counts as oversubscribed (here by CARTAGE_OVERSUBSCRIBED, the
// override the agent honours too) reads from 64 KiB with CMA even one way:
// a pipelined copy would need the sender scheduled.
class ShmCmaOversubscribedTest : public ShmCmaTest {
 protected:
  void SetUp() override {
    ::setenv("CARTAGE_OVERSUBSCRIBED", "yes", 1);
    ShmCmaTest::SetUp();
    ::unsetenv("CARTAGE_OVERSUBSCRIBED");
  }
};

TEST_F(ShmCmaOversubscribedTest, OneWayReadsWithCmaToo) {
  PostRecv(0);
  Send(1);
  rank_[0]->Progress();
  ASSERT_TRUE(got_[0].done()) << "oversubscribed, a lone 96 KiB receive reads with CMA at once";
  EXPECT_TRUE(got_[0].status.ok()) << got_[0].status;
  EXPECT_EQ(in_[0], out_[1]);
}

// Between CMA_CHOOSE_MIN (here 64 KiB) and CMA_MIN, the receiver moves the
// first message from a sender by the pipelined copy and the second by CMA,
// timing both, then CMA unless the pipelined copy was clearly faster, now
// and then the other (CopyChooser). Every message arrives whole either way.
class ShmCmaChoiceTest : public ShmCmaTest {
 protected:
  ShmOptions Options() const override {
    ShmOptions o;
    o.cma_choose_min = 64 * 1024;
    return o;
  }
  // One message from rank 1 to rank 0; whether rank 0 read it with CMA
  // (done at its first progress) and its bytes are the sender's.
  bool OneMessage() {
    std::fill(in_[0].begin(), in_[0].end(), 0);
    PostRecv(0);
    Send(1);
    rank_[0]->Progress();
    const bool cma = got_[0].done();
    Drain(got_[0]);
    Drain(sent_[1]);
    EXPECT_TRUE(got_[0].done() && got_[0].status.ok()) << got_[0].status;
    EXPECT_TRUE(sent_[1].done() && sent_[1].status.ok()) << sent_[1].status;
    EXPECT_EQ(in_[0], out_[1]);
    return cma;
  }
};

TEST_F(ShmCmaChoiceTest, TriesBothWaysThenChooses) {
  const CopyChooser& ch = rank_[0]->chooser(1);
  EXPECT_FALSE(OneMessage()) << "nothing timed yet: the pipelined copy first";
  EXPECT_GT(ch.pipelined_ns_per_byte(), 0);
  EXPECT_EQ(ch.cma_ns_per_byte(), 0);
  EXPECT_TRUE(OneMessage()) << "then CMA, to time it";
  EXPECT_GT(ch.cma_ns_per_byte(), 0);
  // From here each message goes the way the timings favour, the other one
  // now and then: over 2 * kExplore messages both are used.
  int by_cma = 0;
  for (uint32_t k = 1; k <= 2 * CopyChooser::kExplore; ++k) by_cma += OneMessage();
  EXPECT_GT(by_cma, 0);
  EXPECT_LT(by_cma, static_cast<int>(2 * CopyChooser::kExplore));
  EXPECT_EQ(rank_[1]->chooser(0).pipelined_ns_per_byte(), 0) << "rank 1 received nothing";
}

// Message times a MiB: microseconds, as ns a byte.
constexpr uint64_t kMiB = 1 << 20;
double PerByte(double us_a_mib) { return us_a_mib * 1000.0 / kMiB; }
void Timed(CopyChooser& ch, bool cma, double us) { ch.Observe(cma, kMiB, static_cast<uint64_t>(us * 1000)); }

// The pipelined copy first, then CMA, each timed once; then the faster.
void TimeBoth(CopyChooser& ch, double pipelined_us, double cma_us) {
  ASSERT_FALSE(ch.Choose().cma) << "nothing timed: the pipelined copy first";
  Timed(ch, false, pipelined_us);
  ASSERT_TRUE(ch.Choose().cma) << "then CMA, to time it";
  Timed(ch, true, cma_us);
}

// The choice itself: the way in use counts the median of its last five
// times, so two slow messages do not turn the choice and three do, and
// the other way must be faster by more than kMargin.
TEST(CopyChooser, FollowsTheFasterWayAsSpeedsChange) {
  CopyChooser ch;
  TimeBoth(ch, 60, 120);
  EXPECT_FALSE(ch.Choose().cma) << "the pipelined copy is faster";
  for (int i = 0; i < 4; ++i) Timed(ch, false, 60);
  Timed(ch, false, 600);  // preempted
  Timed(ch, false, 600);  // and again
  EXPECT_DOUBLE_EQ(ch.pipelined_ns_per_byte(), PerByte(60));
  EXPECT_FALSE(ch.Choose().cma) << "two slow messages do not turn the choice";
  Timed(ch, false, 600);  // the vCPUs moved
  EXPECT_DOUBLE_EQ(ch.pipelined_ns_per_byte(), PerByte(600));
  EXPECT_TRUE(ch.Choose().cma) << "three do: CMA (120) is faster now";
  ch.Observe(/*cma=*/true, 0, 5);  // nothing moved: nothing learned
  EXPECT_DOUBLE_EQ(ch.cma_ns_per_byte(), PerByte(120));
}

// CMA unless the pipelined copy moved a byte faster by more than kMargin:
// a single copy, the sender's CPU free.
TEST(CopyChooser, ThePipelinedCopyOnlyWhereClearlyFaster) {
  CopyChooser ch;
  TimeBoth(ch, 95, 100);  // faster, by less than the margin
  EXPECT_TRUE(ch.Choose().cma) << "within the margin: CMA";
  // The pipelined copy is tried kExploreSoon messages after the choice.
  for (uint32_t k = 2; k < CopyChooser::kExploreSoon; ++k) ASSERT_TRUE(ch.Choose().cma) << k;
  for (uint32_t k = 0; k < CopyChooser::kBurst; ++k) {
    ASSERT_FALSE(ch.Choose().cma) << k;
    Timed(ch, false, 93);
  }
  EXPECT_DOUBLE_EQ(ch.pipelined_ns_per_byte(), PerByte(93));
  EXPECT_TRUE(ch.Choose().cma) << "still within the margin: CMA stays";
  // Tried again after twice as many messages, and now clearly faster.
  for (uint32_t k = 2; k < 2 * CopyChooser::kExploreSoon; ++k) ASSERT_TRUE(ch.Choose().cma) << k;
  EXPECT_FALSE(ch.Choose().cma);
  Timed(ch, false, 80);
  EXPECT_FALSE(ch.Choose().cma) << "faster by more than the margin: the pipelined copy";
  // In use now; CMA, tried, is taken back where it is slower by less than
  // the margin.
  for (int i = 0; i < 4; ++i) Timed(ch, false, 80);
  uint32_t pipelined = 1;  // the message above
  while (!ch.Choose().cma) {
    ASSERT_LT(pipelined, 100u) << "CMA never tried again";
    ++pipelined;
  }
  EXPECT_EQ(pipelined, CopyChooser::kExploreSoon - 1);
  Timed(ch, true, 86);
  EXPECT_TRUE(ch.Choose().cma) << "CMA (86) within the margin of the pipelined copy (80)";
}

// Each time the other way is tried and loses, the next try comes twice as
// many messages later, up to kExplore, or kExploreFar where it takes twice
// as long or more; a turn starts again at kExploreSoon.
// The messages the pipelined copy (60 µs a MiB) moves before each burst of
// CMA (`cma_us`), over `messages` choices.
std::vector<uint32_t> GapsBeforeCma(double cma_us, int messages) {
  CopyChooser ch;
  TimeBoth(ch, 60, cma_us);
  std::vector<uint32_t> gaps;
  uint32_t run = 0;
  for (int m = 0; m < messages; ++m) {
    if (!ch.Choose().cma) {
      ++run;
      Timed(ch, false, 60);
      continue;
    }
    gaps.push_back(run);
    run = 0;
    Timed(ch, true, cma_us);  // the burst's first message
    for (uint32_t k = 1; k < CopyChooser::kBurst; ++k) {
      EXPECT_TRUE(ch.Choose().cma);
      Timed(ch, true, cma_us);
    }
  }
  return gaps;
}

TEST(CopyChooser, TriesTheOtherWaySoonAfterATurnThenLessOften) {
  const uint32_t soon = CopyChooser::kExploreSoon;
  const uint32_t most = CopyChooser::kExplore;
  EXPECT_EQ(GapsBeforeCma(100, 1000),
            (std::vector<uint32_t>{soon - 1, 2 * soon - 1, 4 * soon - 1, 8 * soon - 1, most - 1, most - 1}));
  // Twice as slow: tried ever less often, down to once in kExploreFar.
  std::vector<uint32_t> far = GapsBeforeCma(120, 14000);
  ASSERT_EQ(far.size(), 10u);
  for (std::size_t i = 0; i < far.size(); ++i) {
    EXPECT_EQ(far[i], std::min<uint32_t>(soon << i, CopyChooser::kExploreFar) - 1) << i;
  }
}

// A turn made on a run of slow messages (a neighbour's burst of work) is
// undone as soon as the way it left is tried again and is the faster.
TEST(CopyChooser, AWrongTurnIsUndoneSoon) {
  CopyChooser ch;
  TimeBoth(ch, 95, 70);
  for (int i = 0; i < 4; ++i) Timed(ch, true, 70);
  for (int i = 0; i < 3; ++i) Timed(ch, true, 300);  // three slow ones
  ASSERT_FALSE(ch.Choose().cma) << "turned to the pipelined copy (95)";
  int pipelined = 1;
  Timed(ch, false, 95);
  while (!ch.Choose().cma) {
    ASSERT_LT(pipelined, 100) << "CMA never tried again";
    ++pipelined;
    Timed(ch, false, 95);
  }
  EXPECT_EQ(pipelined, static_cast<int>(CopyChooser::kExploreSoon) - 1);
  Timed(ch, true, 140);  // the first try is cold
  EXPECT_TRUE(ch.Choose().cma);
  Timed(ch, true, 70);  // warm: faster than the pipelined copy, by more than the margin
  EXPECT_DOUBLE_EQ(ch.cma_ns_per_byte(), PerByte(70));
  for (uint32_t k = 0; k < CopyChooser::kExploreSoon - 1; ++k) EXPECT_TRUE(ch.Choose().cma) << k;
}

// CMA in use is timed on one message in kTimeEvery; the pipelined copy in
// use, and the other way tried, on every one.
TEST(CopyChooser, TimesCmaInUseOnOneMessageInKTimeEvery) {
  CopyChooser ch;
  EXPECT_TRUE(ch.Choose().timed) << "the first of each way";
  Timed(ch, false, 100);
  EXPECT_TRUE(ch.Choose().timed);
  Timed(ch, true, 60);  // CMA in use
  std::string timed;
  for (uint32_t k = 1; k < CopyChooser::kExploreSoon + CopyChooser::kBurst; ++k) {
    const CopyChooser::Choice c = ch.Choose();
    timed += c.cma ? (c.timed ? 'C' : 'c') : (c.timed ? 'P' : 'p');
  }
  // The 8th message is timed, and the 16th starts a burst.
  static_assert(CopyChooser::kTimeEvery == 8 && CopyChooser::kExploreSoon == 16);
  EXPECT_EQ(timed, "cccccccCcccccccPPP");
  CopyChooser pipelined;
  TimeBoth(pipelined, 60, 100);
  for (int k = 0; k < 20; ++k) {
    const CopyChooser::Choice c = pipelined.Choose();
    EXPECT_TRUE(c.timed) << k << (c.cma ? " CMA" : " pipelined");
  }
}

// A way tried in a burst is judged by its last, warm time: the first try of
// CMA after a while pays for cold caches and page tables.
TEST(CopyChooser, AWayTriedInABurstIsJudgedByItsWarmTime) {
  CopyChooser ch;
  TimeBoth(ch, 60, 500);  // CMA cold
  for (uint32_t k = 1; k < CopyChooser::kExploreSoon; ++k) ASSERT_FALSE(ch.Choose().cma) << k;
  EXPECT_TRUE(ch.Choose().cma);
  Timed(ch, true, 500);  // cold again
  EXPECT_TRUE(ch.Choose().cma);
  Timed(ch, true, 40);  // warm
  EXPECT_DOUBLE_EQ(ch.cma_ns_per_byte(), PerByte(40));
  EXPECT_TRUE(ch.Choose().cma) << "warm, CMA is the faster";
}

// Pipelined messages from one sender stream one after another: in a window
// of them, each is timed from when the one before it landed, not from its
// CTS (which counts the wait behind the others too); one whose CTS went
// after that is timed from its CTS.
TEST(CopyChooser, APipelinedMessageThatWaitedIsTimedFromTheOneBeforeIt) {
  CopyChooser ch;
  ch.ObservePipelined(kMiB, /*cts_ns=*/1'000, /*now_ns=*/61'000);
  EXPECT_DOUBLE_EQ(ch.pipelined_ns_per_byte(), PerByte(60));
  ch.Observe(/*cma=*/true, kMiB, 100'000);
  EXPECT_FALSE(ch.Choose().cma) << "the pipelined copy (60) is faster";
  // Two more of the same window: their CTS went with the first one's.
  ch.ObservePipelined(kMiB, 1'000, 121'000);
  ch.ObservePipelined(kMiB, 1'000, 181'000);
  EXPECT_DOUBLE_EQ(ch.pipelined_ns_per_byte(), PerByte(60)) << "each streamed in 60, after waiting";
  EXPECT_FALSE(ch.Choose().cma);
  // Alone again, and slower: timed from its CTS.
  ch.ObservePipelined(kMiB, 500'000, 640'000);
  ch.ObservePipelined(kMiB, 700'000, 840'000);
  ch.ObservePipelined(kMiB, 900'000, 1'040'000);
  EXPECT_DOUBLE_EQ(ch.pipelined_ns_per_byte(), PerByte(140));
  EXPECT_TRUE(ch.Choose().cma) << "CMA (100) is faster now";
}

}  // namespace
}  // namespace cartage::methods::shm
