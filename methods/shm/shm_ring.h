// A lock-free single-producer / single-consumer ring of records, laid out in
// shared memory: one ring per ordered pair of ranks.
//
// Records are 64-byte aligned. Each starts with a 16-byte header: an 8-byte
// stamp (the record's absolute position + 1, stored last with release
// semantics), the payload length and a type. The consumer polls the stamp at
// its head, so a small message costs one cache line moving between cores and
// nothing else: the ring's size is cached on both sides, and the consumer
// publishes how far it has read lazily (after an eighth of the ring, and
// whenever it finds the ring empty), in a line the producer reads only when
// the ring looks full. A producer that streams (commits again before it
// heard from its consumer) asks ahead for the lines it will write next
// (PREFETCHW, AfterCommit), so that an ordinary store seldom waits for its
// line to come back from the consumer's cache.
// With set_direct(true), a record that fits one line is built in the
// writer's own memory and published with one 64-byte direct store
// (MOVDIR64B): header and payload land together, and the producer never
// waits to take the line back from a consumer polling it (an ordinary store
// does, and every store and locked instruction after it waits too). The
// line then comes to the consumer from memory rather than from the
// producer's cache, which is slower where the two cores hand lines over
// quickly; shm leaves it off unless asked (CARTAGE_SHM_DIRECT_STORE).
// Stale bytes can never look like a record: after reading a record that
// spans several lines, the consumer zeroes the first word of each line after
// the first, so the first word of every line is either 0 or the stamp of an
// older record (smaller than any position still to come).
//
//   // producer                               // consumer
//   RingWriter w(ring);                        RingReader r(ring);
//   if (std::byte* p = w.Begin(n)) {           RingRecord rec;
//     std::memcpy(p, data, n);                 if (r.Peek(&rec)) {
//     w.Commit(kTypeEager);                      Use(rec.type, rec.payload, rec.len);
//   }                                            r.Pop();
//                                              }
#ifndef CARTAGE_METHODS_SHM_SHM_RING_H_
#define CARTAGE_METHODS_SHM_SHM_RING_H_

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cartage::methods::shm {

inline constexpr std::size_t kLine = 64;
inline constexpr std::size_t kRecordHeader = 16;
inline constexpr std::size_t kPrefetchLines = 16;  // RingWriter::AfterCommit asks for at most these

// The shared part of a ring: control line plus `bytes` of records after it.
struct alignas(kLine) RingShared {
  std::atomic<uint64_t> head;  // consumer: bytes consumed so far
  uint64_t bytes;              // size of the record area (a power of two)
  // Producer: 1 while it may sleep waiting for room (the consumer then wakes
  // it once it has read); the consumer clears it.
  std::atomic<uint32_t> room_wanted;
  char pad[kLine - 20];
  // Record area follows (bytes long, kLine aligned).
  std::byte* data() { return reinterpret_cast<std::byte*>(this + 1); }

  // Bytes of shared memory a ring of `bytes` needs.
  static constexpr std::size_t Footprint(std::size_t bytes) { return sizeof(RingShared) + bytes; }
  // Lays out a ring at `mem`. `bytes`: a power of two >= 1024. `zeroed`: the
  // record area is known to hold zeros already (a fresh shared-memory file),
  // so it is not cleared again.
  static RingShared* Init(void* mem, std::size_t bytes, bool zeroed = false) {
    auto* r = new (mem) RingShared();
    r->head.store(0, std::memory_order_relaxed);
    r->bytes = bytes;
    r->room_wanted.store(0, std::memory_order_relaxed);
    if (!zeroed) std::memset(r->data(), 0, bytes);
    return r;
  }
};
static_assert(sizeof(RingShared) == kLine);

// One record as the consumer sees it.
struct RingRecord {
  uint16_t type = 0;
  uint32_t len = 0;
  const std::byte* payload = nullptr;
};

namespace internal {
struct RecordHeader {
  std::atomic<uint64_t> stamp;
  uint32_t len;
  uint16_t type;
  uint16_t reserved;
};
static_assert(sizeof(RecordHeader) == kRecordHeader);
inline constexpr uint16_t kTypePad = 0xffff;  // fills the end of the area before a wrap
inline constexpr std::size_t RecordBytes(std::size_t len) {
  return (kRecordHeader + len + kLine - 1) / kLine * kLine;
}

// One 64-byte direct store of `line` to `to` (both 64-byte aligned): the
// line is written whole (64-byte write atomicity), without first taking
// ownership of it from the core that is polling it. `fence`: an SFENCE
// first, as direct stores may pass earlier ordinary stores.
#if defined(__x86_64__)
__attribute__((target("movdir64b"))) inline void DirectStoreLine(std::byte* to, const std::byte* line,
                                                                 bool fence) {
  if (fence) __builtin_ia32_sfence();
  __builtin_ia32_movdir64b(to, line);
}
#else
inline void DirectStoreLine(std::byte*, const std::byte*, bool) { __builtin_trap(); }  // never enabled
#endif
// Asks for `p`'s line with the intent to write it (PREFETCHW): a hint that
// does not hold up the stores behind it.
#if defined(__x86_64__)
inline void PrefetchForWrite(const std::byte* p) { asm volatile("prefetchw %0" : : "m"(*p)); }
#else
inline void PrefetchForWrite(const std::byte* p) { __builtin_prefetch(p, 1, 3); }
#endif
// The TSC after every earlier store has landed (MFENCE): a store's cost,
// its wait for the line included, timed between two of these.
#if defined(__x86_64__)
inline uint64_t FencedTicks() {
  __builtin_ia32_mfence();
  __builtin_ia32_lfence();
  const uint64_t t = __rdtsc();
  __builtin_ia32_lfence();
  return t;
}
#else
inline uint64_t FencedTicks() { return 0; }  // direct stores are never chosen there
#endif
// TSC ticks per nanosecond, measured once over 200 µs of the steady clock
// (to turn set_direct_auto's threshold into ticks).
inline double TicksPerNs() {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point c0 = Clock::now();
  const uint64_t t0 = FencedTicks();
  Clock::time_point c1;
  do {
    c1 = Clock::now();
  } while (c1 - c0 < std::chrono::microseconds(200));
  const uint64_t t1 = FencedTicks();
  const double ns = static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(c1 - c0).count());
  return static_cast<double>(t1 - t0) / ns;
}
}  // namespace internal

