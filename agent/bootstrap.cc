#include "agent/bootstrap.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "agent/bootstrap_wire.h"
#include "agent/pmi.h"
#include "agent/pmix.h"
#include "cartage/config.h"
#include "base/check.h"

namespace cartage::agent {

namespace wire = bootstrap;

// A job of one rank keeps its exchange here.
class Bootstrap::Local {
 public:
  absl::flat_hash_map<std::string, std::string> values;
};

namespace {

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrFormat("bootstrap: %s: %s", what, std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Bootstrap>> Bootstrap::FromEnvironment() {
  const char* rank_s = std::getenv(wire::kEnvRank);
  const char* size_s = std::getenv(wire::kEnvSize);
  const char* socket_s = std::getenv(wire::kEnvSocket);
  const char* key_s = std::getenv(wire::kEnvJobKey);
  if (rank_s == nullptr && size_s == nullptr && socket_s == nullptr) return Solo();
  int rank = -1, size = -1;
  if (rank_s == nullptr || size_s == nullptr || socket_s == nullptr || key_s == nullptr ||
      !absl::SimpleAtoi(rank_s, &rank) || !absl::SimpleAtoi(size_s, &size) || size < 1 ||
      rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bootstrap: incomplete or invalid launcher environment (%s=%s %s=%s %s=%s %s set: %s); "
        "start the program with `cartage run`",
        wire::kEnvRank, rank_s ? rank_s : "unset", wire::kEnvSize, size_s ? size_s : "unset",
        wire::kEnvSocket, socket_s ? socket_s : "unset", wire::kEnvJobKey, key_s ? "yes" : "no"));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (std::strlen(socket_s) >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrFormat("bootstrap: socket path too long: %s", socket_s));
  }
  std::strcpy(addr.sun_path, socket_s);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const absl::Status s = Errno(absl::StrCat("connecting to the launcher at ", socket_s));
    ::close(fd);
    return s;
  }
  const char* job_id = std::getenv(wire::kEnvJobId);
  auto b = std::unique_ptr<Bootstrap>(new Bootstrap(rank, size, fd, job_id ? job_id : key_s));
  absl::StatusOr<std::string> hello = b->Call(absl::StrCat("HELLO ", rank, " ", key_s), "HELLO");
  if (!hello.ok()) return hello.status();
  // `cartage run --hosts` says where it placed every rank; without it, all
  // are on this host.
  if (const char* mapping = std::getenv(wire::kEnvMapping); mapping != nullptr && *mapping != '\0') {
    CARTAGE_ASSIGN_OR_RETURN(b->host_ranks_, PmiExchange::RanksOnHostOf(mapping, rank, size));
  }
  return b;
}

std::unique_ptr<Bootstrap> Bootstrap::Solo() {
  auto b = std::unique_ptr<Bootstrap>(new Bootstrap(0, 1, -1, absl::StrCat("solo-", getpid())));
  b->local_ = std::make_unique<Local>();
  return b;
}

absl::StatusOr<std::unique_ptr<methods::Exchange>> OpenJobExchange() {
  const char* forced = std::getenv(wire::kEnvChoice);
  std::string choice = forced != nullptr && *forced != '\0' ? forced : "auto";
  if (choice == "auto") {
    // The launcher's own: cartage's, PMIx (Open MPI's mpirun, srun
    // --mpi=pmix), a PMI socket (Hydra, srun --mpi=pmi2), else a job of one.
    choice = std::getenv(wire::kEnvSocket) != nullptr ? "cartage"
             : PmixExchange::Offered()                ? "pmix"
             : PmiExchange::Offered()                 ? "pmi1"
                                                      : "singleton";
  }
  if (choice == "cartage") {
    CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<Bootstrap> own, Bootstrap::FromEnvironment());
    return own;
  }
  if (choice == "pmix") {
#if CARTAGE_HAVE_PMIX
    CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<PmixExchange> pmix, PmixExchange::FromEnvironment());
    return pmix;
#else
    return absl::UnimplementedError("bootstrap: CARTAGE_BOOTSTRAP=pmix, but this cartage was built without libpmix");
