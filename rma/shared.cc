// Shared windows: every rank of the window on one host maps one segment,
// so an origin moves an operation's data itself, with loads and stores
// (rma_op's Copy and Store), and takes a target's lock from a word in the segment
// (rma_access's TakeWord, Sync, DropWord). Nothing is sent and the target's
// agent serves nothing: the target may compute without calling cartage.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include "absl/strings/str_format.h"
#include "base/copy.h"
#include "cartage/collectives.h"
#include "datatype/op.h"
#include "datatype/segment_walk.h"
#include "rma/window_state.h"

namespace cartage::rma {

SharedSegment::~SharedSegment() {
  if (map != nullptr) ::munmap(map, map_bytes);
}

absl::StatusOr<std::unique_ptr<SharedSegment>> MapShared(const Comm& comm, const std::vector<uint64_t>& sizes,
                                                         bool contiguous, uint32_t number) {
  const std::size_t ranks = sizes.size();
  std::vector<std::size_t> offsets(ranks);
  std::size_t total = ranks * sizeof(WordCell);
  for (std::size_t r = 0; r < ranks; ++r) {
    offsets[r] = total;
    total += contiguous ? static_cast<std::size_t>(sizes[r]) : static_cast<std::size_t>((sizes[r] + 63) / 64 * 64);
  }
  // Rank 0 makes the segment and its words before anyone else maps it (a
  // word another rank already took is never reset); the name goes with its
  // errno, if any.
  struct Named {
    char name[120];
    int64_t error;
  };
  static_assert(sizeof(Named) == 128);
  Named named{};
  void* map = MAP_FAILED;
  const auto mapping = [&](int fd) {
    map = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    const int err = map == MAP_FAILED ? errno : 0;
    ::close(fd);
    return err;
  };
  if (comm.rank() == 0) {
    // Under the job's prefix, which its launcher sweeps should a rank die
    // before the name is unlinked.
    const char* job = std::getenv("CARTAGE_JOB_ID");
    const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
    std::snprintf(named.name, sizeof(named.name), "/cartage-%s-w%u-%d-%llx",
                  job != nullptr && std::strlen(job) < 64 ? job : "nojob", number, static_cast<int>(::getpid()),
                  static_cast<unsigned long long>(now));  // NOLINT(runtime/int): %llx
    const int fd = ::shm_open(named.name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) {
      named.error = errno;
    } else if (::ftruncate(fd, static_cast<off_t>(total)) != 0) {
      named.error = errno;
      ::close(fd);
    } else if (const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(total)); err != 0) {
      // Pages /dev/shm cannot hold would fault (SIGBUS) at their first
      // touch: a window too large for it is refused here instead.
      named.error = err;
      ::close(fd);
    } else {
      named.error = mapping(fd);
    }
    if (named.error == 0) {
      for (std::size_t r = 0; r < ranks; ++r) new (static_cast<WordCell*>(map) + r) WordCell();
    } else if (fd >= 0) {
      ::shm_unlink(named.name);
    }
  }
  static const Datatype kByte = Datatype::Basic(datatype::BasicType::kByte);
  CARTAGE_RETURN_IF_ERROR(Bcast(comm, &named, sizeof(named), kByte, 0));
  named.name[sizeof(named.name) - 1] = '\0';
  int64_t error = named.error;
  if (comm.rank() != 0 && error == 0) {
    const int fd = ::shm_open(named.name, O_RDWR | O_CLOEXEC, 0);
    error = fd < 0 ? errno : mapping(fd);
  }
  // Every rank mapped it, or says why not: the name can go.
  int64_t worst = 0;
  static const Datatype kI64 = Datatype::Basic(datatype::BasicType::kInt64);
  const absl::Status agreed = Allreduce(comm, &error, &worst, 1, kI64, datatype::Op(datatype::OpKind::kMax));
  if (comm.rank() == 0 && named.error == 0) ::shm_unlink(named.name);
  auto seg = std::make_unique<SharedSegment>();
  if (map != MAP_FAILED) {
    seg->map = map;
    seg->map_bytes = total;
  }
  CARTAGE_RETURN_IF_ERROR(agreed);
  if (worst != 0) {
    return absl::ResourceExhaustedError(absl::StrFormat("window: mapping its shared segment of %d bytes: %s", total,
                                                        std::strerror(static_cast<int>(worst))));
  }
  seg->cells = static_cast<WordCell*>(map);
  for (std::size_t r = 0; r < ranks; ++r) seg->bases.push_back(static_cast<std::byte*>(map) + offsets[r]);
  return seg;
}

absl::Status WindowState::Waiting(std::chrono::steady_clock::time_point& last_check) const {
  const auto now = std::chrono::steady_clock::now();
  if (now - last_check < std::chrono::milliseconds(20)) return absl::OkStatus();
  last_check = now;
  return engine::GoneMember(comm);
}

// ---- rma_op on a shared window --------------------------------------------------------

bool OpActions::Direct(const OriginOp& op, const RmaSignal&) { return op.win->direct(); }

