// The kit's request cases: cancel, synchronous send, probe, communicator
// isolation, bad arguments, persistent requests, the wait variants, split,
// a rank's messages to itself.
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

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "cartage/cartage.h"
#include "kit/cases.h"
#include "kit/check.h"

namespace cartage::kit {

void Cancel(const Comm& w, Agent&) {
  if (w.rank() == 1) {
    int v = 0;
    Request r;
    KIT_OK(w.Irecv(&v, sizeof(v), 0, 8, &r));
    KIT_OK(r.Cancel());
    const absl::Status s = r.Wait();
    KIT_EXPECT(s.code() == absl::StatusCode::kCancelled, "cancelled receive gave %s", s.ToString());
    Ready(w, 99);
    KIT_OK(w.Recv(&v, sizeof(v), 0, 8));
    KIT_EXPECT(v == 42, "the message after the cancel carried %d", v);
    Request done;
    KIT_EXPECT(!done.Cancel().ok(), "cancelling an inactive request must fail");
  } else if (w.rank() == 0) {
    Ready(w, 99);
    const int v = 42;
    KIT_OK(w.Send(&v, sizeof(v), 1, 8));
  }
}

void Ssend(const Comm& w, Agent&) {
  for (std::size_t n : {8ul, 100000ul}) {
    std::vector<unsigned char> buf(n, 1);
    if (w.rank() == 0) {
      Request r;
      KIT_OK(w.Issend(buf.data(), n, 1, 2, &r));
      const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
      while (std::chrono::steady_clock::now() < until) {
        KIT_EXPECT(!r.Test(), "ssend of %d bytes completed before the receive was posted", n);
      }
      char go = 'g';
      KIT_OK(w.Send(&go, 1, 1, 9));
      KIT_OK(r.Wait());
    } else if (w.rank() == 1) {
      char go = 0;
      KIT_OK(w.Recv(&go, 1, 0, 9));
      KIT_OK(w.Recv(buf.data(), n, 0, 2));
    }
  }
}

void ProbeThenRecv(const Comm& w, Agent&) {
  if (w.rank() == 0) {
    std::vector<unsigned char> msg(777);
    Fill(msg, 777);
    KIT_OK(w.Send(msg.data(), msg.size(), 1, 3));
  } else if (w.rank() == 1) {
    absl::StatusOr<ProbeResult> p = w.Probe(kAnySource, kAnyTag);
    KIT_OK(p.status());
    KIT_EXPECT(p->source == 0 && p->tag == 3 && p->bytes == 777, "probe saw %d %d %d", p->source, p->tag,
           static_cast<int>(p->bytes));
    std::vector<unsigned char> buf(p->bytes), want(777);
    Fill(want, 777);
    KIT_OK(w.Recv(buf.data(), buf.size(), p->source, p->tag));
    KIT_EXPECT(buf == want, "probed message differs");
    absl::StatusOr<std::optional<ProbeResult>> none = w.Iprobe(kAnySource, kAnyTag);
    KIT_OK(none.status());
    KIT_EXPECT(!none->has_value(), "nothing should be left");
    // Arguments are checked as a receive's are, by Iprobe and by a blocking Probe (which must not wait).
    for (const auto& [source, tag] : {std::pair{w.size(), 0}, std::pair{-5, 0}, std::pair{0, -9}, std::pair{0, kMaxTag + 1},
                                      std::pair{kAnySource, -2}}) {
      const absl::Status quick = w.Iprobe(source, tag).status();
      const absl::Status blocking = w.Probe(source, tag).status();
      KIT_EXPECT(quick.code() == absl::StatusCode::kInvalidArgument && blocking.code() == quick.code() &&
                     blocking.message() == quick.message(),
                 "probe (%d, %d): %s / %s", source, tag, quick.ToString(), blocking.ToString());
      KIT_EXPECT(absl::StrContains(quick.message(), tag < 0 || tag > kMaxTag ? "invalid tag" : "no such rank"),
                 "probe (%d, %d): %s", source, tag, quick.ToString());
    }
  }
}

// A message that arrives while its receiver waits on another one may be
// held back unread in the method (shm's rings) until a receive is posted;
// an Iprobe must still find it, and the receive it waited on must still
// complete when its message comes.
void HoldThenProbe(const Comm& w, Agent&) {
  if (w.rank() == 0) {
    const int a = 40, b = 41;
    KIT_OK(w.Send(&a, sizeof(a), 1, 40));
    Ready(w, 1);  // nothing follows `a` to rank 1 until it probed
    KIT_OK(w.Send(&b, sizeof(b), 1, 41));
  } else if (w.rank() == 1) {
    int a = 0, b = 0;
    Request rb;
    KIT_OK(w.Irecv(&b, sizeof(b), 0, 41, &rb));
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    while (std::chrono::steady_clock::now() < until) KIT_EXPECT(!rb.Test(), "tag 41 came before it was sent");
    std::optional<ProbeResult> found;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!found.has_value() && std::chrono::steady_clock::now() < deadline) {
      absl::StatusOr<std::optional<ProbeResult>> p = w.Iprobe(0, 40);
      KIT_OK(p.status());
      found = *p;
    }
    KIT_EXPECT(found.has_value() && found->tag == 40 && found->bytes == sizeof(int), "Iprobe did not see tag 40");
    KIT_OK(w.Recv(&a, sizeof(a), 0, 40));
    Ready(w, 1);
    KIT_OK(rb.Wait());
    KIT_EXPECT(a == 40 && b == 41, "got %d and %d", a, b);
  }
}

