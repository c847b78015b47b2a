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

using ::testing::HasSubstr;

// A host that may hold envelopes back (MethodHost::Holding, when `holding`
// is set before the method is made) and matches the receives posted with it
// by tag.
class HoldingHost : public TestHost {
 public:
  car::Car* MatchIncoming(car::Envelope e) override {
    for (auto it = posted.begin(); it != posted.end(); ++it) {
      if ((*it)->envelope().tag != e.tag) continue;
      car::Car* c = *it;
      posted.erase(it);
      return c;
    }
    return nullptr;
  }
  const HoldControl* Holding() const override { return holding ? &hold : nullptr; }
  bool holding = false;
  HoldControl hold;
  std::vector<car::Car*> posted;
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
// timing both, then takes whichever moved a byte faster, now and then the
// other (CopyChooser). Every message arrives whole either way.
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

TEST_F(ShmCmaChoiceTest, TriesBothWaysThenTakesTheFaster) {
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

// The choice itself: the way in use counts the median of its last three
// times, so one slow message does not turn the choice and two do; the other
// way's occasional time is all it keeps.
TEST(CopyChooser, FollowsTheFasterWayAsSpeedsChange) {
  CopyChooser ch;
  constexpr uint64_t kMiB = 1 << 20;
  auto per_byte = [](double us_a_mib) { return us_a_mib * 1000.0 / kMiB; };
  auto pipelined = [&](double us) { ch.Observe(/*cma=*/false, kMiB, static_cast<uint64_t>(us * 1000)); };
  auto cma = [&](double us) { ch.Observe(/*cma=*/true, kMiB, static_cast<uint64_t>(us * 1000)); };
  EXPECT_FALSE(ch.UseCma()) << "nothing timed: the pipelined copy first";
  pipelined(60);
  EXPECT_TRUE(ch.UseCma()) << "then CMA, to time it";
  cma(120);
  int by_cma = 0;
  for (uint32_t k = 0; k < CopyChooser::kExplore; ++k) by_cma += ch.UseCma();
  EXPECT_EQ(by_cma, 1) << "the pipelined copy is faster: CMA once in kExplore...";
  for (uint32_t k = 1; k < CopyChooser::kBurst; ++k) EXPECT_TRUE(ch.UseCma()) << "...and kBurst in a row";
  EXPECT_FALSE(ch.UseCma());
  pipelined(60);
  pipelined(600);  // one message preempted
  EXPECT_DOUBLE_EQ(ch.pipelined_ns_per_byte(), per_byte(60));
  EXPECT_FALSE(ch.UseCma()) << "one slow message does not turn the choice";
  for (int i = 0; i < 3; ++i) pipelined(60);  // the slow one leaves the last three
  pipelined(140);  // the vCPUs moved
  EXPECT_DOUBLE_EQ(ch.pipelined_ns_per_byte(), per_byte(60));
  EXPECT_FALSE(ch.UseCma());
  pipelined(140);
  EXPECT_DOUBLE_EQ(ch.pipelined_ns_per_byte(), per_byte(140));
  EXPECT_TRUE(ch.UseCma()) << "two slow messages do: CMA (120) is faster now";
  cma(100);  // CMA in use: kept with its earlier time (the smaller of two)
  EXPECT_DOUBLE_EQ(ch.cma_ns_per_byte(), per_byte(100));
  pipelined(50);  // tried once: its newest time replaces the 140s
  EXPECT_DOUBLE_EQ(ch.pipelined_ns_per_byte(), per_byte(50));
  EXPECT_FALSE(ch.UseCma());
  ch.Observe(/*cma=*/true, 0, 5);  // nothing moved: nothing learned
  EXPECT_DOUBLE_EQ(ch.cma_ns_per_byte(), per_byte(100));
}

// A way tried in a burst is judged by its last, warm time: the first try of
// CMA after a while pays for cold caches and page tables.
TEST(CopyChooser, AWayTriedInABurstIsJudgedByItsWarmTime) {
  CopyChooser ch;
  constexpr uint64_t kMiB = 1 << 20;
  EXPECT_FALSE(ch.UseCma());
  ch.Observe(/*cma=*/false, kMiB, 60'000);
  EXPECT_TRUE(ch.UseCma());
  ch.Observe(/*cma=*/true, kMiB, 500'000);  // cold
  for (uint32_t k = 1; k < CopyChooser::kExplore; ++k) ASSERT_FALSE(ch.UseCma()) << k;
  for (uint32_t k = 0; k < CopyChooser::kBurst; ++k) EXPECT_TRUE(ch.UseCma()) << k;
  ch.Observe(true, kMiB, 500'000);  // cold again
  EXPECT_FALSE(ch.UseCma());
  ch.Observe(true, kMiB, 40'000);   // warm
  ch.Observe(true, kMiB, 40'000);
  EXPECT_DOUBLE_EQ(ch.cma_ns_per_byte(), 40'000.0 / kMiB);
  EXPECT_TRUE(ch.UseCma()) << "warm, CMA is the faster";
}

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

// Oversubscribed, the rings grow within 32 MiB for the job (512 KiB for up
// to 8 ranks, 256 KiB for 9, 128 KiB for 16, the default from 17) and the eager limit with
// them (an eighth of the ring); what the environment sets is kept.
TEST(ShmOptions, OversubscribedJobsGetLargerRingsAndEagerLimit) {
  struct Case {
    int ranks;
    bool oversubscribed;
    std::size_t ring, eager, cma_min;
  };
  for (const Case& c : {Case{8, false, 64u << 10, 8192, 64u << 20}, Case{3, true, 512u << 10, 64u << 10, 64u << 10},
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
  const absl::Status refused = same.ForJob(8, false);
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
