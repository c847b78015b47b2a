// The self method: a rank's messages to itself, delivered inside the process
// with one copy and no shared memory. Every size goes eagerly: the sender's
// buffer is valid while its post runs to completion, so the receive (or the
// unexpected message's temporary buffer) copies straight from it.
#ifndef CARTAGE_METHODS_SELF_SELF_METHOD_H_
#define CARTAGE_METHODS_SELF_SELF_METHOD_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "car/car.h"
#include "methods/host.h"

namespace cartage::methods::self {

// What the method keeps in a CAR's method-private area.
struct SelfCarState {
  class SelfMethod* method = nullptr;
  car::Car* sender = nullptr;  // receive of a synchronous send: whom to acknowledge
};

class SelfMethod {
 public:
  SelfMethod(MethodHost* host, int rank) : host_(host), rank_(rank) {}

  // Every message to oneself is eager.
  static constexpr uint64_t eager_limit() { return std::numeric_limits<uint64_t>::max(); }
  std::size_t private_bytes() const { return sizeof(SelfCarState); }
  void Bind(car::Car& car);

  // Carrier operations (car::Carrier).
  static void StartEager(car::Car& c, car::CarStep& step);
  static void SendAck(car::Car& c, car::CarStep& step);

  static SelfCarState& StateOf(car::Car& c) { return *static_cast<SelfCarState*>(c.method_private()); }

 private:
  MethodHost* host_;
  int rank_;
  std::vector<std::byte> scratch_;  // a non-contiguous message, packed (reused)
};

}  // namespace cartage::methods::self

#endif  // CARTAGE_METHODS_SELF_SELF_METHOD_H_
