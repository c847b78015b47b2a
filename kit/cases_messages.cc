// The kit's message cases: who a message is from, posting order, wildcards,
// unexpected messages, every size both ways at once, truncation.
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

// Who a message is from is the rank in its envelope, which the method puts
// on the wire: the sender's world rank. Every rank sends rank 0 one message,
// which rank 0 takes with wildcard receives; then rank 0 sends each rank one
// that it takes by naming rank 0. A method that delivers another rank (its
// own numbering, the receiver's rank) is named here, not left to show as
// every later case waiting for ever.
void Envelope(const Comm& w, Agent&) {
  constexpr auto kPatience = std::chrono::seconds(20);
  const char* const kRule =
      "a method must deliver each envelope with the sender's world rank (methods/README.md, \"Arrivals\")";
  if (w.rank() != 0) {
    const int me = w.rank();
    KIT_OK(w.Send(&me, sizeof(me), 0, 100 + me));
  } else {
    for (int i = 1; i < w.size(); ++i) {
      int from = -1;
      Request r;
      KIT_OK(w.Irecv(&from, sizeof(from), kAnySource, kAnyTag, &r));
      const auto deadline = std::chrono::steady_clock::now() + kPatience;
      while (!r.Test()) {
        KIT_EXPECT(std::chrono::steady_clock::now() < deadline,
                   "rank 0 waited 20 s for a message from any rank and none came; %s", kRule);
      }
      KIT_OK(r.status());
      KIT_EXPECT(r.source() == from && r.tag() == 100 + from,
                 "the message rank %d sent (tag %d) arrived naming rank %d (tag %d); %s", from, 100 + from,
                 r.source(), r.tag(), kRule);
    }
  }
  int got = -1;
  if (w.rank() == 0) {
    for (int to = 1; to < w.size(); ++to) KIT_OK(w.Send(&to, sizeof(to), to, 7));
  } else {
    Request r;
    KIT_OK(w.Irecv(&got, sizeof(got), 0, 7, &r));
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    while (!r.Test()) {
      KIT_EXPECT(std::chrono::steady_clock::now() < deadline,
                 "rank %d waited 20 s for rank 0's message, taken by naming rank 0; %s", w.rank(), kRule);
    }
    KIT_OK(r.status());
    KIT_EXPECT(got == w.rank() && r.source() == 0, "rank %d got %d from rank %d", w.rank(), got, r.source());
  }
}

void Order(const Comm& w, Agent&) {
  constexpr int kWindow = 128, kN = 782 * kWindow;  // whole windows: every send has its receive
  if (w.rank() == 0) {
    std::vector<int> vals(kWindow);
    std::vector<Request> reqs(kWindow);
    for (int i = 0; i < kN; i += kWindow) {
      for (int k = 0; k < kWindow; ++k) {
        vals[k] = i + k;
        KIT_OK(w.Isend(&vals[k], sizeof(int), 1, 7, &reqs[k]));
      }
      for (auto& r : reqs) KIT_OK(r.Wait());
    }
  } else if (w.rank() == 1) {
    for (int i = 0; i < kN; ++i) {
      int v = -1;
      KIT_OK(w.Recv(&v, sizeof(v), 0, 7));
      KIT_EXPECT(v == i, "message %d arrived as %d", i, v);
    }
  }
}

void Wildcard(const Comm& w, Agent&) {
  // Posted first wins: wildcard before specific, then specific before wildcard.
  if (w.rank() == 1) {
    int a = -1, b = -1, c = -1, d = -1;
    Request ra, rb, rc, rd;
    KIT_OK(w.Irecv(&a, sizeof(a), kAnySource, 5, &ra));
    KIT_OK(w.Irecv(&b, sizeof(b), 0, 5, &rb));
    KIT_OK(w.Irecv(&c, sizeof(c), 0, 6, &rc));
    KIT_OK(w.Irecv(&d, sizeof(d), kAnySource, 6, &rd));
    Ready(w, 99);
    KIT_OK(WaitAll({&ra, &rb, &rc, &rd}));
    KIT_EXPECT(a == 1 && b == 2, "tag 5: wildcard got %d, specific got %d", a, b);
    KIT_EXPECT(c == 3 && d == 4, "tag 6: specific got %d, wildcard got %d", c, d);
    KIT_EXPECT(ra.source() == 0 && ra.tag() == 5 && ra.bytes() == sizeof(int), "status %d %d %d",
           ra.source(), ra.tag(), static_cast<int>(ra.bytes()));
  } else if (w.rank() == 0) {
    Ready(w, 99);
    for (int v : {1, 2}) KIT_OK(w.Send(&v, sizeof(v), 1, 5));
    for (int v : {3, 4}) KIT_OK(w.Send(&v, sizeof(v), 1, 6));
  }
}

