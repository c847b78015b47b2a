// The queue a table's actions raise events into (fsm::Machine runs them
// to completion: in order, once the current transition has finished).
#ifndef CARTAGE_FSM_EVENT_QUEUE_H_
#define CARTAGE_FSM_EVENT_QUEUE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/base/optimization.h"
#include "absl/status/status.h"

namespace cartage::fsm {

// Lets an action raise events that run after the current transition.
// Every dispatch makes one, mostly to find nothing raised: making one is a
// store of its counts, and ending one a test, where nothing spilled and no
// payload was raised. The first kInline events and kInlinePayloads payloads
// stay in the queue itself; more go to the heap.
template <class Ctx, class Payload>
class EventQueue {
 public:
  // A type-erased dispatch of one event (Machine<...>::DispatchQueued).
  using DispatchFn = absl::Status (*)(Ctx&, uint8_t event, const Payload&, EventQueue&);

  EventQueue() = default;
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;
  // Whatever holds a payload or spilled was raised and not drained: a
  // queue with no events left needs nothing more.
  ~EventQueue() {
    if (ABSL_PREDICT_FALSE(size_ != 0)) Release();
  }

  // Queues `event` for `target` on machine M (M = Machine<Def, kTable>).
  template <class M>
  void Raise(Ctx& target, typename M::Event event, const Payload& payload) {
    if (ABSL_PREDICT_FALSE(payloads_ >= kInlinePayloads || size_ >= kInline)) {
      RaiseSpilling(&target, &M::DispatchQueued, static_cast<uint8_t>(event), payload);
      return;
    }
    const uint32_t index = payloads_++;
    new (InlinePayload(index)) Payload(payload);
    PushInline(&target, &M::DispatchQueued, static_cast<uint8_t>(event), index);
  }
  // The same with no payload: the event's actions see an empty one. Most
  // raised events carry nothing, so the queue's entries hold none; the few
  // payloads wait apart, four inline, since a receive meeting an earlier
  // message raises three.
  template <class M>
  void Raise(Ctx& target, typename M::Event event) {
    if (ABSL_PREDICT_FALSE(size_ >= kInline)) {
      PushSpilled(&target, &M::DispatchQueued, static_cast<uint8_t>(event), kNoPayload);
      return;
    }
    PushInline(&target, &M::DispatchQueued, static_cast<uint8_t>(event), kNoPayload);
  }

  // The payload an event raised or dispatched without one carries: made
  // at start-up, where a function's static is tested at every call.
  static const Payload& NoPayload() { return kEmptyPayload; }

  bool has_pending() const { return next_ < size_; }
  // Whether anything was raised into a queue nothing has drained yet, as a
  // fresh one after a firing (one load, where has_pending() makes two).
  bool raised() const { return size_ != 0; }

  // Whether `event` of machine M waits in the queue for `target`: raised,
  // not run yet. So a second failure is not raised while the first is on
  // its way, with no flag on the instance to say so.
  template <class M>
  bool Queued(const Ctx& target, typename M::Event event) const {
    for (uint32_t i = next_; i < size_; ++i) {
      const Pending& e = At(i);
      if (e.ctx == &target && e.fn == &M::DispatchQueued && e.event == static_cast<uint8_t>(event)) return true;
    }
    return false;
  }

  // Takes the next queued event out if it is the only one and is `event` of
  // machine M for `target`, with no payload: the caller runs it itself
  // (Machine::DispatchFromThen), as Drain would have next.
  template <class M>
  bool TakeOnly(const Ctx& target, typename M::Event event) {
    if (size_ != next_ + 1) return false;
    const Pending& e = At(next_);
    if (e.ctx != &target || e.fn != &M::DispatchQueued || e.event != static_cast<uint8_t>(event) ||
        e.payload != kNoPayload) {
      return false;
    }
    // The last entry, taken off the end: a fresh queue is empty again.
    if (size_ > kInline) more_->pending.pop_back();
    --size_;
    return true;
  }

  // Runs queued events in order (including those they raise); returns the
  // first error, having still run every queued event. The queue is then
  // empty, its room free for more.
  absl::Status Drain() {
    absl::Status first_error;
    while (next_ < size_) {
      // Copied out, as a raise during the call may grow the queue; field by
      // field, as the entry was stored so an instant ago (Fill).
      const Pending& e = At(next_++);
      Ctx* const ctx = e.ctx;
      const DispatchFn fn = e.fn;
      const uint8_t event = e.event;
      const uint32_t index = e.payload;
      if (index == kNoPayload) {
        first_error.Update(fn(*ctx, event, NoPayload(), *this));
      } else {
        const Payload payload = std::move(PayloadAt(index));  // moved out, as the queue may grow
        first_error.Update(fn(*ctx, event, payload, *this));
      }
    }
    if (ABSL_PREDICT_FALSE(payloads_ != 0 || more_ != nullptr)) Release();
    size_ = next_ = 0;
    return first_error;
  }

