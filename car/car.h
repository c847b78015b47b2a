// The CAR (Communication Agent Request): one send, one receive, one piece of
// an unexpected message, or one step of a collective schedule (seed 002).
//
// A CAR is built from a CarSpec by a CarPool, which validates the flag
// combination; it then runs one of the CAR machines (car/*_fsm.h) chosen by
// its kind. Its actions do the CAR's own bookkeeping (bytes, status, the
// completion counter, dependency links) and hand transport work to the
// operations of the VC the CAR is bound to (seed 002's per-VC function table).
//
//   CarSpec spec;
//   spec.kind = CarKind::kSend;
//   spec.flags = CarFlag::kSendData;
//   spec.envelope = {.context_id = 0, .rank = 1, .tag = 7};
//   spec.segment = Segment::Of(buf, n, BasicType::kByte);
//   spec.counter = &request;        // the Completion the user waits on
//   spec.vc = &vc;
//   CARTAGE_ASSIGN_OR_RETURN(Car* car, pool.Create(spec));
//   CARTAGE_RETURN_IF_ERROR(SendMachine::Dispatch(*car, SendEvent::kPost));
#ifndef CARTAGE_CAR_CAR_H_
#define CARTAGE_CAR_CAR_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "base/completion.h"
#include "base/copy.h"
#include "datatype/basic_type.h"
#include "datatype/datatype.h"
#include "datatype/op.h"
#include "fsm/machine.h"

namespace cartage::car {

class Car;

// What a CAR is; it decides which machine runs it.
enum class CarKind : uint8_t {
  kSend,        // car_send: a message leaving this process
  kRecv,        // car_recv: a posted receive
  kUnexpected,  // car_unexpected: an arrived message no receive has matched yet
  kVertex,      // car_vertex: one step of a collective schedule
  kRma,         // car_rma: a one-sided write or read the method moves itself
  kCount
};

// "send", "recv", "unexpected", "vertex", "rma".
absl::string_view KindName(CarKind k);

// The type flags of seed 002 (three independent sets: direction, buffer
// supply, data transformation; plus progress dependencies).
enum class CarFlag : uint16_t {
  kNone = 0,
  kSendData = 1 << 0,             // SEND_DATA: moves data out
  kRecvData = 1 << 1,             // RECV_DATA: moves data in
  kSupplyPackedBuf = 1 << 2,      // SUPPLY_PACKED_BUF: gives its packed buffer to its consumer
  kPackedBufDependency = 1 << 3,  // PACKED_BUF_DEPENDENCY: waits for buf_dep's buffer
  kPack = 1 << 4,                 // PACK: packs the segment into the packed buffer
  kUnpack = 1 << 5,               // UNPACK: unpacks the packed buffer into the segment
  kMop = 1 << 6,                  // MOP: applies mop while unpacking (or packing)
  kProgressDependency = 1 << 7,   // PROGRESS_DEPENDENCY: starts when progress_dep completes
  kSupplyProgress = 1 << 8,       // SUPPLY_PROGRESS: its completion starts its dependent
};

// A set of CarFlag.
class CarFlags {
 public:
  constexpr CarFlags() = default;
  constexpr CarFlags(CarFlag f) : bits_(static_cast<uint16_t>(f)) {}  // NOLINT: implicit by design
  constexpr bool has(CarFlag f) const { return (bits_ & static_cast<uint16_t>(f)) != 0; }
  constexpr uint16_t bits() const { return bits_; }
  constexpr CarFlags operator|(CarFlags o) const { return FromBits(bits_ | o.bits_); }
  constexpr bool operator==(const CarFlags&) const = default;
  static constexpr CarFlags FromBits(unsigned b) {
    CarFlags f;
    f.bits_ = static_cast<uint16_t>(b);
    return f;
  }

 private:
  uint16_t bits_ = 0;
};
constexpr CarFlags operator|(CarFlag a, CarFlag b) { return CarFlags(a) | CarFlags(b); }

// "SEND_DATA|PACK", as seed 002 spells them.
std::string FlagsToString(CarFlags f);

// Wildcards, legal on receives only.
inline constexpr int32_t kAnySource = -1;
inline constexpr int32_t kAnyTag = -1;

// Who a message is for: context id (communicator), peer rank, tag.
struct Envelope {
  uint32_t context_id = 0;
  int32_t rank = 0;
  int32_t tag = 0;

