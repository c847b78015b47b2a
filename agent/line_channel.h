// A channel to a launcher over a socket, a line at a time (cartage's own
// bootstrap, PMI-1's wire protocol) or so many bytes (PMI-2's messages):
// write a request, read the reply, running the caller's progress meanwhile.
#ifndef CARTAGE_AGENT_LINE_CHANNEL_H_
#define CARTAGE_AGENT_LINE_CHANNEL_H_

#include <cstddef>
#include <string>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cartage::agent {

class LineChannel {
 public:
  // `fd` (owned, -1: none); `who` names the other end in errors ("the launcher").
  LineChannel(int fd, std::string who, std::size_t max_line) : fd_(fd), who_(std::move(who)), max_line_(max_line) {}
  ~LineChannel();
  LineChannel(const LineChannel&) = delete;
  LineChannel& operator=(const LineChannel&) = delete;

  int fd() const { return fd_; }
  // Writes `line` and a newline.
  absl::Status Write(absl::string_view line);
  // Writes `data` as it is (a length-prefixed protocol such as PMI-2's).
  absl::Status WriteBytes(absl::string_view data);
  // The next line (without its newline). `progress` runs while none has
  // come: negative, nothing to progress (block); 0, idle (nap 1 ms, for
  // ranks that outnumber cores); positive, look again at once;
  // Exchange::kFenceCannotComplete, give up (kAborted). `what` and `rank`
  // name the call in errors.
  absl::StatusOr<std::string> Read(absl::string_view what, int rank, absl::FunctionRef<int()> progress);
  absl::StatusOr<std::string> Read(absl::string_view what, int rank) {
    return Read(what, rank, [] { return -1; });
  }
  // The next `n` bytes (at most the longest line), as Read waits for them.
  absl::StatusOr<std::string> ReadBytes(std::size_t n, absl::string_view what, int rank,
                                        absl::FunctionRef<int()> progress);
  // Best effort, never blocking (a launcher already gone gets nothing).
  void WriteAndClose(absl::string_view line);

 private:
  // Appends what one read brings, running `progress` while nothing comes.
  absl::Status Fill(absl::string_view what, int rank, absl::FunctionRef<int()> progress);

  int fd_;
  std::string who_;
  std::size_t max_line_;
  std::string inbox_;  // bytes read past the last line
};

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_LINE_CHANNEL_H_