void DupIsolation(const Comm& w, Agent&) {
  const Comm other = DupOf(w);
  KIT_EXPECT(other.context() != w.context(), "dup kept the context");
  if (w.rank() == 0) {
    const int b = 2, a = 1;
    KIT_OK(other.Send(&b, sizeof(b), 1, 1));
    KIT_OK(w.Send(&a, sizeof(a), 1, 1));
  } else if (w.rank() == 1) {
    int got = 0;
    KIT_OK(w.Recv(&got, sizeof(got), 0, 1));
    KIT_EXPECT(got == 1, "world received %d: the dup's message crossed over", got);
    KIT_OK(other.Recv(&got, sizeof(got), 0, 1));
    KIT_EXPECT(got == 2, "dup received %d", got);
  }
}

void BadArguments(const Comm& w, Agent&) {
  int v = 0;
  Request r;
  absl::Status s = w.Isend(&v, sizeof(v), w.size(), 0, &r);
  KIT_EXPECT(s.code() == absl::StatusCode::kInvalidArgument &&
             s.message() == absl::StrFormat("send to rank %d (tag 0): no such rank in a communicator of %d",
                                            w.size(), w.size()),
         "%s", s.ToString());
  s = w.Isend(&v, sizeof(v), 0, -3, &r);
  KIT_EXPECT(s.code() == absl::StatusCode::kInvalidArgument, "%s", s.ToString());
  s = w.Isend(&v, sizeof(v), 0, kAnyTag, &r);
  KIT_EXPECT(s.code() == absl::StatusCode::kInvalidArgument, "wildcard tag on a send: %s", s.ToString());
  s = w.Irecv(nullptr, 8, 0, 0, &r);
  KIT_EXPECT(s.code() == absl::StatusCode::kInvalidArgument, "%s", s.ToString());
  KIT_OK(w.Irecv(&v, sizeof(v), 0, 1, &r));
  s = w.Isend(&v, sizeof(v), 0, 0, nullptr);
  KIT_EXPECT(s.code() == absl::StatusCode::kFailedPrecondition, "%s", s.ToString());
  KIT_OK(r.Cancel());
  KIT_EXPECT(r.Wait().code() == absl::StatusCode::kCancelled, "cancel");
}

