// The records shm ranks exchange through their rings (shm_ring.h). The
// source rank is the ring's, so headers carry no rank. Every record is
// validated on arrival: a short record or an unknown handle fails the peer
// with kDataLoss, it never crashes the receiver.
#ifndef CARTAGE_METHODS_SHM_SHM_WIRE_H_
#define CARTAGE_METHODS_SHM_SHM_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cartage::methods::shm {

enum RecordType : uint16_t {
  kRecEager = 1,  // MatchHeader + payload
  kRecRts = 2,    // MatchHeader + RtsBody: rendezvous request
  kRecCts = 3,    // CtsBody: receiver matched a rendezvous (and may have read it already)
  kRecData = 4,   // DataHeader + payload: pipelined rendezvous data
  kRecAck = 5,    // AckBody: a synchronous send was matched
};

// The envelope and what follows it; 32 bytes, so an 8-byte message and its
// ring header fit one cache line.
struct MatchHeader {
  uint32_t context;
  int32_t tag;
  uint64_t length;         // message bytes
  uint64_t sender_handle;  // the send CAR, for the ACK / CTS (0: none)
  uint32_t proto;          // car::CarProto bits
  uint32_t reserved;
};
static_assert(sizeof(MatchHeader) == 32);

struct RtsBody {
  uint64_t address;  // the sender's buffer, for a single copy by process_vm_readv
};

struct CtsBody {
  uint64_t sender_handle;
  uint64_t receiver_handle;  // where pipelined data goes (when !copied)
  uint32_t copied;           // 1: the receiver already read the data itself (CMA)
  uint32_t reserved;
};

struct DataHeader {
  uint64_t receiver_handle;
  uint64_t offset;
};

struct AckBody {
  uint64_t sender_handle;
};

// Writing a header into the ring: field by field, never as one block copied
// from a header built on the stack. Built there by one store per field, it
// is read back with 16-byte loads, and a load that spans several stores
// cannot take its bytes from them: it waits until they have landed (a
// store-forwarding stall; cartage-bench bcast 8 B at 8 ranks, under perf).
namespace internal {
template <class V>
inline void StoreAt(std::byte* to, std::size_t offset, V value) {
  std::memcpy(to + offset, &value, sizeof(V));
}
}  // namespace internal

inline void StoreHeader(std::byte* to, const MatchHeader& h) {
  internal::StoreAt(to, offsetof(MatchHeader, context), h.context);
  internal::StoreAt(to, offsetof(MatchHeader, tag), h.tag);
  internal::StoreAt(to, offsetof(MatchHeader, length), h.length);
  internal::StoreAt(to, offsetof(MatchHeader, sender_handle), h.sender_handle);
  internal::StoreAt(to, offsetof(MatchHeader, proto), h.proto);
  internal::StoreAt(to, offsetof(MatchHeader, reserved), h.reserved);
}

inline void StoreHeader(std::byte* to, const CtsBody& b) {
  internal::StoreAt(to, offsetof(CtsBody, sender_handle), b.sender_handle);
  internal::StoreAt(to, offsetof(CtsBody, receiver_handle), b.receiver_handle);
  internal::StoreAt(to, offsetof(CtsBody, copied), b.copied);
  internal::StoreAt(to, offsetof(CtsBody, reserved), b.reserved);
}

inline void StoreHeader(std::byte* to, const DataHeader& h) {
  internal::StoreAt(to, offsetof(DataHeader, receiver_handle), h.receiver_handle);
  internal::StoreAt(to, offsetof(DataHeader, offset), h.offset);
}

}  // namespace cartage::methods::shm

#endif  // CARTAGE_METHODS_SHM_SHM_WIRE_H_
