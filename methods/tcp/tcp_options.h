// The tcp method's parameters and CARTAGE_TCP_* overrides (tcp_options.cc;
// `cartage info` prints the table).
#ifndef CARTAGE_METHODS_TCP_TCP_OPTIONS_H_
#define CARTAGE_METHODS_TCP_TCP_OPTIONS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "methods/method.h"

namespace cartage::methods::tcp {

// Parameters, each overridable by CARTAGE_TCP_<NAME> (see Params()).
struct TcpOptions {
  std::size_t eager_limit = 65536;  // larger messages go by rendezvous
  std::string interface;            // "": listen on every interface; else this one (e.g. eth0)
  static absl::StatusOr<TcpOptions> FromEnvironment();
};
std::vector<ParamInfo> Params();

}  // namespace cartage::methods::tcp

#endif  // CARTAGE_METHODS_TCP_TCP_OPTIONS_H_
