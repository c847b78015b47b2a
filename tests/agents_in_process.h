// A job of agents as threads of one test process, over shm: each rank's
// agent is made on the thread that runs it.
#ifndef CARTAGE_TESTS_AGENTS_IN_PROCESS_H_
#define CARTAGE_TESTS_AGENTS_IN_PROCESS_H_

#include <stdlib.h>

#include <memory>
#include <thread>
#include <vector>

#include "agent/testing.h"
#include "cartage/cartage.h"
#include "gtest/gtest.h"
#include "tests/in_process_job.h"

namespace cartage::test {

// Runs `rank(r, agent)` for ranks 0..n-1, each agent at `threading`; each
// agent finalizes once its rank returns.
template <class Rank>
void InProcess(int n, agent::Threading threading, Rank rank) {
  ASSERT_EQ(::setenv("CARTAGE_METHODS", "shm", 1), 0);
  methods::SharedJob job;
  job.size = n;
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      absl::StatusOr<std::unique_ptr<Agent>> a =
          agent::NewAgentForTesting(std::make_unique<methods::InProcessExchange>(&job, r), threading);
      ASSERT_TRUE(a.ok()) << a.status();
      rank(r, **a);
      EXPECT_TRUE((*a)->Finalize().ok());
    });
  }
  for (std::thread& t : ranks) t.join();
}

}  // namespace cartage::test

#endif  // CARTAGE_TESTS_AGENTS_IN_PROCESS_H_
