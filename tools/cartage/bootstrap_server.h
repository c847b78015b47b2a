// The launcher's side of the bootstrap (agent/bootstrap_wire.h): a Unix
// socket in a private 0700 directory, serving HELLO, PUT, FENCE, GET and BYE to the
// ranks of one job. Driven by the launcher's poll loop; never blocks.
#ifndef CARTAGE_TOOLS_CARTAGE_BOOTSTRAP_SERVER_H_
#define CARTAGE_TOOLS_CARTAGE_BOOTSTRAP_SERVER_H_

#include <poll.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace cartage::tools {

class BootstrapServer {
 public:
  // Listens for `size` ranks that must present `job_key`.
  static absl::StatusOr<std::unique_ptr<BootstrapServer>> Create(int size, std::string job_key);
  ~BootstrapServer();  // closes every socket and removes the directory

  const std::string& socket_path() const { return socket_path_; }

  // Appends the descriptors to poll (listening socket and every client).
  void AddPollFds(std::vector<pollfd>& fds) const;
  // Serves whatever `fd` has ready. Ignores descriptors it does not own.
  void OnReady(int fd, short revents);
  // A rank's process ended: fences can no longer complete, so the ranks in
  // one now, and any later FENCE, get an error instead of waiting forever.
  void RankExited(int rank);
  // Serves what a rank whose process ended left unread (its BYE).
  void Drain(int rank);
  // Whether `rank` said HELLO and ended without BYE: it never finalized.
  bool LeftWithoutBye(int rank) const;

 private:
  struct Client {
    int fd = -1;
    int rank = -1;  // -1 until HELLO
    bool fenced = false;
    bool bye = false;  // finalized
    std::string inbox;
  };
  BootstrapServer(int size, std::string job_key) : size_(size), job_key_(std::move(job_key)) {}
  void Accept();
  void Serve(Client& c);  // handles every complete line in c.inbox
  void Reply(Client& c, const std::string& line);
  void Drop(Client& c, const std::string& why);

  int size_;
  std::string job_key_;
  std::string dir_;
  std::string socket_path_;
  int listen_fd_ = -1;
  std::vector<std::unique_ptr<Client>> clients_;
  absl::flat_hash_map<std::string, std::string> values_;  // key -> hex value
  int fenced_ = 0;
  std::string fence_error_;  // set once a rank exited
};

}  // namespace cartage::tools

#endif  // CARTAGE_TOOLS_CARTAGE_BOOTSTRAP_SERVER_H_
