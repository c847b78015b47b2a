// The shm SPSC ring: order and exact bytes across wraps, full-ring back
// pressure, and the same under two threads and two processes; each with
// ordinary stores and with one-line records written by one direct store.
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "methods/shm/shm_ring.h"

namespace cartage::methods::shm {
namespace {

// Deterministic contents for message `seq` of length `len`.
void Fill(std::byte* p, uint64_t seq, std::size_t len) {
  for (std::size_t i = 0; i < len; ++i) p[i] = static_cast<std::byte>((seq * 31 + i * 7) & 0xff);
}
bool Check(const std::byte* p, uint64_t seq, std::size_t len) {
  for (std::size_t i = 0; i < len; ++i) {
    if (p[i] != static_cast<std::byte>((seq * 31 + i * 7) & 0xff)) return false;
  }
  return true;
}
std::size_t LenOf(uint64_t seq, std::size_t max) {
  std::mt19937_64 g(seq);
  // Mostly small, sometimes up to the maximum.
  return (g() % 8 == 0) ? g() % (max + 1) : g() % 96;
}

struct Mem {
  explicit Mem(std::size_t bytes) : size(bytes) {
    ptr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  }
  ~Mem() { munmap(ptr, size); }
  void* ptr;
  std::size_t size;
};

TEST(ShmRing, SmallMessageIsOneCacheLine) {
  EXPECT_EQ(internal::RecordBytes(8 + 24), 64u) << "8 bytes + a 24-byte match header";
  EXPECT_EQ(internal::RecordBytes(49), 128u);
  EXPECT_EQ(internal::RecordBytes(0), 64u);
}

// The parameter: whether the writer uses direct stores for one-line records.
class ShmRingTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam() && !DirectStoreSupported()) GTEST_SKIP() << "this CPU has no MOVDIR64B";
  }
  RingWriter Writer(RingShared* ring) const {
    RingWriter w(ring);
    w.set_direct(GetParam());
    return w;
  }
};
INSTANTIATE_TEST_SUITE_P(Stores, ShmRingTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "direct" : "ordinary"; });

TEST_P(ShmRingTest, OneLineRecordLandsWholeAtCommit) {
  Mem mem(RingShared::Footprint(4096));
  RingShared* ring = RingShared::Init(mem.ptr, 4096);
  RingWriter w = Writer(ring);
  RingReader r(ring);
  std::byte* p = w.Begin(40);
  ASSERT_NE(p, nullptr);
  // Direct: the payload is staged outside the ring until Commit; ordinary:
  // it is written in place, but not a record before the stamp.
  EXPECT_EQ(p == ring->data() + kRecordHeader, !GetParam());
  Fill(p, 5, 40);
  RingRecord rec;
  EXPECT_FALSE(r.HasRecord());
  EXPECT_FALSE(r.Peek(&rec));
  w.Commit(9);
  ASSERT_TRUE(r.Peek(&rec));
  EXPECT_EQ(rec.type, 9);
  ASSERT_EQ(rec.len, 40u);
  EXPECT_EQ(rec.payload, ring->data() + kRecordHeader);
  EXPECT_TRUE(Check(rec.payload, 5, 40));
  r.Pop();
  // A two-line record is written in place in both modes.
  p = w.Begin(100);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p, ring->data() + kLine + kRecordHeader);
  Fill(p, 6, 100);
  w.Commit(10);
  ASSERT_TRUE(r.Peek(&rec));
  ASSERT_EQ(rec.len, 100u);
  EXPECT_TRUE(Check(rec.payload, 6, 100));
}

// ShmMethod's sweep tests each ring by a probe (the next record's stamp
// word, the value it will hold): taken before a record is committed, it
// shows it (or the pad a wrap puts before it); it goes on showing it after
// the read, so the sweep refreshes it, and the refreshed one shows nothing.
TEST_P(ShmRingTest, ProbeShowsTheNextRecordUntilRefreshed) {
  Mem mem(RingShared::Footprint(4096));
  RingShared* ring = RingShared::Init(mem.ptr, 4096);
  RingWriter w = Writer(ring);
  RingReader r(ring);
  RingRecord rec;
  for (int i = 0; i < 100; ++i) {  // records of 2, 5 and 9 lines: several laps, wrapping with pads
    const std::atomic<uint64_t>* stamp = r.next_stamp();
    const uint64_t expected = r.next_expected();
    EXPECT_NE(stamp->load(), expected) << i;
    std::byte* p = w.Begin(100 + static_cast<std::size_t>(i % 3) * 200);
    ASSERT_NE(p, nullptr);
    Fill(p, i, 100);
    w.Commit(7);
    EXPECT_EQ(stamp->load(), expected) << "the probe taken before shows record " << i;
    ASSERT_TRUE(r.Peek(&rec));
    EXPECT_TRUE(Check(rec.payload, i, 100)) << i;
    r.Pop();
    EXPECT_EQ(stamp->load(), expected) << "a stale probe still shows record " << i;
    EXPECT_NE(r.next_stamp()->load(), r.next_expected()) << "a refreshed one shows none after " << i;
  }
}

