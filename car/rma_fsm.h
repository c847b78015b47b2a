// car_rma: one transfer a method moves one-sidedly (CarKind::kRma), with
// no receive at the peer: a write of the CAR's segment into the peer's
// memory (SEND_DATA), or a read of the peer's memory into it (RECV_DATA),
// at the address and key the peer exposed (CarSpec::remote). The method's
// start_rma hands it over; the method raises complete once the data is
// where it goes (a write: placed at the peer), or error.
#ifndef CARTAGE_CAR_RMA_FSM_H_
#define CARTAGE_CAR_RMA_FSM_H_

#include <array>
#include "absl/strings/string_view.h"

#include "car/car.h"
#include "car/car_actions.h"
#include "fsm/machine.h"

namespace cartage::car {

struct RmaCarDef : CarMachineBase {
  enum class State : uint8_t { kIdle, kPosted, kDone, kFailed, kCount };
  enum class Event : uint8_t { kPost, kComplete, kError, kCount };
  static constexpr absl::string_view kName = "car_rma";
  static constexpr absl::string_view kSummary =
      "a one-sided write or read the method moves into or out of a peer's exposed memory";
  static constexpr std::array<absl::string_view, 4> kStates = {"idle", "posted", "done", "failed"};
  static constexpr std::array<fsm::EventSpec, 3> kEvents = {{{"post", fsm::EventKind::kUser},
                                                             {"complete", fsm::EventKind::kWire},
                                                             {"error", fsm::EventKind::kWire}}};
  static constexpr State kInitial = State::kIdle;
  static constexpr std::array kFinal = {State::kDone, State::kFailed};
};

namespace rma_car_fsm {
using D = RmaCarDef;
using S = RmaCarDef::State;
using E = RmaCarDef::Event;
using A = CarActions;
inline constexpr fsm::Action<D> kStartRma{"StartRma", &A::StartRma};
inline constexpr fsm::Action<D> kFinishRma{"FinishRma", &A::FinishRma};
inline constexpr fsm::Action<D> kFail{"Fail", &A::FailCar};

// clang-format off
inline constexpr auto kTable = fsm::MakeTable<D>({
// source       event         guard  action      target
  {S::kIdle,    E::kPost,     {},    kStartRma,  S::kPosted},
  {S::kIdle,    E::kError,    {},    kFail,      S::kFailed},
  {S::kPosted,  E::kComplete, {},    kFinishRma, S::kDone},
  {S::kPosted,  E::kError,    {},    kFail,      S::kFailed},
});
// clang-format on
}  // namespace rma_car_fsm

// The dispatcher of car_rma.
using RmaCarMachine = fsm::Machine<RmaCarDef, rma_car_fsm::kTable>;
using RmaCarState = RmaCarDef::State;
using RmaCarEvent = RmaCarDef::Event;

}  // namespace cartage::car

#endif  // CARTAGE_CAR_RMA_FSM_H_
