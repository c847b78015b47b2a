// coll_ranks: calls that fail (disagreeing counts, a dead rank) end on
// every rank, and leave no message behind.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/coll_ranks.h"

namespace cartage::test::coll {

// ---- faults ----------------------------------------------------------------------

// Nothing of the collectives' traffic is left waiting on this rank. Called
// after a collective of every rank (a barrier, an allreduce), which took
// every message sent to this rank before it; the fence after the look
// (point-to-point, on another context) keeps a faster rank's next
// collective from sending meanwhile.
void ExpectNothingLeft(const Comm& w, const char* after) {
  const auto left = cartage::engine::CollectiveChannel(w).Iprobe(cartage::kAnySource, cartage::kAnyTag);
  KIT_EXPECT(left.ok() && !left->has_value(), "after %s: a message of %d bytes from rank %d (tag %d) left unreceived",
         after, left.ok() && left->has_value() ? static_cast<int>((*left)->bytes) : -1,
         left.ok() && left->has_value() ? (*left)->source : -1, left.ok() && left->has_value() ? (*left)->tag : -1);
  constexpr int kFenceTag = 77;
  char token = 0;
  if (w.rank() == 0) {
    for (int r = 1; r < w.size(); ++r) KIT_OK(w.Recv(&token, 1, r, kFenceTag));
    for (int r = 1; r < w.size(); ++r) KIT_OK(w.Send(&token, 1, r, kFenceTag));
  } else {
    KIT_OK(w.Send(&token, 1, 0, kFenceTag));
    KIT_OK(w.Recv(&token, 1, 0, kFenceTag));
  }
}

// Ranks that disagree about the count, or a rank that died: every rank's
// call returns (none waits for ever on a message a failed peer will not
// send: its schedule drains) with an error naming the collective and the
// step, and none of the failed runs' messages is left behind.
//   sizes: rank 0 passes half the count of the others, small (eager) to
//          large (rendezvous), to every allreduce algorithm (blocking and
//          nonblocking) and every bcast algorithm; then an agreeing
//          allreduce must be exact;
//   dead:  the last rank exits; the others run every allreduce algorithm
//          (each needs every rank's data: each must fail) and a bcast;
//   all:   every algorithm of every collective, counts c and 2c (below).
bool Faults(const Comm& w, const std::string& what) {
  const int n = w.size();
  const Datatype i32 = Datatype::Basic(BasicType::kInt32);
  auto call_of = [&](Collective kind, const char* alg, int64_t count, std::vector<int32_t>& in,
                     std::vector<int32_t>& out) {
    CollectiveCall call;
    call.kind = kind;
    call.send = in.data();
    call.recv = kind == Collective::kBcast ? in.data() : out.data();
    call.count = count;
    call.type = i32;
    if (kind == Collective::kAllreduce) call.op = Op(OpKind::kSum);
    call.algorithm = alg;
    return call;
  };
  const char* kAllreduce[] = {"recursive_doubling", "ring", "rabenseifner", "linear", "star"};
  if (what == "sizes") {
    for (const int64_t base : {int64_t{2} * n, int64_t{4096}, int64_t{1} << 16}) {
      const int64_t count = w.rank() == 0 ? base : 2 * base;
      std::vector<int32_t> in(static_cast<std::size_t>(2 * base), w.rank() + 1), out(in.size(), 0);
      if (n == 2) {
        // Each step of a 2-rank alltoall or allgather runs alone, its CAR
        // counting down the run's completion itself (Schedule::StartAlone):
        // a receive cut short (rank 1) or truncated (rank 0) must still be
        // named by its vertex.
        std::vector<int32_t> all_in(static_cast<std::size_t>(4 * base), 1), all_out(all_in.size(), 0);
        for (const cartage::AlgorithmInfo& a : cartage::Algorithms()) {
          if (a.collective != Collective::kAlltoall && a.collective != Collective::kAllgather) continue;
          const absl::Status s = cartage::RunCollective(w, call_of(a.collective, a.name, count, all_in, all_out));
          const std::string step = absl::StrCat(cartage::CollectiveName(a.collective), "/", a.name, " (rank ",
                                                w.rank(), "): vertex ");
          // Rank 1 expects its peer's block of 2 * base elements, which comes
          // short; from a star's rank 0, whose own receive came too long,
          // nothing (a drain) where both blocks were expected.
          const std::string expected = std::string(a.name) == "star"
                                           ? absl::StrCat("sent nothing where ", 16 * base, " bytes were expected")
                                           : absl::StrCat("expected ", 8 * base);
          KIT_EXPECT((s.code() == absl::StatusCode::kOutOfRange || s.code() == absl::StatusCode::kInvalidArgument) &&
                     absl::StrContains(s.message(), step) &&
                     (w.rank() == 0 || absl::StrContains(s.message(), expected)),
                 "%s/%s of %d against %d elements: %s", cartage::CollectiveName(a.collective), a.name, count, base,
                 s.ToString());
        }
      }
      for (const char* alg : kAllreduce) {
        for (const bool nonblocking : {false, true}) {
          const CollectiveCall call = call_of(Collective::kAllreduce, alg, count, in, out);
          Request req;
          absl::Status s;
          if (nonblocking) {
            s = cartage::StartCollective(w, call, &req);
            if (s.ok()) s = req.Wait();
          } else {
            s = cartage::RunCollective(w, call);
          }
          KIT_EXPECT(s.code() == absl::StatusCode::kOutOfRange || s.code() == absl::StatusCode::kInvalidArgument,
                 "allreduce/%s of %d against %d elements (%s): %s", alg, count, base,
                 nonblocking ? "nonblocking" : "blocking", s.ToString());
          KIT_EXPECT(absl::StrContains(s.message(), absl::StrCat("allreduce/", alg, " (rank ", w.rank(), "): vertex ")),
                 "%s", s.ToString());
        }
      }
      // A bcast whose pieces differ in number (64 KiB chunks) has a different
      // shape on the root: the others wait for chunks it never sends, which
      // no rank can tell from a slow root (as in MPI, an erroneous program).
      if (2 * base * 4 > 64 << 10) continue;
      for (const char* alg : {"binomial", "chain", "scatter_allgather", "linear"}) {
        const absl::Status s = cartage::RunCollective(w, call_of(Collective::kBcast, alg, count, in, out));
        // The root only sends: what it sent was whole. Every other rank
        // received too little, or nothing from a parent that failed.
        KIT_EXPECT(w.rank() == 0 || s.code() == absl::StatusCode::kInvalidArgument, "bcast/%s of %d against %d: %s", alg,
               count, base, s.ToString());
      }
      KIT_OK(cartage::Barrier(w));
      ExpectNothingLeft(w, "the disagreeing calls");
    }
    std::vector<int32_t> in(8, w.rank() + 1), out(8, 0);
    for (const char* alg : kAllreduce) {
      std::fill(out.begin(), out.end(), 0);
      KIT_OK(cartage::RunCollective(w, call_of(Collective::kAllreduce, alg, 8, in, out)));
      for (int32_t v : out) KIT_EXPECT(v == n * (n + 1) / 2, "allreduce/%s after the failures: %d", alg, v);
    }
  } else if (what == "dead") {
    if (w.rank() == n - 1) {
      std::fflush(stdout);
      _exit(0);  // gone without finalizing
    }
    std::vector<int32_t> in(4 * static_cast<std::size_t>(n), w.rank() + 1), out(in.size(), 0);
    for (const char* alg : kAllreduce) {
      const absl::Status s =
          cartage::RunCollective(w, call_of(Collective::kAllreduce, alg, static_cast<int64_t>(in.size()), in, out));
      KIT_EXPECT(s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kInvalidArgument,
             "allreduce/%s with rank %d dead: %s", alg, n - 1, s.ToString());
    }
    const absl::Status b = cartage::Bcast(w, in.data(), static_cast<int64_t>(in.size()), i32, 0);
    KIT_EXPECT(b.ok() || b.code() == absl::StatusCode::kUnavailable || b.code() == absl::StatusCode::kInvalidArgument,
           "bcast with rank %d dead: %s", n - 1, b.ToString());
    std::printf("rank %d: every call returned\n", w.rank());
    return false;  // no barrier with a dead rank
  } else if (what == "killed") {
    // The launcher is stopped (it reaps nobody and reports nothing), then
    // the last rank is killed in a run of allreduces and stays an unreaped
    // zombie: every survivor finds it gone by itself, and its call fails
    // within 2 s, naming it.
    const pid_t launcher = ::getppid();
    // Every rank is past start-up, which the launcher serves, and connected
    // with every other (tcp looks a peer's address up in the launcher's
    // exchange at its first connection).
    for (int d = 1; d < n; ++d) {
      char out = 1, in = 0;
      Request rq;
      KIT_OK(w.Irecv(&in, 1, (w.rank() + n - d) % n, 9, &rq));
      KIT_OK(w.Send(&out, 1, (w.rank() + d) % n, 9));
      KIT_OK(rq.Wait());
    }
    if (w.rank() == 0) {
      KIT_EXPECT(::kill(launcher, SIGSTOP) == 0, "stopping the launcher: %s", std::strerror(errno));
      // Whatever happens, the launcher goes on after 30 s (its --timeout then ends a hang).
      std::thread([launcher] {
        std::this_thread::sleep_for(std::chrono::seconds(30));
        ::kill(launcher, SIGCONT);
      }).detach();
    }
    KIT_OK(cartage::Barrier(w));
    absl::Status failure;
    double failed_after = 0;
    for (int i = 0;; ++i) {
      if (w.rank() == n - 1 && i == 300) ::raise(SIGKILL);
      int32_t one = 1, sum = 0;
      const auto start = std::chrono::steady_clock::now();
      const absl::Status s = cartage::Allreduce(w, &one, &sum, 1, i32, Op(OpKind::kSum));
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (s.ok()) {
        KIT_EXPECT(sum == n, "allreduce %d: %d", i, sum);
        continue;
      }
      failure = s;
      failed_after = secs;
      std::printf("rank %d: allreduce %d failed after %.3f s: %s\n", w.rank(), i, secs,
                  std::string(s.message()).c_str());
      std::fflush(stdout);
      break;
    }
    // The survivors still reach one another: rank 0 lets the launcher go on
    // once every one of them has its answer (right or wrong).
    char token = 0;
    if (w.rank() == 0) {
      for (int r = 1; r < n - 1; ++r) KIT_OK(w.Recv(&token, 1, r, 5));
      ::kill(launcher, SIGCONT);
    } else {
      KIT_OK(w.Send(&token, 1, 0, 5));
    }
    KIT_EXPECT(failed_after < 2, "the allreduce took %.3f s to fail: %s", failed_after, failure.ToString());
    KIT_EXPECT(absl::StrContains(failure.message(), absl::StrCat("rank ", n - 1, " exited")), "%s",
               failure.ToString());
    return false;
  } else if (what == "all") {
    // Every algorithm of every collective but barrier, roots 0 and n-1:
    // rank 0 passes count c, the others 2c (buffers laid out for each rank's
    // own view). Each call must return on every rank, at least one rank
    // must say so (a disagreement never passes unnoticed everywhere), and
    // nothing may be left behind.
    const std::vector<TypeCase> types = Types();
    const TypeCase& t = types[0];
    int calls = 0;
    for (const cartage::AlgorithmInfo& a : cartage::Algorithms()) {
      if (a.collective == Collective::kBarrier) continue;
      std::vector<int> roots = {0};
      if (cartage::Rooted(a.collective) && n > 1) roots.push_back(n - 1);
      for (const int64_t c : {int64_t{3}, int64_t{5000}}) {
        for (const int root : roots) {
          CollectiveCall call;
          call.kind = a.collective;
          call.count = w.rank() == 0 ? c : 2 * c;
          call.type = t.type;
          if (cartage::Reduces(a.collective)) call.op = t.op;
          call.root = root;
          call.algorithm = a.name;
          const Plan plan = MakePlan(t, call, w.rank(), n, false);
          Bytes send = Layout(t, plan.send, plan.send_span);
          Bytes recv = Layout(t, plan.before, plan.recv_span);
          call.send = send.data();
          call.recv = plan.recv_in_place ? const_cast<void*>(cartage::kInPlace) : recv.data();
          const absl::Status s = cartage::RunCollective(w, call);
          int32_t failed = s.ok() ? 0 : 1, failures = 0;
          KIT_OK(cartage::Allreduce(w, &failed, &failures, 1, Datatype::Basic(BasicType::kInt32), Op(OpKind::kSum)));
          KIT_EXPECT(failures > 0, "%s/%s counts %d and %d, root %d: every rank succeeded",
                 cartage::CollectiveName(a.collective), a.name, c, 2 * c, root);
          ExpectNothingLeft(w, absl::StrCat(cartage::CollectiveName(a.collective), "/", a.name).c_str());
          ++calls;
        }
      }
    }
    if (w.rank() == 0) std::printf("faults all: %d disagreeing calls ended on %d ranks\n", calls, n);
  } else {
    KIT_EXPECT(false, "faults: unknown case '%s' (sizes, dead, killed or all)", what);
  }
  return true;
}

}  // namespace cartage::test::coll
