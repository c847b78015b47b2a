// The method contract: what a transport module implements so that the agent
// can advance CARs through it. methods/README.md walks through writing one;
// tests/conformance/ is the kit every method must pass.
//
// A method is opened once per process (Descriptor::open), with the job's
// key-value exchange and the agent's matching hooks (host.h). For every peer
// it reaches it keeps a VC (virtual connection, car::Vc): the operations the
// CARs bound to that peer call, with the method itself as the VC's context.
// A method expresses a VC's state by swapping those operations (seed 002): a
// TCP VC that is still connecting queues what it is given, a connected one
// writes, and one in the error state fails every CAR at once. CARs hold a
// pointer to their VC, so a swap reaches every CAR bound to it.
//
//   const Descriptor& d = ...;                  // from the registry
//   CARTAGE_ASSIGN_OR_RETURN(std::unique_ptr<Method> m, d.open({&exchange, host}));
//   if (m->Reaches(peer)) spec.vc = m->VcOf(peer);
//   m->Bind(*car, peer);                        // its private area, for peer
//   while (!done) m->Progress();
#ifndef CARTAGE_METHODS_METHOD_H_
#define CARTAGE_METHODS_METHOD_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "car/car.h"
#include "car/car_list.h"
#include "methods/host.h"

namespace cartage::methods {

// How far a method reaches.
enum class Reach : uint8_t {
  kProcess,  // the rank itself
  kHost,     // ranks on the same host
  kNetwork,  // ranks anywhere the network reaches
};
absl::string_view ReachName(Reach r);

// What a method can do. The agent reads these; it never asks a method's name.
struct Capabilities {
  uint64_t eager_limit = 0;        // larger messages go by rendezvous
  uint64_t max_message = 0;        // the largest message it carries (bytes)
  bool ordered = true;             // messages to one peer arrive in posting order
  bool reliable = true;            // nothing is lost or duplicated
  bool tag_matching = false;       // the method matches envelopes itself (native)
  bool rma = false;                // one-sided writes and reads (Expose, car_rma CARs)
  // A message sent after a one-sided write to the same peer arrives after
  // the write is placed there (ofi: FI_ORDER_SAW), so it need not wait for
  // the write's completion to say the write is done.
  bool rma_ordered = false;
  bool atomics = false;            // remote atomics (no built-in method offers them: accumulates are the target agent's)
  bool needs_registration = false; // buffers must be registered before transfer
  // A rendezvous message moves with one copy, the receiver reading the
  // sender's buffer (shm: CMA, where its start-up probe finds it works);
  // an eager one takes two (into the method's memory and out again).
  bool single_copy = false;
  Reach reach = Reach::kHost;
  bool needs_polling = true;       // false: all its work happens while CARs are posted (self)
  // Its calls may run on several threads at once. The agent serialises
  // every call into a method that is not (all built-in ones), holding the
  // engine lock of the lane that opened it, whatever the thread level.
  bool thread_safe = false;
  std::size_t min_buffer = 0;      // method buffers (AllocBuffer): smallest size
  std::size_t max_buffer = 0;      // ...and largest
  // What a method that carries the envelope in a fixed-width field (ofi's
  // 64-bit tag) can name; the agent refuses, naming the operation, an
  // envelope beyond them rather than letting it wrap.
  uint64_t max_context = UINT64_MAX;  // communicator context ids
  int64_t max_tag = INT64_MAX;
  int64_t max_rank = INT64_MAX;
};
// One line for `cartage info`: "eager 8192, max 16 EiB, ordered, reliable, ...".
std::string Describe(const Capabilities& caps);

// One tunable of a method, read from CARTAGE_<METHOD>_<NAME>.
struct ParamInfo {
  const char* name;
  const char* default_value;
  const char* help;
};

// A VC's state, as the method expresses it through its operations.
enum class VcState : uint8_t { kIdle, kConnecting, kConnected, kError };
absl::string_view VcStateName(VcState s);

// Swaps the method's operations of a VC (start_eager, start_rendezvous,
// start_data, send_cts, send_ack) for those of `ops`, keeping the agent's
// (post_recv, unpost_recv: MethodHost::InstallAgentOps), the name, the
// context and the peer.
inline void SwapOps(car::Vc& vc, const car::Vc& ops) {
  vc.start_eager = ops.start_eager;
  vc.start_rendezvous = ops.start_rendezvous;
  vc.start_data = ops.start_data;
  vc.send_cts = ops.send_cts;
  vc.send_ack = ops.send_ack;
}

// The method a VC operation was called for, and the peer it talks to: an
// operation finds both through the VC it was called through (the VC's
// context is the method that owns it).
template <class M>
M& MethodOf(const car::Car& c) {
  return *static_cast<M*>(c.vc()->context);
}
inline int PeerOf(const car::Car& c) { return c.vc()->peer; }

// A buffer a method lends (seed 002's method.alloc()): registered where the
// method needs that, between the method's min_buffer and max_buffer bytes.
struct MethodBuffer {
  std::byte* data = nullptr;
  std::size_t size = 0;
};

class Method {
 public:
  virtual ~Method() = default;

