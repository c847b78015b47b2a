// The rank side of the point-to-point tests (tests/p2p_test.cc runs each mode
// through `cartage run`). Every mode checks exact bytes, order and statuses
// and exits non-zero with a message on the first mismatch; rank 0 prints
// "PASS <mode>" when the whole job agrees.
//
// usage: p2p_ranks MODE
#include <unistd.h>

#include <csignal>

#include <chrono>
#include <optional>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "cartage/cartage.h"
#include "tests/rank_check.h"

namespace {

using cartage::Comm;
using cartage::kAnySource;
using cartage::kAnyTag;
using cartage::Request;

using cartage::test::g_rank;

// A byte pattern that differs per (seed, position).
void Fill(std::vector<unsigned char>& v, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<unsigned char>(x);
  }
}

// Rank 1 tells rank 0 it is ready (its receives are posted).
void Ready(const Comm& w, int tag) {
  char c = 'r';
  if (w.rank() == 1) OK(w.Send(&c, 1, 0, tag));
  if (w.rank() == 0) OK(w.Recv(&c, 1, 1, tag));
}

void Order(const Comm& w) {
  constexpr int kWindow = 128, kN = 782 * kWindow;  // whole windows: every send has its receive
  if (w.rank() == 0) {
    std::vector<int> vals(kWindow);
    std::vector<Request> reqs(kWindow);
    for (int i = 0; i < kN; i += kWindow) {
      for (int k = 0; k < kWindow; ++k) {
        vals[k] = i + k;
        OK(w.Isend(&vals[k], sizeof(int), 1, 7, &reqs[k]));
      }
      for (auto& r : reqs) OK(r.Wait());
    }
  } else if (w.rank() == 1) {
    for (int i = 0; i < kN; ++i) {
      int v = -1;
      OK(w.Recv(&v, sizeof(v), 0, 7));
      EXPECT(v == i, "message %d arrived as %d", i, v);
    }
  }
}

void Wildcard(const Comm& w) {
  // Posted first wins: wildcard before specific, then specific before wildcard.
  if (w.rank() == 1) {
    int a = -1, b = -1, c = -1, d = -1;
    Request ra, rb, rc, rd;
    OK(w.Irecv(&a, sizeof(a), kAnySource, 5, &ra));
    OK(w.Irecv(&b, sizeof(b), 0, 5, &rb));
    OK(w.Irecv(&c, sizeof(c), 0, 6, &rc));
    OK(w.Irecv(&d, sizeof(d), kAnySource, 6, &rd));
    Ready(w, 99);
    OK(cartage::WaitAll({&ra, &rb, &rc, &rd}));
    EXPECT(a == 1 && b == 2, "tag 5: wildcard got %d, specific got %d", a, b);
    EXPECT(c == 3 && d == 4, "tag 6: specific got %d, wildcard got %d", c, d);
    EXPECT(ra.source() == 0 && ra.tag() == 5 && ra.bytes() == sizeof(int), "status %d %d %d",
           ra.source(), ra.tag(), static_cast<int>(ra.bytes()));
  } else if (w.rank() == 0) {
    Ready(w, 99);
    for (int v : {1, 2}) OK(w.Send(&v, sizeof(v), 1, 5));
    for (int v : {3, 4}) OK(w.Send(&v, sizeof(v), 1, 6));
  }
}

void Unexpected(const Comm& w) {
  // Through ofi, libfabric's tcp provider (with ofi_rxm) matches tags itself
  // and walks its unexpected messages in a line: 100,000 of them taken in
  // reverse order kept one CPU busy inside libfabric for 110-270 s on this
  // VM kind (quadratic), and made the test time out under load. It checks
  // the same with 20,000 there; cartage's own matcher takes the 100,000.
  const absl::StatusOr<cartage::PathInfo> path = w.PathTo(1 - w.rank());
  OK(path.status());
  const int messages = path->method == "ofi" ? 20000 : 100000;
  if (w.rank() == 0) {
    std::vector<Request> reqs(256);
    std::vector<int> vals(256);
    for (int i = 0; i < messages; i += 256) {
      const int batch = std::min(256, messages - i);  // tags 0 .. messages-1, each once
      for (int k = 0; k < batch; ++k) {
        vals[k] = (i + k) * 3;
        OK(w.Isend(&vals[k], sizeof(int), 1, i + k, &reqs[k]));
      }
      for (int k = 0; k < batch; ++k) OK(reqs[k].Wait());
    }
    int done = 1;
    OK(w.Send(&done, sizeof(done), 1, cartage::kMaxTag));
  } else if (w.rank() == 1) {
    int done = 0;
    OK(w.Recv(&done, sizeof(done), 0, cartage::kMaxTag));  // every message is unexpected now
    for (int t = messages - 1; t >= 0; --t) {
      int v = -1;
      OK(w.Recv(&v, sizeof(v), 0, t));
      EXPECT(v == t * 3, "tag %d carried %d", t, v);
    }
  }
}

