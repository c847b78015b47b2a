// `cartage kit`: the conformance kit (kit/cases.h) run against one method,
// built in or loaded from a plugin, as jobs of real processes.
#ifndef CARTAGE_TOOLS_CARTAGE_KIT_CMD_H_
#define CARTAGE_TOOLS_CARTAGE_KIT_CMD_H_

namespace cartage::tools {

// argv: the arguments after "kit". Returns the exit code.
int RunKit(int argc, char** argv);

}  // namespace cartage::tools

#endif  // CARTAGE_TOOLS_CARTAGE_KIT_CMD_H_
