// The conformance kit: every method runs the same cases, each a real job of
// processes under `cartage run` (tests/p2p_ranks.cc holds the rank side),
// with CARTAGE_METHODS naming the method alone (self still carries a rank's
// messages to itself). A method is supported when every case passes for it.
//
//   ordering, wildcards, unexpected messages, 0 B to 64 MiB both ways at once
//   (every byte checked), truncation, cancel, synchronous send, probe,
//   communicator isolation, bad arguments, persistent requests, wait
//   variants, split, datatypes, 10k operations outstanding, resource
//   exhaustion that must queue, a peer that exits, a peer that dies
//   mid-transfer, and a VC in the error state failing new operations at once.
//
// method_kit_test runs the built-in methods (the registry's generated list);
// example_method_kit_test, this file built with EXAMPLE_METHOD_SO, runs the
// out-of-tree example method (examples/method) loaded by path.
#include <array>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "methods/registry.h"
#include "tests/run_command.h"

namespace cartage::test {
namespace {

using ::testing::HasSubstr;

struct KitCase {
  const char* mode;
  int ranks;
};

// Cases for methods that reach other ranks.
constexpr KitCase kCases[] = {
    {"order", 2},      {"wildcard", 2},     {"unexpected", 2},  {"anytag", 4},     {"sizes", 2},
    {"truncation", 2}, {"cancel", 2},       {"ssend", 2},       {"probe", 2},      {"dup", 3},
    {"badargs", 2},    {"persistent", 2},   {"waitvariants", 2}, {"split", 5},     {"datatypes", 2},
    {"outstanding", 2}, {"exhaustion", 2},  {"earlyexit", 2},   {"peerdies", 2},   {"vcerror", 3},
};
// Cases for a method that reaches only the rank itself.
constexpr KitCase kOneRankCases[] = {{"self", 1}, {"datatypes", 1}, {"outstanding", 1}};

struct KitParam {
  std::string method;
  std::string plugin;  // a CARTAGE_METHOD_PATH entry, or ""
  KitCase c;
  std::string variant;              // "" or what the extra settings choose (ofi: the provider)
  std::vector<std::string> env;     // extra settings for the variant
};

void PrintTo(const KitParam& p, std::ostream* os) {
  *os << p.c.mode << " on " << p.c.ranks << " ranks through " << p.method;
  if (!p.variant.empty()) *os << " (" << p.variant << ")";
}

// The ofi method runs the kit on the libfabric provider that works on a
// machine without RDMA hardware (Debian's libfabric 1.17: tcp;ofi_rxm; see
// the README for shm and udp;ofi_rxd), in its automatic layout
// (ofi_tag_full) and in ofi_tag_1, where the source rank rides in the tag.
// (ofi_tag_2's 20-bit tags cannot carry the kit's largest tag: refused.)
struct Variant {
  const char* method;
  const char* label;
  std::array<const char*, 2> env;  // settings; null: none
};
constexpr Variant kVariants[] = {
    {"ofi", "tcp", {"CARTAGE_OFI_PROVIDER_INCLUDE=tcp;ofi_rxm", nullptr}},
    {"ofi", "tcp_tag1", {"CARTAGE_OFI_PROVIDER_INCLUDE=tcp;ofi_rxm", "CARTAGE_OFI_TAG_MODE=ofi_tag_1"}},
};

std::vector<KitParam> Params() {
  std::vector<KitParam> out;
  auto add = [&](const std::string& name, const std::string& plugin, bool one_rank) {
    std::vector<const Variant*> variants;
    for (const Variant& v : kVariants) {
      if (name == v.method) variants.push_back(&v);
    }
    if (variants.empty()) variants.push_back(nullptr);
    for (const Variant* v : variants) {
      for (const KitCase& c : one_rank ? std::span<const KitCase>(kOneRankCases) : std::span<const KitCase>(kCases)) {
        KitParam p{name, plugin, c, v != nullptr ? v->label : "", {}};
        if (v != nullptr) {
          for (const char* e : v->env) {
            if (e != nullptr) p.env.emplace_back(e);
          }
        }
        out.push_back(p);
      }
    }
  };
#ifdef EXAMPLE_METHOD_SO
  // example_method_kit_test: the out-of-tree example (built by the
  // example_method_builds_out_of_tree fixture).
  add("dgram", EXAMPLE_METHOD_SO, false);
#else
  for (const methods::Descriptor* d : methods::BuiltinMethods()) {
    add(std::string(d->name), "", d->caps().reach == methods::Reach::kProcess);
  }
#endif
  return out;
}

class MethodKit : public ::testing::TestWithParam<KitParam> {};

TEST_P(MethodKit, Passes) {
  const KitParam& p = GetParam();
  std::vector<std::string> env = {absl::StrCat("CARTAGE_METHODS=", p.method)};
  if (!p.plugin.empty()) env.push_back(absl::StrCat("CARTAGE_METHOD_PATH=", p.plugin));
  env.insert(env.end(), p.env.begin(), p.env.end());

  // A bound for a hang, not a speed test. Through ofi (tcp;ofi_rxm), which
  // matches in the provider, `unexpected` (100,000 messages received newest
  // first) takes about 60 s alone, 90 % of the receiver's samples in one loop
  // inside libfabric, and twice that beside other tests.
  const CommandResult r = RunCommand(
      {CARTAGE_BIN, "run", "-n", std::to_string(p.c.ranks), "--timeout", "300", RANKS_BIN, p.c.mode}, env);
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("PASS ", p.c.mode)));
}

std::string Name(const ::testing::TestParamInfo<KitParam>& param_info) {
  const KitParam& p = param_info.param;
  return absl::StrCat(p.method, p.variant.empty() ? "" : "_", p.variant, "_", p.c.mode, "_np", p.c.ranks);
}

INSTANTIATE_TEST_SUITE_P(Kit, MethodKit, ::testing::ValuesIn(Params()), Name);

}  // namespace
}  // namespace cartage::test
