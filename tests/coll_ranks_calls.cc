// coll_ranks: persistent schedules, calls in flight at once on two
// communicators, and the selection table steering a real job.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "fsm/trace.h"
#include "tests/coll_ranks.h"

namespace cartage::test::coll {

namespace {

// Keeps the schedule_run records, "from --event--> to" each, and hands
// everything on to the sink it displaced (CARTAGE_TRACE's, where set).
class RunRecords : public fsm::TraceSink {
 public:
  RunRecords() : next_(fsm::SetTraceSink(this)) {}
  ~RunRecords() override { fsm::SetTraceSink(next_); }
  void Record(const fsm::TraceRecord& r) override {
    if (r.machine != nullptr && r.machine->machine == "schedule_run") {
      lines_.push_back(absl::StrCat(r.machine->states[r.from], " --", r.machine->events[r.event].name, "--> ",
                                    r.machine->states[r.to]));
    }
    if (next_ != nullptr) next_->Record(r);
  }
  uint64_t BeginSpan(absl::string_view name, uint32_t context) override {
    return next_ != nullptr ? next_->BeginSpan(name, context) : 1;
  }
  void EndSpan(uint64_t call, absl::string_view name, uint32_t context, bool ok) override {
    if (next_ != nullptr) next_->EndSpan(call, name, context, ok);
  }
  std::string Lines() const { return absl::StrJoin(lines_, "; "); }

