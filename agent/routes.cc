#include "agent/routes.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/check.h"

namespace cartage::agent {

absl::Status Routes::Open(methods::Exchange& exchange, methods::MethodHost& host, int size, car::Vc* any_vc) {
  any_vc_ = any_vc;
  CARTAGE_ASSIGN_OR_RETURN(methods::Registry reg, methods::Registry::Load());
  registry_ = std::make_unique<methods::Registry>(std::move(reg));
  CARTAGE_ASSIGN_OR_RETURN(std::vector<const methods::Descriptor*> chosen, registry_->Chosen());
  for (const methods::Descriptor* d : chosen) {
    absl::StatusOr<std::unique_ptr<methods::Method>> m = d->open({&exchange, &host});
    if (!m.ok()) {
      return absl::Status(m.status().code(),
                          absl::StrFormat("opening method %s: %s", d->name, m.status().message()));
    }
    methods_.push_back(*std::move(m));
  }
  routes_.resize(static_cast<std::size_t>(size));
  for (int p = 0; p < size; ++p) {
    Route& r = routes_[static_cast<std::size_t>(p)];
    for (const auto& m : methods_) {
      if (!m->Reaches(p)) continue;
      r.method = m.get();
      r.vc = m->VcOf(p);
      r.eager_limit = m->caps().eager_limit;
      r.max_context = m->caps().max_context;
      r.max_tag = m->caps().max_tag;
      break;
    }
    if (r.method == nullptr) {
      std::vector<std::string> names;
      for (const auto& m : methods_) names.emplace_back(m->name());
      return absl::UnavailableError(absl::StrFormat("no method of [%s] reaches rank %d (CARTAGE_METHODS)",
                                                    absl::StrJoin(names, ","), p));
    }
  }
  // A method that matches envelopes itself sees only its own messages, so a
  // wildcard receive is right only if it carries every rank (self too).
  for (const Route& route : routes_) {
    methods::Method* m = route.method;
    if (!m->caps().tag_matching) continue;
    for (int q = 0; q < size; ++q) {
      methods::Method* other = routes_[static_cast<std::size_t>(q)].method;
      if (other == m) continue;
      return absl::FailedPreconditionError(absl::StrFormat(
          "method %s matches envelopes itself and must carry every rank, but rank %d goes through %s "
          "(CARTAGE_METHODS: put %s first)",
          m->name(), q, other->name(), m->name()));
    }
    native_ = m;
    any_vc_ = m->VcOf(car::kAnySource);
    any_route_ = route;
    break;
  }
  for (const auto& m : methods_) {
    const bool used = std::any_of(routes_.begin(), routes_.end(), [&](const Route& r) { return r.method == m.get(); });
    if (!m->caps().needs_polling) continue;
    (used ? polled_ : idle_).push_back(m.get());
  }
  sole_ = polled_.size() == 1 ? polled_.front() : nullptr;
  return absl::OkStatus();
}

void Routes::CloseAll() {
  for (const auto& m : methods_) m->Close();
}

absl::Status Routes::CheckEnvelope(int peer, uint32_t context, int tag) const {
  if (EnvelopeFits(peer, context, tag)) return absl::OkStatus();
  const Route& r = peer >= 0 ? Of(peer) : any_route_;
  if (context > r.max_context) {
    return absl::OutOfRangeError(absl::StrFormat(
        "context id %d does not fit method %s's envelope (context ids up to %d): too many communicators", context,
        r.method->name(), r.max_context));
  }
  return absl::OutOfRangeError(
      absl::StrFormat("tag %d does not fit method %s's envelope (tags up to %d)", tag, r.method->name(), r.max_tag));
}

uint64_t Routes::largest_eager_limit() const {
  uint64_t most = 0;
  for (const Route& r : routes_) {
    if (r.eager_limit != std::numeric_limits<uint64_t>::max()) most = std::max(most, r.eager_limit);
  }
  return most;
}

std::size_t Routes::private_bytes() const {
  std::size_t most = 0;
  for (const auto& m : methods_) most = std::max(most, m->private_bytes());
  return most;
}

void Routes::Bind(car::Car& car, int peer) const {
  // A wildcard receive is bound by the method whose message it matches (or
  // by the one method that matches everything).
  if (peer >= 0) {
    MethodFor(peer).Bind(car, peer);
  } else if (native_ != nullptr) {
    native_->Bind(car, peer);
  }
}

absl::StatusOr<uint64_t> Routes::Register(int peer, const void* buf, std::size_t bytes) {
  std::size_t index = 0;
  if (peer >= 0) {
    while (methods_[index].get() != &MethodFor(peer)) ++index;
  } else if (!polled_.empty()) {
    while (methods_[index].get() != polled_.front()) ++index;
  }
  CARTAGE_ASSIGN_OR_RETURN(uint64_t token, methods_[index]->RegisterMemory(buf, bytes));
  return (static_cast<uint64_t>(index) << 56) | token;
}

void Routes::Unregister(uint64_t token) {
  const std::size_t index = token >> 56;
  if (index < methods_.size()) methods_[index]->UnregisterMemory(token & ((uint64_t{1} << 56) - 1));
}

int Routes::registered() const {
  int n = 0;
  for (const auto& m : methods_) n += m->registered();
  return n;
}

}  // namespace cartage::agent
