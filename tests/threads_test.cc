// Threads: the levels' refusals and what multiple admits (ranks as threads
// of this process), matched probes, the progress thread; then 2 to 8
// threads a rank on shm, tcp and ofi through real processes
// (thread_ranks.cc).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/testing.h"
#include "cartage/cartage.h"
#include "cartage/collectives.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/agents_in_process.h"
#include "tests/run_command.h"

namespace cartage::test {
namespace {

using ::testing::HasSubstr;

TEST(ThreadLevels, NamesAndParsing) {
  EXPECT_EQ(ThreadLevelName(ThreadLevel::kSingle), "single");
  EXPECT_EQ(ThreadLevelName(ThreadLevel::kMultiple), "multiple");
  EXPECT_EQ(*agent::ParseThreadLevel("serialized"), ThreadLevel::kSerialized);
  absl::StatusOr<ThreadLevel> bad = agent::ParseThreadLevel("many");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("CARTAGE_THREADS=many: need single, funneled, serialized or multiple"));
  // The program's options win over the environment.
  ASSERT_EQ(::setenv("CARTAGE_THREADS", "serialized", 1), 0);
  EXPECT_EQ(agent::ResolveThreading({})->level, ThreadLevel::kSerialized);
  EXPECT_EQ(agent::ResolveThreading({.threads = ThreadLevel::kMultiple, .progress_thread = std::nullopt, .lanes = {}})->level,
            ThreadLevel::kMultiple);
  ASSERT_EQ(::setenv("CARTAGE_PROGRESS_THREAD", "yes", 1), 0);
  EXPECT_THAT(agent::ResolveThreading({}).status().message(), HasSubstr("CARTAGE_PROGRESS_THREAD=yes: need 0 or 1"));
  ::unsetenv("CARTAGE_THREADS");
  ::unsetenv("CARTAGE_PROGRESS_THREAD");
  EXPECT_EQ(agent::ResolveThreading({})->level, ThreadLevel::kSingle);
  EXPECT_EQ(agent::ResolveThreading({})->lanes, 1);
}

TEST(ThreadLevels, LanesAsAskedAndOnlyAtMultiple) {
  const AgentOptions multiple{.threads = ThreadLevel::kMultiple, .progress_thread = std::nullopt, .lanes = {}};
  ASSERT_EQ(::setenv("CARTAGE_LANES", "4", 1), 0);
  EXPECT_EQ(agent::ResolveThreading(multiple)->lanes, 4);
  absl::StatusOr<agent::Threading> single = agent::ResolveThreading({});
  EXPECT_EQ(single.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(single.status().message(), HasSubstr("CARTAGE_LANES=4: lanes need thread level multiple, not single"));
  for (const char* bad : {"0", "65", "two"}) {
    ASSERT_EQ(::setenv("CARTAGE_LANES", bad, 1), 0);
    EXPECT_THAT(agent::ResolveThreading(multiple).status().message(),
                HasSubstr(absl::StrCat("CARTAGE_LANES=", bad, ": need 1 to 64 lanes")));
  }
  // The program's options win over the environment.
  AgentOptions two = multiple;
  two.lanes = 2;
  EXPECT_EQ(agent::ResolveThreading(two)->lanes, 2);
  ::unsetenv("CARTAGE_LANES");
  two.threads = ThreadLevel::kSerialized;
  EXPECT_THAT(agent::ResolveThreading(two).status().message(),
              HasSubstr("AgentOptions::lanes=2: lanes need thread level multiple, not serialized"));
}

// Single and funneled: a call from another thread is refused, naming the
// operation, the peer and the level; the owner's calls go on unharmed.
TEST(ThreadLevels, FunneledRefusesOtherThreads) {
  for (ThreadLevel level : {ThreadLevel::kSingle, ThreadLevel::kFunneled}) {
    InProcess(2, {.level = level, .progress_thread = false, .lanes = 1}, [&](int r, Agent& a) {
      const Comm w = a.World();
      EXPECT_EQ(a.thread_level(), level);
      int v = 7 + r, got = 0;
      Request recv;
      ASSERT_TRUE(w.Irecv(&got, sizeof(got), 1 - r, 3, &recv).ok());
      std::thread other([&] {
        Request s;
        const absl::Status sent = w.Isend(&v, sizeof(v), 1 - r, 3, &s);
        EXPECT_EQ(sent.code(), absl::StatusCode::kFailedPrecondition);
        EXPECT_THAT(sent.message(),
                    HasSubstr(absl::StrCat("send to rank ", 1 - r, " (tag 3): called from a thread other than the one "
                                           "that made the agent, at thread level ",
                                           ThreadLevelName(level))));
        const absl::Status waited = recv.Wait();
        EXPECT_THAT(waited.message(), HasSubstr(absl::StrCat("wait: called from a thread other")));
        EXPECT_FALSE(recv.Test());
        const absl::Status barrier = Barrier(w);
        EXPECT_THAT(barrier.message(), HasSubstr("barrier: called from a thread other"));
        EXPECT_THAT(w.Iprobe(kAnySource, kAnyTag).status().message(), HasSubstr("probe from rank -1 (tag -1): called"));
      });
      other.join();
      ASSERT_TRUE(w.Send(&v, sizeof(v), 1 - r, 3).ok());
      ASSERT_TRUE(recv.Wait().ok());
      EXPECT_EQ(got, 7 + (1 - r));
      ASSERT_TRUE(Barrier(w).ok());
    });
  }
}

// Serialized: any thread, one at a time; a call while another thread's is
// under way (rank 0's main thread waits in Recv) is refused.
TEST(ThreadLevels, SerializedRefusesOverlappingCalls) {
  InProcess(2, {.level = ThreadLevel::kSerialized, .progress_thread = false, .lanes = 1}, [&](int r, Agent& a) {
    const Comm w = a.World();
    int v = 40 + r, got = 0;
    if (r == 1) {
      // Another thread of rank 1 may call while its main thread does not.
      std::thread sender([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        EXPECT_TRUE(w.Send(&v, sizeof(v), 0, 5).ok());
      });
      sender.join();
      return;
    }
    std::thread meddler([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      Request s;
      const absl::Status sent = w.Isend(&v, sizeof(v), 1, 6, &s);
      EXPECT_EQ(sent.code(), absl::StatusCode::kFailedPrecondition);
      EXPECT_THAT(sent.message(), HasSubstr("send to rank 1 (tag 6): called while another thread's call is under way, "
                                            "at thread level serialized"));
    });
    EXPECT_TRUE(w.Recv(&got, sizeof(got), 1, 5).ok());  // under way for about 300 ms
    meddler.join();
    EXPECT_EQ(got, 41);
  });
}

// Multiple: threads of one rank send and receive at once; the progress
// thread runs, and a receive completes while the program sleeps.
TEST(ThreadLevels, MultipleWithAProgressThread) {
  // One lane, and three (the progress thread moves every lane; each thread
  // then runs on a communicator of its own, spread over them).
  for (int lanes : {1, 3}) {
    InProcess(2, {.level = ThreadLevel::kMultiple, .progress_thread = true, .lanes = lanes}, [&](int r, Agent& a) {
      EXPECT_TRUE(a.progress_thread());
      EXPECT_EQ(a.lanes(), lanes);
      const Comm w = a.World();
      constexpr int kThreads = 4;
      std::vector<Comm> comms;
      for (int t = 0; t < kThreads; ++t) comms.push_back(lanes == 1 ? w : w.Dup().value());
      std::vector<std::thread> pool;
      for (int t = 0; t < kThreads; ++t) {
        pool.emplace_back([&, t] {
          const Comm& c = comms[static_cast<std::size_t>(t)];
          std::vector<uint32_t> out(20000, static_cast<uint32_t>(r * 100 + t)), in(20000);
          Request rq, sq;
          ASSERT_TRUE(c.Irecv(in.data(), in.size() * 4, 1 - r, t, &rq).ok());
          ASSERT_TRUE(c.Isend(out.data(), out.size() * 4, 1 - r, t, &sq).ok());
          // The progress thread moves the rendezvous while this one only
          // sleeps and looks (completed() does not progress).
          for (int naps = 0; naps < 500 && !rq.completed(); ++naps) {
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          }
          EXPECT_TRUE(rq.completed()) << lanes << " lanes, thread " << t;
          ASSERT_TRUE(WaitAll({&rq, &sq}).ok());
          EXPECT_EQ(in, std::vector<uint32_t>(20000, static_cast<uint32_t>((1 - r) * 100 + t)));
        });
      }
      for (std::thread& t : pool) t.join();
      ASSERT_TRUE(Barrier(w).ok());
    });
  }
}

// Lanes: communicators go by the lane their context picks, and a wait on
// one lane still moves the others (MPI's progress rule). Rank 0 starts a
// 1 MiB rendezvous send on a lane-1 communicator and then waits, tests or
// waits-any on the world (lane 0); rank 1 receives the rendezvous before it
// answers on the world, so rank 0's wait must move lane 1 to get its answer
// (CMA off: the receiver cannot take the message without the sender).
TEST(Lanes, AWaitOnOneLaneMovesTheOthers) {
  ASSERT_EQ(::setenv("CARTAGE_SHM_CMA", "off", 1), 0);
  InProcess(2, {.level = ThreadLevel::kMultiple, .progress_thread = false, .lanes = 2}, [&](int r, Agent& a) {
    EXPECT_EQ(a.lanes(), 2);
    const Comm w = a.World();
    const Comm other = w.Dup().value();
    std::vector<uint32_t> big(1 << 18);
    for (int round = 0; round < 3; ++round) {
      if (r == 0) {
        for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint32_t>(i * 7 + round);
        Request sent, answer, never;
        ASSERT_TRUE(other.Isend(big.data(), big.size() * 4, 1, 1, &sent).ok());
        int got = 0;
        ASSERT_TRUE(w.Irecv(&got, sizeof(got), 1, 2, &answer).ok());
        if (round == 0) {
          ASSERT_TRUE(answer.Wait().ok());
        } else if (round == 1) {
          while (!answer.Test()) {
          }
        } else {
          int none = 0;
          ASSERT_TRUE(other.Irecv(&none, sizeof(none), 1, 99, &never).ok());
          Request* both[] = {&never, &answer};
          absl::StatusOr<std::size_t> which = WaitAny(both);
          ASSERT_TRUE(which.ok()) << which.status();
          EXPECT_EQ(*which, 1u);
          ASSERT_TRUE(never.Cancel().ok());
          EXPECT_EQ(none, 0);
        }
        EXPECT_EQ(got, 1000 + round);
        ASSERT_TRUE(sent.Wait().ok());
      } else {
        std::fill(big.begin(), big.end(), 0u);
        ASSERT_TRUE(other.Recv(big.data(), big.size() * 4, 0, 1).ok());
        for (std::size_t i = 0; i < big.size(); ++i) ASSERT_EQ(big[i], static_cast<uint32_t>(i * 7 + round)) << i;
        const int answer = 1000 + round;
        ASSERT_TRUE(w.Send(&answer, sizeof(answer), 0, 2).ok());
      }
    }
    ASSERT_TRUE(Barrier(other).ok());
  });
  ::unsetenv("CARTAGE_SHM_CMA");
}

// Lanes keep threads apart: one thread is held inside its lane's runtime
// (a user reduction of an allreduce on a lane-1 communicator, which runs
// under that lane's lock) until another thread of the rank has finished an
// exchange on the world (lane 0). Under one engine lock the exchange would
// wait for the reduction, and the reduction gives up after 10 s.
struct Held {
  std::atomic<bool> exchanged{false};
  std::atomic<bool> waited_out{false};
};
void HoldUntilExchanged(const void* in, void* inout, int64_t count, const Datatype&, void* context) {
  auto* held = static_cast<Held*>(context);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!held->exchanged.load() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  if (!held->exchanged.load()) held->waited_out.store(true);
  for (int64_t i = 0; i < count; ++i) static_cast<int64_t*>(inout)[i] += static_cast<const int64_t*>(in)[i];
}

TEST(Lanes, AThreadHeldInOneLaneDoesNotHoldUpAnother) {
  InProcess(2, {.level = ThreadLevel::kMultiple, .progress_thread = false, .lanes = 2}, [&](int r, Agent& a) {
    const Comm w = a.World();
    const Comm reducing = w.Dup().value();
    Held held;
    std::thread reducer([&] {
      const int64_t mine = r + 1;
      int64_t sum = 0;
      EXPECT_TRUE(Allreduce(reducing, &mine, &sum, 1, Datatype::Basic(BasicType::kInt64),
                            Op::User(&HoldUntilExchanged, true, &held))
                      .ok());
      EXPECT_EQ(sum, 3);
    });
    std::string out(4096, static_cast<char>('a' + r)), in(4096, '.');
    Request rq;
    ASSERT_TRUE(w.Irecv(in.data(), in.size(), 1 - r, 5, &rq).ok());
    EXPECT_TRUE(w.Send(out.data(), out.size(), 1 - r, 5).ok());
    EXPECT_TRUE(rq.Wait().ok());
    EXPECT_EQ(in, std::string(4096, static_cast<char>('a' + (1 - r))));
    held.exchanged.store(true);
    reducer.join();
    EXPECT_FALSE(held.waited_out.load()) << "rank " << r << ": the world's exchange waited for the other lane";
  });
}

// Matched probes on one rank's messages to itself: the message found is
// the one received, nobody else's receive takes it, it is received once.
TEST(MatchedProbe, TakesTheMessageItFound) {
  InProcess(1, {}, [&](int, Agent& a) {
    const Comm w = a.World();
    absl::StatusOr<std::optional<Message>> none = w.Improbe(kAnySource, kAnyTag);
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());
    const std::string first = "first message", second = "second";
    ASSERT_TRUE(w.Send(first.data(), first.size(), 0, 9).ok());
    ASSERT_TRUE(w.Send(second.data(), second.size(), 0, 9).ok());
    absl::StatusOr<Message> m = w.Mprobe(kAnySource, 9);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->bytes(), first.size());
    // A plain receive now gets the second: the first is the Message's.
    std::string got(32, '\0');
    ProbeResult st;
    ASSERT_TRUE(w.Recv(got.data(), got.size(), 0, 9, &st).ok());
    EXPECT_EQ(got.substr(0, st.bytes), second);
    // Too small a buffer: kOutOfRange naming the sizes, nothing written past it.
    std::string small(4, '.');
    const absl::Status shortfall = w.Mrecv(small.data(), 3, &*m);
    EXPECT_EQ(shortfall.code(), absl::StatusCode::kOutOfRange);
    EXPECT_THAT(shortfall.message(), HasSubstr("mrecv from rank 0 (tag 9): the message has 13 bytes, the buffer room for 3"));
    EXPECT_EQ(small, "....");
    EXPECT_FALSE(m->valid());
    const absl::Status again = w.Mrecv(small.data(), 3, &*m);
    EXPECT_EQ(again.code(), absl::StatusCode::kInvalidArgument);
    // Received whole, on a typed receive.
    ASSERT_TRUE(w.Send(first.data(), first.size(), 0, 10).ok());
    absl::StatusOr<std::optional<Message>> found = w.Improbe(0, kAnyTag);
    ASSERT_TRUE(found.ok() && found->has_value());
    std::string whole(first.size(), '\0');
    ASSERT_TRUE(w.Mrecv(whole.data(), static_cast<int64_t>(whole.size()), Datatype::Basic(BasicType::kByte), &**found,
                        &st)
                    .ok());
    EXPECT_EQ(whole, first);
    EXPECT_EQ(st.tag, 10);
    EXPECT_EQ(st.source, 0);
  });
}

