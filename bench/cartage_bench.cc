// cartage-bench: OSU-style benchmarks: point-to-point between ranks 0 and 1,
// and collectives over every rank.
//
//   cartage run -n 2 --bind cartage-bench TEST [--sizes 8,65536,...] [--reps 7] [--json]
//   cartage-bench list          the tests this build has, one per line
//
// pingpong  one-way latency = round trip / 2 (µs)
// bw        window of 64 nonblocking sends, then a 4-byte ack (MB/s, 1 MB = 10^6 B)
// bibw      both ranks send a window of 64 and receive one (MB/s, both directions)
// rate      the bw window with 8-byte messages (messages/s)
// match_posted[_any]
//           the receiver posts N receives (tags 0..N-1, from rank 0 or from
//           any source), then the sender sends tags N-1..0, so that every
//           arrival matches the newest posted receive (µs per message; the
//           sizes are queue lengths, default 1000 and 10000)
// match_unexpected[_any]
//           the sender sends tags 0..N-1 before any receive is posted; the
//           receiver then receives tags N-1..0 (µs per message)
// barrier bcast allreduce allgather alltoall
//           every rank; per-call µs averaged over the ranks; bcast from rank
//           0, allreduce a sum of doubles; sizes are bytes per rank; the
//           iteration count is calibrated so a repetition takes --target_s
// put_lat get_lat acc_lat
//           one-sided, as OSU's osu_put_latency, osu_get_latency and
//           osu_acc_latency with a lock: rank 0 locks rank 1's window, puts
//           (gets, accumulates doubles) and unlocks (µs an epoch)
// put_bw    the same with a window of 64 puts an epoch (MB/s)
//           --window create: the window over the program's memory
//           (single copy on one host) where by default it is allocated
//           (shared on one host)
// exchange  the same loop over point-to-point: each rank an Irecv and an
//           Isend with its partner (rank ^ 1), then waits for both: the
//           floor of a one-round collective (2 ranks: barrier, allreduce)
// bench/peers/osu_mpi.c runs the same tests, sizes and loops over MPI
// (bench/compare puts the two side by side).
// Each size: a warm-up, then --reps timed repetitions; medians with min and
// max. Before each size the two ranks measure a cache-line hand-off (one
// writes a flag the other polls, through their own shared page) so that
// small-message latency can be read in hand-offs, whatever the placement of
// the VM's vCPUs (bench/README.md, "Placement").
#include <sched.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <new>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/shared_page.h"
#include "cartage/cartage.h"
#include "cartage/collectives.h"
#include "cartage/rma.h"

ABSL_FLAG(std::string, sizes, "", "comma-separated message sizes in bytes (default: 0, 8, 64, 1 KiB ... 4 MiB)");
ABSL_FLAG(int, reps, 7, "timed repetitions per size");
ABSL_FLAG(bool, json, false, "print one JSON object per line instead of a table");
ABSL_FLAG(std::string, window, "allocate",
          "one-sided tests: allocate (shared on one host) or create (over the program's memory: single copy on one "
          "host)");
ABSL_FLAG(double, target_s, 0.05, "collectives: seconds one repetition should take (the iteration count follows)");

// Every heap allocation in this program (the runtime is linked in) is
// counted, so the timed loops can report allocations per operation.
#include "tests/counting_new.h"

using cartage::test::g_allocations;

