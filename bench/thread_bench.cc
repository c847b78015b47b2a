// cartage-thread-bench: threads inside ranks.
//
//   cartage run -n 2 --bind cartage-thread-bench rate THREADS [--reps 7]
//       THREADS threads a rank, each on a communicator of its own, run
//       cartage-bench's rate loop at once (rank 0 sends windows of 64
//       8-byte messages, rank 1 answers each window with a 4-byte ack):
//       messages a second, all threads together. More than one thread needs
//       CARTAGE_THREADS=multiple; with CARTAGE_LANES=THREADS each thread's
//       communicator has a lane of its own.
//   cartage run -n 2 --bind cartage-thread-bench overlap [--bytes 4194304] [--reps 7]
//       rank 0 sends a rendezvous message to rank 1 while both compute, then
//       both wait: the time of the transfer alone (t_comm), of the
//       computation alone (t_comp, calibrated to t_comm), of both
//       (t_both), and the overlap, (t_comm + t_comp - t_both) /
//       min(t_comm, t_comp): 0 when the transfer only moves inside the
//       wait, 100% when it is hidden entirely. Run it with and without
//       CARTAGE_PROGRESS_THREAD=1 (bench/run-threads.sh does both).
//       --computing receiver: only rank 1 computes; rank 0 waits at once.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "cartage/cartage.h"
#include "cartage/collectives.h"

ABSL_FLAG(int, reps, 7, "timed repetitions");
ABSL_FLAG(int64_t, bytes, 4 << 20, "overlap: the message's size");
ABSL_FLAG(std::string, computing, "both", "overlap: which ranks compute, both or receiver (the sender then waits, "
                                          "leaving its CPU to whoever needs one)");

namespace {

using Clock = std::chrono::steady_clock;
using cartage::Comm;
using cartage::Request;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Stats {
  double median, min, max;
};
Stats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

constexpr int kWindow = 64;

// One thread's `iters` windows on `c`.
void RateLoop(const Comm& c, int iters) {
  std::vector<Request> reqs(kWindow);
  std::vector<Request*> ptrs;
  for (Request& r : reqs) ptrs.push_back(&r);
  uint64_t msg[kWindow] = {};
  uint32_t ack = 0;
  for (int i = 0; i < iters; ++i) {
    if (c.rank() == 0) {
      for (int k = 0; k < kWindow; ++k) CARTAGE_CHECK_OK(c.Isend(&msg[k], 8, 1, k, &reqs[static_cast<std::size_t>(k)]));
      CARTAGE_CHECK_OK(cartage::WaitAll(absl::MakeConstSpan(ptrs)));
      CARTAGE_CHECK_OK(c.Recv(&ack, sizeof(ack), 1, kWindow));
    } else {
      for (int k = 0; k < kWindow; ++k) CARTAGE_CHECK_OK(c.Irecv(&msg[k], 8, 0, k, &reqs[static_cast<std::size_t>(k)]));
      CARTAGE_CHECK_OK(cartage::WaitAll(absl::MakeConstSpan(ptrs)));
      CARTAGE_CHECK_OK(c.Send(&ack, sizeof(ack), 0, kWindow));
    }
  }
}

int Rate(cartage::Agent& agent, int threads, int reps) {
  const Comm world = agent.World();
  std::vector<Comm> comms;
  for (int t = 0; t < threads; ++t) comms.push_back(world.Dup().value());
  const int iters = 2000 / threads + 1;  // about the same traffic whatever the thread count
  const cartage::Datatype dbl = cartage::Datatype::Basic(cartage::BasicType::kDouble);
  std::vector<double> rates;
  for (int rep = -1; rep < reps; ++rep) {  // -1: a warm-up
    CARTAGE_CHECK_OK(cartage::Barrier(world));
    const auto start = Clock::now();
    if (threads == 1) {
      RateLoop(comms[0], iters);  // on the agent's own thread: any level
    } else {
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] { RateLoop(comms[static_cast<std::size_t>(t)], iters); });
      }
      for (std::thread& th : pool) th.join();
    }
    double secs = Seconds(start, Clock::now());
    CARTAGE_CHECK_OK(cartage::Bcast(world, &secs, 1, dbl, 0));
    if (rep >= 0) rates.push_back(static_cast<double>(threads) * iters * kWindow / secs);
  }
  if (world.rank() == 0) {
    const Stats s = Summarize(rates);
    std::printf("rate %d thread%s, method %s, level %s, %d lane%s: %.4g msgs/s [%.4g-%.4g] (%d reps)\n", threads,
                threads == 1 ? "" : "s", agent.method_for(1).c_str(),
                std::string(cartage::ThreadLevelName(agent.thread_level())).c_str(), agent.lanes(),
                agent.lanes() == 1 ? "" : "s", s.median, s.min, s.max, reps);
  }
  return 0;
}

// Arithmetic that the compiler cannot drop: `n` steps.
double Compute(int64_t n) {
  double x = 1.0;
  for (int64_t i = 0; i < n; ++i) x = x * 1.0000001 + 1e-9;
  return x;
}

