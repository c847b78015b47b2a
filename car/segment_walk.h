// The segment engine: packs, unpacks or lists any byte range [first, last)
// of the packed stream of `count` elements of a Datatype, so that a message
// can be cut into pieces handled independently and in any order (seed 002's
// segment: buffer, count, datatype, first, last). It seeks to `first` in
// O(depth of the type), not by walking the bytes before it.
//
//   std::vector<std::byte> wire(t.size() * n);
//   Pack(matrix, n, column, 0, 4096, wire.data());             // first chunk
//   Pack(matrix, n, column, 4096, wire.size(), wire.data() + 4096);
#ifndef CARTAGE_CAR_SEGMENT_WALK_H_
#define CARTAGE_CAR_SEGMENT_WALK_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "car/type.h"

namespace cartage::car {

namespace internal {
template <class Fn>
void WalkNodes(const std::vector<TypeNode>& nodes, std::byte* base, int64_t& skip, int64_t& remaining,
               Fn& fn) {
  for (const TypeNode& n : nodes) {
    if (remaining == 0) return;
    if (skip >= n.total()) {
      skip -= n.total();
      continue;
    }
    int64_t i = skip / n.packed;
    skip %= n.packed;
    for (; i < n.count && remaining > 0; ++i) {
      std::byte* at = base + n.offset + i * n.stride;
      if (n.leaf()) {
        const int64_t len = std::min(n.bytes - skip, remaining);
        fn(at + skip, len);
        remaining -= len;
        skip = 0;
      } else {
        WalkNodes(n.body, at, skip, remaining, fn);
      }
    }
  }
}
}  // namespace internal

// Calls fn(std::byte* where, int64_t bytes) for each contiguous piece of
// bytes [first, last) of the packed stream, in packed order. `last` is
// clamped to count * size().
template <class Fn>
void WalkSegment(const void* buf, int64_t count, const Datatype& type, int64_t first, int64_t last, Fn&& fn) {
  const int64_t size = type.size();
  last = std::min(last, count * size);
  if (size == 0 || first >= last) return;
  auto* base = static_cast<std::byte*>(const_cast<void*>(buf));
  if (type.contiguous()) {
    fn(base + first, last - first);
    return;
  }
  int64_t element = first / size;
  int64_t skip = first % size;
  int64_t remaining = last - first;
  for (; element < count && remaining > 0; ++element) {
    internal::WalkNodes(type.nodes(), base + element * type.extent(), skip, remaining, fn);
    skip = 0;
  }
}

// Packs bytes [first, last) into `out`; returns how many.
inline int64_t Pack(const void* buf, int64_t count, const Datatype& type, int64_t first, int64_t last,
                    void* out) {
  auto* to = static_cast<std::byte*>(out);
  WalkSegment(buf, count, type, first, last, [&](std::byte* from, int64_t n) {
    std::memcpy(to, from, static_cast<std::size_t>(n));
    to += n;
  });
  return to - static_cast<std::byte*>(out);
}

// Unpacks `in` as bytes [first, last) of the stream into `buf`; returns how many.
inline int64_t Unpack(const void* in, int64_t count, const Datatype& type, int64_t first, int64_t last,
                      void* buf) {
  const auto* from = static_cast<const std::byte*>(in);
  WalkSegment(buf, count, type, first, last, [&](std::byte* to, int64_t n) {
    std::memcpy(to, from, static_cast<std::size_t>(n));
    from += n;
  });
  return from - static_cast<const std::byte*>(in);
}

// One contiguous piece of user memory (an iovec for zero-copy methods).
struct Piece {
  std::byte* base;
  int64_t bytes;
};

// The pieces of bytes [first, last), in packed order.
inline std::vector<Piece> Pieces(const void* buf, int64_t count, const Datatype& type, int64_t first,
                                 int64_t last) {
  std::vector<Piece> out;
  WalkSegment(buf, count, type, first, last, [&](std::byte* at, int64_t n) {
    if (!out.empty() && out.back().base + out.back().bytes == at) {
      out.back().bytes += n;  // adjacent in memory: one piece
    } else {
      out.push_back({at, n});
    }
  });
  return out;
}

}  // namespace cartage::car

#endif  // CARTAGE_CAR_SEGMENT_WALK_H_