void AnyTagAnySource(const Comm& w) {
  // Every other rank sends rank 0 two messages with distinct tags.
  if (w.rank() != 0) {
    for (int k = 0; k < 2; ++k) {
      const int v = w.rank() * 100 + k;
      OK(w.Send(&v, sizeof(v), 0, w.rank() * 10 + k));
    }
    return;
  }
  std::vector<int> seen(static_cast<std::size_t>(w.size()), 0);
  for (int i = 0; i < 2 * (w.size() - 1); ++i) {
    int v = -1;
    cartage::ProbeResult st;
    OK(w.Recv(&v, sizeof(v), kAnySource, kAnyTag, &st));
    EXPECT(v == st.source * 100 + (st.tag % 10) && st.tag / 10 == st.source, "got %d from %d tag %d",
           v, st.source, st.tag);
    EXPECT(st.tag % 10 == seen[static_cast<std::size_t>(st.source)], "rank %d's messages overtook",
           st.source);
    ++seen[static_cast<std::size_t>(st.source)];
  }
}

void Sizes(const Comm& w) {
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
      OK(w.Irecv(in.data(), n, peer, 1, &rr));
      OK(w.Isend(out.data(), n, peer, 1, &sr));
      OK(cartage::WaitAll({&rr, &sr}));
      std::vector<unsigned char> want(n);
      Fill(want, n + static_cast<std::size_t>(peer));
      EXPECT(rr.bytes() == n, "size %d: received %d bytes", n, rr.bytes());
      EXPECT(n == 0 || std::memcmp(in.data(), want.data(), n) == 0, "size %d: payload differs", n);
      for (std::size_t i = n; i < in.size(); ++i) EXPECT(in[i] == 0xee, "size %d: wrote past the end", n);
    }
  }
}

void Truncation(const Comm& w) {
  for (std::size_t n : {1000ul, 200000ul}) {  // eager, then rendezvous
    std::vector<unsigned char> big(n);
    Fill(big, n);
    if (w.rank() == 0) {
      OK(w.Send(big.data(), n, 1, 3));
      OK(w.Send(big.data(), 10, 1, 4));  // the path stays usable
    } else if (w.rank() == 1) {
      std::vector<unsigned char> small(300, 0xab);
      Request r;
      OK(w.Irecv(small.data(), 100, 0, 3, &r));
      const absl::Status s = r.Wait();
      EXPECT(s.code() == absl::StatusCode::kOutOfRange, "truncation gave %s", s.ToString());
      EXPECT(s.message().find("truncated to the 100-byte receive buffer") != std::string::npos &&
                 s.message().find("from rank 0 (tag 3") != std::string::npos,
             "message: %s", s.ToString());
      EXPECT(std::memcmp(small.data(), big.data(), 100) == 0, "the first 100 bytes differ");
      for (std::size_t i = 100; i < small.size(); ++i) EXPECT(small[i] == 0xab, "wrote past the buffer");
      OK(w.Recv(small.data(), 10, 0, 4));
      EXPECT(std::memcmp(small.data(), big.data(), 10) == 0, "next message differs");
    }
  }
}

void Cancel(const Comm& w) {
  if (w.rank() == 1) {
    int v = 0;
    Request r;
    OK(w.Irecv(&v, sizeof(v), 0, 8, &r));
    OK(r.Cancel());
    const absl::Status s = r.Wait();
    EXPECT(s.code() == absl::StatusCode::kCancelled, "cancelled receive gave %s", s.ToString());
    Ready(w, 99);
    OK(w.Recv(&v, sizeof(v), 0, 8));
    EXPECT(v == 42, "the message after the cancel carried %d", v);
    Request done;
    EXPECT(!done.Cancel().ok(), "cancelling an inactive request must fail");
  } else if (w.rank() == 0) {
    Ready(w, 99);
    const int v = 42;
    OK(w.Send(&v, sizeof(v), 1, 8));
  }
}

void Ssend(const Comm& w) {
  for (std::size_t n : {8ul, 100000ul}) {
    std::vector<unsigned char> buf(n, 1);
    if (w.rank() == 0) {
      Request r;
      OK(w.Issend(buf.data(), n, 1, 2, &r));
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      while (std::chrono::steady_clock::now() < until) {
        EXPECT(!r.Test(), "ssend of %d bytes completed before the receive was posted", n);
      }
      char go = 'g';
      OK(w.Send(&go, 1, 1, 9));
      OK(r.Wait());
    } else if (w.rank() == 1) {
      char go = 0;
      OK(w.Recv(&go, 1, 0, 9));
      OK(w.Recv(buf.data(), n, 0, 2));
    }
  }
}

void ProbeThenRecv(const Comm& w) {
  if (w.rank() == 0) {
    std::vector<unsigned char> msg(777);
    Fill(msg, 777);
    OK(w.Send(msg.data(), msg.size(), 1, 3));
  } else if (w.rank() == 1) {
    absl::StatusOr<cartage::ProbeResult> p = w.Probe(kAnySource, kAnyTag);
    OK(p.status());
    EXPECT(p->source == 0 && p->tag == 3 && p->bytes == 777, "probe saw %d %d %d", p->source, p->tag,
           static_cast<int>(p->bytes));
    std::vector<unsigned char> buf(p->bytes), want(777);
    Fill(want, 777);
    OK(w.Recv(buf.data(), buf.size(), p->source, p->tag));
    EXPECT(buf == want, "probed message differs");
    absl::StatusOr<std::optional<cartage::ProbeResult>> none = w.Iprobe(kAnySource, kAnyTag);
    OK(none.status());
    EXPECT(!none->has_value(), "nothing should be left");
    EXPECT(w.Iprobe(5, 0).status().code() == absl::StatusCode::kInvalidArgument, "bad rank probe");
  }
}

