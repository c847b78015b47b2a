// The agent's environment, one table (`cartage info` prints it; the
// methods' own are theirs, CARTAGE_<METHOD>_*).
#ifndef CARTAGE_AGENT_PARAMS_H_
#define CARTAGE_AGENT_PARAMS_H_

#include <vector>

#include "methods/method.h"

namespace cartage::agent {

// Each name is the whole variable (CARTAGE_...).
std::vector<methods::ParamInfo> Params();

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_PARAMS_H_
