// CarPool: where every CAR comes from. Each slot holds a Car plus the largest
// method-private area any registered method asked for (seed 002: "allocating
// all cars to that size"), so a third-party method needs no change to the
// generic CAR. Slots come in slabs; once warm, Create/Release touch no
// allocator (a LIFO free list keeps recently used slots hot in cache).
//
//   CarPool pool({.method_private_bytes = 96});
//   CARTAGE_ASSIGN_OR_RETURN(Car* car, pool.Create(spec));
//   ...
//   pool.Release(car);
#ifndef CARTAGE_CAR_CAR_POOL_H_
#define CARTAGE_CAR_CAR_POOL_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <utility>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/status/statusor.h"
#include "car/car.h"

namespace cartage::car {

class CarPool {
 public:
  struct Options {
    std::size_t method_private_bytes = 0;  // the largest any method asks for
    std::size_t cars_per_slab = 256;       // slots allocated at a time
    std::size_t max_cars = 0;              // 0: no limit; else Create fails past it
    uint64_t first_id = 1;                 // the first CAR's id (pools of one process keep theirs apart)
  };

  explicit CarPool(Options options);
  ~CarPool();
  CarPool(const CarPool&) = delete;
  CarPool& operator=(const CarPool&) = delete;

  // Validates `spec` (ValidateSpec), takes a slot and builds the CAR in it.
  // A consumer of a buffer dependency is linked back from its supplier.
  // kInvalidArgument for a bad spec, kResourceExhausted past max_cars.
  absl::StatusOr<Car*> Create(const CarSpec& spec);

  // Create without ValidateSpec, for a caller whose specs are valid by
  // construction (the agent checks ranks, tags and buffers itself). Debug
  // builds still validate and abort on a bad spec. A CAR with no dependency
  // to link is built in line when a slot is free (every send and receive).
  absl::StatusOr<Car*> CreateUnchecked(const CarSpec& spec) {
#ifdef NDEBUG
    if (ABSL_PREDICT_TRUE(spec.buf_dep == nullptr && spec.progress_dep == nullptr && free_ != nullptr)) {
      return Place(spec);
    }
#endif
    return CreateLinked(spec);
  }

  // CreateUnchecked for the CAR whose spec `make()` returns, which links no
  // dependency (a send, a receive, an unexpected message): the spec is made
  // in the slot itself. Debug builds validate it as CreateUnchecked does.
  template <class Make>
  absl::StatusOr<Car*> CreateInPlace(Make&& make) {
#ifdef NDEBUG
    if (ABSL_PREDICT_TRUE(free_ != nullptr)) return Place(Car::InPlace{}, make);
#endif
    return CreateLinked(make());
  }

  // Destroys `car` and returns its slot; its dependency partners forget it.
  void Release(Car* car) {
    if (ABSL_PREDICT_FALSE(car->spec_.buf_dep != nullptr || car->spec_.progress_dep != nullptr ||
                           car->buf_consumer_ != nullptr || car->progress_dependent_ != nullptr)) {
      Unlink(car);
    }
    const std::size_t index = car->slot_;
    auto* bytes = reinterpret_cast<std::byte*>(car);
    car->~Car();
    in_use_[index] = 0;
    auto* slot = reinterpret_cast<FreeSlot*>(bytes);
    slot->next = free_;
    slot->index = index;
    free_ = slot;
    --live_;
  }

  // Allocates slabs until `n` slots are free (so later Creates never allocate).
  absl::Status Reserve(std::size_t n);

  // Gives back the slabs no live CAR is in, keeping at least `keep` slots
  // (a burst of CARs, drained, returns its memory); returns the slots freed.
  // A pool with max_cars keeps its slabs.
  std::size_t Trim(std::size_t keep);

  std::size_t live() const { return live_; }          // CARs created and not released
  std::size_t capacity() const { return capacity_; }  // slots allocated
  std::size_t slot_bytes() const { return slot_bytes_; }
  std::size_t method_private_bytes() const { return options_.method_private_bytes; }

  // Calls fn for every live CAR (the test watchdog dumps them).
  void ForEachLive(const std::function<void(const Car&)>& fn) const;

 private:
  struct FreeSlot {
    FreeSlot* next;
    std::size_t index;  // slot number: slab index * cars_per_slab + position
  };
  static constexpr std::size_t kAlign = 64;
  static constexpr std::size_t kCarBytes = (sizeof(Car) + kAlign - 1) / kAlign * kAlign;  // the method area follows
  std::byte* SlotAddress(std::size_t index) const;
  bool Grow();
  // Release's partners: both directions unlinked, so none keeps a pointer
  // to a freed slot.
  static void Unlink(Car* car);
  // CreateUnchecked's general case: dependencies checked and linked, the pool grown.
  absl::StatusOr<Car*> CreateLinked(const CarSpec& spec);
  // Builds a CAR from `spec` (or Car::InPlace and a maker) in the first free
  // slot (there is one).
  template <class... Spec>
  Car* Place(Spec&&... spec) {
    FreeSlot* slot = free_;
    free_ = slot->next;
    const std::size_t index = slot->index;
    auto* bytes = reinterpret_cast<std::byte*>(slot);
    Car* car = new (bytes) Car(std::forward<Spec>(spec)..., next_id_++, bytes + kCarBytes);
    car->slot_ = index;
    in_use_[index] = 1;
    ++live_;
    return car;
  }

  Options options_;
  std::size_t slot_bytes_;
  std::size_t capacity_ = 0;
  std::size_t live_ = 0;
  uint64_t next_id_ = 1;
  FreeSlot* free_ = nullptr;
  std::vector<std::byte*> slabs_;
  // By slot index, for ForEachLive: a byte each, which a create and a
  // release set with one store where a bit costs a read-modify-write.
  std::vector<uint8_t> in_use_;
};

}  // namespace cartage::car

#endif  // CARTAGE_CAR_CAR_POOL_H_
