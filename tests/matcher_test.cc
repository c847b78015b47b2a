// The matcher: FIFO per envelope, wildcard against specific by the counter
// (ties to the wildcard), rollover, contexts, and long unexpected queues.
#include <algorithm>
#include <vector>

#include "agent/matcher.h"
#include "car/car_pool.h"
#include "gtest/gtest.h"

namespace cartage::agent {
namespace {

using car::Car;
using car::CarKind;
using car::kAnySource;
using car::kAnyTag;

class MatcherTest : public ::testing::Test {
 protected:
  Car* Recv(int source, int tag, uint32_t context = 0) {
    car::CarSpec s;
    s.kind = CarKind::kRecv;
    s.flags = car::CarFlag::kRecvData;
    s.envelope = {context, source, tag};
    s.counter = &done_;
    s.vc = &vc_;
    return Keep(*pool_.Create(s));
  }
  Car* Message(int source, int tag, uint32_t context = 0) {
    car::CarSpec s;
    s.kind = CarKind::kUnexpected;
    s.flags = car::CarFlag::kRecvData;
    s.envelope = {context, source, tag};
    return Keep(*pool_.Create(s));
  }
  Car* Keep(Car* c) {
    cars_.push_back(c);
    return c;
  }
  // Unexpected messages in this arrival order: (tag 0..19) x (source 2, 0,
  // 1), then one from source 1 with tag 5 in context 9 (the last).
  std::vector<Car*> ArriveManyTags(Matcher& m) {
    std::vector<Car*> msgs;
    for (int tag = 0; tag < 20; ++tag) {
      for (int source : {2, 0, 1}) msgs.push_back(Message(source, tag));
    }
    msgs.push_back(Message(1, 5, /*context=*/9));
    for (Car* c : msgs) m.AddUnexpected(c);
    return msgs;
  }
  // Posts `n` receives from `source` with tags 0..n-1, then matches them
  // newest tag first (from source 1, or alternately 0 and 1 for ANY_SOURCE).
  void PostThenMatchNewestFirst(Matcher& m, int source, int n) {
    std::vector<Car*> recvs;
    for (int i = 0; i < n; ++i) {
      recvs.push_back(Recv(source, i));
      ASSERT_EQ(m.PostReceive(recvs.back()), nullptr);
    }
    EXPECT_EQ(m.posted(), static_cast<std::size_t>(n));
    for (int i = n - 1; i >= 0; --i) {
      ASSERT_EQ(m.MatchIncoming({0, source == kAnySource ? i % 2 : source, i}), recvs[static_cast<std::size_t>(i)]);
    }
    EXPECT_EQ(m.posted(), 0u);
  }
  void TearDown() override {
    for (Car* c : cars_) pool_.Release(c);
  }
  car::CarPool pool_{{}};
  base::Completion done_;
  const car::Vc vc_{.name = "test"};
  std::vector<Car*> cars_;
};

// The copy a method passes the host (by value) carries every field as it
// was, the largest and the negative ones too (the rank is packed into the
// first word beside the context id).
TEST(EnvelopeTest, AssembledCopyKeepsEveryField) {
  for (const car::Envelope e : {car::Envelope{0, 0, 0}, car::Envelope{7, 3, 5}, car::Envelope{0xffffffffu, -1, -1},
                                car::Envelope{1u << 31, 0x7fffffff, 0x7ffffffe}}) {
    const car::Envelope a = e.Assembled();
    EXPECT_EQ(a.context_id, e.context_id);
    EXPECT_EQ(a.rank, e.rank);
    EXPECT_EQ(a.tag, e.tag);
  }
}

TEST_F(MatcherTest, SameEnvelopeMatchesInPostingOrder) {
  Matcher m(4);
  Car* a = Recv(1, 5);
  Car* b = Recv(1, 5);
  EXPECT_EQ(m.PostReceive(a), nullptr);
  EXPECT_EQ(m.PostReceive(b), nullptr);
  EXPECT_EQ(m.posted(), 2u);
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), a);
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), b);
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), nullptr);
}

