// hello: every rank says who it is; rank 0 collects a greeting from each.
#include <cstdio>
#include <string>

#include "absl/strings/str_format.h"
#include "cartage/cartage.h"

int main() {
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "hello: %s\n", std::string(agent.status().message()).c_str());
    return 1;
  }
  cartage::Comm world = (*agent)->World();
  if (world.rank() != 0) {
    const std::string msg = absl::StrFormat("hello from rank %d of %d", world.rank(), world.size());
    CARTAGE_CHECK_OK(world.Send(msg.data(), msg.size(), 0, /*tag=*/1));
    return 0;
  }
  // Which method carries each peer: shm on this host, a network method
  // beyond it (as the launcher placed the ranks).
  std::string routes;
  for (int r = 1; r < world.size(); ++r) {
    absl::StrAppendFormat(&routes, "%s%d by %s", r > 1 ? ", " : "", r, (*agent)->method_for(r));
  }
  std::printf("rank 0 of %d: hello (reaching ranks %s)\n", world.size(), routes.empty() ? "none" : routes.c_str());
  for (int i = 1; i < world.size(); ++i) {
    char buf[128];
    cartage::ProbeResult from;
    CARTAGE_CHECK_OK(world.Recv(buf, sizeof(buf), cartage::kAnySource, 1, &from));
    std::printf("rank 0 got %llu bytes from rank %d: %.*s\n",
                static_cast<unsigned long long>(from.bytes), from.source, static_cast<int>(from.bytes), buf);
  }
  return 0;
}