void Unexpected(const Comm& w, Agent&) {
  // Through ofi, libfabric's tcp provider (with ofi_rxm) matches tags itself
  // and walks its unexpected messages in a line: 100,000 of them taken in
  // reverse order kept one CPU busy inside libfabric for 110-270 s on this
  // VM kind (quadratic), and made the test time out under load. It checks
  // the same with 20,000 there; cartage's own matcher takes the 100,000.
  const absl::StatusOr<PathInfo> path = w.PathTo(1 - w.rank());
  KIT_OK(path.status());
  const int messages = path->method == "ofi" ? 20000 : 100000;
  if (w.rank() == 0) {
    std::vector<Request> reqs(256);
    std::vector<int> vals(256);
    for (int i = 0; i < messages; i += 256) {
      const int batch = std::min(256, messages - i);  // tags 0 .. messages-1, each once
      for (int k = 0; k < batch; ++k) {
        vals[k] = (i + k) * 3;
        KIT_OK(w.Isend(&vals[k], sizeof(int), 1, i + k, &reqs[k]));
      }
      for (int k = 0; k < batch; ++k) KIT_OK(reqs[k].Wait());
    }
    int done = 1;
    KIT_OK(w.Send(&done, sizeof(done), 1, kMaxTag));
  } else if (w.rank() == 1) {
    int done = 0;
    KIT_OK(w.Recv(&done, sizeof(done), 0, kMaxTag));  // every message is unexpected now
    for (int t = messages - 1; t >= 0; --t) {
      int v = -1;
      KIT_OK(w.Recv(&v, sizeof(v), 0, t));
      KIT_EXPECT(v == t * 3, "tag %d carried %d", t, v);
    }
  }
}

void AnyTagAnySource(const Comm& w, Agent&) {
  // Every other rank sends rank 0 two messages with distinct tags.
  if (w.rank() != 0) {
    for (int k = 0; k < 2; ++k) {
      const int v = w.rank() * 100 + k;
      KIT_OK(w.Send(&v, sizeof(v), 0, w.rank() * 10 + k));
    }
    return;
  }
  std::vector<int> seen(static_cast<std::size_t>(w.size()), 0);
  for (int i = 0; i < 2 * (w.size() - 1); ++i) {
    int v = -1;
    ProbeResult st;
    KIT_OK(w.Recv(&v, sizeof(v), kAnySource, kAnyTag, &st));
    KIT_EXPECT(v == st.source * 100 + (st.tag % 10) && st.tag / 10 == st.source, "got %d from %d tag %d",
           v, st.source, st.tag);
    KIT_EXPECT(st.tag % 10 == seen[static_cast<std::size_t>(st.source)], "rank %d's messages overtook",
           st.source);
    ++seen[static_cast<std::size_t>(st.source)];
  }
}

void Sizes(const Comm& w, Agent&) {
  std::vector<std::size_t> sizes = {0, 1, 7, 64, 1000, 4096, 8191, 8192, 8193, 65536, 100000,
                                    1 << 20, (1 << 20) + 3, 4 << 20, 16 << 20, 64 << 20};
  for (std::size_t n : sizes) {
    std::vector<unsigned char> out(n), in(n + 64, 0xee);
    Fill(out, n);
    // Both directions at once: 0 -> 1 and 1 -> 0.
    if (w.rank() < 2) {
      const int peer = 1 - w.rank();
      Request rr, sr;
      Fill(out, n + static_cast<std::size_t>(w.rank()));
      KIT_OK(w.Irecv(in.data(), n, peer, 1, &rr));
      KIT_OK(w.Isend(out.data(), n, peer, 1, &sr));
      KIT_OK(WaitAll({&rr, &sr}));
      std::vector<unsigned char> want(n);
      Fill(want, n + static_cast<std::size_t>(peer));
      KIT_EXPECT(rr.bytes() == n, "size %d: received %d bytes", n, rr.bytes());
      KIT_EXPECT(n == 0 || std::memcmp(in.data(), want.data(), n) == 0, "size %d: payload differs", n);
      for (std::size_t i = n; i < in.size(); ++i) KIT_EXPECT(in[i] == 0xee, "size %d: wrote past the end", n);
    }
  }
}

void Truncation(const Comm& w, Agent&) {
  // Eager; eager where a method sends that much so (tcp, up to 64 KiB), else
  // rendezvous; rendezvous.
  for (std::size_t n : {1000ul, 60000ul, 200000ul}) {
    std::vector<unsigned char> big(n);
    Fill(big, n);
    if (w.rank() == 0) {
      KIT_OK(w.Send(big.data(), n, 1, 3));
      KIT_OK(w.Send(big.data(), 10, 1, 4));  // the path stays usable
    } else if (w.rank() == 1) {
      std::vector<unsigned char> small(300, 0xab);
      Request r;
      KIT_OK(w.Irecv(small.data(), 100, 0, 3, &r));
      const absl::Status s = r.Wait();
      KIT_EXPECT(s.code() == absl::StatusCode::kOutOfRange, "truncation gave %s", s.ToString());
      KIT_EXPECT(s.message().find("truncated to the 100-byte receive buffer") != std::string::npos &&
                 s.message().find("from rank 0 (tag 3") != std::string::npos,
             "message: %s", s.ToString());
      KIT_EXPECT(std::memcmp(small.data(), big.data(), 100) == 0, "the first 100 bytes differ");
      for (std::size_t i = 100; i < small.size(); ++i) KIT_EXPECT(small[i] == 0xab, "wrote past the buffer");
      KIT_OK(w.Recv(small.data(), 10, 0, 4));
      KIT_EXPECT(std::memcmp(small.data(), big.data(), 10) == 0, "next message differs");
    }
  }
}

}  // namespace cartage::kit