// A message that arrives while its receiver waits on another one may be
// held back unread in the method (shm's rings) until a receive is posted;
// an Iprobe must still find it, and the receive it waited on must still
// complete when its message comes.
void HoldThenProbe(const Comm& w) {
  if (w.rank() == 0) {
    const int a = 40, b = 41;
    OK(w.Send(&a, sizeof(a), 1, 40));
    Ready(w, 1);  // nothing follows `a` to rank 1 until it probed
    OK(w.Send(&b, sizeof(b), 1, 41));
  } else if (w.rank() == 1) {
    int a = 0, b = 0;
    Request rb;
    OK(w.Irecv(&b, sizeof(b), 0, 41, &rb));
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (std::chrono::steady_clock::now() < until) EXPECT(!rb.Test(), "tag 41 came before it was sent");
    std::optional<cartage::ProbeResult> found;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!found.has_value() && std::chrono::steady_clock::now() < deadline) {
      absl::StatusOr<std::optional<cartage::ProbeResult>> p = w.Iprobe(0, 40);
      OK(p.status());
      found = *p;
    }
    EXPECT(found.has_value() && found->tag == 40 && found->bytes == sizeof(int), "Iprobe did not see tag 40");
    OK(w.Recv(&a, sizeof(a), 0, 40));
    Ready(w, 1);
    OK(rb.Wait());
    EXPECT(a == 40 && b == 41, "got %d and %d", a, b);
  }
}

void DupIsolation(const Comm& w) {
  const Comm other = w.Dup();
  EXPECT(other.context() != w.context(), "dup kept the context");
  if (w.rank() == 0) {
    const int b = 2, a = 1;
    OK(other.Send(&b, sizeof(b), 1, 1));
    OK(w.Send(&a, sizeof(a), 1, 1));
  } else if (w.rank() == 1) {
    int got = 0;
    OK(w.Recv(&got, sizeof(got), 0, 1));
    EXPECT(got == 1, "world received %d: the dup's message crossed over", got);
    OK(other.Recv(&got, sizeof(got), 0, 1));
    EXPECT(got == 2, "dup received %d", got);
  }
}

void BadArguments(const Comm& w) {
  int v = 0;
  Request r;
  absl::Status s = w.Isend(&v, sizeof(v), w.size(), 0, &r);
  EXPECT(s.code() == absl::StatusCode::kInvalidArgument &&
             s.message() == absl::StrFormat("send to rank %d (tag 0): no such rank in a communicator of %d",
                                            w.size(), w.size()),
         "%s", s.ToString());
  s = w.Isend(&v, sizeof(v), 0, -3, &r);
  EXPECT(s.code() == absl::StatusCode::kInvalidArgument, "%s", s.ToString());
  s = w.Isend(&v, sizeof(v), 0, kAnyTag, &r);
  EXPECT(s.code() == absl::StatusCode::kInvalidArgument, "wildcard tag on a send: %s", s.ToString());
  s = w.Irecv(nullptr, 8, 0, 0, &r);
  EXPECT(s.code() == absl::StatusCode::kInvalidArgument, "%s", s.ToString());
  OK(w.Irecv(&v, sizeof(v), 0, 1, &r));
  s = w.Isend(&v, sizeof(v), 0, 0, nullptr);
  EXPECT(s.code() == absl::StatusCode::kFailedPrecondition, "%s", s.ToString());
  OK(r.Cancel());
  EXPECT(r.Wait().code() == absl::StatusCode::kCancelled, "cancel");
}

void Persistent(const Comm& w, cartage::Agent& agent) {
  // A persistent send and receive, started 1000 times; the buffers are
  // registered with the method once each.
  std::vector<int> out(64), in(64);
  Request send, recv;
  const int peer = 1 - w.rank();
  if (w.rank() > 1) return;
  OK(w.SendInit(out.data(), out.size() * sizeof(int), peer, 4, &send));
  OK(w.RecvInit(in.data(), in.size() * sizeof(int), peer, 4, &recv));
  EXPECT(agent.registered_buffers() == 2, "%d buffers registered", agent.registered_buffers());
  EXPECT(!send.active() && send.persistent(), "a fresh persistent request is inactive");
  for (int i = 0; i < 1000; ++i) {
    for (int k = 0; k < 64; ++k) out[static_cast<std::size_t>(k)] = i * 1000 + k + w.rank();
    OK(recv.Start());
    OK(send.Start());
    EXPECT(send.Start().code() == absl::StatusCode::kFailedPrecondition, "restart while active");
    OK(cartage::WaitAll({&recv, &send}));
    for (int k = 0; k < 64; ++k) {
      EXPECT(in[static_cast<std::size_t>(k)] == i * 1000 + k + peer, "round %d word %d: %d", i, k,
             in[static_cast<std::size_t>(k)]);
    }
    EXPECT(recv.bytes() == 256 && recv.source() == peer, "round %d status", i);
  }
  EXPECT(agent.registered_buffers() == 2, "still %d registrations after 1000 starts", agent.registered_buffers());
  Request plain;
  EXPECT(plain.Start().code() == absl::StatusCode::kFailedPrecondition, "start of a plain request");
  OK(send.Free());
  OK(recv.Free());
  EXPECT(agent.registered_buffers() == 0, "%d registrations left", agent.registered_buffers());
}

