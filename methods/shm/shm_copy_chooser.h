// Chooses how a large rendezvous message moves between two ranks: one copy
// by the receiver with process_vm_readv (CMA), or the pipelined copy through
// the ring (the sender copies in, the receiver out, both at once). Which is
// faster depends on how quickly the two CPUs hand cache lines over, and on
// some VMs that changes while a job runs (cartage-bench bcast 1 MiB under
// each placement). So the receiver times both ways per peer and takes CMA
// unless the pipelined copy moved a byte clearly faster lately (by kMargin;
// the way in use counts the median of its last five messages), trying the
// other one now and then to notice a change. A wrong turn costs a run of
// messages up to three times slower (cartage-bench pingpong 64 KiB), so
// one or two slow messages never make one.
//
//   CopyChooser& ch = choosers[peer];
//   const CopyChooser::Choice c = ch.Choose();    // for this message
//   ... move it; where c.timed, time it from the decision to the last byte ...
//   ch.Observe(/*cma=*/true, bytes, elapsed_ns);  // moved by CMA
//   ch.ObservePipelined(bytes, cts_ns, now_ns);   // moved pipelined
#ifndef CARTAGE_METHODS_SHM_SHM_COPY_CHOOSER_H_
#define CARTAGE_METHODS_SHM_SHM_COPY_CHOOSER_H_

#include <algorithm>
#include <cstdint>

namespace cartage::methods::shm {

class CopyChooser {
 public:
  static constexpr uint32_t kExplore = 256;      // the other way is tried after this many messages at most...
  static constexpr uint32_t kExploreFar = 4096;  // ...or this many while it takes twice as long or more...
  static constexpr uint32_t kExploreSoon = 16;   // ...and this many right after the choice turned
  static constexpr uint32_t kBurst = 3;          // ...for this many in a row (the last one warm)
  static constexpr uint32_t kKept = 5;           // times the way in use keeps (their median counts)
  // The pipelined copy is taken only where it moves a byte faster than CMA
  // by more than this. Within it CMA is: it copies once, leaves the
  // sender's CPU free, and its end to end time is what the receiver times,
  // where the pipelined copy's is longer than its timing shows (pingpong
  // 4 MiB: the pipelined copy timed within 10 % of CMA, and the pair 9 %
  // slower end to end with it in use half the time).
  static constexpr double kMargin = 0.10;

  // CMA in use is timed on one message in this many: two clock reads a
  // message cost 2 % of a 64 KiB ping-pong. A pipelined message is always
  // timed (a stream of them is timed each from the one before it).
  static constexpr uint32_t kTimeEvery = 8;

  // How the next message moves, and whether to time it (Observe).
  struct Choice {
    bool cma;
    bool timed;
  };
  // The pipelined way until it is timed, then CMA until it is, then the way
  // in use, but now and then kBurst in a row the other way (the first of
  // them pays for cold caches and page tables, as a single try would, which
  // is not what that way costs once in use). The other way is tried
  // kExploreSoon messages after the choice turned, so that a turn made on a
  // few slow messages is undone soon, then at twice the interval each time
  // it loses, up to kExplore, or kExploreFar where it took twice as long or
  // more (pingpong 64 KiB: a pipelined message takes three times a CMA
  // one, and three in 256 cost 3 %). Choose and Observe stay out of line:
  // inlined into the receive path they slow it down, the choice switched
  // off included (cartage-bench bcast 1 MiB, 2 ranks).
  [[gnu::noinline]] Choice Choose() {
    if (times_[kPipelined].n == 0) return {false, true};
    if (times_[kCma].n == 0) return {true, true};
    if (burst_ > 0) {
      --burst_;
      return {!cma_, true};
    }
    if (++decisions_ >= explore_every_) {
      decisions_ = 0;
      burst_ = kBurst - 1;
      return {!cma_, true};
    }
    return {cma_, !cma_ || decisions_ % kTimeEvery == 0};
  }