  // A copy to pass by value (MethodHost::MatchIncoming), its first word
  // (context, rank) assembled in a register from the two fields. Built in
  // memory one field at a time, as a method builds it from its wire header,
  // the compiler otherwise loads that word whole, and a load that spans two
  // stores cannot take its bytes from them: it waits until both have landed.
  Envelope Assembled() const {
    const uint64_t first = uint64_t{context_id} | (uint64_t{static_cast<uint32_t>(rank)} << 32);
    Envelope e;
    std::memcpy(static_cast<void*>(&e), &first, sizeof(first));
    e.tag = tag;
    return e;
  }
};
static_assert(sizeof(Envelope) == 12 && offsetof(Envelope, rank) == 4);

// Buffer, count and element type, and the byte range [first, last) of the
// packed message this CAR covers (a message may be cut into several CARs).
// The elements are `dtype` when set (any layout: datatype/datatype.h; whoever builds
// the CAR keeps it alive), else contiguous elements of `type`.
struct Segment {
  void* buf = nullptr;
  uint64_t count = 0;
  datatype::BasicType type = datatype::BasicType::kByte;
  uint64_t first = 0;
  uint64_t last = 0;
  const datatype::Datatype* dtype = nullptr;

  // The whole of `count` elements at `buf`.
  static Segment Of(void* buf, uint64_t count, datatype::BasicType type) {
    return {buf, count, type, 0, count * datatype::SizeOf(type), nullptr};
  }
  static Segment Of(const void* buf, uint64_t count, datatype::BasicType type) {
    return Of(const_cast<void*>(buf), count, type);
  }
  static Segment Of(const void* buf, uint64_t count, const datatype::Datatype& type) {
    return {const_cast<void*>(buf), count, datatype::BasicType::kByte, 0, count * static_cast<uint64_t>(type.size()),
            &type};
  }
  // Bytes in [first, last).
  uint64_t bytes() const { return last - first; }
  // Packed bytes of all `count` elements.
  uint64_t total() const {
    return dtype != nullptr ? count * static_cast<uint64_t>(dtype->size()) : count * datatype::SizeOf(type);
  }
  // Whether [first, last) is one run of memory at buf + first.
  bool contiguous() const { return dtype == nullptr || dtype->contiguous(); }
};

// Protocol bits an envelope announces.
enum CarProto : uint32_t {
  kProtoEager = 0,
  kProtoRendezvous = 1u << 0,  // RTS now, data after CTS
  kProtoSync = 1u << 1,        // synchronous send: ACK when matched
  kProtoRead = 1u << 2,        // a CTS: the receiver read the data itself (single copy)
};

// An unexpected eager message of at most this many bytes may wait as a
// compact record instead of a CAR (car_unexpected's compact).
inline constexpr uint64_t kCompactBytes = 64;

// The payload every CAR event carries.
struct CarSignal {
  uint64_t bytes = 0;     // data arrived / message size (envelope)
  uint32_t proto = 0;     // CarProto bits (envelope)
  int32_t source = 0;     // sender rank (envelope)
  int32_t tag = 0;        // tag (envelope)
  void* buffer = nullptr;  // buffer supplied (buffer events)
  const std::byte* data = nullptr;  // a whole eager message's bytes (eager events)
  Car* peer = nullptr;    // the other CAR (matching)
  absl::Status error;     // error events
};

// The event queue every CAR action receives: what it raises runs once the
// current transition has finished (run to completion).
using CarEvents = fsm::EventQueue<Car, CarSignal>;

// A VC (virtual connection): one peer as one method sees it, and the
// operations a CAR's actions call to move the CAR's bytes to or from that
// peer (seed 002's per-VC function table). The method that owns the VC fills
// the transport operations and swaps them to express the VC's state
// (connecting, connected, error); the agent fills post_recv and unpost_recv
// (matching). An operation finds its method and peer through the CAR's VC
// (`c.vc()->context`, `c.vc()->peer`). A null operation, reached, fails the
// CAR.
struct Vc {
  absl::string_view name;                          // for messages: "shm to rank 3"
  void* context = nullptr;  // whoever owns the VC (its method; a schedule's own VC: the schedule)
  int32_t peer = -1;        // the world rank it reaches (-1: none yet, a wildcard receive's)
  void (*start_eager)(Car&, CarEvents&) = nullptr;  // put an eager message on the wire
  void (*start_rendezvous)(Car&, CarEvents&) = nullptr;  // send the RTS
  void (*start_data)(Car&, CarEvents&) = nullptr;   // CTS came: send the data
  void (*post_recv)(Car&, CarEvents&) = nullptr;    // find-or-allocate against unexpected
  void (*unpost_recv)(Car&, CarEvents&) = nullptr;  // take a posted receive back
  void (*send_cts)(Car&, CarEvents&) = nullptr;     // matched rendezvous: clear to send
  void (*send_ack)(Car&, CarEvents&) = nullptr;     // matched synchronous send: acknowledge
  void (*launch)(Car&, CarEvents&) = nullptr;       // a vertex's own work (local op or CAR)
  // A vertex failed through a predecessor: settle its part with its peer
  // (an empty send, a receive that takes and drops the peer's message) and
  // raise kComplete once settled. None: nothing to settle.
  void (*drain)(Car&, CarEvents&) = nullptr;
  // A one-sided CAR (car_rma): write or read the peer's exposed memory;
  // the method raises complete or error. Only a method whose capabilities
  // say rma has it.
  void (*start_rma)(Car&, CarEvents&) = nullptr;
};

// memcpy, the copies of 4 to 16 bytes made in line (two loads and two
// stores that may overlap): a small message's bytes cost less than a call.
inline void CopyBytes(void* to, const void* from, uint64_t n) {
  auto* d = static_cast<std::byte*>(to);
  const auto* s = static_cast<const std::byte*>(from);
  if (n >= 8 && n <= 16) {
    uint64_t head = 0, tail = 0;
    std::memcpy(&head, s, 8);
    std::memcpy(&tail, s + n - 8, 8);
    std::memcpy(d, &head, 8);
    std::memcpy(d + n - 8, &tail, 8);
  } else if (n >= 4 && n < 8) {
    uint32_t head = 0, tail = 0;
    std::memcpy(&head, s, 4);
    std::memcpy(&tail, s + n - 4, 4);
    std::memcpy(d, &head, 4);
    std::memcpy(d + n - 4, &tail, 4);
  } else {
    base::CopyMemory(d, s, n);
  }
}

// Where a one-sided CAR's data goes or comes from in its peer's memory:
// the address and key the peer's method exposed it with.
struct RemoteRef {
  uint64_t addr = 0;
  uint64_t key = 0;
};

// Everything a CAR is built from. The pool validates it (ValidateSpec).
struct CarSpec {
  CarKind kind = CarKind::kSend;
  CarFlags flags = {};
  Envelope envelope = {};
  Segment segment = {};
  base::Completion* counter = nullptr;
  // A dependent names its supplier; the pool links the supplier back.
  Car* buf_dep = nullptr;       // PACKED_BUF_DEPENDENCY: who supplies the buffer
  Car* progress_dep = nullptr;  // PROGRESS_DEPENDENCY: whose completion starts this CAR
  void* pack_buf = nullptr;
  uint64_t pack_size = 0;
  const datatype::Op* mop = nullptr;      // MOP: the reduction UNPACK applies (kept alive by the builder)
  uint64_t eager_limit = 0;     // messages above it go by rendezvous
  bool synchronous = false;     // ssend: complete only once matched
  const Vc* vc = nullptr;         // the VC it goes through (unexpected messages: none)
  std::span<Car* const> successors = {};  // vertices: who waits on this one
  uint32_t predecessors = 0;         // vertices: how many it waits on
  void* owner = nullptr;             // who built it (the agent, a schedule): its own operations find it here
  RemoteRef remote = {};             // car_rma: the peer's memory it writes or reads
};

// Rejects flag combinations and fields that make no sense, naming the rule.
absl::Status ValidateSpec(const CarSpec& spec);

// What a send or receive call says of its message. Whoever builds its CAR
// adds the rest of the spec (SpecOf) in the CAR itself (CarPool::CreateInPlace):
// the spec is written once, where a CarSpec made first is zeroed and copied.
struct MessageSpec {
  CarKind kind = CarKind::kSend;  // kSend or kRecv
  bool synchronous = false;
  Envelope envelope = {};
  Segment segment = {};
};
// The whole spec of `m`'s CAR: its data flag, counting down `counter`,
// through `vc`, built by `owner`, sending by rendezvous above `eager_limit`.
inline CarSpec SpecOf(const MessageSpec& m, base::Completion* counter, const Vc* vc, void* owner,
                      uint64_t eager_limit) {
  return CarSpec{.kind = m.kind,
                 .flags = m.kind == CarKind::kSend ? CarFlag::kSendData : CarFlag::kRecvData,
                 .envelope = m.envelope,
                 .segment = m.segment,
                 .counter = counter,
                 .eager_limit = eager_limit,
                 .synchronous = m.synchronous,
                 .vc = vc,
                 .owner = owner};
}

// Links for whoever queues a CAR (the matcher's queues, a VC's pending list).
// A CAR is in at most one queue at a time; the queue owns these fields.
struct CarLink {
  Car* next = nullptr;
  Car* prev = nullptr;
  uint32_t stamp = 0;  // matcher: posting order (seed 002's counter)
  uint64_t seq = 0;    // matcher: arrival order of unexpected messages
};

// A CAR. Built and recycled by CarPool; state changes only through its machine.
class Car {
 public:
  CarLink link;  // see CarLink