void WaitVariants(const Comm& w) {
  constexpr int kN = 8;
  if (w.rank() == 0) {
    std::vector<int> v(kN);
    std::vector<Request> reqs(kN);
    std::vector<Request*> ptrs;
    for (int i = 0; i < kN; ++i) {
      v[static_cast<std::size_t>(i)] = i;
      ptrs.push_back(&reqs[static_cast<std::size_t>(i)]);
    }
    Ready(w, 99);
    // Rank 1 answers tags in the order 5, 2, 7, ...; several may land in one
    // round of progress, so WaitAny returns any request that has completed.
    for (int i = 0; i < kN; ++i) OK(w.Irecv(&v[static_cast<std::size_t>(i)], sizeof(int), 1, i, ptrs[static_cast<std::size_t>(i)]));
    EXPECT(!cartage::TestAll(absl::MakeConstSpan(ptrs)), "nothing can have arrived yet");
    char go = 1;
    OK(w.Send(&go, 1, 1, 98));
    absl::StatusOr<std::size_t> first = cartage::WaitAny(absl::MakeConstSpan(ptrs));
    OK(first.status());
    EXPECT(*first < kN && v[*first] == static_cast<int>(*first) * 100 && !ptrs[*first]->active(),
           "WaitAny gave %d", static_cast<int>(*first));
    std::vector<std::size_t> got = {*first};
    while (got.size() < kN) {
      absl::StatusOr<std::vector<std::size_t>> some = cartage::WaitSome(absl::MakeConstSpan(ptrs));
      OK(some.status());
      got.insert(got.end(), some->begin(), some->end());
    }
    std::sort(got.begin(), got.end());
    for (int i = 0; i < kN; ++i) {
      EXPECT(got[static_cast<std::size_t>(i)] == static_cast<std::size_t>(i) && v[static_cast<std::size_t>(i)] == i * 100,
             "request %d: %d", i, v[static_cast<std::size_t>(i)]);
    }
    EXPECT(!cartage::WaitAny(absl::MakeConstSpan(ptrs)).ok(), "WaitAny with none active");
    EXPECT(!cartage::TestAny(absl::MakeConstSpan(ptrs)).has_value(), "TestAny with none active");
    EXPECT(cartage::TestAll(absl::MakeConstSpan(ptrs)), "TestAll when all are done");
  } else if (w.rank() == 1) {
    Ready(w, 99);
    char go = 0;
    OK(w.Recv(&go, 1, 0, 98));
    for (int t : {5, 2, 7, 0, 1, 3, 4, 6}) {
      const int v = t * 100;
      OK(w.Send(&v, sizeof(v), 0, t));
    }
  }
}

void Split(const Comm& w) {
  // Even and odd ranks; keys reverse the order within each half.
  absl::StatusOr<std::optional<Comm>> half = w.Split(w.rank() % 2, -w.rank());
  OK(half.status());
  EXPECT(half->has_value(), "every rank has a color");
  const Comm& h = **half;
  const int expect_size = (w.size() + 1 - w.rank() % 2) / 2;
  EXPECT(h.size() == expect_size, "half of %d has %d ranks", w.size(), h.size());
  EXPECT(h.context() != w.context(), "split kept the context");
  // Rank order is by key (the negated world rank): the members above me come first.
  EXPECT(h.rank() == (w.size() - 1 - w.rank()) / 2, "world rank %d is rank %d of its half", w.rank(), h.rank());
  // A ring inside the half: each sends its world rank to the next.
  const int next = (h.rank() + 1) % h.size(), prev = (h.rank() + h.size() - 1) % h.size();
  int got = -1;
  const int me = w.rank();
  Request rr, sr;
  OK(h.Irecv(&got, sizeof(got), prev, 3, &rr));
  OK(h.Isend(&me, sizeof(me), next, 3, &sr));
  OK(cartage::WaitAll({&rr, &sr}));
  EXPECT(got % 2 == me % 2, "rank %d got %d from the other half", me, got);
  EXPECT(rr.source() == prev, "source %d, expected %d (ranks of the split)", rr.source(), prev);
  // The previous rank in the half is the next-higher world rank, or wraps to the lowest.
  const int want = h.size() == 1 ? me : (me + 2 < w.size() ? me + 2 : me % 2);
  EXPECT(got == want, "world rank %d got %d, expected %d", me, got, want);
  // Out of range in the split is checked against its own size.
  EXPECT(h.Isend(&me, sizeof(me), h.size(), 0, &sr).code() == absl::StatusCode::kInvalidArgument, "range");
  // A rank that takes no color gets no communicator; the others carry on.
  absl::StatusOr<std::optional<Comm>> some = w.Split(w.rank() == 0 ? -1 : 0, 0);
  OK(some.status());
  EXPECT(some->has_value() == (w.rank() != 0), "color -1 joins none");
  if (some->has_value()) EXPECT((*some)->size() == w.size() - 1 && (*some)->rank() == w.rank() - 1, "ranks");
}