void Persistent(const Comm& w, Agent& agent) {
  // A persistent send and receive, started 1000 times; the buffers are
  // registered with the method once each.
  std::vector<int> out(64), in(64);
  Request send, recv;
  const int peer = 1 - w.rank();
  if (w.rank() > 1) return;
  KIT_OK(w.SendInit(out.data(), out.size() * sizeof(int), peer, 4, &send));
  KIT_OK(w.RecvInit(in.data(), in.size() * sizeof(int), peer, 4, &recv));
  KIT_EXPECT(agent.registered_buffers() == 2, "%d buffers registered", agent.registered_buffers());
  KIT_EXPECT(!send.active() && send.persistent(), "a fresh persistent request is inactive");
  for (int i = 0; i < 1000; ++i) {
    for (int k = 0; k < 64; ++k) out[static_cast<std::size_t>(k)] = i * 1000 + k + w.rank();
    KIT_OK(recv.Start());
    KIT_OK(send.Start());
    KIT_EXPECT(send.Start().code() == absl::StatusCode::kFailedPrecondition, "restart while active");
    KIT_OK(WaitAll({&recv, &send}));
    for (int k = 0; k < 64; ++k) {
      KIT_EXPECT(in[static_cast<std::size_t>(k)] == i * 1000 + k + peer, "round %d word %d: %d", i, k,
             in[static_cast<std::size_t>(k)]);
    }
    KIT_EXPECT(recv.bytes() == 256 && recv.source() == peer, "round %d status", i);
  }
  KIT_EXPECT(agent.registered_buffers() == 2, "still %d registrations after 1000 starts", agent.registered_buffers());
  Request plain;
  KIT_EXPECT(plain.Start().code() == absl::StatusCode::kFailedPrecondition, "start of a plain request");
  KIT_OK(send.Free());
  KIT_OK(recv.Free());
  KIT_EXPECT(agent.registered_buffers() == 0, "%d registrations left", agent.registered_buffers());
}

void WaitVariants(const Comm& w, Agent&) {
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
    for (int i = 0; i < kN; ++i) KIT_OK(w.Irecv(&v[static_cast<std::size_t>(i)], sizeof(int), 1, i, ptrs[static_cast<std::size_t>(i)]));
    KIT_EXPECT(!TestAll(absl::MakeConstSpan(ptrs)), "nothing can have arrived yet");
    char go = 1;
    KIT_OK(w.Send(&go, 1, 1, 98));
    absl::StatusOr<std::size_t> first = WaitAny(absl::MakeConstSpan(ptrs));
    KIT_OK(first.status());
    KIT_EXPECT(*first < kN && v[*first] == static_cast<int>(*first) * 100 && !ptrs[*first]->active(),
           "WaitAny gave %d", static_cast<int>(*first));
    std::vector<std::size_t> got = {*first};
    while (got.size() < kN) {
      absl::StatusOr<std::vector<std::size_t>> some = WaitSome(absl::MakeConstSpan(ptrs));
      KIT_OK(some.status());
      got.insert(got.end(), some->begin(), some->end());
    }
    std::sort(got.begin(), got.end());
    for (int i = 0; i < kN; ++i) {
      KIT_EXPECT(got[static_cast<std::size_t>(i)] == static_cast<std::size_t>(i) && v[static_cast<std::size_t>(i)] == i * 100,
             "request %d: %d", i, v[static_cast<std::size_t>(i)]);
    }
    KIT_EXPECT(!WaitAny(absl::MakeConstSpan(ptrs)).ok(), "WaitAny with none active");
    KIT_EXPECT(!TestAny(absl::MakeConstSpan(ptrs)).has_value(), "TestAny with none active");
    KIT_EXPECT(TestAll(absl::MakeConstSpan(ptrs)), "TestAll when all are done");
  } else if (w.rank() == 1) {
    Ready(w, 99);
    char go = 0;
    KIT_OK(w.Recv(&go, 1, 0, 98));
    for (int t : {5, 2, 7, 0, 1, 3, 4, 6}) {
      const int v = t * 100;
      KIT_OK(w.Send(&v, sizeof(v), 0, t));
    }
  }
}

