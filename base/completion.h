// What a waiter waits on: how many pieces of work are still to finish, the
// first error any of them reported, and what they report of a message (its
// bytes, and for a receive its sender and tag). CARs count one down as they
// end; a request, a collective run and a schedule each own one.
//
// Threads: whoever counts down holds the agent's engine lock; a waiter may
// read done() without it. The count is read and written atomically, the
// last count-down releasing what was written before it (status, bytes,
// sender, tag) to the waiter that sees done(). On x86 these are plain loads
// and stores.
#ifndef CARTAGE_BASE_COMPLETION_H_
#define CARTAGE_BASE_COMPLETION_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"

namespace cartage::base {

struct Completion {
  int64_t pending = 0;  // pieces still to finish
  absl::Status status;  // the first error any of them reported
  uint64_t bytes = 0;   // payload bytes delivered or sent
  int32_t source = 0;   // matched sender (receives)
  int32_t tag = 0;      // matched tag (receives)
  bool done() const { return std::atomic_ref<const int64_t>(pending).load(std::memory_order_acquire) == 0; }
  // One piece finished (the engine lock held).
  void CountDown() { Set(pending - 1); }
  // Sets what is left (the engine lock held).
  void Set(int64_t left) { std::atomic_ref<int64_t>(pending).store(left, std::memory_order_release); }
};

}  // namespace cartage::base

#endif  // CARTAGE_BASE_COMPLETION_H_