  virtual absl::string_view name() const = 0;
  virtual const Capabilities& caps() const = 0;

  // ---- Peers and VCs -----------------------------------------------------
  // Whether this method can talk to world rank `peer` (after open). A
  // rank's own rank is false, except for a method that carries a rank's
  // messages to itself (self), or one that matches envelopes itself, which
  // must carry every rank; the agent always has self for the rest.
  virtual bool Reaches(int peer) const = 0;
  // The VC for `peer`: the operations CARs bound to it call, its context
  // this method and its peer `peer`. The method may change the operations
  // at any time (and does, to express the VC's state). The returned pointer
  // stays valid until the method is destroyed. A VC connects lazily: on the
  // first CAR it is given, not here.
  virtual car::Vc* VcOf(int peer) = 0;
  virtual VcState StateOf(int peer) const = 0;
  // Why `peer`'s VC is in the error state (OK otherwise).
  virtual const absl::Status& PeerStatus(int peer) const = 0;
  // Bytes of per-CAR state the method keeps in the CAR's private area.
  virtual std::size_t private_bytes() const = 0;
  // Prepares a CAR's private area for talking to `peer` (-1: not known yet,
  // a wildcard receive; the method binds it again when it matches). The
  // agent binds every CAR it makes for this method; a method binds the
  // receive an arriving envelope matched (DeliverEnvelope's `adopt`).
  virtual void Bind(car::Car& car, int peer) = 0;

  // ---- Moving CARs ---------------------------------------------------------
  // seed 002's vc->send(vc, car_list): posts each send CAR of `cars` to
  // `peer`'s VC, in order, emptying the list. The default posts them one at a
  // time through their machines; a method may batch them.
  virtual absl::Status Send(int peer, car::CarList& cars);
  // seed 002's vc->recv(vc, car_list): posts receive CARs bound to `peer`.
  virtual absl::Status Recv(int peer, car::CarList& cars);
  // Cancels a CAR the method holds (kFailedPrecondition once it is on the
  // wire, or matched). The agent cancels the receives in its own queues
  // itself; it asks a tag-matching method (caps().tag_matching), which holds
  // the posted receives, first: OK means the receive will never match.
  virtual absl::Status Cancel(car::Car& car);

  // ---- Native tag matching (caps().tag_matching) ---------------------------
  // A method that matches envelopes itself carries every rank of the job
  // (self included) and the wildcard receives: VcOf(-1) is their VC, and
  // Bind(car, -1) prepares one. Probe looks for a message `pattern`
  // (source or tag -1: any) matches without receiving it.
  struct Probed {
    int source = 0;
    int tag = 0;
    uint64_t bytes = 0;
  };
  virtual absl::StatusOr<std::optional<Probed>> Probe(const car::Envelope& pattern);

  // ---- Progress ----------------------------------------------------------------
  // Advances everything the method holds; returns how much work it did (0:
  // nothing happened). Never blocks. The engine calls it every round for a
  // method some peer goes through, and now and then for the others (since
  // messages can always arrive), unless caps().needs_polling is false.
  virtual int Progress() = 0;
  // Sleeps up to `timeout_us` unless something arrives for this method. A
  // method that cannot wait on anything returns at once.
  virtual void Block(int timeout_us) = 0;
  // Makes a Block that another thread is in return soon (that thread holds
  // the agent's engine lock, which a thread with a call to make wants).
  // The only call that may run beside the method's others. A method whose
  // Block is brief (at most a few hundred microseconds) may leave it as is.
  virtual void Wake() {}
  // How many of the ranks this method reaches, this one included, last ran
  // on the CPU this rank runs on now; 0 where the method cannot tell (it
  // shares no memory with them). The wait strategy yields sooner where three
  // or more share a CPU.
  virtual int RanksOnThisCpu() { return 0; }
  // Whether `peer` is known to be gone (exited, finalized, connection lost).
  // The agent asks now and then while a rank waits, and fails what it holds
  // for a peer that is gone.
  virtual bool PeerGone(int peer) = 0;
  // Puts `peer`'s VC in the error state: every CAR on it completes with
  // `why`, and new ones fail at once. The agent calls it for a peer it found
  // gone; a method calls its own for a connection it lost or a peer that
  // sent something malformed (the agent sees StateOf's kError and fails the
  // receives it holds from that peer).
  virtual void FailPeer(int peer, const absl::Status& why) = 0;
  // Tells `peer` that rank `gone` died, over a line the method already has
  // to it (no new connection for it); `peer`'s method fails `gone`'s VC
  // with the news, and its agent passes it on once. So a rank on another
  // host, which cannot watch `gone`'s pid and may never have talked to it,
  // learns too. A method whose peers all watch one another's pids (shm)
  // need not.
  virtual void TellGone(int peer, int gone) {
    (void)peer;
    (void)gone;
  }
  // Called once every rank has reached finalize (after the job's fence).
  virtual void Close() = 0;