namespace {

using Clock = std::chrono::steady_clock;
using cartage::Comm;
using cartage::Request;

// Message buffers start on a page, as OSU's do (bench/peers/osu_mpi.c
// too): a heap buffer's offset within its page moves with every allocation
// made before it, so from one build to the next, and copy speeds with it
// (bw 64 KiB moved by a fifth between two builds whose difference it never ran).
template <class T>
struct PageAligned {
  using value_type = T;
  static constexpr std::size_t kPage = 4096;
  PageAligned() = default;
  template <class U>
  explicit PageAligned(const PageAligned<U>&) {}
  T* allocate(std::size_t n) {
    const std::size_t bytes = (n * sizeof(T) + kPage - 1) / kPage * kPage;
    void* p = std::aligned_alloc(kPage, bytes);
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  friend bool operator==(const PageAligned&, const PageAligned&) { return true; }
};
using Buffer = std::vector<char, PageAligned<char>>;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Stats {
  double median, min, max;
};
Stats Summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// Spins until the flag reads `want`, yielding the CPU after a while: when
// the ranks outnumber the cores (two jobs at once on 2 vCPUs) the peer may
// not be running, and a pure spin would cost a whole time slice per hand-off
// (a probe of 200,000 hand-offs then takes minutes).
void AwaitFlag(const std::atomic<uint64_t>& f, uint64_t want) {
  for (int spins = 0; f.load(std::memory_order_acquire) != want;) {
    if (++spins >= 4096) {
      sched_yield();
      spins = 0;
    }
  }
}

// One-way cache-line hand-off between the two ranks, in ns (median of 5).
double HandOffNs(const Comm& w, cartage::bench::SharedPage& page) {
  constexpr int kRounds = 20000;
  std::vector<double> samples;
  for (int rep = 0; rep < 5; ++rep) {
    CARTAGE_CHECK_OK(w.Send(nullptr, 0, 1 - w.rank(), 2));  // line up
    CARTAGE_CHECK_OK(w.Recv(nullptr, 0, 1 - w.rank(), 2));
    std::atomic<uint64_t>& f = page.word(0);
    const uint64_t base = static_cast<uint64_t>(rep) * 2 * kRounds;
    const auto start = Clock::now();
    for (uint64_t i = 0; i < kRounds; ++i) {
      if (w.rank() == 0) {
        f.store(base + 2 * i + 1, std::memory_order_release);
        AwaitFlag(f, base + 2 * i + 2);
      } else {
        AwaitFlag(f, base + 2 * i + 1);
        f.store(base + 2 * i + 2, std::memory_order_release);
      }
    }
    samples.push_back(Seconds(start, Clock::now()) * 1e9 / (2.0 * kRounds));
  }
  return Summarize(samples).median;
}

// A single process_vm_readv copy of `bytes` from rank 1's buffer into rank
// 0's, in MB/s (median of 5): the floor shm's bandwidth is held against.
// 0 where CMA does not work.
double CmaProbeMBps(const Comm& w, Buffer& buf, std::size_t bytes) {
  struct Where {
    int64_t pid;
    uint64_t address;
  } where{getpid(), reinterpret_cast<uint64_t>(buf.data())};
  char done = 0;
  if (w.rank() == 1) {
    CARTAGE_CHECK_OK(w.Send(&where, sizeof(where), 0, 5));
    CARTAGE_CHECK_OK(w.Recv(&done, 1, 0, 5));
    return 0;
  }
  CARTAGE_CHECK_OK(w.Recv(&where, sizeof(where), 1, 5));
  std::vector<double> samples;
  const int iters = std::max<int>(2, static_cast<int>((64u << 20) / std::max<std::size_t>(bytes, 1)));
  for (int rep = 0; rep < 5; ++rep) {
    const auto start = Clock::now();
    for (int i = 0; i < iters; ++i) {
      iovec local{buf.data(), bytes};
      iovec remote{reinterpret_cast<void*>(where.address), bytes};
      if (process_vm_readv(static_cast<pid_t>(where.pid), &local, 1, &remote, 1, 0) != static_cast<ssize_t>(bytes)) {
        samples.assign(1, 0);
        rep = 5;
        break;
      }
    }
    if (rep < 5) samples.push_back(static_cast<double>(bytes) * iters / Seconds(start, Clock::now()) / 1e6);
  }
  CARTAGE_CHECK_OK(w.Send(&done, 1, 1, 5));
  return Summarize(samples).median;
}

constexpr const char* kTests[] = {"pingpong",  "bw",        "bibw",      "rate",     "match_posted",
                                  "match_posted_any", "match_unexpected", "match_unexpected_any",
                                  "barrier",   "bcast",     "allreduce", "allgather", "alltoall", "exchange",
                                  "put_lat",   "get_lat",   "acc_lat",   "put_bw"};
constexpr int kControlTag = 32000;

bool IsMatching(const std::string& test) { return test.rfind("match_", 0) == 0; }
bool IsRma(const std::string& test) {
  return test == "put_lat" || test == "get_lat" || test == "acc_lat" || test == "put_bw";
}
bool IsRmaLatency(const std::string& test) { return IsRma(test) && test != "put_bw"; }

// The window the one-sided tests use, made for each size (collectively, by
// ranks 0 and 1) and freed after it.
std::unique_ptr<cartage::Window> g_window;
bool IsCollective(const std::string& test) {
  return test == "barrier" || test == "bcast" || test == "allreduce" || test == "allgather" || test == "alltoall" ||
         test == "exchange";
}

// The algorithm the selection table picks for a test's calls.
std::string AlgorithmFor(const std::string& test, std::size_t bytes, int ranks, bool oversubscribed, bool crowded) {
  if (test == "exchange") return "point-to-point";
  const cartage::Collective c = test == "barrier"     ? cartage::Collective::kBarrier
                                : test == "bcast"       ? cartage::Collective::kBcast
                                : test == "allreduce" ? cartage::Collective::kAllreduce
                                : test == "allgather" ? cartage::Collective::kAllgather
                                                      : cartage::Collective::kAlltoall;
  return cartage::SelectAlgorithm(c, test == "allreduce" ? bytes / 8 * 8 : bytes, ranks, /*commutative=*/true,
                                  oversubscribed, crowded);
}

// `iters` calls of a collective; this rank's seconds. Sizes are bytes per
// rank (osu_mpi.c's convention): bcast from rank 0, allreduce a sum of
// doubles, allgather and alltoall `bytes` per rank. The test is told apart
// once, before the clock starts: the loop times the call, not string
// comparisons (osu_mpi.c does the same).
double RunCollective(const Comm& w, const std::string& test, Buffer& sbuf, Buffer& rbuf,
                     std::size_t bytes, int iters) {
  const auto n = static_cast<int64_t>(bytes);
  const cartage::Datatype byte = cartage::Datatype::Basic(cartage::BasicType::kByte);
  const cartage::Datatype dbl = cartage::Datatype::Basic(cartage::BasicType::kDouble);
  const cartage::Op sum(cartage::OpKind::kSum);
  enum class Kind { kBarrier, kBcast, kAllreduce, kAllgather, kExchange, kAlltoall };
  const Kind kind = test == "barrier"     ? Kind::kBarrier
                    : test == "bcast"     ? Kind::kBcast
                    : test == "allreduce" ? Kind::kAllreduce
                    : test == "allgather" ? Kind::kAllgather
                    : test == "exchange"  ? Kind::kExchange
                                          : Kind::kAlltoall;
  const int peer = (w.rank() ^ 1) < w.size() ? w.rank() ^ 1 : w.rank();  // exchange: an odd rank out, itself
  CARTAGE_CHECK_OK(cartage::Barrier(w));
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) {
    switch (kind) {
      case Kind::kBarrier: CARTAGE_CHECK_OK(cartage::Barrier(w)); break;
      case Kind::kBcast: CARTAGE_CHECK_OK(cartage::Bcast(w, sbuf.data(), n, byte, 0)); break;
      case Kind::kAllreduce: CARTAGE_CHECK_OK(cartage::Allreduce(w, sbuf.data(), rbuf.data(), n / 8, dbl, sum)); break;
      case Kind::kAllgather: CARTAGE_CHECK_OK(cartage::Allgather(w, sbuf.data(), rbuf.data(), n, byte)); break;
      case Kind::kExchange: {
        cartage::Request rq, sq;
        CARTAGE_CHECK_OK(w.Irecv(rbuf.data(), bytes, peer, 9, &rq));
        CARTAGE_CHECK_OK(w.Isend(sbuf.data(), bytes, peer, 9, &sq));
        CARTAGE_CHECK_OK(cartage::WaitAll({&rq, &sq}));
        break;
      }
      case Kind::kAlltoall: CARTAGE_CHECK_OK(cartage::Alltoall(w, sbuf.data(), rbuf.data(), n, byte)); break;
    }
  }
  return Seconds(start, Clock::now());
}

// A collective's figures: the iteration count doubles until a run takes a
// fifth of `target` seconds on rank 0, then scales to `target`; each
// repetition's per-call time is averaged over the ranks (as OSU does).
void BenchCollective(const Comm& w, const std::string& test, const std::vector<std::size_t>& sizes, int reps,
                     bool json, double target) {
  const cartage::Datatype dbl = cartage::Datatype::Basic(cartage::BasicType::kDouble);
  const cartage::Datatype i32 = cartage::Datatype::Basic(cartage::BasicType::kInt32);
  if (w.rank() == 0 && !json) {
    std::printf("# cartage-bench %s, %d ranks, %d reps; per-call µs averaged over ranks: median [min-max]\n",
                test.c_str(), w.size(), reps);
    std::printf("%10s %14s %24s %12s\n", "bytes", "median_us", "[min-max]", "iterations");
  }
  for (std::size_t bytes : sizes) {
    const std::size_t all = test == "allgather" || test == "alltoall" ? bytes * static_cast<std::size_t>(w.size())
                                                                      : bytes;
    Buffer sbuf(std::max<std::size_t>(all, 8), 'x'), rbuf(std::max<std::size_t>(all, 8), 0);
    if (test == "allreduce") std::fill(sbuf.begin(), sbuf.end(), 0);  // zeros: a valid double
    int iters = 1;
    for (;;) {
      double secs = RunCollective(w, test, sbuf, rbuf, bytes, iters);
      CARTAGE_CHECK_OK(cartage::Bcast(w, &secs, 1, dbl, 0));
      if (secs >= target / 5 || iters >= (1 << 24)) {
        const double per_call = secs / iters;
        iters = static_cast<int>(std::clamp(target / std::max(per_call, 1e-9), 1.0, static_cast<double>(1 << 24)));
        break;
      }
      iters *= 2;
    }
    CARTAGE_CHECK_OK(cartage::Bcast(w, &iters, 1, i32, 0));
    std::vector<double> values;
    for (int r = 0; r < reps; ++r) {
      const double mine = RunCollective(w, test, sbuf, rbuf, bytes, iters) * 1e6 / iters;
      double total = 0;
      CARTAGE_CHECK_OK(cartage::Reduce(w, &mine, &total, 1, dbl, cartage::Op(cartage::OpKind::kSum), 0));
      values.push_back(total / w.size());
    }
    if (w.rank() != 0) continue;
    const Stats s = Summarize(values);
    if (json) {
      std::printf("{\"test\":\"%s\",\"size\":%zu,\"median_us\":%.6g,\"min\":%.6g,\"max\":%.6g,\"reps\":%d,"
                  "\"ranks\":%d,\"iterations\":%d,\"algorithm\":\"%s\"}\n",
                  test.c_str(), bytes, s.median, s.min, s.max, reps, w.size(), iters,
                  AlgorithmFor(test, bytes, w.size(), w.Oversubscribed(), w.Crowded()).c_str());
    } else {
      std::printf("%10zu %14.4g %24s %12d   %s\n", bytes, s.median, absl::StrFormat("[%.4g-%.4g]", s.min, s.max).c_str(),
                  iters, AlgorithmFor(test, bytes, w.size(), w.Oversubscribed(), w.Crowded()).c_str());
    }
    std::fflush(stdout);
  }
}

int Iterations(const std::string& test, std::size_t bytes) {
  if (test == "pingpong") return bytes <= 8192 ? 20000 : bytes <= 65536 ? 2000 : bytes <= (1 << 20) ? 300 : 60;
  if (IsRmaLatency(test)) return bytes <= 8192 ? 5000 : bytes <= 65536 ? 1000 : bytes <= (1 << 20) ? 100 : 30;
  return bytes <= 8192 ? 300 : bytes <= 65536 ? 60 : bytes <= (1 << 20) ? 10 : 4;  // windows of 64
}

// One timed repetition; returns seconds (rank 0's clock). pingpong and bibw
// receive into `rbuf` and send from `buf` (as OSU's osu_latency and
// osu_bibw do, and bench/peers/osu_mpi.c), the others into `buf`.
double Run(const Comm& w, const std::string& test, Buffer& buf, char* rbuf, std::size_t bytes, int iters) {
  const int peer = 1 - w.rank();
  CARTAGE_CHECK_OK(w.Send(nullptr, 0, peer, 3));
  CARTAGE_CHECK_OK(w.Recv(nullptr, 0, peer, 3));
  const auto start = Clock::now();
  if (IsRma(test)) {
    // As OSU's osu_put_latency, osu_get_latency, osu_acc_latency and
    // osu_put_bw with a lock: rank 0 locks rank 1's window, puts (gets,
    // accumulates; a window of 64 puts for put_bw) and unlocks; rank 1
    // makes progress in a receive until rank 0 is done.
    static const cartage::Datatype kF64 = cartage::Datatype::Basic(cartage::datatype::BasicType::kDouble);
    const cartage::datatype::Op sum(cartage::datatype::OpKind::kSum);
    cartage::Window& win = *g_window;
    if (w.rank() == 0) {
      const int64_t doubles = static_cast<int64_t>(bytes / sizeof(double));
      // Which test, decided once: the timed loop holds only the calls (as OSU's).
      enum class Rma { kPut, kGet, kAcc, kPutBw };
      const Rma which = test == "put_lat"   ? Rma::kPut
                        : test == "get_lat" ? Rma::kGet
                        : test == "acc_lat" ? Rma::kAcc
                                            : Rma::kPutBw;
      for (int i = 0; i < iters; ++i) {
        CARTAGE_CHECK_OK(win.Lock(1));
        if (which == Rma::kPut) {
          CARTAGE_CHECK_OK(win.Put(buf.data(), bytes, 1, 0));
        } else if (which == Rma::kGet) {
          CARTAGE_CHECK_OK(win.Get(rbuf, bytes, 1, 0));
        } else if (which == Rma::kAcc) {
          CARTAGE_CHECK_OK(win.Accumulate(buf.data(), doubles, kF64, 1, 0, doubles, kF64, sum));
        } else {
          for (int k = 0; k < 64; ++k) CARTAGE_CHECK_OK(win.Put(buf.data(), bytes, 1, 0));
        }
        CARTAGE_CHECK_OK(win.Unlock(1));
      }
      CARTAGE_CHECK_OK(w.Send(nullptr, 0, 1, 6));
    } else {
      CARTAGE_CHECK_OK(w.Recv(nullptr, 0, 0, 6));
    }
  } else if (test == "pingpong") {
    for (int i = 0; i < iters; ++i) {
      if (w.rank() == 0) {
        CARTAGE_CHECK_OK(w.Send(buf.data(), bytes, 1, 0));
        CARTAGE_CHECK_OK(w.Recv(rbuf, bytes, 1, 0));
      } else {
        CARTAGE_CHECK_OK(w.Recv(rbuf, bytes, 0, 0));
        CARTAGE_CHECK_OK(w.Send(buf.data(), bytes, 0, 0));
      }
    }
  } else if (test == "bibw") {
    constexpr int kWindow = 64;
    Request reqs[2 * kWindow];
    Request* all[2 * kWindow];
    for (int i = 0; i < 2 * kWindow; ++i) all[i] = &reqs[i];
    for (int i = 0; i < iters; ++i) {
      for (int k = 0; k < kWindow; ++k) CARTAGE_CHECK_OK(w.Irecv(rbuf, bytes, peer, 0, &reqs[k]));
      for (int k = 0; k < kWindow; ++k) CARTAGE_CHECK_OK(w.Isend(buf.data(), bytes, peer, 0, &reqs[kWindow + k]));
      CARTAGE_CHECK_OK(cartage::WaitAll(absl::MakeConstSpan(all)));
    }
  } else {
    constexpr int kWindow = 64;
    Request reqs[kWindow];
    int ack = 0;
    for (int i = 0; i < iters; ++i) {
      for (Request& r : reqs) {
        if (w.rank() == 0) {
          CARTAGE_CHECK_OK(w.Isend(buf.data(), bytes, 1, 0, &r));
        } else {
          CARTAGE_CHECK_OK(w.Irecv(buf.data(), bytes, 0, 0, &r));
        }
      }
      for (Request& r : reqs) CARTAGE_CHECK_OK(r.Wait());
      if (w.rank() == 0) {
        CARTAGE_CHECK_OK(w.Recv(&ack, sizeof(ack), 1, 4));
      } else {
        CARTAGE_CHECK_OK(w.Send(&ack, sizeof(ack), 0, 4));
      }
    }
  }
  return Seconds(start, Clock::now());
}

// One repetition of a matching test with a queue of `depth`: µs per message
// on the receiver (rank 1), which sends it to rank 0; rank 1 returns 0.
double RunMatching(const Comm& w, const std::string& test, int depth, std::vector<Request>& reqs,
                   std::vector<Request*>& ptrs, std::vector<double>& bufs) {
  const int source = test.find("_any") != std::string::npos ? cartage::kAnySource : 0;
  const int peer = 1 - w.rank();
  CARTAGE_CHECK_OK(w.Send(nullptr, 0, peer, kControlTag));
  CARTAGE_CHECK_OK(w.Recv(nullptr, 0, peer, kControlTag));
  Clock::time_point start;
  const absl::Span<Request* const> all(ptrs.data(), static_cast<std::size_t>(depth));
  if (test.rfind("match_posted", 0) == 0) {
    if (w.rank() == 1) {
      for (int t = 0; t < depth; ++t) CARTAGE_CHECK_OK(w.Irecv(&bufs[t], sizeof(double), source, t, &reqs[t]));
      start = Clock::now();
      CARTAGE_CHECK_OK(w.Send(nullptr, 0, 0, kControlTag + 1));
      CARTAGE_CHECK_OK(cartage::WaitAll(all));
    } else {
      CARTAGE_CHECK_OK(w.Recv(nullptr, 0, 1, kControlTag + 1));
      for (int t = depth - 1; t >= 0; --t) CARTAGE_CHECK_OK(w.Send(&bufs[t], sizeof(double), 1, t));
    }
  } else {
    if (w.rank() == 1) {
      CARTAGE_CHECK_OK(w.Recv(nullptr, 0, 0, kControlTag + 1));
      start = Clock::now();
      for (int t = depth - 1; t >= 0; --t) CARTAGE_CHECK_OK(w.Irecv(&bufs[t], sizeof(double), source, t, &reqs[t]));
      CARTAGE_CHECK_OK(cartage::WaitAll(all));
    } else {
      for (int t = 0; t < depth; ++t) CARTAGE_CHECK_OK(w.Send(&bufs[t], sizeof(double), 1, t));
      CARTAGE_CHECK_OK(w.Send(nullptr, 0, 1, kControlTag + 1));
    }
  }
  double us = 0;
  if (w.rank() == 1) {
    us = Seconds(start, Clock::now()) * 1e6 / depth;
    CARTAGE_CHECK_OK(w.Send(&us, sizeof(us), 0, kControlTag + 2));
    return 0;
  }
  CARTAGE_CHECK_OK(w.Recv(&us, sizeof(us), 1, kControlTag + 2));
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("cartage run -n 2 cartage-bench TEST [--sizes ...] [--reps N] [--json]");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string test = args.size() > 1 ? args[1] : "";
  if (test == "list") {
    for (const char* t : kTests) std::printf("%s\n", t);
    return 0;
  }
  if (std::find(std::begin(kTests), std::end(kTests), test) == std::end(kTests)) {
    std::fprintf(stderr, "usage: cartage run -n 2 cartage-bench %s [--sizes 8,65536] [--reps 7] [--json]\n",
                 absl::StrJoin(kTests, "|").c_str());
    return 2;
  }
  std::vector<std::size_t> sizes;
  if (test == "rate") sizes = {8};
  if (IsMatching(test)) sizes = {1000, 10000};
  if (!absl::GetFlag(FLAGS_sizes).empty()) {
    sizes.clear();
    for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
      std::size_t v;
      if (!absl::SimpleAtoi(s, &v) || (IsMatching(test) && (v < 1 || v >= kControlTag))) {
        std::fprintf(stderr, "cartage-bench: bad size '%s'\n", std::string(s).c_str());
        return 2;
      }
      sizes.push_back(v);
    }
  } else if (sizes.empty()) {
    sizes = {0, 8, 64, 1024, 8192, 65536, 1 << 20, 4 << 20};
    if (test != "pingpong") sizes.erase(sizes.begin());
  }
  const int reps = std::max(1, absl::GetFlag(FLAGS_reps));
  const bool json = absl::GetFlag(FLAGS_json);

  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "cartage-bench: %s\n", std::string(agent.status().message()).c_str());
    return 1;
  }
  const Comm world = (*agent)->World();
  if (IsCollective(test)) {
    if (absl::GetFlag(FLAGS_sizes).empty()) {
      sizes = test == "barrier" ? std::vector<std::size_t>{0}
                                : std::vector<std::size_t>{8, 64, 1024, 8192, 65536, 1 << 20, 4 << 20};
    }
    BenchCollective(world, test, sizes, reps, json, absl::GetFlag(FLAGS_target_s));
    return 0;
  }
  if (world.size() < 2) {
    std::fprintf(stderr, "cartage-bench: needs 2 ranks: cartage run -n 2 cartage-bench %s\n", test.c_str());
    return 2;
  }
  if (world.rank() > 1) return 0;
  cartage::bench::SharedPage page(world);
  const std::string method = (*agent)->method_for(1 - (*agent)->rank());
  const char* key = test == "pingpong" || IsMatching(test) || IsRmaLatency(test) ? "median_us"
                    : test == "rate"                       ? "median_msgs_per_s"
                                                           : "median_MBps";
  if (world.rank() == 0 && !json) {
    std::printf("# cartage-bench %s, method %s, %d reps; median [min-max]; hand-off = one-way cache-line transfer\n",
                test.c_str(), method.c_str(), reps);
    std::printf("%10s %14s %24s %12s %10s %12s\n", IsMatching(test) ? "queue" : "bytes", key, "[min-max]",
                "handoff_ns", "handoffs", "allocs/op");
  }
  for (std::size_t bytes : sizes) {
    Buffer buf(std::max<std::size_t>(bytes, 1), 'x');
    Buffer rbuf(test == "bibw" || test == "pingpong" || test == "get_lat" ? buf.size() : 0);
    const double handoff = HandOffNs(world, page);
    const double cma_probe =
        (test == "bw" || test == "put_bw") && bytes >= 65536 ? CmaProbeMBps(world, buf, bytes) : 0;
    Buffer exposed(IsRma(test) && absl::GetFlag(FLAGS_window) == "create" ? std::max<std::size_t>(bytes, 8) : 0);
    std::vector<double> values;
    values.reserve(static_cast<std::size_t>(reps));
    uint64_t allocs_before = 0;
    uint64_t ops = 0;
    if (IsMatching(test)) {
      const int depth = static_cast<int>(bytes);
      std::vector<Request> reqs(bytes);
      std::vector<Request*> ptrs(bytes);
      std::vector<double> bufs(bytes);
      for (std::size_t i = 0; i < bytes; ++i) ptrs[i] = &reqs[i];
      (void)RunMatching(world, test, depth, reqs, ptrs, bufs);  // warm-up
      allocs_before = g_allocations.load();
      for (int r = 0; r < reps; ++r) values.push_back(RunMatching(world, test, depth, reqs, ptrs, bufs));
      ops = static_cast<uint64_t>(reps) * bytes;
    } else {
      const int iters = Iterations(test, bytes);
      if (IsRma(test)) {
        auto made = exposed.empty() ? cartage::Window::Allocate(world, std::max<std::size_t>(bytes, 8), 1)
                                    : cartage::Window::Create(world, exposed.data(), exposed.size(), 1);
        CARTAGE_CHECK_OK(made.status());
        g_window = *std::move(made);
        CARTAGE_CHECK_OK(g_window->Fence());  // an epoch closed before the locks (its exchange made the window whole)
        CARTAGE_CHECK_OK(g_window->Fence());
      }
      char* recv_into = test == "bibw" || test == "pingpong" || test == "get_lat" ? rbuf.data() : buf.data();
      (void)Run(world, test, buf, recv_into, bytes, std::max(1, iters / 5));  // warm-up
      allocs_before = g_allocations.load();
      for (int r = 0; r < reps; ++r) {
        const double secs = Run(world, test, buf, recv_into, bytes, iters);
        if (test == "pingpong") values.push_back(secs * 1e6 / (2.0 * iters));
        else if (IsRmaLatency(test)) values.push_back(secs * 1e6 / iters);
        else if (test == "bw" || test == "put_bw")
          values.push_back(static_cast<double>(bytes) * 64 * iters / secs / 1e6);
        else if (test == "bibw") values.push_back(2.0 * static_cast<double>(bytes) * 64 * iters / secs / 1e6);
        else values.push_back(64.0 * iters / secs);
      }
      ops = static_cast<uint64_t>(reps) * static_cast<uint64_t>(iters) *
            (test == "pingpong" ? 2 : test == "bibw" ? 128 : IsRmaLatency(test) ? 1 : 64);
      if (g_window != nullptr) {
        CARTAGE_CHECK_OK(g_window->Free());
        g_window.reset();
      }
    }
    const double allocs_per_op = static_cast<double>(g_allocations.load() - allocs_before) / static_cast<double>(ops);
    if (world.rank() != 0) continue;
    const Stats s = Summarize(values);
    const double handoffs = test == "pingpong" ? s.median * 1000 / handoff : 0;
    if (json) {
      std::printf("{\"test\":\"%s\",\"size\":%zu,\"%s\":%.6g,\"min\":%.6g,\"max\":%.6g,\"reps\":%d,"
                  "\"ranks\":%d,\"method\":\"%s\",\"handoff_ns\":%.1f,\"heap_allocs_per_op\":%.4g%s%s}\n",
                  test.c_str(), bytes, key, s.median, s.min, s.max, reps, world.size(), method.c_str(), handoff,
                  allocs_per_op,
                  cma_probe > 0 ? absl::StrFormat(",\"cma_probe_MBps\":%.6g", cma_probe).c_str() : "",
                  test == "pingpong" ? absl::StrFormat(",\"median_handoffs\":%.2f", handoffs).c_str() : "");
    } else {
      std::printf("%10zu %14.4g %24s %12.1f %10s %12.4g%s\n", bytes, s.median,
                  absl::StrFormat("[%.4g-%.4g]", s.min, s.max).c_str(), handoff,
                  test == "pingpong" ? absl::StrFormat("%.2f", handoffs).c_str() : "-", allocs_per_op,
                  cma_probe > 0 ? absl::StrFormat("   (one process_vm_readv copy: %.4g MB/s)", cma_probe).c_str() : "");
    }
    std::fflush(stdout);
  }
  return 0;
}