 private:
  static constexpr uint32_t kInline = 8;
  static constexpr uint32_t kInlinePayloads = 4;
  static constexpr uint32_t kNoPayload = ~uint32_t{0};
  // A small payload goes to the spilling call in registers: by reference, it
  // is stored to the stack first at every raise, and the raising row needs
  // a frame.
  using PayloadArg = std::conditional_t<std::is_trivially_copyable_v<Payload> && sizeof(Payload) <= 16, Payload,
                                        const Payload&>;
  static inline const Payload kEmptyPayload{};  // NoPayload()
  // Written field by field (Fill): an entry built on the stack and copied
  // in is read back with loads that span the stores that built it, which
  // wait for them to land (a store-forwarding stall).
  struct Pending {
    Ctx* ctx;
    DispatchFn fn;
    uint8_t event;
    uint32_t payload;  // index of its payload (PayloadAt), or kNoPayload
  };
  static_assert(std::is_trivially_copyable_v<Pending>);
  // What spilled: events past kInline, payloads past kInlinePayloads.
  struct Spill {
    std::vector<Pending> pending;
    std::vector<Payload> payloads;
  };

  // Raising with room inline makes no call, so a row whose action raises
  // saves no registers for it; what spills (past kInline events or
  // kInlinePayloads payloads) takes the calls below.
  ABSL_ATTRIBUTE_ALWAYS_INLINE void PushInline(Ctx* ctx, DispatchFn fn, uint8_t event, uint32_t payload) {
    Fill(inline_[size_++], ctx, fn, event, payload);
  }
  ABSL_ATTRIBUTE_NOINLINE ABSL_ATTRIBUTE_COLD void PushSpilled(Ctx* ctx, DispatchFn fn, uint8_t event,
                                                             uint32_t payload) {
    if (size_ < kInline) {
      PushInline(ctx, fn, event, payload);
      return;
    }
    Fill(More().pending.emplace_back(), ctx, fn, event, payload);
    ++size_;
  }
  ABSL_ATTRIBUTE_NOINLINE ABSL_ATTRIBUTE_COLD void RaiseSpilling(Ctx* ctx, DispatchFn fn, uint8_t event,
                                                               PayloadArg payload) {
    const uint32_t index = payloads_++;
    if (index < kInlinePayloads) {
      new (InlinePayload(index)) Payload(payload);
    } else {
      More().payloads.push_back(payload);
    }
    PushSpilled(ctx, fn, event, index);
  }
  static void Fill(Pending& e, Ctx* ctx, DispatchFn fn, uint8_t event, uint32_t payload) {
    e.ctx = ctx;
    e.fn = fn;
    e.event = event;
    e.payload = payload;
  }
  const Pending& At(uint32_t i) const { return i < kInline ? inline_[i] : more_->pending[i - kInline]; }
  void* InlinePayload(uint32_t i) { return payload_room_ + i * sizeof(Payload); }
  Payload& PayloadAt(uint32_t i) {
    return i < kInlinePayloads ? *std::launder(static_cast<Payload*>(InlinePayload(i)))
                               : more_->payloads[i - kInlinePayloads];
  }
  Spill& More() {
    if (more_ == nullptr) more_ = new Spill;
    return *more_;
  }
  // Ends the payloads made inline and whatever spilled.
  ABSL_ATTRIBUTE_NOINLINE void Release() {
    if (payloads_ == 0 && more_ == nullptr) return;
    if constexpr (!std::is_trivially_destructible_v<Payload>) {
      for (uint32_t i = 0; i < std::min(payloads_, kInlinePayloads); ++i) PayloadAt(i).~Payload();
    }
    payloads_ = 0;
    delete more_;
    more_ = nullptr;
  }

  uint32_t size_ = 0;      // events raised
  uint32_t next_ = 0;      // events run (or taken)
  uint32_t payloads_ = 0;  // payloads raised
  Spill* more_ = nullptr;
  Pending inline_[kInline];
  alignas(Payload) std::byte payload_room_[kInlinePayloads * sizeof(Payload)];
};

}  // namespace cartage::fsm

#endif  // CARTAGE_FSM_EVENT_QUEUE_H_
