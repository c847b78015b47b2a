// The rank program of the thread tests (threads_test.cc): one rank's
// threads use the agent at once, each byte checked.
//
//   thread_ranks multiple T   T threads per rank (CARTAGE_THREADS=multiple, 2 ranks):
//     the conformance kit's threads case at T threads (kit/cases_threads.cc:
//     exchanges of 0 B to 256 KiB on the world with a tag a thread,
//     wildcard receives, matched probes and cancels on a communicator of
//     each thread's own, then Mprobe(any, any) on one shared communicator,
//     each message once); then every thread runs allreduces on its own
//     communicator at once. With CARTAGE_LANES the communicators spread
//     over the lanes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "cartage/cartage.h"
#include "cartage/collectives.h"
#include "kit/cases.h"
#include "kit/check.h"

namespace {

using cartage::Comm;

// Collectives of several threads at once, each on its own communicator.
void Allreduces(const Comm& own, int t) {
  const cartage::Datatype i64 = cartage::Datatype::Basic(cartage::BasicType::kInt64);
  for (int step = 0; step < 20; ++step) {
    const int64_t mine = (own.rank() + 1) * (t + 1) * (step + 1);
    int64_t sum = 0;
    KIT_OK(cartage::Allreduce(own, &mine, &sum, 1, i64, cartage::Op(cartage::OpKind::kSum)));
    KIT_EXPECT(sum == 3 * (t + 1) * (step + 1), "thread %d step %d: allreduce gave %d", t, step, sum);
  }
}

int Multiple(int threads) {
  absl::StatusOr<std::unique_ptr<cartage::Agent>> agent = cartage::Agent::FromEnvironment();
  KIT_OK(agent.status());
  const Comm world = (*agent)->World();
  cartage::kit::t_rank = world.rank();
  KIT_EXPECT(world.size() == 2, "a job of 2 ranks, not %d", world.size());
  if (const char* lanes = std::getenv("CARTAGE_LANES"); lanes != nullptr) {
    KIT_EXPECT(std::to_string((*agent)->lanes()) == lanes, "the agent runs %d lanes, not %s", (*agent)->lanes(), lanes);
  }
  cartage::kit::ThreadsOf(world, **agent, threads);  // checks the level too
  std::vector<Comm> own;
  for (int t = 0; t < threads; ++t) own.push_back(world.Dup().value());
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      cartage::kit::t_rank = world.rank();
      Allreduces(own[static_cast<std::size_t>(t)], t);
    });
  }
  for (std::thread& th : pool) th.join();
  KIT_OK(cartage::Barrier(world));
  KIT_OK((*agent)->Finalize());
  if (world.rank() == 0) std::printf("PASS threads (%d threads a rank)\n", threads);
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
