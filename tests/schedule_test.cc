// Schedules in one process: the builder's validation, which steps need no
// car_vertex of their own, and seed 002's xfer blocks (policy, chunking,
// buffer modes).
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cartage/collectives.h"
#include "cartage/schedule.h"
#include "cartage/xfer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/sum_of_ints.h"

namespace cartage::test {
namespace {

using ::testing::HasSubstr;

TEST(ScheduleBuilder, RejectsACycleNamingAVertexOnIt) {
  ScheduleBuilder b(0, 2, "cyclic");
  const Buf t = b.Temp(8);
  const VertexId a = b.Recv(t, 8, 1);
  const VertexId s = b.Send(t, 8, 1, {a});
  b.Depend(s, a);
  auto built = b.Build();
  ASSERT_FALSE(built.ok());
  EXPECT_EQ(built.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(built.status().message(), HasSubstr("schedule cyclic (rank 0): vertex 0 (recv): is on a dependency cycle"));
}

TEST(ScheduleBuilder, RejectsAReadOfATemporaryNobodyWroteFirst) {
  ScheduleBuilder b(0, 2, "unordered");
  const Buf t = b.Temp(16);
  b.Recv(t, 8, 1);                    // writes [0, 8)
  const VertexId s = b.Send(t, 16, 1);  // reads [0, 16), waits for nothing
  auto built = b.Build();
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.status().message(),
              HasSubstr(absl::StrCat("vertex ", s, " (send): reads source [0, 16) of temporary buffer 0")));
  // Waiting for the receive is not enough either: it wrote only half.
  ScheduleBuilder b2(0, 2, "half");
  const Buf t2 = b2.Temp(16);
  const VertexId r2 = b2.Recv(t2, 8, 1);
  b2.Send(t2, 16, 1, {r2});
  EXPECT_FALSE(b2.Build().ok());
  // Covered by two writes it waits for: fine.
  ScheduleBuilder b3(0, 2, "covered");
  const Buf t3 = b3.Temp(16);
  const VertexId x = b3.Recv(t3, 8, 1);
  const VertexId y = b3.Recv(t3 + 8, 8, 1);
  b3.Send(t3, 16, 1, {x, y});
  EXPECT_TRUE(b3.Build().ok());
}

TEST(ScheduleBuilder, RejectsSizesThatDisagree) {
  ScheduleBuilder b(0, 2, "sizes");
  const Buf t = b.Temp(8);
  b.Copy(Buf::User(nullptr, "x"), t + 4, 8);
  auto built = b.Build();
  ASSERT_FALSE(built.ok());
  EXPECT_THAT(built.status().message(),
              HasSubstr("vertex 0 (copy): destination [4, 12) is past the end of the 8-byte temporary buffer 0"));
  ScheduleBuilder b2(0, 2, "peer");
  b2.Send(Buf{}, 0, 2);
  EXPECT_THAT(b2.Build().status().message(), HasSubstr("vertex 0 (send): no rank 2 in a communicator of 2"));
  ScheduleBuilder b3(0, 2, "op");
  const Buf t3 = b3.Temp(64);
  b3.Reduce(t3, t3 + 32, 2, Datatype::Basic(BasicType::kComplexDouble), Op(OpKind::kMax));
  EXPECT_THAT(b3.Build().status().message(), HasSubstr("max is not defined on complex_double"));
}

TEST(ScheduleBuilder, ALocalStepThatOnlyFollowsAReceiveRunsWithIt) {
  ScheduleBuilder b(0, 2, "fused");
  const Buf t = b.Temp(16), x = Buf::User(nullptr, "x"), y = Buf::User(nullptr, "y");
  const VertexId r = b.Recv(t, 8, 1);
  const VertexId add = b.Reduce(t, x, 2, kI32, Op(OpKind::kSum), {r});  // its one predecessor, its one successor
  const VertexId copy = b.Copy(x, y, 8, {add});                          // the chain goes on
  const VertexId s = b.Send(y, 8, 1, {copy});                            // a send never runs with it
  const VertexId r2 = b.Recv(t + 8, 8, 1);
  const VertexId both = b.Reduce(t + 8, x, 2, kI32, Op(OpKind::kSum), {r2, copy});  // two predecessors
  const VertexId r3 = b.Recv(y, 8, 1, {s});
  const VertexId a3 = b.Copy(y, x, 8, {r3});
  const VertexId f3 = b.Fence({r3});  // r3 has two successors: neither runs with it
  const VertexId s4 = b.Send(x, 8, 1, {a3, f3, both});
  const VertexId after_send = b.Copy(x, y, 8, {s4});  // follows a send: a CAR of its own
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status();
  const Schedule& k = **built;
  // "add" had to wait for r alone, and nothing waited for r but "add": the
  // receive's completion runs it, then "copy", then releases the send.
  EXPECT_EQ(k.RunsWith(add), r);
  EXPECT_EQ(k.RunsWith(copy), r);
  for (VertexId own : {r, s, r2, both, r3, a3, f3, s4, after_send}) EXPECT_EQ(k.RunsWith(own), own) << own;
  // A receive with two successors runs neither.
  ScheduleBuilder b2(0, 2, "shared");
  const Buf t2 = b2.Temp(8);
  const VertexId q = b2.Recv(t2, 8, 1);
  const VertexId q1 = b2.Reduce(t2, x, 2, kI32, Op(OpKind::kSum), {q});
  const VertexId q2 = b2.Send(t2, 8, 1, {q});
  auto built2 = b2.Build();
  ASSERT_TRUE(built2.ok()) << built2.status();
  EXPECT_EQ((*built2)->RunsWith(q1), q1);
  EXPECT_EQ((*built2)->RunsWith(q2), q2);
  // 2-rank recursive doubling: exchange, then add what came in.
  auto rd = BuildCollective(0, 2, SumOfInts(2, "recursive_doubling"));
  ASSERT_TRUE(rd.ok()) << rd.status();
  const std::vector<Vertex>& v = (*rd)->vertices();
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[2].kind, VertexKind::kReduce);
  EXPECT_EQ(v[1].kind, VertexKind::kRecv);
  EXPECT_EQ((*rd)->RunsWith(2), 1);
}

TEST(ScheduleBuilder, ALocalStepThatNeitherFollowsNorPrecedesAnythingRunsWithASend) {
  ScheduleBuilder b(0, 3, "loose");
  const Buf t = b.Temp(16), x = Buf::User(nullptr, "x"), y = Buf::User(nullptr, "y");
  const VertexId r = b.Recv(t, 8, 1);
  const VertexId own = b.Copy(x, y, 8);        // waits for nothing, nothing waits for it
  const VertexId s = b.Send(x, 8, 2);          // the first send that waits for nothing: the host
  const VertexId s2 = b.Send(x + 8, 8, 1);     // another: Begin starts it before s
  const VertexId feeds = b.Copy(x, t + 8, 8);  // something waits for it: a CAR of its own
  const VertexId s3 = b.Send(t + 8, 8, 2, {feeds});
  const VertexId fence = b.Fence();            // loose too
  const VertexId add = b.Reduce(t, y, 2, kI32, Op(OpKind::kSum), {r});  // runs with the receive
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status();
  const Schedule& k = **built;
  EXPECT_EQ(k.RunsWith(own), s);
  EXPECT_EQ(k.RunsWith(fence), s);
  EXPECT_EQ(k.RunsWith(add), r);
  for (VertexId v : {r, s, s2, feeds, s3}) EXPECT_EQ(k.RunsWith(v), v) << v;
  // With no send that waits for nothing, such a step keeps its own CAR.
  ScheduleBuilder b2(0, 2, "no host");
  const Buf t2 = b2.Temp(8);
  const VertexId q = b2.Recv(t2, 8, 1);
  const VertexId c2 = b2.Copy(x, y, 8);
  const VertexId q2 = b2.Send(t2, 8, 1, {q});
  auto built2 = b2.Build();
  ASSERT_TRUE(built2.ok()) << built2.status();
  for (VertexId v : {q, c2, q2}) EXPECT_EQ((*built2)->RunsWith(v), v) << v;
  // 2-rank alltoall: the copy of the rank's own block runs with the send.
  CollectiveCall call;
  call.kind = Collective::kAlltoall;
  call.algorithm = "pairwise";
  call.count = 2;
  call.type = kI32;
  auto a2a = BuildCollective(0, 2, call);
  ASSERT_TRUE(a2a.ok()) << a2a.status();
  const std::vector<Vertex>& v = (*a2a)->vertices();
  ASSERT_EQ(v.size(), 3u);
  EXPECT_EQ(v[0].kind, VertexKind::kCopy);
  EXPECT_EQ(v[1].kind, VertexKind::kSend);
  EXPECT_EQ((*a2a)->RunsWith(0), 1);
}

TEST(ScheduleBuilder, ASendOrReceiveThatWaitsForNothingAndReleasesNothingRunsAlone) {
  ScheduleBuilder b(0, 3, "alone");
  const Buf t = b.Temp(16), x = Buf::User(nullptr, "x"), y = Buf::User(nullptr, "y");
  const VertexId lone_recv = b.Recv(y, 8, 1);                           // no edge at all
  const VertexId lone_send = b.Send(x, 8, 2);                           // no edge at all
  const VertexId fused_recv = b.Recv(t, 8, 1);                          // its fused add releases nothing
  const VertexId add = b.Reduce(t, y + 8, 2, kI32, Op(OpKind::kSum), {fused_recv});
  const VertexId feeding_recv = b.Recv(t + 8, 8, 2);                    // a send waits for it alone
  const VertexId waiting_send = b.Send(t + 8, 8, 1, {feeding_recv});   // and starts as it ends
  const VertexId shared_recv = b.Recv(y + 32, 8, 2);                    // two steps wait for it
  const VertexId fan_send = b.Send(y + 32, 8, 1, {shared_recv});
  const VertexId fan_copy = b.Copy(y + 32, x + 24, 8, {shared_recv, fan_send});  // and for the send
  const VertexId releasing_send = b.Send(x + 8, 8, 1);                  // a copy waits for it
  const VertexId after = b.Copy(y + 16, x + 8, 8, {releasing_send});
  const VertexId relayed = b.Send(x + 8, 8, 2, {after});                // and a send for the copy
  const VertexId local = b.Copy(x, y + 16, 8);                          // loose: runs with a send
  const VertexId closing_send = b.Send(x + 16, 8, 2);                   // only a step that runs last waits for it
  const VertexId closing = b.Copy(y + 24, x + 16, 8, {closing_send});
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status();
  const Schedule& k = **built;
  for (VertexId v : {lone_recv, lone_send, fused_recv, closing_send, feeding_recv}) EXPECT_TRUE(k.RunsAlone(v)) << v;
  for (VertexId v : {add, waiting_send, releasing_send, after, relayed, local, closing, shared_recv, fan_send,
                     fan_copy}) {
    EXPECT_FALSE(k.RunsAlone(v)) << v;
  }
  // A send that waits for one receive alone, which waits for nothing,
  // starts as the receive ends; one that something waits for does not.
  EXPECT_EQ(k.ForwardsFrom(waiting_send), feeding_recv);
  for (VertexId v : {fan_send, relayed, lone_send, feeding_recv}) EXPECT_EQ(k.ForwardsFrom(v), -1) << v;
  EXPECT_EQ(k.ForwardsFrom(-1), -1);
  EXPECT_NE(k.ToDot().find(absl::StrFormat("starts as %d ends", feeding_recv)), std::string::npos);
  // The relay's send waits for a copy after a send, but not for the lone
  // receives: it may not wait for them, so it does not start last.
  for (VertexId v : {relayed, fan_send, waiting_send, lone_send}) EXPECT_FALSE(k.StartsLast(v)) << v;
  EXPECT_TRUE(k.RunsLast(closing));
  for (VertexId v : {add, after, local}) EXPECT_FALSE(k.RunsLast(v)) << v;
  EXPECT_EQ(k.RunsWith(add), fused_recv);
  EXPECT_FALSE(k.RunsAlone(-1));
  EXPECT_FALSE(k.RunsAlone(100));
  // A 2-rank dissemination barrier is one exchange: both steps run alone.
  // With 4 ranks every receive and the first round's send do; the first
  // round's receive starts the second round's send as it ends.
  CollectiveCall barrier;
  barrier.algorithm = "dissemination";
  auto bar2 = BuildCollective(0, 2, barrier);
  ASSERT_TRUE(bar2.ok()) << bar2.status();
  ASSERT_EQ((*bar2)->vertices().size(), 2u);
  EXPECT_TRUE((*bar2)->RunsAlone(0) && (*bar2)->RunsAlone(1));
  auto bar4 = BuildCollective(0, 4, barrier);
  ASSERT_TRUE(bar4.ok()) << bar4.status();
  ASSERT_EQ((*bar4)->vertices().size(), 4u);
  EXPECT_TRUE((*bar4)->RunsAlone(0) && (*bar4)->RunsAlone(1) && (*bar4)->RunsAlone(3));
  EXPECT_FALSE((*bar4)->RunsAlone(2));
  EXPECT_EQ((*bar4)->ForwardsFrom(2), 1);
}

TEST(ScheduleBuilder, ALocalStepThatWaitsOnlyForStepsRunningAloneRunsLast) {
  // A linear allreduce's shape: receives into temporaries, then a chain of
  // reduces over them. Every reduce runs last, so the receives run alone.
  ScheduleBuilder b(0, 3, "closing");
  const Buf t = b.Temp(16), x = Buf::User(nullptr, "x"), y = Buf::User(nullptr, "y");
  const VertexId r1 = b.Recv(t, 8, 1);
  const VertexId r2 = b.Recv(t + 8, 8, 2);
  const VertexId s1 = b.Send(x, 8, 1);
  const VertexId s2 = b.Send(x, 8, 2);
  const VertexId first = b.Reduce(t, t + 8, 2, kI32, Op(OpKind::kSum), {r1, r2});
  const VertexId second = b.Reduce(x, t + 8, 2, kI32, Op(OpKind::kSum), {first, s1, s2});
  const VertexId out = b.Copy(t + 8, y, 8, {second});
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status();
  const Schedule& k = **built;
  for (VertexId v : {first, second, out}) EXPECT_TRUE(k.RunsLast(v)) << v;
  for (VertexId v : {r1, r2, s1, s2}) EXPECT_TRUE(k.RunsAlone(v) && !k.RunsLast(v)) << v;
  EXPECT_EQ(k.StateOf(first), "unbuilt");  // built for rendering: no run
  EXPECT_FALSE(k.RunsLast(-1));
  EXPECT_FALSE(k.RunsLast(100));
  EXPECT_NE(k.ToDot().find("runs last"), std::string::npos);

  // One send at the end of the chain is enough: every step before it waits
  // for a vertex CAR, so none runs last and no receive runs alone.
  ScheduleBuilder b2(0, 3, "relaying");
  const Buf t2 = b2.Temp(16);
  const VertexId q1 = b2.Recv(t2, 8, 1);
  const VertexId q2 = b2.Recv(t2 + 8, 8, 2);
  const VertexId sum = b2.Reduce(t2, t2 + 8, 2, kI32, Op(OpKind::kSum), {q1, q2});
  const VertexId copy = b2.Copy(t2 + 8, t2, 8, {sum});
  const VertexId pass = b2.Send(t2, 8, 1, {copy});
  // A step after a receive that waits for a send does not either.
  const VertexId q3 = b2.Recv(y, 8, 2, {pass});
  const VertexId late = b2.Copy(y, x, 8, {q3});
  const VertexId q4 = b2.Recv(y + 8, 8, 1);
  const VertexId joined = b2.Copy(y + 8, x + 8, 8, {q4, late});
  auto built2 = b2.Build();
  ASSERT_TRUE(built2.ok()) << built2.status();
  const Schedule& k2 = **built2;
  for (VertexId v : {sum, copy, joined}) EXPECT_FALSE(k2.RunsLast(v)) << v;
  for (VertexId v : {q1, q2, q3, q4, pass}) EXPECT_FALSE(k2.RunsAlone(v)) << v;
  EXPECT_EQ(k2.RunsWith(late), q3);  // fused with its receive instead
}

TEST(ScheduleBuilder, ASendAfterEverythingThroughStepsThatRunLastStartsLast) {
  // A star's rank 0: it hears from every rank, combines, and answers each.
  // The receives run alone, the combining steps run last, and the answers
  // start last: no vertex CAR at all.
  ScheduleBuilder b(0, 3, "star");
  const Buf t = b.Temp(16), x = Buf::User(nullptr, "x");
  const VertexId own = b.Copy(x, t, 8);
  const VertexId r1 = b.Recv(t + 8, 8, 1);
  const VertexId r2 = b.Recv(x + 8, 8, 2);
  const VertexId sum = b.Reduce(t + 8, t, 2, kI32, Op(OpKind::kSum), {own, r1});
  const VertexId all = b.Fence({sum, r2});
  const VertexId a1 = b.Send(t, 8, 1, {all});
  const VertexId a2 = b.Send(t, 8, 2, {all});
  const VertexId out = b.Copy(t, x, 8, {all});
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status();
  const Schedule& k = **built;
  for (VertexId v : {r1, r2}) EXPECT_TRUE(k.RunsAlone(v)) << v;
  for (VertexId v : {own, sum, all, out}) EXPECT_TRUE(k.RunsLast(v)) << v;
  for (VertexId v : {a1, a2}) EXPECT_TRUE(k.StartsLast(v) && !k.RunsAlone(v) && !k.RunsLast(v)) << v;
  for (VertexId v : {own, r1, r2, sum, all, out, -1, 100}) EXPECT_FALSE(k.StartsLast(v)) << v;
  EXPECT_NE(k.ToDot().find("starts last"), std::string::npos);

  // A send that something waits for does not start last, nor do the steps
  // before it run last: a vertex CAR each.
  ScheduleBuilder b2(0, 3, "star, then more");
  const Buf t2 = b2.Temp(8);
  const VertexId q1 = b2.Recv(t2, 8, 1);
  const VertexId q2 = b2.Recv(x, 8, 2);
  const VertexId f2 = b2.Fence({q1, q2});
  const VertexId s2 = b2.Send(t2, 8, 1, {f2});
  const VertexId after = b2.Recv(t2, 8, 2, {s2});
  auto built2 = b2.Build();
  ASSERT_TRUE(built2.ok()) << built2.status();
  const Schedule& k2 = **built2;
  EXPECT_FALSE(k2.StartsLast(s2));
  EXPECT_FALSE(k2.RunsLast(f2));
  for (VertexId v : {q1, q2, after}) EXPECT_FALSE(k2.RunsAlone(v)) << v;

  // The star algorithms' rank 0 answers last; the other ranks run alone.
  for (const char* coll : {"barrier", "allreduce", "allgather", "alltoall"}) {
    CollectiveCall call;
    call.kind = *CollectiveByName(coll);
    call.count = 4;
    call.type = kI32;
    call.op = Op(OpKind::kSum);
    call.algorithm = "star";
    auto root = BuildCollective(0, 8, call);
    ASSERT_TRUE(root.ok()) << root.status();
    int last = 0;
    for (VertexId v = 0; v < static_cast<VertexId>((*root)->vertices().size()); ++v) {
      if ((*root)->StartsLast(v)) ++last;
      EXPECT_TRUE((*root)->RunsAlone(v) || (*root)->RunsLast(v) || (*root)->StartsLast(v)) << coll << " " << v;
    }
    EXPECT_EQ(last, 7) << coll;
    auto other = BuildCollective(3, 8, call);
    ASSERT_TRUE(other.ok()) << other.status();
    for (VertexId v = 0; v < static_cast<VertexId>((*other)->vertices().size()); ++v) {
      EXPECT_TRUE((*other)->RunsAlone(v) || (*other)->RunsLast(v)) << coll << " " << v;
    }
  }
}

TEST(ScheduleBuilder, AScheduleBuiltForRenderingRefusesToRunNamingItself) {
  ScheduleBuilder b(0, 2, "drawing");
  const Buf t = b.Temp(8);
  b.Send(t, 8, 1, {b.Recv(t, 8, 1)});
  auto built = b.Build();
  ASSERT_TRUE(built.ok()) << built.status();
  Schedule& s = **built;
  cartage::Request req;
  for (const absl::Status& st : {s.Run(), s.Begin(), s.Start(&req), s.Bind(&req)}) {
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(st.message(), HasSubstr("schedule drawing: built for rendering only"));
  }
  EXPECT_FALSE(req.active());
}

TEST(Xfer, BufferPolicyFollowsSizeAndMethodCapabilities) {
  const PathInfo shm{.method = "shm", .eager_limit = 8192, .max_buffer = 0, .lends_buffers = false};
  const PathInfo verbs{.method = "verbs", .eager_limit = 4096, .max_buffer = 1 << 20, .lends_buffers = true};
  ForwardFacts f{.bytes = 65536, .has_segment = true, .segment_contiguous = true, .mop = false, .from = shm, .to = shm};
  EXPECT_EQ(ChooseBufferMode(f), BufferMode::kUseSegment);  // lands in place, leaves from there
  f.mop = true;                                            // the segment then holds the combination
  EXPECT_EQ(ChooseBufferMode(f), BufferMode::kUseTmp);
  f.segment_contiguous = false;
  f.mop = false;
  EXPECT_EQ(ChooseBufferMode(f), BufferMode::kUseTmp);
  f.to = verbs;  // the outgoing method lends registered buffers: land there
  EXPECT_EQ(ChooseBufferMode(f), BufferMode::kSenderSupplies);
  f.to = shm;
  f.from = verbs;
  EXPECT_EQ(ChooseBufferMode(f), BufferMode::kReceiverSupplies);
  f.bytes = 4096;  // eager: copied through the method's own buffers anyway
  EXPECT_EQ(ChooseBufferMode(f), BufferMode::kUseTmp);
  f.bytes = (1 << 20) + 1;  // more than it lends
  EXPECT_EQ(ChooseBufferMode(f), BufferMode::kUseTmp);
  f.has_segment = false;
  f.bytes = 65536;
  f.to = verbs;
  EXPECT_EQ(ChooseBufferMode(f), BufferMode::kSenderSupplies);

  EXPECT_TRUE(CheckBufferMode(BufferMode::kUseTmp, f).ok());
  EXPECT_THAT(CheckBufferMode(BufferMode::kUseSegment, f).message(), HasSubstr("no segment"));
  f.has_segment = true;
  f.mop = true;
  EXPECT_THAT(CheckBufferMode(BufferMode::kUseSegment, f).message(), HasSubstr("combined"));

  for (BufferMode m : {BufferMode::kSenderSupplies, BufferMode::kReceiverSupplies, BufferMode::kUseSegment,
                       BufferMode::kUseTmp}) {
    EXPECT_EQ(*BufferModeByName(BufferModeName(m)), m);
  }
  EXPECT_EQ(*BufferModeByName("tmp"), BufferMode::kUseTmp);
  EXPECT_EQ(*BufferModeByName("Sender"), BufferMode::kSenderSupplies);
  EXPECT_THAT(BufferModeByName("bounce").status().message(), HasSubstr("unknown buffer mode \"bounce\""));
}

// The kinds and edges of a block's vertices, for the structural checks.
std::vector<VertexId> Preds(const ScheduleBuilder& b, VertexId v) {
  std::vector<VertexId> out;
  for (const Edge& e : b.vertices()[static_cast<std::size_t>(v)].after) out.push_back(e.from);
  return out;
}

TEST(Xfer, AForwardIsCutIntoChunksThatPipeline) {
  // Rank 1 of 3 forwards 200000 bytes from 0 to 2 in 64 KiB chunks.
  ScheduleBuilder b(1, 3, "chain");
  std::vector<std::byte> mem(200000);
  const Segment seg = Segment::Of(Buf::User(mem.data(), "data"), 200000, Datatype::Basic(BasicType::kByte));
  Xfer x = Xfer::ScatterInit(b, 0);
  ASSERT_TRUE(x.RecvMopForwardOp(seg, std::nullopt, 2).ok());
  auto sinks = x.Start();
  ASSERT_TRUE(sinks.ok());
  ASSERT_EQ(b.vertices().size(), 8u);  // 4 chunks: recv, send each
  ASSERT_EQ(x.modes().size(), 4u);
  for (int k = 0; k < 4; ++k) {
    const Vertex& recv = b.vertices()[static_cast<std::size_t>(2 * k)];
    const Vertex& send = b.vertices()[static_cast<std::size_t>(2 * k + 1)];
    EXPECT_EQ(x.modes()[static_cast<std::size_t>(k)], BufferMode::kUseSegment);
    EXPECT_EQ(recv.kind, VertexKind::kRecv);
    EXPECT_EQ(send.kind, VertexKind::kSend);
    EXPECT_EQ(recv.chunk, k);
    EXPECT_EQ(recv.bytes, k < 3 ? 65536u : 200000u - 3 * 65536u);
    EXPECT_EQ(recv.dst.offset, static_cast<uint64_t>(k) * 65536u);  // in place, in the user's memory
    EXPECT_EQ(send.src.offset, recv.dst.offset);
    // Chunk k leaves as soon as chunk k arrived: it waits for that receive alone.
    ASSERT_EQ(send.after.size(), 1u);
    EXPECT_EQ(send.after[0].from, 2 * k);
    EXPECT_EQ(send.after[0].kind, EdgeKind::kProgress);
    EXPECT_TRUE(recv.after.empty());  // every receive is posted at once
  }
  EXPECT_EQ(*sinks, (std::vector<VertexId>{1, 3, 5, 7}));
}

TEST(Xfer, ForcedModesPlaceTheLandingBufferAndLentOnesComeFromThePeersMethod) {
  std::vector<std::byte> mem(1000);
  for (BufferMode m : {BufferMode::kSenderSupplies, BufferMode::kReceiverSupplies, BufferMode::kUseTmp}) {
    ScheduleBuilder b(1, 3, "forced");
    Xfer x = Xfer::ScatterInit(b, 0, XferOptions{.chunk_bytes = 0, .buffer = m});
    ASSERT_TRUE(x.ForwardOp(1000, 2).ok());
    ASSERT_TRUE(x.Start().ok());
    auto built = b.Build();
    ASSERT_TRUE(built.ok()) << built.status();
    const auto& lenders = (*built)->temp_lenders();
    ASSERT_EQ(lenders.size(), 1u) << BufferModeName(m);
    EXPECT_EQ(lenders[0], m == BufferMode::kSenderSupplies ? 2 : m == BufferMode::kReceiverSupplies ? 0 : -1);
    const Vertex& send = b.vertices()[1];
    EXPECT_TRUE(send.src.is_temp());
    EXPECT_EQ(send.note, BufferModeName(m));
    EXPECT_EQ(send.after[0].kind, m == BufferMode::kReceiverSupplies ? EdgeKind::kBuffer : EdgeKind::kProgress);
  }
  // A forced mode that cannot serve is an error naming the op, the block and the ranks.
  ScheduleBuilder b(1, 3, "forced");
  Xfer x = Xfer::ScatterInit(b, 0, XferOptions{.chunk_bytes = 0, .buffer = BufferMode::kUseSegment});
  const absl::Status s = x.ForwardOp(1000, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("xfer scatter forward_op (forced, rank 1) from rank 0 to rank 2: USE_SEGMENT_BUF"));
  const Segment seg = Segment::Of(Buf::User(mem.data(), "data"), 250, kI32);
  EXPECT_THAT(x.RecvMopForwardOp(seg, Op(OpKind::kSum), 2).message(), HasSubstr("combined"));
  EXPECT_THAT(x.SendOp(seg, 7).message(), HasSubstr("no rank 7 in a communicator of 3"));
  EXPECT_THAT(x.RecvMopOp(seg.Range(2, 1000), Op(OpKind::kSum)).message(), HasSubstr("starts inside an element"));
  EXPECT_THAT(x.RecvMopOp(seg.Range(0, 998), Op(OpKind::kSum)).message(), HasSubstr("ends inside an element"));
  {  // 64 KiB chunks of a 12-byte type: the two ends could not agree on whole elements
    ScheduleBuilder b12(1, 3, "cut");
    Xfer x12 = Xfer::ScatterInit(b12, 0);
    const Segment triples = Segment::Of(Buf::User(mem.data(), "data"), 80, *Datatype::Contiguous(3, kI32));
    EXPECT_THAT(x12.RecvMopOp(triples, Op(OpKind::kSum)).message(),
                HasSubstr("a combined piece is cut inside an element of contiguous"));
    EXPECT_TRUE(x12.RecvMopOp(triples, std::nullopt).ok());  // uncombined: any byte boundary
  }
  ASSERT_TRUE(x.Start().ok());
  EXPECT_EQ(x.SendOp(seg, 2).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(x.Start().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(Xfer, AGatherBlockSendsEachChunkOnceEveryPieceOfItIsCombinedIn) {
  // Rank 1 of 4 combines the pieces of ranks 2 and 3 into its data and sends
  // the result on to 0, in 64 KiB chunks.
  ScheduleBuilder b(1, 4, "reduce");
  std::vector<int32_t> acc(50000);
  const Segment seg = Segment::Of(Buf::User(acc.data(), "acc"), 50000, kI32);  // 200000 B: 4 chunks
  Xfer x = Xfer::GatherInit(b, 0);
  ASSERT_TRUE(x.RecvMopOp(seg, Op(OpKind::kSum), 2).ok());
  ASSERT_TRUE(x.RecvMopOp(seg, Op(OpKind::kSum), 3).ok());
  ASSERT_TRUE(x.SendOp(seg).ok());
  ASSERT_TRUE(x.Start().ok());
  ASSERT_TRUE(b.Build().ok());
  std::vector<VertexId> reduces2, reduces3, sends;
  for (VertexId v = 0; v < static_cast<VertexId>(b.vertices().size()); ++v) {
    const Vertex& x2 = b.vertices()[static_cast<std::size_t>(v)];
    if (x2.kind == VertexKind::kSend) sends.push_back(v);
    if (x2.kind == VertexKind::kReduce) (reduces2.size() < 4 ? reduces2 : reduces3).push_back(v);
  }
  ASSERT_EQ(sends.size(), 4u);
  ASSERT_EQ(reduces3.size(), 4u);
  for (std::size_t k = 0; k < 4; ++k) {
    EXPECT_EQ(b.vertices()[static_cast<std::size_t>(sends[k])].peer, 0);
    // Chunk k of 3's piece is combined after chunk k of 2's (the same bytes), and
    // chunk k leaves after that: not waiting for any other chunk.
    EXPECT_THAT(Preds(b, reduces3[k]), ::testing::Contains(reduces2[k]));
    EXPECT_EQ(Preds(b, sends[k]), (std::vector<VertexId>{reduces3[k]}));
    EXPECT_EQ(b.vertices()[static_cast<std::size_t>(reduces2[k])].count, k < 3 ? 16384 : 50000 - 3 * 16384);
  }
}

}  // namespace
}  // namespace cartage::test
