// The kit's load cases: 10k operations outstanding, and resource
// exhaustion that must queue rather than fail.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
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

// 10k operations outstanding at once in each direction (rank r sends to
// r + 1 and receives from r - 1; one rank talks to itself), mixed sizes with
// every 100th a rendezvous message; every payload checked.
void Outstanding(const Comm& w, Agent&) {
  constexpr int kN = 10000;
  const int to = (w.rank() + 1) % w.size();
  const int from = (w.rank() + w.size() - 1) % w.size();
  auto size_of = [](int i) -> std::size_t { return i % 100 == 99 ? 100000 : (i % 2 == 0 ? 8 : 1000); };
  std::vector<std::vector<unsigned char>> in(kN), out(kN);
  std::vector<Request> rr(kN), sr(kN);
  for (int i = 0; i < kN; ++i) {
    in[static_cast<std::size_t>(i)].assign(size_of(i), 0);
    KIT_OK(w.Irecv(in[static_cast<std::size_t>(i)].data(), size_of(i), from, i % 7, &rr[static_cast<std::size_t>(i)]));
  }
  for (int i = 0; i < kN; ++i) {
    out[static_cast<std::size_t>(i)].resize(size_of(i));
    Fill(out[static_cast<std::size_t>(i)], static_cast<uint64_t>(w.rank() * kN + i));
    KIT_OK(w.Isend(out[static_cast<std::size_t>(i)].data(), size_of(i), to, i % 7, &sr[static_cast<std::size_t>(i)]));
  }
  std::vector<Request*> all;
  for (auto& r : rr) all.push_back(&r);
  for (auto& r : sr) all.push_back(&r);
  KIT_OK(WaitAll(absl::MakeConstSpan(all)));
  for (int i = 0; i < kN; ++i) {
    std::vector<unsigned char> want(size_of(i));
    Fill(want, static_cast<uint64_t>(from * kN + i));
    KIT_EXPECT(in[static_cast<std::size_t>(i)] == want, "operation %d of %d bytes from rank %d differs", i, size_of(i), from);
  }
}

// The receiver is away while the sender posts 128 MiB of eager messages and
// 64 rendezvous ones: the method's buffers and the wire fill up; every send
// must queue and complete later, never fail, and every byte arrive in order.
void Exhaustion(const Comm& w, Agent&) {
  constexpr int kEager = 2048, kRendezvous = 64;
  constexpr std::size_t kEagerBytes = 4096, kRendezvousBytes = 1 << 20;
  if (w.rank() == 0) {
    std::vector<std::vector<unsigned char>> out(kEager + kRendezvous);
    std::vector<Request> reqs(out.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i].resize(i < kEager ? kEagerBytes : kRendezvousBytes);
      Fill(out[i], i);
      KIT_OK(w.Isend(out[i].data(), out[i].size(), 1, 5, &reqs[i]));
    }
    std::vector<Request*> all;
    for (auto& r : reqs) all.push_back(&r);
    KIT_OK(WaitAll(absl::MakeConstSpan(all)));
  } else if (w.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::vector<unsigned char> in(kRendezvousBytes), want;
    for (std::size_t i = 0; i < kEager + kRendezvous; ++i) {
      want.resize(i < kEager ? kEagerBytes : kRendezvousBytes);
      Fill(want, i);
      ProbeResult st;
      KIT_OK(w.Recv(in.data(), in.size(), 0, 5, &st));
      KIT_EXPECT(st.bytes == want.size() && std::memcmp(in.data(), want.data(), want.size()) == 0,
             "message %d (%d bytes) differs or came out of order", i, st.bytes);
    }
  }
}

namespace {

// This process's resident memory in bytes (/proc/self/statm).
int64_t ResidentBytes() {
  long pages = 0, resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return static_cast<int64_t>(resident) * ::sysconf(_SC_PAGESIZE);
}

}  // namespace

// 10^6 8-byte messages, all unexpected at rank 1 before it receives any:
// what each holds of rank 1's memory while queued, and what is left once
// they were received (a drained burst gives its memory back).
void UnexpectedMemory(const Comm& w, Agent&) {
  constexpr int kMessages = 1000000;
  if (w.rank() == 0) {
    for (int i = 0; i < kMessages; ++i) {
      const uint64_t v = static_cast<uint64_t>(i);
      KIT_OK(w.Send(&v, sizeof(v), 1, 1));
    }
    const int done = 1;
    KIT_OK(w.Send(&done, sizeof(done), 1, 2));
  } else if (w.rank() == 1) {
    const int64_t before = ResidentBytes();
    int done = 0;
    KIT_OK(w.Recv(&done, sizeof(done), 0, 2));  // every message is unexpected now
    const int64_t queued = ResidentBytes();
    for (int i = 0; i < kMessages; ++i) {
      uint64_t v = ~uint64_t{0};
      KIT_OK(w.Recv(&v, sizeof(v), 0, 1));
      KIT_EXPECT(v == static_cast<uint64_t>(i), "message %d carried %d", i, v);
    }
    const int64_t drained = ResidentBytes();
    const double each = static_cast<double>(queued - before) / kMessages;
    std::printf("unexpected 8 B x %d: %.0f bytes each while queued; %.1f MB of them kept after the drain\n",
                kMessages, each, static_cast<double>(std::max<int64_t>(drained - before, 0)) / 1e6);
    KIT_EXPECT(each <= 128, "%.0f bytes per queued 8-byte message", each);
    KIT_EXPECT(drained - before < (queued - before) / 4, "the drain kept %d of %d bytes", drained - before,
               queued - before);
  }
}

