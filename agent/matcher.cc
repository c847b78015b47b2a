#include "agent/matcher.h"

#include <algorithm>
#include <cstddef>

#include "absl/container/flat_hash_map.h"

namespace cartage::agent {

using car::Car;
using car::Envelope;
using car::kAnySource;
using car::kAnyTag;

Matcher::Matcher(int ranks, uint32_t first_stamp)
    : posted_any_tag_(static_cast<std::size_t>(ranks)), counter_(first_stamp) {}

bool Matcher::Matches(const Envelope& want, const Envelope& got) {
  return want.context_id == got.context_id && (want.rank == kAnySource || want.rank == got.rank) &&
         (want.tag == kAnyTag || want.tag == got.tag);
}

namespace {
// What OldestIn reads of a message, CAR or record alike.
uint64_t SeqOf(const Car* c) { return c->link.seq; }
uint64_t SeqOf(const CompactMessage* r) { return r->seq; }
const Envelope& EnvelopeOf(const Car* c) { return c->envelope(); }
const Envelope& EnvelopeOf(const CompactMessage* r) { return r->envelope; }
}  // namespace

template <class Map, class Front>
auto Matcher::OldestIn(const Map& map, const Envelope& pattern, Front front) const {
  using Message = decltype(front(map.begin()->second));
  if (pattern.rank != kAnySource && pattern.tag != kAnyTag) {
    auto it = map.find(Key{pattern.context_id, pattern.rank, pattern.tag});
    return it == map.end() ? Message{} : front(it->second);
  }
  Message oldest{};
  auto consider = [&oldest](Message m) {
    if (m != nullptr && (oldest == nullptr || SeqOf(m) < SeqOf(oldest))) oldest = m;
  };
  const std::size_t ranks = posted_any_tag_.size();
  if (pattern.tag != kAnyTag && ranks < map.size()) {
    // Any source, one tag: one lookup per source beats a walk over every
    // (source, tag) bucket once there are more buckets than ranks (a walk
    // makes a long queue quadratic).
    for (std::size_t source = 0; source < ranks; ++source) {
      auto it = map.find(Key{pattern.context_id, static_cast<int32_t>(source), pattern.tag});
      if (it != map.end()) consider(front(it->second));
    }
    return oldest;
  }
  for (const auto& [key, list] : map) {
    Message m = front(list);
    if (m != nullptr && Matches(pattern, EnvelopeOf(m))) consider(m);
  }
  return oldest;
}

Car* Matcher::PeekUnexpected(const Envelope& pattern) const {
  // An emptied bucket, kept, has no front.
  return OldestIn(unexpected_.map(), pattern, [](const car::CarList& list) { return list.front(); });
}

Car* Matcher::PostReceive(Car* recv, CompactMessage** compact) {
  const Envelope& e = recv->envelope();
  const bool compacts = compact != nullptr && compact_count_ > 0;
  if (unexpected_count_ == 0 && !compacts) {
    // Nothing waiting: straight to the posted queues.
  } else if (e.rank != kAnySource && e.tag != kAnyTag) {
    // One source, one tag: its bucket's oldest, found with one lookup. The
    // bucket stays when it empties (the next message from there reuses it).
    const Key key{e.context_id, e.rank, e.tag};
    car::CarList* bucket = unexpected_count_ > 0 ? unexpected_.Find(key) : nullptr;
    Car* m = bucket != nullptr ? bucket->front() : nullptr;
    if (compacts) {
      auto it = compact_.find(key);
      if (it != compact_.end() && (m == nullptr || it->second.head->seq < m->link.seq)) {
        *compact = PopCompact(key);
        return nullptr;
      }
    }
    if (m != nullptr) {
      bucket->PopFront();
      --unexpected_count_;
      return m;
    }
  } else {
    Car* m = unexpected_count_ > 0 ? PeekUnexpected(e) : nullptr;
    const CompactMessage* r = compacts ? PeekCompact(e) : nullptr;
    if (r != nullptr && (m == nullptr || r->seq < m->link.seq)) {
      *compact = PopCompact(Key{r->envelope.context_id, r->envelope.rank, r->envelope.tag});
      return nullptr;
    }
    if (m != nullptr) {
      const Envelope& me = m->envelope();
      unexpected_.Find(Key{me.context_id, me.rank, me.tag})->Unlink(m);
      --unexpected_count_;
      return m;
    }
  }
  recv->link.seq = posts_++;
  ++posted_count_;
  if (e.rank == kAnySource) {
    recv->link.stamp = ++counter_;
    if (e.tag == kAnyTag) {
      wildcard_.PushBack(recv);
    } else {
      posted_any_source_.Sweep(any_source_count_);
      posted_any_source_.Get(Key{e.context_id, kAnySource, e.tag}).PushBack(recv);
      ++any_source_count_;
    }
    return nullptr;
  }
  recv->link.stamp = counter_;
  if (e.tag == kAnyTag) {
    posted_any_tag_[static_cast<std::size_t>(e.rank)].PushBack(recv);
  } else {
    // Buckets stay when they empty (a ping-pong reuses one); they are swept
    // once the empty ones clearly outnumber the receives.
    posted_.Sweep(posted_count_);
    posted_.Get(Key{e.context_id, e.rank, e.tag}).PushBack(recv);
  }
  return nullptr;
}

bool Matcher::RemovePosted(Car* recv) {
  const Envelope& e = recv->envelope();
  car::CarList* list = nullptr;
  if (e.rank == kAnySource && e.tag == kAnyTag) {
    list = &wildcard_;
  } else if (e.rank == kAnySource) {
    list = posted_any_source_.Find(Key{e.context_id, kAnySource, e.tag});
    if (list == nullptr) return false;
  } else if (e.tag == kAnyTag) {
    list = &posted_any_tag_[static_cast<std::size_t>(e.rank)];
  } else {
    list = posted_.Find(Key{e.context_id, e.rank, e.tag});
    if (list == nullptr) return false;
  }
  if (list->FindFirst([recv](Car* c) { return c == recv; }) == nullptr) return false;
  list->Unlink(recv);
  --posted_count_;
  if (e.rank == kAnySource && e.tag != kAnyTag) --any_source_count_;
  return true;
}

car::CarList& Matcher::Buckets::Make(const Key& key) {
  auto [it, inserted] = map_.try_emplace(key);
  if (inserted) Forget();  // the insert may have moved every bucket
  Remember(key, &it->second);
  return it->second;
}

car::CarList* Matcher::Buckets::LookUp(const Key& key) {
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  Remember(key, &it->second);
  return &it->second;
}

void Matcher::Buckets::DropEmpty() {
  Forget();
  absl::erase_if(map_, [](const auto& kv) { return kv.second.empty(); });
}

Car* Matcher::OldestSpecific(const Envelope& envelope, car::CarList** list) {
  car::CarList* bucket = posted_.Find(Key{envelope.context_id, envelope.rank, envelope.tag});
  Car* exact = bucket == nullptr ? nullptr : bucket->front();
  car::CarList& any_tag = posted_any_tag_[static_cast<std::size_t>(envelope.rank)];
  Car* loose = any_tag.empty() ? nullptr : any_tag.FindFirst([&envelope](Car* r) {
    return r->envelope().context_id == envelope.context_id;
  });
  if (loose != nullptr && (exact == nullptr || loose->link.seq < exact->link.seq)) {
    *list = &any_tag;
    return loose;
  }
  if (exact != nullptr) *list = bucket;
  return exact;
}

Car* Matcher::MatchIncoming(const Envelope& envelope) {
  // Nothing posted (a message arriving before its receive, or a method
  // looking again at one it left waiting): no hashing.
  if (posted_count_ == 0) return nullptr;
  car::CarList* own = nullptr;
  Car* specific = OldestSpecific(envelope, &own);
  Car* wild = wildcard_.empty() ? nullptr : wildcard_.FindFirst([&envelope](Car* r) {
    return Matches(r->envelope(), envelope);
  });
  car::CarList* wild_list = &wildcard_;
  // Any source, this tag: the bucket's oldest, older than any-tag's?
  if (any_source_count_ > 0) {
    car::CarList* bucket = posted_any_source_.Find(Key{envelope.context_id, kAnySource, envelope.tag});
    Car* tagged = bucket == nullptr ? nullptr : bucket->front();
    if (tagged != nullptr && (wild == nullptr || Before(tagged->link.stamp, wild->link.stamp))) {
      wild = tagged;
      wild_list = bucket;
    }
  }
  if (specific != nullptr && (wild == nullptr || Before(specific->link.stamp, wild->link.stamp))) {
    own->Unlink(specific);
    --posted_count_;
    return specific;
  }
  if (wild != nullptr) {
    wild_list->Unlink(wild);
    --posted_count_;
    if (wild_list != &wildcard_) --any_source_count_;
  }
  return wild;
}

void Matcher::AddUnexpected(Car* message) {
  const Envelope& e = message->envelope();
  message->link.seq = arrivals_++;
  // Emptied buckets are kept, as for posted receives, and swept once they
  // clearly outnumber the messages waiting.
  unexpected_.Sweep(unexpected_count_);
  unexpected_.Get(Key{e.context_id, e.rank, e.tag}).PushBack(message);
  ++unexpected_count_;
}

void Matcher::TakeAllFrom(int source, std::vector<Car*>* posted, std::vector<Car*>* unexpected) {
  const std::size_t first = posted->size();
  car::CarList& any_tag = posted_any_tag_[static_cast<std::size_t>(source)];
  while (Car* c = any_tag.PopFront()) posted->push_back(c);
  posted_.Forget();
  unexpected_.Forget();
  for (auto it = posted_.map().begin(); it != posted_.map().end();) {
    if (it->first.source == source) {
      while (Car* c = it->second.PopFront()) posted->push_back(c);
      posted_.map().erase(it++);
    } else {
      ++it;
    }
  }
  posted_count_ -= posted->size() - first;
  std::sort(posted->begin() + static_cast<std::ptrdiff_t>(first), posted->end(),
            [](const Car* a, const Car* b) { return a->link.seq < b->link.seq; });  // in posting order
  for (auto it = unexpected_.map().begin(); it != unexpected_.map().end();) {
    if (it->first.source == source) {
      while (Car* c = it->second.PopFront()) {
        unexpected->push_back(c);
        --unexpected_count_;
      }
      unexpected_.map().erase(it++);
    } else {
      ++it;
    }
  }
}

const CompactMessage* Matcher::PeekCompact(const Envelope& pattern) const {
  if (compact_count_ == 0) return nullptr;
  return OldestIn(compact_, pattern, [](const CompactList& list) -> const CompactMessage* { return list.head; });
}

void Matcher::InsertCompact(CompactMessage* r) {
  CompactList& list = compact_[Key{r->envelope.context_id, r->envelope.rank, r->envelope.tag}];
  ++compact_count_;
  if (list.tail == nullptr || list.tail->seq < r->seq) {  // the usual case: the newest
    r->next = nullptr;
    (list.tail != nullptr ? list.tail->next : list.head) = r;
    list.tail = r;
    return;
  }
  CompactMessage** at = &list.head;
  while ((*at)->seq < r->seq) at = &(*at)->next;
  r->next = *at;
  *at = r;
}

CompactMessage* Matcher::PopCompact(const Key& key) {
  auto it = compact_.find(key);
  CompactList& list = it->second;
  CompactMessage* r = list.head;
  list.head = r->next;
  if (list.head == nullptr) compact_.erase(it);
  --compact_count_;
  r->next = nullptr;
  return r;
}

void Matcher::TakeAllCompact(std::vector<CompactMessage*>* out) {
  for (auto& [key, list] : compact_) {
    for (CompactMessage* r = list.head; r != nullptr; r = r->next) out->push_back(r);
  }
  compact_.clear();
  compact_count_ = 0;
}

void Matcher::TakeAllUnexpected(std::vector<Car*>* out) {
  for (auto& [key, list] : unexpected_.map()) {
    while (Car* c = list.PopFront()) out->push_back(c);
  }
  unexpected_.map().clear();
  unexpected_.Forget();
  unexpected_count_ = 0;
}

}  // namespace cartage::agent
