// memcpy for any size, with large blocks copied in pieces.
#ifndef CARTAGE_BASE_COPY_H_
#define CARTAGE_BASE_COPY_H_

#include <cstddef>
#include <cstring>

namespace cartage::base {

// Copies of 1 MiB and more go in pieces of 256 KiB: glibc 2.36 moves a
// block past its cache-size threshold with a loop of vector stores where a
// smaller one gets `rep movsb`, and on the AMD EPYC machines this project
// runs on the loop moves an eighth less (1 MiB in cache: 57 GB/s in one
// call, 65 in pieces). Where the threshold is higher, the pieces cost
// nothing.
inline void CopyMemory(void* to, const void* from, std::size_t n) {
  constexpr std::size_t kPiece = std::size_t{256} << 10;
  if (n < 4 * kPiece) {
    std::memcpy(to, from, n);
    return;
  }
  auto* d = static_cast<std::byte*>(to);
  const auto* s = static_cast<const std::byte*>(from);
  for (std::size_t done = 0; done < n; done += kPiece) {
    std::memcpy(d + done, s + done, n - done < kPiece ? n - done : kPiece);
  }
}

}  // namespace cartage::base

#endif  // CARTAGE_BASE_COPY_H_