TEST_P(ShmRingTest, FullRingPushesBackAndDrainsInOrder) {
  Mem mem(RingShared::Footprint(4096));
  RingShared* ring = RingShared::Init(mem.ptr, 4096);
  RingWriter w = Writer(ring);
  RingReader r(ring);
  EXPECT_EQ(w.max_payload(), 1024u - kRecordHeader);
  EXPECT_EQ(w.Begin(w.max_payload() + 1), nullptr) << "larger than a record may be";
  int sent = 0;
  while (std::byte* p = w.Begin(100)) {
    Fill(p, sent, 100);
    w.Commit(7);
    ++sent;
  }
  EXPECT_EQ(sent, 4096 / 128) << "the whole ring";
  RingRecord rec;
  for (int i = 0; i < sent; ++i) {
    ASSERT_TRUE(r.Peek(&rec));
    EXPECT_EQ(rec.type, 7);
    ASSERT_EQ(rec.len, 100u);
    EXPECT_TRUE(Check(rec.payload, i, 100));
    r.Pop();
  }
  EXPECT_FALSE(r.Peek(&rec));
  EXPECT_FALSE(r.HasRecord());
  EXPECT_NE(w.Begin(100), nullptr) << "room again once read";
}

TEST_P(ShmRingTest, WrapsWithPaddingSingleThreaded) {
  Mem mem(RingShared::Footprint(2048));
  RingShared* ring = RingShared::Init(mem.ptr, 2048);
  RingWriter w = Writer(ring);
  RingReader r(ring);
  RingRecord rec;
  for (uint64_t seq = 0; seq < 20000; ++seq) {
    const std::size_t len = LenOf(seq, w.max_payload());
    std::byte* p = w.Begin(len);
    ASSERT_NE(p, nullptr) << seq;
    Fill(p, seq, len);
    w.Commit(static_cast<uint16_t>(seq & 0xff));
    ASSERT_TRUE(r.Peek(&rec));
    ASSERT_EQ(rec.len, len);
    ASSERT_EQ(rec.type, seq & 0xff);
    ASSERT_TRUE(Check(rec.payload, seq, len)) << seq;
    r.Pop();
  }
}

// A writer that commits again without hearing from its consumer asks for the
// lines of the record after next, but never for lines the consumer has not
// released; one that alternates with its consumer asks for none.
TEST_P(ShmRingTest, AsksAheadOnlyWhenStreamingAndOnlyForReleasedLines) {
  Mem mem(RingShared::Footprint(8192));
  RingShared* ring = RingShared::Init(mem.ptr, 8192);
  RingWriter w = Writer(ring);
  RingReader r(ring);
  auto commit = [&](std::size_t len, uint64_t heard) {
    std::byte* p = w.Begin(len);
    EXPECT_NE(p, nullptr);
    if (p == nullptr) return std::size_t{999};
    Fill(p, len, len);
    w.Commit(1);
    return w.AfterCommit(heard);
  };
  EXPECT_EQ(commit(8, 0), 0u) << "the first record: nothing known yet";
  EXPECT_EQ(commit(8, 0), GetParam() ? 0u : 1u)
      << "again without hearing back: the line after next (none for a direct store)";
  EXPECT_EQ(commit(8, 64), 0u) << "heard back in between: alternating";
  EXPECT_EQ(commit(200, 64), 4u) << "a four-line record: four lines";
  // 24-line records, none of them read: capped while the record after next
  // lies in released lines (tail + 1536 + 1024 <= 8192); then nothing, as
  // the lines after it may still hold records to read.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(commit(1500, 64), kPrefetchLines) << i;
  EXPECT_EQ(commit(1500, 64), 0u) << "6592 + 1536 + 1024 > 8192";
  RingRecord rec;
  int read = 0;
  while (r.Peek(&rec)) {
    EXPECT_TRUE(Check(rec.payload, rec.len, rec.len)) << read;
    r.Pop();
    ++read;
  }
  EXPECT_EQ(read, 8);
}

