// Seed 002's xfer interface over schedules: a collective step described as
// a block of pieces that arrive, are kept or combined, and leave again,
// without naming a single send or receive. The block turns each piece into
// schedule vertices (cartage/schedule.h), decides for each piece a rank
// receives and forwards where its bytes wait in between (the four buffer
// modes), and cuts large pieces into chunks so that a forwarding rank sends
// chunk k while chunk k+1 arrives.
//
//   // A pipelined chain broadcast: root -> 1 -> 2 -> ... (n ranks).
//   cartage::ScheduleBuilder b(world, "chain");
//   cartage::Segment all = cartage::Segment::Of(cartage::Buf::User(data, "data"), count, type);
//   cartage::Xfer x = cartage::Xfer::ScatterInit(b, r == 0 ? cartage::kNoPeer : r - 1);
//   if (r == 0) CARTAGE_CHECK_OK(x.SendOp(all, 1));
//   else if (r + 1 < n) CARTAGE_CHECK_OK(x.RecvMopForwardOp(all, std::nullopt, r + 1));
//   else CARTAGE_CHECK_OK(x.RecvMopOp(all, std::nullopt));
//   CARTAGE_CHECK_OK(x.Start().status());
//   auto schedule = b.Build();  // then Start / Bind / Run as any schedule
//
// Scatter blocks receive from one rank (init's `src`) and send to any;
// gather blocks receive from any and send to one (init's `dest`). A piece is
// bytes [first, last) of the packed form of a user buffer's `count` elements
// of a type (a Segment), so a block may move part of a buffer, and a piece of
// a non-contiguous type is packed and unpacked on the way.
//
// Dependencies inside a block come from the buffers (seed 002's buf_dep):
// an op that reads bytes of a buffer waits for the block's earlier ops that
// write them, and one that writes waits for the earlier ones that read or
// write them. So a gather block that combines each child's piece into an
// accumulator and then sends the accumulator on sends it once every child's
// piece is in, chunk by chunk.
#ifndef CARTAGE_COLLECTIVES_INCLUDE_CARTAGE_XFER_H_
#define CARTAGE_COLLECTIVES_INCLUDE_CARTAGE_XFER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cartage/schedule.h"

namespace cartage {

inline constexpr int kNoPeer = -1;

// Where a piece that a rank receives and forwards waits between its receive
// and its send (seed 002).
enum class BufferMode : uint8_t {
  kSenderSupplies,    // SENDER_SUPPLIES_BUF: a buffer lent by the method the piece leaves by
  kReceiverSupplies,  // RECEIVER_SUPPLIES_BUF: a buffer lent by the method the piece arrives by
  kUseSegment,        // USE_SEGMENT_BUF: the user's memory; the piece arrives into it and leaves from it
  kUseTmp,            // USE_TMP_BUF: a temporary buffer of the schedule
};
// "SENDER_SUPPLIES_BUF", "RECEIVER_SUPPLIES_BUF", "USE_SEGMENT_BUF", "USE_TMP_BUF".
const char* BufferModeName(BufferMode m);
// Those names, or "sender", "receiver", "segment", "tmp".
absl::StatusOr<BufferMode> BufferModeByName(absl::string_view name);

// Bytes [first, last) of the packed form of `count` elements of `type` at `buf`.
struct Segment {
  Buf buf;
  int64_t count = 0;
  Datatype type = Datatype::Basic(datatype::BasicType::kByte);
  uint64_t first = 0;
  uint64_t last = 0;

  // All of the `count` elements.
  static Segment Of(Buf buf, int64_t count, const Datatype& type);
  // Bytes [first, last) of this segment's elements.
  Segment Range(uint64_t lo, uint64_t hi) const;
  uint64_t bytes() const { return last - first; }
};

// What the buffer policy decides from, for one piece (one chunk of it) that
// a rank receives and forwards.
struct ForwardFacts {
  uint64_t bytes = 0;
  bool has_segment = false;         // false: a forward_op, nothing of it stays here
  bool segment_contiguous = false;  // the segment's bytes lie in user memory as they travel
  bool mop = false;                 // it is combined into the segment, which then no longer holds it
  PathInfo from;                    // the method it arrives by
  PathInfo to;                      // the method it leaves by
};

// The policy, in this order:
//   1. USE_SEGMENT_BUF where the piece lands in the user's memory as it
//      travels (a contiguous segment, no mop): no copy at all;
//   2. SENDER_SUPPLIES_BUF where the piece goes by rendezvous (more than the
//      outgoing method's eager limit) and that method lends buffers (it needs
//      registered memory, or has its own pool) big enough: the piece lands
//      where the outgoing method sends from;
//   3. RECEIVER_SUPPLIES_BUF on the same terms for the incoming method;
//   4. USE_TMP_BUF otherwise (shm, tcp and self lend no buffers: their
//      transfers need no registration).
BufferMode ChooseBufferMode(const ForwardFacts& f);
// Whether `m` can serve the piece: USE_SEGMENT_BUF needs a segment that
// still holds the piece as it arrived (no mop).
absl::Status CheckBufferMode(BufferMode m, const ForwardFacts& f);

struct XferOptions {
  // Pieces larger than this are cut into chunks of this size; 0: never.
  // Every op of every rank cuts alike, so both ends of a link agree; a
  // block that combines pieces needs a multiple of the type's size.
  uint64_t chunk_bytes = 64 << 10;
  // Forces a buffer mode on every forward of the block (an error where it
  // cannot serve). Without it, CARTAGE_XFER_BUFFER (a mode's name) forces
  // it wherever it can serve, and the policy decides the rest.
  std::optional<BufferMode> buffer;
};

// One block: seed 002's xfer request. Its ops add vertices to the builder
// as they are called; Start() ends the block.
class Xfer {
 public:
  // Pieces arrive from `src` (kNoPeer: none; this rank is the source).
  static Xfer ScatterInit(ScheduleBuilder& b, int src, XferOptions options = {});
  // Pieces leave for `dest` (kNoPeer: none; this rank is the destination).
  static Xfer GatherInit(ScheduleBuilder& b, int dest, XferOptions options = {});

