// The tcp method: ranks anywhere the network reaches, over one TCP
// connection per pair, made lazily (tcp_conn_fsm.h) on non-blocking sockets.
//   eager       EAGER frame: header and payload leave in one sendmsg
//   rendezvous  RTS; the receiver answers CTS once matched; the sender streams
//               one DATA frame straight from the user's buffer (no staging
//               copy for a contiguous message), and the receiver reads it
//               straight into the receive buffer where that is contiguous
//   synchronous the receiver answers ACK when it matches
// A send that does not fit the socket waits on its VC's queue (FIFO), and
// progress writes the queue out, many frames per system call. Every field
// from the wire is checked before use; a malformed frame or a lost
// connection puts the VC in the error state, naming the peer.
//
// Progress reads connected sockets directly (one recv per VC, no epoll on the
// hot path) and asks epoll now and then for connections being made and
// accepted; Block waits in epoll on all of them.
//
// tcp_method.cc sends CARs (operations, frames out, progress);
// tcp_receive.cc reads and checks frames in; tcp_connect.cc makes
// connections (addresses, listening, the tcp_connection actions, the
// handshake).
#ifndef CARTAGE_METHODS_TCP_TCP_METHOD_H_
#define CARTAGE_METHODS_TCP_TCP_METHOD_H_

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "car/car.h"
#include "fsm/machine.h"
#include "fsm/registry.h"
#include "methods/common/wire_cars.h"
#include "methods/common/host_keys.h"
#include "methods/host.h"
#include "methods/method.h"
#include "methods/tcp/tcp_options.h"
#include "methods/tcp/tcp_conn_fsm.h"
#include "methods/tcp/tcp_wire.h"

namespace cartage::methods::tcp {

// What the method keeps in a CAR's method-private area: how the CAR and its
// peer's CAR name each other on the wire.
struct TcpCarState {
  WireHandles wire;  // first: WireCars finds it there
};

// What a rank publishes for its peers: "pid;host key;net key;port;ip/mask,...".
// The host key (boot id, pid namespace) says whose pids it can see; the net
// key (boot id, network namespace) whether loopback reaches it.
struct PeerRecord {
  int32_t pid = 0;
  std::string host_key;
  std::string net_key;
  int port = 0;
  std::vector<std::pair<in_addr, in_addr>> addrs;  // address, netmask
};

// A frame waiting to be written.
struct OutFrame {
  FrameHeader h;
  car::Car* car = nullptr;         // EAGER/DATA: whose bytes follow (completed when written)
  const std::byte* payload = nullptr;  // the bytes that follow the header
  uint64_t payload_bytes = 0;
  uint64_t sent = 0;               // of header + payload
  std::vector<std::byte> packed;   // a non-contiguous payload, packed
};

// One peer as the tcp method sees it: its VC and the connection behind it
// (the tcp_connection machine's context).
struct TcpConn {
  class TcpMethod* method = nullptr;
  int peer = -1;
  fsm::StateWord state;   // tcp_connection
  car::Vc vc;             // what CARs bound to this peer call (swapped with the state)
  absl::Status error;     // why it is in the error state
  int fd = -1;            // the connection (connected), or the one we are making
  // Hello reply being read (hello_sent).
  HelloReply reply{};
  std::size_t reply_got = 0;
  // Sending.
  std::deque<OutFrame> out;
  // Receiving: unparsed bytes are rx[head, tail).
  std::vector<std::byte> rx;
  std::size_t head = 0, tail = 0;
  car::Car* data_car = nullptr;  // a DATA frame or a large eager one being read into this receive
  uint64_t data_left = 0;
  // The connection's segment size (TCP_MAXSEG, read once connected and
  // every kSegmentRecheck large frames): how a large frame is written
  // (FirstWriteOn).
  uint64_t segment = 0;
  uint32_t large_writes = 0;  // since the segment size was read
};

class TcpMethod final : public Method {
 public:
  static absl::StatusOr<std::unique_ptr<TcpMethod>> Create(Exchange& exchange, MethodHost* host,
                                                           const TcpOptions& options);
  ~TcpMethod() override;