// One transfer of `buf` from rank 0 to rank 1, with `work` steps of
// computation between posting and waiting (0: none); this rank's seconds.
// Rank 1 posts its receive (as a halo exchange pre-posts them), tells rank
// 0 to go and starts its clock; rank 0 then sends. The message thus lands
// while rank 1 computes, matching a posted receive, and moves then only if
// someone progresses (the progress thread).
double Transfer(const Comm& w, std::vector<char>& buf, int64_t work, double* sink) {
  if (w.rank() == 0 && absl::GetFlag(FLAGS_computing) == "receiver") work = 0;
  CARTAGE_CHECK_OK(cartage::Barrier(w));
  Request r;
  char go = 1;
  Clock::time_point start;
  if (w.rank() == 1) {
    CARTAGE_CHECK_OK(w.Irecv(buf.data(), buf.size(), 0, 3, &r));
    CARTAGE_CHECK_OK(w.Send(&go, 1, 0, 4));
    start = Clock::now();
  } else {
    CARTAGE_CHECK_OK(w.Recv(&go, 1, 1, 4));
    start = Clock::now();
    CARTAGE_CHECK_OK(w.Isend(buf.data(), buf.size(), 1, 3, &r));
  }
  if (work > 0) *sink += Compute(work);
  CARTAGE_CHECK_OK(r.Wait());
  return Seconds(start, Clock::now());
}

int Overlap(cartage::Agent& agent, int64_t bytes, int reps) {
  const Comm w = agent.World();
  const cartage::Datatype dbl = cartage::Datatype::Basic(cartage::BasicType::kDouble);
  const cartage::Datatype i64 = cartage::Datatype::Basic(cartage::BasicType::kInt64);
  std::vector<char> buf(static_cast<std::size_t>(bytes), 'x');
  double sink = 0;
  (void)Transfer(w, buf, 0, &sink);  // warm-up (connections, pages)
  // The transfer alone, then computation calibrated to take as long.
  std::vector<double> comm;
  for (int i = 0; i < reps; ++i) comm.push_back(Transfer(w, buf, 0, &sink));
  double t_comm = Summarize(comm).median;
  CARTAGE_CHECK_OK(cartage::Bcast(w, &t_comm, 1, dbl, 1));  // the receiver's
  int64_t work = 1000;
  for (;;) {
    const auto start = Clock::now();
    sink += Compute(work);
    const double secs = Seconds(start, Clock::now());
    if (secs > 0.01) {
      work = static_cast<int64_t>(static_cast<double>(work) * t_comm / secs);
      break;
    }
    work *= 2;
  }
  CARTAGE_CHECK_OK(cartage::Bcast(w, &work, 1, i64, 1));
  std::vector<double> comp, both;
  for (int i = 0; i < reps; ++i) {
    const auto start = Clock::now();
    sink += Compute(work);
    comp.push_back(Seconds(start, Clock::now()));
    both.push_back(Transfer(w, buf, work, &sink));
  }
  const double t_comp = Summarize(comp).median;
  const Stats b = Summarize(both);
  const double overlap = (t_comm + t_comp - b.median) / std::min(t_comm, t_comp);
  // Rank 1's figures: its receive is what the computation hides or not.
  if (w.rank() == 1) {
    std::printf("overlap %lld B, %s computing, method %s, progress thread %s: t_comm %.0f us, t_comp %.0f us, t_both %.0f us "
                "[%.0f-%.0f], overlap %.0f%%%s\n",
                static_cast<long long>(bytes), absl::GetFlag(FLAGS_computing) == "receiver" ? "receiver" : "both",
                agent.method_for(0).c_str(), agent.progress_thread() ? "on" : "off",
                t_comm * 1e6, t_comp * 1e6, b.median * 1e6, b.min * 1e6, b.max * 1e6, std::max(0.0, overlap) * 100,
                sink == 42 ? " " : "");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string test = args.size() > 1 ? args[1] : "";
  int threads = 1;
  if (test == "rate" && (args.size() < 3 || !absl::SimpleAtoi(args[2], &threads) || threads < 1 || threads > 64)) {
    std::fprintf(stderr, "usage: cartage run -n 2 cartage-thread-bench rate THREADS\n");
    return 2;
  }
  const std::string computing = absl::GetFlag(FLAGS_computing);
  if ((test != "rate" && test != "overlap") || (computing != "both" && computing != "receiver")) {
    std::fprintf(stderr, "usage: cartage run -n 2 cartage-thread-bench rate THREADS | overlap [--bytes N]\n");
    return 2;
  }
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "cartage-thread-bench: %s\n", std::string(agent.status().message()).c_str());
    return 1;
  }
  if ((*agent)->size() != 2) {
    std::fprintf(stderr, "cartage-thread-bench: needs 2 ranks\n");
    return 2;
  }
  const int reps = std::max(1, absl::GetFlag(FLAGS_reps));
  return test == "rate" ? Rate(**agent, threads, reps) : Overlap(**agent, absl::GetFlag(FLAGS_bytes), reps);
}
