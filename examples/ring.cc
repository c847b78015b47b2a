// ring: a token goes around the ranks `laps` times; each rank adds its rank
// to it, so rank 0 can check the sum when it comes back. Then every rank
// exchanges a block of doubles with both neighbours and checks what arrived.
// usage: ring [laps] [doubles]
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/types/span.h"
#include "cartage/cartage.h"

int main(int argc, char** argv) {
  const int laps = argc > 1 ? std::atoi(argv[1]) : 10;
  const std::size_t n = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024;
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "ring: %s\n", std::string(agent.status().message()).c_str());
    return 1;
  }
  cartage::Comm world = (*agent)->World();
  const int me = world.rank(), size = world.size();
  const int right = (me + 1) % size, left = (me + size - 1) % size;

  long long token = 0;
  for (int lap = 0; lap < laps; ++lap) {
    if (me == 0) {
      CARTAGE_CHECK_OK(world.Send(&token, sizeof(token), right, 0));
      CARTAGE_CHECK_OK(world.Recv(&token, sizeof(token), left, 0));
    } else {
      CARTAGE_CHECK_OK(world.Recv(&token, sizeof(token), left, 0));
      token += me;
      CARTAGE_CHECK_OK(world.Send(&token, sizeof(token), right, 0));
    }
  }
  const long long expect = static_cast<long long>(laps) * size * (size - 1) / 2;
  if (me == 0) std::printf("token after %d laps: %lld (expected %lld)\n", laps, token, expect);

  std::vector<double> mine(n, me), from_left(n, -1), from_right(n, -1);
  cartage::Request rl, rr, sl, sr;
  CARTAGE_CHECK_OK(world.Irecv(absl::MakeSpan(from_left), left, 1, &rl));
  CARTAGE_CHECK_OK(world.Irecv(absl::MakeSpan(from_right), right, 2, &rr));
  CARTAGE_CHECK_OK(world.Isend(absl::MakeConstSpan(mine), right, 1, &sr));
  CARTAGE_CHECK_OK(world.Isend(absl::MakeConstSpan(mine), left, 2, &sl));
  CARTAGE_CHECK_OK(cartage::WaitAll({&rl, &rr, &sl, &sr}));
  bool ok = me != 0 || token == expect;
  for (std::size_t i = 0; i < n; ++i) ok = ok && from_left[i] == left && from_right[i] == right;
  std::printf("rank %d: exchanged %zu doubles with ranks %d and %d: %s\n", me, n, left, right,
              ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
