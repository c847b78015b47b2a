#include "datatype/datatype.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace cartage::datatype {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

// Packed bytes and the byte span [lo, hi) the data covers, of a sequence.
void Measure(std::vector<TypeNode>& nodes, int64_t* packed, int64_t* lo, int64_t* hi) {
  *packed = 0;
  for (TypeNode& n : nodes) {
    int64_t body_lo = kMax, body_hi = kMin;  // the span of one repetition
    if (n.leaf()) {
      n.packed = n.bytes;
      body_lo = 0;
      body_hi = n.bytes;
    } else {
      Measure(n.body, &n.packed, &body_lo, &body_hi);
    }
    *packed += n.total();
    if (n.total() == 0) continue;
    const int64_t last = n.offset + (n.count - 1) * n.stride;
    *lo = std::min({*lo, n.offset + body_lo, last + body_lo});
    *hi = std::max({*hi, n.offset + body_hi, last + body_hi});
  }
}

// The nodes of `count` elements of `old`, `step` bytes apart, at `offset`.
std::vector<TypeNode> Repeat(const Datatype& old, int64_t count, int64_t step, int64_t offset) {
  // A contiguous type repeated densely is one longer block.
  if (old.contiguous() && step == old.size() && old.nodes().size() == 1 && old.nodes()[0].leaf() &&
      old.nodes()[0].count == 1) {
    TypeNode leaf = old.nodes()[0];
    leaf.offset += offset;
    leaf.bytes *= count;
    leaf.count = 1;
    return {leaf};
  }
  if (count == 1) {
    std::vector<TypeNode> nodes = old.nodes();
    for (TypeNode& n : nodes) n.offset += offset;
    return nodes;
  }
  TypeNode loop;
  loop.offset = offset;
  loop.count = count;
  loop.stride = step;
  loop.body = old.nodes();
  // A loop over a single leaf is a strided leaf.
  if (loop.body.size() == 1 && loop.body[0].leaf() && loop.body[0].count == 1) {
    TypeNode leaf = loop.body[0];
    leaf.offset += offset;
    leaf.count = count;
    leaf.stride = step;
    return {leaf};
  }
  return {loop};
}

// Appends `more`, merging a leaf into the previous one when they touch.
void Append(std::vector<TypeNode>& seq, std::vector<TypeNode> more) {
  for (TypeNode& n : more) {
    if (!seq.empty()) {
      TypeNode& p = seq.back();
      if (p.leaf() && n.leaf() && p.count == 1 && n.count == 1 && p.basic == n.basic &&
          p.offset + p.bytes == n.offset) {
        p.bytes += n.bytes;
        continue;
      }
    }
    seq.push_back(std::move(n));
  }
}

absl::Status NonNegative(absl::string_view ctor, absl::string_view what, int64_t v) {
  if (v >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat("datatype %s: %s is %d; it must be >= 0", ctor, what, v));
}

// Drops nodes that carry no data (so an empty type has no nodes at all).
void Prune(std::vector<TypeNode>& nodes) {
  for (TypeNode& n : nodes) {
    if (!n.leaf()) Prune(n.body);
  }
  std::erase_if(nodes, [](const TypeNode& n) { return n.total() == 0; });
}

}  // namespace

Datatype Datatype::Make(std::vector<TypeNode> nodes, std::string name, bool has_bounds, int64_t lb,
                        int64_t extent) {
  auto rep = std::make_shared<Rep>();
  int64_t packed = 0, lo = kMax, hi = kMin;
  Measure(nodes, &packed, &lo, &hi);
  Prune(nodes);
  if (lo == kMax) lo = hi = 0;  // no data at all
  rep->nodes = std::move(nodes);
  rep->size = packed;
  rep->true_lb = lo;
  rep->true_extent = hi - lo;
  rep->lb = has_bounds ? lb : lo;
  rep->extent = has_bounds ? extent : hi - lo;
  rep->contiguous = rep->nodes.size() == 1 && rep->nodes[0].leaf() && rep->nodes[0].count == 1 &&
                    rep->nodes[0].offset == 0 && rep->lb == 0 && rep->extent == rep->size;
  if (rep->size == 0) rep->contiguous = rep->extent == 0;
  // One basic type under every leaf (reductions need it): decided once here.
  bool first = true;
  rep->homogeneous = true;
  auto visit = [&](auto&& self, const std::vector<TypeNode>& seq) -> void {
    for (const TypeNode& n : seq) {
      if (!n.leaf()) {
        self(self, n.body);
      } else if (first) {
        rep->basic = n.basic;
        first = false;
      } else if (n.basic != rep->basic) {
        rep->homogeneous = false;
      }
    }
  };
  visit(visit, rep->nodes);
  rep->homogeneous = rep->homogeneous && !first;
  rep->name = std::move(name);
  return Datatype(std::move(rep));
}

