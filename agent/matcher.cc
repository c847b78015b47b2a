#include "agent/matcher.h"

namespace cartage::agent {

using car::Car;
using car::Envelope;
using car::kAnySource;
using car::kAnyTag;

Matcher::Matcher(int ranks, uint32_t first_stamp)
    : posted_(static_cast<std::size_t>(ranks)), counter_(first_stamp) {}

bool Matcher::Matches(const Envelope& want, const Envelope& got) {
  return want.context_id == got.context_id && (want.rank == kAnySource || want.rank == got.rank) &&
         (want.tag == kAnyTag || want.tag == got.tag);
}

Car* Matcher::PeekUnexpected(const Envelope& pattern) const {
  if (pattern.rank != kAnySource && pattern.tag != kAnyTag) {
    auto it = unexpected_.find(Key{pattern.context_id, pattern.rank, pattern.tag});
    return it == unexpected_.end() ? nullptr : it->second.front();
  }
  Car* oldest = nullptr;
  for (const auto& [key, list] : unexpected_) {
    Car* c = list.front();
    if (c == nullptr || !Matches(pattern, c->envelope())) continue;
    if (oldest == nullptr || c->link.seq < oldest->link.seq) oldest = c;
  }
  return oldest;
}

Car* Matcher::PostReceive(Car* recv) {
  const Envelope& e = recv->envelope();
  if (unexpected_count_ == 0) {
    // Nothing waiting: straight to the posted queues.
  } else if (Car* m = PeekUnexpected(e)) {
    auto it = unexpected_.find(Key{m->envelope().context_id, m->envelope().rank, m->envelope().tag});
    it->second.Unlink(m);
    if (it->second.empty()) unexpected_.erase(it);
    --unexpected_count_;
    return m;
  }
  if (e.rank == kAnySource) {
    recv->link.stamp = ++counter_;
    wildcard_.PushBack(recv);
  } else {
    recv->link.stamp = counter_;
    posted_[static_cast<std::size_t>(e.rank)].PushBack(recv);
  }
  return nullptr;
}

bool Matcher::RemovePosted(Car* recv) {
  const Envelope& e = recv->envelope();
  car::CarList& list = e.rank == kAnySource ? wildcard_ : posted_[static_cast<std::size_t>(e.rank)];
  if (list.FindFirst([recv](Car* c) { return c == recv; }) == nullptr) return false;
  list.Unlink(recv);
  return true;
}

Car* Matcher::MatchIncoming(const Envelope& envelope) {
  auto matches = [&envelope](Car* r) { return Matches(r->envelope(), envelope); };
  car::CarList& own = posted_[static_cast<std::size_t>(envelope.rank)];
  Car* specific = own.FindFirst(matches);
  Car* wild = wildcard_.empty() ? nullptr : wildcard_.FindFirst(matches);
  if (specific != nullptr && (wild == nullptr || Before(specific->link.stamp, wild->link.stamp))) {
    own.Unlink(specific);
    return specific;
  }
  if (wild != nullptr) wildcard_.Unlink(wild);
  return wild;
}

void Matcher::AddUnexpected(Car* message) {
  const Envelope& e = message->envelope();
  message->link.seq = arrivals_++;
  unexpected_[Key{e.context_id, e.rank, e.tag}].PushBack(message);
  ++unexpected_count_;
}

void Matcher::TakeAllFrom(int source, std::vector<Car*>* posted, std::vector<Car*>* unexpected) {
  car::CarList& own = posted_[static_cast<std::size_t>(source)];
  while (Car* c = own.PopFront()) posted->push_back(c);
  for (auto it = unexpected_.begin(); it != unexpected_.end();) {
    if (it->first.source == source) {
      while (Car* c = it->second.PopFront()) {
        unexpected->push_back(c);
        --unexpected_count_;
      }
      unexpected_.erase(it++);
    } else {
      ++it;
    }
  }
}

void Matcher::TakeAllUnexpected(std::vector<Car*>* out) {
  for (auto& [key, list] : unexpected_) {
    while (Car* c = list.PopFront()) out->push_back(c);
  }
  unexpected_.clear();
  unexpected_count_ = 0;
}

std::size_t Matcher::posted() const {
  std::size_t n = wildcard_.size();
  for (const car::CarList& l : posted_) n += l.size();
  return n;
}

}  // namespace cartage::agent