  static Capabilities Caps(const TcpOptions& options);
  // The smallest eager frame whose payload may be read straight into its
  // posted receive (StreamEager). Below it, copying out of rx costs less
  // than the read of its own a stream takes.
  static constexpr uint64_t kStreamEagerMin = 32 * 1024;
  // Segments at least this large are the kernel's buffers (loopback's hold
  // 65,483 bytes), not a network's packets: FirstWrite cuts frames only there.
  static constexpr uint64_t kCutSegmentMin = 32 * 1024;
  // How much of a `total`-byte frame is written first on a connection
  // of `segment`-byte segments. A frame that one write ends in a sliver of a
  // segment (a 64 KiB message and its header on loopback: 65,576 bytes in
  // segments of 65,483) streamed both ways at half the rate of one within a
  // segment, and one way now at full rate, now at a third. So the last whole
  // segment and the sliver go as two halves, in two writes.
  static constexpr uint64_t FirstWrite(uint64_t total, uint64_t segment) {
    if (segment < kCutSegmentMin || total <= segment) return total;
    const uint64_t sliver = total % segment;
    return sliver != 0 && sliver < segment / 2 ? total - (segment + sliver) / 2 : total;
  }
  // Large frames written between readings of the segment size,
  // which grows as the peer's window does (the kernel bounds it by half the
  // largest window seen).
  static constexpr uint32_t kSegmentRecheck = 64;
  // How much of a frame of `payload` bytes is written first, eager or a
  // rendezvous message's data: cut as FirstWrite cuts from kStreamEagerMin
  // up to kCutFrameMax (a 1 MiB ping-pong took 18 % less time cut); above
  // it, a window of DATA frames streamed 5-9 % slower cut, so it goes whole.
  static constexpr uint64_t kCutFrameMax = uint64_t{2} << 20;
  static constexpr uint64_t LargeFrameFirstWrite(uint64_t payload, uint64_t segment) {
    const uint64_t total = sizeof(FrameHeader) + payload;
    if (payload < kStreamEagerMin || total > kCutFrameMax) return total;
    return FirstWrite(total, segment);
  }
  int rank() const { return rank_; }
  // The agent's lane this instance serves (MethodHost::lane).
  int lane() const { return lane_; }
  // The port this rank listens on.
  int port() const { return port_; }

  // Method
  absl::string_view name() const override { return "tcp"; }
  const Capabilities& caps() const override { return caps_; }
  bool Reaches(int peer) const override { return peer != rank_ && peer >= 0 && peer < size_; }
  car::Vc* VcOf(int peer) override { return &conns_[static_cast<std::size_t>(peer)].vc; }
  VcState StateOf(int peer) const override;
  const absl::Status& PeerStatus(int peer) const override { return conns_[static_cast<std::size_t>(peer)].error; }
  std::size_t private_bytes() const override { return sizeof(TcpCarState); }
  void Bind(car::Car& car, int peer) override;
  int Progress() override;
  void Block(int timeout_us) override;
  void Wake() override;
  bool PeerGone(int peer) override;
  void FailPeer(int peer, const absl::Status& why) override;
  void TellGone(int peer, int gone) override;
  void Close() override;

  // Vc operations, by VC state.
  static void QueueEager(car::Car& c, car::CarEvents& events);       // not connected yet
  static void QueueRendezvous(car::Car& c, car::CarEvents& events);
  static void StartEager(car::Car& c, car::CarEvents& events);       // connected
  static void StartRendezvous(car::Car& c, car::CarEvents& events);
  static void StartData(car::Car& c, car::CarEvents& events);
  static void SendCts(car::Car& c, car::CarEvents& events);
  static void SendAck(car::Car& c, car::CarEvents& events);
  static void FailAtOnce(car::Car& c, car::CarEvents& events);       // error

  static TcpCarState& StateOf(car::Car& c) { return *static_cast<TcpCarState*>(c.method_private()); }
  TcpConn& conn(int peer) { return conns_[static_cast<std::size_t>(peer)]; }

 private:
  friend struct ConnActions;
  TcpMethod() = default;
  // A connection accepted, its Hello not read yet.
  struct Pending {
    int fd = -1;
    Hello hello{};
    std::size_t got = 0;
    std::string from;  // address, for the log
  };

