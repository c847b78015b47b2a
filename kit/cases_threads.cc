// The kit's case for threads: a method under an agent at
// ThreadLevel::kMultiple, where the calls of a rank's threads interleave.
#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "kit/cases.h"
#include "kit/check.h"

namespace cartage::kit {

namespace {

constexpr int kThreads = 4;  // the kit's case; ThreadsOf takes any number
constexpr int kSteps = 24;
constexpr int kShared = 16;  // messages each thread sends on the shared communicator
constexpr std::size_t kSizes[] = {0, 1, 64, 1000, 9000, 70000, 262144};

// What `sender`'s thread `t` sends at `step` (of kind `kind`): its bytes.
uint64_t Seed(int sender, int t, int step, int kind) {
  return (static_cast<uint64_t>(sender) << 40) | (static_cast<uint64_t>(t) << 24) |
         (static_cast<uint64_t>(step) << 4) | static_cast<uint64_t>(kind);
}

void ExpectBytes(const std::vector<unsigned char>& got, std::size_t n, uint64_t seed, const char* what, int t,
                 int step) {
  std::vector<unsigned char> want(n);
  Fill(want, seed);
  KIT_EXPECT(got.size() >= n && (n == 0 || std::memcmp(got.data(), want.data(), n) == 0),
             "%s: thread %d step %d: the %d bytes differ from what was sent", what, t, step, n);
}

// Thread `t`'s steps: a specific exchange on the world, which every thread
// shares (its tag: t), then a wildcard receive, a matched probe and a
// cancel on its own communicator.
void Worker(const Comm& world, const Comm& own, int t) {
  const int me = own.rank();
  const int peer = 1 - me;
  std::vector<unsigned char> out, in;
  for (int step = 0; step < kSteps; ++step) {
    const std::size_t n = kSizes[static_cast<std::size_t>(step + t) % std::size(kSizes)];
    // A specific receive, posted before the send.
    out.resize(n);
    Fill(out, Seed(me, t, step, 0));
    in.assign(n + 8, 0xee);
    Request r, s;
    KIT_OK(world.Irecv(in.data(), in.size(), peer, t, &r));
    KIT_OK(world.Isend(out.data(), n, peer, t, &s));
    KIT_OK(WaitAll({&r, &s}));
    KIT_EXPECT(r.bytes() == n && r.source() == peer && r.tag() == t, "thread %d step %d: %d bytes from %d tag %d", t,
               step, r.bytes(), r.source(), r.tag());
    ExpectBytes(in, n, Seed(peer, t, step, 0), "specific receive", t, step);
    KIT_EXPECT(in[n] == 0xee, "thread %d step %d: a byte past the message was written", t, step);
    // A wildcard receive.
    Fill(out, Seed(me, t, step, 1));
    in.assign(n, 0);
    KIT_OK(own.Irecv(in.data(), n, kAnySource, kAnyTag, &r));
    KIT_OK(own.Isend(out.data(), n, peer, 7, &s));
    KIT_OK(WaitAll({&r, &s}));
    KIT_EXPECT(r.source() == peer && r.tag() == 7, "thread %d step %d: wildcard got source %d tag %d", t, step,
               r.source(), r.tag());
    ExpectBytes(in, n, Seed(peer, t, step, 1), "wildcard receive", t, step);
    // A matched probe and its receive.
    Fill(out, Seed(me, t, step, 2));
    KIT_OK(own.Isend(out.data(), n, peer, 9, &s));
    absl::StatusOr<Message> m = own.Mprobe(kAnySource, 9);
    KIT_OK(m.status());
    KIT_EXPECT(m->bytes() == n && m->source() == peer, "thread %d step %d: mprobe found %d bytes from %d", t, step,
               m->bytes(), m->source());
    in.assign(m->bytes(), 0);
    KIT_OK(own.Mrecv(in.data(), in.size(), &*m));
    ExpectBytes(in, n, Seed(peer, t, step, 2), "matched probe", t, step);
    KIT_OK(s.Wait());
    // A receive nobody sends to, cancelled.
    Request never;
    KIT_OK(own.Irecv(in.data(), in.size(), peer, 99, &never));
    KIT_OK(never.Cancel());
    KIT_EXPECT(never.Wait().code() == absl::StatusCode::kCancelled, "thread %d step %d: the cancelled receive: %s", t,
               step, never.status().ToString());
  }
}

// Every thread sends kShared messages (tag: its index; the first 4 bytes:
// their number) and takes kShared of whatever arrives, by Mprobe(any, any).
void SharedWorker(const Comm& shared, int t, int threads, std::vector<std::atomic<int>>& seen) {
  const int me = shared.rank();
  const int peer = 1 - me;
  std::vector<std::vector<unsigned char>> outs(kShared);
  std::vector<Request> sends(kShared);
  for (int k = 0; k < kShared; ++k) {
    std::vector<unsigned char>& o = outs[static_cast<std::size_t>(k)];
    o.resize(4 + kSizes[static_cast<std::size_t>(k + t) % std::size(kSizes)]);
    Fill(o, Seed(me, t, k, 3));
    std::memcpy(o.data(), &k, 4);
    KIT_OK(shared.Isend(o.data(), o.size(), peer, t, &sends[static_cast<std::size_t>(k)]));
  }
  for (int k = 0; k < kShared; ++k) {
    absl::StatusOr<Message> m = shared.Mprobe(kAnySource, kAnyTag);
    KIT_OK(m.status());
    const int from = m->tag();
    std::vector<unsigned char> in(m->bytes());
    KIT_OK(shared.Mrecv(in.data(), in.size(), &*m));
    KIT_EXPECT(in.size() >= 4 && from >= 0 && from < threads, "shared: %d bytes, tag %d", in.size(), from);
    int seq = 0;
    std::memcpy(&seq, in.data(), 4);
    KIT_EXPECT(seq >= 0 && seq < kShared, "shared: message number %d", seq);
    std::vector<unsigned char> want(in.size());
    Fill(want, Seed(peer, from, seq, 3));
    KIT_EXPECT(std::memcmp(in.data() + 4, want.data() + 4, in.size() - 4) == 0,
               "shared: thread %d's message %d: bytes differ", from, seq);
    KIT_EXPECT(seen[static_cast<std::size_t>(from * kShared + seq)].fetch_add(1) == 0,
               "shared: thread %d's message %d received twice", from, seq);
  }
  for (Request& s : sends) KIT_OK(s.Wait());
}

}  // namespace

void ThreadsOf(const Comm& w, Agent& a, int threads) {
  KIT_EXPECT(a.thread_level() == ThreadLevel::kMultiple, "the agent runs at thread level %s, not multiple",
             ThreadLevelName(a.thread_level()));
  KIT_EXPECT(threads >= 1 && threads < 98, "%d threads", threads);  // tags 0..threads-1 on the world; Ready's 98
  const int rank = w.rank();
  // Communicators are made in one order on both ranks, before the threads.
  std::vector<Comm> own;
  for (int t = 0; t < threads; ++t) own.push_back(DupOf(w));
  const Comm shared = DupOf(w);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      t_rank = rank;
      Worker(w, own[static_cast<std::size_t>(t)], t);
    });
  }
  for (std::thread& th : pool) th.join();
  pool.clear();
  std::vector<std::atomic<int>> seen(static_cast<std::size_t>(threads * kShared));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      t_rank = rank;
      SharedWorker(shared, t, threads, seen);
    });
  }
  for (std::thread& th : pool) th.join();
  for (std::size_t i = 0; i < seen.size(); ++i) {
    KIT_EXPECT(seen[i].load() == 1, "shared: thread %d's message %d arrived %d times", i / kShared, i % kShared,
               seen[i].load());
  }
  Ready(w, 98);
}

void Threads(const Comm& w, Agent& a) { ThreadsOf(w, a, kThreads); }

}  // namespace cartage::kit