// Producer and consumer run concurrently; every byte and the order checked.
// `auto_slow_ticks` >= 0: direct stores chosen per moment with that threshold.
// `window` > 0: RingWriter::set_window.
void Stress(RingShared* ring, uint64_t count, bool producer, bool direct, int64_t auto_slow_ticks = -1,
            std::size_t window = 0) {
  if (producer) {
    RingWriter w(ring);
    w.set_direct(direct);
    if (window > 0) w.set_window(window);
    if (auto_slow_ticks >= 0) w.set_direct_auto(static_cast<uint64_t>(auto_slow_ticks));
    for (uint64_t seq = 0; seq < count; ++seq) {
      const std::size_t len = LenOf(seq, w.max_payload());
      std::byte* p;
      while ((p = w.Begin(len)) == nullptr) std::this_thread::yield();
      Fill(p, seq, len);
      w.Commit(1);
      // Ordinary and direct writers stream (they ask ahead for lines); the
      // one choosing per moment hears back now and then, so that its
      // records mix streamed, direct and timed ordinary ones.
      (void)w.AfterCommit(auto_slow_ticks >= 0 ? seq / 3 : 0);
    }
  }
}
bool Consume(RingShared* ring, uint64_t count) {
  RingReader r(ring);
  RingRecord rec;
  const std::size_t max = ring->bytes / 4 - kRecordHeader;
  for (uint64_t seq = 0; seq < count; ++seq) {
    while (!r.Peek(&rec)) std::this_thread::yield();
    if (rec.len != LenOf(seq, max) || !Check(rec.payload, seq, rec.len)) return false;
    r.Pop();
  }
  return true;
}

TEST_P(ShmRingTest, TwoThreads) {
  Mem mem(RingShared::Footprint(8192));
  RingShared* ring = RingShared::Init(mem.ptr, 8192);
  constexpr uint64_t kCount = 200000;
  std::thread producer([&] { Stress(ring, kCount, true, GetParam()); });
  EXPECT_TRUE(Consume(ring, kCount));
  producer.join();
}

// Small records wrapping back early (their pads skipped without clearing
// the lines under them) mixed with large ones going on through the ring.
TEST_P(ShmRingTest, TwoThreadsWithWindow) {
  Mem mem(RingShared::Footprint(16384));
  RingShared* ring = RingShared::Init(mem.ptr, 16384);
  constexpr uint64_t kCount = 200000;
  std::thread producer([&] { Stress(ring, kCount, true, GetParam(), -1, 2048); });
  EXPECT_TRUE(Consume(ring, kCount));
  producer.join();
}

// Where each record starts in the record area (two-line records are written
// in place in both modes).
std::size_t Offset(RingShared* ring, const std::byte* payload) {
  return static_cast<std::size_t>(payload - ring->data()) - kRecordHeader;
}

// A 16 KiB ring with a 4 KiB window: records of up to 256 bytes stay in the
// window while the consumer keeps up, and use the whole ring while it does
// not; larger records always go on through the ring.
TEST_P(ShmRingTest, WindowKeepsSmallRecordsNearTheStart) {
  Mem mem(RingShared::Footprint(16384));
  RingShared* ring = RingShared::Init(mem.ptr, 16384);
  RingWriter w = Writer(ring);
  w.set_window(4096);
  RingReader r(ring);
  RingRecord rec;
  // Writes and reads back `count` records of `len` bytes in turn (the
  // consumer always drained before the next); returns the furthest start.
  auto alternate = [&](std::size_t len, uint64_t count) {
    std::size_t furthest = 0;
    for (uint64_t seq = 0; seq < count; ++seq) {
      std::byte* p = w.Begin(len);
      EXPECT_NE(p, nullptr) << seq;
      if (p == nullptr) break;
      furthest = std::max(furthest, Offset(ring, p));
      Fill(p, seq, len);
      w.Commit(3);
      EXPECT_TRUE(r.Peek(&rec) && rec.len == len && Check(rec.payload, seq, len)) << seq;
      r.Pop();
    }
    return furthest;
  };
  EXPECT_EQ(alternate(100, 1000), 4096u - 128u) << "no record starts past the window";

  // Unread records: the writer goes on through the rest, the whole ring.
  r.Peek(&rec);  // finds the ring empty and publishes how far it read
  int sent = 0;
  while (std::byte* p = w.Begin(100)) {
    Fill(p, 5000 + static_cast<uint64_t>(sent), 100);
    w.Commit(4);
    ++sent;
  }
  EXPECT_EQ(sent, 16384 / 128) << "the whole ring, past the window";
  for (int i = 0; i < sent; ++i) {
    ASSERT_TRUE(r.Peek(&rec)) << i;
    ASSERT_TRUE(Check(rec.payload, 5000 + static_cast<uint64_t>(i), 100)) << i;
    r.Pop();
  }
  EXPECT_FALSE(r.Peek(&rec));

  // Large records (1,000 bytes: past a sixteenth of the window) do not wrap early.
  EXPECT_EQ(alternate(1000, 64), 16384u - 1024u) << "through to the end of the area";
}