  // Every vertex of the block also waits for these (a block composed after
  // earlier steps of a larger schedule).
  Xfer& After(std::vector<VertexId> deps);

  // A piece arrives (from the block's source; in a gather block from
  // `peer`) into `seg`; with a mop it is combined in: seg = piece op seg, or
  // seg = seg op piece with piece_first false (non-commutative operators).
  absl::Status RecvMopOp(const Segment& seg, const std::optional<Op>& mop, int peer = kNoPeer,
                         bool piece_first = true);
  // The same, and the piece as it arrived leaves again (scatter: for
  // `peer`; gather: it came from `peer` and leaves for the block's
  // destination).
  absl::Status RecvMopForwardOp(const Segment& seg, const std::optional<Op>& mop, int peer,
                                bool piece_first = true);
  // `bytes` arrive and leave as they are; nothing stays here.
  absl::Status ForwardOp(uint64_t bytes, int peer);
  // This rank's piece leaves (scatter: for `peer`; gather: for the block's
  // destination, peer kNoPeer).
  absl::Status SendOp(const Segment& seg, int peer = kNoPeer);

  // Ends the block: returns the vertices that later steps wait for (those
  // of the block nothing in it waits for). No op may follow.
  absl::StatusOr<std::vector<VertexId>> Start();

  // The buffer mode each forwarded chunk got, in order (tests, diagrams).
  const std::vector<BufferMode>& modes() const { return modes_; }

 private:
  // A byte range of a buffer an op reads or writes.
  struct Access {
    const void* user;
    int temp;
    const char* name;
    const void* type_id;  // the same segment layout: packed ranges compare exactly
    int64_t count;
    uint64_t offset;
    uint64_t lo, hi;  // packed bytes when type_id is set, else layout bytes
    bool write;
    VertexId vertex;
  };
  Xfer(ScheduleBuilder& b, bool scatter, int peer, XferOptions options);
  absl::Status Usable(const char* op, int peer) const;
  // The chunk size: the same for every op, so both ends of a link cut alike.
  uint64_t Chunk() const;
  Access AccessOf(const Segment& seg, bool write) const;
  static bool SameBuffer(const Access& x, const Access& y);
  // Vertices that an access must wait for; records it for `v`.
  std::vector<VertexId> Conflicts(const Access& a) const;
  void Record(Access a, VertexId v);
  std::vector<VertexId> With(std::vector<VertexId> deps) const;
  // Moves a landed chunk (packed, at `landed`) into `seg`: unpack, copy or
  // combine. Returns the last vertex.
  VertexId Settle(Buf landed, const Segment& seg, const std::optional<Op>& mop, bool piece_first,
                  VertexId arrived, const char* note);
  // A combined piece and its chunks are whole elements.
  absl::Status Combinable(const char* op, const Segment& seg, const std::optional<Op>& mop, int src) const;
  // Where a forwarded chunk lands in `mode` (not USE_SEGMENT_BUF).
  Buf Landing(BufferMode mode, uint64_t bytes, int src, int dest);
  absl::StatusOr<BufferMode> ModeFor(const ForwardFacts& f, const char* op, int from, int to) const;
  PathInfo Path(int peer) const;

  ScheduleBuilder* b_;
  bool scatter_;
  int peer_;  // scatter: the source; gather: the destination
  XferOptions options_;
  absl::StatusOr<std::optional<BufferMode>> env_buffer_;  // CARTAGE_XFER_BUFFER, read once
  std::vector<VertexId> after_;
  std::vector<Access> accesses_;
  std::vector<VertexId> made_;
  std::vector<BufferMode> modes_;
  bool started_ = false;
};

}  // namespace cartage

#endif  // CARTAGE_COLLECTIVES_INCLUDE_CARTAGE_XFER_H_
