// The shm method against a peer that writes nonsense: two method instances
// (ranks 0 and 1) in one process share a real segment; the test writes
// forged records into rank 1's ring to rank 0. Every one must end in a clear
// kDataLoss naming the peer, never a crash (ASan and UBSan watch the fuzz).
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "car/car_pool.h"
#include "car/recv_fsm.h"
#include "car/send_fsm.h"
#include "fsm/trace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "methods/shm/shm_method.h"
#include "methods/shm/shm_wire.h"
#include "tests/in_process_job.h"

namespace cartage::methods::shm {
namespace {

using ::testing::HasSubstr;

// A host that may hold envelopes back (MethodHost::Holding, when `holding`
// is set before the method is made) and matches the receives posted with it
// by tag.
class HoldingHost : public TagMatchingHost {
 public:
  const HoldControl* Holding() const override { return holding ? &hold : nullptr; }
  bool holding = false;
  HoldControl hold;
};

class ShmMethodTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }

  // A fresh pair of ranks with their own segment.
  void Start() {
    forged_.clear();
    rank0_.reset();
    rank1_.reset();
    job_ = std::make_unique<SharedJob>();
    ShmOptions options;
    std::thread other([&] {
      InProcessExchange ex(job_.get(), 1);
      auto m = ShmMethod::Create(ex, &host1_, options);
      ASSERT_TRUE(m.ok()) << m.status();
      rank1_ = std::move(*m);
    });
    InProcessExchange ex(job_.get(), 0);
    auto m = ShmMethod::Create(ex, &host0_, options);
    other.join();
    ASSERT_TRUE(m.ok()) << m.status();
    rank0_ = std::move(*m);
  }

  // The same writer across calls (so records follow each other in the ring).
  RingWriter& Writer() {
    if (forged_.empty()) forged_.emplace_back(rank1_->segment().ring(1, 0));
    return forged_.front();
  }
  void Append(uint16_t type, const void* bytes, std::size_t len) {
    std::byte* p = Writer().Begin(len);
    ASSERT_NE(p, nullptr);
    if (len > 0) std::memcpy(p, bytes, len);
    Writer().Commit(type);
  }

  // A synchronous send from rank 0 to rank 1 that waits for its ACK.
  car::Car* SyncSend(bool expect_waiting = true) {
    car::CarSpec s;
    s.kind = car::CarKind::kSend;
    s.flags = car::CarFlag::kSendData;
    s.envelope = {0, 1, 3};
    s.segment = car::Segment::Of(payload_, sizeof(payload_), datatype::BasicType::kByte);
    s.counter = &done_;
    s.vc = rank0_->VcOf(1);  // the VC's operations: swapped when it fails
    s.eager_limit = 8192;
    s.synchronous = true;
    done_.pending = 1;
    car::Car* c = *host0_.pool.Create(s);
    rank0_->Bind(*c, 1);
    EXPECT_TRUE(car::SendMachine::Dispatch(*c, car::SendEvent::kPost).ok());
    if (expect_waiting) {
      EXPECT_EQ(car::SendMachine::StateOf(*c), car::SendState::kWaitAck);
    }
    return c;
  }

  // A posted eager send of 4 KiB from rank 0 to rank 1 with `tag`; its
  // completion is added to `done`.
  car::Car* EagerBlock(int tag, std::vector<std::unique_ptr<base::Completion>>* done) {
    static char block[4096];
    done->push_back(std::make_unique<base::Completion>());
    done->back()->pending = 1;
    car::CarSpec s;
    s.kind = car::CarKind::kSend;
    s.flags = car::CarFlag::kSendData;
    s.envelope = {0, 1, tag};
    s.segment = car::Segment::Of(block, sizeof(block), datatype::BasicType::kByte);
    s.counter = done->back().get();
    s.vc = rank0_->VcOf(1);
    s.eager_limit = 8192;
    car::Car* c = *host0_.pool.Create(s);
    rank0_->Bind(*c, 1);
    EXPECT_TRUE(car::SendMachine::Dispatch(*c, car::SendEvent::kPost).ok());
    return c;
  }

