// The ofi method: libfabric's tagged interface (fi_tagged) on a reliable
// datagram endpoint (FI_EP_RDM), the road onto InfiniBand, Slingshot, EFA,
// Omni-Path and the rest through one API (seed 003's OFI MTL).
//
//   providers   libfabric's own order, filtered by CARTAGE_OFI_PROVIDER_INCLUDE
//               and _EXCLUDE (names like "tcp;ofi_rxm", or one part: "tcp")
//   addresses   each rank publishes its endpoint name through the job's
//               exchange; all go into one address vector (FI_AV_TABLE), so a
//               rank's fi_addr_t is its world rank
//   matching    the provider's: the envelope rides in the 64-bit tag
//               (ofi_tag.h); a receive is an fi_trecv straight into the
//               user's buffer, so the provider's own rendezvous moves large
//               messages with no staging copy on either side
//   synchronous the sync bit; the receiver injects an acknowledgement when
//               its receive completes, the sender posted a receive for it
//   progress    fi_cq_read of up to CARTAGE_OFI_EVENTS completions at a time
//               until the queue is empty; each completion's context is the
//               operation, which names its CAR
//   FI_EAGAIN   the operation waits in a FIFO (so later ones cannot overtake
//               it) and progress posts it again; it never fails for that
//   errors      an error completion fails its CAR with the provider's text
//   unexpected  the provider keeps a message no receive has taken out of the
//               agent's sight (tcp;ofi_rxm: a 16 KiB receive buffer each), so
//               the method keeps the account: a sender counts what it sent
//               each rank, a receiver tells it what its receives took (a
//               control message per quarter window). A sender whose receiver
//               holds its window (CARTAGE_UNEXPECTED_MAX_MB over the other
//               ranks) holds its next sends back until the receiver takes
//               some; held CARTAGE_OFI_HOLD_S in vain, both fail naming the
//               cap. The receiver's total stays within the cap.
//
// A method that matches envelopes itself must see every message a receive
// could match, so it carries every rank of the job, self included, and the
// wildcard receives (the agent refuses a mix: docs/architecture.md, "Methods").
#ifndef CARTAGE_METHODS_OFI_OFI_METHOD_H_
#define CARTAGE_METHODS_OFI_OFI_METHOD_H_

#include <rdma/fabric.h>
#include <rdma/fi_eq.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "car/car.h"
#include "methods/common/host_keys.h"
#include "methods/host.h"
#include "methods/method.h"
#include "methods/ofi/ofi_options.h"
#include "methods/ofi/ofi_wire.h"

namespace cartage::methods::ofi {

// The provider libfabric offers first after the include/exclude lists, and
// what the method will make of it.
struct ProviderChoice {
  std::string name;     // "tcp;ofi_rxm"
  std::string fabric;   // "192.0.2.0/24"
  std::string domain;   // "eth0"
  TagLayout layout;
  uint64_t max_message = 0;
  std::size_t inject_size = 0;
  bool host_only = false;  // shm: reaches one host
  bool rma = false;        // FI_RMA asked for and offered: one-sided writes and reads
  bool mr_virt_addr = true;  // a peer names exposed memory by its address (FI_MR_VIRT_ADDR), else by offset
  bool rma_ordered = false;  // sends after writes to a peer in order (FI_ORDER_SAW)
  std::size_t rx_iov_limit = 1;
  bool control = false;    // FI_MSG: control messages (the unexpected account, news of deaths)
};
// Frees what fi_getinfo returned.
struct FiInfoDeleter {
  void operator()(fi_info* info) const;
};
using FiInfoPtr = std::unique_ptr<fi_info, FiInfoDeleter>;
// Asks libfabric for tagged RDM providers and takes the first the options
// allow; `info` (if non-null) receives its fi_info for opening.
absl::StatusOr<ProviderChoice> ChooseProvider(const OfiOptions& options, FiInfoPtr* info = nullptr);
// What the method can do on provider `p` (null: none found; what it would
// be without a provider's limits).
Capabilities CapsOf(const ProviderChoice* p);
// libfabric's words for a negative return code.
std::string FiError(ssize_t rc);
// Whether provider `name` ("tcp;ofi_rxm") is named by `list` (whole or one part).
bool ProviderNamed(const std::string& name, const std::vector<std::string>& list);

// One operation handed to the provider; its context is what completions
// return. Operations live in the method's pool, not in the CAR, so that one
// the provider still holds after its CAR has failed (a dead peer) stays
// valid until the provider lets it go.
struct OfiOp {
  enum class Kind : uint8_t { kSend, kRecv, kAckRecv, kAckSend, kPeek, kCtlRecv, kCtlSend, kWrite, kRead };
  fi_context2 ctx;          // the provider's scratch (FI_CONTEXT2 mode); first
  Kind kind = Kind::kSend;
  bool inject = false;      // fi_tinject: no completion will come
  bool cancelling = false;  // fi_cancel issued: its ECANCELED is expected
  bool cancelled = false;   // ...and came
  car::Car* car = nullptr;  // null once orphaned: its completion is only freed
  int32_t peer = -1;        // -1: a wildcard receive
  void* buf = nullptr;
  uint64_t len = 0;
  uint64_t addr = 0;        // fi_addr_t
  uint64_t tag = 0;         // a write or read: the peer's address
  uint64_t ignore = 0;      // ...and its key
  std::byte* bounce = nullptr;  // a non-contiguous message, packed (owned)
  uint64_t ctl[3] = {};         // a control message: what it says, its figure, its sender
  OfiOp* next_free = nullptr;
};

// What the method keeps in a CAR's method-private area.
struct OfiCarState {
  int32_t tag = 0;          // the tag a receive matched (for its acknowledgement)
  OfiOp* op = nullptr;      // the send or receive in the provider's hands
  OfiOp* ack = nullptr;     // a synchronous send's acknowledgement receive
};

class OfiMethod final : public Method {
 public:
  static absl::StatusOr<std::unique_ptr<OfiMethod>> Create(Exchange& exchange, MethodHost* host,
                                                           const OfiOptions& options);
  ~OfiMethod() override;