// Under CARTAGE_UNEXPECTED_MAX_MB=1, a flood of unexpected messages ends in
// a clear error naming the cap, not in an out-of-memory kill: the receive
// that waits behind them fails, and so does any later receive from that
// sender, whose VC the cap failed. (A method that holds the sender back
// once the receiver holds its share fails both after waiting in vain.)
void UnexpectedCap(const Comm& w, Agent&) {
  constexpr int kMessages = 100000;
  if (w.rank() == 0) {
    for (int i = 0; i < kMessages; ++i) {
      const uint64_t v = static_cast<uint64_t>(i);
      if (!w.Send(&v, sizeof(v), 1, 1).ok()) return;  // rank 1 gave up on this rank
    }
    const int done = 1;
    (void)w.Send(&done, sizeof(done), 1, 2);
  } else if (w.rank() == 1) {
    int done = 0;
    const absl::Status s = w.Recv(&done, sizeof(done), 0, 2);  // everything before it is unexpected
    KIT_EXPECT(s.code() == absl::StatusCode::kResourceExhausted, "%s", s.ToString());
    KIT_EXPECT(s.message().find("CARTAGE_UNEXPECTED_MAX_MB=1") != std::string::npos &&
                   s.message().find("(post receives before the messages come") != std::string::npos,
               "%s", s.ToString());
    // The VC is in the error state: a new receive from rank 0 fails at once,
    // with the same reason (kUnavailable where the VC's error says so, or
    // the cap's own code).
    uint64_t v = 0;
    const absl::Status again = w.Recv(&v, sizeof(v), 0, 1);
    KIT_EXPECT((again.code() == absl::StatusCode::kUnavailable ||
                again.code() == absl::StatusCode::kResourceExhausted) &&
                   again.message().find("CARTAGE_UNEXPECTED_MAX_MB=1") != std::string::npos,
               "%s", again.ToString());
    std::printf("unexpected cap: %s\n", std::string(s.message()).c_str());
  }
}

// A sender far ahead of its receiver: 100,000 8-byte messages in windows of
// nonblocking sends while rank 1 does something else, then received in order. What waits
// for a receive stays within CARTAGE_UNEXPECTED_MAX_MB on every method: one
// whose provider would buffer without bound (ofi) holds the sender back
// until the receiver takes some.
void FastSender(const Comm& w, Agent&) {
  constexpr int kWindow = 128, kMessages = 782 * kWindow;
  if (w.rank() == 0) {
    std::vector<uint64_t> vals(kWindow);
    std::vector<Request> reqs(kWindow);
    for (int i = 0; i < kMessages; i += kWindow) {
      for (int k = 0; k < kWindow; ++k) {
        vals[static_cast<std::size_t>(k)] = static_cast<uint64_t>(i + k);
        KIT_OK(w.Isend(&vals[static_cast<std::size_t>(k)], sizeof(uint64_t), 1, 3, &reqs[static_cast<std::size_t>(k)]));
      }
      for (Request& r : reqs) KIT_OK(r.Wait());
    }
  } else if (w.rank() == 1) {
    const int64_t before = ResidentBytes();
    // A second of probing for something else keeps the methods moving
    // while no receive takes the messages.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (std::chrono::steady_clock::now() < until) {
      KIT_OK(w.Iprobe(0, 4).status());
    }
    const int64_t waiting = ResidentBytes() - before;
    for (int i = 0; i < kMessages; ++i) {
      uint64_t v = ~uint64_t{0};
      KIT_OK(w.Recv(&v, sizeof(v), 0, 3));
      KIT_EXPECT(v == static_cast<uint64_t>(i), "message %d carried %d", i, v);
    }
    int64_t cap_mb = 1024;
    if (const char* v = std::getenv("CARTAGE_UNEXPECTED_MAX_MB")) cap_mb = std::atoll(v);
    std::printf("fast sender: %.1f MB waited for receives (cap %lld MB)\n", static_cast<double>(waiting) / 1e6,
                static_cast<long long>(cap_mb));
    // The cap counts what the runtime and its provider hold; the allocator's
    // own slack comes on top (ASan's pads and quarantine make it meaningless).
#if !defined(__SANITIZE_ADDRESS__)
    KIT_EXPECT(waiting <= 2 * (cap_mb << 20) + (int64_t{16} << 20), "%d bytes waited under a %d MB cap", waiting,
               cap_mb);
#endif
  }
}

}  // namespace cartage::kit