TEST_F(MatcherTest, TagsAndContextsSeparate) {
  Matcher m(2);
  Car* t1 = Recv(0, 1);
  Car* t2 = Recv(0, 2);
  Car* other_ctx = Recv(0, 1, /*context=*/9);
  for (Car* c : {t1, t2, other_ctx}) m.PostReceive(c);
  EXPECT_EQ(m.MatchIncoming({0, 0, 2}), t2);
  EXPECT_EQ(m.MatchIncoming({9, 0, 1}), other_ctx);
  EXPECT_EQ(m.MatchIncoming({0, 0, 1}), t1);
  EXPECT_EQ(m.MatchIncoming({5, 0, 1}), nullptr);
}

TEST_F(MatcherTest, EarlierPostedWinsBetweenSpecificAndWildcard) {
  Matcher m(4);
  Car* specific = Recv(2, 7);
  Car* wild = Recv(kAnySource, 7);
  m.PostReceive(specific);
  m.PostReceive(wild);
  EXPECT_EQ(m.MatchIncoming({0, 2, 7}), specific) << "posted first";
  EXPECT_EQ(m.MatchIncoming({0, 2, 7}), wild);

  Car* wild2 = Recv(kAnySource, kAnyTag);
  Car* specific2 = Recv(2, 7);
  m.PostReceive(wild2);
  m.PostReceive(specific2);  // same counter value as wild2: a tie
  EXPECT_EQ(m.MatchIncoming({0, 2, 7}), wild2) << "ties go to the wildcard";
  EXPECT_EQ(m.MatchIncoming({0, 2, 7}), specific2);
}

TEST_F(MatcherTest, CounterRolloverKeepsTheOrder) {
  Matcher m(2, /*first_stamp=*/0xfffffff0u);
  std::vector<Car*> order;
  for (int i = 0; i < 64; ++i) {
    Car* r = (i % 3 == 0) ? Recv(kAnySource, 1) : Recv(1, 1);
    m.PostReceive(r);
    order.push_back(r);
  }
  // Posting order survives the wrap of the 32-bit counter (22 wildcards take
  // it past 2^32). A specific receive posted after a wildcard carries the same
  // stamp; the tie goes to the wildcard, which was indeed posted first.
  std::vector<Car*> got;
  for (int i = 0; i < 64; ++i) got.push_back(m.MatchIncoming({0, 1, 1}));
  EXPECT_EQ(got, order);
  EXPECT_TRUE(Matcher::Before(0xfffffffeu, 3u));
  EXPECT_FALSE(Matcher::Before(3u, 0xfffffffeu));
}

TEST_F(MatcherTest, UnexpectedOldestFirstAndWildcards) {
  Matcher m(4);
  Car* m1 = Message(1, 4);
  Car* m2 = Message(3, 4);
  Car* m3 = Message(1, 9);
  for (Car* c : {m1, m2, m3}) m.AddUnexpected(c);
  EXPECT_EQ(m.PeekUnexpected({0, kAnySource, 4}), m1);
  EXPECT_EQ(m.PostReceive(Recv(3, 4)), m2);
  EXPECT_EQ(m.PostReceive(Recv(kAnySource, kAnyTag)), m1);
  EXPECT_EQ(m.PostReceive(Recv(1, kAnyTag)), m3);
  EXPECT_EQ(m.unexpected(), 0u);
  EXPECT_EQ(m.posted(), 0u);
}

