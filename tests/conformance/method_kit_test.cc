// The conformance kit (kit/cases.h) against every built-in method, each case
// a job of real processes run by `cartage kit` as a user would run it.
// example_method_kit_test, this file built with EXAMPLE_METHOD_SO, runs the
// out-of-tree example method (examples/method) loaded by its path.
#include <array>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kit/cases.h"
#include "methods/registry.h"
#include "tests/run_command.h"

namespace cartage::test {
namespace {

using ::testing::HasSubstr;

struct KitParam {
  std::string method;
  std::string plugin;              // a plugin's path, or ""
  const kit::Case* c;
  std::string variant;             // "" or what the extra settings choose (ofi: the provider)
  std::vector<std::string> env;    // extra settings for the variant
};

void PrintTo(const KitParam& p, std::ostream* os) {
  *os << p.c->name << " on " << p.c->ranks << " ranks through " << p.method;
  if (!p.variant.empty()) *os << " (" << p.variant << ")";
}

// The ofi method runs the kit on the libfabric provider that works on a
// machine without RDMA hardware (Debian's libfabric 1.17: tcp;ofi_rxm; see
// methods/ofi/README.md for shm and udp;ofi_rxd), in its automatic layout
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
      for (const kit::Case& c : kit::Cases()) {
        if (c.one_rank != one_rank) continue;
        KitParam p{name, plugin, &c, v != nullptr ? v->label : "", {}};
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
  std::vector<std::string> argv = {CARTAGE_BIN, "kit", "--case", p.c->name};
  if (p.plugin.empty()) {
    argv.insert(argv.end(), {"--method", p.method});
  } else {
    argv.insert(argv.end(), {"--plugin", p.plugin});
  }
  for (const std::string& e : p.env) argv.insert(argv.end(), {"--env", e});
  const CommandResult r = RunCommand(argv);
  EXPECT_EQ(r.code, 0) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("PASS ", p.c->name, " (")));
  EXPECT_THAT(r.out, HasSubstr(absl::StrCat("kit: 1 of 1 cases passed for method ", p.method)));
}

std::string Name(const ::testing::TestParamInfo<KitParam>& param_info) {
  const KitParam& p = param_info.param;
  return absl::StrCat(p.method, p.variant.empty() ? "" : "_", p.variant, "_", p.c->name, "_np", p.c->ranks);
}

INSTANTIATE_TEST_SUITE_P(Kit, MethodKit, ::testing::ValuesIn(Params()), Name);

#ifdef EXAMPLE_METHOD_SO
// The same example built to name the next rank as a datagram's sender
// instead of its own: the kit says what is wrong instead of timing out.
TEST(KitNamesTheRule, ASenderRankOffByOne) {
  const CommandResult r =
      RunCommand({CARTAGE_BIN, "kit", "--plugin", WRONG_RANK_METHOD_SO, "--case", "envelope", "--timeout", "60"});
  EXPECT_EQ(r.code, 1) << r.err << r.out;
  EXPECT_THAT(r.out, HasSubstr("FAIL envelope"));
  EXPECT_THAT(r.out, HasSubstr("a method must deliver each envelope with the sender's world rank"));
  EXPECT_THAT(r.out, HasSubstr("kit: 0 of 1 cases passed for method dgram (failed: envelope)"));
}
#endif

}  // namespace
}  // namespace cartage::test
