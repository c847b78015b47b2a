// Checks for the rank programs that tests run under `cartage run`
// (p2p_ranks, coll_ranks): on a failed check the rank prints where and why,
// then exits 1, and the launcher stops the job.
//
//   EXPECT(got == want, "element %d: %d, expected %d", i, got, want);
//   OK(world.Send(...));
#ifndef CARTAGE_TESTS_RANK_CHECK_H_
#define CARTAGE_TESTS_RANK_CHECK_H_

#include <cstdio>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace cartage::test {
// This process's rank, for the messages (set it in main).
inline int g_rank = 0;
}  // namespace cartage::test

#define EXPECT(cond, ...)                                                                              \
  do {                                                                                                 \
    if (!(cond)) {                                                                                     \
      std::fprintf(stderr, "rank %d: %s:%d: %s: %s\n", ::cartage::test::g_rank, __FILE__, __LINE__, \
                   #cond, absl::StrFormat(__VA_ARGS__).c_str());                                       \
      std::exit(1);                                                                                    \
    }                                                                                                  \
  } while (0)
#define OK(expr)                          \
  do {                                    \
    const absl::Status s_ = (expr);       \
    EXPECT(s_.ok(), "%s", s_.ToString()); \
  } while (0)

#endif  // CARTAGE_TESTS_RANK_CHECK_H_