 private:
  fsm::TraceSink* next_;
  std::vector<std::string> lines_;
};

}  // namespace

// An allreduce summing `count` elements of `type` (`alg`: empty, the
// selection table's).
CollectiveCall SumCall(const void* in, void* out, int64_t count, BasicType type, const char* alg) {
  CollectiveCall call;
  call.kind = Collective::kAllreduce;
  call.send = in;
  call.recv = out;
  call.count = count;
  call.type = Datatype::Basic(type);
  call.op = Op(OpKind::kSum);
  call.algorithm = alg;
  return call;
}

void Persistent(const Comm& w) {
  const int n = w.size();
  constexpr int64_t kCount = 33;
  std::vector<int32_t> in(kCount), out(kCount);
  const CollectiveCall call = SumCall(in.data(), out.data(), kCount, BasicType::kInt32);
  Request req;
  KIT_OK(cartage::InitCollective(w, call, &req));
  KIT_EXPECT(req.persistent(), "persistent");
  for (int it = 0; it < 1000; ++it) {
    for (int64_t i = 0; i < kCount; ++i) in[static_cast<std::size_t>(i)] = static_cast<int32_t>(it * 3 + w.rank() + i);
    KIT_OK(req.Start());
    KIT_OK(req.Wait());
    for (int64_t i = 0; i < kCount; ++i) {
      const int32_t want = static_cast<int32_t>(n * (it * 3 + i) + n * (n - 1) / 2);
      KIT_EXPECT(out[static_cast<std::size_t>(i)] == want, "start %d element %d: %d, expected %d", it, i,
             out[static_cast<std::size_t>(i)], want);
    }
  }
  KIT_OK(req.Free());

  // Ring step by hand: receive from the left, send to the right, add.
  const int right = (w.rank() + 1) % n, left = (w.rank() + n - 1) % n;
  std::vector<double> x(8), tmp(8);
  cartage::ScheduleBuilder b(w, "ring step");
  const cartage::Buf t = b.Temp(8 * sizeof(double));
  const auto rv = b.Recv(t, 8 * sizeof(double), left);
  const auto sv = b.Send(cartage::Buf::User(x.data(), "x"), 8 * sizeof(double), right);
  b.Reduce(t, cartage::Buf::User(x.data(), "x"), 8, Datatype::Basic(BasicType::kDouble), Op(OpKind::kSum), {rv, sv});
  auto schedule = b.Build();
  KIT_OK(schedule.status());
  for (int it = 0; it < 1000; ++it) {
    for (int i = 0; i < 8; ++i) x[static_cast<std::size_t>(i)] = w.rank() * 10 + i + it;
    KIT_OK((*schedule)->Run());
    for (int i = 0; i < 8; ++i) {
      const double want = (w.rank() * 10 + i + it) + (left * 10 + i + it);
      KIT_EXPECT(x[static_cast<std::size_t>(i)] == want, "ring step %d element %d: %g, expected %g", it, i,
             x[static_cast<std::size_t>(i)], want);
    }
  }

  // A relay down the ranks: receive a partial sum, add this rank's part,
  // copy it out, pass it on. The add and the copy run with the receive
  // (RunsWith): its completion must run both before it releases the send.
  {
    const Datatype i64 = Datatype::Basic(BasicType::kInt64);
    constexpr uint64_t kBytes = 5 * sizeof(int64_t);
    std::vector<int64_t> mine(5), sum(5);
    cartage::ScheduleBuilder rb(w, "relay");
    const cartage::Buf partial = rb.Temp(kBytes);
    const cartage::Buf m = cartage::Buf::User(mine.data(), "mine"), y = cartage::Buf::User(sum.data(), "sum");
    cartage::VertexId add = -1, last = -1;
    if (w.rank() == 0) {
      last = rb.Copy(m, y, kBytes);
    } else {
      const cartage::VertexId got = rb.Recv(partial, kBytes, w.rank() - 1);
      add = rb.Reduce(partial, m, 5, i64, Op(OpKind::kSum), {got});
      last = rb.Copy(m, y, kBytes, {add});
    }
    cartage::VertexId pass = -1;
    if (w.rank() + 1 < n) pass = rb.Send(y, kBytes, w.rank() + 1, {last});
    auto relay = rb.Build();
    KIT_OK(relay.status());
    if (w.rank() > 0) {
      KIT_EXPECT((*relay)->RunsWith(add) == 0 && (*relay)->RunsWith(last) == 0,
             "relay: the add and the copy run with the receive (vertex 0), not %d and %d", (*relay)->RunsWith(add),
             (*relay)->RunsWith(last));
      // The receive releases nothing but the send, which starts as it ends
      // (ForwardsFrom): it runs alone, as its request's car_recv, whose
      // state its fused steps show too.
      KIT_EXPECT((*relay)->RunsAlone(0), "relay: rank %d's receive does not run alone", w.rank());
      KIT_EXPECT(pass < 0 || (*relay)->ForwardsFrom(pass) == 0, "relay: rank %d's send starts as %d ends", w.rank(),
             (*relay)->ForwardsFrom(pass));
      KIT_EXPECT((*relay)->StateOf(0) == "idle" && (*relay)->StateOf(add) == "idle",
             "relay: before the first run the receive is idle, not %s", (*relay)->StateOf(0));
    }
    for (int it = 0; it < 500; ++it) {
      for (int64_t i = 0; i < 5; ++i) mine[static_cast<std::size_t>(i)] = int64_t{it} * 1000 + w.rank() * 10 + i;
      KIT_OK((*relay)->Run());
      const int64_t r1 = w.rank() + 1;
      for (int64_t i = 0; i < 5; ++i) {
        const int64_t want = r1 * (int64_t{it} * 1000 + i) + 10 * r1 * (r1 - 1) / 2;
        KIT_EXPECT(sum[static_cast<std::size_t>(i)] == want, "relay run %d element %d: %d, expected %d", it, i,
               sum[static_cast<std::size_t>(i)], want);
      }
    }
    if (w.rank() > 0) {
      KIT_EXPECT((*relay)->StateOf(0) == "done" && (*relay)->StateOf(add) == "done" && (*relay)->StateOf(last) == "done",
             "relay: after the runs the receive and its steps are done, not %s, %s, %s", (*relay)->StateOf(0),
             (*relay)->StateOf(add), (*relay)->StateOf(last));
    }
  }

  // A linear allreduce's reduces wait only for its sends and receives,
  // which wait for nothing: the reduces run last (RunsLast), as the run
  // ends, but where one's one predecessor is a receive, whose one
  // successor it is (it then runs with it), and the receives run alone.
  // 300 runs, results checked.
  if (n >= 3) {
    std::vector<int64_t> lin_in(4), lin_out(4);
    auto lin = cartage::BuildCollective(w, SumCall(lin_in.data(), lin_out.data(), 4, BasicType::kInt64, "linear"));
    KIT_OK(lin.status());
    std::vector<cartage::VertexId> reduces;
    for (std::size_t v = 0; v < (*lin)->vertices().size(); ++v) {
      const auto id = static_cast<cartage::VertexId>(v);
      if ((*lin)->vertices()[v].kind == cartage::VertexKind::kReduce) {
        reduces.push_back(id);
        KIT_EXPECT((*lin)->RunsLast(id) || (*lin)->RunsWith(id) != id,
               "allreduce/linear: reduce %d neither runs last nor with a receive", id);
      } else {
        KIT_EXPECT((*lin)->RunsAlone(id), "allreduce/linear: step %d does not run alone", id);
      }
    }
    KIT_EXPECT(static_cast<int>(reduces.size()) == n - 1 && (*lin)->StateOf(reduces.front()) == "idle",
           "allreduce/linear: %d reduces, the first %s before any run", reduces.size(),
           reduces.empty() ? "-" : (*lin)->StateOf(reduces.front()));
    for (int it = 0; it < 300; ++it) {
      for (int64_t i = 0; i < 4; ++i) lin_in[static_cast<std::size_t>(i)] = int64_t{it} * 1000 + w.rank() * 7 + i;
      KIT_OK((*lin)->Run());
      for (int64_t i = 0; i < 4; ++i) {
        const int64_t want = n * (int64_t{it} * 1000 + i) + 7 * n * (n - 1) / 2;
        KIT_EXPECT(lin_out[static_cast<std::size_t>(i)] == want, "allreduce/linear run %d element %d: %d, expected %d", it,
               i, lin_out[static_cast<std::size_t>(i)], want);
      }
    }
    for (cartage::VertexId v : reduces) {
      KIT_EXPECT((*lin)->StateOf(v) == "done", "allreduce/linear: reduce %d is %s after the runs", v, (*lin)->StateOf(v));
    }
  }

  // A step that runs last does not run when the run failed before it: rank
  // 0 sends its right neighbour half of what that rank receives. The
  // receiver's run fails naming the receive, its sum stays as it was and
  // its add shows "cancelled"; every other rank adds ("done").
  {
    int64_t mine[2] = {w.rank() + 1, 100 * (w.rank() + 1)}, sum[2] = {-1, -1};
    const Datatype i64 = Datatype::Basic(BasicType::kInt64);
    cartage::ScheduleBuilder cb(w, "closing");
    const cartage::Buf got = cb.Temp(sizeof(mine));
    const cartage::Buf m = cartage::Buf::User(mine, "mine"), y = cartage::Buf::User(sum, "sum");
    const int from = (w.rank() + n - 1) % n, to = (w.rank() + 1) % n;
    const cartage::VertexId send = cb.Send(m, w.rank() == 0 ? sizeof(int64_t) : sizeof(mine), to);
    const cartage::VertexId recv = cb.Recv(got, sizeof(mine), from);
    const cartage::VertexId copy = cb.Copy(m, y, sizeof(mine));
    const cartage::VertexId add = cb.Reduce(got, y, 2, i64, Op(OpKind::kSum), {recv, copy});
    auto closing = cb.Build();
    KIT_OK(closing.status());
    KIT_EXPECT((*closing)->RunsLast(add) && (*closing)->RunsLast(copy) && (*closing)->RunsAlone(send) &&
               (*closing)->RunsAlone(recv),
           "closing: the add and the copy run last, the send and the receive alone");
    // Its run's table: the two steps that run last are `step`s in `last`
    // where the run went well; where the receive came short the run fails
    // as its counted steps end, and neither runs.
    std::optional<RunRecords> records(std::in_place);
    const absl::Status st = (*closing)->Run();
    const std::string run = records->Lines();
    records.reset();
    const std::string want = from == 0 ? "idle --start--> running; running --ended--> failed"
                                       : "idle --start--> running; running --ended--> last; last --step--> last; "
                                         "last --step--> last; last --ended--> done";
    KIT_EXPECT(run == want, "closing on rank %d: its run went %s, expected %s", w.rank(), run, want);
    if (from == 0) {  // rank 1 (rank 0 itself with 1 rank)
      KIT_EXPECT(st.code() == absl::StatusCode::kInvalidArgument &&
                 absl::StrContains(st.message(), "closing (rank ") && absl::StrContains(st.message(), "vertex 1") &&
                 absl::StrContains(st.message(), "received 8 bytes, expected 16"),
             "closing on rank %d: %s", w.rank(), st.ToString());
      KIT_EXPECT(sum[0] == -1 && sum[1] == -1, "closing on rank %d: the sum was written (%d %d)", w.rank(), sum[0],
             sum[1]);
      KIT_EXPECT((*closing)->StateOf(copy) == "cancelled" && (*closing)->StateOf(add) == "cancelled",
             "closing: after the failed run the copy is %s, the add %s", (*closing)->StateOf(copy),
             (*closing)->StateOf(add));
    } else {
      KIT_OK(st);
      KIT_EXPECT(sum[0] == w.rank() + 1 + from + 1 && sum[1] == 100 * (w.rank() + 1 + from + 1),
             "closing on rank %d: %d %d", w.rank(), sum[0], sum[1]);
      KIT_EXPECT((*closing)->StateOf(add) == "done", "closing: after the run the add is %s", (*closing)->StateOf(add));
    }
    KIT_OK(cartage::Barrier(w));
    ExpectNothingLeft(w, "the closing schedule");
  }

  // Blocking calls reuse one schedule with the buffers rebound: its sends
  // and receives are prepared again when their buffer moved, and kept when
  // it did not (the temporaries). Three buffer pairs in turn, results checked.
  std::vector<std::vector<int64_t>> ins(3, std::vector<int64_t>(kCount)), outs(3, std::vector<int64_t>(kCount));
  const Datatype i64 = Datatype::Basic(BasicType::kInt64);
  for (int it = 0; it < 300; ++it) {
    const auto k = static_cast<std::size_t>(it % 3);
    for (int64_t i = 0; i < kCount; ++i) ins[k][static_cast<std::size_t>(i)] = int64_t{it} * 1000 + w.rank() * 7 + i;
    KIT_OK(cartage::Allreduce(w, ins[k].data(), outs[k].data(), kCount, i64, Op(OpKind::kSum)));
    for (int64_t i = 0; i < kCount; ++i) {
      const int64_t want = n * (int64_t{it} * 1000 + i) + 7 * n * (n - 1) / 2;
      KIT_EXPECT(outs[k][static_cast<std::size_t>(i)] == want, "rebound call %d element %d: %d, expected %d", it, i,
             outs[k][static_cast<std::size_t>(i)], want);
    }
  }
  // The same with an alltoall, whose steps count down the run themselves
  // (2 ranks; every step of a linear one): started as they are while their
  // buffers stay, prepared again when they move. Each call's blocks are new.
  constexpr int64_t kBlock = 3;
  const auto block_elems = static_cast<std::size_t>(kBlock * n);
  std::vector<std::vector<int64_t>> a_ins(3, std::vector<int64_t>(block_elems)),
      a_outs(3, std::vector<int64_t>(block_elems));
  for (int it = 0; it < 300; ++it) {
    const auto k = static_cast<std::size_t>(it / 2 % 3);  // each pair twice running, then the next
    for (int q = 0; q < n; ++q) {
      for (int64_t i = 0; i < kBlock; ++i) {
        a_ins[k][static_cast<std::size_t>(q * kBlock + i)] = int64_t{it} * 100000 + w.rank() * 100 + q * 10 + i;
      }
    }
    std::fill(a_outs[k].begin(), a_outs[k].end(), -1);
    KIT_OK(cartage::Alltoall(w, a_ins[k].data(), a_outs[k].data(), kBlock, i64));
    for (int q = 0; q < n; ++q) {
      for (int64_t i = 0; i < kBlock; ++i) {
        const int64_t want = int64_t{it} * 100000 + q * 100 + w.rank() * 10 + i;
        const int64_t got = a_outs[k][static_cast<std::size_t>(q * kBlock + i)];
        KIT_EXPECT(got == want, "rebound alltoall call %d block %d element %d: %d, expected %d", it, q, i, got, want);
      }
    }
  }
  // The root alone switching to and from kInPlace: the other ranks reuse
  // their schedule, the root rebuilds its part under the same tags.
  for (int it = 0; it < 6; ++it) {
    const bool in_place = it % 2 == 1 && w.rank() == 0;
    std::vector<int64_t> mine(kCount), sum(kCount, -1);
    for (int64_t i = 0; i < kCount; ++i) mine[static_cast<std::size_t>(i)] = int64_t{it} * 100 + w.rank() + i;
    if (in_place) sum = mine;
    KIT_OK(cartage::Reduce(w, in_place ? cartage::kInPlace : mine.data(), sum.data(), kCount, i64, Op(OpKind::kSum), 0));
    for (int64_t i = 0; w.rank() == 0 && i < kCount; ++i) {
      const int64_t want = n * (int64_t{it} * 100 + i) + n * (n - 1) / 2;
      KIT_EXPECT(sum[static_cast<std::size_t>(i)] == want, "reduce call %d (root %s) element %d: %d, expected %d", it,
             in_place ? "in place" : "not in place", i, sum[static_cast<std::size_t>(i)], want);
    }
  }
  if (w.rank() == 0) std::printf("persistent: 1000 starts of each, 300 rebound blocking calls\n");
}

// Two collectives in flight at once on different communicators, and on one,
// with point-to-point traffic between them.
void Concurrent(const Comm& w) {
  const int n = w.size();
  const Comm d = w.Dup().value();
  constexpr int64_t kBig = 50000, kSmall = 17;
  std::vector<int32_t> a(kBig), ra(kBig), g(kSmall), rg(kSmall * static_cast<std::size_t>(n)), s(kSmall), rs(kSmall);
  for (int64_t i = 0; i < kBig; ++i) a[static_cast<std::size_t>(i)] = static_cast<int32_t>(w.rank() + i % 100);
  for (int64_t i = 0; i < kSmall; ++i) {
    g[static_cast<std::size_t>(i)] = static_cast<int32_t>(w.rank() * 1000 + i);
    s[static_cast<std::size_t>(i)] = static_cast<int32_t>(w.rank() + 1);
  }
  const Datatype i32 = Datatype::Basic(BasicType::kInt32);
  Request r1, r2, r3, p2p_s, p2p_r;
  KIT_OK(cartage::Iallreduce(w, a.data(), ra.data(), kBig, i32, Op(OpKind::kSum), &r1));
  KIT_OK(cartage::Iallgather(d, g.data(), rg.data(), kSmall, i32, &r2));
  KIT_OK(cartage::Iallreduce(w, s.data(), rs.data(), kSmall, i32, Op(OpKind::kMax), &r3));
  int token = w.rank(), got = -1;
  KIT_OK(w.Irecv(&got, sizeof(got), (w.rank() + n - 1) % n, 0, &p2p_r));
  KIT_OK(w.Isend(&token, sizeof(token), (w.rank() + 1) % n, 0, &p2p_s));
  KIT_OK(cartage::WaitAll({&r3, &p2p_s, &p2p_r, &r2, &r1}));
  for (int64_t i = 0; i < kBig; ++i) {
    const int32_t want = static_cast<int32_t>(n * (i % 100) + n * (n - 1) / 2);
    KIT_EXPECT(ra[static_cast<std::size_t>(i)] == want, "allreduce element %d: %d, expected %d", i,
           ra[static_cast<std::size_t>(i)], want);
  }
  for (int q = 0; q < n; ++q) {
    for (int64_t i = 0; i < kSmall; ++i) {
      KIT_EXPECT(rg[static_cast<std::size_t>(q * kSmall + i)] == q * 1000 + i, "allgather block %d element %d", q, i);
    }
  }
  for (int64_t i = 0; i < kSmall; ++i) KIT_EXPECT(rs[static_cast<std::size_t>(i)] == n, "max element %d", i);
  KIT_EXPECT(got == (w.rank() + n - 1) % n, "point-to-point token %d", got);
  // Errors: a bad root and an unknown algorithm are refused on every rank, naming them.
  std::vector<int32_t> buf(4);
  absl::Status bad = cartage::Bcast(w, buf.data(), 4, i32, n);
  KIT_EXPECT(bad.code() == absl::StatusCode::kInvalidArgument && bad.message().find("root") != std::string::npos,
         "%s", bad.ToString());
  CollectiveCall call;
  call.kind = Collective::kAllreduce;
  call.send = buf.data();
  call.recv = buf.data() + 2;
  call.count = 2;
  call.type = i32;
  call.op = Op::User(&AffineOp, false);
  call.algorithm = "ring";
  bad = cartage::RunCollective(w, call);
  KIT_EXPECT(bad.code() == absl::StatusCode::kInvalidArgument && bad.message().find("commutative") != std::string::npos,
         "%s", bad.ToString());
  call.algorithm = "no_such";
  bad = cartage::RunCollective(w, call);
  KIT_EXPECT(bad.message().find("recursive_doubling") != std::string::npos, "%s", bad.ToString());
  KIT_OK(cartage::Barrier(w));
  if (w.rank() == 0) std::printf("concurrent: 3 collectives and point-to-point at once\n");
}

// What the selection picks for a small allreduce (CARTAGE_COLLECTIVES_FILE
// may steer it), and that it runs; a broken selection file refuses the call.
bool Selection(const Comm& w) {
  const int n = w.size();
  std::vector<int32_t> in(2, w.rank() + 1), out(2);
  auto s = cartage::BuildCollective(w, SumCall(in.data(), out.data(), 2, BasicType::kInt32));
  if (!s.ok()) {  // every rank reads the same file: every rank refuses
    if (w.rank() == 0) std::printf("refused: %s\n", std::string(s.status().message()).c_str());
    return false;
  }
  if (w.rank() == 0) std::printf("selected %s\n", (*s)->name().c_str());
  KIT_OK((*s)->Run());
  KIT_EXPECT(out[0] == n * (n + 1) / 2 && out[1] == out[0], "allreduce: %d %d", out[0], out[1]);
  return true;
}

}  // namespace cartage::test::coll
