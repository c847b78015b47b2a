// Every validation rule, proven to fire both at compile time (static_assert
// on a constexpr table) and at registration (the exact words of the error).
#include <array>
#include <initializer_list>

#include "absl/status/status.h"
#include "fsm/machine.h"
#include "fsm/machine_info.h"
#include "fsm/registry.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace cartage::fsm {
namespace {

using ::testing::HasSubstr;

struct Dummy {
  StateWord state;
};

// States a..d, events x, y; a is initial, d final.
struct AbcdDef {
  enum class State : uint8_t { kA, kB, kC, kD, kCount };
  enum class Event : uint8_t { kX, kY, kCount };
  using Context = Dummy;
  using Payload = int;
  static constexpr absl::string_view kName = "abcd";
  static constexpr absl::string_view kSummary = "test";
  static constexpr std::array<absl::string_view, 4> kStates = {"a", "b", "c", "d"};
  static constexpr std::array<EventSpec, 2> kEvents = {{{"x", EventKind::kUser}, {"y", EventKind::kUser}}};
  static constexpr State kInitial = State::kA;
  static constexpr std::array kFinal = {State::kD};
  static StateWord& Cell(Dummy& d) { return d.state; }
  static uint64_t IdOf(const Dummy&) { return 0; }
};
using S = AbcdDef::State;
using E = AbcdDef::Event;
bool Yes(const Dummy&, const int&) { return true; }
constexpr Guard<AbcdDef> kYes{"Yes", &Yes};

// ---- Compile time: the same checker, evaluated by the compiler. ----------

constexpr auto kGood = MakeTable<AbcdDef>({
    {S::kA, E::kX, {}, {}, S::kB},
    {S::kB, E::kX, kYes, {}, S::kC},
    {S::kB, E::kX, {}, {}, S::kD},
    {S::kC, E::kY, {}, {}, S::kD},
});
static_assert(kGood.validation().ok());

constexpr auto kUnreachable = MakeTable<AbcdDef>({
    {S::kA, E::kX, {}, {}, S::kB},
    {S::kB, E::kX, {}, {}, S::kD},
    {S::kC, E::kX, {}, {}, S::kD},
});
static_assert(kUnreachable.validation().problem == Problem::kUnreachable);
static_assert(kUnreachable.validation().state == static_cast<uint8_t>(S::kC));

constexpr auto kDeadEnd = MakeTable<AbcdDef>({
    {S::kA, E::kX, {}, {}, S::kB},
    {S::kA, E::kY, {}, {}, S::kC},
    {S::kB, E::kX, {}, {}, S::kD},
});
static_assert(kDeadEnd.validation().problem == Problem::kDeadEnd);
static_assert(kDeadEnd.validation().state == static_cast<uint8_t>(S::kC));

constexpr auto kTrap = MakeTable<AbcdDef>({
    {S::kA, E::kX, {}, {}, S::kB},
    {S::kA, E::kY, {}, {}, S::kD},
    {S::kB, E::kX, {}, {}, S::kC},
    {S::kC, E::kX, {}, {}, S::kB},
});
static_assert(kTrap.validation().problem == Problem::kNoPathToFinal);
static_assert(kTrap.validation().state == static_cast<uint8_t>(S::kB));

constexpr auto kAmbiguous = MakeTable<AbcdDef>({
    {S::kA, E::kX, {}, {}, S::kB},
    {S::kA, E::kX, {}, {}, S::kC},
    {S::kB, E::kX, {}, {}, S::kD},
    {S::kC, E::kX, {}, {}, S::kD},
});
static_assert(kAmbiguous.validation().problem == Problem::kAmbiguous);
static_assert(kAmbiguous.validation().row == 1);

constexpr auto kShadowed = MakeTable<AbcdDef>({
    {S::kA, E::kX, {}, {}, S::kB},
    {S::kA, E::kX, kYes, {}, S::kC},
    {S::kB, E::kX, {}, {}, S::kD},
    {S::kC, E::kX, {}, {}, S::kD},
});
static_assert(kShadowed.validation().problem == Problem::kShadowed);

constexpr auto kFinalExit = MakeTable<AbcdDef>({
    {S::kA, E::kX, {}, {}, S::kB},
    {S::kB, E::kX, {}, {}, S::kC},
    {S::kC, E::kX, {}, {}, S::kD},
    {S::kD, E::kY, {}, {}, S::kA},
});
static_assert(kFinalExit.validation().problem == Problem::kFinalHasExit);
static_assert(kFinalExit.validation().state == static_cast<uint8_t>(S::kD));

// ---- Registration: the words of each error. -------------------------------

TransitionInfo R(uint8_t source, uint8_t event, uint8_t target, absl::string_view guard = {}) {
  return {source, event, target, guard, {}};
}

MachineInfo Info(std::initializer_list<TransitionInfo> rows, std::vector<bool> is_final = {false, false, false, true},
                 uint8_t initial = 0) {
  MachineInfo m;
  m.name = "abcd";
  m.summary = "test";
  m.states = {"a", "b", "c", "d"};
  m.events = {{"x", EventKind::kUser}, {"y", EventKind::kWire}};
  m.initial = initial;
  m.is_final = std::move(is_final);
  m.transitions = rows;
  return m;
}

absl::Status Register(const MachineInfo& m) {
  Registry reg;
  return reg.Register(m);
}

TEST(FsmValidate, GoodTableRegisters) {
  Registry reg;
  ASSERT_TRUE(reg.Register(Info({R(0, 0, 1), R(1, 0, 2, "G"), R(1, 0, 3), R(2, 1, 3)})).ok());
  ASSERT_NE(reg.Find("abcd"), nullptr);
  EXPECT_EQ(reg.Find("abcd")->transitions.size(), 4u);
  EXPECT_EQ(reg.Find("nope"), nullptr);
}

TEST(FsmValidate, DuplicateNameRejected) {
  Registry reg;
  ASSERT_TRUE(reg.Register(Info({R(0, 0, 1), R(1, 0, 2), R(2, 0, 3)})).ok());
  const absl::Status s = reg.Register(Info({R(0, 0, 1), R(1, 0, 2), R(2, 0, 3)}));
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("'abcd' is already registered"));
}

