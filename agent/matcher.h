// Matching of receives and incoming messages (seed 002,
// docs/architecture.md), behind one API so the structures can change freely:
//   - posted receives from one source for one tag, bucketed by (context,
//     source, tag), FIFO within a bucket, so that a long posted queue costs
//     one hash lookup per arrival, not a walk (bench/compare's match_posted);
//   - posted receives from one source for any tag, a queue per source rank;
//   - ANY_SOURCE receives for one tag, bucketed by (context, tag), and one
//     queue of ANY_SOURCE receives for any tag (match_posted_any);
//   - one unexpected store for messages no receive matched yet, bucketed by
//     (context, source, tag) and ordered by arrival; as for posted receives,
//     emptied buckets are kept (a stream of messages reuses one) and swept
//     once they clearly outnumber the messages;
//   - in front of each store, the bucket last found for each source rank,
//     so that a source sending one tag over and over (a ping-pong, each
//     peer of a collective run again) is matched without hashing.
// Posted receives carry a stamp from a counter that advances only when a
// wildcard receive is posted; an incoming message takes the earlier of the
// candidates, and a tie goes to the wildcard; between the two kinds of
// receive from one source, a 64-bit posting sequence decides. The 32-bit
// counter wraps:
// stamps compare as serial numbers, which holds while fewer than 2^31
// wildcard receives are posted during one receive's lifetime.
//
// A small eager message may wait without its CAR, as a CompactMessage in a
// store of its own (bucketed alike, ordered by the same arrival counter):
// every lookup of the unexpected messages takes the older of the two.
//
//   Car* unexpected = matcher.PostReceive(recv);      // nullptr: now posted
//   Car* recv = matcher.MatchIncoming(envelope);      // nullptr: keep it unexpected
//   matcher.AddUnexpected(unexpected_car);
#ifndef CARTAGE_AGENT_MATCHER_H_
#define CARTAGE_AGENT_MATCHER_H_

#include <array>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "car/car_list.h"
#include "car/car.h"

namespace cartage::agent {

// A small eager message that waits without a CAR (car_unexpected's
// compacted): its envelope, size and bytes, which follow it in the same
// allocation. A new CAR is made from it when a receive matches it.
struct CompactMessage {
  CompactMessage* next = nullptr;
  uint64_t seq = 0;  // arrival order, shared with the unexpected CARs
  car::Envelope envelope;
  uint32_t bytes = 0;
  uint32_t proto = 0;
  std::byte* payload() { return reinterpret_cast<std::byte*>(this + 1); }
  const std::byte* payload() const { return reinterpret_cast<const std::byte*>(this + 1); }
};

class Matcher {
 public:
  // `ranks`: how many sources exist; `first_stamp` lets tests start near the wrap.
  explicit Matcher(int ranks, uint32_t first_stamp = 0);

  // Receive side of find-or-allocate: the oldest unexpected message `recv`
  // matches (removed from the store), or nullptr after queueing `recv` as
  // posted. With `compact`, the compact store is looked at too: where its
  // message is the oldest, nullptr is returned with *compact set to it (taken
  // out; `recv` is not posted).
  car::Car* PostReceive(car::Car* recv, CompactMessage** compact = nullptr);

  // Takes a posted receive back (cancel); false if it is not queued.
  bool RemovePosted(car::Car* recv);

  // Incoming side of find-or-allocate: the posted receive that `envelope`
  // (context, source rank, tag) matches, removed from its queue; or nullptr.
  car::Car* MatchIncoming(const car::Envelope& envelope);

  // Stores an unexpected message (its envelope: context, source rank, tag).
  void AddUnexpected(car::Car* message);

  // The oldest unexpected message `pattern` (wildcards allowed) matches, left
  // in the store (probe).
  car::Car* PeekUnexpected(const car::Envelope& pattern) const;
  // The same among the compact messages.
  const CompactMessage* PeekCompact(const car::Envelope& pattern) const;

  // Replaces each unexpected CAR `make` gives a record for by that record,
  // in its place in arrival order; returns those CARs, out of the store,
  // for the caller to release.
  template <class Make>
  std::vector<car::Car*> Compact(Make make);
  // Takes every compact message out (finalize).
  void TakeAllCompact(std::vector<CompactMessage*>* out);
  std::size_t compact() const { return compact_count_; }

  // Takes every posted receive and unexpected message from `source` out
  // (a dead peer); wildcard receives stay.
  void TakeAllFrom(int source, std::vector<car::Car*>* posted, std::vector<car::Car*>* unexpected);

  // Takes every unexpected message out (finalize: nobody will receive them).
  void TakeAllUnexpected(std::vector<car::Car*>* out);

  std::size_t posted() const { return posted_count_; }
  std::size_t unexpected() const { return unexpected_count_; }
  // Buckets in the unexpected and posted stores, emptied ones included (tests
  // watch the sweep).
  std::size_t unexpected_buckets() const { return unexpected_.map().size(); }
  std::size_t posted_buckets() const { return posted_.map().size(); }