  // A message of `bytes` moved by CMA (`cma`) or pipelined took `ns`. The
  // way in use keeps its last kKept times and counts their median, so that
  // two slow messages (the sender preempted) do not turn the choice while
  // three do (the vCPUs moved); the other way keeps only its newest time.
  // The choice turns where CmaWins, on the two estimates, says the other way now.
  [[gnu::noinline]] void Observe(bool cma, uint64_t bytes, uint64_t ns) {
    if (bytes == 0) return;
    const bool timed_both = times_[kPipelined].n > 0 && times_[kCma].n > 0;
    Times& t = times_[cma ? kCma : kPipelined];
    if (timed_both && cma != cma_) t = Times();
    t.Add(static_cast<double>(ns) / static_cast<double>(bytes));
    if (times_[kPipelined].n == 0 || times_[kCma].n == 0) return;
    const double pipelined = times_[kPipelined].Estimate();
    const double by_cma = times_[kCma].Estimate();
    const bool cma_wins = CmaWins(pipelined, by_cma);
    if (!timed_both) {  // both timed now, each once and cold: a choice for now, checked again soon
      Turn(cma_wins);
      return;
    }
    if (cma_wins != cma_) {
      Turn(cma_wins);
    } else if (cma != cma_ && burst_ == 0) {  // a burst of the other way ended, and it lost
      const double in_use = cma_ ? by_cma : pipelined;
      const double other = cma_ ? pipelined : by_cma;
      explore_every_ = std::min(2 * explore_every_, other >= 2 * in_use ? kExploreFar : kExplore);
    }
  }

  // A pipelined message whose CTS went at `cts_ns` landed whole at
  // `now_ns`. A sender streams its pipelined messages one after another, so
  // one that waited behind the ones before it (a window of them) is timed
  // from when the one before it ended: the copy's speed, not the queue's
  // length (CMA's copy never waits on one).
  [[gnu::noinline]] void ObservePipelined(uint64_t bytes, uint64_t cts_ns, uint64_t now_ns) {
    const uint64_t from = std::max(cts_ns, pipelined_end_ns_);
    pipelined_end_ns_ = now_ns;
    Observe(/*cma=*/false, bytes, now_ns - from);
  }

  // Nanoseconds a byte, as now estimated (0: never timed).
  double pipelined_ns_per_byte() const { return times_[kPipelined].Estimate(); }
  double cma_ns_per_byte() const { return times_[kCma].Estimate(); }

 private:
  static constexpr int kPipelined = 0;
  static constexpr int kCma = 1;
  // Whether CMA is the way, given each way's estimate (ns a byte): unless
  // the pipelined copy is faster by more than kMargin.
  static bool CmaWins(double pipelined, double cma) { return pipelined * (1.0 + kMargin) >= cma; }
  // Makes `cma` the way in use, and tries the other one again soon.
  void Turn(bool cma) {
    cma_ = cma;
    burst_ = 0;
    decisions_ = 0;
    explore_every_ = kExploreSoon;
  }
  // A way's last kKept times (ns a byte) and their median (the lower of
  // the two middle ones for an even count, the smaller of two).
  struct Times {
    double t[kKept] = {};
    uint32_t n = 0;     // times kept (at most kKept)
    uint32_t next = 0;  // where the next one goes
    void Add(double r) {
      t[next] = r;
      next = (next + 1) % kKept;
      if (n < kKept) ++n;
    }
    double Estimate() const {
      if (n == 0) return 0;
      double sorted[kKept];
      for (uint32_t i = 0; i < n; ++i) {  // insertion sort: at most five
        uint32_t j = i;
        for (; j > 0 && sorted[j - 1] > t[i]; --j) sorted[j] = sorted[j - 1];
        sorted[j] = t[i];
      }
      return sorted[(n - 1) / 2];
    }
  };
  Times times_[2];
  bool cma_ = false;                  // the way in use, once both are timed
  uint32_t decisions_ = 0;            // messages the way in use took since the other was tried
  uint32_t explore_every_ = kExplore;  // ...and how many before it is tried again
  uint32_t burst_ = 0;                // messages still to go the other way
  uint64_t pipelined_end_ns_ = 0;  // when the last timed pipelined message landed
};

}  // namespace cartage::methods::shm

#endif  // CARTAGE_METHODS_SHM_SHM_COPY_CHOOSER_H_