// Whether this CPU has MOVDIR64B (CPUID.(EAX=7,ECX=0):ECX bit 28).
inline bool DirectStoreSupported() {
#if defined(__x86_64__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (ecx & (1u << 28)) != 0;
#else
  return false;
#endif
}

// The producer side. Lives in the producer's own memory.
class RingWriter {
 public:
  RingWriter() = default;
  explicit RingWriter(RingShared* ring)
      : ring_(ring),
        data_(ring->data()),
        bytes_(ring->bytes),
        mask_(ring->bytes - 1),
        max_payload_(ring->bytes / 4 - kRecordHeader) {}

  // Largest payload one record can carry.
  std::size_t max_payload() const { return max_payload_; }

  // Keeps the traffic of small records (up to a sixteenth of `window`)
  // within the first `window` bytes of the ring: such a record that would
  // start past the window goes to the ring's start instead, the end padded,
  // whenever the consumer has read everything before it. A ring much larger
  // than its steady traffic (sized so that large eager messages need no
  // handshake) then touches the pages and cache lines of a small one for
  // small messages (cartage-bench allreduce 8 B, 8 ranks). Large records go
  // on into the rest of the ring, whose lines have long left the consumer's
  // cache (cartage-bench bcast 64 KiB).
  void set_window(std::size_t window) { window_ = std::min(window, bytes_); }

