// The rank side of the bootstrap: who am I, how many are we, and a key-value
// exchange with a fence, served by `cartage run`.
//
//   CARTAGE_ASSIGN_OR_RETURN(auto boot, Bootstrap::FromEnvironment());
//   CARTAGE_RETURN_IF_ERROR(boot->Put("shm.segment", name));
//   CARTAGE_RETURN_IF_ERROR(boot->Fence());
//   CARTAGE_ASSIGN_OR_RETURN(std::string peer, boot->Get("shm.segment.0"));
#ifndef CARTAGE_AGENT_BOOTSTRAP_H_
#define CARTAGE_AGENT_BOOTSTRAP_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/line_channel.h"
#include "methods/host.h"

namespace cartage::agent {

class Bootstrap : public methods::Exchange {
 public:
  // Reads CARTAGE_RANK, CARTAGE_SIZE, CARTAGE_BOOTSTRAP_SOCKET and CARTAGE_JOB_KEY,
  // connects and introduces itself. Without them (a program started by hand)
  // it is a job of one rank whose exchange stays in this process.
  static absl::StatusOr<std::unique_ptr<Bootstrap>> FromEnvironment();
  // A job of one rank whose exchange stays in this process.
  static std::unique_ptr<Bootstrap> Solo();
  ~Bootstrap() override;
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  // A string that names this job (for shared-memory names, logs).
  const std::string& job_id() const override { return job_id_; }

  // Publishes `value` (at most 32 KiB) under `key`; visible to every rank after the next Fence.
  absl::Status Put(absl::string_view key, absl::string_view value) override;
  // Returns once every rank has called Fence.
  absl::Status Fence() override;
  absl::Status FenceWhile(absl::FunctionRef<int()> progress) override;
  // The value published under `key`; kNotFound if nobody did.
  absl::StatusOr<std::string> Get(absl::string_view key) override;
  // Every rank, or as `cartage run --hosts` placed them (CARTAGE_PROCESS_MAPPING).
  std::vector<int> HostRanks() const override {
    return host_ranks_.empty() ? Exchange::HostRanks() : host_ranks_;
  }

 private:
  Bootstrap(int rank, int size, int fd, std::string job_id);
  absl::StatusOr<std::string> Call(absl::string_view request, absl::string_view what);
  // The launcher's next reply line; `progress` runs while none has come
  // (negative: nothing to progress, block).
  absl::StatusOr<std::string> ReadReply(absl::string_view what, absl::FunctionRef<int()> progress);

  int rank_;
  int size_;
  LineChannel line_;  // fd -1: a job of one, served locally
  std::string job_id_;
  std::vector<int> host_ranks_;  // empty: every rank
  class Local;
  std::unique_ptr<Local> local_;
};

// The exchange of the launcher that started this rank: `cartage run`'s
// (CARTAGE_BOOTSTRAP_SOCKET), a PMIx server's (Open MPI's mpirun, srun
// --mpi=pmix), a PMI socket's (Hydra, srun --mpi=pmi2: PMI-1 unless
// CARTAGE_BOOTSTRAP=pmi2), else a job of one rank (a program started by
// hand). CARTAGE_BOOTSTRAP=cartage|pmix|pmi2|pmi1|singleton forces one.
absl::StatusOr<std::unique_ptr<methods::Exchange>> OpenJobExchange();

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_BOOTSTRAP_H_
