// The shm method: ranks on one host exchange CARs through the job segment's
// rings (one per ordered pair; a rank's ring to itself serves `self`).
//   eager       MatchHeader + payload in one record (one cache line for 8 B)
//   rendezvous  RTS; the receiver reads the sender's buffer once with
//               process_vm_readv (CMA, probed at start-up) and answers CTS;
//               without CMA (or below ShmOptions' thresholds) it answers CTS
//               and the sender streams DATA records; between the thresholds
//               the faster of the two lately (CopyChooser)
//   synchronous the receiver answers ACK when it matches
// A full ring parks the CAR on the peer's pending list (FIFO, so messages to
// a peer never overtake each other) and progress retries it.
#ifndef CARTAGE_METHODS_SHM_SHM_METHOD_H_
#define CARTAGE_METHODS_SHM_SHM_METHOD_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/status/statusor.h"
#include "car/car.h"
#include "car/car_list.h"
#include "methods/common/wire_cars.h"
#include "methods/common/host_keys.h"
#include "methods/host.h"
#include "methods/method.h"
#include "methods/shm/shm_options.h"
#include "methods/shm/shm_copy_chooser.h"
#include "methods/shm/shm_ring.h"
#include "methods/shm/shm_segment.h"

namespace cartage::methods::shm {

// What the method keeps in a CAR's method-private area.
struct ShmCarState {
  WireHandles wire;              // first: WireCars finds it there
  uint64_t remote_address = 0;   // RTS: the sender's buffer
  uint64_t offset = 0;           // pipelined send: bytes streamed so far
  uint64_t cts_ns = 0;           // pipelined receive timed for the CopyChooser: when its CTS went (0: not timed)
};

class ShmMethod final : public Method {
 public:
  static absl::StatusOr<std::unique_ptr<ShmMethod>> Create(Exchange& exchange, MethodHost* host,
                                                           const ShmOptions& options);
  ~ShmMethod() override;

  // The capabilities `options` give.
  static Capabilities Caps(const ShmOptions& options);
  int rank() const { return rank_; }
  int size() const { return size_; }
  std::size_t eager_limit() const { return options_.eager_limit; }
  bool cma(int peer) const { return cma_[static_cast<std::size_t>(peer)]; }
  // How large rendezvous messages from `peer` are moved (tests).
  const CopyChooser& chooser(int peer) const { return choosers_[static_cast<std::size_t>(peer)]; }

  // Method. Memory registration is the base class's bookkeeping: shared
  // memory needs no pinning or keys.
  absl::string_view name() const override { return "shm"; }
  const Capabilities& caps() const override { return caps_; }
  // The other ranks on this host (Exchange::HostRanks).
  bool Reaches(int peer) const override { return peer != rank_ && segment_->Holds(peer); }
  car::Vc* VcOf(int peer) override { return &vcs_[static_cast<std::size_t>(peer)]; }
  VcState StateOf(int peer) const override {
    return broken_[static_cast<std::size_t>(peer)].ok() ? VcState::kConnected : VcState::kError;
  }
  std::size_t private_bytes() const override { return sizeof(ShmCarState); }
  void Bind(car::Car& car, int peer) override;
  // Reads what arrived and retries parked work; returns how much it did.
  int Progress() override;
  // Blocks up to `timeout_us` unless something arrives (futex on the doorbell).
  void Block(int timeout_us) override;
  void Wake() override;
  // Says in its block which CPU this rank runs on now, and counts the ranks
  // whose blocks name the same one.
  int RanksOnThisCpu() override;
  // Whether `peer` finalized or its process is gone.
  bool PeerGone(int peer) override;
  // Puts `peer`'s VC in the error state and fails every CAR waiting on it
  // (parked, streaming, or waiting for its ACK/CTS/DATA) with `why`.
  void FailPeer(int peer, const absl::Status& why) override;
  // Marks this rank finalized for its peers.
  void Close() override;

