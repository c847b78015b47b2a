// Dynamic windows: the regions of its own memory a rank attaches to a
// window made with no memory (CreateDynamic) and detaches, kept sorted and
// apart, so that the target finds the one an access lies in (an
// operation's displacement is an address there).
#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "rma/window_state.h"

namespace cartage::rma {

namespace {
// The first region that starts after `address`.
std::vector<Region>::const_iterator After(const std::vector<Region>& regions, uintptr_t address) {
  return std::upper_bound(regions.begin(), regions.end(), address,
                          [](uintptr_t a, const Region& g) { return a < g.start; });
}
}  // namespace

bool WindowState::Attached(uint64_t from, uint64_t n) const {
  const auto next = After(regions, static_cast<uintptr_t>(from));
  return next != regions.begin() && from + n <= std::prev(next)->start + std::prev(next)->bytes;
}

absl::Status WindowState::Attach(void* at, uint64_t n) {
  const auto start = reinterpret_cast<uintptr_t>(at);
  const auto fail = [&](absl::StatusCode code, const std::string& why) {
    return absl::Status(code, absl::StrFormat("%s: attach of %d bytes at %#x: %s", Name(), n, start, why));
  };
  if (!dynamic) return fail(absl::StatusCode::kFailedPrecondition, "the window is not dynamic (CreateDynamic makes one)");
  if (EpochMachine::StateOf(*this) == EpochState::kFreed) return fail(absl::StatusCode::kFailedPrecondition, "freed");
  if (at == nullptr || n == 0 || n > (uint64_t{1} << 48) || start + n < start) {
    return fail(absl::StatusCode::kInvalidArgument, "not a region of memory");
  }
  // The regions stay apart: an address names one byte of one region.
  const auto next = After(regions, start);
  if (next != regions.end() && start + n > next->start) {
    return fail(absl::StatusCode::kInvalidArgument,
                absl::StrFormat("it overlaps the region of %d bytes at %#x", next->bytes, next->start));
  }
  if (next != regions.begin() && std::prev(next)->start + std::prev(next)->bytes > start) {
    return fail(absl::StatusCode::kInvalidArgument, absl::StrFormat("it overlaps the region of %d bytes at %#x",
                                                                    std::prev(next)->bytes, std::prev(next)->start));
  }
  regions.insert(next, Region{start, n});
  return absl::OkStatus();
}

absl::Status WindowState::Detach(const void* at) {
  const auto start = reinterpret_cast<uintptr_t>(at);
  auto it = std::find_if(regions.begin(), regions.end(), [&](const Region& g) { return g.start == start; });
  if (!dynamic || it == regions.end()) {
    return absl::Status(dynamic ? absl::StatusCode::kInvalidArgument : absl::StatusCode::kFailedPrecondition,
                        absl::StrFormat("%s: detach at %#x: %s", Name(), start,
                                        dynamic ? "no region is attached there" : "the window is not dynamic"));
  }
  regions.erase(it);
  return absl::OkStatus();
}

}  // namespace cartage::rma