// Compacted messages keep their place in arrival order: a receive, specific
// or wildcard, takes the older of the oldest CAR and the oldest record, and
// one that passes no `compact` never sees the records.
TEST_F(MatcherTest, CompactMessagesKeepTheirPlaceInArrivalOrder) {
  Matcher m(4);
  Car* a = Message(1, 4);
  Car* b = Message(1, 4);
  Car* c = Message(2, 7);
  Car* d = Message(1, 4);
  for (Car* x : {a, b, c, d}) m.AddUnexpected(x);
  CompactMessage rb, rc;
  std::vector<Car*> gone = m.Compact([&](Car& x) -> CompactMessage* {
    CompactMessage* r = &x == b ? &rb : &x == c ? &rc : nullptr;
    if (r != nullptr) r->envelope = x.envelope();
    return r;
  });
  std::sort(gone.begin(), gone.end());
  std::vector<Car*> want = {b, c};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(gone, want);
  EXPECT_EQ(m.unexpected(), 2u);
  EXPECT_EQ(m.compact(), 2u);
  EXPECT_EQ(m.PeekUnexpected({0, kAnySource, kAnyTag}), a);
  EXPECT_EQ(m.PeekCompact({0, kAnySource, kAnyTag}), &rb);
  EXPECT_EQ(m.PeekCompact({0, 2, 7}), &rc);
  CompactMessage* got = nullptr;
  EXPECT_EQ(m.PostReceive(Recv(1, 4), &got), a);  // older than b's record
  EXPECT_EQ(got, nullptr);
  EXPECT_EQ(m.PostReceive(Recv(1, 4), &got), nullptr);
  EXPECT_EQ(got, &rb);
  got = nullptr;
  EXPECT_EQ(m.PostReceive(Recv(kAnySource, kAnyTag), &got), nullptr);  // c came before d
  EXPECT_EQ(got, &rc);
  got = nullptr;
  EXPECT_EQ(m.PostReceive(Recv(kAnySource, 4), &got), d);
  EXPECT_EQ(got, nullptr);
  EXPECT_EQ(m.compact(), 0u);
  EXPECT_EQ(m.unexpected(), 0u);
  EXPECT_EQ(m.posted(), 0u);
  // A compacted message older than a CAR of another envelope, taken by a
  // receive that does not look at records: posted, the record untouched.
  Car* e = Message(3, 1);
  m.AddUnexpected(e);
  CompactMessage re;
  (void)m.Compact([&](Car& x) -> CompactMessage* {
    re.envelope = x.envelope();
    return &re;
  });
  EXPECT_EQ(m.PostReceive(Recv(3, 1)), nullptr);
  EXPECT_EQ(m.posted(), 1u);
  EXPECT_EQ(m.compact(), 1u);
  std::vector<CompactMessage*> left;
  m.TakeAllCompact(&left);
  EXPECT_EQ(left, std::vector<CompactMessage*>{&re});
}

// More (source, tag) buckets than ranks: an ANY_SOURCE receive for one tag
// looks the tag up per source; it must still take the oldest arrival, stay
// in its context, and leave other tags alone.
TEST_F(MatcherTest, AnySourceOneTagAmongManyBucketsTakesTheOldest) {
  Matcher m(3);
  std::vector<Car*> msgs = ArriveManyTags(m);
  Car* other_ctx = msgs.back();
  msgs.pop_back();
  EXPECT_EQ(m.PeekUnexpected({9, kAnySource, 5}), other_ctx);
  EXPECT_EQ(m.PeekUnexpected({0, kAnySource, 20}), nullptr);
  for (int tag = 19; tag >= 0; --tag) {
    // Three receives per tag take that tag's three messages in arrival order.
    for (int k = 0; k < 3; ++k) ASSERT_EQ(m.PostReceive(Recv(kAnySource, tag)), msgs[3 * tag + k]) << tag;
  }
  EXPECT_EQ(m.PostReceive(Recv(kAnySource, 5, /*context=*/9)), other_ctx);
  EXPECT_EQ(m.unexpected(), 0u);
  EXPECT_EQ(m.posted(), 0u);
}

