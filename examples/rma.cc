// One-sided communication: each rank puts its block into its right
// neighbour's window and adds into rank 0's (fence epochs), then takes
// tickets from a counter on rank 0 with fetch_and_op under a shared lock
// (a passive epoch rank 0 does nothing for), each printing what it did.
//
//   cartage run -n 4 examples/rma
#include <cstdio>
#include <vector>

#include "cartage/cartage.h"
#include "cartage/collectives.h"
#include "cartage/rma.h"

int main() {
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "rma: %s\n", agent.status().ToString().c_str());
    return 1;
  }
  const cartage::Comm world = (*agent)->World();
  const int rank = world.rank(), n = world.size();
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;
  const auto dbl = cartage::Datatype::Basic(cartage::datatype::BasicType::kDouble);
  const auto i64 = cartage::Datatype::Basic(cartage::datatype::BasicType::kInt64);
  const cartage::datatype::Op sum(cartage::datatype::OpKind::kSum);
  constexpr int kBlock = 1000;

  // A window of 2 blocks of doubles a rank: the left neighbour's block,
  // then everyone's sum (on rank 0).
  auto made = cartage::Window::Allocate(world, 2 * kBlock * sizeof(double), sizeof(double));
  CARTAGE_CHECK_OK(made.status());
  cartage::Window& win = **made;
  auto* mem = static_cast<double*>(win.base());
  std::vector<double> mine(kBlock);
  for (int i = 0; i < kBlock; ++i) mine[static_cast<std::size_t>(i)] = rank * 1000.0 + i;

  CARTAGE_CHECK_OK(win.Fence());  // opens the epoch
  CARTAGE_CHECK_OK(win.Put(mine.data(), kBlock, dbl, right, 0, kBlock, dbl));
  CARTAGE_CHECK_OK(win.Accumulate(mine.data(), kBlock, dbl, 0, kBlock, kBlock, dbl, sum));
  CARTAGE_CHECK_OK(win.Fence());  // every put and accumulate is done, here and at its target
  std::printf("rank %d: rank %d's block arrived (first %.0f, last %.0f)\n", rank, left, mem[0], mem[kBlock - 1]);
  if (rank == 0) {
    double expect = 0;
    for (int r = 0; r < n; ++r) expect += r * 1000.0 + (kBlock - 1);
    std::printf("rank 0: the sum of every rank's last element is %.0f (expected %.0f)\n", mem[2 * kBlock - 1],
                expect);
  }
  CARTAGE_CHECK_OK(win.Free());

  // A ticket counter on rank 0: three tickets a rank, taken with
  // fetch_and_op inside a shared lock; rank 0 serves while it waits.
  auto counter = cartage::Window::Allocate(world, sizeof(int64_t), sizeof(int64_t));
  CARTAGE_CHECK_OK(counter.status());
  const int64_t one = 1;
  std::vector<int64_t> tickets(3);
  CARTAGE_CHECK_OK((*counter)->Lock(0));
  for (int64_t& t : tickets) CARTAGE_CHECK_OK((*counter)->FetchAndOp(&one, &t, i64, 0, 0, sum));
  CARTAGE_CHECK_OK((*counter)->Unlock(0));
  std::printf("rank %d: took tickets %lld, %lld and %lld\n", rank, static_cast<long long>(tickets[0]),
              static_cast<long long>(tickets[1]), static_cast<long long>(tickets[2]));
  CARTAGE_CHECK_OK(cartage::Barrier(world));
  if (rank == 0) {
    std::printf("rank 0: %lld tickets taken in all\n", static_cast<long long>(*static_cast<int64_t*>((*counter)->base())));
  }
  CARTAGE_CHECK_OK((*counter)->Free());
  return 0;
}