  std::unique_ptr<SharedJob> job_;
  HoldingHost host0_, host1_;
  std::unique_ptr<ShmMethod> rank0_, rank1_;
  std::vector<RingWriter> forged_;
  char payload_[16] = "sixteen bytes!!";
  base::Completion done_;
};

// Whether each page that [p, p + bytes) touches is in memory (mincore).
std::vector<bool> ResidentPages(const void* p, std::size_t bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<uintptr_t>(p);
  const uintptr_t begin = first / page * page;
  const uintptr_t end = (first + bytes + page - 1) / page * page;
  std::vector<unsigned char> in((end - begin) / page);
  EXPECT_EQ(::mincore(reinterpret_cast<void*>(begin), end - begin, in.data()), 0) << std::strerror(errno);
  std::vector<bool> resident(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) resident[i] = (in[i] & 1) != 0;
  return resident;
}

// Every page of the four rings is in memory once both ranks attached (each
// rank faults in the rings it writes and reads), not only the page of each
// ring's shared part that rank 0 wrote laying the segment out.
TEST_F(ShmMethodTest, TheRingsAreFaultedInAtAttach) {
  ShmSegment& seg = rank0_->segment();
  for (int from = 0; from < 2; ++from) {
    for (int to = 0; to < 2; ++to) {
      const std::vector<bool> resident = ResidentPages(seg.ring(from, to), seg.ring_stride());
      EXPECT_EQ(std::count(resident.begin(), resident.end(), true), static_cast<std::ptrdiff_t>(resident.size()))
          << "ring " << from << " -> " << to;
    }
  }
}

// A block's robust mutex says whether the thread that made its rank's
// segment runs: rank 0's was made on this thread, rank 1's on one that
// has ended, whose end the kernel marked in it.
TEST_F(ShmMethodTest, ABlockSaysWhetherTheThreadThatMadeItRuns) {
  ShmSegment& seg = rank0_->segment();
  EXPECT_TRUE(seg.block(0).ThreadLives());
  EXPECT_FALSE(seg.block(1).ThreadLives());
}

// Runs `f` on a thread pinned to `cpu`; false if it could not be pinned.
template <class F>
bool OnCpu(int cpu, F f) {
  bool pinned = false;
  std::thread t([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pinned = ::pthread_setaffinity_np(::pthread_self(), sizeof(set), &set) == 0 && ::sched_getcpu() == cpu;
    if (pinned) f();
  });
  t.join();
  return pinned;
}

// Each rank says in its block where it runs as it asks; a rank counts
// those whose blocks name its CPU, itself included, and none that never
// said (-1).
TEST_F(ShmMethodTest, RanksOnThisCpuCountsTheRanksThatLastRanThere) {
  cpu_set_t allowed;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(allowed), &allowed), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  int n = -1;
  ASSERT_TRUE(OnCpu(cpus[0], [&] { n = rank0_->RanksOnThisCpu(); }));
  EXPECT_EQ(n, 1) << "rank 1 has not said yet";
  ASSERT_TRUE(OnCpu(cpus[0], [&] { n = rank1_->RanksOnThisCpu(); }));
  EXPECT_EQ(n, 2);
  ASSERT_TRUE(OnCpu(cpus[0], [&] { n = rank0_->RanksOnThisCpu(); }));
  EXPECT_EQ(n, 2);
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: no other CPU to move to";
  ASSERT_TRUE(OnCpu(cpus[1], [&] { n = rank1_->RanksOnThisCpu(); }));
  EXPECT_EQ(n, 1) << "rank 1 moved away";
  ASSERT_TRUE(OnCpu(cpus[0], [&] { n = rank0_->RanksOnThisCpu(); }));
  EXPECT_EQ(n, 1);
}

