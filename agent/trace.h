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

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fsm/trace_file.h"
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

  // Writes what the ring holds now; `why` goes in the file's end line. A
  // dump from another thread than the rank's own (a signal, the watchdog)
  // asks that thread to list its live CARs, and waits for the list a short
  // while: a rank waiting inside cartage answers (AnswerLive) within its
  // peer-check period; one computing in its own code does not, and its file
  // says so.
  // `listed`, where given, says whether the live CARs were listed.
  absl::Status Dump(const char* why, bool* listed = nullptr);

  // How the rank's thread lists its live CARs (null: it cannot now). Set and
  // called on that thread only.
  using LiveLister = std::function<void(std::vector<fsm::LiveCar>&)>;
  void SetLiveLister(LiveLister lister);
  // Called by the rank's thread as it waits: lists its live CARs if a dump asked.
  void AnswerLive();

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