// Real processes: 2, 4 and 8 threads a rank on each method.
struct Job {
  const char* method;
  int threads;
  const char* extra;  // one more variable, or ""
};

std::string Name(const ::testing::TestParamInfo<Job>& info) {
  std::string n = absl::StrCat(info.param.method, "_", info.param.threads, "threads");
  if (std::string(info.param.extra).find("PROGRESS") != std::string::npos) n += "_progress_thread";
  if (std::string(info.param.extra).find("LANES") != std::string::npos) n += "_lanes";
  return n;
}

class ThreadJobs : public ::testing::TestWithParam<Job> {};

TEST_P(ThreadJobs, EveryByteOnce) {
  const Job& j = GetParam();
  std::vector<std::string> env = {absl::StrCat("CARTAGE_METHODS=", j.method), "CARTAGE_THREADS=multiple"};
  if (std::string(j.method) == "ofi") env.emplace_back("CARTAGE_OFI_PROVIDER_INCLUDE=tcp;ofi_rxm");
  if (*j.extra != '\0') env.emplace_back(j.extra);
  const CommandResult r = RunCommand(
      {CARTAGE_BIN, "run", "-n", "2", "--timeout", "240", RANKS_BIN, "multiple", std::to_string(j.threads)}, env);
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("PASS threads (", j.threads, " threads a rank)")));
}

INSTANTIATE_TEST_SUITE_P(Methods, ThreadJobs,
                         ::testing::Values(Job{"shm", 2, ""}, Job{"shm", 8, ""},
                                           Job{"shm", 4, "CARTAGE_PROGRESS_THREAD=1"}, Job{"tcp", 2, ""},
                                           Job{"tcp", 8, ""}, Job{"ofi", 2, ""}, Job{"ofi", 4, ""},
                                           Job{"shm", 4, "CARTAGE_LANES=4"}, Job{"tcp", 4, "CARTAGE_LANES=3"},
                                           Job{"ofi", 2, "CARTAGE_LANES=2"}),
                         Name);

}  // namespace
}  // namespace cartage::test
