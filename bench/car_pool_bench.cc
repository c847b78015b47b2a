// CarPool against the general-purpose allocator for the same slot size.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <new>
#include <vector>

#include "car/car.h"
#include "car/car_pool.h"

namespace {

using namespace cartage::car;
using cartage::datatype::BasicType;

const Vc kVc{.name = "bench"};
// What CarPool's slot holds with a 64-byte method-private area.
constexpr std::size_t kCarBytes = (sizeof(Car) + 63) / 64 * 64;
constexpr std::size_t kSlotBytes = kCarBytes + 64;

CarSpec Spec(cartage::base::Completion* done, char* buf) {
  CarSpec s;
  s.kind = CarKind::kSend;
  s.flags = CarFlag::kSendData;
  s.envelope = {0, 1, 7};
  s.segment = Segment::Of(buf, 8, BasicType::kByte);
  s.counter = done;
  s.vc = &kVc;
  return s;
}

// One CAR at a time: Create (validate + construct) then Release.
void BM_PoolCreateRelease(benchmark::State& state) {
  CarPool pool({.method_private_bytes = static_cast<std::size_t>(state.range(0))});
  (void)pool.Reserve(64);
  cartage::base::Completion done;
  char buf[8];
  const CarSpec spec = Spec(&done, buf);
  for (auto _ : state) {
    Car* c = *pool.Create(spec);
    benchmark::DoNotOptimize(c);
    pool.Release(c);
  }
  state.counters["slot_bytes"] = static_cast<double>(pool.slot_bytes());
}
BENCHMARK(BM_PoolCreateRelease)->Arg(0)->Arg(128)->Name("Pool/create_release/private_bytes");

// A window of 64 CARs in flight, as a bandwidth test keeps them.
void BM_PoolWindow64(benchmark::State& state) {
  CarPool pool({.method_private_bytes = 64});
  (void)pool.Reserve(64);
  cartage::base::Completion done;
  char buf[8];
  const CarSpec spec = Spec(&done, buf);
  Car* window[64];
  for (auto _ : state) {
    for (Car*& c : window) c = *pool.Create(spec);
    benchmark::DoNotOptimize(window);
    for (Car* c : window) pool.Release(c);
  }
  state.SetItemsProcessed(state.iterations() * 64);
}
BENCHMARK(BM_PoolWindow64)->Name("Pool/window64");

// The same Car built with operator new / delete (what a pool-less runtime pays).
void BM_NewDeleteCar(benchmark::State& state) {
  cartage::base::Completion done;
  char buf[8];
  const CarSpec spec = Spec(&done, buf);
  uint64_t id = 0;
  for (auto _ : state) {
    void* mem = ::operator new(kSlotBytes, std::align_val_t{64});
    Car* c = new (mem) Car(spec, ++id, static_cast<char*>(mem) + kCarBytes);
    benchmark::DoNotOptimize(c);
    c->~Car();
    ::operator delete(mem, std::align_val_t{64});
  }
}
BENCHMARK(BM_NewDeleteCar)->Name("Baseline/new_delete_car");

void BM_NewDeleteWindow64(benchmark::State& state) {
  cartage::base::Completion done;
  char buf[8];
  const CarSpec spec = Spec(&done, buf);
  uint64_t id = 0;
  Car* window[64];
  for (auto _ : state) {
    for (Car*& c : window) {
      void* mem = ::operator new(kSlotBytes, std::align_val_t{64});
      c = new (mem) Car(spec, ++id, static_cast<char*>(mem) + kCarBytes);
    }
    benchmark::DoNotOptimize(window);
    for (Car* c : window) {
      c->~Car();
      ::operator delete(c, std::align_val_t{64});
    }
  }
  state.SetItemsProcessed(state.iterations() * 64);
}
BENCHMARK(BM_NewDeleteWindow64)->Name("Baseline/new_delete_window64");

}  // namespace

BENCHMARK_MAIN();