  // ---- Memory ------------------------------------------------------------------
  // Registers [buf, buf + bytes) for transfers (seed 002's CA_register_mem);
  // returns a token for Unregister. A method that needs no registration keeps
  // the region only for accounting.
  virtual absl::StatusOr<uint64_t> RegisterMemory(const void* buf, std::size_t bytes);
  virtual void UnregisterMemory(uint64_t token);
  int registered() const { return static_cast<int>(registrations_.size()); }
  // A buffer of at least `min` bytes and at most caps().max_buffer, or an
  // error (kResourceExhausted) the caller queues on and retries.
  virtual absl::StatusOr<MethodBuffer> AllocBuffer(std::size_t min);
  virtual void FreeBuffer(MethodBuffer buf);

  // ---- One-sided transfers (caps().rma) -------------------------------------------
  // [buf, buf + bytes) exposed to the peers' one-sided writes and reads:
  // what a peer's car_rma CARs name it by (CarSpec::remote: `addr` is its
  // first byte's address, `key` the method's key), and a token for
  // Unexpose. A method without rma refuses (kUnimplemented, the default).
  // The VC's start_rma then moves a car_rma CAR: SEND_DATA writes its
  // segment into the peer's memory, RECV_DATA reads from it; the method
  // raises complete once a write is placed at the peer (so that a message
  // sent after it finds it there) or a read has landed, or error.
  struct Exposed {
    uint64_t token = 0;
    uint64_t addr = 0;
    uint64_t key = 0;
  };
  virtual absl::StatusOr<Exposed> Expose(void* buf, std::size_t bytes);
  virtual void Unexpose(uint64_t token);

  // ---- Inter-method calls (seed 002) -------------------------------------------
  // A receive on another method has matched the data `send` forwards: the
  // send may go (its progress dependency is met).
  virtual void RecvReady(car::Car& send);
  // Another method supplies `send`'s packed buffer.
  virtual void ProvideBufs(car::Car& send, void* buf, uint64_t bytes);
  // Another method reports `bytes` more of `car`'s input ready.
  virtual void ReportProgress(car::Car& car, uint64_t bytes);

 private:
  struct Registration {
    uint64_t token;
    const void* buf;
    std::size_t bytes;
  };
  std::vector<Registration> registrations_;
  uint64_t next_token_ = 1;
};

// Everything the agent needs to open a method. Both outlive the method: a
// method may read the exchange lazily (tcp looks a peer's address up on its
// first connection).
struct OpenArgs {
  Exchange* exchange;
  MethodHost* host;
};

// A method as the registry knows it, before it is opened: built-in methods
// are listed in a generated table (each method folder declares its own with
// cartage_method() in CMake); an out-of-tree method exports
// `cartage_method_descriptor_v1` from a shared library.
struct Descriptor {
  absl::string_view name;
  absl::string_view summary;  // one line for `cartage info`
  Capabilities (*caps)();     // before opening (parameters from the environment applied)
  std::vector<ParamInfo> (*params)();
  absl::StatusOr<std::unique_ptr<Method>> (*open)(const OpenArgs& args);
  // More lines for `cartage info` (ofi: the provider it would choose), or null.
  std::vector<std::string> (*details)() = nullptr;
};

// Descriptor functions for a method `M` configured by `Options`
// (`Options::FromEnvironment()`, `M::Caps(options)`,
// `M::Create(exchange, host, options)`):
//   const Descriptor kDescriptor{"tcp", "...", &CapsFromEnvironment<TcpMethod, TcpOptions>, &Params,
//                                &OpenFromEnvironment<TcpMethod, TcpOptions>};
template <class M, class Options>
Capabilities CapsFromEnvironment() {
  absl::StatusOr<Options> o = Options::FromEnvironment();
  return M::Caps(o.ok() ? *o : Options{});
}
template <class M, class Options>
absl::StatusOr<std::unique_ptr<Method>> OpenFromEnvironment(const OpenArgs& args) {
  absl::StatusOr<Options> o = Options::FromEnvironment();
  if (!o.ok()) return o.status();
  absl::StatusOr<std::unique_ptr<M>> m = M::Create(*args.exchange, args.host, *o);
  if (!m.ok()) return m.status();
  return std::unique_ptr<Method>(*std::move(m));
}

// The symbol an out-of-tree method exports (extern "C"), and its type.
inline constexpr const char* kPluginSymbol = "cartage_method_descriptor_v1";
using PluginEntry = const Descriptor* (*)();

}  // namespace cartage::methods

#endif  // CARTAGE_METHODS_METHOD_H_