  // A fresh CAR is in its machine's initial state: every machine starts in
  // state 0 (car.cc asserts it), the value a StateWord is made with, so
  // building one writes each field once and calls nothing.
  Car(const CarSpec& spec, uint64_t id, void* method_private)
      : spec_(spec), id_(id), method_private_(method_private) {
    CountDependencies();
  }
  // The same with the spec `make()` returns, made right here (C++17's
  // guaranteed elision): no copy of it is made first and copied in.
  struct InPlace {};
  template <class Make>
  Car(InPlace, Make&& make, uint64_t id, void* method_private)
      : spec_(make()), id_(id), method_private_(method_private) {
    CountDependencies();
  }
  Car(const Car&) = delete;
  Car& operator=(const Car&) = delete;

  uint64_t id() const { return id_; }
  CarKind kind() const { return spec_.kind; }
  CarFlags flags() const { return spec_.flags; }
  const CarSpec& spec() const { return spec_; }
  const Envelope& envelope() const { return spec_.envelope; }
  const Segment& segment() const { return spec_.segment; }
  const Vc* vc() const { return spec_.vc; }
  // The state byte, which only the dispatcher writes.
  fsm::StateWord& state_word() { return state_; }
  uint8_t state() const { return state_.value(); }
  // The current state's name in this CAR's machine.
  absl::string_view state_name() const;
  // The method's private area (CarPool's method_private_bytes), cache-line aligned.
  void* method_private() const { return method_private_; }

