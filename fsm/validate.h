// Validation of a state-machine table's shape: the rules every machine obeys.
//
// The same constexpr function runs at compile time (Table's constructor, so a
// bad table fails `static_assert(kTable.validation().ok())`) and at
// registration time on a type-erased MachineInfo (so the error names the
// machine, state and event in words).
//
//   constexpr Validation v = ValidateShape(rows, n_states, n_events, initial, is_final);
//   static_assert(v.problem == Problem::kNone);
#ifndef CARTAGE_FSM_VALIDATE_H_
#define CARTAGE_FSM_VALIDATE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include "absl/strings/string_view.h"

namespace cartage::fsm {

// Most states and events a machine may declare (they index 8-bit fields).
inline constexpr std::size_t kMaxStates = 64;
inline constexpr std::size_t kMaxEvents = 64;

// What is wrong with a table; kNone when nothing is.
enum class Problem : uint8_t {
  kNone,
  kEmpty,              // no transitions at all
  kTooBig,             // more states or events than kMaxStates / kMaxEvents
  kNoFinalState,       // no state is final: nothing can ever complete
  kInitialIsFinal,     // the machine would be done before it started
  kBadIndex,           // a row names a state or event outside the enums
  kUnreachable,        // `state` cannot be reached from the initial state
  kDeadEnd,            // non-final `state` has no outgoing transition
  kNoPathToFinal,      // from `state` no final state can be reached
  kAmbiguous,          // two unguarded rows for (`state`, `event`)
  kShadowed,           // `row` follows an unguarded row for the same pair: never taken
  kFinalHasExit,       // final `state` has an outgoing row
};

// The words for a Problem ("unreachable state", ...), shared by messages and tests.
absl::string_view ProblemName(Problem p);

// The outcome of validation: the first problem found and where.
struct Validation {
  Problem problem = Problem::kNone;
  uint8_t state = 0;  // the state concerned, where there is one
  uint8_t event = 0;  // the event concerned, where there is one
  uint16_t row = 0;   // the row concerned (index in the caller's order), where there is one
  constexpr bool ok() const { return problem == Problem::kNone; }
};

// One row reduced to what the rules look at.
struct ShapeRow {
  uint8_t source = 0;
  uint8_t event = 0;
  uint8_t target = 0;
  bool guarded = false;
};

// Checks the rules in the order of Problem's declaration and reports the first
// violation. `is_final[s]` says whether state s is final.
constexpr Validation ValidateShape(std::span<const ShapeRow> rows, std::size_t n_states,
                                   std::size_t n_events, uint8_t initial,
                                   std::span<const bool> is_final) {
  if (rows.empty()) return {Problem::kEmpty};
  if (n_states > kMaxStates || n_events > kMaxEvents || is_final.size() < n_states) {
    return {Problem::kTooBig};
  }
  bool any_final = false;
  for (std::size_t s = 0; s < n_states; ++s) any_final = any_final || is_final[s];
  if (!any_final) return {Problem::kNoFinalState};
  if (initial >= n_states) return {Problem::kBadIndex, initial};
  if (is_final[initial]) return {Problem::kInitialIsFinal, initial};
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const ShapeRow& r = rows[i];
    if (r.source >= n_states || r.target >= n_states || r.event >= n_events) {
      return {Problem::kBadIndex, r.source, r.event, static_cast<uint16_t>(i)};
    }
  }

  // Forward reachability from the initial state.
  std::array<bool, kMaxStates> reached{};
  reached[initial] = true;
  for (bool grew = true; grew;) {
    grew = false;
    for (const ShapeRow& r : rows) {
      if (reached[r.source] && !reached[r.target]) reached[r.target] = grew = true;
    }
  }
  for (std::size_t s = 0; s < n_states; ++s) {
    if (!reached[s]) return {Problem::kUnreachable, static_cast<uint8_t>(s)};
  }

  // Every non-final state has a way out, and that way leads to a final state.
  std::array<bool, kMaxStates> has_exit{};
  for (const ShapeRow& r : rows) has_exit[r.source] = true;
  for (std::size_t s = 0; s < n_states; ++s) {
    if (!is_final[s] && !has_exit[s]) return {Problem::kDeadEnd, static_cast<uint8_t>(s)};
  }
  std::array<bool, kMaxStates> reaches_final{};
  for (std::size_t s = 0; s < n_states; ++s) reaches_final[s] = is_final[s];
  for (bool grew = true; grew;) {
    grew = false;
    for (const ShapeRow& r : rows) {
      if (reaches_final[r.target] && !reaches_final[r.source]) reaches_final[r.source] = grew = true;
    }
  }
  for (std::size_t s = 0; s < n_states; ++s) {
    if (!reaches_final[s]) return {Problem::kNoPathToFinal, static_cast<uint8_t>(s)};
  }

  // Per (state, event): at most one unguarded row, and it comes last.
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].guarded) continue;
    for (std::size_t j = i + 1; j < rows.size(); ++j) {
      if (rows[j].source != rows[i].source || rows[j].event != rows[i].event) continue;
      const Problem p = rows[j].guarded ? Problem::kShadowed : Problem::kAmbiguous;
      return {p, rows[j].source, rows[j].event, static_cast<uint16_t>(j)};
    }
  }

  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (is_final[rows[i].source]) {
      return {Problem::kFinalHasExit, rows[i].source, rows[i].event, static_cast<uint16_t>(i)};
    }
  }
  return {};
}

}  // namespace cartage::fsm

#endif  // CARTAGE_FSM_VALIDATE_H_
