// The self method: a rank's messages to itself, delivered inside the process
// with one copy and no shared memory. Every size goes eagerly: the sender's
// buffer is valid while its post runs to completion, so the receive (or the
// unexpected message's temporary buffer) copies straight from it.
#ifndef CARTAGE_METHODS_SELF_SELF_METHOD_H_
#define CARTAGE_METHODS_SELF_SELF_METHOD_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "car/car.h"
#include "methods/host.h"
#include "methods/method.h"

namespace cartage::methods::self {

// What the method keeps in a CAR's method-private area.
struct SelfCarState {
  car::Car* sender = nullptr;  // receive of a synchronous send: whom to acknowledge
};

class SelfMethod final : public Method {
 public:
  SelfMethod(MethodHost* host, int rank);

  static Capabilities Caps();
  absl::string_view name() const override { return "self"; }
  const Capabilities& caps() const override { return caps_; }
  bool Reaches(int peer) const override { return peer == rank_; }
  car::Vc* VcOf(int peer) override { return peer == rank_ ? &vc_ : nullptr; }
  VcState StateOf(int) const override { return VcState::kConnected; }
  const absl::Status& PeerStatus(int) const override { return ok_; }
  std::size_t private_bytes() const override { return sizeof(SelfCarState); }
  void Bind(car::Car& car, int peer) override;
  int Progress() override { return 0; }  // everything happens while a CAR is posted
  void Block(int) override {}
  bool PeerGone(int) override { return false; }
  void FailPeer(int, const absl::Status&) override {}
  void Close() override {}

  // VC operations (car::Vc); the VC's context is the method. No
  // rendezvous: every size is eager.
  static const car::Vc kOps;
  static void StartEager(car::Car& c, car::CarEvents& events);
  static void SendAck(car::Car& c, car::CarEvents& events);

  static SelfCarState& StateOf(car::Car& c) { return *static_cast<SelfCarState*>(c.method_private()); }

 private:
  MethodHost* host_;
  int rank_;
  Capabilities caps_ = Caps();
  car::Vc vc_;
  absl::Status ok_;
  std::vector<std::byte> scratch_;  // a non-contiguous message, packed (reused)
};

// The registry's entry (declared in methods/self/CMakeLists.txt).
extern const Descriptor kDescriptor;

}  // namespace cartage::methods::self

#endif  // CARTAGE_METHODS_SELF_SELF_METHOD_H_
