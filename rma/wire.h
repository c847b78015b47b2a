// What travels between an origin and a served window's target: the kinds
// of operations and requests, a control message (the CAM: a batch of
// records, each a header, a target layout and maybe data), the tags of
// the window's communicator, and the split of a batch into its records.
#ifndef CARTAGE_RMA_WIRE_H_
#define CARTAGE_RMA_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"

namespace cartage::rma {

// The operations, and the requests of a passive epoch (a lock, a flush, an
// unlock), which travel as operations do.
enum class OpKind : uint8_t { kPut, kGet, kAccumulate, kGetAccumulate, kCompareAndSwap, kLock, kFlush, kUnlock, kCount };
const char* OpKindName(OpKind kind);
// Whether the target sends data back (the origin then awaits it).
inline bool Fetches(OpKind k) { return k == OpKind::kGet || k == OpKind::kGetAccumulate || k == OpKind::kCompareAndSwap; }

// An accumulate's operator on the wire: a reduction of datatype/op.h (its
// OpKind, below kUser), or one of MPI's two one-sided ones.
inline constexpr uint8_t kOpReplace = 0xf0;
inline constexpr uint8_t kOpNoOp = 0xf1;

// A record's header: one operation's or request's, followed in its batch by
// its target layout (`runs` Runs), then its data where it travels with it.
struct Header {
  uint32_t magic = 0;
  uint8_t kind = 0;       // OpKind
  uint8_t op = 0;         // a reduction's datatype::OpKind, kOpReplace or kOpNoOp; a lock request's kLock*
  uint8_t basic = 0;      // datatype::BasicType (accumulate, the fetches)
  uint8_t inline_data = 0;  // 1: the data follows the layout
  uint32_t epoch = 0;     // the origin's epoch it was issued in
  uint32_t runs = 0;
  uint64_t disp = 0;      // in the target's displacement unit
  uint64_t bytes = 0;     // bytes of the target layout
};
static_assert(sizeof(Header) == 32);
// The data an operation carries to its target (in its control message or
// apart): a put's and accumulate's whole layout, none for a get or a
// fetch that changes nothing, a compare-and-swap's value and comparand.
inline uint64_t DataBytes(OpKind kind, uint8_t op, uint64_t layout_bytes) {
  switch (kind) {
    case OpKind::kGet:
    case OpKind::kLock:
    case OpKind::kFlush:
    case OpKind::kUnlock: return 0;
    case OpKind::kGetAccumulate: return op == kOpNoOp ? 0 : layout_bytes;
    case OpKind::kCompareAndSwap: return 2 * layout_bytes;
    default: return layout_bytes;
  }
}
inline constexpr uint32_t kMagic = 0x31414d52;  // "RMA1"
// The epoch of an operation in a passive epoch (under a lock), and in an
// access epoch of start and complete (its target posted before it was sent).
inline constexpr uint32_t kPassiveEpoch = 0xffffffff;
inline constexpr uint32_t kGroupEpoch = 0xfffffffe;
// Whether an operation's epoch is a fence's (numbered), whose turn comes
// with the fence that opens it here.
inline bool FenceEpoch(uint32_t e) { return e != kPassiveEpoch && e != kGroupEpoch; }
// A lock request's `op`.
inline constexpr uint8_t kLockShared = 1;
inline constexpr uint8_t kLockExclusive = 2;

// One contiguous block of the target layout: bytes from the target address
// (the window's base + disp * unit), in the order of the packed data.
struct Run {
  int64_t offset = 0;
  int64_t length = 0;
};

// An operation's target layout: most are one block, kept in place.
using Layout = absl::InlinedVector<Run, 2>;

// Message tags on the window's communicator.
inline constexpr int kTagControl = 1;
inline constexpr int kTagData = 2;   // a put's or accumulate's data that does not travel in its control message
inline constexpr int kTagReply = 3;  // a get's data
inline constexpr int kTagPost = 4;      // a target's post: the origin may start
inline constexpr int kTagComplete = 5;  // an origin's complete: how many operations it issued to the target
// A control message is a batch: this header, then `count` records, each
// one operation's or request's (its Header, its layout, its data where it
// travels with it), in the order they were issued to the target.
struct BatchHeader {
  uint32_t magic = 0;
  uint32_t count = 0;
};
static_assert(sizeof(BatchHeader) == 8);
inline constexpr uint32_t kBatchMagic = 0x42414d52;  // "RMAB"
// A control message's largest size (the target receives every one into a
// buffer this big), and the data that travels in one.
inline constexpr std::size_t kControlMax = 64 * 1024;
inline constexpr std::size_t kInlineMax = 4096;
inline constexpr std::size_t kMaxRuns = (kControlMax - sizeof(BatchHeader) - sizeof(Header)) / sizeof(Run);
// A batch leaves once the next record would take it past this (one
// eager message on shm, whose eager limit is 8 KiB by default), or
// once an epoch's call needs what it holds done.
inline constexpr std::size_t kBatchMax = 8 * 1024;
// The bytes of a record whose header is `h`.
inline std::size_t RecordBytes(const Header& h) {
  return sizeof(Header) + std::size_t{h.runs} * sizeof(Run) +
         (h.inline_data != 0 ? static_cast<std::size_t>(DataBytes(static_cast<OpKind>(h.kind), h.op, h.bytes)) : 0);
}
// A control message's records, split: each one's header and bytes, until
// one cannot be read (a foreign or malformed header, or a size that runs
// past the message's end): that one and every one after it are refused,
// with `why`. A message whose batch header is malformed is one refused
// record.
struct Record {
  Header h;  // a readable record's: its magic, kind, block count and sizes checked
  const std::byte* at = nullptr;
  std::size_t n = 0;
  std::string why;  // empty: readable
};
void SplitBatch(const std::byte* m, std::size_t n, std::vector<Record>* out);

}  // namespace cartage::rma

#endif  // CARTAGE_RMA_WIRE_H_
