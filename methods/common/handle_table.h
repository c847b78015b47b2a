// Handles for CARs that travel on the wire (a send waiting for its ACK or
// CTS, a receive waiting for pipelined data). A handle is (generation << 32 |
// slot + 1); Find validates both, so a stale, forged or corrupted handle from
// a peer is refused instead of dereferenced. Slots are reused LIFO; steady
// state allocates nothing.
#ifndef CARTAGE_METHODS_COMMON_HANDLE_TABLE_H_
#define CARTAGE_METHODS_COMMON_HANDLE_TABLE_H_

#include <cstdint>
#include <vector>

#include "car/car.h"

namespace cartage::methods {

class HandleTable {
 public:
  // A handle for `car` (never 0).
  uint64_t Insert(car::Car* car) {
    uint32_t slot;
    if (!free_.empty()) {
      slot = free_.back();
      free_.pop_back();
    } else {
      slot = static_cast<uint32_t>(slots_.size());
      slots_.push_back({nullptr, 0});
    }
    Slot& s = slots_[slot];
    s.car = car;
    ++live_;
    return (static_cast<uint64_t>(s.generation) << 32) | (slot + 1);
  }
  // The CAR under `handle`, or nullptr if it is not a live handle.
  car::Car* Find(uint64_t handle) const {
    const uint64_t slot = (handle & 0xffffffffu) - 1;
    if ((handle & 0xffffffffu) == 0 || slot >= slots_.size()) return nullptr;
    const Slot& s = slots_[slot];
    return s.car != nullptr && s.generation == (handle >> 32) ? s.car : nullptr;
  }
  // Forgets `handle`; true if it was live.
  bool Remove(uint64_t handle) {
    if (Find(handle) == nullptr) return false;
    const uint32_t slot = static_cast<uint32_t>((handle & 0xffffffffu) - 1);
    slots_[slot].car = nullptr;
    ++slots_[slot].generation;
    free_.push_back(slot);
    --live_;
    return true;
  }
  std::size_t live() const { return live_; }
  // Room for `n` handles without allocating.
  void Reserve(std::size_t n) {
    slots_.reserve(n);
    free_.reserve(n);
  }
  // Calls fn(handle, car) for every live handle.
  template <class Fn>
  void ForEach(Fn fn) const {
    for (uint32_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].car != nullptr) {
        fn((static_cast<uint64_t>(slots_[i].generation) << 32) | (i + 1), slots_[i].car);
      }
    }
  }

 private:
  struct Slot {
    car::Car* car;
    uint32_t generation;
  };
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  std::size_t live_ = 0;
};

}  // namespace cartage::methods

#endif  // CARTAGE_METHODS_COMMON_HANDLE_TABLE_H_
