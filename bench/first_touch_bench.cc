// What the first write to a page of fresh shared memory costs, and what
// faulting it in beforehand buys (the shm segment's rings, ShmSegment::Populate;
// the runtime's buffers for unexpected messages). Each iteration maps 64 KiB
// (16 pages) of a fresh memfd, readies it one of four ways, then times one
// 64 KiB memcpy into it:
//   untouched       nothing: the copy takes every page's fault;
//   populated       madvise(MADV_POPULATE_WRITE) first: the kernel's faults;
//   populated_read  populate, then read a word of each page from user space
//                   (what ShmSegment::Populate does);
//   warm            populate, read, and one copy already made.
// On a bare-metal host or a hardware-virtualised guest, populated and
// populated_read come out alike; under a hypervisor that shadows the guest's
// page tables, a populated page still costs the hypervisor a fault at its
// first access from user space. BM_Ready times the
// readying itself (per 64 KiB).
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <vector>

#include "benchmark/benchmark.h"
#include "methods/shm/shm_segment.h"

namespace {

constexpr std::size_t kBytes = 64 << 10;

enum Ready { kUntouched, kPopulated, kPopulatedRead, kWarm };

// A fresh 64 KiB shared mapping of a memfd (its pages never touched), or
// nullptr (the state is told why).
std::byte* MapFresh(benchmark::State& state) {
  const int fd = ::memfd_create("cartage-first-touch", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, kBytes) != 0) {
    state.SkipWithError("memfd_create or ftruncate failed");
    if (fd >= 0) ::close(fd);
    return nullptr;
  }
  void* p = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    state.SkipWithError("mmap failed");
    return nullptr;
  }
  return static_cast<std::byte*>(p);
}

// Populated_read and warm go through shm's own FaultInPages, so the figures
// are those of the code the rings use.
void ReadyPages(std::byte* p, Ready how, const std::vector<std::byte>& src) {
  if (how == kUntouched) return;
  if (how == kPopulated) {
#ifdef MADV_POPULATE_WRITE
    (void)::madvise(p, kBytes, MADV_POPULATE_WRITE);
#endif
    return;
  }
  (void)cartage::methods::shm::FaultInPages(p, kBytes);
  if (how == kWarm) std::memcpy(p, src.data(), kBytes);
}

using Clock = std::chrono::steady_clock;

void BM_CopyInto(benchmark::State& state, Ready how) {
  std::vector<std::byte> src(kBytes, std::byte{0x5a});
  for (auto _ : state) {
    std::byte* p = MapFresh(state);
    if (p == nullptr) break;
    ReadyPages(p, how, src);
    const Clock::time_point t0 = Clock::now();
    std::memcpy(p, src.data(), kBytes);
    benchmark::ClobberMemory();
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    ::munmap(p, kBytes);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBytes));
}
BENCHMARK_CAPTURE(BM_CopyInto, untouched, kUntouched)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_CopyInto, populated, kPopulated)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_CopyInto, populated_read, kPopulatedRead)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_CopyInto, warm, kWarm)->UseManualTime()->Unit(benchmark::kMicrosecond);

void BM_Ready(benchmark::State& state, Ready how) {
  std::vector<std::byte> src(kBytes, std::byte{0x5a});
  for (auto _ : state) {
    std::byte* p = MapFresh(state);
    if (p == nullptr) break;
    const Clock::time_point t0 = Clock::now();
    ReadyPages(p, how, src);
    benchmark::ClobberMemory();
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - t0).count());
    ::munmap(p, kBytes);
  }
}
BENCHMARK_CAPTURE(BM_Ready, populated, kPopulated)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Ready, populated_read, kPopulatedRead)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