#endif
  }
  if (choice == "pmi1" || choice == "pmi2") {
    CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<PmiExchange> pmi, PmiExchange::FromEnvironment(choice == "pmi1" ? 1 : 2));
    return pmi;
  }
  if (choice == "singleton") return Bootstrap::Solo();
  return absl::InvalidArgumentError(absl::StrFormat(
      "bootstrap: CARTAGE_BOOTSTRAP=%s: need auto, cartage, pmix, pmi2, pmi1 or singleton", choice));
}

Bootstrap::Bootstrap(int rank, int size, int fd, std::string job_id)
    : rank_(rank), size_(size), line_(fd, "the launcher", wire::kMaxLine), job_id_(std::move(job_id)) {}

// Best effort and never blocking: a launcher already gone gets nothing.
Bootstrap::~Bootstrap() { line_.WriteAndClose("BYE"); }

absl::StatusOr<std::string> Bootstrap::Call(absl::string_view request, absl::string_view what) {
  CARTAGE_RETURN_IF_ERROR(line_.Write(request));
  return ReadReply(what, [] { return -1; });
}

absl::StatusOr<std::string> Bootstrap::ReadReply(absl::string_view what, absl::FunctionRef<int()> progress) {
  absl::StatusOr<std::string> reply = line_.Read(what, rank_, progress);
  if (reply.ok() && absl::StartsWith(*reply, "ERR ")) {
    return absl::FailedPreconditionError(
        absl::StrFormat("bootstrap %s (rank %d): the launcher refused: %s", what, rank_, reply->substr(4)));
  }
  return reply;
}

absl::Status Bootstrap::Put(absl::string_view key, absl::string_view value) {
  if (!wire::ValidKey(key)) {
    return absl::InvalidArgumentError(absl::StrFormat("bootstrap Put: invalid key '%s'", key));
  }
  if (value.size() > 32 * 1024) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bootstrap Put '%s': value of %d bytes exceeds 32 KiB", key, value.size()));
  }
  if (local_) {
    local_->values[key] = std::string(value);
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> r =
      Call(absl::StrCat("PUT ", key, " ", absl::BytesToHexString(value)), "PUT");
  if (!r.ok()) return r.status();
  if (*r != "OK") return absl::DataLossError(absl::StrCat("bootstrap PUT: unexpected reply: ", *r));
  return absl::OkStatus();
}

absl::Status Bootstrap::Fence() {
  if (local_) return absl::OkStatus();
  absl::StatusOr<std::string> r = Call("FENCE", "FENCE");
  if (!r.ok()) return r.status();
  if (*r != "OK") return absl::DataLossError(absl::StrCat("bootstrap FENCE: unexpected reply: ", *r));
  return absl::OkStatus();
}

absl::Status Bootstrap::FenceWhile(absl::FunctionRef<int()> progress) {
  if (local_) return absl::OkStatus();
  CARTAGE_RETURN_IF_ERROR(line_.Write("FENCE"));
  CARTAGE_ASSIGN_OR_RETURN(const std::string r, ReadReply("FENCE", progress));
  if (r != "OK") return absl::DataLossError(absl::StrCat("bootstrap FENCE: unexpected reply: ", r));
  return absl::OkStatus();
}

absl::StatusOr<std::string> Bootstrap::Get(absl::string_view key) {
  if (!wire::ValidKey(key)) {
    return absl::InvalidArgumentError(absl::StrFormat("bootstrap Get: invalid key '%s'", key));
  }
  if (local_) {
    auto it = local_->values.find(key);
    if (it == local_->values.end()) {
      return absl::NotFoundError(absl::StrFormat("bootstrap Get: no value for '%s'", key));
    }
    return it->second;
  }
  absl::StatusOr<std::string> r = Call(absl::StrCat("GET ", key), "GET");
  if (!r.ok()) return r.status();
  if (*r == "NONE") return absl::NotFoundError(absl::StrFormat("bootstrap Get: no value for '%s'", key));
  if (!absl::StartsWith(*r, "VAL ")) {
    return absl::DataLossError(absl::StrCat("bootstrap GET: unexpected reply: ", r->substr(0, 80)));
  }
  const absl::string_view hex = absl::string_view(*r).substr(4);
  if (hex.size() % 2 != 0 || hex.find_first_not_of("0123456789abcdefABCDEF") != absl::string_view::npos) {
    return absl::DataLossError(absl::StrFormat("bootstrap GET '%s': malformed value", key));
  }
  return absl::HexStringToBytes(hex);
}

}  // namespace cartage::agent
