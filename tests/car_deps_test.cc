// CARs that depend on each other (seed 002): a receive that supplies its
// buffer and its progress to the send that forwards it, and what becomes of
// a dependent when its supplier fails, is cancelled, or has started.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/car_loopback.h"

namespace cartage::car::test {
namespace {

// A receive that supplies its buffer and/or its progress to a send (seed 002's
// forward): the receive is built first, the send names it.
struct Forward {
  Car* recv;
  Car* send;
};
Forward MakeForward(Loopback& loop, base::Completion* done, std::vector<char>& staging, int32_t in_tag,
                    int32_t out_tag, bool supply_buffer, const std::vector<char>* own_data) {
  CarSpec r;
  r.kind = CarKind::kRecv;
  r.flags = CarFlag::kRecvData | CarFlag::kSupplyProgress;
  r.envelope = {0, kSource, in_tag};
  r.counter = done;
  r.vc = &kLoopback;
  if (supply_buffer) {
    r.flags = r.flags | CarFlag::kSupplyPackedBuf;
    r.pack_buf = staging.data();
    r.pack_size = staging.size();
  } else {
    r.segment = Segment::Of(staging.data(), staging.size(), BasicType::kByte);
  }
  Car* recv = loop.Make(r);
  CarSpec s;
  s.kind = CarKind::kSend;
  s.flags = CarFlag::kSendData | CarFlag::kProgressDependency;
  s.envelope = {0, 2, out_tag};
  s.counter = done;
  s.vc = &kLoopback;
  s.eager_limit = 1 << 20;
  s.progress_dep = recv;
  if (supply_buffer) {
    s.flags = s.flags | CarFlag::kPackedBufDependency;
    s.buf_dep = recv;
  } else {
    s.segment = Segment::Of(own_data->data(), own_data->size(), BasicType::kByte);
  }
  done->pending += 2;
  return {recv, loop.Make(s)};
}

TEST_F(CarFsmChunkedTest, ForwardWithReceiverSuppliedBuffer) {
  // The receive lands 450 bytes in its packed buffer, hands the buffer to the
  // send, and the send forwards exactly those bytes once the receive is done.
  const std::vector<char> data = Pattern(450, 10);
  std::vector<char> staging(450, 0), out(450, 0);
  base::Completion fwd_done, out_done;
  Forward f = MakeForward(loop_, &fwd_done, staging, 10, 11, /*supply_buffer=*/true, nullptr);
  ASSERT_TRUE(Post(f.send).ok());
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kWaitDeps);
  EXPECT_EQ(f.send->deps_pending(), 2u);
  ASSERT_TRUE(Post(f.recv).ok());
  EXPECT_EQ(f.send->pack_buf(), staging.data()) << "the receive supplied its buffer at post";
  EXPECT_EQ(f.send->deps_pending(), 1u);
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kWaitDeps);

  Car* final_recv = Recv(out, 11, kSource, &out_done);
  ASSERT_TRUE(Post(final_recv).ok());
  ASSERT_TRUE(Post(Send(data, 10)).ok());
  ASSERT_TRUE(loop_.Drain().ok());
  EXPECT_EQ(staging, data);
  EXPECT_EQ(out, data) << "forwarded from the supplied buffer";
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kDone);
  EXPECT_TRUE(fwd_done.done());
  EXPECT_TRUE(fwd_done.status.ok());
  EXPECT_EQ(fwd_done.bytes, 900u) << "450 in, 450 out";
  EXPECT_TRUE(out_done.done());
}

