// Whether another process on this host is gone, never mistaking a later
// process that reuses its pid for it (pids wrap at /proc/sys/kernel/pid_max,
// 32,768 on many machines): the methods watch their peers with it, and the
// copies into and out of another process's memory (process_vm_writev and
// readv take a pid) ask it whether that pid is still the process it was.
#ifndef CARTAGE_BASE_PROCESS_WATCH_H_
#define CARTAGE_BASE_PROCESS_WATCH_H_

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"

namespace cartage::base {

// Whether process `pid`, which this process can see, is gone: no such
// process, or a zombie nobody reaped (its launcher stopped). A pid reused
// since reads as alive: where that matters, ProcessWatch.
inline bool ProcessGone(int pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  // kill(2) succeeds on a zombie; its state in /proc/PID/stat does not.
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat;
  std::getline(in, stat);
  const std::size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 2 >= stat.size()) return stat.empty();
  const char state = stat[close + 2];
  return state == 'Z' || state == 'X';
}

// A pidfd for `pid` (-1 with errno where none can be had), and whether the
// process one names has ended: readable once it has, reaped or not.
inline int OpenPidfd(int pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }
inline bool PidfdEnded(int pidfd) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

// Processes watched through pidfds: readable once the process ended,
// reaped or not, and never the process that reuses its pid. `Watch` opens
// one while the process is known to be the one meant (at set-up, before
// anything says it is there); `Gone` opens one at its first look
// otherwise. Where pidfds are not to be had (an old kernel, out of
// descriptors), ProcessGone.
class ProcessWatch {
 public:
  ProcessWatch() = default;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;
  ~ProcessWatch() {
    for (const auto& [pid, fd] : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }

  // Starts watching `pid` now (no-op where it is watched already).
  void Watch(int pid) {
    if (pid > 0 && !fds_.contains(pid)) (void)Open(pid);
  }

  bool Gone(int pid) {
    if (pid <= 0) return false;
    auto it = fds_.find(pid);
    if (it == fds_.end()) it = Open(pid);
    if (it->second == kEnded) return true;
    if (it->second == kNoFd) return ProcessGone(pid);
    return PidfdEnded(it->second);
  }

 private:
  static constexpr int kNoFd = -1;   // no pidfd to be had: ProcessGone
  static constexpr int kEnded = -2;  // gone at the first look: whatever has the pid later is another

  absl::flat_hash_map<int, int>::iterator Open(int pid) {
    const int fd = OpenPidfd(pid);
    return fds_.emplace(pid, fd >= 0 ? fd : errno == ESRCH ? kEnded : kNoFd).first;
  }

  absl::flat_hash_map<int, int> fds_;  // pid -> pidfd, kNoFd or kEnded
};

// Another process's memory through /proc/PID/mem, bound when opened to
// that process's address space: once the process has exited, a read or a
// write moves nothing (0 bytes), never reaching whoever has the pid now.
// For a few KiB it is also faster than process_vm_writev and readv (one
// page through the kernel against pinning the pages), which need a check
// of the process's life beside them.
class ProcessMemory {
 public:
  ProcessMemory() = default;
  explicit ProcessMemory(int pid) : fd_(::open(absl::StrCat("/proc/", pid, "/mem").c_str(), O_RDWR | O_CLOEXEC)) {}
  ProcessMemory(ProcessMemory&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  ProcessMemory& operator=(ProcessMemory&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ProcessMemory(const ProcessMemory&) = delete;
  ProcessMemory& operator=(const ProcessMemory&) = delete;
  ~ProcessMemory() {
    if (fd_ >= 0) ::close(fd_);
  }

  bool open() const { return fd_ >= 0; }

  // Moves `n` bytes between `local` and the process's `address`, on from
  // where a short move stopped: n, 0 where the process is gone, or -1
  // with errno.
  int64_t Move(bool write, std::byte* local, std::size_t n, uintptr_t address) const {
    std::size_t done = 0;
    while (done < n) {
      const auto at = static_cast<off_t>(address + done);
      const ssize_t got = write ? ::pwrite(fd_, local + done, n - done, at) : ::pread(fd_, local + done, n - done, at);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return got;
      done += static_cast<std::size_t>(got);
    }
    return static_cast<int64_t>(done);
  }

 private:
  int fd_ = -1;
};

// One process, as a pidfd and its memory file, opened once in this process
// and shared by whoever holds it (every window over that process's
// memory: a program with many windows and ranks would run out of file
// descriptors with a pair a window). Open it while `pid` is known to be
// the process meant.
class ProcessHandle {
 public:
  explicit ProcessHandle(int pid)
      : pid_(pid), pidfd_(OpenPidfd(pid)), memory_(pid) {}
  ProcessHandle(const ProcessHandle&) = delete;
  ProcessHandle& operator=(const ProcessHandle&) = delete;
  ~ProcessHandle() {
    if (pidfd_ >= 0) ::close(pidfd_);
  }

  int pid() const { return pid_; }
  const ProcessMemory& memory() const { return memory_; }
  bool Gone() const { return pidfd_ < 0 ? ProcessGone(pid_) : PidfdEnded(pidfd_); }

 private:
  int pid_;
  int pidfd_;
  ProcessMemory memory_;
};

// The handle of `pid`: the one already open where its process still lives,
// else a new one.
inline std::shared_ptr<const ProcessHandle> OpenProcess(int pid) {
  static std::mutex mu;
  static auto* open = new absl::flat_hash_map<int, std::weak_ptr<const ProcessHandle>>();
  std::lock_guard<std::mutex> lock(mu);
  std::weak_ptr<const ProcessHandle>& slot = (*open)[pid];
  std::shared_ptr<const ProcessHandle> h = slot.lock();
  if (h == nullptr || h->Gone()) {
    h = std::make_shared<const ProcessHandle>(pid);
    slot = h;
  }
  return h;
}

}  // namespace cartage::base

#endif  // CARTAGE_BASE_PROCESS_WATCH_H_