void Split(const Comm& w, Agent&) {
  // Even and odd ranks; keys reverse the order within each half.
  absl::StatusOr<std::optional<Comm>> half = w.Split(w.rank() % 2, -w.rank());
  KIT_OK(half.status());
  KIT_EXPECT(half->has_value(), "every rank has a color");
  const Comm& h = **half;
  const int expect_size = (w.size() + 1 - w.rank() % 2) / 2;
  KIT_EXPECT(h.size() == expect_size, "half of %d has %d ranks", w.size(), h.size());
  KIT_EXPECT(h.context() != w.context(), "split kept the context");
  // Rank order is by key (the negated world rank): the members above me come first.
  KIT_EXPECT(h.rank() == (w.size() - 1 - w.rank()) / 2, "world rank %d is rank %d of its half", w.rank(), h.rank());
  // A ring inside the half: each sends its world rank to the next.
  const int next = (h.rank() + 1) % h.size(), prev = (h.rank() + h.size() - 1) % h.size();
  int got = -1;
  const int me = w.rank();
  Request rr, sr;
  KIT_OK(h.Irecv(&got, sizeof(got), prev, 3, &rr));
  KIT_OK(h.Isend(&me, sizeof(me), next, 3, &sr));
  KIT_OK(WaitAll({&rr, &sr}));
  KIT_EXPECT(got % 2 == me % 2, "rank %d got %d from the other half", me, got);
  KIT_EXPECT(rr.source() == prev, "source %d, expected %d (ranks of the split)", rr.source(), prev);
  // The previous rank in the half is the next-higher world rank, or wraps to the lowest.
  const int want = h.size() == 1 ? me : (me + 2 < w.size() ? me + 2 : me % 2);
  KIT_EXPECT(got == want, "world rank %d got %d, expected %d", me, got, want);
  // Out of range in the split is checked against its own size.
  KIT_EXPECT(h.Isend(&me, sizeof(me), h.size(), 0, &sr).code() == absl::StatusCode::kInvalidArgument, "range");
  // A rank that takes no color gets no communicator; the others carry on.
  absl::StatusOr<std::optional<Comm>> some = w.Split(w.rank() == 0 ? -1 : 0, 0);
  KIT_OK(some.status());
  KIT_EXPECT(some->has_value() == (w.rank() != 0), "color -1 joins none");
  if (some->has_value()) KIT_EXPECT((*some)->size() == w.size() - 1 && (*some)->rank() == w.rank() - 1, "ranks");
}

void Self(const Comm& w, Agent&) {
  // A rank's messages to itself, eager and rendezvous, posted both ways round.
  for (std::size_t n : {0ul, 8ul, 5000ul, 300000ul}) {
    std::vector<unsigned char> out(n), in(n + 8, 0xcd);
    Fill(out, n + static_cast<std::size_t>(w.rank()));
    Request r, s;
    KIT_OK(w.Irecv(in.data(), n, w.rank(), 6, &r));
    KIT_OK(w.Isend(out.data(), n, w.rank(), 6, &s));
    KIT_OK(WaitAll({&r, &s}));
    KIT_EXPECT(r.source() == w.rank() && r.bytes() == n, "self status %d %d", r.source(), static_cast<int>(r.bytes()));
    KIT_EXPECT(n == 0 || std::memcmp(in.data(), out.data(), n) == 0, "self payload of %d bytes", n);
    KIT_OK(w.Isend(out.data(), n, w.rank(), 7, &s));  // unexpected first
    KIT_OK(w.Recv(in.data(), n, w.rank(), 7));
    KIT_OK(s.Wait());
    KIT_EXPECT(n == 0 || std::memcmp(in.data(), out.data(), n) == 0, "self unexpected payload of %d bytes", n);
  }
  // Synchronous sends to oneself complete only once matched, whichever comes first.
  int v = 7, got = 0;
  Request ss;
  KIT_OK(w.Issend(&v, sizeof(v), w.rank(), 8, &ss));
  KIT_EXPECT(!ss.Test() && !ss.Test(), "an ssend to oneself completed before its receive");
  KIT_OK(w.Recv(&got, sizeof(got), w.rank(), 8));
  KIT_OK(ss.Wait());
  Request rr;
  KIT_OK(w.Irecv(&got, sizeof(got), w.rank(), 9, &rr));
  KIT_OK(w.Ssend(&v, sizeof(v), w.rank(), 9));
  KIT_OK(rr.Wait());
  // A wildcard receive is bound to no method until it matches a self message.
  const int tag = 100 + w.rank();
  Request any;
  KIT_OK(w.Irecv(&got, sizeof(got), kAnySource, tag, &any));
  v = 4242;
  KIT_OK(w.Ssend(&v, sizeof(v), w.rank(), tag));
  KIT_OK(any.Wait());
  KIT_EXPECT(got == 4242 && any.source() == w.rank(), "wildcard got %d from %d", got, any.source());
  // Truncation to oneself.
  std::vector<unsigned char> big(1000, 9), small(16, 0);
  Request tr;
  KIT_OK(w.Irecv(small.data(), 8, w.rank(), 10, &tr));
  KIT_OK(w.Send(big.data(), big.size(), w.rank(), 10));
  KIT_EXPECT(tr.Wait().code() == absl::StatusCode::kOutOfRange, "truncation to oneself");
  KIT_EXPECT(small[8] == 0, "wrote past the buffer");
}

}  // namespace cartage::kit
