// The rank program of the thread tests (threads_test.cc): one rank's
// threads use the agent at once, each byte checked.
//
//   thread_ranks multiple T   T threads per rank (CARTAGE_THREADS=multiple, 2 ranks):
//     each on a communicator of its own and on the world with its own tag:
//     exchanges of 0 B to 256 KiB (eager and rendezvous), wildcard receives,
//     matched probes, cancels and an allreduce; then every thread takes
//     whatever comes on one shared communicator with Mprobe(any, any), and
//     each message is received exactly once.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "cartage/cartage.h"
#include "cartage/collectives.h"

namespace {

using cartage::Comm;
using cartage::Request;

// Fails the rank: the launcher then fails the job, naming it.
#define T_CHECK(cond, ...)                                                                      \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      std::fprintf(stderr, "FAIL rank %d: %s: %s\n", g_rank, #cond, absl::StrFormat(__VA_ARGS__).c_str()); \
      std::fflush(stderr);                                                                      \
      std::_Exit(1);                                                                            \
    }                                                                                           \
  } while (0)
#define T_OK(expr, what)                                                 \
  do {                                                                   \
    const absl::Status _s = (expr);                                      \
    T_CHECK(_s.ok(), "%s: %s", what, std::string(_s.message()).c_str()); \
  } while (0)

int g_rank = 0;

// The byte at `i` of the message (sender, thread, step) sends.
unsigned char Byte(int sender, int thread, int step, std::size_t i) {
  return static_cast<unsigned char>((sender * 131 + thread * 31 + step * 7 + i * 13 + (i >> 8)) & 0xff);
}
void Fill(std::vector<unsigned char>& v, int sender, int thread, int step) {
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = Byte(sender, thread, step, i);
}
void Expect(const std::vector<unsigned char>& v, std::size_t n, int sender, int thread, int step, const char* what) {
  for (std::size_t i = 0; i < n; ++i) {
    T_CHECK(v[i] == Byte(sender, thread, step, i), "%s: thread %d step %d: byte %d of %d is %d, expected %d", what,
            thread, step, i, n, v[i], Byte(sender, thread, step, i));
  }
}

constexpr std::size_t kSizes[] = {0, 1, 64, 1000, 9000, 70000, 262144};
constexpr int kSteps = 60;
constexpr int kSharedEach = 40;  // messages each thread sends on the shared communicator

void Worker(const Comm& world, const Comm& own, int t) {
  const int me = world.rank();
  const int peer = 1 - me;
  const cartage::Datatype i64 = cartage::Datatype::Basic(cartage::BasicType::kInt64);
  std::vector<unsigned char> out, in;
  for (int step = 0; step < kSteps; ++step) {
    const std::size_t n = kSizes[static_cast<std::size_t>(step + t) % std::size(kSizes)];
    // 1. The world, this thread's tag: a specific exchange.
    out.resize(n);
    in.assign(n + 16, 0xee);
    Fill(out, me, t, step);
    Request r, s;
    T_OK(world.Irecv(in.data(), in.size(), peer, t, &r), "irecv");
    T_OK(world.Isend(out.data(), n, peer, t, &s), "isend");
    T_OK(r.Wait(), "wait recv");
    T_OK(s.Wait(), "wait send");
    T_CHECK(r.bytes() == n && r.source() == peer && r.tag() == t, "world: got %d bytes from %d tag %d", r.bytes(),
            r.source(), r.tag());
    Expect(in, n, peer, t, step, "world");
    T_CHECK(in[n] == 0xee, "world: byte past the message written");
    // 2. Its own communicator: a wildcard receive.
    const int tag = step % 7;
    Fill(out, me, t, step + 1000);
    in.assign(n, 0);
    T_OK(own.Irecv(in.data(), n, cartage::kAnySource, cartage::kAnyTag, &r), "irecv any");
    T_OK(own.Isend(out.data(), n, peer, tag, &s), "isend own");
    T_OK(cartage::WaitAll({&r, &s}), "wait own");
    T_CHECK(r.source() == peer && r.tag() == tag && r.bytes() == n, "wildcard: %d bytes from %d tag %d", r.bytes(),
            r.source(), r.tag());
    Expect(in, n, peer, t, step + 1000, "wildcard");
    // 3. A matched probe, then its receive.
    Fill(out, me, t, step + 2000);
    T_OK(own.Isend(out.data(), n, peer, 100, &s), "isend probed");
    absl::StatusOr<cartage::Message> m = own.Mprobe(cartage::kAnySource, 100);
    T_OK(m.status(), "mprobe");
    T_CHECK(m->source() == peer && m->tag() == 100 && m->bytes() == n, "mprobe found %d bytes from %d tag %d",
            m->bytes(), m->source(), m->tag());
    in.assign(m->bytes(), 0);
    cartage::ProbeResult got;
    T_OK(own.Mrecv(in.data(), in.size(), &*m, &got), "mrecv");
    T_CHECK(!m->valid() && got.bytes == n && got.source == peer && got.tag == 100, "mrecv got %d bytes",
            got.bytes);
    Expect(in, n, peer, t, step + 2000, "mprobe");
    T_OK(s.Wait(), "wait probed send");
    // 4. A receive nobody sends to, cancelled.
    Request never;
    T_OK(own.Irecv(in.data(), in.size(), peer, 999, &never), "irecv never");
    T_OK(never.Cancel(), "cancel");
    const absl::Status cancelled = never.Wait();
    T_CHECK(cancelled.code() == absl::StatusCode::kCancelled, "cancelled receive: %s",
            std::string(cancelled.message()).c_str());
    // 5. Now and then, a collective on its own communicator.
    if (step % 10 == 0) {
      const int64_t mine = (me + 1) * (t + 1) * (step + 1);
      int64_t sum = 0;
      T_OK(cartage::Allreduce(own, &mine, &sum, 1, i64, cartage::Op(cartage::OpKind::kSum)), "allreduce");
      T_CHECK(sum == 3 * (t + 1) * (step + 1), "allreduce: %d", sum);
    }
  }
}

