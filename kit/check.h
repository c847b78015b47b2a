// The checks the conformance kit's cases make. A failed check names the
// rank, file and line and what differed, then ends the case: a rank process
// (under `cartage run`) exits 1 and the launcher stops the job; ranks run as
// threads of one test process report through the handler the test installs.
//
//   KIT_EXPECT(got == want, "element %d: %d, expected %d", i, got, want);
//   KIT_OK(world.Send(...));
#ifndef CARTAGE_KIT_CHECK_H_
#define CARTAGE_KIT_CHECK_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "cartage/cartage.h"

namespace cartage::kit {

// This thread's rank, for the messages (a rank process: its only thread).
inline thread_local int t_rank = 0;

// What a failed check does; it never returns. The default prints to stderr
// and exits the process with 1.
using FailureHandler = void (*)(const char* file, int line, const char* condition, const std::string& message);
void SetFailureHandler(FailureHandler handler);
[[noreturn]] void Fail(const char* file, int line, const char* condition, const std::string& message);

// A communicator's duplicate; a failure fails the case.
inline cartage::Comm DupOf(const cartage::Comm& w) {
  absl::StatusOr<cartage::Comm> d = w.Dup();
  if (!d.ok()) Fail(__FILE__, __LINE__, "w.Dup()", d.status().ToString());
  return *std::move(d);
}

}  // namespace cartage::kit

#define KIT_EXPECT(cond, ...)                                                             \
  do {                                                                                    \
    if (!(cond)) ::cartage::kit::Fail(__FILE__, __LINE__, #cond, absl::StrFormat(__VA_ARGS__)); \
  } while (0)
#define KIT_OK(expr)                          \
  do {                                        \
    const absl::Status kit_s_ = (expr);       \
    KIT_EXPECT(kit_s_.ok(), "%s", kit_s_.ToString()); \
  } while (0)

#endif  // CARTAGE_KIT_CHECK_H_
