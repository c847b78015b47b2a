// What travels on a tcp connection. Little-endian, fixed-size, checked field
// by field before use (tcp_receive.cc, OnFrame).
//
// Set-up, once per connection, initiator first:
//   Hello      magic, version, the initiator's rank and the job key
//   HelloReply kWelcome (this connection is the VC's), kDuplicate (the other
//              one, started by the lower rank, wins: wait for it), kRefused
// Then frames, each a FrameHeader and for EAGER and DATA its payload:
//   EAGER  context, tag, length, sender handle (sync), payload
//   RTS    context, tag, length, sender handle
//   CTS    sender handle, receiver handle
//   DATA   receiver handle, offset (= bytes the receiver has), length; the
//          rest of the message follows in one stream
//   ACK    sender handle (synchronous send matched)
#ifndef CARTAGE_METHODS_TCP_TCP_WIRE_H_
#define CARTAGE_METHODS_TCP_TCP_WIRE_H_

#include <cstdint>

namespace cartage::methods::tcp {

inline constexpr uint32_t kHelloMagic = 0x54524143;  // "CART"
inline constexpr uint16_t kWireVersion = 1;
inline constexpr int kJobKeyBytes = 64;

struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t key_len;  // bytes of `key` in use
  int32_t rank;      // the initiator
  int32_t size;      // its job size
  char key[kJobKeyBytes];
};
static_assert(sizeof(Hello) == 80);

enum HelloVerdict : uint32_t { kWelcome = 1, kDuplicate = 2, kRefused = 3 };
struct HelloReply {
  uint32_t magic;
  uint32_t verdict;
};

enum FrameType : uint8_t {
  kFrameEager = 1, kFrameRts = 2, kFrameCts = 3, kFrameData = 4, kFrameAck = 5,
  kFrameGone = 6,  // a: a rank the sender saw die
};

struct FrameHeader {
  uint8_t type;
  uint8_t reserved[3];
  uint32_t proto;    // CarProto bits of an envelope
  uint32_t context;
  int32_t tag;
  uint64_t length;   // EAGER/RTS: message bytes; DATA: bytes following
  uint64_t a;        // EAGER/RTS/CTS/ACK: sender handle; DATA: receiver handle; GONE: the rank
  uint64_t b;        // CTS: receiver handle; DATA: offset
};
static_assert(sizeof(FrameHeader) == 40);

}  // namespace cartage::methods::tcp

#endif  // CARTAGE_METHODS_TCP_TCP_WIRE_H_
