// The kit's fault cases: a peer that exits without finalizing, one that
// dies mid-transfer, a VC in the error state. Their ranks exit, so they run
// as processes only.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "cartage/cartage.h"
#include "kit/cases.h"
#include "kit/check.h"

namespace cartage::kit {

void EarlyExit(const Comm& w, Agent&) {
  if (w.rank() == 1) {
    std::fflush(stdout);
    _exit(0);  // gone without finalizing
  }
  if (w.rank() == 0) {
    int v = 0;
    // Prepared while rank 1 lived, started once it is gone: refused at start
    // (a receive would otherwise wait for ever).
    Request persistent;
    KIT_OK(w.RecvInit(&v, sizeof(v), 1, 1, &persistent));
    const auto start = std::chrono::steady_clock::now();
    const absl::Status s = w.Recv(&v, sizeof(v), 1, 0);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    KIT_EXPECT(s.code() == absl::StatusCode::kUnavailable, "receive from a dead rank gave %s", s.ToString());
    KIT_EXPECT(s.message().find("rank 1 exited or finalized") != std::string::npos &&
               s.message().find("from rank 1 (tag 0") != std::string::npos,
           "%s", s.ToString());
    KIT_EXPECT(secs < 5, "took %f s to notice", secs);
    // New operations to it fail at once.
    Request r;
    s.IgnoreError();
    const absl::Status again = w.Isend(&v, sizeof(v), 1, 0, &r);
    KIT_EXPECT(again.code() == absl::StatusCode::kUnavailable, "%s", again.ToString());
    const absl::Status restart = persistent.Start();
    KIT_EXPECT(restart.code() == absl::StatusCode::kUnavailable &&
               restart.message().find("persistent recv from rank 1: rank 1 exited or finalized") != std::string::npos,
           "%s", restart.ToString());
    KIT_EXPECT(!persistent.active(), "a refused start left the request active");
  }
}

// Rank 0 dies while a 256 MiB message streams from it: the receiver gets an
// error completion naming rank 0 within a bounded time, not a hang.
void PeerDies(const Comm& w, Agent&) {
  constexpr std::size_t kBytes = 256u << 20;
  std::vector<unsigned char> buf(kBytes, w.rank() == 0 ? 3 : 0);
  if (w.rank() == 0) {
    Ready(w, 99);
    Request r;
    KIT_OK(w.Isend(buf.data(), kBytes, 1, 1, &r));
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    while (std::chrono::steady_clock::now() < until) (void)r.Test();
    KIT_EXPECT(!r.Test(), "256 MiB left in 2 ms (%s): the transfer was not interrupted", r.Wait().ToString());
    std::fflush(stdout);
    _exit(0);
  }
  if (w.rank() == 1) {
    Request r;
    KIT_OK(w.Irecv(buf.data(), kBytes, 0, 1, &r));
    Ready(w, 99);
    const auto start = std::chrono::steady_clock::now();
    const absl::Status s = r.Wait();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s.ok()) {
      // A single-copy method may finish reading before the process is gone:
      // then every byte must be there.
      KIT_EXPECT(std::all_of(buf.begin(), buf.end(), [](unsigned char c) { return c == 3; }),
             "the receive succeeded with wrong bytes");
    } else {
      KIT_EXPECT(s.code() == absl::StatusCode::kUnavailable, "%s", s.ToString());
      KIT_EXPECT(s.message().find("rank 0") != std::string::npos, "the error does not name the peer: %s", s.ToString());
    }
    KIT_EXPECT(secs < 10, "took %f s to notice", secs);
    std::printf("PASS %s\n", "peerdies");  // rank 0 is gone: the receiver reports
    std::fflush(stdout);
    _exit(0);
  }
}

