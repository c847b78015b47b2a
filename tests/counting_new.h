// Replaces the global operator new/delete with versions that count
// allocations in cartage::test::g_allocations. Include it from exactly one
// source file of a binary (replacement functions cannot be inline).
#ifndef CARTAGE_TESTS_COUNTING_NEW_H_
#define CARTAGE_TESTS_COUNTING_NEW_H_

#include <atomic>
#include <cstdlib>
#include <new>

namespace cartage::test {
std::atomic<long> g_allocations{0};
}  // namespace cartage::test

// The replacements pair malloc/aligned_alloc with free, which GCC's
// -Wmismatched-new-delete cannot see through once it inlines them.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t n) {
  cartage::test::g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, std::align_val_t a) {
  cartage::test::g_allocations.fetch_add(1, std::memory_order_relaxed);
  const std::size_t align = static_cast<std::size_t>(a);
  if (void* p = std::aligned_alloc(align, (n + align - 1) / align * align)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

#endif  // CARTAGE_TESTS_COUNTING_NEW_H_
