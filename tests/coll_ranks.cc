// The rank side of the collective tests (tests/collectives_test.cc runs each
// mode through `cartage run` at several rank counts). Every result is
// compared byte for byte with a serial reference computed from the inputs,
// which every rank can generate for every other rank; the gaps of
// non-contiguous layouts must keep their sentinel bytes. Rank 0 prints
// "PASS <mode>" when the whole job agrees.
//
// usage: coll_ranks algorithms [COLLECTIVE,...]|persistent|concurrent|selection|types|xfer|burst|reinit|faults sizes|dead|all
// COLL_RANKS_TRACE=1 prints each call before it runs (to find the one that hangs or crashes).
#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/coll_ranks.h"

using cartage::BasicType;
using cartage::Comm;
using cartage::Datatype;
using cartage::Op;
using cartage::OpKind;
namespace kit = cartage::kit;
namespace coll = cartage::test::coll;

// One agent after another in one process: the collectives each runs must be
// its own (a schedule cached by the first must not outlive it or serve the
// second, whose communicators have the same context ids).
int Reinit() {
  for (int round = 0; round < 3; ++round) {
    auto agent = cartage::Agent::FromEnvironment();
    if (!agent.ok()) {
      std::fprintf(stderr, "coll_ranks reinit round %d: %s\n", round, agent.status().ToString().c_str());
      return 1;
    }
    const Comm w = (*agent)->World();
    kit::t_rank = w.rank();
    const int n = w.size();
    for (int64_t count : {int64_t{1}, int64_t{1000}}) {
      std::vector<int32_t> buf(static_cast<std::size_t>(count));
      for (int64_t i = 0; i < count; ++i) buf[static_cast<std::size_t>(i)] = w.rank() == 0 ? round * 7 + static_cast<int32_t>(i) : -1;
      KIT_OK(cartage::Bcast(w, buf.data(), count, Datatype::Basic(BasicType::kInt32), 0));
      for (int64_t i = 0; i < count; ++i) {
        KIT_EXPECT(buf[static_cast<std::size_t>(i)] == round * 7 + i, "reinit round %d bcast of %d: element %d is %d", round,
               count, i, buf[static_cast<std::size_t>(i)]);
      }
      std::vector<int32_t> sum(static_cast<std::size_t>(count), 0);
      for (auto& x : buf) x = w.rank() + round;
      KIT_OK(cartage::Allreduce(w, buf.data(), sum.data(), count, Datatype::Basic(BasicType::kInt32), Op(OpKind::kSum)));
      const int32_t want = n * (n - 1) / 2 + n * round;
      for (int64_t i = 0; i < count; ++i) {
        KIT_EXPECT(sum[static_cast<std::size_t>(i)] == want, "reinit round %d allreduce of %d: element %d is %d, expected %d",
               round, count, i, sum[static_cast<std::size_t>(i)], want);
      }
    }
    KIT_OK(cartage::Barrier(w));
  }
  if (kit::t_rank == 0) std::printf("PASS reinit\n");
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: coll_ranks algorithms [COLLECTIVE,...]|persistent|concurrent|selection|xfer|reinit\n");
    return 2;
  }
  if (std::string(argv[1]) == "reinit") return Reinit();
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "coll_ranks: %s\n", agent.status().ToString().c_str());
    return 1;
  }
  const Comm w = (*agent)->World();
  kit::t_rank = w.rank();
  const std::string mode = argv[1];
  bool closing = true;  // whether the job ends with a barrier
  if (mode == "algorithms") {
    coll::Algorithms(w, argc > 2 ? argv[2] : "");
  } else if (mode == "persistent") {
    coll::Persistent(w);
  } else if (mode == "selection") {
    closing = coll::Selection(w);
  } else if (mode == "concurrent") {
    coll::Concurrent(w);
  } else if (mode == "faults") {
    closing = coll::Faults(w, argc > 2 ? argv[2] : "");
  } else if (mode == "xfer") {
    coll::XferChains(w);
  } else if (mode == "types") {
    coll::TwoTypes(w);
  } else if (mode == "burst") {
    coll::Burst(w);
  } else {
    std::fprintf(stderr, "coll_ranks: unknown mode %s\n", mode.c_str());
    return 2;
  }
  if (!closing) return 0;
  KIT_OK(cartage::Barrier(w));
  if (w.rank() == 0) std::printf("PASS %s\n", mode.c_str());
  return 0;
}
