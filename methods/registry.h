// The methods a process can open: the built-in ones (one generated list, each
// method folder declaring its own with cartage_method() in CMake) and the
// out-of-tree ones named in CARTAGE_METHOD_PATH (shared libraries exporting
// cartage_method_descriptor_v1). CARTAGE_METHODS picks which are used and in
// what order of preference; per peer the agent takes the first that reaches it.
//
//   CARTAGE_ASSIGN_OR_RETURN(Registry reg, Registry::Load());
//   CARTAGE_ASSIGN_OR_RETURN(auto chosen, reg.Chosen());   // self, shm, tcp
#ifndef CARTAGE_METHODS_REGISTRY_H_
#define CARTAGE_METHODS_REGISTRY_H_

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "methods/method.h"

namespace cartage::methods {

// The methods compiled in, in the order their folders are listed.
std::span<const Descriptor* const> BuiltinMethods();

// The preference list when CARTAGE_METHODS is not set.
inline constexpr absl::string_view kDefaultMethods = "self,shm,tcp";

class Registry {
 public:
  // The built-in methods plus every library in CARTAGE_METHOD_PATH (a
  // colon-separated list of .so files); a library that does not load, or
  // names a method twice, is an error naming the file.
  static absl::StatusOr<Registry> Load();
  // The same, with an explicit plugin path list.
  static absl::StatusOr<Registry> Load(absl::string_view method_path);

  Registry(Registry&&);
  Registry& operator=(Registry&&);
  ~Registry();

  const std::vector<const Descriptor*>& all() const { return all_; }
  const Descriptor* Find(absl::string_view name) const;
  // Where a method came from: "built in" or the library's path.
  const std::string& origin(const Descriptor* d) const;

  // The methods `spec` (CARTAGE_METHODS syntax: "shm,tcp") names, in order;
  // self is added last when missing, so a rank always reaches itself.
  absl::StatusOr<std::vector<const Descriptor*>> Choose(absl::string_view spec) const;
  // Choose(CARTAGE_METHODS, or kDefaultMethods).
  absl::StatusOr<std::vector<const Descriptor*>> Chosen() const;

 private:
  Registry() = default;
  absl::Status Add(const Descriptor* d, std::string origin);
  std::vector<const Descriptor*> all_;
  std::vector<std::string> origins_;
  struct Library;
  std::vector<std::unique_ptr<Library>> libraries_;
};

}  // namespace cartage::methods

#endif  // CARTAGE_METHODS_REGISTRY_H_
