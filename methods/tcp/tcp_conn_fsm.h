// tcp_connection: one VC's connection, made lazily on the first CAR sent to
// the peer. Both ranks may connect at once; the connection the lower rank
// started wins (the higher rank answers the other one kDuplicate and waits),
// so both ends keep the same socket. A lost connection or a failed connect
// goes to `failing`, where the VC's operations fail every new CAR at once;
// the CARs it already holds fail (`fail_cars`) as soon as no CAR's operation
// is running (failing one from inside another's transition would dispatch
// a CAR mid-transition), and it ends in `error`.
//
// The actions (ConnActions, tcp_method.cc) swap the VC's operations:
//   idle, connecting, hello_sent, await_peer   queue what is sent
//   connected                                  write it
//   failing, error, closed                     fail it
#ifndef CARTAGE_METHODS_TCP_TCP_CONN_FSM_H_
#define CARTAGE_METHODS_TCP_TCP_CONN_FSM_H_

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "fsm/machine.h"

namespace cartage::methods::tcp {

struct TcpConn;

// What a connection event carries.
struct ConnSignal {
  int fd = -1;          // accepted: the peer's validated connection
  absl::Status error;   // lost: why
};

struct ConnActions {
  // Guards.
  static bool PeerWins(const TcpConn& conn, const ConnSignal& s);  // the peer's rank is lower: its connection wins
  // Actions.
  static void StartConnect(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>& events);
  static void SendHello(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>& events);
  static void Adopt(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>& events);
  static void DropOwnAndAdopt(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>& events);
  static void Refuse(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>& events);
  static void Welcomed(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>& events);
  static void DropOwn(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>& events);
  static void Fail(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>& events);
  static void FailCars(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>& events);
  static void Shut(TcpConn& conn, const ConnSignal& s, fsm::EventQueue<TcpConn, ConnSignal>& events);
};

struct ConnDef {
  enum class State : uint8_t {
    kIdle, kConnecting, kHelloSent, kAwaitPeer, kConnected, kFailing, kError, kClosed, kCount
  };
  enum class Event : uint8_t { kSend, kConnectDone, kAccepted, kWelcome, kDuplicate, kLost, kClose, kFailCars, kCount };
  using Context = TcpConn;
  using Payload = ConnSignal;
  static constexpr absl::string_view kName = "tcp_connection";
  static constexpr absl::string_view kSummary =
      "a tcp VC's connection: lazy connect, handshake, simultaneous connect won by the lower rank";
  static constexpr std::array<absl::string_view, 8> kStates = {
      "idle", "connecting", "hello_sent", "await_peer", "connected", "failing", "error", "closed"};
  static constexpr std::array<fsm::EventSpec, 8> kEvents = {{
      {"send", fsm::EventKind::kUser},        {"connect_done", fsm::EventKind::kWire},
      {"accepted", fsm::EventKind::kWire},    {"welcome", fsm::EventKind::kWire},
      {"duplicate", fsm::EventKind::kWire},   {"lost", fsm::EventKind::kWire},
      {"close", fsm::EventKind::kUser},       {"fail_cars", fsm::EventKind::kProgress}}};
  static constexpr State kInitial = State::kIdle;
  static constexpr std::array kFinal = {State::kError, State::kClosed};
  static fsm::StateWord& Cell(TcpConn& conn);
  static uint64_t IdOf(const TcpConn& conn);
  static void Subject(const TcpConn& conn, const ConnSignal& s, fsm::TraceRecord& r);  // its peer
};

namespace conn_fsm {
using D = ConnDef;
using S = ConnDef::State;
using E = ConnDef::Event;
using A = ConnActions;
inline constexpr fsm::Guard<D> kPeerWins{"PeerWins", &A::PeerWins};
inline constexpr fsm::Action<D> kStartConnect{"StartConnect", &A::StartConnect};
inline constexpr fsm::Action<D> kSendHello{"SendHello", &A::SendHello};
inline constexpr fsm::Action<D> kAdopt{"Adopt", &A::Adopt};
inline constexpr fsm::Action<D> kDropOwnAndAdopt{"DropOwnAndAdopt", &A::DropOwnAndAdopt};
inline constexpr fsm::Action<D> kRefuse{"Refuse", &A::Refuse};
inline constexpr fsm::Action<D> kWelcomed{"Welcomed", &A::Welcomed};
inline constexpr fsm::Action<D> kDropOwn{"DropOwn", &A::DropOwn};
inline constexpr fsm::Action<D> kFail{"Fail", &A::Fail};
inline constexpr fsm::Action<D> kShut{"Shut", &A::Shut};
inline constexpr fsm::Action<D> kFailCars{"FailCars", &A::FailCars};

// clang-format off
inline constexpr auto kTable = fsm::MakeTable<D>({
// source          event             guard      action            target
  {S::kIdle,       E::kSend,         {},        kStartConnect,    S::kConnecting},
  {S::kIdle,       E::kAccepted,     {},        kAdopt,           S::kConnected},
  {S::kIdle,       E::kLost,         {},        kFail,            S::kFailing},
  {S::kIdle,       E::kClose,        {},        kShut,            S::kClosed},
  {S::kConnecting, E::kSend,         {},        {},               S::kConnecting},
  {S::kConnecting, E::kConnectDone,  {},        kSendHello,       S::kHelloSent},
  {S::kConnecting, E::kAccepted,     kPeerWins, kDropOwnAndAdopt, S::kConnected},
  {S::kConnecting, E::kAccepted,     {},        kRefuse,          S::kConnecting},
  {S::kConnecting, E::kLost,         {},        kFail,            S::kFailing},
  {S::kConnecting, E::kClose,        {},        kShut,            S::kClosed},
  {S::kHelloSent,  E::kSend,         {},        {},               S::kHelloSent},
  {S::kHelloSent,  E::kWelcome,      {},        kWelcomed,        S::kConnected},
  {S::kHelloSent,  E::kDuplicate,    {},        kDropOwn,         S::kAwaitPeer},
  {S::kHelloSent,  E::kAccepted,     kPeerWins, kDropOwnAndAdopt, S::kConnected},
  {S::kHelloSent,  E::kAccepted,     {},        kRefuse,          S::kHelloSent},
  {S::kHelloSent,  E::kLost,         {},        kFail,            S::kFailing},
  {S::kHelloSent,  E::kClose,        {},        kShut,            S::kClosed},
  {S::kAwaitPeer,  E::kSend,         {},        {},               S::kAwaitPeer},
  {S::kAwaitPeer,  E::kAccepted,     {},        kAdopt,           S::kConnected},
  {S::kAwaitPeer,  E::kLost,         {},        kFail,            S::kFailing},
  {S::kAwaitPeer,  E::kClose,        {},        kShut,            S::kClosed},
  {S::kConnected,  E::kSend,         {},        {},               S::kConnected},
  {S::kConnected,  E::kAccepted,     {},        kRefuse,          S::kConnected},
  {S::kConnected,  E::kLost,         {},        kFail,            S::kFailing},
  {S::kConnected,  E::kClose,        {},        kShut,            S::kClosed},
  {S::kFailing,    E::kFailCars,     {},        kFailCars,        S::kError},
  {S::kFailing,    E::kLost,         {},        {},               S::kFailing},
  {S::kFailing,    E::kClose,        {},        kFailCars,        S::kError},
});
// clang-format on
}  // namespace conn_fsm

// The dispatcher of tcp_connection.
using ConnMachine = fsm::Machine<ConnDef, conn_fsm::kTable>;
using ConnState = ConnDef::State;
using ConnEvent = ConnDef::Event;

}  // namespace cartage::methods::tcp

#endif  // CARTAGE_METHODS_TCP_TCP_CONN_FSM_H_