Datatype Datatype::Basic(BasicType t) {
  // Built once per basic type: a call hands out a reference, allocating
  // nothing (every typed call and collective names one).
  auto build = [](BasicType b) {
    TypeNode leaf;
    leaf.bytes = static_cast<int64_t>(SizeOf(b));
    leaf.basic = b;
    // A pair type's trailing padding counts in its extent (the C struct's size).
    return Make({leaf}, std::string(TypeName(b)), true, 0, static_cast<int64_t>(ExtentOf(b)));
  };
  static const std::vector<Datatype>* const kBasic = [&] {
    auto* all = new std::vector<Datatype>();
    for (std::size_t i = 0; i < static_cast<std::size_t>(BasicType::kCount); ++i) {
      all->push_back(build(static_cast<BasicType>(i)));
    }
    return all;
  }();
  const auto i = static_cast<std::size_t>(t);
  return i < kBasic->size() ? (*kBasic)[i] : build(t);
}

bool Datatype::homogeneous(BasicType* type) const {
  if (rep_->homogeneous) *type = rep_->basic;
  return rep_->homogeneous;
}

absl::StatusOr<Datatype> Datatype::Contiguous(int64_t count, const Datatype& old) {
  if (auto s = NonNegative("contiguous", "count", count); !s.ok()) return s;
  // An empty typemap has lower bound 0 and extent 0.
  return Make(Repeat(old, count, old.extent(), 0), absl::StrFormat("contiguous(%d, %s)", count, old.name()),
              true, count == 0 ? 0 : old.lb(), count * old.extent());
}

absl::StatusOr<Datatype> Datatype::Hvector(int64_t count, int64_t blocklength, int64_t stride_bytes,
                                           const Datatype& old) {
  if (auto s = NonNegative("hvector", "count", count); !s.ok()) return s;
  if (auto s = NonNegative("hvector", "blocklength", blocklength); !s.ok()) return s;
  absl::StatusOr<Datatype> block = Contiguous(blocklength, old);
  if (!block.ok()) return block.status();
  std::vector<TypeNode> nodes;
  if (count > 0 && blocklength > 0) nodes = Repeat(*block, count, stride_bytes, 0);
  // Bounds as MPI: from the first block's lb to the last block's ub.
  const int64_t first = std::min<int64_t>(0, (count - 1) * stride_bytes);
  const int64_t last = std::max<int64_t>(0, (count - 1) * stride_bytes);
  const bool empty = count == 0 || blocklength == 0;  // an empty typemap: lb 0, extent 0
  const int64_t lb = empty ? 0 : first + old.lb();
  const int64_t extent = empty ? 0 : last - first + blocklength * old.extent();
  return Make(std::move(nodes),
              absl::StrFormat("hvector(%d, %d, %d B, %s)", count, blocklength, stride_bytes, old.name()),
              true, lb, extent);
}

absl::StatusOr<Datatype> Datatype::Vector(int64_t count, int64_t blocklength, int64_t stride,
                                          const Datatype& old) {
  absl::StatusOr<Datatype> t = Hvector(count, blocklength, stride * old.extent(), old);
  if (!t.ok()) return absl::InvalidArgumentError(absl::StrCat(t.status().message(), " (vector)"));
  return Make(t->nodes(), absl::StrFormat("vector(%d, %d, %d, %s)", count, blocklength, stride, old.name()),
              true, t->lb(), t->extent());
}

absl::StatusOr<Datatype> Datatype::Hindexed(absl::Span<const int64_t> blocklengths,
                                            absl::Span<const int64_t> byte_displacements,
                                            const Datatype& old) {
  if (blocklengths.size() != byte_displacements.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "datatype hindexed: %d block lengths but %d displacements", blocklengths.size(),
        byte_displacements.size()));
  }
  std::vector<TypeNode> nodes;
  int64_t lo = kMax, hi = kMin;
  for (std::size_t i = 0; i < blocklengths.size(); ++i) {
    if (auto s = NonNegative("hindexed", absl::StrCat("blocklengths[", i, "]"), blocklengths[i]); !s.ok()) {
      return s;
    }
    if (blocklengths[i] == 0) continue;
    Append(nodes, Repeat(old, blocklengths[i], old.extent(), byte_displacements[i]));
    lo = std::min(lo, byte_displacements[i] + old.lb());
    hi = std::max(hi, byte_displacements[i] + old.lb() + blocklengths[i] * old.extent());
  }
  if (lo == kMax) lo = hi = 0;
  return Make(std::move(nodes), absl::StrFormat("hindexed(%d blocks, %s)", blocklengths.size(), old.name()),
              true, lo, hi - lo);
}

