// The tcp method's parameters and their reading from the environment
// (CARTAGE_TCP_*), the capabilities they give, and the registry's entry.
#include <cstdlib>
#include <limits>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "methods/tcp/tcp_method.h"

namespace cartage::methods::tcp {

std::vector<ParamInfo> Params() {
  return {
      {"EAGER_LIMIT", "65536", "largest message sent eagerly; larger ones go by rendezvous (RTS, CTS, DATA)"},
      {"IF", "", "listen on this interface only (e.g. eth0); default: every interface, loopback for "
                 "ranks in the same network namespace"},
  };
}

absl::StatusOr<TcpOptions> TcpOptions::FromEnvironment() {
  TcpOptions o;
  if (const char* v = std::getenv("CARTAGE_TCP_EAGER_LIMIT")) {
    if (!absl::SimpleAtoi(v, &o.eager_limit) || o.eager_limit > (std::size_t{64} << 20)) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_TCP_EAGER_LIMIT=%s: need a number <= 64 MiB", v));
    }
  }
  if (const char* v = std::getenv("CARTAGE_TCP_IF")) o.interface = v;
  return o;
}

Capabilities TcpMethod::Caps(const TcpOptions& o) {
  Capabilities c;
  c.eager_limit = o.eager_limit;
  c.max_message = std::numeric_limits<uint64_t>::max();
  c.reach = Reach::kNetwork;
  return c;
}

const Descriptor kDescriptor{
    "tcp", "ranks anywhere on the network: one lazy TCP connection per pair, epoll, eager and rendezvous",
    &CapsFromEnvironment<TcpMethod, TcpOptions>, &Params, &OpenFromEnvironment<TcpMethod, TcpOptions>};

}  // namespace cartage::methods::tcp
