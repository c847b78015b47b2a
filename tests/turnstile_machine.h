// A small machine for the fsm tests: a coin-operated turnstile.
#ifndef CARTAGE_TESTS_TURNSTILE_MACHINE_H_
#define CARTAGE_TESTS_TURNSTILE_MACHINE_H_

#include <array>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "fsm/machine.h"

namespace cartage::test {

struct Turnstile {
  fsm::StateWord state;
  uint64_t id = 0;
  int coins = 0;
  int passes = 0;
  Turnstile* partner = nullptr;  // gets a `coin` raised when this one is pushed
  std::vector<std::string>* log = nullptr;
};

struct TurnstileDef {
  enum class State : uint8_t { kLocked, kUnlocked, kBroken, kCount };
  enum class Event : uint8_t { kCoin, kPush, kKick, kCount };
  using Context = Turnstile;
  using Payload = int;  // coin value
  static constexpr absl::string_view kName = "turnstile";
  static constexpr absl::string_view kSummary = "a coin-operated turnstile";
  static constexpr std::array<absl::string_view, 3> kStates = {"locked", "unlocked", "broken"};
  static constexpr std::array<fsm::EventSpec, 3> kEvents = {{{"coin", fsm::EventKind::kUser},
                                                             {"push", fsm::EventKind::kWire},
                                                             {"kick", fsm::EventKind::kTimer}}};
  static constexpr State kInitial = State::kLocked;
  static constexpr std::array kFinal = {State::kBroken};
  static fsm::StateWord& Cell(Turnstile& t) { return t.state; }
  static uint64_t IdOf(const Turnstile& t) { return t.id; }
};

namespace turnstile {
using S = TurnstileDef::State;
using E = TurnstileDef::Event;
inline bool PaidEnough(const Turnstile&, const int& value) { return value >= 2; }
// The test's log, out of line: an action's hot part stays small enough to
// be compiled into its row.
[[gnu::noinline, gnu::cold]] inline void Log(const Turnstile& t, const char* what) {
  t.log->push_back(what + std::to_string(t.id));
}
inline void TakeCoin(Turnstile& t, const int&, fsm::EventsOf<TurnstileDef>&) {
  ++t.coins;
  if (t.log) [[unlikely]] Log(t, "take#");
}
void Pass(Turnstile& t, const int&, fsm::EventsOf<TurnstileDef>& events);
inline constexpr fsm::Guard<TurnstileDef> kPaidEnough{"PaidEnough", &PaidEnough};
inline constexpr fsm::Action<TurnstileDef> kTakeCoin{"TakeCoin", &TakeCoin};
inline constexpr fsm::Action<TurnstileDef> kPass{"Pass", &Pass};

// clang-format off
inline constexpr auto kTable = fsm::MakeTable<TurnstileDef>({
// source        event     guard        action     target
  {S::kLocked,   E::kCoin, kPaidEnough, kTakeCoin, S::kUnlocked},
  {S::kLocked,   E::kKick, {},          {},        S::kBroken},
  {S::kUnlocked, E::kCoin, {},          kTakeCoin, S::kUnlocked},
  {S::kUnlocked, E::kPush, {},          kPass,     S::kLocked},
});
// clang-format on
}  // namespace turnstile

using TurnstileMachine = fsm::Machine<TurnstileDef, turnstile::kTable>;

namespace turnstile {
inline void Pass(Turnstile& t, const int&, fsm::EventsOf<TurnstileDef>& events) {
  ++t.passes;
  if (t.log) [[unlikely]] Log(t, "pass#");
  // Run to completion: the partner's coin runs after this transition ends.
  if (t.partner != nullptr) events.Raise<TurnstileMachine>(*t.partner, E::kCoin, 5);
}
}  // namespace turnstile

}  // namespace cartage::test

#endif  // CARTAGE_TESTS_TURNSTILE_MACHINE_H_
