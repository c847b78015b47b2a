// The segment engine: packs, unpacks or lists any byte range [first, last)
// of the packed stream of `count` elements of a Datatype, so that a message
// can be cut into pieces handled independently and in any order (seed 002's
// segment: buffer, count, datatype, first, last). It seeks to `first` in
// O(depth of the type), not by walking the bytes before it.
//
//   std::vector<std::byte> wire(t.size() * n);
//   Pack(matrix, n, column, 0, 4096, wire.data());             // first chunk
//   Pack(matrix, n, column, 4096, wire.size(), wire.data() + 4096);
#ifndef CARTAGE_DATATYPE_SEGMENT_WALK_H_
#define CARTAGE_DATATYPE_SEGMENT_WALK_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "datatype/datatype.h"

namespace cartage::datatype {

namespace internal {
// Visits the bytes of a node sequence as runs: fn(at, k, stride, bytes) is
// k blocks of `bytes` bytes, `stride` apart, starting at `at` (k == 1 for a
// piece cut by `skip` or `remaining`).
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
    if (n.leaf()) {
      if (skip > 0) {  // the rest of a block cut at its start
        const int64_t len = std::min(n.bytes - skip, remaining);
        fn(base + n.offset + i * n.stride + skip, 1, 0, len);
        remaining -= len;
        skip = 0;
        ++i;
      }
      const int64_t whole = std::min(n.count - i, remaining / n.bytes);
      if (whole > 0) {
        fn(base + n.offset + i * n.stride, whole, n.stride, n.bytes);
        remaining -= whole * n.bytes;
        i += whole;
      }
      if (remaining > 0 && i < n.count) {  // a block cut at its end
        fn(base + n.offset + i * n.stride, 1, 0, remaining);
        remaining = 0;
      }
      continue;
    }
    for (; i < n.count && remaining > 0; ++i) WalkNodes(n.body, base + n.offset + i * n.stride, skip, remaining, fn);
  }
}

// Visits bytes [first, last) of the packed stream as runs (see WalkNodes).
template <class Fn>
void WalkRuns(const void* buf, int64_t count, const Datatype& type, int64_t first, int64_t last, Fn&& fn) {
  const int64_t size = type.size();
  last = std::min(last, count * size);
  if (size == 0 || first >= last) return;
  auto* base = static_cast<std::byte*>(const_cast<void*>(buf));
  if (type.contiguous()) {
    fn(base + first, 1, 0, last - first);
    return;
  }
  int64_t element = first / size;
  int64_t skip = first % size;
  int64_t remaining = last - first;
  for (; element < count && remaining > 0; ++element) {
    WalkNodes(type.nodes(), base + element * type.extent(), skip, remaining, fn);
    skip = 0;
  }
}

// Copies k blocks of `bytes` between strided memory and the packed stream at
// `packed` (advanced past them). Small fixed sizes are single moves, four to
// an iteration; the stream pointer lives in a register meanwhile.
template <bool kToPacked>
inline void CopyRun(std::byte*& packed_ref, std::byte* mem, int64_t k, int64_t stride, int64_t bytes) {
  std::byte* packed = packed_ref;
  auto move = [](std::byte* p, std::byte* m, std::size_t n) {
    if constexpr (kToPacked) {
      std::memcpy(p, m, n);
    } else {
      std::memcpy(m, p, n);
    }
  };
  auto loop = [&](auto width) {
    constexpr std::size_t kW = decltype(width)::value;
    int64_t i = 0;
    for (; i + 4 <= k; i += 4, packed += 4 * kW) {
      std::byte* m = mem + i * stride;
      move(packed, m, kW);
      move(packed + kW, m + stride, kW);
      move(packed + 2 * kW, m + 2 * stride, kW);
      move(packed + 3 * kW, m + 3 * stride, kW);
    }
    for (; i < k; ++i, packed += kW) move(packed, mem + i * stride, kW);
  };
  switch (bytes) {
    case 4: loop(std::integral_constant<std::size_t, 4>{}); break;
    case 8: loop(std::integral_constant<std::size_t, 8>{}); break;
    case 16: loop(std::integral_constant<std::size_t, 16>{}); break;
    case 32: loop(std::integral_constant<std::size_t, 32>{}); break;
    case 64: loop(std::integral_constant<std::size_t, 64>{}); break;
    default:
      for (int64_t i = 0; i < k; ++i, packed += bytes) move(packed, mem + i * stride, static_cast<std::size_t>(bytes));
      break;
  }
  packed_ref = packed;
}
}  // namespace internal

// Calls fn(std::byte* where, int64_t bytes) for each contiguous piece of
// bytes [first, last) of the packed stream, in packed order. `last` is
// clamped to count * size().
template <class Fn>
void WalkSegment(const void* buf, int64_t count, const Datatype& type, int64_t first, int64_t last, Fn&& fn) {
  internal::WalkRuns(buf, count, type, first, last, [&](std::byte* at, int64_t k, int64_t stride, int64_t bytes) {
    for (int64_t i = 0; i < k; ++i) fn(at + i * stride, bytes);
  });
}

// Packs bytes [first, last) into `out`; returns how many.
inline int64_t Pack(const void* buf, int64_t count, const Datatype& type, int64_t first, int64_t last,
                    void* out) {
  auto* to = static_cast<std::byte*>(out);
  internal::WalkRuns(buf, count, type, first, last, [&](std::byte* at, int64_t k, int64_t stride, int64_t bytes) {
    internal::CopyRun<true>(to, at, k, stride, bytes);
  });
  return to - static_cast<std::byte*>(out);
}

// Unpacks `in` as bytes [first, last) of the stream into `buf`; returns how many.
inline int64_t Unpack(const void* in, int64_t count, const Datatype& type, int64_t first, int64_t last,
                      void* buf) {
  auto* from = static_cast<std::byte*>(const_cast<void*>(in));  // read only
  internal::WalkRuns(buf, count, type, first, last, [&](std::byte* at, int64_t k, int64_t stride, int64_t bytes) {
    internal::CopyRun<false>(from, at, k, stride, bytes);
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

}  // namespace cartage::datatype

#endif  // CARTAGE_DATATYPE_SEGMENT_WALK_H_