  // Writes records that fit one line with one 64-byte direct store
  // (MOVDIR64B; see DirectStoreSupported). Only where the CPU has it.
  void set_direct(bool direct) { direct_ = direct; }

  // Chooses per moment instead: one one-line record in kSampleEvery goes by
  // ordinary stores and is timed, from Begin to a fence after Commit; while
  // those samples (a running mean) take longer than `slow_ticks` TSC ticks,
  // the line moves slowly between the two cores and one-line records go by
  // direct store. Records of a stream (AfterCommit) stay ordinary and are
  // not sampled: the writer asks ahead for their lines instead, which beats
  // direct stores there (cartage-bench bcast 8 B).
  void set_direct_auto(uint64_t slow_ticks) {
    auto_ = true;
    slow_ticks_ = slow_ticks;
    direct_ = false;
  }
  static constexpr uint32_t kSampleEvery = 256;
  // Folds one timed sample into the choice (Commit calls it; public for tests).
  void NoteSample(uint64_t ticks) {
    mean_ = mean_ - mean_ / 4 + ticks / 4;
    direct_ = mean_ > slow_ticks_;
  }
  bool direct_now() const { return direct_; }

  // Before sleeping with records waiting for room: asks the consumer for a
  // wake-up once it has read, and says whether it already has released
  // lines since this writer last looked (then do not sleep). A wake-up
  // missed between the two sleeps one timeout at most.
  bool WantRoom() {
    ring_->room_wanted.store(1, std::memory_order_relaxed);
    return ring_->head.load(std::memory_order_acquire) != cached_head_;
  }

  // Reserves a record of `len` payload bytes and returns where to write them,
  // or nullptr if the ring has no room now (try again after progress).
  // In line at every call: a send's post is one of them.
  [[gnu::always_inline]] std::byte* Begin(std::size_t len) {
    using internal::RecordBytes;
    const std::size_t need = RecordBytes(len);
    if ((tail_ & mask_) >= window_ && need <= window_ / 16) [[unlikely]] WrapEarly();
    const std::size_t offset = tail_ & mask_;
    const std::size_t to_end = bytes_ - offset;
    const std::size_t pad = need > to_end ? to_end : 0;  // wrap: pad the end first
    if (len > max_payload_ || !Room(pad + need)) return nullptr;
    if (pad != 0) {
      Publish(offset, pad - kRecordHeader, internal::kTypePad);
      tail_ += pad;
    }
    pending_len_ = static_cast<uint32_t>(len);
    pending_bytes_ = static_cast<uint32_t>(need);
    if (auto_ && need == kLine && !streaming_ && (++one_line_ & (kSampleEvery - 1)) == 0) {
      sampling_ = true;
      sample_start_ = internal::FencedTicks();
    }
    // One direct store of a one-line record (decided here, once, for Commit).
    staged_ = direct_ && !sampling_ && !streaming_ && need == kLine;
    if (staged_) return staging_ + kRecordHeader;  // written whole by Commit
    return data_ + (tail_ & mask_) + kRecordHeader;
  }

  // What a record promises about memory outside the ring.
  enum class Order : uint8_t {
    kRecordOnly,    // nothing: the record carries all it says
    kEarlierStores, // the writer's earlier stores are visible first (an RTS: its buffer is read in place)
  };

  // Publishes the record reserved by Begin.
  void Commit(uint16_t type, Order order = Order::kRecordOnly) {
    const std::size_t offset = tail_ & mask_;
    if (staged_) {
      auto* h = reinterpret_cast<internal::RecordHeader*>(staging_);
      h->len = pending_len_;
      h->type = type;
      h->reserved = 0;
      h->stamp.store(tail_ + 1, std::memory_order_relaxed);
      internal::DirectStoreLine(data_ + offset, staging_, order == Order::kEarlierStores);
    } else {
      Publish(offset, pending_len_, type);
      if (sampling_) {
        sampling_ = false;
        NoteSample(internal::FencedTicks() - sample_start_);
      }
    }
    tail_ += pending_bytes_;
  }

