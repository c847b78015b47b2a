// Must NOT compile: instantiating a Machine over a table that breaks a rule
// (state 'c' is unreachable). tests/CMakeLists.txt runs the compiler on this
// file and passes only if it fails with the validation message.
#include <array>

#include "fsm/machine.h"

namespace cartage::fsm {
struct Dummy {
  StateWord state;
};
struct BadDef {
  enum class State : uint8_t { kA, kB, kC, kCount };
  enum class Event : uint8_t { kX, kCount };
  using Context = Dummy;
  using Payload = int;
  static constexpr absl::string_view kName = "bad";
  static constexpr absl::string_view kSummary = "bad";
  static constexpr std::array<absl::string_view, 3> kStates = {"a", "b", "c"};
  static constexpr std::array<EventSpec, 1> kEvents = {{{"x", EventKind::kUser}}};
  static constexpr State kInitial = State::kA;
  static constexpr std::array kFinal = {State::kB};
  static StateWord& Cell(Dummy& d) { return d.state; }
  static uint64_t IdOf(const Dummy&) { return 0; }
};
inline constexpr auto kBadTable = MakeTable<BadDef>({
    {BadDef::State::kA, BadDef::Event::kX, {}, {}, BadDef::State::kB},
    {BadDef::State::kC, BadDef::Event::kX, {}, {}, BadDef::State::kB},
});
using BadMachine = Machine<BadDef, kBadTable>;
BadMachine::State Touch(Dummy& d) { return BadMachine::StateOf(d); }
}  // namespace cartage::fsm
