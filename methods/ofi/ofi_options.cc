// The ofi method's parameters, the capabilities and `cartage info` lines
// that follow from the provider it would choose, and the registry's entry.
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "methods/ofi/ofi_method.h"

namespace cartage::methods::ofi {

namespace {

std::vector<std::string> List(const char* v) {
  std::vector<std::string> out;
  for (absl::string_view p : absl::StrSplit(v, absl::ByAnyChar(", "), absl::SkipEmpty())) out.emplace_back(p);
  return out;
}

}  // namespace

std::vector<ParamInfo> Params() {
  return {
      {"PROVIDER_INCLUDE", "", "providers to consider, comma-separated (\"tcp;ofi_rxm\", or a part: \"shm\"); "
                               "default: all, in libfabric's order"},
      {"PROVIDER_EXCLUDE", "", "providers never to use, comma-separated"},
      {"TAG_MODE", "auto", "envelope layout in the 64-bit tag: auto, ofi_tag_1, ofi_tag_2, ofi_tag_full"},
      {"EVENTS", "100", "completions read per fi_cq_read (progress reads until the queue is empty)"},
      {"HOLD_S", "60", "seconds a send waits while its receiver holds its share of CARTAGE_UNEXPECTED_MAX_MB "
                       "in messages no receive took, before both sides fail naming the cap (0: wait for ever)"},
      {"RMA", "1", "1: ask the provider for FI_RMA, so that windows' puts and gets are its one-sided writes and "
                   "reads, and for sends ordered after writes (FI_ORDER_SAW); unordered: FI_RMA alone (an "
                   "unlock then waits for its writes to complete); 0: never (the target's agent serves them, "
                   "as on tcp)"},
  };
}

absl::StatusOr<OfiOptions> OfiOptions::FromEnvironment() {
  OfiOptions o;
  if (const char* v = std::getenv("CARTAGE_OFI_PROVIDER_INCLUDE")) o.include = List(v);
  if (const char* v = std::getenv("CARTAGE_OFI_PROVIDER_EXCLUDE")) o.exclude = List(v);
  if (const char* v = std::getenv("CARTAGE_OFI_TAG_MODE")) {
    absl::StatusOr<TagMode> m = ParseTagMode(v);
    if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat("CARTAGE_OFI_TAG_MODE: ", m.status().message()));
    o.tag_mode = *m;
  }
  if (const char* v = std::getenv("CARTAGE_OFI_EVENTS")) {
    if (!absl::SimpleAtoi(v, &o.events) || o.events < 1 || o.events > 4096) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_OFI_EVENTS=%s: need a number 1..4096", v));
    }
  }
  if (const char* v = std::getenv("CARTAGE_OFI_HOLD_S")) {
    if (!absl::SimpleAtoi(v, &o.hold_s) || o.hold_s < 0) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_OFI_HOLD_S=%s: need seconds >= 0", v));
    }
  }
  if (const char* v = std::getenv("CARTAGE_OFI_RMA")) {
    const std::string_view r(v);
    if (r != "0" && r != "1" && r != "unordered") {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_OFI_RMA=%s: use 0, 1 or unordered", v));
    }
    o.rma = r != "0";
    o.rma_ordered = r == "1";
  }
  return o;
}

Capabilities CapsOf(const ProviderChoice* p) {
  Capabilities c;
  // Every message is one tagged operation: the provider picks eager or its
  // own rendezvous, so the agent never splits one into RTS/CTS/DATA.
  c.eager_limit = std::numeric_limits<uint64_t>::max();
  c.tag_matching = true;
  c.reach = Reach::kNetwork;
  if (p != nullptr) {
    c.max_message = p->max_message;
    c.reach = p->host_only ? Reach::kHost : Reach::kNetwork;
    c.max_context = p->layout.max_context();
    c.max_tag = p->layout.max_tag();
    c.max_rank = p->layout.max_source();
    c.rma = p->rma;
    c.rma_ordered = p->rma && p->rma_ordered;
  }
  return c;
}

Capabilities OfiMethod::Caps(const OfiOptions& o) {
  absl::StatusOr<ProviderChoice> p = ChooseProvider(o);
  return CapsOf(p.ok() ? &*p : nullptr);
}

namespace {

std::vector<std::string> Details() {
  absl::StatusOr<OfiOptions> o = OfiOptions::FromEnvironment();
  if (!o.ok()) return {std::string(o.status().message())};
  absl::StatusOr<ProviderChoice> p = ChooseProvider(*o);
  if (!p.ok()) return {std::string(p.status().message())};
  return {absl::StrFormat("provider %s (fabric %s, domain %s): inject %d B, max message %d B%s%s", p->name, p->fabric,
                          p->domain, p->inject_size, p->max_message,
                          p->rma ? (p->mr_virt_addr ? ", FI_RMA (by address)" : ", FI_RMA (by offset)") : "",
                          p->control ? ", FI_MSG" : " (no FI_MSG: no unexpected-message cap, no news of deaths)"),
          absl::StrCat("tag layout ", p->layout.Describe())};
}

}  // namespace

const Descriptor kDescriptor{"ofi",
                             "libfabric's tagged messaging on a reliable-datagram endpoint: the provider matches",
                             &CapsFromEnvironment<OfiMethod, OfiOptions>, &Params,
                             &OpenFromEnvironment<OfiMethod, OfiOptions>, &Details};

}  // namespace cartage::methods::ofi