// The same for compacted records: more record buckets than ranks, and an
// ANY_SOURCE receive for one tag takes the oldest record of that tag from
// any source, in its own context (looked up per source, not walked).
TEST_F(MatcherTest, AnySourceOneTagAmongManyRecordBucketsTakesTheOldest) {
  Matcher m(3);
  const std::vector<Car*> msgs = ArriveManyTags(m);
  std::vector<CompactMessage> records(msgs.size());
  auto record_of = [&](const Car& x) { return &records[std::find(msgs.begin(), msgs.end(), &x) - msgs.begin()]; };
  EXPECT_EQ(m.Compact([&](Car& x) -> CompactMessage* {
              CompactMessage* r = record_of(x);
              r->envelope = x.envelope();
              return r;
            }).size(),
            msgs.size());
  EXPECT_EQ(m.compact(), msgs.size());
  EXPECT_EQ(m.PeekCompact({9, kAnySource, 5}), &records.back());
  EXPECT_EQ(m.PeekCompact({0, kAnySource, 20}), nullptr);
  for (int tag = 19; tag >= 0; --tag) {
    for (int k = 0; k < 3; ++k) {
      CompactMessage* got = nullptr;
      ASSERT_EQ(m.PostReceive(Recv(kAnySource, tag), &got), nullptr) << tag;
      ASSERT_EQ(got, &records[static_cast<std::size_t>(3 * tag + k)]) << tag << " " << k;
    }
  }
  CompactMessage* got = nullptr;
  EXPECT_EQ(m.PostReceive(Recv(kAnySource, 5, /*context=*/9), &got), nullptr);
  EXPECT_EQ(got, &records.back());
  EXPECT_EQ(m.compact(), 0u);
  EXPECT_EQ(m.posted(), 0u);
}

// Unexpected buckets stay when they empty (a stream of messages reuses one):
// every kind of lookup must pass over the empty ones, and a burst of many
// distinct tags is swept away once a new message arrives.
TEST_F(MatcherTest, EmptiedUnexpectedBucketsAreSkippedAndSwept) {
  Matcher m(2);
  for (int tag = 0; tag < 8; ++tag) {  // more buckets than ranks: ANY_SOURCE looks up per source
    m.AddUnexpected(Message(0, tag));
    ASSERT_NE(m.PostReceive(Recv(0, tag)), nullptr);
  }
  EXPECT_EQ(m.unexpected(), 0u);
  Car* from1 = Message(1, 3);
  Car* from0 = Message(0, 5);
  m.AddUnexpected(from1);
  m.AddUnexpected(from0);
  EXPECT_EQ(m.PeekUnexpected({0, 0, 3}), nullptr) << "source 0's tag 3 bucket is empty";
  EXPECT_EQ(m.PostReceive(Recv(kAnySource, 3)), from1);
  EXPECT_EQ(m.PostReceive(Recv(0, kAnyTag)), from0);
  Car* again = Message(0, 3);
  m.AddUnexpected(again);
  EXPECT_EQ(m.PostReceive(Recv(kAnySource, kAnyTag)), again);
  EXPECT_EQ(m.PostReceive(Recv(0, 3)), nullptr) << "nothing left: posted";
  EXPECT_EQ(m.MatchIncoming({0, 0, 3}), cars_.back());
  EXPECT_EQ(m.unexpected(), 0u);
  EXPECT_EQ(m.posted(), 0u);
  // A burst over 1025 tags, each matched: its emptied buckets are kept up to
  // that point, swept on the next arrival, and the store still finds what waits.
  Matcher burst(2);
  for (int tag = 0; tag < 1025; ++tag) {
    burst.AddUnexpected(Message(1, tag));
    ASSERT_NE(burst.PostReceive(Recv(1, tag)), nullptr);
  }
  EXPECT_EQ(burst.unexpected_buckets(), 1025u);
  Car* late = Message(1, 42);
  burst.AddUnexpected(late);
  EXPECT_EQ(burst.unexpected_buckets(), 1u) << "the burst's empty buckets were swept";
  EXPECT_EQ(burst.PostReceive(Recv(kAnySource, kAnyTag)), late);
  EXPECT_EQ(burst.unexpected(), 0u);
}

