// `cartage run -n N [options] prog args...`: starts N local ranks, serves
// their bootstrap, forwards their output, and returns the worst exit status.
#ifndef CARTAGE_TOOLS_CARTAGE_LAUNCHER_H_
#define CARTAGE_TOOLS_CARTAGE_LAUNCHER_H_

namespace cartage::tools {

// argv[0] is the first argument after `run`. Returns the process exit code:
// 0 when every rank exited 0; else the status of the first rank that failed
// (exit code, or 128 + signal); 124 when --timeout expired; 2 for a usage error.
int RunLauncher(int argc, char** argv);

}  // namespace cartage::tools

#endif  // CARTAGE_TOOLS_CARTAGE_LAUNCHER_H_
