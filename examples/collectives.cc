// Collectives as CAR graphs: a few MPI collectives, a persistent one, and a
// schedule built by hand, each printing what it did.
//
//   cartage run -n 4 examples/collectives
#include <cstdio>
#include <numeric>
#include <vector>

#include "cartage/cartage.h"
#include "cartage/collectives.h"
#include "cartage/schedule.h"

int main() {
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "collectives: %s\n", agent.status().ToString().c_str());
    return 1;
  }
  const cartage::Comm world = (*agent)->World();
  const int rank = world.rank(), n = world.size();
  const auto dbl = cartage::Datatype::Basic(cartage::BasicType::kDouble);
  const auto i32 = cartage::Datatype::Basic(cartage::BasicType::kInt32);
  const cartage::Op sum(cartage::OpKind::kSum);

  // Allreduce: the table picks recursive doubling here (8 KiB).
  std::vector<double> x(1024, rank + 1.0), total(1024);
  CARTAGE_CHECK_OK(cartage::Allreduce(world, x.data(), total.data(), 1024, dbl, sum));
  // Bcast from the last rank, allgather of one int each.
  int word = rank == n - 1 ? 4242 : 0;
  CARTAGE_CHECK_OK(cartage::Bcast(world, &word, 1, i32, n - 1));
  std::vector<int> ranks(static_cast<std::size_t>(n));
  const int mine = rank * rank;
  CARTAGE_CHECK_OK(cartage::Allgather(world, &mine, ranks.data(), 1, i32));

  // A persistent allreduce, started 100 times.
  double in = 0, out = 0;
  cartage::CollectiveCall call;
  call.kind = cartage::Collective::kAllreduce;
  call.send = &in;
  call.recv = &out;
  call.count = 1;
  call.type = dbl;
  call.op = sum;
  cartage::Request req;
  CARTAGE_CHECK_OK(cartage::InitCollective(world, call, &req));
  double checksum = 0;
  for (int i = 0; i < 100; ++i) {
    in = rank * i;
    CARTAGE_CHECK_OK(req.Start());
    CARTAGE_CHECK_OK(req.Wait());
    checksum += out;
  }
  CARTAGE_CHECK_OK(req.Free());

  // A schedule by hand: receive from the left, send to the right, add.
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;
  std::vector<double> v(4, rank), tmp(4);
  cartage::ScheduleBuilder b(world, "ring step");
  const cartage::Buf t = b.Temp(sizeof(double) * 4);
  const auto r = b.Recv(t, sizeof(double) * 4, left);
  const auto s = b.Send(cartage::Buf::User(v.data(), "v"), sizeof(double) * 4, right);
  b.Reduce(t, cartage::Buf::User(v.data(), "v"), 4, dbl, sum, {r, s});
  auto schedule = b.Build();
  CARTAGE_CHECK_OK(schedule.status());
  CARTAGE_CHECK_OK((*schedule)->Run());

  std::printf(
      "rank %d of %d: allreduce sum of (rank+1) = %.0f (%s), bcast from rank %d got %d, allgather of rank^2 = "
      "[%d..%d], persistent allreduce x100 checksum %.0f, hand-built ring step %.0f + %.0f = %.0f (%zu vertices)\n",
      rank, n, total[0], cartage::SelectAlgorithm(cartage::Collective::kAllreduce, 8192, n).c_str(), n - 1, word,
      ranks.front(), ranks.back(), checksum, static_cast<double>(rank), static_cast<double>(left), v[0],
      (*schedule)->vertices().size());
  const double want = n * (n + 1) / 2.0;
  return total[0] == want && word == 4242 && v[0] == rank + left ? 0 : 1;
}
