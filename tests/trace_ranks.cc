// The rank program of trace_job_test: traffic whose trace is known.
//   trace_ranks deadlock   both ranks receive from the other first (tag 7): a hang
#include <cstdio>
#include <cstring>
#include <string>

#include "cartage/cartage.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: trace_ranks deadlock\n");
    return 2;
  }
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "trace_ranks: %s\n", std::string(agent.status().message()).c_str());
    return 1;
  }
  cartage::Comm world = (*agent)->World();
  if (std::strcmp(argv[1], "deadlock") == 0 && world.size() == 2) {
    char buf[8];
    const int peer = 1 - world.rank();
    std::printf("rank %d receives from rank %d\n", world.rank(), peer);
    std::fflush(stdout);
    CARTAGE_CHECK_OK(world.Recv(buf, sizeof(buf), peer, /*tag=*/7));
    CARTAGE_CHECK_OK(world.Send(buf, sizeof(buf), peer, 7));
    return 0;
  }
  std::fprintf(stderr, "trace_ranks: unknown mode '%s' (or not 2 ranks)\n", argv[1]);
  return 2;
}