  static Capabilities Caps(const OfiOptions& options);
  const ProviderChoice& provider() const { return provider_; }
  const TagLayout& layout() const { return provider_.layout; }

  // Method
  absl::string_view name() const override { return "ofi"; }
  const Capabilities& caps() const override { return caps_; }
  bool Reaches(int peer) const override { return peer >= 0 && peer < size_; }
  car::Vc* VcOf(int peer) override { return peer < 0 ? &any_ : &peers_[static_cast<std::size_t>(peer)].vc; }
  VcState StateOf(int peer) const override;
  const absl::Status& PeerStatus(int peer) const override { return peers_[static_cast<std::size_t>(peer)].error; }
  std::size_t private_bytes() const override { return sizeof(OfiCarState); }
  void Bind(car::Car& car, int peer) override;
  absl::Status Cancel(car::Car& car) override;
  absl::StatusOr<std::optional<Probed>> Probe(const car::Envelope& pattern) override;
  int Progress() override;
  void Block(int timeout_us) override;
  bool PeerGone(int peer) override;
  void FailPeer(int peer, const absl::Status& why) override;
  void TellGone(int peer, int gone) override {
    if (provider_.control) SendControl(peer, kGone, static_cast<uint64_t>(gone));
  }
  void Close() override;
  absl::StatusOr<Exposed> Expose(void* buf, std::size_t bytes) override;
  void Unexpose(uint64_t token) override;

  // VC operations (car::Vc); the VC's context is the method. The provider
  // matches, so posting a receive is the method's operation, not the agent's.
  static const car::Vc kOps;
  static void StartSend(car::Car& c, car::CarEvents& events);
  static void PostRecv(car::Car& c, car::CarEvents& events);
  static void UnpostRecv(car::Car& c, car::CarEvents& events);
  static void SendAck(car::Car& c, car::CarEvents& events);
  static void StartRma(car::Car& c, car::CarEvents& events);
  static void FailAtOnce(car::Car& c, car::CarEvents& events);

  static OfiCarState& StateOf(car::Car& c) { return *static_cast<OfiCarState*>(c.method_private()); }

  // Operations waiting on FI_EAGAIN.
  std::size_t queued() const {
    return queued_[0].size() + queued_[1].size() + queued_[2].size() + queued_[3].size();
  }

 private:
  OfiMethod() = default;
  // One peer: its VC and what the job's exchange said of it.
  struct Peer {
    car::Vc vc;
    std::string name;
    absl::Status error;   // why it failed (OK: usable)
    int pid = 0;
    std::string host_key;
  };
  absl::Status Open(Exchange& exchange, fi_info* info);
  OfiOp* NewOp(OfiOp::Kind kind, car::Car* car, int peer);
  void FreeOp(OfiOp* op);
  // Hands `op` to the provider, or queues it behind earlier ones; what
  // finishes at once (inject, a hard error) goes through `events` inside a
  // CAR's operation, or is dispatched directly (events null).
  void Post(OfiOp* op, car::CarEvents* events);
  ssize_t Issue(OfiOp* op);
  // What follows a post that did not wait (`rc` from Issue): the provider
  // holds it, or it finished at once (inject, a hard error).
  void Posted(OfiOp* op, ssize_t rc, car::CarEvents* events);
  void Finish(OfiOp* op, const absl::Status& error, car::CarEvents* events);  // inject done / failed at posting
  int RetryQueued();
  // Reads the completion queue until it is empty (or `max_rounds` reads).
  int Drain();
  void OnCompletion(OfiOp* op, const fi_cq_tagged_entry& e);
  void OnError(const fi_cq_err_entry& err);
  void DeliverRecv(OfiOp* op, const fi_cq_tagged_entry& e, int64_t truncated_size);
  std::string ErrorText(int err, int prov_errno, const void* err_data, std::size_t err_data_size);
  void FailCar(car::Car& c, const absl::Status& why);
  void Orphan(OfiOp* op);  // the CAR goes on without it; the provider still holds it
  void CloseFabric();

