// The envelope in libfabric's 64-bit tag (seed 003). An MPI-style envelope
// needs 96 bits (context, source rank, tag) and two protocol bits mark a
// synchronous send and its acknowledgement, so each layout trims something:
//
//   ofi_tag_1     | proto 2 | context 12 | source 18 | tag 32 |
//   ofi_tag_2     | proto 2 | context 24 | source 18 | tag 20 |
//   ofi_tag_full  | -- 2 -- | proto 2 | context 28 | tag 32 |   source rank in
//                 the remote CQ data (needs FI_REMOTE_CQ_DATA and, for
//                 receives from one rank, FI_DIRECTED_RECV)
//   auto          ofi_tag_full where the provider has both, else ofi_tag_1
//
// A provider that reserves high tag bits (mem_tag_format: its leading zero
// bits) takes them from the top; the protocol bits move down below them and
// the context field shrinks (ofi_tag_full first gives up its two spare bits).
// A tag field of n bits carries tags 0 .. 2^(n-1)-1 (seed 003's maxima: 32
// bits INT_MAX, 20 bits 524,287); a source field of n bits ranks 0 .. 2^n-1;
// a context field of n bits ids 0 .. 2^n-1. What does not fit is refused
// (Fits*), never wrapped.
//
// The remote CQ data word, where the provider has one, carries what the tag
// cannot: ofi_tag_full's source rank (low 32 bits) and, with 8 bytes of CQ
// data, the message's size (the high 32 bits in ofi_tag_full, saturating at
// 2^32-1 = "4 GiB or more"; all 64 bits in the other layouts). Providers
// disagree on reporting truncation (measured with libfabric 1.17: tcp;ofi_rxm
// and shm report FI_ETRUNC without the size, udp;ofi_rxd delivers the first
// bytes as if the message had fit), so the size from the sender decides.
//
// A receive ignores the sync bit (a synchronous send matches an ordinary
// receive) but requires the ack bit clear, so acknowledgements only ever
// match the receive its sender posted for them.
#ifndef CARTAGE_METHODS_OFI_OFI_WIRE_H_
#define CARTAGE_METHODS_OFI_OFI_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cartage::methods::ofi {

enum class TagMode : uint8_t { kAuto, kTag1, kTag2, kFull };
absl::string_view TagModeName(TagMode m);
absl::StatusOr<TagMode> ParseTagMode(absl::string_view text);

// The leading zero bits of a provider's mem_tag_format (0 when it gives none).
int ReservedBits(uint64_t mem_tag_format);

struct TagMatch {
  uint64_t tag = 0;
  uint64_t ignore = 0;  // bits that may differ
};

class TagLayout {
 public:
  // `mode` kAuto picks ofi_tag_full when `cq_data_and_directed`, else ofi_tag_1.
  // Fails when the mode needs what the provider lacks, or the reserved bits
  // leave no context bit.
  // `cq_data_bytes`: the provider's remote CQ data size (0: none).
  static absl::StatusOr<TagLayout> Make(TagMode mode, int reserved_bits, bool cq_data_and_directed,
                                        int cq_data_bytes = 0);

  TagMode mode() const { return mode_; }
  bool source_in_data() const { return mode_ == TagMode::kFull; }
  int context_bits() const { return context_bits_; }
  int source_bits() const { return source_bits_; }
  int tag_bits() const { return tag_bits_; }
  uint64_t max_context() const { return (uint64_t{1} << context_bits_) - 1; }
  // The largest source rank the tag carries (unbounded in the CQ data).
  int64_t max_source() const {
    return source_in_data() ? int64_t{0x7fffffff} : (int64_t{1} << source_bits_) - 1;
  }
  int64_t max_tag() const { return (int64_t{1} << (tag_bits_ - 1)) - 1; }
  uint64_t sync_bit() const { return sync_bit_; }
  uint64_t ack_bit() const { return ack_bit_; }

  // The tag of a message (the caller checked that the fields fit).
  uint64_t Send(uint64_t context, int source, int tag, bool sync) const;
  // What a receive posts: `source` or `tag` -1 for any.
  TagMatch Recv(uint64_t context, int source, int tag) const;
  // The acknowledgement `receiver` sends for a synchronous send, and what
  // the sender posts for it.
  uint64_t Ack(uint64_t context, int receiver, int tag) const;
  TagMatch AckRecv(uint64_t context, int receiver, int tag) const;

  // Fields of an arrived tag.
  int SourceOf(uint64_t t) const { return static_cast<int>((t >> tag_bits_) & Mask(source_bits_)); }
  int TagOf(uint64_t t) const { return static_cast<int>(t & Mask(tag_bits_)); }
  uint64_t ContextOf(uint64_t t) const { return (t >> (tag_bits_ + source_bits_)) & Mask(context_bits_); }
  bool IsSync(uint64_t t) const { return (t & sync_bit_) != 0; }

  // The CQ data word: whether messages carry one, what it holds.
  bool size_in_data() const { return cq_data_bytes_ >= 8; }
  bool uses_data() const { return source_in_data() || size_in_data(); }
  uint64_t Data(int source, uint64_t bytes) const;
  int SourceOf(uint64_t t, uint64_t data) const {
    return source_in_data() ? static_cast<int>(data & 0xffffffffu) : SourceOf(t);
  }
  // The message's size, where the data word says it (else -1).
  int64_t SizeOf(uint64_t data) const;
  bool IsAck(uint64_t t) const { return (t & ack_bit_) != 0; }

  // "ofi_tag_1: 2 protocol bits, 12-bit context (max 4095), 18-bit source (max 262143), 32-bit tag (max 2147483647)"
  std::string Describe() const;

 private:
  static uint64_t Mask(int bits) { return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1; }
  TagMode mode_ = TagMode::kTag1;
  int context_bits_ = 0, source_bits_ = 0, tag_bits_ = 0, reserved_bits_ = 0, cq_data_bytes_ = 0;
  uint64_t sync_bit_ = 0, ack_bit_ = 0;
};

}  // namespace cartage::methods::ofi

#endif  // CARTAGE_METHODS_OFI_OFI_WIRE_H_