  // Message bookkeeping, written by the actions.
  uint64_t bytes_done() const { return bytes_done_; }   // bytes accounted so far
  uint64_t bytes_total() const { return bytes_total_; }  // message size as announced
  uint64_t bytes_copied() const { return bytes_copied_; }  // bytes copied out of a temp buffer
  uint32_t proto() const { return proto_; }
  const absl::Status& status() const { return status_; }
  void* pack_buf() const { return spec_.pack_buf; }
  // Bytes this CAR moves: its packed buffer's size when it has one (supplied,
  // temporary), else its segment's.
  uint64_t payload_bytes() const {
    return spec_.pack_buf != nullptr ? spec_.pack_size : spec_.segment.bytes();
  }
  Car* buf_dep() const { return spec_.buf_dep; }            // supplier of this CAR's buffer
  Car* progress_dep() const { return spec_.progress_dep; }  // supplier of this CAR's progress
  Car* buf_consumer() const { return buf_consumer_; }        // who takes this CAR's buffer
  Car* progress_dependent() const { return progress_dependent_; }  // who waits on this CAR
  Car* matched() const { return matched_; }  // unexpected: the receive it was handed to
  uint32_t deps_pending() const { return deps_pending_; }
  uint32_t predecessors_pending() const { return preds_pending_; }

