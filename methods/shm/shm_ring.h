// A lock-free single-producer / single-consumer ring of records, laid out in
// shared memory: one ring per ordered pair of ranks.
//
// Records are 64-byte aligned. Each starts with a 16-byte header: an 8-byte
// stamp (the record's absolute position + 1, stored last with release
// semantics), the payload length and a type. The consumer polls the stamp at
// its head, so a small message costs one cache line moving between cores.
// Before publishing a record the producer zeroes the stamp where the next
// record will start (always free: the producer keeps 64 bytes of slack), so
// stale bytes from an earlier lap can never look like a record. The consumer
// publishes how far it has read in its own cache line; the producer re-reads
// it only when the ring looks full.
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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace cartage::methods::shm {

inline constexpr std::size_t kLine = 64;
inline constexpr std::size_t kRecordHeader = 16;

// The shared part of a ring: control line plus `bytes` of records after it.
struct alignas(kLine) RingShared {
  std::atomic<uint64_t> head;  // consumer: bytes consumed so far
  uint64_t bytes;              // size of the record area (a power of two)
  char pad[kLine - 16];
  // Record area follows (bytes long, kLine aligned).
  std::byte* data() { return reinterpret_cast<std::byte*>(this + 1); }

  // Bytes of shared memory a ring of `bytes` needs.
  static constexpr std::size_t Footprint(std::size_t bytes) { return sizeof(RingShared) + bytes; }
  // Lays out a ring at `mem` (zeroed shared memory). `bytes`: a power of two >= 1024.
  static RingShared* Init(void* mem, std::size_t bytes) {
    auto* r = new (mem) RingShared();
    r->head.store(0, std::memory_order_relaxed);
    r->bytes = bytes;
    std::memset(r->data(), 0, bytes);
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
}  // namespace internal

// The producer side. Lives in the producer's own memory.
class RingWriter {
 public:
  RingWriter() = default;
  explicit RingWriter(RingShared* ring) : ring_(ring), mask_(ring->bytes - 1) {}

  // Largest payload one record can carry.
  std::size_t max_payload() const { return ring_->bytes / 4 - kRecordHeader; }

  // Reserves a record of `len` payload bytes and returns where to write them,
  // or nullptr if the ring has no room now (try again after progress).
  std::byte* Begin(std::size_t len) {
    using internal::RecordBytes;
    const std::size_t need = RecordBytes(len);
    const std::size_t offset = tail_ & mask_;
    const std::size_t to_end = ring_->bytes - offset;
    const std::size_t pad = need > to_end ? to_end : 0;  // wrap: pad the end first
    if (len > max_payload() || !Room(pad + need + kLine)) return nullptr;
    if (pad != 0) {
      Publish(offset, pad - kRecordHeader, internal::kTypePad);
      tail_ += pad;
    }
    pending_len_ = static_cast<uint32_t>(len);
    return ring_->data() + (tail_ & mask_) + kRecordHeader;
  }

  // Publishes the record reserved by Begin.
  void Commit(uint16_t type) {
    const std::size_t offset = tail_ & mask_;
    Publish(offset, pending_len_, type);
    tail_ += internal::RecordBytes(pending_len_);
  }

 private:
  bool Room(std::size_t bytes) {
    if (tail_ + bytes - cached_head_ <= ring_->bytes) return true;
    cached_head_ = ring_->head.load(std::memory_order_acquire);
    return tail_ + bytes - cached_head_ <= ring_->bytes;
  }
  void Publish(std::size_t offset, std::size_t len, uint16_t type) {
    auto* h = reinterpret_cast<internal::RecordHeader*>(ring_->data() + offset);
    h->len = static_cast<uint32_t>(len);
    h->type = type;
    // The next record's stamp is zeroed before this one becomes visible.
    const std::size_t next = (offset + internal::RecordBytes(len)) & mask_;
    reinterpret_cast<internal::RecordHeader*>(ring_->data() + next)
        ->stamp.store(0, std::memory_order_relaxed);
    h->stamp.store(tail_ + 1, std::memory_order_release);
  }

  RingShared* ring_ = nullptr;
  std::size_t mask_ = 0;
  uint64_t tail_ = 0;
  uint64_t cached_head_ = 0;
  uint32_t pending_len_ = 0;
};

// The consumer side. Lives in the consumer's own memory.
class RingReader {
 public:
  RingReader() = default;
  explicit RingReader(RingShared* ring) : ring_(ring), mask_(ring->bytes - 1) {}

  // The next record, if one is there; padding is skipped.
  bool Peek(RingRecord* out) {
    for (;;) {
      auto* h = reinterpret_cast<internal::RecordHeader*>(ring_->data() + (head_ & mask_));
      if (h->stamp.load(std::memory_order_acquire) != head_ + 1) return false;
      if (h->type == internal::kTypePad) {
        head_ += internal::RecordBytes(h->len);
        ring_->head.store(head_, std::memory_order_release);
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
  void Pop() {
    head_ += internal::RecordBytes(current_);
    ring_->head.store(head_, std::memory_order_release);
  }

  // Whether a record is waiting (one load; for the progress engine's poll).
  bool HasRecord() const {
    auto* h = reinterpret_cast<const internal::RecordHeader*>(ring_->data() + (head_ & mask_));
    return h->stamp.load(std::memory_order_acquire) == head_ + 1;
  }

 private:
  RingShared* ring_ = nullptr;
  std::size_t mask_ = 0;
  uint64_t head_ = 0;
  uint32_t current_ = 0;
};

}  // namespace cartage::methods::shm

#endif  // CARTAGE_METHODS_SHM_SHM_RING_H_
