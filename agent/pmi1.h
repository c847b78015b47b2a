// The job's exchange through PMI-1's wire protocol ("simple" PMI), as MPICH's
// Hydra (`mpiexec.hydra`) and Slurm's pmi1 plugin serve it: the launcher
// passes an inherited socket in PMI_FD and the rank in PMI_RANK, PMI_SIZE;
// each request and reply is one line of `key=value` words.
//
//   cmd=init pmi_version=1 pmi_subversion=1   -> cmd=response_to_init ... rc=0
//   cmd=get_maxes                             -> cmd=maxes kvsname_max= keylen_max= vallen_max=
//   cmd=get_my_kvsname                        -> cmd=my_kvsname kvsname=K
//   cmd=put kvsname=K key=k value=v           -> cmd=put_result rc=0
//   cmd=barrier_in                            -> cmd=barrier_out
//   cmd=get kvsname=K key=k                   -> cmd=get_result rc=0 value=v (rc!=0: none)
//   cmd=finalize                              -> cmd=finalize_ack
//
// A value is percent-encoded (a word may hold no space, newline or '=') and
// split over keys `k`, `k#1`, `k#2`, ... where it exceeds vallen_max; `k`
// says how many parts there are.
#ifndef CARTAGE_AGENT_PMI1_H_
#define CARTAGE_AGENT_PMI1_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/line_channel.h"
#include "methods/host.h"

namespace cartage::agent {

class Pmi1Exchange : public methods::Exchange {
 public:
  // Whether the environment names a PMI-1 launcher (PMI_FD).
  static bool Offered();
  static absl::StatusOr<std::unique_ptr<Pmi1Exchange>> FromEnvironment();
  ~Pmi1Exchange() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& job_id() const override { return job_id_; }
  absl::Status Put(absl::string_view key, absl::string_view value) override;
  absl::Status Fence() override;
  absl::Status FenceWhile(absl::FunctionRef<int()> progress) override;
  absl::StatusOr<std::string> Get(absl::string_view key) override;

  // The `key=value` words of a reply line ("cmd=get_result rc=0 value=x").
  static absl::flat_hash_map<std::string, std::string> Words(absl::string_view line);
  static std::string Encode(absl::string_view value);
  static absl::StatusOr<std::string> Decode(absl::string_view word);

 private:
  Pmi1Exchange(int rank, int size, int fd);
  // Sends `request`, reads the reply and checks its cmd (and rc, where it has one).
  absl::StatusOr<absl::flat_hash_map<std::string, std::string>> Call(absl::string_view request,
                                                                     absl::string_view reply_cmd);
  absl::Status PutWord(absl::string_view key, absl::string_view word);
  absl::StatusOr<std::string> GetWord(absl::string_view key);

  int rank_;
  int size_;
  LineChannel line_;
  std::string kvsname_;
  std::string job_id_;
  std::size_t keylen_max_ = 64;
  std::size_t vallen_max_ = 256;
};

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_PMI1_H_