TEST_P(ShmRingTest, TwoProcesses) {
  Mem mem(RingShared::Footprint(16384));
  RingShared* ring = RingShared::Init(mem.ptr, 16384);
  constexpr uint64_t kCount = 200000;
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    Stress(ring, kCount, true, GetParam());
    _exit(0);
  }
  EXPECT_TRUE(Consume(ring, kCount));
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// Direct stores chosen per moment: while the timed samples are slow the
// writer goes direct, and it comes back once they are fast again.
TEST(ShmRingAuto, FollowsTheMeanOfItsSamples) {
  Mem mem(RingShared::Footprint(4096));
  RingWriter w(RingShared::Init(mem.ptr, 4096));
  w.set_direct_auto(1000);
  EXPECT_FALSE(w.direct_now()) << "ordinary stores until a sample says otherwise";
  // The mean moves a quarter of the way to each sample.
  w.NoteSample(5000);
  EXPECT_TRUE(w.direct_now()) << "mean 1250 > 1000";
  w.NoteSample(5000);  // 2188
  w.NoteSample(100);   // 1666
  w.NoteSample(100);   // 1275
  EXPECT_TRUE(w.direct_now()) << "two fast samples do not outweigh two slow ones";
  w.NoteSample(100);  // 982
  EXPECT_FALSE(w.direct_now()) << "fast again";
}

// Every kSampleEvery-th one-line record goes by ordinary stores, written in
// the ring (timed); the others by direct store once the samples are slow
// (threshold 0: always). Every record arrives whole and in order.
TEST(ShmRingAuto, TimesEverySampleWithOrdinaryStores) {
  if (!DirectStoreSupported()) GTEST_SKIP() << "this CPU has no MOVDIR64B";
  Mem mem(RingShared::Footprint(4096));
  RingShared* ring = RingShared::Init(mem.ptr, 4096);
  RingWriter w(ring);
  w.set_direct_auto(0);
  RingReader r(ring);
  RingRecord rec;
  for (uint32_t i = 1; i <= 3 * RingWriter::kSampleEvery; ++i) {
    std::byte* p = w.Begin(40);
    ASSERT_NE(p, nullptr);
    const bool in_ring = p >= ring->data() && p < ring->data() + 4096;
    const bool before_first_sample = i < RingWriter::kSampleEvery;
    EXPECT_EQ(in_ring, before_first_sample || i % RingWriter::kSampleEvery == 0) << i;
    Fill(p, i, 40);
    w.Commit(3);
    (void)w.AfterCommit(i);  // heard back every time: an exchange, not a stream
    ASSERT_TRUE(r.Peek(&rec)) << i;
    ASSERT_EQ(rec.len, 40u);
    EXPECT_TRUE(Check(rec.payload, i, 40)) << i;
    r.Pop();
  }
  EXPECT_TRUE(w.direct_now());
  // A stream (nothing heard in between) goes by ordinary stores.
  std::byte* p = w.Begin(40);
  ASSERT_NE(p, nullptr);
  Fill(p, 7, 40);
  w.Commit(3);
  (void)w.AfterCommit(3 * RingWriter::kSampleEvery);  // the same as last time
  p = w.Begin(40);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(p >= ring->data() && p < ring->data() + 4096) << "streamed: written in the ring";
  Fill(p, 8, 40);
  w.Commit(3);
  for (uint64_t seq : {7, 8}) {
    ASSERT_TRUE(r.Peek(&rec));
    EXPECT_TRUE(Check(rec.payload, seq, 40)) << seq;
    r.Pop();
  }
}

TEST(ShmRingAuto, TwoThreadsMixingDirectAndTimedOrdinaryStores) {
  if (!DirectStoreSupported()) GTEST_SKIP() << "this CPU has no MOVDIR64B";
  Mem mem(RingShared::Footprint(8192));
  RingShared* ring = RingShared::Init(mem.ptr, 8192);
  constexpr uint64_t kCount = 200000;
  std::thread producer([&] { Stress(ring, kCount, true, false, /*auto_slow_ticks=*/0); });
  EXPECT_TRUE(Consume(ring, kCount));
  producer.join();
}

}  // namespace
}  // namespace cartage::methods::shm
