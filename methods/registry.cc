#include "methods/registry.h"

#include <dlfcn.h>

#include <cstdlib>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "base/check.h"
// Generated from each method folder's cartage_method() declaration: the
// headers and the descriptors of the built-in methods.
#include "methods/builtin_methods.inc"

namespace cartage::methods {

std::span<const Descriptor* const> BuiltinMethods() { return kBuiltinMethods; }

// A loaded plugin; never unloaded while the registry lives (its descriptor
// and code are referenced by opened methods).
struct Registry::Library {
  void* handle = nullptr;
  ~Library() {
    if (handle != nullptr) ::dlclose(handle);
  }
};

Registry::Registry(Registry&&) = default;
Registry& Registry::operator=(Registry&&) = default;
Registry::~Registry() = default;

absl::Status Registry::Add(const Descriptor* d, std::string origin) {
  if (d == nullptr || d->name.empty() || d->open == nullptr || d->caps == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("method from %s: incomplete descriptor", origin));
  }
  if (const Descriptor* old = Find(d->name)) {
    return absl::AlreadyExistsError(absl::StrFormat("method '%s' from %s: already provided by %s", d->name,
                                                    origin, this->origin(old)));
  }
  all_.push_back(d);
  origins_.push_back(std::move(origin));
  return absl::OkStatus();
}

absl::StatusOr<Registry> Registry::Load() {
  const char* path = std::getenv("CARTAGE_METHOD_PATH");
  return Load(path != nullptr ? path : "");
}

absl::StatusOr<Registry> Registry::Load(absl::string_view method_path) {
  Registry reg;
  for (const Descriptor* d : BuiltinMethods()) CARTAGE_RETURN_IF_ERROR(reg.Add(d, "built in"));
  for (absl::string_view file : absl::StrSplit(method_path, ':', absl::SkipEmpty())) {
    const std::string f(file);
    auto lib = std::make_unique<Library>();
    lib->handle = ::dlopen(f.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib->handle == nullptr) {
      return absl::NotFoundError(absl::StrFormat("CARTAGE_METHOD_PATH: cannot load %s: %s", f, ::dlerror()));
    }
    void* sym = ::dlsym(lib->handle, kPluginSymbol);
    if (sym == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("CARTAGE_METHOD_PATH: %s exports no %s (is it a cartage method?)", f, kPluginSymbol));
    }
    auto entry = reinterpret_cast<PluginEntry>(sym);
    CARTAGE_RETURN_IF_ERROR(reg.Add(entry(), f));
    reg.libraries_.push_back(std::move(lib));
  }
  return reg;
}

const Descriptor* Registry::Find(absl::string_view name) const {
  for (const Descriptor* d : all_) {
    if (d->name == name) return d;
  }
  return nullptr;
}

const std::string& Registry::origin(const Descriptor* d) const {
  for (std::size_t i = 0; i < all_.size(); ++i) {
    if (all_[i] == d) return origins_[i];
  }
  static const std::string kUnknown = "unknown";
  return kUnknown;
}

absl::StatusOr<std::vector<const Descriptor*>> Registry::Choose(absl::string_view spec) const {
  std::vector<const Descriptor*> out;
  for (absl::string_view name : absl::StrSplit(spec, ',', absl::SkipWhitespace())) {
    name = absl::StripAsciiWhitespace(name);
    const Descriptor* d = Find(name);
    if (d == nullptr) {
      std::vector<std::string> known;
      for (const Descriptor* k : all_) known.emplace_back(k->name);
      return absl::NotFoundError(absl::StrFormat("CARTAGE_METHODS=%s: no method '%s' (known: %s)", spec, name,
                                                 absl::StrJoin(known, ", ")));
    }
    if (std::find(out.begin(), out.end(), d) != out.end()) {
      return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_METHODS=%s: '%s' named twice", spec, name));
    }
    out.push_back(d);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrFormat("CARTAGE_METHODS=%s: names no method", spec));
  if (const Descriptor* self = Find("self"); self != nullptr &&
                                             std::find(out.begin(), out.end(), self) == out.end()) {
    out.push_back(self);
  }
  return out;
}

absl::StatusOr<std::vector<const Descriptor*>> Registry::Chosen() const {
  const char* spec = std::getenv("CARTAGE_METHODS");
  return Choose(spec != nullptr && *spec != '\0' ? absl::string_view(spec) : kDefaultMethods);
}

}  // namespace cartage::methods