TEST_F(MatcherTest, HundredThousandUnexpectedMatchedInReverse) {
  Matcher m(2);
  constexpr int kN = 100000;
  std::vector<Car*> msgs;
  for (int i = 0; i < kN; ++i) {
    msgs.push_back(Message(1, i));
    m.AddUnexpected(msgs.back());
  }
  for (int i = kN - 1; i >= 0; --i) ASSERT_EQ(m.PostReceive(Recv(1, i)), msgs[i]);
  EXPECT_EQ(m.unexpected(), 0u);
}

// From one source, a receive for any tag and one for the message's tag: the
// one posted first matches first, whichever kind it is; contexts stay apart.
TEST_F(MatcherTest, AnyTagAndExactTagFromOneSourceInPostingOrder) {
  Matcher m(3);
  Car* loose = Recv(1, kAnyTag);
  Car* exact = Recv(1, 5);
  Car* exact2 = Recv(1, 5);
  Car* loose2 = Recv(1, kAnyTag);
  Car* other_ctx = Recv(1, kAnyTag, /*context=*/9);
  for (Car* c : {loose, exact, exact2, loose2, other_ctx}) EXPECT_EQ(m.PostReceive(c), nullptr);
  EXPECT_EQ(m.posted(), 5u);
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), loose);
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), exact);
  EXPECT_EQ(m.MatchIncoming({0, 1, 6}), loose2) << "the exact receives are for tag 5";
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), exact2);
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), nullptr);
  EXPECT_EQ(m.MatchIncoming({0, 2, 5}), nullptr) << "another source";
  EXPECT_EQ(m.MatchIncoming({9, 1, 77}), other_ctx);
  EXPECT_EQ(m.posted(), 0u);
}

// A long posted queue matched newest tag first (bench/compare's
// match_posted), then many distinct tags posted and matched one at a time,
// which sweeps the emptied buckets: every receive is found, none twice.
TEST_F(MatcherTest, HundredThousandPostedMatchedInReverseThenManyBuckets) {
  Matcher m(2);
  constexpr int kN = 100000;
  PostThenMatchNewestFirst(m, 1, kN);
  for (int i = 0; i < 5000; ++i) {
    Car* r = Recv(1, kN + i);
    ASSERT_EQ(m.PostReceive(r), nullptr);
    ASSERT_EQ(m.MatchIncoming({0, 1, kN + i - 1}), nullptr);
    ASSERT_EQ(m.MatchIncoming({0, 1, kN + i}), r);
  }
  Car* last = Recv(1, 3);
  m.PostReceive(last);
  EXPECT_TRUE(m.RemovePosted(last));
  EXPECT_FALSE(m.RemovePosted(last));
  EXPECT_EQ(m.posted(), 0u);
}

// ANY_SOURCE receives for one tag are bucketed by (context, tag): an arrival
// still takes the earliest posted among them, the any-tag wildcards and the
// receives naming the source, and a cancel finds them.
TEST_F(MatcherTest, AnySourceReceivesForOneTagKeepPostingOrderWithTheOtherKinds) {
  Matcher m(3);
  Car* t5a = Recv(kAnySource, 5);
  Car* named = Recv(1, 5);
  Car* any = Recv(kAnySource, kAnyTag);
  Car* t5b = Recv(kAnySource, 5);
  Car* t6 = Recv(kAnySource, 6);
  Car* other = Recv(kAnySource, 5, /*context=*/9);
  Car* cancelled = Recv(kAnySource, 7);
  for (Car* r : {t5a, named, any, t5b, t6, other, cancelled}) ASSERT_EQ(m.PostReceive(r), nullptr);
  EXPECT_TRUE(m.RemovePosted(cancelled));
  EXPECT_FALSE(m.RemovePosted(cancelled));
  EXPECT_EQ(m.posted(), 6u);
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), t5a);
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), named);
  EXPECT_EQ(m.MatchIncoming({0, 0, 5}), any);
  EXPECT_EQ(m.MatchIncoming({0, 0, 5}), t5b);
  EXPECT_EQ(m.MatchIncoming({0, 0, 5}), nullptr);
  EXPECT_EQ(m.MatchIncoming({0, 2, 7}), nullptr) << "cancelled";
  EXPECT_EQ(m.MatchIncoming({9, 2, 5}), other);
  EXPECT_EQ(m.MatchIncoming({0, 1, 6}), t6);
  EXPECT_EQ(m.posted(), 0u);
}