TEST_F(CarFsmTest, ProgressDependencyHoldsASendUntilItsSupplierCompletes) {
  const std::vector<char> payload = Pattern(64, 11);
  std::vector<char> in(64), out(64);
  base::Completion chain, out_done;
  Forward f = MakeForward(loop_, &chain, in, 20, 21, /*supply_buffer=*/false, &payload);
  ASSERT_TRUE(Post(f.send).ok());
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kWaitDeps);
  ASSERT_TRUE(Post(f.recv).ok());
  EXPECT_TRUE(loop_.wire.empty()) << "nothing sent before the dependency is met";
  ASSERT_TRUE(Post(Send(Pattern(64, 12), 20)).ok());
  ASSERT_TRUE(loop_.ProgressOne().ok());  // envelope for the receive
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kWaitDeps);
  ASSERT_TRUE(loop_.ProgressOne().ok());  // its data: the receive completes, the send starts
  EXPECT_EQ(RecvMachine::StateOf(*f.recv), RecvState::kDone);
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kDone);
  EXPECT_TRUE(chain.done());
  Car* final_recv = Recv(out, 21, kSource, &out_done);
  ASSERT_TRUE(Post(final_recv).ok());
  ASSERT_TRUE(loop_.Drain().ok());
  EXPECT_EQ(out, payload);
}

TEST_F(CarFsmTest, FailedSupplierFailsItsDependent) {
  const std::vector<char> payload = Pattern(8, 1);
  std::vector<char> in(8);
  base::Completion chain;
  Forward f = MakeForward(loop_, &chain, in, 1, 2, /*supply_buffer=*/false, &payload);
  ASSERT_TRUE(Post(f.send).ok());
  ASSERT_TRUE(Post(f.recv).ok());
  CarSignal err;
  err.error = absl::UnavailableError("rank 0 died");
  ASSERT_TRUE(RecvMachine::Dispatch(*f.recv, RecvEvent::kError, err).ok());
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kFailed);
  EXPECT_TRUE(chain.done()) << "nobody is left waiting";
  EXPECT_EQ(f.send->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(f.send->status().message(),
            absl::StrFormat("send #%d to rank 2 (tag 2, context 0): a CAR it depends on ended "
                            "without completing: recv #%d from rank 0 (tag 1, context 0): rank 0 died",
                            f.send->id(), f.recv->id()));
  loop_.posted.clear();
}

TEST_F(CarFsmTest, CancelledSupplierReleasesItsDependent) {
  const std::vector<char> payload = Pattern(8, 1);
  std::vector<char> in(8);
  base::Completion chain;
  Forward f = MakeForward(loop_, &chain, in, 1, 2, false, &payload);
  ASSERT_TRUE(Post(f.send).ok());
  ASSERT_TRUE(Post(f.recv).ok());
  ASSERT_TRUE(RecvMachine::Dispatch(*f.recv, RecvEvent::kCancel).ok());
  EXPECT_EQ(SendMachine::StateOf(*f.send), SendState::kFailed);
  EXPECT_EQ(f.send->status().code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(chain.done());
}

TEST_F(CarFsmTest, StartedSupplierCannotTakeANewDependent) {
  std::vector<char> in(8);
  CarSpec r;
  r.kind = CarKind::kRecv;
  r.flags = CarFlag::kRecvData | CarFlag::kSupplyProgress;
  r.envelope = {0, kSource, 1};
  r.segment = Segment::Of(in.data(), in.size(), BasicType::kByte);
  r.counter = &recv_done_;
  r.vc = &kLoopback;
  recv_done_.pending = 1;
  Car* recv = loop_.Make(r);
  ASSERT_TRUE(Post(recv).ok());
  const std::vector<char> payload = Pattern(8, 1);
  CarSpec s;
  s.kind = CarKind::kSend;
  s.flags = CarFlag::kSendData | CarFlag::kProgressDependency;
  s.envelope = {0, 2, 2};
  s.segment = Segment::Of(payload.data(), payload.size(), BasicType::kByte);
  s.counter = &send_done_;
  s.vc = &kLoopback;
  s.progress_dep = recv;
  EXPECT_EQ(loop_.pool.Create(s).status().message(),
            absl::StrFormat("building send CAR: progress supplier CAR #%d has already started "
                            "(state posted)", recv->id()));
  ASSERT_TRUE(RecvMachine::Dispatch(*recv, RecvEvent::kCancel).ok());
}

}  // namespace
}  // namespace cartage::car::test