void Self(const Comm& w) {
  // A rank's messages to itself, eager and rendezvous, posted both ways round.
  for (std::size_t n : {0ul, 8ul, 5000ul, 300000ul}) {
    std::vector<unsigned char> out(n), in(n + 8, 0xcd);
    Fill(out, n + static_cast<std::size_t>(w.rank()));
    Request r, s;
    OK(w.Irecv(in.data(), n, w.rank(), 6, &r));
    OK(w.Isend(out.data(), n, w.rank(), 6, &s));
    OK(cartage::WaitAll({&r, &s}));
    EXPECT(r.source() == w.rank() && r.bytes() == n, "self status %d %d", r.source(), static_cast<int>(r.bytes()));
    EXPECT(n == 0 || std::memcmp(in.data(), out.data(), n) == 0, "self payload of %d bytes", n);
    OK(w.Isend(out.data(), n, w.rank(), 7, &s));  // unexpected first
    OK(w.Recv(in.data(), n, w.rank(), 7));
    OK(s.Wait());
    EXPECT(n == 0 || std::memcmp(in.data(), out.data(), n) == 0, "self unexpected payload of %d bytes", n);
  }
  // Synchronous sends to oneself complete only once matched, whichever comes first.
  int v = 7, got = 0;
  Request ss;
  OK(w.Issend(&v, sizeof(v), w.rank(), 8, &ss));
  EXPECT(!ss.Test() && !ss.Test(), "an ssend to oneself completed before its receive");
  OK(w.Recv(&got, sizeof(got), w.rank(), 8));
  OK(ss.Wait());
  Request rr;
  OK(w.Irecv(&got, sizeof(got), w.rank(), 9, &rr));
  OK(w.Ssend(&v, sizeof(v), w.rank(), 9));
  OK(rr.Wait());
  // A wildcard receive is bound to no method until it matches a self message.
  const int tag = 100 + w.rank();
  Request any;
  OK(w.Irecv(&got, sizeof(got), kAnySource, tag, &any));
  v = 4242;
  OK(w.Ssend(&v, sizeof(v), w.rank(), tag));
  OK(any.Wait());
  EXPECT(got == 4242 && any.source() == w.rank(), "wildcard got %d from %d", got, any.source());
  // Truncation to oneself.
  std::vector<unsigned char> big(1000, 9), small(16, 0);
  Request tr;
  OK(w.Irecv(small.data(), 8, w.rank(), 10, &tr));
  OK(w.Send(big.data(), big.size(), w.rank(), 10));
  EXPECT(tr.Wait().code() == absl::StatusCode::kOutOfRange, "truncation to oneself");
  EXPECT(small[8] == 0, "wrote past the buffer");
}

void EarlyExit(const Comm& w) {
  if (w.rank() == 1) {
    std::fflush(stdout);
    _exit(0);  // gone without finalizing
  }
  if (w.rank() == 0) {
    int v = 0;
    // Prepared while rank 1 lived, started once it is gone: refused at start
    // (a receive would otherwise wait for ever).
    Request persistent;
    OK(w.RecvInit(&v, sizeof(v), 1, 1, &persistent));
    const auto start = std::chrono::steady_clock::now();
    const absl::Status s = w.Recv(&v, sizeof(v), 1, 0);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT(s.code() == absl::StatusCode::kUnavailable, "receive from a dead rank gave %s", s.ToString());
    EXPECT(s.message().find("rank 1 exited or finalized") != std::string::npos &&
               s.message().find("from rank 1 (tag 0") != std::string::npos,
           "%s", s.ToString());
    EXPECT(secs < 5, "took %f s to notice", secs);
    // New operations to it fail at once.
    Request r;
    s.IgnoreError();
    const absl::Status again = w.Isend(&v, sizeof(v), 1, 0, &r);
    EXPECT(again.code() == absl::StatusCode::kUnavailable, "%s", again.ToString());
    const absl::Status restart = persistent.Start();
    EXPECT(restart.code() == absl::StatusCode::kUnavailable &&
               restart.message().find("persistent recv from rank 1: rank 1 exited or finalized") != std::string::npos,
           "%s", restart.ToString());
    EXPECT(!persistent.active(), "a refused start left the request active");
  }
}