// A hundred thousand ANY_SOURCE receives, one tag each, matched newest
// first: one lookup per arrival (a walk over them would be quadratic).
TEST_F(MatcherTest, HundredThousandAnySourcePostedMatchedInReverse) {
  Matcher m(2);
  PostThenMatchNewestFirst(m, kAnySource, 100000);
}

// The matcher remembers the bucket it last found per source; what erases buckets
// (the sweep of emptied ones, a dead peer) must make it forget, or a later
// receive goes into an erased bucket that no other lookup finds.
TEST_F(MatcherTest, TheLastBucketLookedUpIsForgottenWhenBucketsAreErased) {
  Matcher m(3);
  Car* a = Recv(1, 5);
  Car* b = Recv(1, 6);
  Car* c = Recv(1, 5);
  for (Car* x : {a, b, c}) ASSERT_EQ(m.PostReceive(x), nullptr);
  EXPECT_EQ(m.MatchIncoming({0, 1, 6}), b);  // between two lookups of (1, 5)
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), a);
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), c);
  // One receive stays posted (so that a match looks its bucket up), 1,022
  // more buckets are emptied (1,025 in all: none swept yet), (1, 5) is
  // remembered again, then a receive for (1, 5): the emptied buckets, (1, 5)
  // with them, are swept before it is queued.
  Car* stays = Recv(0, 9);
  ASSERT_EQ(m.PostReceive(stays), nullptr);
  for (int tag = 100; tag < 1122; ++tag) {
    Car* r = Recv(2, tag);
    ASSERT_EQ(m.PostReceive(r), nullptr);
    ASSERT_EQ(m.MatchIncoming({0, 2, tag}), r);
  }
  ASSERT_EQ(m.MatchIncoming({0, 1, 5}), nullptr);
  Car* d = Recv(1, 5);
  ASSERT_EQ(m.PostReceive(d), nullptr);
  EXPECT_EQ(m.posted_buckets(), 2u) << "swept, then (1, 5) made anew";
  Car* other = Recv(2, 1);
  ASSERT_EQ(m.PostReceive(other), nullptr);  // another bucket looked up in between
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), d);
  EXPECT_EQ(m.MatchIncoming({0, 2, 1}), other);
  // A dead peer's buckets go too.
  Car* e = Recv(1, 5);
  ASSERT_EQ(m.PostReceive(e), nullptr);
  std::vector<Car*> posted, unexpected;
  m.TakeAllFrom(1, &posted, &unexpected);
  EXPECT_EQ(posted, std::vector<Car*>{e});
  Car* f = Recv(1, 5);
  Car* g = Recv(2, 2);
  ASSERT_EQ(m.PostReceive(f), nullptr);
  ASSERT_EQ(m.PostReceive(g), nullptr);
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), f);
  EXPECT_EQ(m.MatchIncoming({0, 2, 2}), g);
  EXPECT_EQ(m.MatchIncoming({0, 0, 9}), stays);
  EXPECT_EQ(m.posted(), 0u);
}

