#include "kit/check.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace cartage::kit {
namespace {

void PrintAndExit(const char* file, int line, const char* condition, const std::string& message) {
  std::fprintf(stderr, "rank %d: %s:%d: %s: %s\n", t_rank, file, line, condition, message.c_str());
  std::fflush(stderr);
  std::exit(1);
}

std::atomic<FailureHandler> g_handler{&PrintAndExit};

}  // namespace

void SetFailureHandler(FailureHandler handler) { g_handler.store(handler); }

void Fail(const char* file, int line, const char* condition, const std::string& message) {
  g_handler.load()(file, line, condition, message);
  std::abort();  // a handler must not return
}

}  // namespace cartage::kit
