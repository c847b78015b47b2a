// The job's exchange through PMIx, as Open MPI's `mpirun` (PRRTE) and
// Slurm's `srun --mpi=pmix` serve it, by Debian's libpmix: rank and size
// from the job's data, Put + Commit, a fence that collects every rank's
// data, and GetFrom the rank that put a key (PMIx keeps each rank's values
// apart; it will not search them all for one).
// Built where libpmix is (CARTAGE_HAVE_PMIX).
#ifndef CARTAGE_AGENT_PMIX_H_
#define CARTAGE_AGENT_PMIX_H_

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "methods/host.h"

struct pmix_info;  // libpmix's pmix_info_t, kept out of this header

namespace cartage::agent {

class PmixExchange : public methods::Exchange {
 public:
  // Whether the environment names a PMIx server (PMIX_RANK and its URI).
  static bool Offered() {
    return std::getenv("PMIX_RANK") != nullptr &&
           (std::getenv("PMIX_SERVER_URI41") != nullptr || std::getenv("PMIX_SERVER_URI4") != nullptr ||
            std::getenv("PMIX_SERVER_URI3") != nullptr || std::getenv("PMIX_SERVER_URI21") != nullptr ||
            std::getenv("PMIX_SERVER_URI2") != nullptr || std::getenv("PMIX_SERVER_URI") != nullptr);
  }
  static absl::StatusOr<std::unique_ptr<PmixExchange>> FromEnvironment();
  ~PmixExchange() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& job_id() const override { return job_id_; }
  std::vector<int> HostRanks() const override { return host_ranks_; }
  absl::Status Put(absl::string_view key, absl::string_view value) override;
  absl::Status Fence() override;
  absl::Status FenceWhile(absl::FunctionRef<int()> progress) override;
  // Every rank's store in turn: callers that know who put a key use GetFrom.
  absl::StatusOr<std::string> Get(absl::string_view key) override;
  absl::StatusOr<std::string> GetFrom(int from, absl::string_view key) override;

 private:
  PmixExchange() = default;
  absl::Status Commit();
  absl::Status CollectInfo(::pmix_info& info) const;
  int rank_ = 0;
  int size_ = 1;
  std::string job_id_;
  std::vector<int> host_ranks_;
  struct Proc;
  std::unique_ptr<Proc> me_;  // this rank's pmix_proc_t, kept out of the header
  bool committed_ = true;     // nothing put since the last commit
  // An abandoned fence's completion flag: libpmix may still set it until
  // PMIx_Finalize.
  struct FenceDone;
  std::vector<std::unique_ptr<FenceDone>> abandoned_fences_;
};

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_PMIX_H_
