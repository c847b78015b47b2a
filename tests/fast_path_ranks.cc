// The traffic of fast_path_check: two ranks run each kind of small-message
// traffic in an order that does not depend on timing (a rank reads its
// rings only inside its own waits), and print what they received and how
// each call ended, rank by rank. Run with CARTAGE_FAST_PATH=0 and 1 under
// --trace, the outputs must be equal and `cartage trace compare` must find
// the same lives.
//   fast_path_ranks [rounds]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cartage/cartage.h"
#include "cartage/collectives.h"

namespace {

// FNV-1a over `n` bytes: what a receive delivered, in one number.
uint64_t Digest(const void* p, std::size_t n) {
  uint64_t h = 14695981039346656037ull;
  for (std::size_t i = 0; i < n; ++i) {
    h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
  }
  return h;
}

// Bytes that differ by round, size and sender.
std::vector<char> Pattern(std::size_t n, int round, int from) {
  std::vector<char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<char>(i * 7 + static_cast<std::size_t>(round) * 13 + from);
  return v;
}

struct Report {
  int rank;
  void Line(const char* part, const std::string& what) const {
    std::printf("rank %d %s: %s\n", rank, part, what.c_str());
  }
  void Status(const char* part, const absl::Status& s) const {
    Line(part, s.ok() ? std::string("ok") : std::string(absl::StatusCodeToString(s.code())) + " " +
                                                 std::string(s.message()));
  }
};

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 50;
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "fast_path_ranks: %s\n", std::string(agent.status().message()).c_str());
    return 1;
  }
  const cartage::Comm world = (*agent)->World();
  if (world.size() != 2) {
    std::fprintf(stderr, "fast_path_ranks: needs 2 ranks\n");
    return 2;
  }
  const int me = world.rank(), peer = 1 - me;
  const Report out{me};

  // Ping-pong, blocking, eager and rendezvous sizes.
  for (std::size_t bytes : {std::size_t{0}, std::size_t{8}, std::size_t{1024}, std::size_t{65536}}) {
    uint64_t digest = 0;
    for (int i = 0; i < rounds; ++i) {
      std::vector<char> in(bytes);
      const std::vector<char> mine = Pattern(bytes, i, me);
      cartage::ProbeResult got;
      if (me == 0) {
        CARTAGE_CHECK_OK(world.Send(mine.data(), bytes, peer, 1));
        CARTAGE_CHECK_OK(world.Recv(in.data(), bytes, peer, 1, &got));
      } else {
        CARTAGE_CHECK_OK(world.Recv(in.data(), bytes, peer, 1, &got));
        CARTAGE_CHECK_OK(world.Send(mine.data(), bytes, peer, 1));
      }
      if (in != Pattern(bytes, i, peer) || got.source != peer || got.tag != 1 || got.bytes != bytes) {
        out.Line("pingpong", "wrong delivery at round " + std::to_string(i));
        return 1;
      }
      digest ^= Digest(in.data(), in.size()) + static_cast<uint64_t>(i);
    }
    out.Line("pingpong", std::to_string(bytes) + " B digest " + std::to_string(digest));
  }

  // Rate: a window of nonblocking sends, received one by one.
  {
    constexpr int kWindow = 32;
    uint64_t digest = 0;
    for (int i = 0; i < rounds / 10 + 1; ++i) {
      if (me == 0) {
        std::vector<std::vector<char>> bufs;
        std::vector<cartage::Request> reqs(kWindow);
        for (int k = 0; k < kWindow; ++k) bufs.push_back(Pattern(8, i * kWindow + k, me));
        for (int k = 0; k < kWindow; ++k) CARTAGE_CHECK_OK(world.Isend(bufs[k].data(), 8, peer, 2, &reqs[k]));
        for (auto& r : reqs) CARTAGE_CHECK_OK(r.Wait());
        char ack = 0;
        CARTAGE_CHECK_OK(world.Recv(&ack, 1, peer, 3));
      } else {
        for (int k = 0; k < kWindow; ++k) {
          char in[8];
          CARTAGE_CHECK_OK(world.Recv(in, sizeof(in), peer, 2));
          digest ^= Digest(in, sizeof(in)) + static_cast<uint64_t>(k);
        }
        const char ack = 1;
        CARTAGE_CHECK_OK(world.Send(&ack, 1, peer, 3));
      }
    }
    out.Line("rate", "digest " + std::to_string(digest));
  }

  // Unexpected: two messages received in the other order, one small and
  // one past the compact record's size, by tag and by wildcard.
  {
    if (me == 0) {
      const std::vector<char> a = Pattern(8, 1, me), b = Pattern(200, 2, me), c = Pattern(8, 3, me);
      CARTAGE_CHECK_OK(world.Send(a.data(), a.size(), peer, 10));
      CARTAGE_CHECK_OK(world.Send(b.data(), b.size(), peer, 11));
      CARTAGE_CHECK_OK(world.Send(c.data(), c.size(), peer, 12));
    } else {
      std::vector<char> a(8), b(200), c(8);
      cartage::ProbeResult got_c, got_b, got_a;
      CARTAGE_CHECK_OK(world.Recv(c.data(), c.size(), peer, 12, &got_c));
      CARTAGE_CHECK_OK(world.Recv(b.data(), b.size(), cartage::kAnySource, 11, &got_b));
      CARTAGE_CHECK_OK(world.Recv(a.data(), a.size(), cartage::kAnySource, cartage::kAnyTag, &got_a));
      out.Line("unexpected", "tags " + std::to_string(got_c.tag) + "," + std::to_string(got_b.tag) + "," +
                                 std::to_string(got_a.tag) + " from " + std::to_string(got_a.source) + " digest " +
                                 std::to_string(Digest(a.data(), 8) ^ Digest(b.data(), 200) ^ Digest(c.data(), 8)));
    }
  }

  // Truncation: 16 and 4096 bytes into 8.
  for (std::size_t bytes : {std::size_t{16}, std::size_t{4096}}) {
    if (me == 0) {
      const std::vector<char> v = Pattern(bytes, 4, me);
      out.Status("truncated send", world.Send(v.data(), v.size(), peer, 20));
    } else {
      char in[8] = {};
      cartage::ProbeResult got;
      out.Status("truncated recv", world.Recv(in, sizeof(in), peer, 20, &got));
      out.Line("truncated recv", "bytes " + std::to_string(got.bytes) + " digest " +
                                     std::to_string(Digest(in, sizeof(in))));
    }
  }

  // Synchronous: eager and rendezvous sizes.
  for (std::size_t bytes : {std::size_t{8}, std::size_t{65536}}) {
    if (me == 0) {
      const std::vector<char> v = Pattern(bytes, 5, me);
      CARTAGE_CHECK_OK(world.Ssend(v.data(), v.size(), peer, 30));
    } else {
      std::vector<char> in(bytes);
      CARTAGE_CHECK_OK(world.Recv(in.data(), in.size(), peer, 30));
      out.Line("ssend", std::to_string(bytes) + " B digest " + std::to_string(Digest(in.data(), in.size())));
    }
  }

  // Non-contiguous: every other int of 64 (a vector type) each way.
  {
    const cartage::Datatype i32 = cartage::Datatype::Basic(cartage::BasicType::kInt32);
    const cartage::Datatype every_other = *cartage::Datatype::Vector(32, 1, 2, i32);
    std::vector<int32_t> v(64);
    for (int i = 0; i < 64; ++i) v[static_cast<std::size_t>(i)] = me == 0 ? i * 3 : -1;
    if (me == 0) {
      CARTAGE_CHECK_OK(world.Send(v.data(), 1, every_other, peer, 40));
    } else {
      cartage::ProbeResult got;
      CARTAGE_CHECK_OK(world.Recv(v.data(), 1, every_other, peer, 40, &got));
      out.Line("vector", "bytes " + std::to_string(got.bytes) + " digest " + std::to_string(Digest(v.data(), 256)));
    }
  }

  // Cancel: a receive nothing answers, then refusals that reach no CAR.
  {
    char in[8];
    cartage::Request r;
    CARTAGE_CHECK_OK(world.Irecv(in, sizeof(in), peer, 50, &r));
    out.Status("cancel", r.Cancel());
    out.Status("cancelled wait", r.Wait());
    out.Status("bad rank", world.Send(in, sizeof(in), 5, 0));
    out.Status("bad tag", world.Recv(in, sizeof(in), peer, -7));
  }

  // Collectives, on the agent's own schedules.
  {
    const cartage::Datatype i64 = cartage::Datatype::Basic(cartage::BasicType::kInt64);
    const cartage::Op sum(cartage::OpKind::kSum);
    CARTAGE_CHECK_OK(cartage::Barrier(world));
    int64_t x = me + 1, total = 0;
    CARTAGE_CHECK_OK(cartage::Allreduce(world, &x, &total, 1, i64, sum));
    std::vector<int64_t> word(1024, me == 1 ? 77 : 0);
    CARTAGE_CHECK_OK(cartage::Bcast(world, word.data(), 1024, i64, 1));
    CARTAGE_CHECK_OK(cartage::Barrier(world));
    out.Line("collectives", "allreduce " + std::to_string(total) + " bcast " + std::to_string(word[1023]));
  }
  return 0;
}