// 10k operations outstanding at once in each direction (rank r sends to
// r + 1 and receives from r - 1; one rank talks to itself), mixed sizes with
// every 100th a rendezvous message; every payload checked.
void Outstanding(const Comm& w) {
  constexpr int kN = 10000;
  const int to = (w.rank() + 1) % w.size();
  const int from = (w.rank() + w.size() - 1) % w.size();
  auto size_of = [](int i) -> std::size_t { return i % 100 == 99 ? 100000 : (i % 2 == 0 ? 8 : 1000); };
  std::vector<std::vector<unsigned char>> in(kN), out(kN);
  std::vector<Request> rr(kN), sr(kN);
  for (int i = 0; i < kN; ++i) {
    in[static_cast<std::size_t>(i)].assign(size_of(i), 0);
    OK(w.Irecv(in[static_cast<std::size_t>(i)].data(), size_of(i), from, i % 7, &rr[static_cast<std::size_t>(i)]));
  }
  for (int i = 0; i < kN; ++i) {
    out[static_cast<std::size_t>(i)].resize(size_of(i));
    Fill(out[static_cast<std::size_t>(i)], static_cast<uint64_t>(w.rank() * kN + i));
    OK(w.Isend(out[static_cast<std::size_t>(i)].data(), size_of(i), to, i % 7, &sr[static_cast<std::size_t>(i)]));
  }
  std::vector<Request*> all;
  for (auto& r : rr) all.push_back(&r);
  for (auto& r : sr) all.push_back(&r);
  OK(cartage::WaitAll(absl::MakeConstSpan(all)));
  for (int i = 0; i < kN; ++i) {
    std::vector<unsigned char> want(size_of(i));
    Fill(want, static_cast<uint64_t>(from * kN + i));
    EXPECT(in[static_cast<std::size_t>(i)] == want, "operation %d of %d bytes from rank %d differs", i, size_of(i), from);
  }
}

// The receiver is away while the sender posts 128 MiB of eager messages and
// 64 rendezvous ones: the method's buffers and the wire fill up; every send
// must queue and complete later, never fail, and every byte arrive in order.
void Exhaustion(const Comm& w) {
  constexpr int kEager = 2048, kRendezvous = 64;
  constexpr std::size_t kEagerBytes = 4096, kRendezvousBytes = 1 << 20;
  if (w.rank() == 0) {
    std::vector<std::vector<unsigned char>> out(kEager + kRendezvous);
    std::vector<Request> reqs(out.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
      out[i].resize(i < kEager ? kEagerBytes : kRendezvousBytes);
      Fill(out[i], i);
      OK(w.Isend(out[i].data(), out[i].size(), 1, 5, &reqs[i]));
    }
    std::vector<Request*> all;
    for (auto& r : reqs) all.push_back(&r);
    OK(cartage::WaitAll(absl::MakeConstSpan(all)));
  } else if (w.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::vector<unsigned char> in(kRendezvousBytes), want;
    for (std::size_t i = 0; i < kEager + kRendezvous; ++i) {
      want.resize(i < kEager ? kEagerBytes : kRendezvousBytes);
      Fill(want, i);
      cartage::ProbeResult st;
      OK(w.Recv(in.data(), in.size(), 0, 5, &st));
      EXPECT(st.bytes == want.size() && std::memcmp(in.data(), want.data(), want.size()) == 0,
             "message %d (%d bytes) differs or came out of order", i, st.bytes);
    }
  }
}

// Rank 0 dies while a 256 MiB message streams from it: the receiver gets an
// error completion naming rank 0 within a bounded time, not a hang.
void PeerDies(const Comm& w) {
  constexpr std::size_t kBytes = 256u << 20;
  std::vector<unsigned char> buf(kBytes, w.rank() == 0 ? 3 : 0);
  if (w.rank() == 0) {
    Ready(w, 99);
    Request r;
    OK(w.Isend(buf.data(), kBytes, 1, 1, &r));
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    while (std::chrono::steady_clock::now() < until) (void)r.Test();
    EXPECT(!r.Test(), "256 MiB left in 2 ms (%s): the transfer was not interrupted", r.Wait().ToString());
    std::fflush(stdout);
    _exit(0);
  }
  if (w.rank() == 1) {
    Request r;
    OK(w.Irecv(buf.data(), kBytes, 0, 1, &r));
    Ready(w, 99);
    const auto start = std::chrono::steady_clock::now();
    const absl::Status s = r.Wait();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s.ok()) {
      // A single-copy method may finish reading before the process is gone:
      // then every byte must be there.
      EXPECT(std::all_of(buf.begin(), buf.end(), [](unsigned char c) { return c == 3; }),
             "the receive succeeded with wrong bytes");
    } else {
      EXPECT(s.code() == absl::StatusCode::kUnavailable, "%s", s.ToString());
      EXPECT(s.message().find("rank 0") != std::string::npos, "the error does not name the peer: %s", s.ToString());
    }
    EXPECT(secs < 10, "took %f s to notice", secs);
    std::printf("PASS %s\n", "peerdies");  // rank 0 is gone: the receiver reports
    std::fflush(stdout);
    _exit(0);
  }
}