  // Set-up (tcp_connect.cc).
  absl::Status Listen();
  // A peer's published record, read from the exchange once.
  absl::StatusOr<const PeerRecord*> Record(int peer);
  absl::StatusOr<sockaddr_in> AddressOf(int peer);
  // Operations swapped into a VC: queueing (idle, connecting), connected,
  // failing (failing, error, closed).
  static const car::Vc kQueueingOps, kConnectedOps, kFailingOps;
  // Connection events; after a transition into `failing`, the VC's CARs
  // fail (`fail_cars`: at once, or in the next Progress when inside a CAR's
  // operation).
  void Conn(TcpConn& conn, ConnEvent e, const ConnSignal& s = {});
  void Lost(TcpConn& conn, absl::Status why);
  void CloseFd(int fd);
  void DropConnection(TcpConn& conn);   // closes the VC's socket
  void BecomeConnected(TcpConn& conn);  // connected operations, a receive buffer
  void ReadSegment(TcpConn& conn);      // conn.segment, from TCP_MAXSEG
  // LargeFrameFirstWrite on `conn`, whose segment size it reads again every
  // kSegmentRecheck large frames (StartEager's direct write, Flush's lone frame).
  uint64_t FirstWriteOn(TcpConn& conn, uint64_t payload);
  void Watch(int fd, uint32_t events, uint64_t tag);
  // A VC's socket in the epoll set with `events`, tagged as its VC's.
  void WatchVc(TcpConn& conn, uint32_t events);
  // Sending.
  // The envelope frame of send `c`, EAGER or RTS, with a handle where the
  // peer will answer (CTS; ACK of a synchronous send).
  FrameHeader EnvelopeFrame(car::Car& c, bool rendezvous);
  OutFrame& Queue(TcpConn& conn, const FrameHeader& h, car::Car* payload_of);
  void QueueControl(TcpConn& conn, const FrameHeader& h);
  // Writes what the socket takes; completions through `events` (inside a CAR
  // operation) or dispatched directly (progress). Returns the work done:
  // frames completed, or one where bytes went out but no frame ended (a
  // waiter that moves a large frame is not idle).
  int Flush(TcpConn& conn, car::CarEvents* events);
  void Complete(OutFrame& f, car::CarEvents* events);
  // Receiving.
  int PumpRx(TcpConn& conn);
  void Parse(TcpConn& conn);
  void Landed(TcpConn& conn, std::size_t n);  // n bytes of the stream are in its receive
  void Compact(TcpConn& conn);                 // moves rx's unparsed bytes to its start
  bool OnFrame(TcpConn& conn, const FrameHeader& h);  // false: stop parsing (need more, or failed)
  // An eager frame of at least kStreamEagerMin bytes, its header in and its
  // payload not: where a posted receive matches it, the payload becomes the
  // connection's stream, read straight into the receive (one copy fewer than
  // through rx). False where none matches.
  bool StreamEager(TcpConn& conn, const FrameHeader& h);
  void OnEnvelope(TcpConn& conn, const FrameHeader& h, const std::byte* payload);
  void Malformed(TcpConn& conn, absl::string_view what);
  // Events from epoll: connects finishing, connections arriving, hellos.
  int PollEvents(int timeout_ms);
  void OnListen();
  void OnPending(std::size_t slot);
  void OnConnecting(TcpConn& conn, uint32_t events);
  void FailCars(TcpConn& conn);

  TcpOptions options_;
  Capabilities caps_;
  Exchange* exchange_ = nullptr;
  MethodHost* host_ = nullptr;
  int rank_ = 0;
  int size_ = 0;
  int lane_ = 0;
  std::string job_key_;
  int listen_fd_ = -1;
  int port_ = 0;
  int epoll_fd_ = -1;
  // An eventfd in the epoll set that Wake writes: a Block in epoll_wait
  // returns. Its epoll tag is kWakeTag; whoever sees it reads it empty.
  int wake_fd_ = -1;
  static constexpr uint64_t kWakeTag = uint64_t{4} << 32;
  void DrainWake();
  std::vector<TcpConn> conns_;
  std::vector<TcpConn*> live_;        // connected VCs: read every round
  std::vector<TcpConn*> writers_;     // VCs a Block also watches for room to write
  std::vector<Pending> pending_;    // accepted connections waiting for their Hello
  int connecting_ = 0;              // VCs making a connection (epoll every round meanwhile)
  int in_op_ = 0;                   // inside a CAR's operation (OpScope): CAR failures wait
  int failing_ = 0;                 // VCs in `failing`: Progress fails their CARs outside any operation
  struct OpScope {
    explicit OpScope(TcpMethod& m) : m_(m) { ++m_.in_op_; }
    ~OpScope() { --m_.in_op_; }
    OpScope(const OpScope&) = delete;
    OpScope& operator=(const OpScope&) = delete;
    TcpMethod& m_;
  };
  uint32_t tick_ = 0;
  WireCars wire_;
  std::string host_key_;            // see PeerRecord
  ProcessWatch watch_;               // peers on this host, watched for death
  std::string net_key_;
  std::vector<std::optional<PeerRecord>> records_;  // per peer, once read
  std::vector<sockaddr_in> addresses_;              // per peer: where we connect (for messages)
};

// Registers tcp_connection with the registry (diagrams, `cartage info`).
absl::Status RegisterTcpMachines(fsm::Registry& registry);

// The registry's entry (declared in methods/tcp/CMakeLists.txt).
extern const Descriptor kDescriptor;

}  // namespace cartage::methods::tcp

#endif  // CARTAGE_METHODS_TCP_TCP_METHOD_H_
