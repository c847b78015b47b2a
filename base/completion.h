// What a waiter waits on: how many pieces of work are still to finish, the
// first error any of them reported, and what they report of a message (its
// bytes, and for a receive its sender and tag). CARs count one down as they
// end; a request, a collective run and a schedule each own one.
#ifndef CARTAGE_BASE_COMPLETION_H_
#define CARTAGE_BASE_COMPLETION_H_

#include <cstdint>

#include "absl/status/status.h"

namespace cartage::base {

struct Completion {
  int64_t pending = 0;  // pieces still to finish
  absl::Status status;  // the first error any of them reported
  uint64_t bytes = 0;   // payload bytes delivered or sent
  int32_t source = 0;   // matched sender (receives)
  int32_t tag = 0;      // matched tag (receives)
  bool done() const { return pending == 0; }
};

}  // namespace cartage::base

#endif  // CARTAGE_BASE_COMPLETION_H_