absl::StatusOr<Datatype> Datatype::Indexed(absl::Span<const int64_t> blocklengths,
                                           absl::Span<const int64_t> displacements, const Datatype& old) {
  std::vector<int64_t> bytes(displacements.begin(), displacements.end());
  for (int64_t& d : bytes) d *= old.extent();
  absl::StatusOr<Datatype> t = Hindexed(blocklengths, bytes, old);
  if (!t.ok()) return t.status();
  return Make(t->nodes(), absl::StrFormat("indexed(%d blocks, %s)", blocklengths.size(), old.name()), true,
              t->lb(), t->extent());
}

absl::StatusOr<Datatype> Datatype::IndexedBlock(int64_t blocklength, absl::Span<const int64_t> displacements,
                                                const Datatype& old) {
  if (auto s = NonNegative("indexed_block", "blocklength", blocklength); !s.ok()) return s;
  const std::vector<int64_t> lengths(displacements.size(), blocklength);
  return Indexed(lengths, displacements, old);
}

absl::StatusOr<Datatype> Datatype::Struct(absl::Span<const int64_t> blocklengths,
                                          absl::Span<const int64_t> byte_displacements,
                                          absl::Span<const Datatype> types) {
  if (blocklengths.size() != byte_displacements.size() || blocklengths.size() != types.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "datatype struct: %d block lengths, %d displacements and %d types must agree", blocklengths.size(),
        byte_displacements.size(), types.size()));
  }
  std::vector<TypeNode> nodes;
  std::vector<std::string> names;
  int64_t lo = kMax, hi = kMin;
  for (std::size_t i = 0; i < types.size(); ++i) {
    if (auto s = NonNegative("struct", absl::StrCat("blocklengths[", i, "]"), blocklengths[i]); !s.ok()) {
      return s;
    }
    names.push_back(types[i].name());
    if (blocklengths[i] == 0) continue;
    Append(nodes, Repeat(types[i], blocklengths[i], types[i].extent(), byte_displacements[i]));
    lo = std::min(lo, byte_displacements[i] + types[i].lb());
    hi = std::max(hi, byte_displacements[i] + types[i].lb() + blocklengths[i] * types[i].extent());
  }
  if (lo == kMax) lo = hi = 0;
  return Make(std::move(nodes), absl::StrCat("struct(", absl::StrJoin(names, ", "), ")"), true, lo, hi - lo);
}

absl::StatusOr<Datatype> Datatype::Subarray(absl::Span<const int64_t> sizes, absl::Span<const int64_t> subsizes,
                                            absl::Span<const int64_t> starts, ArrayOrder order,
                                            const Datatype& old) {
  const std::size_t dims = sizes.size();
  if (dims == 0 || subsizes.size() != dims || starts.size() != dims) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "datatype subarray: %d sizes, %d subsizes and %d starts must agree and not be empty", dims,
        subsizes.size(), starts.size()));
  }
  for (std::size_t d = 0; d < dims; ++d) {
    if (sizes[d] <= 0 || subsizes[d] < 0 || starts[d] < 0 || starts[d] + subsizes[d] > sizes[d]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "datatype subarray: dimension %d: size %d, subsize %d, start %d do not fit", d, sizes[d],
          subsizes[d], starts[d]));
    }
  }
  // Walk from the fastest-varying dimension outwards.
  auto dim = [&](std::size_t k) { return order == ArrayOrder::kC ? dims - 1 - k : k; };
  absl::StatusOr<Datatype> t = Contiguous(subsizes[dim(0)], old);
  int64_t stride = sizes[dim(0)] * old.extent();
  int64_t offset = starts[dim(0)] * old.extent();
  for (std::size_t k = 1; k < dims && t.ok(); ++k) {
    t = Hvector(subsizes[dim(k)], 1, stride, *t);
    offset += starts[dim(k)] * stride;
    stride *= sizes[dim(k)];
  }
  if (!t.ok()) return t.status();
  std::vector<TypeNode> nodes = t->nodes();
  for (TypeNode& n : nodes) n.offset += offset;
  return Make(std::move(nodes), absl::StrFormat("subarray(%d dims, %s)", dims, old.name()), true, 0, stride);
}

absl::StatusOr<Datatype> Datatype::Resized(const Datatype& old, int64_t lb, int64_t extent) {
  if (auto s = NonNegative("resized", "extent", extent); !s.ok()) return s;
  return Make(old.nodes(), absl::StrFormat("resized(%s, lb %d, extent %d)", old.name(), lb, extent), true, lb,
              extent);
}

}  // namespace cartage::datatype
