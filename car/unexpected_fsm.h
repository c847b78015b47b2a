// car_unexpected: an arrived message that no posted receive matched yet
// (CarKind::kUnexpected), kept in the global unexpected queue. Its data lands
// in a temporary buffer until a receive matches; then HandOff copies what has
// arrived and the rest lands straight in the user buffer ("if we buffer, you
// suffer", seed 002). A small eager message that waits long among many
// is compacted: its CAR goes, a record of its envelope and bytes stays in
// the matcher, and a new CAR is made from the record when a receive matches
// it (Runtime::CompactUnexpected), so a flood of unexpected messages costs a
// record each rather than a CAR.
#ifndef CARTAGE_CAR_UNEXPECTED_FSM_H_
#define CARTAGE_CAR_UNEXPECTED_FSM_H_

#include <array>
#include "absl/strings/string_view.h"

#include "car/car.h"
#include "car/car_actions.h"
#include "fsm/machine.h"

namespace cartage::car {

struct UnexpectedDef : CarMachineBase {
  enum class State : uint8_t { kNew, kArriving, kBuffered, kRtsHeld, kHandedOff, kDropped, kCompacted, kCount };
  enum class Event : uint8_t { kEnvelope, kData, kEager, kMatch, kError, kCompact, kCount };
  static constexpr absl::string_view kName = "car_unexpected";
  static constexpr absl::string_view kSummary =
      "an unmatched incoming message: buffered, then handed to the receive that matches it";
  static constexpr std::array<absl::string_view, 7> kStates = {
      "new", "arriving", "buffered", "rts_held", "handed_off", "dropped", "compacted"};
  static constexpr std::array<fsm::EventSpec, 6> kEvents = {{
      {"envelope", fsm::EventKind::kWire}, {"data", fsm::EventKind::kWire},
      {"eager", fsm::EventKind::kWire},    {"match", fsm::EventKind::kUser},
      {"error", fsm::EventKind::kWire},    {"compact", fsm::EventKind::kProgress}}};
  static constexpr State kInitial = State::kNew;
  static constexpr std::array kFinal = {State::kHandedOff, State::kDropped, State::kCompacted};
};

namespace unexpected_fsm {
using D = UnexpectedDef;
using S = UnexpectedDef::State;
using E = UnexpectedDef::Event;
using A = CarActions;
inline constexpr fsm::Guard<D> kIsRendezvous{"IsRendezvous", &A::IsRendezvous};
inline constexpr fsm::Guard<D> kIsEmpty{"IsEmpty", &A::IsEmpty};
inline constexpr fsm::Guard<D> kMoreToCome{"MoreToCome", &A::MoreToCome};
inline constexpr fsm::Action<D> kNoteEnvelope{"NoteEnvelope", &A::NoteEnvelope};
inline constexpr fsm::Action<D> kStash{"Stash", &A::Account};
inline constexpr fsm::Action<D> kHandOff{"HandOff", &A::HandOff};
inline constexpr fsm::Action<D> kDrop{"Drop", &A::Drop};
inline constexpr fsm::Guard<D> kFitsTemp{"FitsTemp", &A::FitsTemp};
inline constexpr fsm::Guard<D> kOversize{"Oversize", &A::Oversize};
inline constexpr fsm::Action<D> kStashEager{"StashEager", &A::StashEager};
inline constexpr fsm::Action<D> kDropOversize{"DropOversize", &A::DropOversize};
inline constexpr fsm::Guard<D> kCompactable{"Compactable", &A::Compactable};

// clang-format off
inline constexpr auto kTable = fsm::MakeTable<D>({
// source        event         guard          action         target
  {S::kNew,      E::kEnvelope, kIsRendezvous, kNoteEnvelope, S::kRtsHeld},
  {S::kNew,      E::kEnvelope, kOversize,     kDropOversize, S::kDropped},
  {S::kNew,      E::kEnvelope, kIsEmpty,      kNoteEnvelope, S::kBuffered},
  {S::kNew,      E::kEnvelope, {},            kNoteEnvelope, S::kArriving},
  {S::kNew,      E::kEager,    kFitsTemp,     kStashEager,   S::kBuffered},
  {S::kNew,      E::kEager,    {},            kDropOversize, S::kDropped},
  {S::kArriving, E::kData,     kMoreToCome,   kStash,        S::kArriving},
  {S::kArriving, E::kData,     {},            kStash,        S::kBuffered},
  {S::kArriving, E::kMatch,    {},            kHandOff,      S::kHandedOff},
  {S::kArriving, E::kError,    {},            kDrop,         S::kDropped},
  {S::kBuffered, E::kMatch,    {},            kHandOff,      S::kHandedOff},
  {S::kBuffered, E::kCompact,  kCompactable,  {},            S::kCompacted},
  {S::kRtsHeld,  E::kMatch,    {},            kHandOff,      S::kHandedOff},
  {S::kRtsHeld,  E::kError,    {},            kDrop,         S::kDropped},
});
// clang-format on
}  // namespace unexpected_fsm

// The dispatcher of car_unexpected.
using UnexpectedMachine = fsm::Machine<UnexpectedDef, unexpected_fsm::kTable>;
using UnexpectedState = UnexpectedDef::State;
using UnexpectedEvent = UnexpectedDef::Event;

}  // namespace cartage::car

#endif  // CARTAGE_CAR_UNEXPECTED_FSM_H_
