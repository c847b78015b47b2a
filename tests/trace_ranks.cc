// The rank program of trace_job_test: jobs whose trace is known, and jobs
// that stop in known ways for `cartage why-stuck` to name.
//   trace_ranks deadlock   2 ranks: each receives from the other first (tag 7)
//   trace_ranks buried     the same, with 200 messages exchanged (tag 8) after the receives are posted
//   trace_ranks skipcoll   rank 1 skips the barrier the others enter
//   trace_ranks count      rank 0 passes 2 elements to an allreduce, the others 4
//   trace_ranks stall      a receive nobody answers, then 1.5 s outside cartage, then it is cancelled
//   trace_ranks late       2 ranks: rank 0 waits for a message rank 1 sends after 1.5 s outside cartage
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "cartage/cartage.h"
#include "cartage/collectives.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: trace_ranks deadlock|buried|skipcoll|count|root|stall|late\n");
    return 2;
  }
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "trace_ranks: %s\n", std::string(agent.status().message()).c_str());
    return 1;
  }
  cartage::Comm world = (*agent)->World();
  const std::string mode = argv[1];
  if (mode == "deadlock" && world.size() == 2) {
    char buf[8];
    const int peer = 1 - world.rank();
    CARTAGE_CHECK_OK(world.Recv(buf, sizeof(buf), peer, /*tag=*/7));
    CARTAGE_CHECK_OK(world.Send(buf, sizeof(buf), peer, 7));
    return 0;
  }
  if (mode == "buried" && world.size() == 2) {
    // A small ring (CARTAGE_TRACE_RECORDS) has lost the posts by the time it hangs.
    char buf[8] = {};
    const int peer = 1 - world.rank();
    cartage::Request rq;
    CARTAGE_CHECK_OK(world.Irecv(buf, sizeof(buf), peer, /*tag=*/7, &rq));
    for (int i = 0; i < 100; ++i) {
      if (world.rank() == 0) {
        CARTAGE_CHECK_OK(world.Send(buf, sizeof(buf), peer, 8));
        CARTAGE_CHECK_OK(world.Recv(buf, sizeof(buf), peer, 8));
      } else {
        CARTAGE_CHECK_OK(world.Recv(buf, sizeof(buf), peer, 8));
        CARTAGE_CHECK_OK(world.Send(buf, sizeof(buf), peer, 8));
      }
    }
    CARTAGE_CHECK_OK(rq.Wait());
    return 0;
  }
  if (mode == "skipcoll") {
    if (world.rank() != 1) CARTAGE_CHECK_OK(cartage::Barrier(world));
    return 0;
  }
  if (mode == "count") {
    int in[4] = {1, 2, 3, 4}, out[4] = {};
    const absl::Status s = cartage::Allreduce(world, in, out, world.rank() == 0 ? 2 : 4,
                                              cartage::Datatype::Basic(cartage::datatype::BasicType::kInt32),
                                              cartage::Op(cartage::OpKind::kSum));
    std::printf("rank %d: %s\n", world.rank(), s.ok() ? "ok" : std::string(s.message()).c_str());
    return s.ok() ? 0 : 1;
  }
  if (mode == "root") {  // rank 0 names another root than the others do
    char buf[8] = {};
    const int root = world.rank() == 0 ? 1 : 0;
    CARTAGE_CHECK_OK(cartage::Bcast(world, buf, sizeof(buf), cartage::Datatype::Basic(cartage::datatype::BasicType::kByte),
                                    root));
    return 0;
  }
  if (mode == "late" && world.size() == 2) {
    char buf[8] = {};
    if (world.rank() == 1) {
      ::usleep(1500 * 1000);
      CARTAGE_CHECK_OK(world.Send(buf, sizeof(buf), 0, /*tag=*/5));
    } else {
      CARTAGE_CHECK_OK(world.Recv(buf, sizeof(buf), 1, /*tag=*/5));
    }
    return 0;
  }
  if (mode == "stall") {
    char buf[8];
    cartage::Request rq;
    CARTAGE_CHECK_OK(world.Irecv(buf, sizeof(buf), world.rank(), /*tag=*/99, &rq));
    ::usleep(1500 * 1000);
    CARTAGE_CHECK_OK(rq.Cancel());
    (void)rq.Wait();
    return 0;
  }
  std::fprintf(stderr, "trace_ranks: unknown mode '%s'\n", argv[1]);
  return 2;
}
