// cartage-kit-ranks CASE: one rank of a conformance-kit case, started by
// `cartage run` (which `cartage kit` does for every case). Rank 0 prints
// "PASS CASE" once the whole job agrees; a failed check prints where and why
// and exits 1.
#include <cstdio>
#include <string>

#include "cartage/cartage.h"
#include "kit/cases.h"
#include "kit/check.h"

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "";
  const cartage::kit::Case* c = cartage::kit::FindCase(name);
  if (c == nullptr) {
    std::fprintf(stderr, "cartage-kit-ranks: unknown case '%s' (cartage kit --list names them)\n", name.c_str());
    return 2;
  }
  cartage::AgentOptions options;
  if (c->multiple) options.threads = cartage::ThreadLevel::kMultiple;
  auto agent = cartage::Agent::FromEnvironment(options);
  if (!agent.ok()) {
    std::fprintf(stderr, "cartage-kit-ranks: %s\n", std::string(agent.status().message()).c_str());
    return 2;
  }
  const cartage::Comm w = (*agent)->World();
  cartage::kit::t_rank = w.rank();
  c->run(w, **agent);
  if (w.rank() == 0) std::printf("PASS %s\n", c->name);
  return 0;
}