// Rank 2 exits; ranks 0 and 1 find its VC in the error state: new sends and
// receives to it fail at once with a status naming it, while they still talk
// to each other.
void VcError(const Comm& w) {
  if (w.rank() == 2) {
    int v = 0;
    OK(w.Send(&v, sizeof(v), 0, 1));  // the VC to rank 0 exists (connected) before it goes
    std::fflush(stdout);
    _exit(0);
  }
  int v = 0;
  if (w.rank() == 0) OK(w.Recv(&v, sizeof(v), 2, 1));
  // Wait until this rank has noticed (a blocked receive fails once it does).
  const absl::Status gone = w.Recv(&v, sizeof(v), 2, 2);
  EXPECT(gone.code() == absl::StatusCode::kUnavailable && gone.message().find("rank 2") != std::string::npos,
         "receive from the dead rank gave %s", gone.ToString());
  for (int i = 0; i < 3; ++i) {
    Request r;
    const auto start = std::chrono::steady_clock::now();
    const absl::Status s = i % 2 == 0 ? w.Isend(&v, sizeof(v), 2, 3, &r) : w.Irecv(&v, sizeof(v), 2, 3, &r);
    const absl::Status done = s.ok() ? r.Wait() : s;
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    EXPECT(done.code() == absl::StatusCode::kUnavailable && done.message().find("rank 2") != std::string::npos,
           "operation %d to the dead rank gave %s", i, done.ToString());
    EXPECT(ms < 100, "operation %d to the dead rank took %f ms to fail", i, ms);
  }
  const int peer = 1 - w.rank();
  int got = -1;
  Request rr;
  OK(w.Irecv(&got, sizeof(got), peer, 4, &rr));
  const int mine = 40 + w.rank();
  OK(w.Send(&mine, sizeof(mine), peer, 4));
  OK(rr.Wait());
  EXPECT(got == 40 + peer, "the healthy pair exchanged %d", got);
}
}  // namespace

// ---- Datatypes ---------------------------------------------------------------

using cartage::BasicType;
using cartage::Datatype;

// Value of matrix element (r, c) as rank `from` fills it.
double Cell(int from, int64_t r, int64_t c) { return from * 1e9 + static_cast<double>(r) * 1000 + static_cast<double>(c); }

