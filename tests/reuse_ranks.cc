// The rank side of tests/pid_reuse_test.cc: a copy between processes
// (process_vm_writev and readv take a pid) after the peer died and another
// process was given its pid. Two ranks on shm, run by `cartage run`:
//
// Rank 1 makes a single-copy window over its memory, sends rank 0 a
// rendezvous message (read by rank 0 with process_vm_readv), forks a
// helper and leaves without finalizing. The helper waits until rank 1 is
// reaped, then forks an impostor with rank 1's pid (through
// /proc/sys/kernel/ns_last_pid, which needs root), a copy of rank 1 whose
// window and send buffer hold 'Z'. Rank 0 then puts into rank 1's window,
// gets from it (small and large) and receives the message: each must
// fail, naming rank 1,
// and the impostor's memory must be as it was. Rank 0 prints
// "PASS reuse", or "SKIP reuse: why" where the pid cannot be handed on.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cartage/collectives.h"
#include "cartage/rma.h"
#include "kit/check.h"

using cartage::Comm;
using cartage::Window;
namespace kit = cartage::kit;

namespace {

// Puts and gets of 4 KiB go through the target's memory file, of 16 KiB
// by process_vm_writev and readv.
constexpr std::size_t kWindowBytes = 16384;
constexpr std::size_t kMessageBytes = 1 << 20;  // rendezvous, read with process_vm_readv

// Paths the ranks and the helper meet at, formatted before any fork.
struct Meeting {
  std::string ready, skip, done, intact, overwritten;
  explicit Meeting(const std::string& dir)
      : ready(dir + "/ready"),
        skip(dir + "/skip"),
        done(dir + "/done"),
        intact(dir + "/intact"),
        overwritten(dir + "/overwritten") {}
};

bool Exists(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0;
}

void Touch(const char* path) {
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd >= 0) ::close(fd);
}

// Waits up to `seconds` for one of `a` and `b`; which one, or 0.
int AwaitEither(const char* a, const char* b, int seconds) {
  for (int ms = 0; ms < seconds * 1000; ++ms) {
    if (Exists(a)) return 1;
    if (b != nullptr && Exists(b)) return 2;
    ::usleep(1000);
  }
  return 0;
}

// The impostor: rank 1's memory, rank 1's pid, another process. Its window
// and send buffer now hold 'Z'; it says so, waits for rank 0 to be done,
// and reports whether they still hold only 'Z'.
[[noreturn]] void Impostor(const Meeting& m, char* window, char* message) {
  std::memset(window, 'Z', kWindowBytes);
  std::memset(message, 'Z', kMessageBytes);
  Touch(m.ready.c_str());
  (void)AwaitEither(m.done.c_str(), nullptr, 60);
  bool intact = true;
  for (std::size_t i = 0; i < kWindowBytes; ++i) intact = intact && window[i] == 'Z';
  Touch(intact ? m.intact.c_str() : m.overwritten.c_str());
  ::_exit(0);
}

// The helper: once rank 1 (`pid`) is reaped, forks until a child gets its pid.
[[noreturn]] void Helper(const Meeting& m, pid_t pid, const char* before, char* window, char* message) {
  const int null = ::open("/dev/null", O_RDWR);
  ::dup2(null, 1);  // the launcher waits for nobody's output but the ranks'
  ::dup2(null, 2);
  for (int ms = 0; ::kill(pid, 0) == 0 && ms < 30000; ++ms) ::usleep(1000);
  for (int tries = 0; tries < 200; ++tries) {
    const int fd = ::open("/proc/sys/kernel/ns_last_pid", O_WRONLY);
    if (fd < 0 || ::write(fd, before, std::strlen(before)) < 0) {
      Touch(m.skip.c_str());  // not root, or no such file
      ::_exit(0);
    }
    ::close(fd);
    const pid_t child = ::fork();
    if (child == 0) {
      if (::getpid() == pid) Impostor(m, window, message);
      ::_exit(0);
    }
    if (child == pid) {
      (void)::waitpid(child, nullptr, 0);
      ::_exit(0);
    }
    if (child > 0) (void)::waitpid(child, nullptr, 0);
    ::usleep(1000);  // another process took the pid first
  }
  Touch(m.skip.c_str());
  ::_exit(0);
}