// A mapping of 4 pages over a memfd of `file_pages` pages.
struct MemfdMapping {
  explicit MemfdMapping(std::size_t file_pages) : page(static_cast<std::size_t>(::sysconf(_SC_PAGESIZE))) {
    const int fd = ::memfd_create("cartage-fault-in-test", MFD_CLOEXEC);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(::ftruncate(fd, static_cast<off_t>(file_pages * page)), 0) << std::strerror(errno);
    void* p = ::mmap(nullptr, 4 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    EXPECT_NE(p, MAP_FAILED) << std::strerror(errno);
    base = static_cast<std::byte*>(p);
  }
  ~MemfdMapping() { ::munmap(base, 4 * page); }
  std::vector<bool> Resident() const { return ResidentPages(base, 4 * page); }
  std::size_t page;
  std::byte* base = nullptr;
};

TEST(FaultInPagesTest, FaultsInExactlyThePagesTheRangeTouches) {
  MemfdMapping m(/*file_pages=*/4);
  ASSERT_EQ(m.Resident(), std::vector<bool>({false, false, false, false}));
  // From the middle of page 1 into page 2: both pages, no others.
  ASSERT_TRUE(FaultInPages(m.base + m.page + m.page / 2, m.page).ok());
  EXPECT_EQ(m.Resident(), std::vector<bool>({false, true, true, false}));
}

TEST(FaultInPagesTest, PagesTheKernelCannotHaveAreAnErrorNotASigbus) {
#ifndef MADV_POPULATE_WRITE
  GTEST_SKIP() << "no MADV_POPULATE_WRITE: the reads would take the SIGBUS";
#else
  // The file ends after 2 pages: a write to the mapping's third page would be
  // a SIGBUS, as it would on a /dev/shm too full to give a page.
  MemfdMapping m(/*file_pages=*/2);
  if (::madvise(m.base, m.page, MADV_POPULATE_WRITE) != 0 && errno == EINVAL) {
    GTEST_SKIP() << "kernel before 5.14: no MADV_POPULATE_WRITE";
  }
  const absl::Status st = FaultInPages(m.base, 4 * m.page);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_THAT(st.message(), HasSubstr(absl::StrCat("cannot fault in ", 4 * m.page, " bytes of pages: Bad address")));
  EXPECT_TRUE(FaultInPages(m.base, 2 * m.page).ok());
  EXPECT_EQ(m.Resident(), std::vector<bool>({true, true, false, false}));
#endif
}

TEST_F(ShmMethodTest, UnknownRecordTypeFailsThePeerAndItsWaitingSends) {
  car::Car* send = SyncSend();
  const char junk[8] = {};
  Append(99, junk, sizeof(junk));
  rank0_->Progress();
  EXPECT_EQ(rank0_->PeerStatus(1).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(rank0_->PeerStatus(1).message(), "malformed wire record from rank 1: unknown record type 99");
  EXPECT_EQ(car::SendMachine::StateOf(*send), car::SendState::kFailed);
  EXPECT_EQ(done_.status.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(done_.status.message(), HasSubstr("send #"));
  EXPECT_THAT(done_.status.message(), HasSubstr("to rank 1 (tag 3, context 0): malformed wire record from rank 1"));
  // New sends to the broken peer fail at once.
  car::Car* again = SyncSend(/*expect_waiting=*/false);
  EXPECT_EQ(car::SendMachine::StateOf(*again), car::SendState::kFailed);
}

TEST_F(ShmMethodTest, ShortAndInconsistentEnvelopes) {
  const char two[2] = {1, 2};
  Append(kRecEager, two, sizeof(two));
  rank0_->Progress();
  EXPECT_EQ(rank0_->PeerStatus(1).message(), "malformed wire record from rank 1: short envelope");
}

TEST_F(ShmMethodTest, EagerLengthMustMatchTheRecord) {
  std::vector<std::byte> rec(sizeof(MatchHeader) + 10);
  MatchHeader h{0, 5, 1000000, 0, 0, 0};  // claims 1 MB in a 10-byte payload
  std::memcpy(rec.data(), &h, sizeof(h));
  Append(kRecEager, rec.data(), rec.size());
  rank0_->Progress();
  EXPECT_EQ(rank0_->PeerStatus(1).message(),
            "malformed wire record from rank 1: eager length 1000000 in a 42-byte record");
}

TEST_F(ShmMethodTest, NegativeTagIsRefused) {
  std::vector<std::byte> rec(sizeof(MatchHeader));
  MatchHeader h{0, -7, 0, 0, 0, 0};
  std::memcpy(rec.data(), &h, sizeof(h));
  Append(kRecEager, rec.data(), rec.size());
  rank0_->Progress();
  EXPECT_EQ(rank0_->PeerStatus(1).message(), "malformed wire record from rank 1: negative tag -7");
}

TEST_F(ShmMethodTest, ForgedHandlesAreRefused) {
  car::Car* send = SyncSend();
  const CtsBody cts{0xdeadbeef00000007ull, 0, 1, 0};
  Append(kRecCts, &cts, sizeof(cts));
  rank0_->Progress();
  EXPECT_EQ(rank0_->PeerStatus(1).message(), "malformed wire record from rank 1: CTS for an unknown send");
  EXPECT_EQ(car::SendMachine::StateOf(*send), car::SendState::kFailed);
}

TEST_F(ShmMethodTest, AWellFormedAckCompletesTheSend) {
  // The same path, honest: rank 1's real ACK completes rank 0's ssend.
  car::Car* send = SyncSend();
  const uint64_t handle = ShmMethod::StateOf(*send).wire.local;
  ASSERT_NE(handle, 0u);
  const AckBody ack{handle};
  Append(kRecAck, &ack, sizeof(ack));
  rank0_->Progress();
  EXPECT_TRUE(rank0_->PeerStatus(1).ok());
  EXPECT_EQ(car::SendMachine::StateOf(*send), car::SendState::kDone);
  EXPECT_TRUE(done_.done() && done_.status.ok());
  // A second ACK for the same (now retired) handle is refused.
  Append(kRecAck, &ack, sizeof(ack));
  rank0_->Progress();
  EXPECT_EQ(rank0_->PeerStatus(1).message(), "malformed wire record from rank 1: ACK for an unknown send");
}

// A send whose record does not fit the ring waits in eager_queued, behind
// nothing but its own, and leaves it (`sent`) once the reader made room:
// the table shows it waiting, where a flag beside the CAR did.
TEST_F(ShmMethodTest, ASendTheRingHasNoRoomForWaitsInEagerQueued) {
  fsm::TraceRecorder rec(1 << 12);
  fsm::ScopedTraceSink on(&rec);
  std::vector<std::unique_ptr<base::Completion>> done;
  std::vector<car::Car*> sends;
  for (int i = 0; i < 64; ++i) sends.push_back(EagerBlock(5, &done));  // 256 KiB into a 64 KiB ring: some wait
  ASSERT_EQ(car::SendMachine::StateOf(*sends.front()), car::SendState::kDone);
  car::Car* last = sends.back();
  ASSERT_EQ(car::SendMachine::StateOf(*last), car::SendState::kEagerQueued);
  for (int round = 0; round < 1000 && !(done.back()->done() && host1_.arrived.size() == sends.size()); ++round) {
    rank1_->Progress();  // reads: the messages arrive unexpected
    rank0_->Progress();  // retries what waits
  }
  ASSERT_TRUE(done.back()->done());
  std::vector<std::string> life;
  for (absl::string_view line : absl::StrSplit(rec.ToText(), '\n')) {
    if (absl::StartsWith(line, absl::StrCat("car_send#", last->id(), ":"))) life.emplace_back(line);
  }
  const std::string me = absl::StrCat("car_send#", last->id(), ": ");
  EXPECT_THAT(life, ::testing::ElementsAre(me + "idle --post--> eager_in_flight",
                                           me + "eager_in_flight --queued--> eager_queued",
                                           me + "eager_queued --sent--> eager_in_flight",
                                           me + "eager_in_flight --local_done--> done"));
  EXPECT_EQ(host1_.arrived.size(), sends.size());
  for (car::Car* c : sends) host0_.pool.Release(c);
}

// A rank whose sends wait for room in a full ring, blocked in Block, wakes
// once its reader has read, not at the end of its timeout: the reader sends
// nothing back, so nothing else would wake it.
TEST_F(ShmMethodTest, ASenderBlockedOnAFullRingWakesWhenItsReaderReads) {
  std::vector<std::unique_ptr<base::Completion>> done;
  std::vector<car::Car*> sends;
  for (int i = 0; i < 64; ++i) sends.push_back(EagerBlock(i, &done));  // 256 KiB into a 64 KiB ring: some wait
  rank0_->Progress();  // finds the ring still full
  ASSERT_EQ(car::SendMachine::StateOf(*sends.back()), car::SendState::kEagerQueued);
  double slept = -1;
  std::thread sender([&] {
    const auto start = std::chrono::steady_clock::now();
    rank0_->Block(5'000'000);
    slept = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // most often asleep by now
  rank1_->Progress();  // reads: room for the sends that wait
  sender.join();
  EXPECT_LT(slept, 2.5) << "the sender slept out its timeout with room in its ring";
  for (int round = 0; round < 1000 && !(done.back()->done() && host1_.arrived.size() == sends.size()); ++round) {
    rank1_->Progress();
    rank0_->Progress();
  }
  ASSERT_EQ(host1_.arrived.size(), sends.size());
  for (std::size_t i = 0; i < sends.size(); ++i) EXPECT_EQ(host1_.arrived[i]->envelope().tag, static_cast<int>(i));
  for (const auto& d : done) EXPECT_TRUE(d->done() && d->status.ok()) << d->status;
  for (car::Car* c : sends) host0_.pool.Release(c);
}

// An eager message nobody has posted a receive for stays in the ring behind
// the first record of a sweep: by the next sweep its receive may be posted,
// and it skips the unexpected queue. Each sweep still takes at least one
// record, so what waits behind it (here an ACK) is never held up for long.
TEST_F(ShmMethodTest, UnmatchedEnvelopesWaitForTheNextSweep) {
  car::Car* send = SyncSend();
  std::vector<std::byte> rec(sizeof(MatchHeader) + 8);
  for (int tag = 1; tag <= 3; ++tag) {
    const MatchHeader h{0, tag, 8, 0, 0, 0};
    std::memcpy(rec.data(), &h, sizeof(h));
    std::memset(rec.data() + sizeof(h), tag, 8);
    Append(kRecEager, rec.data(), rec.size());
  }
  const AckBody ack{ShmMethod::StateOf(*send).wire.local};
  Append(kRecAck, &ack, sizeof(ack));
  // TestHost matches nothing: every eager message ends up unexpected.
  EXPECT_EQ(rank0_->Progress(), 1) << "the first record, then the unmatched second waits";
  ASSERT_EQ(host0_.arrived.size(), 1u);
  EXPECT_EQ(rank0_->Progress(), 1);
  ASSERT_EQ(host0_.arrived.size(), 2u);
  EXPECT_EQ(car::SendMachine::StateOf(*send), car::SendState::kWaitAck) << "the ACK is still behind tag 3";
  EXPECT_EQ(rank0_->Progress(), 2) << "tag 3 first in its sweep, then the ACK (never deferred)";
  ASSERT_EQ(host0_.arrived.size(), 3u);
  EXPECT_EQ(car::SendMachine::StateOf(*send), car::SendState::kDone);
  EXPECT_EQ(rank0_->Progress(), 0);
  for (std::size_t i = 0; i < 3; ++i) {  // in order, each with its own bytes
    EXPECT_EQ(host0_.arrived[i]->envelope().tag, static_cast<int>(i) + 1);
    EXPECT_EQ(host0_.buffer(i), std::vector<std::byte>(8, static_cast<std::byte>(i + 1)));
  }
  EXPECT_TRUE(rank0_->PeerStatus(1).ok());
}

// Rank 0's host holds back what no posted receive matches.
class ShmHoldTest : public ShmMethodTest {
 protected:
  void SetUp() override {
    host0_.holding = true;
    Start();
  }
  // An eager message of 8 bytes, each `tag`, from rank 1.
  void AppendEager(int tag) {
    std::vector<std::byte> rec(sizeof(MatchHeader) + 8);
    const MatchHeader h{0, tag, 8, 0, 0, 0};
    std::memcpy(rec.data(), &h, sizeof(h));
    std::memset(rec.data() + sizeof(h), tag, 8);
    Append(kRecEager, rec.data(), rec.size());
  }
  // Posts rank 0's receive of 8 bytes with `tag` from rank 1 into `buf`.
  car::Car* PostRecv(int tag, char* buf, base::Completion* done) {
    vc_ = *rank0_->VcOf(1);
    vc_.post_recv = [](car::Car&, car::CarEvents&) {};  // the matcher's part is HoldingHost's
    car::CarSpec s;
    s.kind = car::CarKind::kRecv;
    s.flags = car::CarFlag::kRecvData;
    s.envelope = {0, 1, tag};
    s.segment = car::Segment::Of(buf, 8, datatype::BasicType::kByte);
    s.counter = done;
    s.vc = &vc_;
    done->pending = 1;
    car::Car* r = *host0_.pool.Create(s);
    rank0_->Bind(*r, 1);
    EXPECT_TRUE(car::RecvMachine::Dispatch(*r, car::RecvEvent::kPost).ok());
    host0_.posted.push_back(r);
    ++host0_.hold.postings;
    return r;
  }
  car::Vc vc_;
};

// The next call's message of a collective, come while this rank still waits
// in the current call: it stays in the ring, unread, until a receive is
// posted, and then goes straight to it (no unexpected CAR, no second copy).
TEST_F(ShmHoldTest, AnUnmatchedEnvelopeWaitsInTheRingForItsReceive) {
  AppendEager(7);
  EXPECT_EQ(rank0_->Progress(), 0);
  EXPECT_EQ(rank0_->Progress(), 0);
  EXPECT_TRUE(host0_.arrived.empty()) << "held, not made an unexpected message";
  char buf[8] = {};
  base::Completion done;
  car::Car* r = PostRecv(7, buf, &done);
  EXPECT_EQ(rank0_->Progress(), 1);
  EXPECT_EQ(car::RecvMachine::StateOf(*r), car::RecvState::kDone);
  EXPECT_TRUE(done.done() && done.status.ok()) << done.status;
  EXPECT_EQ(std::string(buf, 8), std::string(8, '\x07'));
  EXPECT_TRUE(host0_.arrived.empty());
  EXPECT_EQ(rank0_->Progress(), 0);
}

// A held envelope never holds up what comes behind it: the probe watches the
// record after it, and the first one there has both read, in order.
TEST_F(ShmHoldTest, WhatComesBehindAHeldEnvelopeIsNotHeldUp) {
  car::Car* send = SyncSend();
  AppendEager(7);
  EXPECT_EQ(rank0_->Progress(), 0);
  const AckBody ack{ShmMethod::StateOf(*send).wire.local};
  Append(kRecAck, &ack, sizeof(ack));
  EXPECT_EQ(rank0_->Progress(), 2) << "the held message (now unexpected), then the ACK";
  ASSERT_EQ(host0_.arrived.size(), 1u);
  EXPECT_EQ(host0_.arrived[0]->envelope().tag, 7);
  EXPECT_EQ(host0_.buffer(0), std::vector<std::byte>(8, std::byte{7}));
  EXPECT_EQ(car::SendMachine::StateOf(*send), car::SendState::kDone);
}

// Nothing is held while the agent forbids it (an Iprobe's round, a peer
// found gone), and what was held is read at the next round.
TEST_F(ShmHoldTest, NothingIsHeldWhileHoldingIsNotAllowed) {
  AppendEager(7);
  EXPECT_EQ(rank0_->Progress(), 0);
  host0_.hold.allowed = false;
  EXPECT_EQ(rank0_->Progress(), 1);
  ASSERT_EQ(host0_.arrived.size(), 1u);
  AppendEager(8);
  EXPECT_EQ(rank0_->Progress(), 1);
  ASSERT_EQ(host0_.arrived.size(), 2u);
  EXPECT_EQ(host0_.arrived[1]->envelope().tag, 8);
}

// A receive posted for another message lets the held one be looked at
// again; it is held twice at most, then goes to the unexpected queue.
TEST_F(ShmHoldTest, AnEnvelopeIsHeldTwiceAtMost) {
  AppendEager(7);
  EXPECT_EQ(rank0_->Progress(), 0);
  char buf[8] = {};
  base::Completion done;
  PostRecv(9, buf, &done);
  EXPECT_EQ(rank0_->Progress(), 0) << "looked at again, held again";
  EXPECT_TRUE(host0_.arrived.empty());
  ++host0_.hold.postings;
  EXPECT_EQ(rank0_->Progress(), 1);
  ASSERT_EQ(host0_.arrived.size(), 1u);
  EXPECT_EQ(host0_.arrived[0]->envelope().tag, 7);
  EXPECT_FALSE(done.done());
}

TEST_F(ShmMethodTest, RandomRecordsNeverCrash) {
  // 200 fresh pairs; each gets a burst of records of real types with random
  // contents, a third of them well-formed eager envelopes (so the unexpected
  // path runs too), until the peer is declared broken.
  std::mt19937_64 rng(12345);
  std::vector<std::byte> bytes(700);
  int broken = 0, accepted = 0;
  for (int pair = 0; pair < 200; ++pair) {
    if (pair > 0) Start();
    for (int i = 0; i < 50 && rank0_->PeerStatus(1).ok(); ++i) {
      std::size_t len = rng() % bytes.size();
      for (auto& b : bytes) b = static_cast<std::byte>(rng());
      uint16_t type = static_cast<uint16_t>(rng() % 7);
      if (rng() % 3 == 0) {  // a well-formed eager message
        type = kRecEager;
        len = std::max(len, sizeof(MatchHeader));
        MatchHeader h{static_cast<uint32_t>(rng() % 4), static_cast<int32_t>(rng() % 100),
                      len - sizeof(MatchHeader), 0, 0, 0};
        std::memcpy(bytes.data(), &h, sizeof(h));
        ++accepted;
      }
      std::byte* p = Writer().Begin(len);
      if (p == nullptr) break;
      std::memcpy(p, bytes.data(), len);
      Writer().Commit(type);
      rank0_->Progress();
    }
    if (!rank0_->PeerStatus(1).ok()) {
      ++broken;
      EXPECT_EQ(rank0_->PeerStatus(1).code(), absl::StatusCode::kDataLoss);
      EXPECT_THAT(rank0_->PeerStatus(1).message(), HasSubstr("malformed wire record from rank 1"));
    }
  }
  EXPECT_GT(broken, 150) << "random records should almost always be caught";
  EXPECT_GT(accepted, 100) << "and well-formed ones accepted";
}

}  // namespace
}  // namespace cartage::methods::shm
