// Chooses how a large rendezvous message moves between two ranks: one copy
// by the receiver with process_vm_readv (CMA), or the pipelined copy through
// the ring (the sender copies in, the receiver out, both at once). Which is
// faster depends on how quickly the two CPUs hand cache lines over, and on
// some VMs that changes while a job runs (cartage-bench bcast 1 MiB under
// each placement). So the receiver times both ways per peer and takes the
// one that moved a byte faster lately (the median of its last three
// messages), trying the other one now and then to notice a change.
//
//   CopyChooser& ch = choosers[peer];
//   const bool cma = ch.UseCma();          // for this message
//   ... move it, timing from the decision to the last byte ...
//   ch.Observe(/*cma=*/true, bytes, elapsed_ns);  // moved by CMA
//   ch.ObservePipelined(bytes, cts_ns, now_ns);   // moved pipelined
#ifndef CARTAGE_METHODS_SHM_SHM_COPY_CHOOSER_H_
#define CARTAGE_METHODS_SHM_SHM_COPY_CHOOSER_H_

#include <algorithm>
#include <cstdint>

namespace cartage::methods::shm {

class CopyChooser {
 public:
  static constexpr uint32_t kExplore = 256;  // every this many messages, the other way...
  static constexpr uint32_t kBurst = 3;      // ...for this many in a row (the last one warm)

  // Whether the next message should go by CMA: the pipelined way until it
  // is timed, then CMA until it is, then the faster of the two, but every
  // kExplore messages kBurst in a row the other way (the first of them pays
  // for cold caches and page tables, as a single try would, which is not
  // what that way costs once in use). Both calls stay out of line: inlined
  // into the receive path they slow it down, the choice switched off
  // included (cartage-bench bcast 1 MiB, 2 ranks).
  [[gnu::noinline]] bool UseCma() {
    if (times_[kPipelined].n == 0) return false;
    if (times_[kCma].n == 0) return true;
    if (burst_ > 0) {
      --burst_;
      return burst_cma_;
    }
    if (++decisions_ % kExplore != 0) return CmaFaster();
    burst_ = kBurst - 1;
    burst_cma_ = !CmaFaster();
    return burst_cma_;
  }

  // A message of `bytes` moved by CMA (`cma`) or pipelined took `ns`. The
  // way in use keeps its last three times and counts their median, so that
  // one slow message (the sender preempted) does not turn the choice while
  // two do (the vCPUs moved); the other way keeps only its newest time.
  [[gnu::noinline]] void Observe(bool cma, uint64_t bytes, uint64_t ns) {
    if (bytes == 0) return;
    const bool in_use = times_[kPipelined].n > 0 && times_[kCma].n > 0 && cma == CmaFaster();
    Times& t = times_[cma ? kCma : kPipelined];
    if (!in_use) t = Times();
    t.Add(static_cast<double>(ns) / static_cast<double>(bytes));
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
  // The way preferred once both are timed (a tie keeps the pipelined copy).
  bool CmaFaster() const { return times_[kCma].Estimate() < times_[kPipelined].Estimate(); }
  // A way's last three times (ns a byte): their median, the smaller of two,
  // or the one.
  struct Times {
    double t[3] = {0, 0, 0};
    uint32_t n = 0;     // times kept (at most 3)
    uint32_t next = 0;  // where the next one goes
    void Add(double r) {
      t[next] = r;
      next = (next + 1) % 3;
      if (n < 3) ++n;
    }
    double Estimate() const {
      if (n == 0) return 0;
      if (n == 1) return t[0];
      if (n == 2) return std::min(t[0], t[1]);
      return std::max(std::min(t[0], t[1]), std::min(std::max(t[0], t[1]), t[2]));
    }
  };
  Times times_[2];
  uint32_t decisions_ = 0;
  uint32_t burst_ = 0;       // messages still to go the other way
  bool burst_cma_ = false;   // which way that is
  uint64_t pipelined_end_ns_ = 0;  // when the last timed pipelined message landed
};

}  // namespace cartage::methods::shm

#endif  // CARTAGE_METHODS_SHM_SHM_COPY_CHOOSER_H_