// Rank 2 exits; ranks 0 and 1 find its VC in the error state: new sends and
// receives to it fail at once with a status naming it, while they still talk
// to each other.
void VcError(const Comm& w, Agent&) {
  if (w.rank() == 2) {
    int v = 0;
    KIT_OK(w.Send(&v, sizeof(v), 0, 1));  // the VC to rank 0 exists (connected) before it goes
    std::fflush(stdout);
    _exit(0);
  }
  int v = 0;
  if (w.rank() == 0) KIT_OK(w.Recv(&v, sizeof(v), 2, 1));
  // Wait until this rank has noticed (a blocked receive fails once it does).
  const absl::Status gone = w.Recv(&v, sizeof(v), 2, 2);
  KIT_EXPECT(gone.code() == absl::StatusCode::kUnavailable && gone.message().find("rank 2") != std::string::npos,
         "receive from the dead rank gave %s", gone.ToString());
  for (int i = 0; i < 3; ++i) {
    Request r;
    const auto start = std::chrono::steady_clock::now();
    const absl::Status s = i % 2 == 0 ? w.Isend(&v, sizeof(v), 2, 3, &r) : w.Irecv(&v, sizeof(v), 2, 3, &r);
    const absl::Status done = s.ok() ? r.Wait() : s;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    KIT_EXPECT(done.code() == absl::StatusCode::kUnavailable && done.message().find("rank 2") != std::string::npos,
           "operation %d to the dead rank gave %s", i, done.ToString());
    KIT_EXPECT(ms < 100, "operation %d to the dead rank took %f ms to fail", i, ms);
  }
  const int peer = 1 - w.rank();
  int got = -1;
  Request rr;
  KIT_OK(w.Irecv(&got, sizeof(got), peer, 4, &rr));
  const int mine = 40 + w.rank();
  KIT_OK(w.Send(&mine, sizeof(mine), peer, 4));
  KIT_OK(rr.Wait());
  KIT_EXPECT(got == 40 + peer, "the healthy pair exchanged %d", got);
}

// With the launcher stopped (it reaps nobody, answers nobody), rank 1 is
// killed and stays an unreaped zombie while rank 2 waits for a message from
// it; the two never talked, so no connection tells rank 2. Its receive must
// still fail within 2 s naming rank 1: every method watches a peer's pid
// from what it learnt at set-up, never asking the stopped launcher.
void StrangerKilled(const Comm& w, Agent&) {
  char token = 0;
  if (w.rank() == 0) {
    const pid_t launcher = ::getppid();
    for (int r : {1, 2}) KIT_OK(w.Recv(&token, 1, r, 1));  // both are past start-up
    KIT_EXPECT(::kill(launcher, SIGSTOP) == 0, "stopping the launcher: %s", std::strerror(errno));
    // Whatever happens, the launcher goes on after 30 s (its --timeout then ends a hang).
    std::thread([launcher] {
      std::this_thread::sleep_for(std::chrono::seconds(30));
      ::kill(launcher, SIGCONT);
    }).detach();
    for (int r : {1, 2}) KIT_OK(w.Send(&token, 1, r, 2));
    KIT_OK(w.Recv(&token, 1, 2, 3));  // rank 2 has its answer
    ::kill(launcher, SIGCONT);
  } else if (w.rank() == 1) {
    KIT_OK(w.Send(&token, 1, 0, 1));
    KIT_OK(w.Recv(&token, 1, 0, 2));
    ::raise(SIGKILL);
  } else if (w.rank() == 2) {
    KIT_OK(w.Send(&token, 1, 0, 1));
    KIT_OK(w.Recv(&token, 1, 0, 2));
    const auto start = std::chrono::steady_clock::now();
    const absl::Status s = w.Recv(&token, 1, 1, 4);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("stranger killed: the receive from rank 1 failed after %.3f s: %s\n", secs, s.ToString().c_str());
    std::fflush(stdout);
    KIT_EXPECT(s.code() == absl::StatusCode::kUnavailable && s.message().find("rank 1 exited") != std::string::npos,
               "%s", s.ToString());
    KIT_EXPECT(secs < 2, "the receive took %.3f s to fail", secs);
    KIT_OK(w.Send(&token, 1, 0, 3));  // the launcher goes on, and stops the job for rank 1's death
  }
}

}  // namespace cartage::kit