  // Where the next arriving bytes go and how many fit: the user buffer of a
  // receive (after bytes_done), the temp buffer of an unexpected message, or
  // the receive an unexpected message was handed to (seed 002's switch).
  // Empty where the zone is not one run of memory (LandsContiguous()).
  std::span<std::byte> LandingZone();
  // Whether arriving bytes land in one run of memory (a single-copy method
  // may then write them there itself).
  bool LandsContiguous() const;
  // Copies what fits of `n` arriving bytes into the landing zone, unpacking
  // them into a non-contiguous segment (the rest of a truncated message is
  // dropped); returns how many it copied. It does not account them: the
  // machine's data event does.
  uint64_t Land(const void* from, uint64_t n);
  // The same, with its most common case in line: a receive into one run of
  // the user's memory (a byte segment), nothing handed to it, no packed
  // buffer. Every other case calls Land.
  ABSL_ATTRIBUTE_ALWAYS_INLINE uint64_t LandInLine(const void* from, uint64_t n) {
    const Segment& g = spec_.segment;
    if (matched_ != nullptr || spec_.pack_buf != nullptr || spec_.kind != CarKind::kRecv || g.dtype != nullptr) {
      return Land(from, n);
    }
    std::byte* const base = static_cast<std::byte*>(g.buf) + g.first;
    const uint64_t size = g.bytes();
    if (base == nullptr || bytes_done_ >= size) return 0;
    const uint64_t fit = std::min<uint64_t>(size - bytes_done_, n);
    if (fit > 0) CopyBytes(base + bytes_done_, from, fit);
    return fit;
  }
  // Copies bytes [offset, offset + n) of what this CAR sends (its packed
  // buffer, or its segment packed on the fly) to `to`. Inline: the eager
  // path of every contiguous message goes through it.
  void Gather(uint64_t offset, void* to, uint64_t n) const {
    if (n == 0) return;  // an empty message may have no buffer at all
    if (const std::byte* from = ContiguousSource()) {
      CopyBytes(to, from + offset, n);
    } else {
      GatherPacked(offset, to, n);
    }
  }
  // What this CAR sends, when it is one run of memory; else null.
  const std::byte* ContiguousSource() const {
    if (spec_.pack_buf != nullptr) return static_cast<const std::byte*>(spec_.pack_buf);
    if (!spec_.segment.contiguous()) return nullptr;
    return static_cast<const std::byte*>(spec_.segment.buf) + spec_.segment.first;
  }
  // UNPACK from a packed buffer (with MOP: reduce) into the segment, for the
  // bytes that arrived; fails for a reduction that cuts an element.
  absl::Status UnpackArrived();
  // Whether UnpackArrived would fail once `arriving` more bytes are in: a
  // reduction (MOP) whose bytes end, or begin, inside an element. The
  // pool's ValidateSpec has refused an operator the type does not take, so
  // this is the only way it fails. Reads nothing but the spec and counts.
  bool UnpackCutsAnElement(uint64_t arriving) const;

  // Binds a wildcard receive to the VC of the message it matched.
  void Rebind(const Vc* vc) { spec_.vc = vc; }
  // Has the CAR count down `counter` from its next run on (a persistent
  // request's own, or the completion of the schedule it is a step of).
  void Recount(base::Completion* counter) { spec_.counter = counter; }
  // Lowers the eager limit to `bytes` (a larger message goes by rendezvous);
  // it holds over re-arms.
  void CapEager(uint64_t bytes) { spec_.eager_limit = std::min(spec_.eager_limit, bytes); }

  // Re-arms a finished CAR to run again (persistent requests, schedules).
  void Rearm();

 private:
  friend struct CarActions;
  void GatherPacked(uint64_t offset, void* to, uint64_t n) const;  // a non-contiguous segment
  std::span<std::byte> ContiguousZone();  // LandingZone once the zone is known to be one run
  // Counts the dependencies its spec names.
  void CountDependencies() {
    deps_pending_ = (spec_.flags.has(CarFlag::kPackedBufDependency) ? 1 : 0) +
                    (spec_.flags.has(CarFlag::kProgressDependency) ? 1 : 0);
    preds_pending_ = spec_.predecessors;
  }
  friend class CarPool;

  CarSpec spec_;
  uint64_t id_;
  void* method_private_;
  std::size_t slot_ = 0;  // CarPool's slot number
  fsm::StateWord state_;
  uint32_t proto_ = 0;
  uint32_t deps_pending_ = 0;
  uint32_t preds_pending_ = 0;
  uint64_t bytes_total_ = 0;
  uint64_t bytes_done_ = 0;
  uint64_t bytes_copied_ = 0;
  Car* matched_ = nullptr;
  Car* buf_consumer_ = nullptr;
  Car* progress_dependent_ = nullptr;
  absl::Status status_;
};

}  // namespace cartage::car

#endif  // CARTAGE_CAR_CAR_H_
