// The kit's load cases: 10k operations outstanding, and resource
// exhaustion that must queue rather than fail.
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

}  // namespace cartage::kit