int Reuse(const Comm& w) {
  const int me = w.rank();
  KIT_EXPECT(w.size() == 2, "reuse runs on 2 ranks, not %d", w.size());
  // Where the ranks and the helper meet: made by rank 0, its name sent on.
  char dir[64] = "/tmp/cartage-reuse-XXXXXX";
  if (me == 0) KIT_EXPECT(::mkdtemp(dir) != nullptr, "mkdtemp: %s", std::strerror(errno));
  static const cartage::Datatype kByte = cartage::Datatype::Basic(cartage::datatype::BasicType::kByte);
  KIT_OK(cartage::Bcast(w, dir, sizeof(dir), kByte, 0));
  const Meeting m(dir);
  std::vector<char> own(kWindowBytes, me == 1 ? 'a' : '-');
  auto win = Window::Create(w, own.data(), own.size(), 1);
  KIT_OK(win.status());
  KIT_EXPECT((*win)->single_copy(), "the window over the ranks' memory is not single-copy");
  KIT_OK((*win)->Fence());
  std::vector<char> message(kMessageBytes, me == 1 ? 'b' : '-');
  if (me == 1) {
    cartage::Request sent;  // its RTS goes out; rank 1 leaves before the answer
    KIT_OK(w.Isend(message.data(), message.size(), 0, 7, &sent));
    const pid_t pid = ::getpid();
    const std::string before = absl::StrCat(pid - 1);
    std::fflush(stdout);
    if (::fork() == 0) Helper(m, pid, before.c_str(), own.data(), message.data());
    ::_exit(0);  // gone without finalizing
  }
  const int got = AwaitEither(m.ready.c_str(), m.skip.c_str(), 60);
  KIT_EXPECT(got != 0, "no impostor and no skip within 60 s");
  if (got == 2) {
    std::printf("SKIP reuse: rank 1's pid could not be handed on (writing /proc/sys/kernel/ns_last_pid needs root)\n");
    return 0;
  }
  // The put must not land in the impostor, the get and the receive must not
  // hand its bytes on as rank 1's.
  std::vector<char> data(kWindowBytes, 'y');
  std::vector<char> fetched(kWindowBytes, '-');
  for (const std::size_t bytes : {std::size_t{4096}, kWindowBytes}) {
    const absl::Status put = (*win)->Put(data.data(), bytes, 1, 0);
    KIT_EXPECT(!put.ok() && absl::StrContains(put.message(), "rank 1"), "a put into rank 1's reused pid: %s",
               put.ToString());
    std::printf("rank 0: the put of %zu bytes failed: %s\n", bytes, put.ToString().c_str());
    const absl::Status get = (*win)->Get(fetched.data(), bytes, 1, 0);
    KIT_EXPECT(!get.ok() && absl::StrContains(get.message(), "rank 1"), "a get from rank 1's reused pid: %s",
               get.ToString());
    std::printf("rank 0: the get of %zu bytes failed: %s\n", bytes, get.ToString().c_str());
  }
  const absl::Status recv = w.Recv(message.data(), message.size(), 1, 7);
  KIT_EXPECT(!recv.ok() && absl::StrContains(recv.message(), "rank 1"), "a receive from rank 1's reused pid: %s",
             recv.ToString());
  std::printf("rank 0: the receive failed: %s\n", recv.ToString().c_str());
  Touch(m.done.c_str());
  const int verdict = AwaitEither(m.intact.c_str(), m.overwritten.c_str(), 60);
  KIT_EXPECT(verdict == 1, "the impostor's window was %s", verdict == 2 ? "overwritten" : "never reported");
  for (const std::string& f : {m.ready, m.done, m.intact}) ::unlink(f.c_str());
  ::rmdir(dir);
  std::printf("PASS reuse\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main() {
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "reuse_ranks: %s\n", agent.status().ToString().c_str());
    return 1;
  }
  const Comm w = (*agent)->World();
  kit::t_rank = w.rank();
  return Reuse(w);
}