// The matcher remembers, per source, the bucket it last found; a new bucket
// for another source may move every bucket (the map grows), so the insert
// must make it forget, or a later receive or message from the first source
// goes where no walk over the buckets (a dead peer's) finds it.
TEST_F(MatcherTest, BucketsRememberedPerSourceAreForgottenWhenTheMapGrows) {
  Matcher m(3);
  Car* a = Recv(1, 5);
  ASSERT_EQ(m.PostReceive(a), nullptr);
  EXPECT_EQ(m.MatchIncoming({0, 1, 5}), a);  // (1, 5) remembered, now empty
  m.AddUnexpected(Message(1, 5));
  ASSERT_NE(m.PostReceive(Recv(1, 5)), nullptr);  // the unexpected (1, 5) too
  std::vector<Car*> from2;
  for (int tag = 0; tag < 300; ++tag) {  // grows both maps many times over
    from2.push_back(Recv(2, tag));
    ASSERT_EQ(m.PostReceive(from2.back()), nullptr);
    m.AddUnexpected(Message(2, 1000 + tag));
  }
  Car* b = Recv(1, 5);
  ASSERT_EQ(m.PostReceive(b), nullptr);
  Car* again = Message(1, 5);
  m.AddUnexpected(again);
  Car* late = Message(1, 6);
  m.AddUnexpected(late);
  EXPECT_EQ(m.posted_buckets(), 301u);
  EXPECT_EQ(m.unexpected_buckets(), 302u);
  std::vector<Car*> posted, unexpected;
  m.TakeAllFrom(1, &posted, &unexpected);
  EXPECT_EQ(posted, std::vector<Car*>{b});
  EXPECT_EQ(unexpected.size(), 2u);
  EXPECT_NE(std::find(unexpected.begin(), unexpected.end(), again), unexpected.end());
  EXPECT_NE(std::find(unexpected.begin(), unexpected.end(), late), unexpected.end());
  for (int tag = 299; tag >= 0; --tag) ASSERT_EQ(m.MatchIncoming({0, 2, tag}), from2[tag]);
  EXPECT_EQ(m.posted(), 0u);
  EXPECT_EQ(m.unexpected(), 300u);
}

TEST_F(MatcherTest, DeadPeersReceivesComeBackInPostingOrder) {
  Matcher m(3);
  Car* a = Recv(2, 4);
  Car* b = Recv(2, kAnyTag);
  Car* c = Recv(2, 1);
  Car* d = Recv(2, 4);
  Car* keep = Recv(1, 4);
  for (Car* x : {a, b, c, d, keep}) m.PostReceive(x);
  std::vector<Car*> posted, unexpected;
  m.TakeAllFrom(2, &posted, &unexpected);
  EXPECT_EQ(posted, (std::vector<Car*>{a, b, c, d}));
  EXPECT_EQ(m.posted(), 1u);
  EXPECT_EQ(m.MatchIncoming({0, 2, 4}), nullptr);
  EXPECT_EQ(m.MatchIncoming({0, 1, 4}), keep);
}

TEST_F(MatcherTest, CancelAndDeadPeer) {
  Matcher m(3);
  Car* r = Recv(1, 1);
  Car* w = Recv(kAnySource, 1);
  m.PostReceive(r);
  m.PostReceive(w);
  EXPECT_TRUE(m.RemovePosted(r));
  EXPECT_FALSE(m.RemovePosted(r));
  Car* r2 = Recv(2, 1);
  m.PostReceive(r2);
  Car* u = Message(2, 8);
  m.AddUnexpected(u);
  std::vector<Car*> posted, unexpected;
  m.TakeAllFrom(2, &posted, &unexpected);
  EXPECT_EQ(posted, std::vector<Car*>{r2});
  EXPECT_EQ(unexpected, std::vector<Car*>{u});
  EXPECT_EQ(m.posted(), 1u) << "the wildcard receive stays";
}

}  // namespace
}  // namespace cartage::agent
