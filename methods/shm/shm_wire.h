// The records shm ranks exchange through their rings (shm_ring.h). The
// source rank is the ring's, so headers carry no rank. Every record is
// validated on arrival: a short record or an unknown handle fails the peer
// with kDataLoss, it never crashes the receiver.
#ifndef CARTAGE_METHODS_SHM_SHM_WIRE_H_
#define CARTAGE_METHODS_SHM_SHM_WIRE_H_

#include <cstdint>

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

}  // namespace cartage::methods::shm

#endif  // CARTAGE_METHODS_SHM_SHM_WIRE_H_
