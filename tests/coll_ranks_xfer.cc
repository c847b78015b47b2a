// coll_ranks: chains built from seed 002's xfer blocks in every buffer
// mode, and a burst of large sends.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/coll_ranks.h"

namespace cartage::test::coll {

// ---- the xfer interface ---------------------------------------------------------

// Chains 0 -> 1 -> ... -> n-1 built from xfer blocks, pipelined in 16 KiB
// chunks, in every buffer mode (and the policy's choice), every type, every
// size; each run twice:
//   bcast:      0 sends; the middle ranks recv_mop_forward (no op); the last recv_mop;
//   accumulate: the same with the op: rank r ends with P0 op Pr;
//   forward:    the middle ranks forward_op (nothing stays there); the last gets P0;
//   reduce:     gather blocks the other way: rank r combines what comes from r+1
//               into its own data and sends that on; rank 0 ends with P0 op ... op Pn-1.
// A burst of large sends (Schedule::SendsSingleCopy): the linear alltoall
// and allgather send every block at once, a binomial bcast's root its
// message to each child. With three or more blocks over 32 KiB, on a path
// with single-copy rendezvous and an eager limit above 32 KiB (shm with CMA
// where ranks outnumber CPUs), each goes single-copy; with 32 KiB blocks,
// fewer peers, or on a bcast's other ranks (each send waits for the
// receive), none does. Every call's bytes are checked, twice over (the
// second run restarts the capped requests).
void Burst(const Comm& w) {
  const int n = w.size();
  const int me = w.rank();
  const absl::StatusOr<cartage::PathInfo> path = w.PathTo((me + 1) % n);
  KIT_OK(path.status());
  const bool can = path->single_copy && path->eager_limit > cartage::Schedule::kBurstEagerCap;
  for (const int64_t block : {int64_t{64} << 10, int64_t{32} << 10}) {
    for (const Collective kind : {Collective::kAlltoall, Collective::kAllgather, Collective::kBcast}) {
      const bool bcast = kind == Collective::kBcast;
      const std::size_t blocks = kind == Collective::kAllgather || bcast ? 1 : static_cast<std::size_t>(n);
      Bytes in(blocks * static_cast<std::size_t>(block)), out(static_cast<std::size_t>(n * block));
      for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(me * 31 + i / block + i);
      CollectiveCall call;
      call.kind = kind;
      call.send = in.data();
      call.recv = bcast ? in.data() : out.data();
      call.count = block;
      call.algorithm = bcast ? "binomial" : "linear";
      absl::StatusOr<std::shared_ptr<cartage::Schedule>> s = cartage::BuildCollective(w, call);
      KIT_OK(s.status());
      int sends = 0, single = 0;
      for (std::size_t v = 0; v < (*s)->vertices().size(); ++v) {
        if ((*s)->vertices()[v].kind != cartage::VertexKind::kSend) continue;
        ++sends;
        if ((*s)->SendsSingleCopy(static_cast<cartage::VertexId>(v))) ++single;
      }
      const int start_at_once = bcast ? (me == 0 ? sends : 0) : n - 1;
      const bool burst = can && start_at_once >= static_cast<int>(cartage::Schedule::kBurstSends) &&
                         block > static_cast<int64_t>(cartage::Schedule::kBurstEagerCap);
      KIT_EXPECT(single == (burst ? sends : 0), "%s/%s of %d-byte blocks at %d ranks: %d of %d sends single-copy",
             cartage::CollectiveName(kind), call.algorithm, block, n, single, sends);
      for (int run = 0; run < 2; ++run) {
        std::fill(out.begin(), out.end(), 0);
        KIT_OK((*s)->Run());
        for (int p = 0; p < n && !bcast; ++p) {
          for (int64_t i = 0; i < block; ++i) {
            // alltoall: peer p's block for me; allgather: peer p's one block.
            const std::size_t j = static_cast<std::size_t>(kind == Collective::kAlltoall ? me * block + i : i);
            const auto want = static_cast<unsigned char>(p * 31 + j / block + j);
            const unsigned char got = out[static_cast<std::size_t>(p * block + i)];
            if (got != want) {
              KIT_EXPECT(false, "%s of %d-byte blocks, run %d: byte %d from rank %d is %d, expected %d",
                     cartage::CollectiveName(kind), block, run, i, p, got, want);
              break;
            }
          }
        }
      }
      if (me == 0) {
        std::printf("burst: %s/%s of %lld-byte blocks at %d ranks: %d of %d sends single-copy\n",
                    cartage::CollectiveName(kind), call.algorithm.c_str(), static_cast<long long>(block), n, single,
                    sends);
      }
    }
  }
}

void XferChains(const Comm& w) {
  using cartage::Buf;
  using cartage::BufferMode;
  using cartage::Segment;
  using cartage::Xfer;
  using cartage::XferOptions;
  const int r = w.rank(), n = w.size();
  const std::vector<std::optional<BufferMode>> modes = {std::nullopt, BufferMode::kSenderSupplies,
                                                        BufferMode::kReceiverSupplies, BufferMode::kUseSegment,
                                                        BufferMode::kUseTmp};
  enum Chain { kBcast, kAccumulate, kForward, kReduce };
  const char* kChainName[] = {"bcast", "accumulate", "forward", "reduce"};
  // What the policy reads, and the lending it forces.
  for (int peer = 0; peer < n; ++peer) {
    absl::StatusOr<cartage::PathInfo> path = w.PathTo(peer);
    KIT_OK(path.status());
    KIT_EXPECT(!path->method.empty() && !path->lends_buffers, "path to %d: %s lends %d", peer, path->method,
           path->lends_buffers);
    absl::StatusOr<std::shared_ptr<std::byte>> lent = w.LendBuffer(peer, 100);
    KIT_OK(lent.status());
    std::memset(lent->get(), 0x11, 100);
  }
  KIT_EXPECT(absl::StrContains(w.PathTo(n).status().message(), absl::StrFormat("path: no rank %d", n)), "%s",
         w.PathTo(n).status().ToString());
  KIT_EXPECT(absl::StrContains(w.LendBuffer(-1, 8).status().message(), "lend buffer: no rank -1"), "%s",
         w.LendBuffer(-1, 8).status().ToString());
  int runs = 0;
  for (const TypeCase& t : Types()) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{37}, int64_t{40009}}) {
      for (const std::optional<BufferMode>& mode : modes) {
        for (Chain chain : {kBcast, kAccumulate, kForward, kReduce}) {
          const std::string what =
              absl::StrFormat("xfer %s %s count %d mode %s", kChainName[chain], t.name, count,
                              mode.has_value() ? cartage::BufferModeName(*mode) : "policy");
          if (std::getenv("COLL_RANKS_TRACE") != nullptr) std::fprintf(stderr, "rank %d: %s\n", r, what.c_str());
          const XferOptions opts{.chunk_bytes = 16 << 10, .buffer = mode};
          const Bytes mine = Packed(t, r, 0, count);
          Bytes buf;
          auto fill = [&] {
            const bool garbage = (chain == kBcast || chain == kForward) && r > 0;
            const Bytes fresh = Layout(t, {{0, garbage ? Filler(t, count) : mine}}, count);
            buf.assign(fresh.begin(), fresh.end());  // same size: the schedule's pointer stays valid
          };
          fill();
          const Segment seg = Segment::Of(Buf::User(buf.data() - t.type.true_lb(), "buf"), count, t.type);
          cartage::ScheduleBuilder b(w, what);
          absl::Status built = absl::OkStatus();
          std::vector<BufferMode> got_modes;
          if (chain == kReduce) {
            Xfer x = Xfer::GatherInit(b, r == 0 ? cartage::kNoPeer : r - 1, opts);
            if (r + 1 < n) built.Update(x.RecvMopOp(seg, t.op, r + 1, /*piece_first=*/false));
            if (r > 0) built.Update(x.SendOp(seg));
            built.Update(x.Start().status());
          } else {
            Xfer x = Xfer::ScatterInit(b, r == 0 ? cartage::kNoPeer : r - 1, opts);
            const std::optional<Op> op = chain == kAccumulate ? t.op : std::nullopt;
            if (r == 0) {
              if (n > 1) built.Update(x.SendOp(seg, 1));
            } else if (r + 1 < n) {
              built.Update(chain == kForward ? x.ForwardOp(seg.bytes(), r + 1) : x.RecvMopForwardOp(seg, op, r + 1));
            } else {
              built.Update(x.RecvMopOp(seg, op));
            }
            built.Update(x.Start().status());
            got_modes = x.modes();
          }
          // A mode that cannot serve is refused, naming the op: USE_SEGMENT_BUF where the piece
          // is combined into its segment, or has none (forward_op).
          const bool refused =
              mode == BufferMode::kUseSegment && (chain == kAccumulate || chain == kForward) && r > 0 && r + 1 < n;
          if (refused) {
            KIT_EXPECT(!built.ok() &&
                       absl::StrContains(built.message(), chain == kForward ? "forward_op" : "recv_mop_forward_op") &&
                       absl::StrContains(built.message(), "USE_SEGMENT_BUF"),
                   "%s: expected a refusal, got %s", what, built.ToString());
          } else {
            KIT_EXPECT(built.ok(), "%s: %s", what, built.ToString());
          }
          // Every rank must agree to run it: one refusal skips it everywhere.
          int32_t ok = built.ok() ? 1 : 0, all_ok = 0;
          CollectiveCall agree;
          agree.kind = Collective::kAllreduce;
          agree.send = &ok;
          agree.recv = &all_ok;
          agree.count = 1;
          agree.type = Datatype::Basic(BasicType::kInt32);
          agree.op = Op(OpKind::kMin);
          KIT_OK(cartage::RunCollective(w, agree));
          if (all_ok == 0) continue;
          for (const BufferMode m : got_modes) {
            const BufferMode want = mode.has_value() ? *mode
                                    : (t.type.contiguous() && chain == kBcast) ? BufferMode::kUseSegment
                                                                               : BufferMode::kUseTmp;
            KIT_EXPECT(m == want, "%s: chunk forwarded by %s, expected %s", what, cartage::BufferModeName(m),
                   cartage::BufferModeName(want));
          }
          auto schedule = b.Build();
          KIT_OK(schedule.status());
          for (int run = 0; run < 2; ++run) {
            fill();
            KIT_OK((*schedule)->Run());
            std::vector<int> ranks;
            Bytes want_packed;
            if (chain == kBcast || (chain == kForward && r + 1 == n)) {
              want_packed = Packed(t, 0, 0, count);
            } else if (chain == kForward) {
              want_packed = r == 0 ? mine : Filler(t, count);
            } else if (chain == kAccumulate) {
              want_packed = r == 0 ? mine : Reduced(t, {0, r}, 0, count);
            } else {
              for (int k = r; k < n; ++k) ranks.push_back(k);
              want_packed = Reduced(t, ranks, 0, count);
            }
            const Bytes want = Layout(t, {{0, want_packed}}, count);
            for (std::size_t i = 0; i < want.size() && count > 0; ++i) {
              KIT_EXPECT(buf[i] == want[i], "%s run %d: byte %d is 0x%02x, expected 0x%02x", what, run, i, buf[i],
                     want[i]);
            }
          }
          ++runs;
        }
      }
    }
  }
  if (r == 0) std::printf("xfer: %d chains checked\n", runs);
}

}  // namespace cartage::test::coll