// Every thread sends kSharedEach messages on `shared` and takes as many of
// whatever arrives with Mprobe(any, any): each (thread, seq) once.
void SharedWorker(const Comm& shared, int t, std::vector<std::atomic<int>>& seen) {
  const int me = shared.rank();
  const int peer = 1 - me;
  std::vector<std::vector<unsigned char>> outs(kSharedEach);
  std::vector<Request> sends(kSharedEach);
  for (int k = 0; k < kSharedEach; ++k) {
    const std::size_t n = 8 + kSizes[static_cast<std::size_t>(k + t) % std::size(kSizes)];
    outs[static_cast<std::size_t>(k)].resize(n);
    Fill(outs[static_cast<std::size_t>(k)], me, t, 5000 + k);
    std::memcpy(outs[static_cast<std::size_t>(k)].data(), &k, sizeof(k));  // the seq, then the pattern
    T_OK(shared.Isend(outs[static_cast<std::size_t>(k)].data(), n, peer, t, &sends[static_cast<std::size_t>(k)]),
         "isend shared");
  }
  for (int k = 0; k < kSharedEach; ++k) {
    absl::StatusOr<cartage::Message> m = shared.Mprobe(cartage::kAnySource, cartage::kAnyTag);
    T_OK(m.status(), "mprobe shared");
    std::vector<unsigned char> in(m->bytes());
    const int from_thread = m->tag();
    cartage::ProbeResult got;
    T_OK(shared.Mrecv(in.data(), in.size(), &*m, &got), "mrecv shared");
    T_CHECK(got.bytes >= 8 && got.tag == from_thread && got.source == peer, "shared: %d bytes tag %d", got.bytes,
            got.tag);
    int seq = 0;
    std::memcpy(&seq, in.data(), sizeof(seq));
    T_CHECK(seq >= 0 && seq < kSharedEach, "shared: seq %d", seq);
    std::vector<unsigned char> want(in.size());
    Fill(want, peer, from_thread, 5000 + seq);
    T_CHECK(std::equal(in.begin() + 8, in.end(), want.begin() + 8), "shared: thread %d seq %d: bytes differ",
            from_thread, seq);
    T_CHECK(seen[static_cast<std::size_t>(from_thread * kSharedEach + seq)].fetch_add(1) == 0,
            "shared: thread %d seq %d received twice", from_thread, seq);
  }
  for (Request& s : sends) T_OK(s.Wait(), "wait shared send");
}

int Multiple(int threads) {
  absl::StatusOr<std::unique_ptr<cartage::Agent>> agent = cartage::Agent::FromEnvironment();
  T_OK(agent.status(), "agent");
  g_rank = (*agent)->rank();
  T_CHECK((*agent)->thread_level() == cartage::ThreadLevel::kMultiple, "thread level %s (run with CARTAGE_THREADS=multiple)",
          std::string(cartage::ThreadLevelName((*agent)->thread_level())).c_str());
  const Comm world = (*agent)->World();
  T_CHECK(world.size() == 2, "a job of 2 ranks, not %d", world.size());
  // Communicators are made in one order on every rank, before the threads.
  std::vector<Comm> own;
  for (int t = 0; t < threads; ++t) own.push_back(world.Dup());
  const Comm shared = world.Dup();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { Worker(world, own[static_cast<std::size_t>(t)], t); });
  for (std::thread& th : pool) th.join();
  pool.clear();
  std::vector<std::atomic<int>> seen(static_cast<std::size_t>(threads * kSharedEach));
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { SharedWorker(shared, t, seen); });
  for (std::thread& th : pool) th.join();
  for (std::size_t i = 0; i < seen.size(); ++i) T_CHECK(seen[i].load() == 1, "shared: message %d seen %d times", i, seen[i].load());
  T_OK(cartage::Barrier(world), "barrier");
  T_OK((*agent)->Finalize(), "finalize");
  if (g_rank == 0) std::printf("PASS threads (%d threads a rank)\n", threads);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 3 && std::string(argv[1]) == "multiple") {
    int threads = 0;
    if (!absl::SimpleAtoi(argv[2], &threads) || threads < 1 || threads > 64) return 2;
    return Multiple(threads);
  }
  std::fprintf(stderr, "usage: thread_ranks multiple THREADS\n");
  return 2;
}
