// Cost of one table transition: tracing compiled out, hook present but off,
// hook on (recording), and a hand-written switch machine doing the same work
// as the baseline. Also the whole CAR eager-send path (create, post, the
// VC's local completion, release).
#include <memory>
#include <benchmark/benchmark.h>

#include "car/car.h"
#include "car/car_pool.h"
#include "car/send_fsm.h"
#include "fsm/trace.h"
#include "fsm/trace_ring.h"
#include "tests/turnstile_machine.h"

namespace {

using cartage::test::Turnstile;
using cartage::test::TurnstileMachine;
using E = cartage::test::TurnstileDef::Event;

template <cartage::fsm::TraceMode kMode>
void BM_TableDispatch(benchmark::State& state) {
  Turnstile t;
  TurnstileMachine::Reset(t);
  for (auto _ : state) {
    benchmark::DoNotOptimize(TurnstileMachine::Dispatch<kMode>(t, E::kCoin, 2));
    benchmark::DoNotOptimize(TurnstileMachine::Dispatch<kMode>(t, E::kPush, 0));
  }
  benchmark::DoNotOptimize(t.passes);
  state.counters["ns_per_transition"] = benchmark::Counter(
      2.0 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK_TEMPLATE(BM_TableDispatch, cartage::fsm::TraceMode::kCompiledOut)->Name("Dispatch/trace_compiled_out");
BENCHMARK_TEMPLATE(BM_TableDispatch, cartage::fsm::TraceMode::kRuntime)->Name("Dispatch/trace_off");

// The same two transitions where the caller names the state it expects
// (DispatchFrom): the rows are compiled in at the call, no indirect call.
// The CAR paths of a message dispatch this way.
void BM_TableDispatchFrom(benchmark::State& state) {
  using S = cartage::test::TurnstileDef::State;
  Turnstile t;
  TurnstileMachine::Reset(t);
  for (auto _ : state) {
    benchmark::DoNotOptimize(TurnstileMachine::DispatchFrom<S::kLocked, E::kCoin>(t, 2));
    benchmark::DoNotOptimize(TurnstileMachine::DispatchFrom<S::kUnlocked, E::kPush>(t));
  }
  benchmark::DoNotOptimize(t.passes);
  state.counters["ns_per_transition"] = benchmark::Counter(
      2.0 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_TableDispatchFrom)->Name("Dispatch/in_line_rows");

// The hook on, recording into a ring that never fills (cleared per batch).
class CountingSink : public cartage::fsm::TraceSink {
 public:
  void Record(const cartage::fsm::TraceRecord& r) override { last_ = r.time_ns; ++n_; }
  int64_t last_ = 0;
  uint64_t n_ = 0;
};
void BM_TableDispatchTraced(benchmark::State& state) {
  Turnstile t;
  TurnstileMachine::Reset(t);
  CountingSink sink;
  cartage::fsm::ScopedTraceSink on(&sink);
  for (auto _ : state) {
    benchmark::DoNotOptimize(TurnstileMachine::Dispatch(t, E::kCoin, 2));
    benchmark::DoNotOptimize(TurnstileMachine::Dispatch(t, E::kPush, 0));
  }
  benchmark::DoNotOptimize(sink.n_);
  state.counters["ns_per_transition"] = benchmark::Counter(
      2.0 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_TableDispatchTraced)->Name("Dispatch/trace_on");

// Into the ring a traced process records into (CARTAGE_TRACE): the cost of
// tracing on, per transition.
void BM_TableDispatchRing(benchmark::State& state) {
  Turnstile t;
  TurnstileMachine::Reset(t);
  cartage::fsm::TraceRing ring(1 << 16);
  cartage::fsm::ScopedTraceSink on(&ring);
  for (auto _ : state) {
    benchmark::DoNotOptimize(TurnstileMachine::Dispatch(t, E::kCoin, 2));
    benchmark::DoNotOptimize(TurnstileMachine::Dispatch(t, E::kPush, 0));
  }
  state.counters["ns_per_transition"] = benchmark::Counter(
      2.0 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["bytes_per_transition"] = sizeof(cartage::fsm::TraceRecord);
}
BENCHMARK(BM_TableDispatchRing)->Name("Dispatch/trace_ring");

// The same machine written by hand: a switch on (state, event).
struct HandTurnstile {
  uint8_t state = 0;
  int coins = 0, passes = 0;
};
__attribute__((noinline)) bool HandDispatch(HandTurnstile& t, int event, int value) {
  switch (t.state * 3 + event) {
    case 0 * 3 + 0:
      if (value < 2) return false;
      ++t.coins;
      t.state = 1;
      return true;
    case 0 * 3 + 2: t.state = 2; return true;
    case 1 * 3 + 0: ++t.coins; return true;
    case 1 * 3 + 1: ++t.passes; t.state = 0; return true;
    default: return false;
  }
}
void BM_HandWrittenSwitch(benchmark::State& state) {
  HandTurnstile t;
  for (auto _ : state) {
    benchmark::DoNotOptimize(HandDispatch(t, 0, 2));
    benchmark::DoNotOptimize(HandDispatch(t, 1, 0));
  }
  benchmark::DoNotOptimize(t.passes);
  state.counters["ns_per_transition"] = benchmark::Counter(
      2.0 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_HandWrittenSwitch)->Name("Dispatch/hand_written_switch");

// A whole eager send CAR: pool Create (validates the spec), post
// (idle -> eager_in_flight, the VC raises local_done -> done), Release.
void CompleteAtOnce(cartage::car::Car& c, cartage::car::CarEvents& events) {
  events.Raise<cartage::car::SendMachine>(c, cartage::car::SendEvent::kLocalDone);
}
const cartage::car::Vc kInstant{.name = "instant", .start_eager = &CompleteAtOnce};

void BM_CarEagerSend(benchmark::State& state) {
  using namespace cartage::car;
  CarPool pool({.method_private_bytes = 64});
  (void)pool.Reserve(64);
  char buf[8] = {};
  cartage::base::Completion done;
  CarSpec spec;
  spec.kind = CarKind::kSend;
  spec.flags = CarFlag::kSendData;
  spec.envelope = {0, 1, 7};
  spec.segment = Segment::Of(buf, sizeof(buf), cartage::datatype::BasicType::kByte);
  spec.counter = &done;
  spec.vc = &kInstant;
  spec.eager_limit = 4096;
  std::unique_ptr<cartage::fsm::TraceRing> ring;
  if (state.range(0) != 0) ring = std::make_unique<cartage::fsm::TraceRing>(1 << 16);
  cartage::fsm::ScopedTraceSink on(ring.get());
  for (auto _ : state) {
    done.pending = 1;
    Car* car = *pool.Create(spec);
    benchmark::DoNotOptimize(SendMachine::Dispatch(*car, SendEvent::kPost));
    pool.Release(car);
  }
  if (!done.done()) state.SkipWithError("send did not complete");
}
// Two transitions a life (post, local_done); traced: each with its CAR's subject.
BENCHMARK(BM_CarEagerSend)->Name("CarEagerSend/create_post_complete_release")->Arg(0);
BENCHMARK(BM_CarEagerSend)->Name("CarEagerSend/create_post_complete_release_traced")->Arg(1);

}  // namespace

BENCHMARK_MAIN();
