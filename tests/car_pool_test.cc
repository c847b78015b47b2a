// CarPool: method-private areas, exhaustion, live tracking, and zero
// allocator calls in steady state (counted by replacing operator new).
#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "car/car.h"
#include "car/car_pool.h"
#include "car/send_fsm.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/counting_new.h"

namespace cartage::car {
namespace {

using datatype::BasicType;
using datatype::Datatype;
using datatype::Op;
using datatype::OpKind;
using ::testing::HasSubstr;

const Vc kVc{.name = "test"};

CarSpec SendSpec(base::Completion* done, void* buf, uint64_t n) {
  CarSpec s;
  s.kind = CarKind::kSend;
  s.flags = CarFlag::kSendData;
  s.envelope = {0, 1, 7};
  s.segment = Segment::Of(buf, n, BasicType::kByte);
  s.counter = done;
  s.vc = &kVc;
  return s;
}

TEST(CarPool, SlotHoldsTheLargestMethodPrivateAreaAligned) {
  CarPool small({.method_private_bytes = 0});
  CarPool big({.method_private_bytes = 200});
  EXPECT_EQ(small.slot_bytes() % 64, 0u);
  EXPECT_EQ(big.slot_bytes(), small.slot_bytes() + 256);
  base::Completion done;
  char buf[8];
  Car* car = *big.Create(SendSpec(&done, buf, 8));
  auto addr = reinterpret_cast<uintptr_t>(car->method_private());
  EXPECT_EQ(addr % 64, 0u);
  EXPECT_GE(addr, reinterpret_cast<uintptr_t>(car) + sizeof(Car));
  // The whole area is usable and does not overlap the next CAR.
  std::fill_n(static_cast<char*>(car->method_private()), 200, 'x');
  Car* next = *big.Create(SendSpec(&done, buf, 8));
  EXPECT_GE(reinterpret_cast<uintptr_t>(next), addr + 200);
  EXPECT_EQ(next->envelope().tag, 7) << "writing the private area clobbered nothing";
  big.Release(car);
  big.Release(next);
}

TEST(CarPool, NewCarsAreFreshAndIdsIncrease) {
  CarPool pool({.cars_per_slab = 4});
  base::Completion done;
  char buf[8];
  Car* a = *pool.Create(SendSpec(&done, buf, 8));
  Car* b = *pool.Create(SendSpec(&done, buf, 8));
  EXPECT_LT(a->id(), b->id());
  EXPECT_EQ(SendMachine::StateOf(*a), SendState::kIdle);
  EXPECT_EQ(a->state_name(), "idle");
  EXPECT_EQ(pool.live(), 2u);
  pool.Release(a);
  Car* c = *pool.Create(SendSpec(&done, buf, 8));
  EXPECT_EQ(c, a) << "LIFO reuse of the hottest slot";
  EXPECT_GT(c->id(), b->id());
  pool.Release(b);
  pool.Release(c);
  EXPECT_EQ(pool.live(), 0u);
}

TEST(CarPool, ExhaustionIsAnErrorNotACrash) {
  CarPool pool({.cars_per_slab = 3, .max_cars = 5});
  base::Completion done;
  char buf[8];
  std::vector<Car*> cars;
  for (int i = 0; i < 5; ++i) cars.push_back(*pool.Create(SendSpec(&done, buf, 8)));
  EXPECT_EQ(pool.capacity(), 5u);
  absl::StatusOr<Car*> more = pool.Create(SendSpec(&done, buf, 8));
  EXPECT_EQ(more.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(more.status().message(), HasSubstr("CAR pool is exhausted (5 live, limit 5)"));
  EXPECT_EQ(pool.Reserve(1).code(), absl::StatusCode::kResourceExhausted);
  pool.Release(cars.back());
  cars.pop_back();
  EXPECT_TRUE(pool.Create(SendSpec(&done, buf, 8)).ok());
  size_t seen = 0;
  pool.ForEachLive([&](const Car& c) {
    ++seen;
    EXPECT_EQ(c.kind(), CarKind::kSend);
  });
  EXPECT_EQ(seen, 5u);
  // The destructor releases what is still live (ASan checks nothing leaks).
}

TEST(CarPool, InvalidSpecTakesNoSlot) {
  CarPool pool({});
  base::Completion done;
  CarSpec bad = SendSpec(&done, nullptr, 0);
  bad.counter = nullptr;
  EXPECT_FALSE(pool.Create(bad).ok());
  EXPECT_EQ(pool.live(), 0u);
}

TEST(CarPool, SteadyStateTouchesNoAllocator) {
  CarPool pool({.method_private_bytes = 64, .cars_per_slab = 64});
  ASSERT_TRUE(pool.Reserve(256).ok());
  base::Completion done;
  char buf[32];
  const CarSpec spec = SendSpec(&done, buf, sizeof(buf));
  std::vector<Car*> window(256);
  // Warm the pool's own bookkeeping once.
  for (Car*& c : window) c = *pool.Create(spec);
  for (Car* c : window) pool.Release(c);

  const long before = cartage::test::g_allocations.load();
  for (int round = 0; round < 2000; ++round) {
    for (Car*& c : window) {
      absl::StatusOr<Car*> got = pool.Create(spec);
      c = got.ok() ? *got : nullptr;
    }
    for (Car* c : window) {
      if (c != nullptr) pool.Release(c);
    }
  }
  const long after = cartage::test::g_allocations.load();
  EXPECT_EQ(after - before, 0) << "steady-state Create/Release allocated";
  EXPECT_EQ(pool.capacity(), 256u);
  EXPECT_EQ(pool.live(), 0u);

  // The counter itself works: growing past the reserve allocates a slab.
  std::vector<Car*> more(300);
  const long grow_before = cartage::test::g_allocations.load();
  for (Car*& c : more) c = *pool.Create(spec);
  EXPECT_GT(cartage::test::g_allocations.load() - grow_before, 0);
  for (Car* c : more) pool.Release(c);
}

void CompleteAtOnce(Car& c, CarEvents& events) { events.Raise<SendMachine>(c, SendEvent::kLocalDone); }

TEST(CarPool, WholeEagerSendFlowTouchesNoAllocator) {
  // Create, post (two transitions and a raised event), complete, release.
  const Vc instant{.name = "instant", .start_eager = &CompleteAtOnce};
  CarPool pool({.method_private_bytes = 64});
  ASSERT_TRUE(pool.Reserve(16).ok());
  base::Completion done;
  char buf[32];
  CarSpec spec = SendSpec(&done, buf, sizeof(buf));
  spec.vc = &instant;
  spec.eager_limit = 4096;
  const long before = cartage::test::g_allocations.load();
  int completed = 0;
  for (int i = 0; i < 10000; ++i) {
    done.pending = 1;
    absl::StatusOr<Car*> car = pool.Create(spec);
    if (!car.ok()) break;
    if (SendMachine::Dispatch(**car, SendEvent::kPost).ok() && done.done()) ++completed;
    pool.Release(*car);
  }
  EXPECT_EQ(cartage::test::g_allocations.load() - before, 0);
  EXPECT_EQ(completed, 10000);
}

}  // namespace
}  // namespace cartage::car