TEST(FsmValidate, EmptyTable) {
  const absl::Status s = Register(Info({}));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "fsm 'abcd': no transitions: the table has no rows");
}

TEST(FsmValidate, NoFinalState) {
  EXPECT_EQ(Register(Info({R(0, 0, 1)}, {false, false, false, false})).message(),
            "fsm 'abcd': no final state: no state is marked final");
}

TEST(FsmValidate, InitialIsFinal) {
  EXPECT_EQ(Register(Info({R(0, 0, 1)}, {true, false, false, false})).message(),
            "fsm 'abcd': initial state is final: initial state 'a' is final");
}

TEST(FsmValidate, BadIndex) {
  EXPECT_EQ(Register(Info({R(0, 0, 3), R(0, 7, 3)})).message(),
            "fsm 'abcd': state or event out of range: row 1 names a state or event that is not "
            "declared");
}

TEST(FsmValidate, Unreachable) {
  EXPECT_EQ(Register(Info({R(0, 0, 1), R(1, 0, 3), R(2, 0, 3)})).message(),
            "fsm 'abcd': unreachable state: state 'c' cannot be reached from initial state 'a'");
}

TEST(FsmValidate, DeadEnd) {
  EXPECT_EQ(Register(Info({R(0, 0, 1), R(0, 1, 2), R(1, 0, 3)})).message(),
            "fsm 'abcd': dead end: state 'c' is not final and has no transition out");
}

TEST(FsmValidate, NoPathToFinal) {
  EXPECT_EQ(Register(Info({R(0, 0, 1), R(0, 1, 3), R(1, 0, 2), R(2, 0, 1)})).message(),
            "fsm 'abcd': no path to a final state: no final state can be reached from state 'b'");
}

TEST(FsmValidate, Ambiguous) {
  EXPECT_EQ(Register(Info({R(0, 0, 1), R(0, 0, 2), R(1, 0, 3), R(2, 0, 3)})).message(),
            "fsm 'abcd': ambiguous transitions: two unguarded transitions for event 'x' in state "
            "'a' (row 1)");
}

TEST(FsmValidate, Shadowed) {
  EXPECT_EQ(Register(Info({R(0, 0, 1), R(0, 0, 2, "G"), R(1, 0, 3), R(2, 0, 3)})).message(),
            "fsm 'abcd': shadowed transition: row 1 (event 'x' in state 'a') follows an unguarded "
            "row and is never taken");
}

TEST(FsmValidate, FinalHasExit) {
  EXPECT_EQ(Register(Info({R(0, 0, 1), R(1, 0, 2), R(2, 0, 3), R(3, 1, 0)})).message(),
            "fsm 'abcd': final state has a transition: final state 'd' has a transition on event "
            "'y' (row 3)");
}

TEST(FsmValidate, TooBig) {
  MachineInfo m = Info({R(0, 0, 3)});
  m.states.resize(kMaxStates + 1, "s");
  m.is_final.resize(kMaxStates + 1, false);
  EXPECT_THAT(Register(m).message(), HasSubstr("too many states or events: 65 states"));
}

TEST(FsmValidate, GuardedRowsBeforeUnguardedAreFine) {
  EXPECT_TRUE(Register(Info({R(0, 0, 1, "G1"), R(0, 0, 2, "G2"), R(0, 0, 3), R(1, 0, 3), R(2, 0, 3)})).ok());
}

}  // namespace
}  // namespace cartage::fsm
