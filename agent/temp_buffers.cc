#include "agent/temp_buffers.h"

#include <algorithm>
#include <cstring>
#include <new>

namespace cartage::agent {

TempBuffers::TempBuffers(std::size_t eager_bytes) : large_(std::max(eager_bytes, kSmall)) {
  small_.reserve(kKept);
  large_free_.reserve(kKept);
  for (int i = 0; i < 16; ++i) small_.push_back(::operator new(kSmall));
  // Written once: a fresh page's first touch is a hypervisor fault on this
  // VM kind (bench/first_touch_bench).
  for (int i = 0; i < 4; ++i) {
    void* b = ::operator new(large_);
    std::memset(b, 0, large_);
    large_free_.push_back(b);
  }
}

TempBuffers::~TempBuffers() {
  for (void* b : small_) ::operator delete(b);
  for (void* b : large_free_) ::operator delete(b);
}

void* TempBuffers::Take(uint64_t bytes) {
  if (bytes > large_) return ::operator new(bytes);  // beyond eager (self): exact size
  std::vector<void*>& free = bytes <= kSmall ? small_ : large_free_;
  if (!free.empty()) {
    void* b = free.back();
    free.pop_back();
    return b;
  }
  return ::operator new(bytes <= kSmall ? kSmall : large_);
}

void TempBuffers::Give(void* buffer, uint64_t bytes) {
  std::vector<void*>& free = bytes <= kSmall ? small_ : large_free_;
  if (bytes <= large_ && free.size() < kKept) {
    free.push_back(buffer);
  } else {
    ::operator delete(buffer);
  }
}

}  // namespace cartage::agent