namespace {

// An accumulate or fetch applied to the target's memory at `at` (the
// caller holds the target's accumulate word): what was there goes to the
// result first, then the operation changes it.
void Apply(const Access& a, absl::Span<const Run> runs, std::byte* at, int64_t bytes) {
  datatype::BasicType basic = datatype::BasicType::kByte;
  a.target_type->homogeneous(&basic);
  const auto size = static_cast<int64_t>(datatype::SizeOf(basic));
  if (Fetches(a.kind)) {
    int64_t p = 0;
    for (const Run& r : runs) {
      datatype::Unpack(at + r.offset, a.result_count, *a.result_type, p, p + r.length, a.result);
      p += r.length;
    }
  }
  if (a.kind == OpKind::kCompareAndSwap) {  // one element
    std::byte* cell = at + runs[0].offset;
    if (std::memcmp(cell, a.compare, static_cast<std::size_t>(bytes)) == 0) {
      std::memcpy(cell, a.origin, static_cast<std::size_t>(bytes));
    }
    return;
  }
  if (a.op == kOpNoOp) return;
  // The origin's data as the packed stream the target layout follows.
  std::vector<std::byte> packed;
  const auto* in = static_cast<const std::byte*>(a.origin);
  if (!a.origin_type->contiguous()) {
    packed.resize(static_cast<std::size_t>(bytes));
    datatype::Pack(a.origin, a.origin_count, *a.origin_type, 0, bytes, packed.data());
    in = packed.data();
  }
  for (const Run& r : runs) {
    if (a.op == kOpReplace) {
      base::CopyMemory(at + r.offset, in, static_cast<std::size_t>(r.length));
    } else {
      datatype::ReduceBasic(static_cast<datatype::OpKind>(a.op), basic, in, at + r.offset, r.length / size);
    }
    in += r.length;
  }
}

// The target's memory an operation on a shared window starts at.
std::byte* TargetAt(const OriginOp& op) {
  const WindowState& w = *op.win;
  const auto t = static_cast<std::size_t>(op.target);
  return w.shared->bases[t] + op.disp * static_cast<uint64_t>(w.units[t]);
}

}  // namespace

bool OpActions::DirectCopy(const OriginOp& op, const RmaSignal&) {
  return op.win->direct() && (op.kind == OpKind::kPut || op.kind == OpKind::kGet);
}

void OpActions::Copy(OriginOp& op, const RmaSignal&, OpEvents&) {
  std::byte* at = TargetAt(op);
  if (op.runs == nullptr) {  // one block on both sides
    if (op.bytes == 0) return;
    if (op.kind == OpKind::kPut) {
      base::CopyMemory(at, op.local, op.bytes);
    } else {
      base::CopyMemory(op.local, at, op.bytes);
    }
    return;
  }
  const Access& a = *op.access;
  int64_t p = 0;  // where each block's data is in the packed stream
  for (const Run& r : *op.runs) {
    if (op.kind == OpKind::kPut) {
      if (a.origin_type->contiguous()) {
        base::CopyMemory(at + r.offset, static_cast<const std::byte*>(a.origin) + p,
                         static_cast<std::size_t>(r.length));
      } else {
        datatype::Pack(a.origin, a.origin_count, *a.origin_type, p, p + r.length, at + r.offset);
      }
    } else if (a.result_type->contiguous()) {
      base::CopyMemory(static_cast<std::byte*>(a.result) + p, at + r.offset, static_cast<std::size_t>(r.length));
    } else {
      datatype::Unpack(at + r.offset, a.result_count, *a.result_type, p, p + r.length, a.result);
    }
    p += r.length;
  }
}

void OpActions::Store(OriginOp& op, const RmaSignal&, OpEvents& events) {
  std::byte* at = TargetAt(op);
  // Every accumulate to a rank's window holds its word: each applies
  // whole, whoever issues it.
  const absl::Status st = op.win->Accumulating(op.target, [&] {
    const auto n = static_cast<int64_t>(op.bytes);
    // (No layout: one block, contiguous on every side; none for no bytes.)
    const Run one[1] = {{0, n}};
    Apply(*op.access, op.runs != nullptr ? absl::Span<const Run>(*op.runs) : absl::Span<const Run>(one, n > 0 ? 1 : 0),
          at, n);
  });
  RaiseMoved(op, st, events);
}

// ---- rma_access on a shared window ----------------------------------------------------

bool AccessActions::Direct(const LockAccess& a, const RmaSignal&) { return a.win->direct(); }

bool TakeLockWord(LockAccess& a) {
  std::atomic<uint64_t>& word = a.win->shared->cells[a.target].lock;
  uint64_t v = word.load(std::memory_order_relaxed);
  if (a.type == kLockExclusive) {
    const uint64_t mine = static_cast<uint64_t>(a.win->comm.rank() + 1) << 32;
    return v == 0 && word.compare_exchange_strong(v, mine, std::memory_order_acquire, std::memory_order_relaxed);
  }
  while ((v >> 32) == 0) {  // no exclusive holder: one more shared one
    if (word.compare_exchange_weak(v, v + 1, std::memory_order_acquire, std::memory_order_relaxed)) return true;
  }
  return false;
}

void AccessActions::TakeWord(LockAccess& a, const RmaSignal&, AccessEvents& events) {
  // With no payload: the lock's caller runs the grant's row in line (DispatchFromThen).
  if (TakeLockWord(a)) events.Raise<AccessMachine>(a, AccessEvent::kGranted);
}

void AccessActions::Sync(LockAccess&, const RmaSignal&, AccessEvents&) {
  MemoryBarrier();
}

void AccessActions::DropWord(LockAccess& a, const RmaSignal&, AccessEvents&) {
  std::atomic<uint64_t>& word = a.win->shared->cells[a.target].lock;
  if (a.type == kLockExclusive) {
    word.store(0, std::memory_order_release);
  } else {
    word.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace cartage::rma
