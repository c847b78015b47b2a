// The conformance kit's cases with the ranks as threads of this process,
// each with its own agent over an in-process exchange: a failed check stops
// here, at its assertion, instead of showing as a missing "PASS" line of a
// job of processes (method_kit_test runs those). Cases whose ranks exit or
// die run only as processes.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "agent/testing.h"
#include "gtest/gtest.h"
#include "kit/cases.h"
#include "kit/check.h"
#include "methods/registry.h"
#include "tests/in_process_job.h"

namespace cartage::test {
namespace {

struct InProcessParam {
  std::string method;
  const kit::Case* c;
};

void PrintTo(const InProcessParam& p, std::ostream* os) {
  *os << p.c->name << " on " << p.c->ranks << " threads through " << p.method;
}

// A failed check reports through gtest, then ends the process: the other
// ranks would wait for ever on the one that stopped.
void FailHere(const char* file, int line, const char* condition, const std::string& message) {
  ADD_FAILURE_AT(file, line) << "rank " << kit::t_rank << ": " << condition << ": " << message;
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(1);
}

class KitInProcess : public ::testing::TestWithParam<InProcessParam> {};

TEST_P(KitInProcess, Passes) {
  const InProcessParam& p = GetParam();
  kit::SetFailureHandler(&FailHere);
  // One process: the whole job uses the method; each agent reads it at start.
  ASSERT_EQ(::setenv("CARTAGE_METHODS", p.method.c_str(), 1), 0);
  // ofi on the provider that works without RDMA hardware (as in method_kit_test).
  if (p.method == "ofi") {
    ASSERT_EQ(::setenv("CARTAGE_OFI_PROVIDER_INCLUDE", "tcp;ofi_rxm", 1), 0);
  }
  methods::SharedJob job;
  job.size = p.c->ranks;
  std::vector<std::thread> ranks;
  for (int r = 0; r < p.c->ranks; ++r) {
    ranks.emplace_back([&, r] {
      kit::t_rank = r;
      absl::StatusOr<std::unique_ptr<Agent>> agent =
          agent::NewAgentForTesting(std::make_unique<methods::InProcessExchange>(&job, r),
                                    {.level = p.c->multiple ? ThreadLevel::kMultiple : ThreadLevel::kSingle,
                                     .progress_thread = false,
                                     .lanes = 1});
      KIT_OK(agent.status());
      p.c->run((*agent)->World(), **agent);
    });
  }
  for (std::thread& t : ranks) t.join();
}

std::vector<InProcessParam> Params() {
  std::vector<InProcessParam> out;
  for (const methods::Descriptor* d : methods::BuiltinMethods()) {
    const bool one_rank = d->caps().reach == methods::Reach::kProcess;
    for (const kit::Case& c : kit::Cases()) {
      if (c.in_process && c.one_rank == one_rank) out.push_back({std::string(d->name), &c});
    }
  }
  return out;
}

std::string Name(const ::testing::TestParamInfo<InProcessParam>& info) {
  return absl::StrCat(info.param.method, "_", info.param.c->name, "_np", info.param.c->ranks);
}

INSTANTIATE_TEST_SUITE_P(Kit, KitInProcess, ::testing::ValuesIn(Params()), Name);

}  // namespace
}  // namespace cartage::test