  // VC operations (car::Vc); the VC's context is the method.
  static void StartEager(car::Car& c, car::CarEvents& events);
  static void StartRendezvous(car::Car& c, car::CarEvents& events);
  static void StartData(car::Car& c, car::CarEvents& events);
  static void SendCts(car::Car& c, car::CarEvents& events);
  static void SendAck(car::Car& c, car::CarEvents& events);

  static ShmCarState& StateOf(car::Car& c) { return *static_cast<ShmCarState*>(c.method_private()); }
  // The job segment (diagnostics and tests that write the rings directly).
  ShmSegment& segment() { return *segment_; }
  // Why `peer` is unusable (OK while it is fine).
  const absl::Status& PeerStatus(int peer) const override { return broken_[static_cast<std::size_t>(peer)]; }

 private:
  struct Control {
    uint16_t type;
    uint64_t a, b;
    uint32_t c;
  };
  ShmMethod() = default;
  // A VC's operations, connected and in the error state.
  static const car::Vc kConnectedOps, kFailingOps;
  // In the error state: every CAR fails at once.
  static void FailAtOnce(car::Car& c, car::CarEvents& events);
  // Queues a send whose record did not fit the ring, behind its peer's
  // others: its machine goes to eager_queued or rts_queued (`queued`).
  void Park(car::Car& c, car::CarEvents& events);
  // Publishes the record reserved in `peer`'s ring, then lets its writer see
  // whether it is streaming (RingWriter::AfterCommit). Inlined: each call
  // site's record type and order are constants (cartage-bench bcast 8 B).
  [[gnu::always_inline]] inline void CommitTo(int peer, uint16_t type,
                                              RingWriter::Order order = RingWriter::Order::kRecordOnly);
  bool TryEager(car::Car& c);
  // TryEager's body, in line in StartEager (a send's post): no call and
  // frame between the VC's operation and the ring.
  [[gnu::always_inline]] inline bool WriteEager(car::Car& c);
  bool TryRts(car::Car& c);
  bool TryControl(int peer, const Control& k);
  void SendControl(int peer, const Control& k);
  bool PumpStream(car::Car& c);  // true once every byte is written
  // Rings `peer`'s doorbell where it sleeps. In line in every writer: a peer
  // awake costs one load. No fence: a waiter that misses this wake-up sleeps
  // at most one futex timeout (Block), and only after it has spun and yielded.
  [[gnu::always_inline]] void Wake(int peer) {
    RankBlock& b = segment_->block(peer);
    if (b.sleeping.load(std::memory_order_relaxed) != 0) [[unlikely]] RingDoorbell(b);
  }
  static void RingDoorbell(RankBlock& b);
  // The steady clock in nanoseconds (never 0: it counts from boot).
  static uint64_t NowNs();
  // Handles one record; false if it was left in the ring (`defer`: an
  // envelope no posted receive matches yet, see DeliverEnvelope).
  enum class Defer : uint8_t {
    kNo,    // deliver: to its receive, or as an unexpected message
    kYes,   // an envelope no posted receive matches stays in the ring
    kHold,  // the same, unless a record is already behind it (Hold)
  };
  bool Handle(int source, const RingRecord& rec, Defer defer);
  // Progress's parts beside its loop: the rest of a sweep from `from`,
  // whose ring shows a record, then the backlog (out of line, so that an
  // idle sweep has no frame); the records of the ring `probe` shows one
  // (refreshing the probe); and the sends and control records waiting for
  // ring room.
  struct Probe;
  ABSL_ATTRIBUTE_NOINLINE int Sweep(Probe* from);
  ABSL_ATTRIBUTE_ALWAYS_INLINE int ReadRing(Probe& probe);
  // Whether `probe`'s ring may hold the record it just peeked, should no
  // receive match it (Defer::kHold), and holding it.
  bool MayHold(const Probe& probe) const;
  void Hold(Probe& probe, const RingReader& r);
  // Every probe that holds a record looks at it again (a receive was posted,
  // or holding is no longer allowed).
  ABSL_ATTRIBUTE_NOINLINE void Unhold();
  int RetryBacklog();
  // One instance per record kind: an eager record's is the one a small
  // message runs, with no rendezvous code in it.
  template <bool kRendezvous>
  bool OnEnvelope(int source, const RingRecord& rec, Defer defer);
  void OnCts(int source, const RingRecord& rec);
  void OnData(int source, const RingRecord& rec);
  void OnAck(int source, const RingRecord& rec);
  void Malformed(int source, absl::string_view what);
  // Copies a fixed-size body out of `rec`, or fails the peer if it is short.
  template <class Body>
  bool ReadBody(int source, const RingRecord& rec, absl::string_view what, Body* out);
  // A rendezvous send got its answer (or failed): no longer counted in
  // rts_out_ (called before its machine leaves rts_sent or rts_queued).
  void EndRts(car::Car& c);
  // The smallest rendezvous message to read with CMA now.
  std::size_t CmaMin() const;