  // The account of messages the provider holds for want of a receive. Each
  // message is charged what the provider keeps for it: its receive buffer,
  // and the payload where that spans several (tcp;ofi_rxm's segmented sizes).
  enum Control : uint64_t { kTook = 1, kGaveUp = 2, kGone = 3 };
  static uint64_t Charge(uint64_t bytes);
  // Posts a message, or holds it back while its receiver holds a window's
  // worth of this rank's messages (ordered behind any held before it).
  void SendOrHold(OfiOp* op, car::CarEvents* events);
  void Release(int peer);  // what the window now allows goes out
  void CountSent(int peer, uint64_t bytes);
  void CountTaken(int peer, uint64_t bytes);
  void SendControl(int peer, Control what, uint64_t figure);
  void PostControlRecv(OfiOp* op);
  void OnControl(OfiOp* op, const fi_cq_tagged_entry& e);
  void CheckHeld();  // sends held CARTAGE_OFI_HOLD_S in vain fail
  // Fails `peer`'s VC for the cap, naming it (kResourceExhausted).
  void FailForCap(int peer, const std::string& why);
  struct Account {
    uint64_t sent = 0;        // charged for what this rank sent the peer
    uint64_t peer_took = 0;   // ...for what the peer says its receives took of it
    uint64_t taken = 0;       // ...for what this rank's receives took of it
    uint64_t taken_said = 0;  // ...as far as this rank last told the peer
    std::deque<OfiOp*> held;  // sends waiting for the peer to take some
    std::chrono::steady_clock::time_point held_since;  // the last time the window moved
  };
  std::vector<Account> account_;
  uint64_t held_max_ = 0;     // CARTAGE_UNEXPECTED_MAX_MB
  uint64_t window_ = 0;       // what one sender may have held at one receiver
  uint64_t step_ = 0;         // a took per this much taken from one peer
  int holding_ = 0;           // peers with sends held back
  bool draining_ = false;     // inside Drain: a nested read would reuse entries_

  OfiOptions options_;
  ProviderChoice provider_;
  Capabilities caps_;
  MethodHost* host_ = nullptr;
  int rank_ = 0;
  int size_ = 0;
  std::string host_key_;
  ProcessWatch watch_;  // peers on this host, watched for death
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  int wait_fd_ = -1;  // the CQ's wait object (-1: none, Block naps)
  // Every receive posts a second iovec here, so that a message larger than
  // its buffer completes (its first bytes in the buffer, the rest in the
  // sink) instead of reaching the provider's truncation path, which in
  // libfabric 1.17 disables a tcp;ofi_rxm endpoint (ofiwg/libfabric#8274)
  // and never completes a large shm message. Virtual memory only, pages
  // appear where a truncated message lands. Null where the provider takes
  // one iovec per receive.
  std::byte* sink_ = nullptr;
  static constexpr std::size_t kSinkBytes = std::size_t{1} << 30;
  std::vector<uint64_t> addrs_;  // fi_addr_t per world rank
  std::vector<fid_mr*> exposed_;  // by token - 1 (null: unexposed)
  std::vector<Peer> peers_;
  car::Vc any_;             // wildcard receives
  std::deque<OfiOp> ops_;        // the pool (stable addresses)
  OfiOp* free_ = nullptr;
  absl::flat_hash_set<OfiOp*> live_;  // in the provider's hands
  // Waiting on FI_EAGAIN, in posting order: sends [0] and receives [1]
  // apart, so that receives the provider cannot take yet never hold back
  // the sends that would complete them (the peer's sends, likewise); the
  // control messages' sends [2] and receives [3] apart from both, so that
  // what releases held sends never waits behind what waits for them.
  std::deque<OfiOp*> queued_[4];
  std::deque<OfiOp*>& QueueOf(const OfiOp* op) {
    switch (op->kind) {
      case OfiOp::Kind::kRecv:
      case OfiOp::Kind::kAckRecv: return queued_[1];
      case OfiOp::Kind::kCtlSend: return queued_[2];
      case OfiOp::Kind::kCtlRecv: return queued_[3];
      default: return queued_[0];
    }
  }
  bool Unqueue(OfiOp* op);  // takes a queued operation out; false if it was not queued
  std::vector<fi_cq_tagged_entry> entries_;
  // A probe in progress (FI_PEEK).
  OfiOp* peek_ = nullptr;
  std::optional<Probed> peeked_;
  bool peek_done_ = false;
  bool closed_ = false;
};

// The registry's entry (declared in methods/ofi/CMakeLists.txt).
extern const Descriptor kDescriptor;

}  // namespace cartage::methods::ofi

#endif  // CARTAGE_METHODS_OFI_OFI_METHOD_H_