// Columns of a rows x cols matrix go out as a vector type and land in a
// contiguous buffer on the other side, and back into a column (different
// types, one signature), at eager, pipelined and (CMA_MIN=0) rendezvous sizes;
// expected unexpected; a struct with gaps keeps its gaps; a typed receive too
// short is truncated element-exactly; a column to oneself.
void Datatypes(const Comm& w) {
  const Datatype dbl = Datatype::Basic(BasicType::kDouble);
  const int me = w.rank();
  const int peer = w.size() > 1 ? 1 - me : me;
  if (me > 1) return;
  for (int64_t rows : {1L, 7L, 900L, 40000L}) {  // 8 B .. 320 KB of column data
    constexpr int64_t kCols = 5;
    const Datatype column = *Datatype::Vector(rows, 1, kCols, dbl);
    std::vector<double> m(static_cast<std::size_t>(rows * kCols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < kCols; ++c) m[static_cast<std::size_t>(r * kCols + c)] = Cell(me, r, c);
    }
    // Column 3 out as a vector; the peer's column 3 in, contiguously.
    std::vector<double> flat(static_cast<std::size_t>(rows) + 1, -1.0);
    Request rr, sr;
    OK(w.Irecv(flat.data(), rows, dbl, peer, 20, &rr));
    OK(w.Isend(&m[3], 1, column, peer, 20, &sr));
    OK(cartage::WaitAll({&rr, &sr}));
    EXPECT(rr.bytes() == static_cast<uint64_t>(rows) * 8, "rows %d: %d bytes", rows, rr.bytes());
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT(flat[static_cast<std::size_t>(r)] == Cell(peer, r, 3), "rows %d: element %d is %f", rows, r,
             flat[static_cast<std::size_t>(r)]);
    }
    EXPECT(flat.back() == -1.0, "rows %d: wrote past the contiguous buffer", rows);
    // Contiguous out, into column 1 of a fresh matrix; the other columns untouched.
    std::vector<double> into(m.size(), -2.0);
    OK(w.Irecv(&into[1], 1, column, peer, 21, &rr));
    OK(w.Isend(flat.data(), rows, dbl, peer, 21, &sr));
    OK(cartage::WaitAll({&rr, &sr}));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < kCols; ++c) {
        const double want = c == 1 ? Cell(me, r, 3) : -2.0;  // our own column 3, back via the peer
        EXPECT(into[static_cast<std::size_t>(r * kCols + c)] == want, "rows %d: (%d, %d) is %f, want %f", rows, r,
               c, into[static_cast<std::size_t>(r * kCols + c)], want);
      }
    }
    // Unexpected: the message is waiting before the typed receive is posted.
    std::fill(into.begin(), into.end(), -3.0);
    OK(w.Isend(&m[2], 1, column, peer, 22, &sr));
    OK(w.Probe(peer, 22).status());
    OK(w.Recv(&into[4], 1, column, peer, 22));
    OK(sr.Wait());
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT(into[static_cast<std::size_t>(r * kCols + 4)] == Cell(peer, r, 2), "rows %d: unexpected row %d", rows, r);
      EXPECT(into[static_cast<std::size_t>(r * kCols + 3)] == -3.0, "rows %d: unexpected wrote column 3", rows);
    }
  }
  // struct { int32 a; [4-byte gap] double x; } x 3000: gaps keep their bytes.
  struct Rec {
    int32_t a;
    int32_t gap;
    double x;
  };
  const int64_t bl[] = {1, 1}, disp[] = {offsetof(Rec, a), offsetof(Rec, x)};
  const Datatype parts[] = {Datatype::Basic(BasicType::kInt32), dbl};
  const Datatype rec = *Datatype::Struct(bl, disp, parts);
  constexpr int kRecs = 3000;
  std::vector<Rec> out(kRecs), in(kRecs);
  for (int i = 0; i < kRecs; ++i) {
    out[i] = {i * 3 + me, 0x5eed, i * 0.25 + me};
    in[i] = {-1, 0x7777, -1.0};
  }
  Request rr, sr;
  OK(w.Irecv(in.data(), kRecs, rec, peer, 23, &rr));
  OK(w.Isend(out.data(), kRecs, rec, peer, 23, &sr));
  OK(cartage::WaitAll({&rr, &sr}));
  EXPECT(rr.bytes() == kRecs * 12u, "struct: %d bytes", rr.bytes());
  for (int i = 0; i < kRecs; ++i) {
    EXPECT(in[i].a == i * 3 + peer && in[i].x == i * 0.25 + peer && in[i].gap == 0x7777, "struct %d: %d %d %f", i,
           in[i].a, in[i].gap, in[i].x);
  }
  // Truncation: 10 doubles into a 4-element column receive.
  const Datatype col4 = *Datatype::Vector(4, 1, 2, dbl);
  std::vector<double> ten(10), grid(8, -5.0);
  for (int i = 0; i < 10; ++i) ten[static_cast<std::size_t>(i)] = 100 + i;
  OK(w.Irecv(grid.data(), 1, col4, peer, 24, &rr));
  OK(w.Isend(ten.data(), 10, dbl, peer, 24, &sr));
  const absl::Status t = rr.Wait();
  OK(sr.Wait());
  EXPECT(t.code() == absl::StatusCode::kOutOfRange, "typed truncation gave %s", t.ToString());
  for (int i = 0; i < 8; ++i) {
    const double want = i % 2 == 0 ? 100 + i / 2 : -5.0;
    EXPECT(grid[static_cast<std::size_t>(i)] == want, "truncated grid[%d] = %f", i, grid[static_cast<std::size_t>(i)]);
  }
  // A bad count is refused at once, naming the operation and the type.
  const absl::Status bad = w.Isend(ten.data(), -1, dbl, peer, 25, &sr);
  EXPECT(bad.code() == absl::StatusCode::kInvalidArgument &&
             bad.message().find("invalid count -1 of double") != std::string::npos,
         "bad count gave %s", bad.ToString());
  // A column to oneself (the self method packs it once).
  std::vector<double> m(30), col(10, 0);
  for (int i = 0; i < 30; ++i) m[static_cast<std::size_t>(i)] = i;
  const Datatype self_col = *Datatype::Vector(10, 1, 3, dbl);
  OK(w.Irecv(col.data(), 10, dbl, me, 26, &rr));
  OK(w.Send(&m[1], 1, self_col, me, 26));
  OK(rr.Wait());
  for (int i = 0; i < 10; ++i) EXPECT(col[static_cast<std::size_t>(i)] == 3 * i + 1, "self column %d", i);
}

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "p2p_ranks: %s\n", std::string(agent.status().message()).c_str());
    return 2;
  }
  const Comm w = (*agent)->World();
  g_rank = w.rank();
  if (mode == "order") Order(w);
  else if (mode == "wildcard") Wildcard(w);
  else if (mode == "unexpected") Unexpected(w);
  else if (mode == "anytag") AnyTagAnySource(w);
  else if (mode == "sizes") Sizes(w);
  else if (mode == "truncation") Truncation(w);
  else if (mode == "cancel") Cancel(w);
  else if (mode == "ssend") Ssend(w);
  else if (mode == "probe") ProbeThenRecv(w);
  else if (mode == "holdprobe") HoldThenProbe(w);
  else if (mode == "dup") DupIsolation(w);
  else if (mode == "badargs") BadArguments(w);
  else if (mode == "earlyexit") EarlyExit(w);
  else if (mode == "persistent") Persistent(w, **agent);
  else if (mode == "waitvariants") WaitVariants(w);
  else if (mode == "split") Split(w);
  else if (mode == "self") Self(w);
  else if (mode == "datatypes") Datatypes(w);
  else if (mode == "outstanding") Outstanding(w);
  else if (mode == "exhaustion") Exhaustion(w);
  else if (mode == "peerdies") PeerDies(w);
  else if (mode == "vcerror") VcError(w);
  else if (mode == "killself") raise(SIGKILL);
  else {
    std::fprintf(stderr, "p2p_ranks: unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  if (w.rank() == 0) std::printf("PASS %s\n", mode.c_str());
  return 0;
}
