// Runs a command with stdout and stderr captured, for tests that drive real
// processes (the launcher, multi-rank programs).
#ifndef CARTAGE_TESTS_RUN_COMMAND_H_
#define CARTAGE_TESTS_RUN_COMMAND_H_

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

extern char** environ;

namespace cartage::test {

struct CommandResult {
  int code = -1;  // exit code, or 128 + signal
  int pid = 0;    // the process it ran as
  std::string out, err;
};

inline std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs argv (argv[0] a path) with `env` added to this process's environment
// (a variable `env` names replaces this process's).
inline CommandResult RunCommand(std::vector<std::string> argv, std::vector<std::string> env = {}) {
  const std::string dir = testing::TempDir();
  const std::string out = absl::StrCat(dir, "/cmd_out_", getpid());
  const std::string err = absl::StrCat(dir, "/cmd_err_", getpid());
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> env_store;
  const auto named = [&env](const std::string& e) {
    const std::string key = e.substr(0, e.find('=') + 1);
    for (const std::string& mine : env) {
      if (mine.compare(0, key.size(), key) == 0) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (!named(*e)) env_store.emplace_back(*e);
  }
  for (std::string& e : env) env_store.push_back(e);
  std::vector<char*> envp;
  for (std::string& e : env_store) envp.push_back(e.data());
  envp.push_back(nullptr);
  CommandResult r;
  pid_t pid;
  const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return r;
  int status = 0;
  waitpid(pid, &status, 0);
  r.pid = pid;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = Slurp(out);
  r.err = Slurp(err);
  return r;
}

}  // namespace cartage::test

#endif  // CARTAGE_TESTS_RUN_COMMAND_H_