  ShmOptions options_;
  Capabilities caps_;
  MethodHost* host_ = nullptr;
  std::vector<car::Vc> vcs_;  // per peer: its operations (swapped on error)
  int rank_ = 0;
  int size_ = 0;
  std::unique_ptr<ShmSegment> segment_;
  std::vector<RingWriter> writers_;
  std::vector<RingReader> readers_;
  // What a sweep tests of each peer's ring (every peer but this rank, in rank
  // order): where its next record's stamp will be and the value it will hold
  // (RingReader::next_stamp); refreshed after the ring is read. A ring whose
  // next record is an envelope no posted receive matches may hold it (Hold):
  // the record stays unread, and the probe watches the record after it
  // instead, so that nothing behind it waits.
  struct Probe {
    const std::atomic<uint64_t>* stamp = nullptr;
    uint64_t expected = 0;
    int peer = 0;
    bool held = false;  // the probe watches the record after the next one
    uint8_t holds = 0;  // how often the next record was held (0 once it is read)
    // Points the probe at the next record `r` will read.
    void Aim(const RingReader& r) {
      stamp = r.next_stamp();
      expected = r.next_expected();
    }
    // Whether that record is there (one load).
    bool Shows() const { return stamp->load(std::memory_order_acquire) == expected; }
  };
  std::vector<Probe> probes_;
  // Holding (MethodHost::Holding): the agent's control (null: never), how
  // many probes hold a record, and the agent's count of postings when the
  // first of them did. A record is held at most kMaxHolds times.
  static constexpr uint8_t kMaxHolds = 2;
  const HoldControl* hold_ = nullptr;
  int held_ = 0;
  uint64_t held_postings_ = 0;
  std::vector<bool> cma_;
  std::vector<CopyChooser> choosers_;  // per sender: CMA or pipelined, for messages between the two minimums
  std::vector<int32_t> pids_;
  ProcessWatch watch_;  // pids_, watched for death
  std::vector<absl::Status> broken_;          // per peer: OK, or why it failed
  std::vector<car::CarList> parked_;           // per peer, FIFO
  std::vector<car::CarList> streams_;          // per peer: pipelined sends
  // Per peer: control records waiting for ring room. A vector and a head
  // index, emptied (capacity kept) when drained: no allocation in steady state.
  struct ControlQueue {
    std::vector<Control> items;
    std::size_t head = 0;
    bool empty() const { return head == items.size(); }
    std::size_t size() const { return items.size() - head; }
    const Control& front() const { return items[head]; }
    void push_back(const Control& k) { items.push_back(k); }
    void pop_front() {
      if (++head == items.size()) clear();
    }
    void clear() {
      items.clear();
      head = 0;
    }
  };
  std::vector<ControlQueue> control_;
  WireCars wire_;
  int backlog_ = 0;  // CARs parked or streaming and control records waiting, over all peers
  int rts_out_ = 0;  // rendezvous sends waiting for their CTS, over all peers
};

// The registry's entry (declared in methods/shm/CMakeLists.txt).
extern const Descriptor kDescriptor;

}  // namespace cartage::methods::shm

#endif  // CARTAGE_METHODS_SHM_SHM_METHOD_H_
