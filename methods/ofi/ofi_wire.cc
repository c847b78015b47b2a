#include "methods/ofi/ofi_wire.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace cartage::methods::ofi {

absl::string_view TagModeName(TagMode m) {
  switch (m) {
    case TagMode::kAuto: return "auto";
    case TagMode::kTag1: return "ofi_tag_1";
    case TagMode::kTag2: return "ofi_tag_2";
    case TagMode::kFull: return "ofi_tag_full";
  }
  return "?";
}

absl::StatusOr<TagMode> ParseTagMode(absl::string_view text) {
  for (TagMode m : {TagMode::kAuto, TagMode::kTag1, TagMode::kTag2, TagMode::kFull}) {
    if (text == TagModeName(m)) return m;
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("unknown tag mode '%s' (auto, ofi_tag_1, ofi_tag_2, ofi_tag_full)", text));
}

int ReservedBits(uint64_t mem_tag_format) {
  if (mem_tag_format == 0) return 0;
  int n = 0;
  while ((mem_tag_format & (uint64_t{1} << 63)) == 0) {
    mem_tag_format <<= 1;
    ++n;
  }
  return n;
}

absl::StatusOr<TagLayout> TagLayout::Make(TagMode mode, int reserved_bits, bool cq_data_and_directed,
                                          int cq_data_bytes) {
  if (mode == TagMode::kAuto) mode = cq_data_and_directed ? TagMode::kFull : TagMode::kTag1;
  if (mode == TagMode::kFull && !cq_data_and_directed) {
    return absl::FailedPreconditionError(
        "ofi_tag_full needs FI_REMOTE_CQ_DATA and FI_DIRECTED_RECV, which the provider lacks");
  }
  if (reserved_bits < 0 || reserved_bits > 64) {
    return absl::InvalidArgumentError(absl::StrFormat("%d reserved tag bits", reserved_bits));
  }
  TagLayout l;
  l.mode_ = mode;
  l.reserved_bits_ = reserved_bits;
  l.cq_data_bytes_ = cq_data_bytes;
  int nominal_context = 0;
  switch (mode) {
    case TagMode::kTag1: l.tag_bits_ = 32; l.source_bits_ = 18; nominal_context = 12; break;
    case TagMode::kTag2: l.tag_bits_ = 20; l.source_bits_ = 18; nominal_context = 24; break;
    default: l.tag_bits_ = 32; l.source_bits_ = 0; nominal_context = 28; break;
  }
  const int top = 64 - reserved_bits;  // the bits above are the provider's
  const int below = l.tag_bits_ + l.source_bits_;
  l.context_bits_ = std::min(nominal_context, top - 2 - below);
  if (l.context_bits_ < 1) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: the provider reserves %d high tag bits, which leaves no context bit", TagModeName(mode),
        reserved_bits));
  }
  const int proto = below + l.context_bits_;  // the protocol bits sit right above the context
  l.sync_bit_ = uint64_t{1} << proto;
  l.ack_bit_ = uint64_t{1} << (proto + 1);
  return l;
}

uint64_t TagLayout::Send(uint64_t context, int source, int tag, bool sync) const {
  uint64_t t = (context << (tag_bits_ + source_bits_)) | static_cast<uint64_t>(static_cast<uint32_t>(tag));
  if (!source_in_data()) t |= static_cast<uint64_t>(source) << tag_bits_;
  return sync ? t | sync_bit_ : t;
}

TagMatch TagLayout::Recv(uint64_t context, int source, int tag) const {
  TagMatch m;
  m.tag = Send(context, source < 0 ? 0 : source, tag < 0 ? 0 : tag, false);
  m.ignore = sync_bit_;
  if (source < 0 && !source_in_data()) m.ignore |= Mask(source_bits_) << tag_bits_;
  if (tag < 0) m.ignore |= Mask(tag_bits_);
  return m;
}

uint64_t TagLayout::Ack(uint64_t context, int receiver, int tag) const {
  return Send(context, receiver, tag, false) | ack_bit_;
}

TagMatch TagLayout::AckRecv(uint64_t context, int receiver, int tag) const {
  return {Ack(context, receiver, tag), 0};
}

namespace {
constexpr uint64_t kSizeSaturated = 0xffffffffu;  // ofi_tag_full: "4 GiB or more"
}  // namespace

uint64_t TagLayout::Data(int source, uint64_t bytes) const {
  if (!source_in_data()) return size_in_data() ? bytes : 0;
  const uint64_t src = static_cast<uint32_t>(source);
  return size_in_data() ? src | (std::min(bytes, kSizeSaturated) << 32) : src;
}

int64_t TagLayout::SizeOf(uint64_t data) const {
  if (!size_in_data()) return -1;
  if (!source_in_data()) return data > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(data);
  const uint64_t size = data >> 32;
  return size == kSizeSaturated ? -1 : static_cast<int64_t>(size);
}

std::string TagLayout::Describe() const {
  std::string s = absl::StrFormat("%s: 2 protocol bits, %d-bit context (max %d)", TagModeName(mode_),
                                  context_bits_, max_context());
  if (source_in_data()) {
    absl::StrAppend(&s, ", source in remote CQ data");
  } else {
    absl::StrAppendFormat(&s, ", %d-bit source (max %d)", source_bits_, max_source());
  }
  absl::StrAppendFormat(&s, ", %d-bit tag (max %d)", tag_bits_, max_tag());
  if (reserved_bits_ > 0) absl::StrAppendFormat(&s, ", %d bits reserved by the provider", reserved_bits_);
  if (size_in_data()) absl::StrAppend(&s, "; message size in remote CQ data");
  return s;
}

}  // namespace cartage::methods::ofi