  // Called after Commit with how many bytes this side has read so far from
  // the ring coming back from the consumer. A producer that commits again
  // without having heard from its consumer in between is streaming, and its
  // consumer is likely behind: the writer then asks for the lines of the
  // record after next (as large as this one, kPrefetchLines at most) with the
  // intent to write them, so that taking them back from the consumer's cache
  // overlaps the work until then: an ordinary store waits for its line, and
  // every store after it waits too (cartage-bench bcast and bw). Not when
  // the two sides alternate (a ping-pong): there
  // the request would compete with the consumer's read of the record just
  // written. Only lines the consumer has released, as far as the writer last
  // saw its head. A one-line record written by a direct store needs no
  // ownership, so none is asked for. Returns how many lines it asked for.
  std::size_t AfterCommit(uint64_t heard) {
    const bool streaming = heard == heard_;
    heard_ = heard;
    streaming_ = auto_ && streaming;
    const std::size_t bytes = pending_bytes_;
    if (direct_ && !auto_ && bytes == kLine) return 0;
    const std::size_t lines = std::min<std::size_t>(bytes / kLine, kPrefetchLines);
    if (!streaming || tail_ + bytes + lines * kLine - cached_head_ > bytes_) return 0;
    for (std::size_t i = 0; i < lines; ++i) internal::PrefetchForWrite(data_ + ((tail_ + bytes + i * kLine) & mask_));
    return lines;
  }

 private:
  // set_window: past the window (so a small record fits at the start),
  // back to the start once the consumer has read everything (so that a burst
  // still has the whole ring). One load of its head per record until then.
  void WrapEarly() {
    const std::size_t offset = tail_ & mask_;
    if (cached_head_ != tail_) cached_head_ = ring_->head.load(std::memory_order_acquire);
    if (cached_head_ != tail_) return;  // the consumer is behind: on into the rest for now
    Publish(offset, bytes_ - offset - kRecordHeader, internal::kTypePad);
    tail_ += bytes_ - offset;
  }
  bool Room(std::size_t bytes) {
    if (tail_ + bytes - cached_head_ <= bytes_) return true;
    cached_head_ = ring_->head.load(std::memory_order_acquire);
    return tail_ + bytes - cached_head_ <= bytes_;
  }
  void Publish(std::size_t offset, std::size_t len, uint16_t type) {
    auto* h = reinterpret_cast<internal::RecordHeader*>(data_ + offset);
    h->len = static_cast<uint32_t>(len);
    h->type = type;
    h->stamp.store(tail_ + 1, std::memory_order_release);
  }

  RingShared* ring_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t bytes_ = 0;
  std::size_t mask_ = 0;
  std::size_t max_payload_ = 0;
  uint64_t tail_ = 0;
  uint64_t cached_head_ = 0;
  std::size_t window_ = ~std::size_t{0};  // set_window; by default the whole ring
  uint64_t heard_ = ~uint64_t{0};  // AfterCommit's last `heard`
  uint32_t pending_len_ = 0;    // the reserved record's payload (Begin to Commit)
  uint32_t pending_bytes_ = 0;  // and its bytes in the ring, header and padding to the line included
  bool staged_ = false;         // and whether it goes by one direct store from staging_
  bool direct_ = false;
  bool auto_ = false;       // set_direct_auto
  bool sampling_ = false;   // this record is a timed sample
  bool streaming_ = false;  // auto: the last record was streamed (AfterCommit)
  uint32_t one_line_ = 0;   // one-line records so far (auto)
  uint64_t slow_ticks_ = 0;
  uint64_t mean_ = 0;       // running mean of the samples, TSC ticks
  uint64_t sample_start_ = 0;
  alignas(kLine) std::byte staging_[kLine] = {};  // a one-line record, before its direct store
};

// The consumer side. Lives in the consumer's own memory.
class RingReader {
 public:
  RingReader() = default;
  explicit RingReader(RingShared* ring)
      : ring_(ring), data_(ring->data()), mask_(ring->bytes - 1), publish_every_(ring->bytes / 8) {}