  // Serial-number comparison of stamps: a before b.
  static bool Before(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) < 0; }

 private:
  struct Key {
    uint32_t context;
    int32_t source;
    int32_t tag;
    bool operator==(const Key&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.context, k.source, k.tag);
    }
  };
  static bool Matches(const car::Envelope& want, const car::Envelope& got);
  // The oldest message in `map` (one list per key; `front(list)` its oldest,
  // or nullptr) that `pattern` matches, left in place: the unexpected CARs'
  // store and the compact one alike.
  template <class Map, class Front>
  auto OldestIn(const Map& map, const car::Envelope& pattern, Front front) const;

  // The oldest posted receive from envelope.rank that the envelope matches
  // (nullptr if none), and the list it is in.
  car::Car* OldestSpecific(const car::Envelope& envelope, car::CarList** list);

  // A bucket map (one bucket per key), and in front of it the two buckets
  // last found for each source (a two-way cache of 16 entries, by source
  // rank, inside the matcher). A message from the same source and tag as one
  // of the last two (a ping-pong, the same with a collective between two
  // messages, a schedule run again, each source of an alltoall up to 8
  // ranks) then costs no hashing.
  // Every insert of a new key and every erase may move the buckets, so it
  // forgets every entry.
  class Buckets {
   public:
    using Map = absl::flat_hash_map<Key, car::CarList>;
    // The bucket of `key`, made if missing.
    car::CarList& Get(const Key& key) {
      car::CarList* list = Recent(key);
      return list != nullptr ? *list : Make(key);
    }
    // The bucket of `key`, or nullptr.
    car::CarList* Find(const Key& key) {
      car::CarList* list = Recent(key);
      return list != nullptr ? list : LookUp(key);
    }
    // Drops the emptied buckets once they clearly outnumber `live` entries
    // (receives or messages) and there are over 1,024 of them.
    void Sweep(std::size_t live) {
      if (map_.size() > 1024 && map_.size() > 4 * live) DropEmpty();
    }
    // The map, for walks; Forget() after erasing from it.
    Map& map() { return map_; }
    const Map& map() const { return map_; }
    void Forget() { recent_.fill(Entry{}); }

   private:
    static constexpr std::size_t kSets = 8;  // by source rank; two entries each, the newer first
    struct Entry {
      Key key{};
      car::CarList* list = nullptr;  // nullptr: empty
    };
    car::CarList* Recent(const Key& key) const {
      const Entry* set = &recent_[2 * (static_cast<std::size_t>(key.source) % kSets)];
      if (set[0].key == key) return set[0].list;
      return set[1].key == key ? set[1].list : nullptr;
    }
    void Remember(const Key& key, car::CarList* list) {
      Entry* set = &recent_[2 * (static_cast<std::size_t>(key.source) % kSets)];
      if (!(set[0].key == key)) set[1] = set[0];
      set[0] = {key, list};
    }
    car::CarList& Make(const Key& key);
    car::CarList* LookUp(const Key& key);
    void DropEmpty();

    Map map_;  // emptied buckets are kept (a stream of messages reuses one) until swept
    std::array<Entry, 2 * kSets> recent_{};
  };

  Buckets posted_;  // one source, one tag
  std::vector<car::CarList> posted_any_tag_;       // one source, any tag: by source rank (one per rank)
  // Any source: one tag by (context, tag), so an arrival finds its oldest
  // with one lookup however many wait; any tag in one list.
  Buckets posted_any_source_;
  std::size_t any_source_count_ = 0;
  car::CarList wildcard_;
  std::size_t posted_count_ = 0;
  uint64_t posts_ = 0;                             // posting sequence (CAR link.seq of a receive)
  uint32_t counter_;
  Buckets unexpected_;
  uint64_t arrivals_ = 0;
  std::size_t unexpected_count_ = 0;
  // The compact store: one list per key, oldest first (its tail kept for
  // appends); an emptied list is erased.
  struct CompactList {
    CompactMessage* head = nullptr;
    CompactMessage* tail = nullptr;
  };
  void InsertCompact(CompactMessage* r);
  CompactMessage* PopCompact(const Key& key);
  absl::flat_hash_map<Key, CompactList> compact_;
  std::size_t compact_count_ = 0;
};

template <class Make>
std::vector<car::Car*> Matcher::Compact(Make make) {
  std::vector<car::Car*> gone;
  for (auto& [key, list] : unexpected_.map()) {
    for (car::Car* c = list.front(); c != nullptr;) {
      car::Car* next = c->link.next;
      if (CompactMessage* r = make(*c)) {
        r->seq = c->link.seq;
        list.Unlink(c);
        --unexpected_count_;
        InsertCompact(r);
        gone.push_back(c);
      }
      c = next;
    }
  }
  return gone;
}

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_MATCHER_H_
