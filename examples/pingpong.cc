// pingpong: ranks 0 and 1 bounce a message and rank 0 prints the one-way
// latency (half the round trip) for a few sizes. The benchmark program
// (bench/cartage_bench) measures properly; this one shows the API.
// usage: pingpong [iterations]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cartage/cartage.h"

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 10000;
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "pingpong: %s\n", std::string(agent.status().message()).c_str());
    return 1;
  }
  cartage::Comm world = (*agent)->World();
  if (world.size() < 2) {
    std::fprintf(stderr, "pingpong: needs 2 ranks (cartage run -n 2 pingpong)\n");
    return 1;
  }
  if (world.rank() > 1) return 0;
  const int peer = 1 - world.rank();
  for (std::size_t bytes : {8ul, 1024ul, 65536ul, 1ul << 20}) {
    std::vector<char> buf(bytes, static_cast<char>(world.rank()));
    const int n = bytes >= 65536 ? iters / 10 : iters;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
      if (world.rank() == 0) {
        CARTAGE_CHECK_OK(world.Send(buf.data(), bytes, peer, 0));
        CARTAGE_CHECK_OK(world.Recv(buf.data(), bytes, peer, 0));
      } else {
        CARTAGE_CHECK_OK(world.Recv(buf.data(), bytes, peer, 0));
        CARTAGE_CHECK_OK(world.Send(buf.data(), bytes, peer, 0));
      }
    }
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
    if (world.rank() == 0) std::printf("%8zu bytes: %.3f us one-way\n", bytes, us / n / 2);
  }
  return 0;
}