  // The next record, if one is there; padding is skipped.
  bool Peek(RingRecord* out) {
    for (;;) {
      auto* h = reinterpret_cast<internal::RecordHeader*>(data_ + (head_ & mask_));
      if (h->stamp.load(std::memory_order_acquire) != head_ + 1) {
        // Empty: let a producer waiting for room see everything read so far.
        if (published_ != head_) PublishHead();
        return false;
      }
      if (h->type == internal::kTypePad) {
        // The lines a pad covers were not written in this lap, so their first
        // words are already 0 or older stamps: skipped without clearing (an
        // early wrap's pad may cover most of the ring).
        Advance(internal::RecordBytes(h->len));
        continue;
      }
      out->type = h->type;
      out->len = h->len;
      out->payload = reinterpret_cast<const std::byte*>(h) + kRecordHeader;
      current_ = h->len;
      return true;
    }
  }

  // Releases the record returned by Peek.
  void Pop() { Consume(current_); }

  // Bytes consumed so far (records and padding).
  uint64_t consumed() const { return head_; }

  // Whether the producer asked for a wake-up once room comes (WantRoom);
  // the request is taken. One load of a line this side writes.
  bool TakeRoomWanted() {
    if (ring_->room_wanted.load(std::memory_order_relaxed) == 0) [[likely]] return false;
    ring_->room_wanted.store(0, std::memory_order_relaxed);
    return true;
  }

  // Whether a record is waiting (one load; for the progress engine's poll).
  bool HasRecord() const { return next_stamp()->load(std::memory_order_acquire) == next_expected(); }

  // The word that shows the next record, and the value it holds once that
  // record is there: a sweep over many rings tests just these (ShmMethod's
  // probes). They change only as records are consumed (Peek, Pop).
  const std::atomic<uint64_t>* next_stamp() const {
    return &reinterpret_cast<const internal::RecordHeader*>(data_ + (head_ & mask_))->stamp;
  }
  uint64_t next_expected() const { return head_ + 1; }
  // The same for the record after the one Peek returned (still unread): a
  // reader that leaves that record where it lies watches for what comes
  // behind it here.
  const std::atomic<uint64_t>* stamp_after() const {
    return &reinterpret_cast<const internal::RecordHeader*>(data_ + (after() & mask_))->stamp;
  }
  uint64_t expected_after() const { return after() + 1; }
  bool ShowsAfter() const { return stamp_after()->load(std::memory_order_acquire) == expected_after(); }

 private:
  uint64_t after() const { return head_ + internal::RecordBytes(current_); }  // the position after Peek's record
  void Consume(std::size_t len) {
    const std::size_t bytes = internal::RecordBytes(len);
    // Lines after the first held payload: clear their first word (see top).
    std::byte* first = data_ + (head_ & mask_);
    for (std::size_t off = kLine; off < bytes; off += kLine) {
      reinterpret_cast<internal::RecordHeader*>(first + off)->stamp.store(0, std::memory_order_relaxed);
    }
    Advance(bytes);
  }
  // Moves the head past `bytes`, publishing it after an eighth of the ring.
  void Advance(std::size_t bytes) {
    head_ += bytes;
    if (head_ - published_ >= publish_every_) PublishHead();
  }
  void PublishHead() {
    // Release: the clears above happen before the producer may reuse the lines.
    ring_->head.store(head_, std::memory_order_release);
    published_ = head_;
  }

  RingShared* ring_ = nullptr;
  std::byte* data_ = nullptr;
  std::size_t mask_ = 0;
  std::size_t publish_every_ = 0;
  uint64_t head_ = 0;
  uint64_t published_ = 0;
  uint32_t current_ = 0;
};

}  // namespace cartage::methods::shm

#endif  // CARTAGE_METHODS_SHM_SHM_RING_H_
