#include "methods/shm/shm_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/check.h"

namespace cartage::methods::shm {
namespace {

constexpr uint64_t kMagic = 0x6361727461676531ull;  // "cartage1"

struct Header {
  uint64_t magic;
  uint64_t bytes;
  uint64_t ring_bytes;
  int32_t ranks;
  int32_t reserved;
};

constexpr std::size_t RoundUp(std::size_t n) { return (n + kLine - 1) / kLine * kLine; }

// A word in this process whose address and value peers read to check CMA.
// Atomic: ranks run as threads of one process (tests) each set it, alike.
std::atomic<uint64_t> g_probe_word{0};

}  // namespace

std::string ShmSegment::NamePrefix(absl::string_view job_id) {
  return absl::StrCat("cartage-", job_id, "-");
}

RankBlock& ShmSegment::BlockAt(int i) {
  auto* first = reinterpret_cast<RankBlock*>(static_cast<std::byte*>(base_) + RoundUp(sizeof(Header)));
  return first[i];
}

RingShared* ShmSegment::RingAt(int from, int to) {
  std::byte* rings = static_cast<std::byte*>(base_) + RoundUp(sizeof(Header)) +
                     sizeof(RankBlock) * static_cast<std::size_t>(ranks_);
  return reinterpret_cast<RingShared*>(rings + ring_stride_ * static_cast<std::size_t>(from * ranks_ + to));
}

RingShared* ShmSegment::ring(int from, int to) {
  return RingAt(local_of_[static_cast<std::size_t>(from)], local_of_[static_cast<std::size_t>(to)]);
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Create(Exchange& ex, std::size_t ring_bytes,
                                                            const std::vector<int>& host_ranks) {
  if (ring_bytes < 4096 || (ring_bytes & (ring_bytes - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shm: ring size %d is not a power of two >= 4096", ring_bytes));
  }
  auto seg = std::unique_ptr<ShmSegment>(new ShmSegment());
  seg->local_of_.assign(static_cast<std::size_t>(ex.size()), -1);
  for (std::size_t i = 0; i < host_ranks.size(); ++i) {
    const int r = host_ranks[i];
    if (r < 0 || r >= ex.size() || seg->local_of_[static_cast<std::size_t>(r)] >= 0 ||
        (i > 0 && r < host_ranks[i - 1])) {
      return absl::InvalidArgumentError(absl::StrFormat("shm: the launcher's host ranks are not increasing ranks "
                                                        "of a job of %d (rank %d at %d)", ex.size(), r, i));
    }
    seg->local_of_[static_cast<std::size_t>(r)] = static_cast<int>(i);
  }
  if (!seg->Holds(ex.rank())) {
    return absl::InvalidArgumentError(
        absl::StrFormat("shm: the launcher's host ranks leave rank %d itself out", ex.rank()));
  }
  // One segment a host, made by its lowest rank; every rank of the job
  // fences alike, whatever its host.
  const int m = static_cast<int>(host_ranks.size());
  const int me = seg->local_of_[static_cast<std::size_t>(ex.rank())];
  const int leader = host_ranks.front();
  const std::string key = absl::StrCat("shm.segment.", leader);
  seg->ranks_ = m;
  seg->ring_stride_ = RingShared::Footprint(ring_bytes);
  seg->bytes_ = RoundUp(sizeof(Header)) + sizeof(RankBlock) * static_cast<std::size_t>(m) +
                seg->ring_stride_ * static_cast<std::size_t>(m) * static_cast<std::size_t>(m);
  int fd = -1;
  if (me == 0) {
    std::random_device rd;
    seg->name_ = absl::StrFormat("/%s%08x%08x", NamePrefix(ex.job_id()), rd(), rd());
    fd = ::shm_open(seg->name_.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(seg->bytes_)) != 0) {
      const std::string why = std::strerror(errno);
      if (fd >= 0) {
        ::close(fd);
        ::shm_unlink(seg->name_.c_str());
      }
      return absl::ResourceExhaustedError(absl::StrFormat(
          "shm: cannot create a %d-byte segment %s: %s", seg->bytes_, seg->name_, why));
    }
    CARTAGE_RETURN_IF_ERROR(ex.Put(key, seg->name_));
  }
  CARTAGE_RETURN_IF_ERROR(ex.Fence());
  if (me != 0) {
    CARTAGE_ASSIGN_OR_RETURN(seg->name_, ex.GetFrom(leader, key));
    fd = ::shm_open(seg->name_.c_str(), O_RDWR | O_CLOEXEC, 0);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0 || static_cast<std::size_t>(st.st_size) != seg->bytes_) {
      const std::string why = fd < 0 ? std::strerror(errno) : "size mismatch";
      if (fd >= 0) ::close(fd);
      return absl::UnavailableError(absl::StrFormat("shm: rank %d cannot attach %s (made by rank %d): %s",
                                                    ex.rank(), seg->name_, leader, why));
    }
  }
  seg->base_ = ::mmap(nullptr, seg->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (seg->base_ == MAP_FAILED) {
    seg->base_ = nullptr;
    return absl::ResourceExhaustedError(absl::StrFormat("shm: mmap of %d bytes: %s", seg->bytes_,
                                                        std::strerror(errno)));
  }
  seg->block_of_.assign(static_cast<std::size_t>(ex.size()), nullptr);
  for (int r : host_ranks) seg->block_of_[static_cast<std::size_t>(r)] = &seg->BlockAt(seg->local_of_[static_cast<std::size_t>(r)]);
  auto* header = static_cast<Header*>(seg->base_);
  if (me == 0) {
    *header = {kMagic, seg->bytes_, ring_bytes, m, 0};
    for (int i = 0; i < m; ++i) new (&seg->BlockAt(i)) RankBlock();
    for (int from = 0; from < m; ++from) {
      for (int to = 0; to < m; ++to) RingShared::Init(seg->RingAt(from, to), ring_bytes, /*zeroed=*/true);
    }
  }
  CARTAGE_RETURN_IF_ERROR(ex.Fence());  // each host's lowest rank has laid it out
  if (header->magic != kMagic || header->bytes != seg->bytes_ || header->ranks != m) {
    return absl::DataLossError(absl::StrFormat("shm: segment %s has an unexpected layout", seg->name_));
  }
  // The rings this rank writes lie end to end (RingAt(me, 0..m-1)); those it
  // reads, one a row.
  CARTAGE_RETURN_IF_ERROR(
      seg->Populate(seg->RingAt(me, 0), static_cast<std::size_t>(m) * seg->ring_stride_, ex.rank()));
  for (int i = 0; i < m; ++i) {
    if (i != me) CARTAGE_RETURN_IF_ERROR(seg->Populate(seg->RingAt(i, me), seg->ring_stride_, ex.rank()));
  }
  const uint64_t probe = 0x5eed0000ull + static_cast<uint64_t>(::getpid());
  g_probe_word.store(probe, std::memory_order_relaxed);
  RankBlock& mine = seg->BlockAt(me);
  mine.probe_address = reinterpret_cast<uint64_t>(&g_probe_word);
  mine.probe_value = probe;
  mine.cpu.store(-1, std::memory_order_relaxed);
  pthread_mutexattr_t robust;
  pthread_mutexattr_init(&robust);
  pthread_mutexattr_setpshared(&robust, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&robust, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(&mine.life, &robust);
  pthread_mutexattr_destroy(&robust);
  if (pthread_mutex_lock(&mine.life) == 0) seg->mine_ = &mine;
  mine.pid.store(::getpid(), std::memory_order_release);
  CARTAGE_RETURN_IF_ERROR(ex.Fence());  // everyone attached and filled in its block
  if (me == 0) ::shm_unlink(seg->name_.c_str());
  return seg;
}

// A fresh segment's pages fault in as records first reach them. Where ranks
// outnumber CPUs a rank that takes those faults mid-collective keeps its
// peers waiting for it (bench/first_touch_bench), so each rank faults in the
// rings it writes and reads as it attaches. A /dev/shm too small for them
// fails here, with a message, rather than with a SIGBUS at the first record
// that reaches a page it cannot have. Before Linux 5.14 (no
// MADV_POPULATE_WRITE, EINVAL) the reads below fault them in.
//
// Then it reads a word of every page from user space. Under a hypervisor
// that shadows the guest's page tables, a page the kernel has mapped still
// costs the hypervisor a fault of its own at its first access from user
// space (bench/first_touch_bench); elsewhere the reads cost a TLB walk a
// page. One read is
// enough: the hypervisor's entry follows the kernel's, writable and dirty
// after the populate. Reading is safe while peers write the rings already.
// (FaultInPages does both; Populate names the rank and the segment.)
absl::Status FaultInPages(const void* p, std::size_t bytes) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<uintptr_t>(p);
  const uintptr_t begin = first / page * page;
  const uintptr_t end = (first + bytes + page - 1) / page * page;
#ifdef MADV_POPULATE_WRITE
  if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) != 0 &&
      (errno == EFAULT || errno == ENOMEM)) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("cannot fault in %d bytes of pages: %s", end - begin, std::strerror(errno)));
  }
#endif
  for (uintptr_t a = begin; a < end; a += page) {
    (void)__atomic_load_n(reinterpret_cast<const uint64_t*>(a), __ATOMIC_RELAXED);
  }
  return absl::OkStatus();
}

absl::Status ShmSegment::Populate(const RingShared* rings, std::size_t bytes, int rank) {
  const absl::Status st = FaultInPages(rings, bytes);
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrFormat("shm: rank %d cannot have its rings in segment %s (is /dev/shm "
                                                 "full?): %s",
                                                 rank, name_, st.message()));
}

ShmSegment::~ShmSegment() {
  // The held mutex is on its thread's robust list, which glibc and the
  // kernel walk: unmapped under it, they would read freed memory. Released
  // from another thread it cannot be, and the mapping stays.
  if (mine_ != nullptr && pthread_mutex_unlock(&mine_->life) != 0) return;
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

}  // namespace cartage::methods::shm
