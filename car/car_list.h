// An intrusive FIFO of CARs through Car::link: push, pop and unlink in O(1),
// no allocation. A CAR is in at most one list at a time.
#ifndef CARTAGE_CAR_CAR_LIST_H_
#define CARTAGE_CAR_CAR_LIST_H_

#include <cstddef>

#include "car/car.h"

namespace cartage::car {

class CarList {
 public:
  bool empty() const { return head_ == nullptr; }
  std::size_t size() const { return size_; }
  Car* front() const { return head_; }

  void PushBack(Car* c) {
    c->link.next = nullptr;
    c->link.prev = tail_;
    if (tail_ != nullptr) {
      tail_->link.next = c;
    } else {
      head_ = c;
    }
    tail_ = c;
    ++size_;
  }
  void Unlink(Car* c) {
    (c->link.prev ? c->link.prev->link.next : head_) = c->link.next;
    (c->link.next ? c->link.next->link.prev : tail_) = c->link.prev;
    c->link.next = c->link.prev = nullptr;
    --size_;
  }
  Car* PopFront() {
    Car* c = head_;
    if (c != nullptr) Unlink(c);
    return c;
  }
  // The first CAR for which pred(car) holds, or nullptr.
  template <class Pred>
  Car* FindFirst(Pred pred) const {
    for (Car* c = head_; c != nullptr; c = c->link.next) {
      if (pred(c)) return c;
    }
    return nullptr;
  }

 private:
  Car* head_ = nullptr;
  Car* tail_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace cartage::car

#endif  // CARTAGE_CAR_CAR_LIST_H_
