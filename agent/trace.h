// A traced process (CARTAGE_TRACE=DIR): records every transition of every
// machine and every collective call into a bounded ring (CARTAGE_TRACE_RECORDS
// records, 262144 by default: 48 bytes each, 12 MiB), and writes it to
// DIR/<job>.<rank>.trace at finalize, at exit without finalize, and on
// SIGUSR1 (from a helper thread, so a rank busy in its own code answers),
// and with CARTAGE_WATCHDOG=SECONDS once no transition was recorded for
// that long.
// `cartage trace DIR` reads the files.
#ifndef CARTAGE_AGENT_TRACE_H_
#define CARTAGE_AGENT_TRACE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "methods/host.h"

namespace cartage::agent {

class ProcessTrace {
 public:
  // Null when CARTAGE_TRACE is unset; else a ring installed as the process's
  // trace sink. `exchange` (the job's bootstrap) estimates this rank's clock
  // offset from rank 0's where they run on different hosts.
  static absl::StatusOr<std::unique_ptr<ProcessTrace>> FromEnvironment(methods::Exchange& exchange);
  // Writes the file (end "finalize") and uninstalls the ring.
  ~ProcessTrace();
  ProcessTrace(const ProcessTrace&) = delete;
  ProcessTrace& operator=(const ProcessTrace&) = delete;

  // Writes what the ring holds now; `why` goes in the file's end line.
  absl::Status Dump(const char* why);

  const std::string& path() const { return path_; }

  class State;

 private:
  explicit ProcessTrace(std::unique_ptr<State> state);
  void Watch();  // CARTAGE_WATCHDOG's thread
  std::unique_ptr<State> state_;
  std::string path_;
};

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_TRACE_H_
