// Chooses how a large rendezvous message moves between two ranks: one copy
// by the receiver with process_vm_readv (CMA), or the pipelined copy through
// the ring (the sender copies in, the receiver out, both at once). Which is
// faster depends on how quickly the two CPUs hand cache lines over, and on
// these VMs that changes while a job runs (bench/RESULTS.md: a 1 MiB bcast
// takes 52-63 µs pipelined against 97-131 µs by CMA where a hand-off takes
// 50-150 ns, and 131-134 µs pipelined against 103-107 µs by CMA where it
// takes 500-800 ns). So the receiver times both ways per peer and takes the
// one that moved a byte faster lately, trying the other one message in
// kExplore to notice a change.
//
//   CopyChooser& ch = choosers[peer];
//   const bool cma = ch.UseCma();          // for this message
//   ... move it, timing from the decision to the last byte ...
//   ch.Observe(cma, bytes, elapsed_ns);
#ifndef CARTAGE_METHODS_SHM_COPY_CHOOSER_H_
#define CARTAGE_METHODS_SHM_COPY_CHOOSER_H_

#include <cstdint>

namespace cartage::methods::shm {

class CopyChooser {
 public:
  static constexpr uint32_t kExplore = 128;  // one message in this many goes the other way

  // Whether the next message should go by CMA: the pipelined way until it
  // is timed, then CMA until it is, then the faster of the two (the other one
  // message in kExplore).
  bool UseCma() {
    if (ns_per_byte_[kPipelined] == 0) return false;
    if (ns_per_byte_[kCma] == 0) return true;
    const bool cma_faster = ns_per_byte_[kCma] < ns_per_byte_[kPipelined];
    return ++decisions_ % kExplore == 0 ? !cma_faster : cma_faster;
  }

  // A message of `bytes` moved by CMA (`cma`) or pipelined took `ns`. The
  // way in use is timed every message and averaged (half the weight to the
  // newest); the other one is timed once in kExplore messages, so its newest
  // time replaces what it had.
  void Observe(bool cma, uint64_t bytes, uint64_t ns) {
    if (bytes == 0) return;
    const double rate = static_cast<double>(ns == 0 ? 1 : ns) / static_cast<double>(bytes);
    const bool both = ns_per_byte_[kCma] != 0 && ns_per_byte_[kPipelined] != 0;
    const bool in_use = both && cma == (ns_per_byte_[kCma] < ns_per_byte_[kPipelined]);
    double& r = ns_per_byte_[cma ? kCma : kPipelined];
    r = in_use ? (r + rate) / 2 : rate;
  }

  // Nanoseconds a byte, as last estimated (0: never timed); for tests and
  // `cartage info`-style reports.
  double pipelined_ns_per_byte() const { return ns_per_byte_[kPipelined]; }
  double cma_ns_per_byte() const { return ns_per_byte_[kCma]; }

 private:
  static constexpr int kPipelined = 0;
  static constexpr int kCma = 1;
  double ns_per_byte_[2] = {0, 0};
  uint32_t decisions_ = 0;
};

}  // namespace cartage::methods::shm

#endif  // CARTAGE_METHODS_SHM_COPY_CHOOSER_H_
