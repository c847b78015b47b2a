#include "agent/temp_buffers.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <new>

namespace cartage::agent {

TempBuffers::TempBuffers(std::size_t eager_bytes)
    : largest_(std::bit_ceil(std::max(eager_bytes, kMinClass))) {
  free_.resize(static_cast<std::size_t>(std::countr_zero(largest_) - std::countr_zero(kMinClass)) + 1);
  // Written once: a fresh page's first touch is a hypervisor fault on this
  // VM kind (bench/first_touch_bench).
  for (int i = 0; i < 16; ++i) free_.front().push_back(::operator new(kMinClass));
  for (int i = 0; i < 4; ++i) {
    void* b = ::operator new(largest_);
    std::memset(b, 0, largest_);
    free_.back().push_back(b);
  }
}

TempBuffers::~TempBuffers() {
  for (auto& cls : free_) {
    for (void* b : cls) ::operator delete(b);
  }
}

std::size_t TempBuffers::ClassOf(uint64_t bytes) const {
  const std::size_t size = std::bit_ceil(std::max<std::size_t>(bytes, kMinClass));
  return static_cast<std::size_t>(std::countr_zero(size) - std::countr_zero(kMinClass));
}

std::size_t TempBuffers::Footprint(uint64_t bytes) const {
  if (bytes > largest_) return bytes;
  return std::bit_ceil(std::max<std::size_t>(bytes, kMinClass));
}

void* TempBuffers::Take(uint64_t bytes) {
  if (bytes > largest_) return ::operator new(bytes);  // beyond eager (self): exact size
  std::vector<void*>& free = free_[ClassOf(bytes)];
  if (!free.empty()) {
    void* b = free.back();
    free.pop_back();
    return b;
  }
  return ::operator new(Footprint(bytes));
}

void TempBuffers::Give(void* buffer, uint64_t bytes) {
  if (bytes > largest_) {
    ::operator delete(buffer);
    return;
  }
  std::vector<void*>& free = free_[ClassOf(bytes)];
  if (free.size() * Footprint(bytes) < kKeptBytes || free.empty()) {
    free.push_back(buffer);
  } else {
    ::operator delete(buffer);
  }
}

}  // namespace cartage::agent
