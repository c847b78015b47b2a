#include "car/car_pool.h"

#include <algorithm>
#include <new>

#include "absl/strings/str_format.h"
#include "base/check.h"

namespace cartage::car {

namespace {
constexpr std::size_t RoundUp(std::size_t n, std::size_t a) { return (n + a - 1) / a * a; }
}  // namespace

CarPool::CarPool(Options options)
    : options_(options),
      slot_bytes_(kCarBytes + RoundUp(options.method_private_bytes, kAlign)),
      next_id_(options.first_id) {
  if (options_.cars_per_slab == 0) options_.cars_per_slab = 1;
}

CarPool::~CarPool() {
  for (std::size_t i = 0; i < in_use_.size(); ++i) {
    if (in_use_[i]) std::launder(reinterpret_cast<Car*>(SlotAddress(i)))->~Car();
  }
  for (std::byte* slab : slabs_) {
    if (slab != nullptr) ::operator delete(slab, std::align_val_t{kAlign});
  }
}

bool CarPool::Grow() {
  std::size_t n = options_.cars_per_slab;
  if (options_.max_cars != 0) {
    if (capacity_ >= options_.max_cars) return false;
    n = std::min(n, options_.max_cars - capacity_);
  }
  // Every slab has room for cars_per_slab slots, so a slot number maps to an
  // address with one division; under max_cars only the first n are used.
  auto* slab = static_cast<std::byte*>(
      ::operator new(options_.cars_per_slab * slot_bytes_, std::align_val_t{kAlign}));
  // A slab Trim gave back leaves a hole, filled first.
  const auto hole = std::find(slabs_.begin(), slabs_.end(), nullptr);
  const auto k = static_cast<std::size_t>(hole - slabs_.begin());
  const std::size_t base = k * options_.cars_per_slab;
  if (hole == slabs_.end()) {
    slabs_.push_back(slab);
    in_use_.resize(base + options_.cars_per_slab, 0);
  } else {
    *hole = slab;
  }
  // Push in reverse so slots are handed out in address order.
  for (std::size_t i = n; i-- > 0;) {
    auto* slot = reinterpret_cast<FreeSlot*>(slab + i * slot_bytes_);
    slot->next = free_;
    slot->index = base + i;
    free_ = slot;
  }
  capacity_ += n;
  return true;
}

std::byte* CarPool::SlotAddress(std::size_t index) const {
  return slabs_[index / options_.cars_per_slab] + (index % options_.cars_per_slab) * slot_bytes_;
}

absl::Status CarPool::Reserve(std::size_t n) {
  while (capacity_ - live_ < n) {
    if (!Grow()) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "CAR pool: cannot reserve %d free CARs (limit %d, %d live)", n, options_.max_cars, live_));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Car*> CarPool::Create(const CarSpec& spec) {
  if (absl::Status s = ValidateSpec(spec); !s.ok()) return s;
  return CreateUnchecked(spec);
}

absl::StatusOr<Car*> CarPool::CreateLinked(const CarSpec& spec) {
#ifndef NDEBUG
  CARTAGE_CHECK_OK(ValidateSpec(spec));
#endif
  // One consumer per supplier, and a supplier that has not started yet (it
  // hands over its buffer, or its completion, once it runs).
  auto check_supplier = [&](const Car& supplier, const Car* existing,
                            absl::string_view what) -> absl::Status {
    if (existing != nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "building %s CAR: CAR #%d already supplies its %s to CAR #%d", KindName(spec.kind),
          supplier.id(), what, existing->id()));
    }
    if (supplier.state() != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "building %s CAR: %s supplier CAR #%d has already started (state %s)",
          KindName(spec.kind), what, supplier.id(), supplier.state_name()));
    }
    return absl::OkStatus();
  };
  if (const Car* b = spec.buf_dep; b != nullptr) {
    CARTAGE_RETURN_IF_ERROR(check_supplier(*b, b->buf_consumer_, "buffer"));
  }
  if (const Car* p = spec.progress_dep; p != nullptr) {
    CARTAGE_RETURN_IF_ERROR(check_supplier(*p, p->progress_dependent_, "progress"));
  }
  if (free_ == nullptr && !Grow()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "building %s CAR: the CAR pool is exhausted (%d live, limit %d)", KindName(spec.kind),
        live_, options_.max_cars));
  }
  Car* car = Place(spec);
  if (spec.buf_dep != nullptr) spec.buf_dep->buf_consumer_ = car;
  if (spec.progress_dep != nullptr) spec.progress_dep->progress_dependent_ = car;
  return car;
}

void CarPool::Unlink(Car* car) {
  if (Car* b = car->spec_.buf_dep; b != nullptr && b->buf_consumer_ == car) b->buf_consumer_ = nullptr;
  if (Car* p = car->spec_.progress_dep; p != nullptr && p->progress_dependent_ == car) {
    p->progress_dependent_ = nullptr;
  }
  if (Car* c = car->buf_consumer_; c != nullptr && c->spec_.buf_dep == car) c->spec_.buf_dep = nullptr;
  if (Car* d = car->progress_dependent_; d != nullptr && d->spec_.progress_dep == car) {
    d->spec_.progress_dep = nullptr;
  }
}

std::size_t CarPool::Trim(std::size_t keep) {
  if (options_.max_cars != 0) return 0;  // a bounded pool keeps what it has
  const std::size_t per = options_.cars_per_slab;
  std::vector<std::size_t> live_in(slabs_.size(), 0);
  for (std::size_t i = 0; i < in_use_.size(); ++i) {
    if (in_use_[i]) ++live_in[i / per];
  }
  std::vector<bool> drop(slabs_.size(), false);
  std::size_t dropped = 0;
  for (std::size_t k = slabs_.size(); k-- > 0;) {
    if (capacity_ - (dropped + 1) * per < std::max(keep, live_)) break;
    if (slabs_[k] == nullptr || live_in[k] != 0) continue;
    drop[k] = true;
    ++dropped;
  }
  if (dropped == 0) return 0;
  FreeSlot* kept = nullptr;
  FreeSlot** tail = &kept;
  for (FreeSlot* f = free_; f != nullptr; f = f->next) {
    if (drop[f->index / per]) continue;
    *tail = f;
    tail = &f->next;
  }
  *tail = nullptr;
  free_ = kept;
  for (std::size_t k = 0; k < slabs_.size(); ++k) {
    if (!drop[k]) continue;
    ::operator delete(slabs_[k], std::align_val_t{kAlign});
    slabs_[k] = nullptr;
  }
  capacity_ -= dropped * per;
  return dropped * per;
}

void CarPool::ForEachLive(const std::function<void(const Car&)>& fn) const {
  for (std::size_t i = 0; i < in_use_.size(); ++i) {
    if (in_use_[i]) fn(*std::launder(reinterpret_cast<const Car*>(SlotAddress(i))));
  }
}

}  // namespace cartage::car
