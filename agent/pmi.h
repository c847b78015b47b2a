// The job's exchange through the PMI wire protocols of MPICH's Hydra
// (`mpiexec.hydra`) and Slurm's pmi2 plugin (`srun --mpi=pmi2`): the
// launcher passes an inherited socket in PMI_FD and the rank in PMI_RANK.
//
// PMI-1 ("simple" PMI): each request and reply is one line of `key=value`
// words separated by spaces.
//
//   cmd=init pmi_version=1 pmi_subversion=1   -> cmd=response_to_init ... rc=0
//   cmd=get_maxes                             -> cmd=maxes kvsname_max= keylen_max= vallen_max=
//   cmd=get_my_kvsname                        -> cmd=my_kvsname kvsname=K
//   cmd=put kvsname=K key=k value=v           -> cmd=put_result rc=0
//   cmd=barrier_in                            -> cmd=barrier_out
//   cmd=get kvsname=K key=k                   -> cmd=get_result rc=0 value=v (rc!=0: none)
//   cmd=finalize                              -> cmd=finalize_ack
//
// PMI-2: after a PMI-1 `cmd=init pmi_version=2 pmi_subversion=0` line, each
// message is its length in six characters, then `key=value;` pairs (a `;`
// inside a value doubled):
//
//   cmd=fullinit;pmirank=R;threaded=FALSE;    -> cmd=fullinit-response;rc=0;rank=;size=;...
//   cmd=job-getid;                            -> cmd=job-getid-response;rc=0;jobid=J;
//   cmd=kvs-put;key=k;value=v;                -> cmd=kvs-put-response;rc=0;
//   cmd=kvs-fence;                            -> cmd=kvs-fence-response;rc=0;
//   cmd=kvs-get;jobid=J;srcid=-1;key=k;       -> cmd=kvs-get-response;rc=0;found=TRUE;value=v;
//   cmd=info-getjobattr;key=k;                -> cmd=info-getjobattr-response;rc=0;found=TRUE;value=v;
//   cmd=finalize;                             -> cmd=finalize-response;rc=0;
//
// A value is percent-encoded (a word may hold no space, newline, `;` or
// `=`) and split over keys `k`, `k#1`, `k#2`, ... where it exceeds the
// launcher's longest value; `k` says how many parts there are. Which ranks
// share a host comes from the launcher's PMI_process_mapping.
#ifndef CARTAGE_AGENT_PMI_H_
#define CARTAGE_AGENT_PMI_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/line_channel.h"
#include "methods/host.h"

namespace cartage::agent {

class PmiExchange : public methods::Exchange {
 public:
  using Words = absl::flat_hash_map<std::string, std::string>;

  // Whether the environment names a PMI launcher (PMI_FD).
  static bool Offered();
  // `version` 1 or 2: the wire protocol to speak.
  static absl::StatusOr<std::unique_ptr<PmiExchange>> FromEnvironment(int version);
  ~PmiExchange() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& job_id() const override { return job_id_; }
  std::vector<int> HostRanks() const override { return host_ranks_; }
  absl::Status Put(absl::string_view key, absl::string_view value) override;
  absl::Status Fence() override;
  absl::Status FenceWhile(absl::FunctionRef<int()> progress) override;
  absl::StatusOr<std::string> Get(absl::string_view key) override;

  // The words of a PMI-1 reply line ("cmd=get_result rc=0 value=x").
  static Words Pmi1Words(absl::string_view line);
  // The pairs of a PMI-2 message body ("cmd=kvs-get-response;rc=0;value=a;;b;").
  static Words Pmi2Words(absl::string_view body);
  static std::string Encode(absl::string_view value);
  static absl::StatusOr<std::string> Decode(absl::string_view word);
  // Each rank's node in a job of `size`, by PMI_process_mapping
  // ("(vector,(node,nodes,ranks per node),...)", its blocks repeated until
  // every rank has a node).
  static absl::StatusOr<std::vector<int>> NodeOfEachRank(absl::string_view mapping, int size);
  // The ranks that share `rank`'s node by that mapping, increasing.
  static absl::StatusOr<std::vector<int>> RanksOnHostOf(absl::string_view mapping, int rank, int size);

 private:
  PmiExchange(int version, int rank, int size, int fd);
  absl::Status Init();
  // Sends `request`, reads the reply and checks its cmd (and rc, where it
  // has one and `check_rc`).
  absl::StatusOr<Words> Call(absl::string_view request, absl::string_view reply_cmd, bool check_rc = true);
  absl::StatusOr<Words> Call2(absl::string_view request, absl::string_view reply_cmd,
                              absl::FunctionRef<int()> progress, bool check_rc = true);
  // `words` of `reply` if its cmd is `reply_cmd` (and, where `check_rc`, its
  // rc, if any, is 0); else an error naming `label`.
  absl::StatusOr<Words> Checked(Words words, absl::string_view reply, absl::string_view label,
                                absl::string_view reply_cmd, bool check_rc) const;
  absl::Status PutWord(absl::string_view key, absl::string_view word);
  // The launcher's value under `key`, or kNotFound; `job_attr`: one of the
  // launcher's own attributes (PMI-2 asks for those apart).
  absl::StatusOr<std::string> GetWord(absl::string_view key, bool job_attr = false);
  absl::Status FenceOnce(absl::FunctionRef<int()> progress);

  int version_;
  int rank_;
  int size_;
  LineChannel line_;
  bool abandoned_ = false;  // a fence given up: its reply may still come
  std::string kvsname_;
  std::string job_id_;
  std::vector<int> host_ranks_;
  std::size_t keylen_max_ = 64;
  std::size_t vallen_max_ = 256;
};

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_PMI_H_
