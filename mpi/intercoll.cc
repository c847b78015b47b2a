// The MPI binding's collectives on intercommunicators: data goes from one
// group to the other. Each intercommunicator holds two communicators of
// its own (MakeInter): `bridge`, a duplicate of the one spanning both
// groups, whose traffic never meets the program's. A call is one schedule (a CAR graph)
// on `bridge`, so it runs blocking, nonblocking or persistent as any
// collective does. A rooted call moves data between the root and each rank
// of the other group directly; a reduction is reduced in rank order at the
// sending group's rank 0, which hands it over.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cartage/collectives.h"
#include "cartage/schedule.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

const std::byte* At(const void* buf, int64_t bytes) { return static_cast<const std::byte*>(buf) + bytes; }

// Builds one call's schedule: typed sends and receives to ranks of either group.
class InterBuilder {
 public:
  InterBuilder(ScheduleBuilder& b, const CommSlot& slot) : b_(b), slot_(slot) {}

  int Remote(int r) const { return slot_.remote_offset + r; }
  int Local(int r) const { return slot_.local_offset + r; }
  int me() const { return b_.rank() - slot_.local_offset; }
  int local_size() const { return slot_.local_size; }

  VertexId Send(const void* p, int64_t count, const Datatype& t, int peer, std::vector<VertexId> after = {}) {
    return SendTyped(b_, p, count, t, peer, std::move(after));
  }
  VertexId Recv(void* p, int64_t count, const Datatype& t, int peer, std::vector<VertexId> after = {}) {
    return RecvTyped(b_, p, count, t, peer, std::move(after));
  }
  // `packed` (count elements of t, packed) laid out at p.
  VertexId Place(Buf packed, int64_t count, const Datatype& t, void* p, std::vector<VertexId> after) {
    const auto bytes = static_cast<uint64_t>(count * t.size());
    if (t.contiguous()) return b_.Copy(packed, Buf::User(p, "recv"), bytes, after);
    return b_.Unpack(packed, count, t, Buf::User(p, "recv"), after);
  }

  // This group's vectors reduced in rank order at its rank 0, into a
  // temporary there (`*acc`, packed): the vertex after which it holds
  // them, or -1 on the other ranks (which send theirs).
  VertexId ReduceAtLeader(const void* send, int64_t count, const Datatype& t, const Op& op, Buf* acc) {
    const auto bytes = static_cast<uint64_t>(count * t.size());
    if (me() != 0) {
      Send(send, count, t, Local(0));
      return -1;
    }
    *acc = b_.Temp(std::max<uint64_t>(bytes, 1));
    VertexId last = t.contiguous() ? b_.Copy(Buf::User(send, "send"), *acc, bytes)
                                   : b_.Pack(Buf::User(send, "send"), count, t, *acc);
    for (int i = 1; i < local_size(); ++i) {
      const Buf in = b_.Temp(std::max<uint64_t>(bytes, 1));
      const VertexId got = b_.Recv(in, bytes, Local(i));
      last = b_.Reduce(in, *acc, count, t, op, {last, got}, /*in_is_left=*/false);  // acc = acc op v_i
    }
    return last;
  }
  // The other group's reduction, `count` elements of t, exchanged by the
  // two groups' ranks 0 (ours sends `acc`, ready after `ready`): the
  // vertex after which `*theirs` holds it at rank 0.
  VertexId SwapAtLeaders(Buf acc, VertexId ready, int64_t count, const Datatype& t, Buf* theirs) {
    const auto bytes = static_cast<uint64_t>(count * t.size());
    *theirs = b_.Temp(std::max<uint64_t>(bytes, 1));
    const VertexId sent = b_.Send(acc, bytes, Remote(0), {ready});
    const VertexId got = b_.Recv(*theirs, bytes, Remote(0));
    return b_.Fence({sent, got});
  }

 private:
  ScheduleBuilder& b_;
  const CommSlot& slot_;
};

// Builds `c`'s schedule into `b`; an MPI error code where an argument is wrong.
int Build(const InterCall& c, const CommSlot& slot, ScheduleBuilder& b) {
  int rc = MPI_SUCCESS;
  const int remote = slot.remote_size;
  const bool rooted = c.kind == Collective::kBcast || c.kind == Collective::kReduce ||
                      c.kind == Collective::kGather || c.kind == Collective::kScatter ||
                      c.kind == Collective::kGatherv || c.kind == Collective::kScatterv;
  if (rooted && c.root != MPI_ROOT && c.root != MPI_PROC_NULL && (c.root < 0 || c.root >= remote)) {
    return Error(c.comm, c.fn, MPI_ERR_ROOT,
                 absl::StrFormat("root %d: MPI_ROOT, MPI_PROC_NULL, or a rank of the remote group of %d", c.root,
                                 remote));
  }
  const bool root = c.root == MPI_ROOT;
  const bool idle = c.root == MPI_PROC_NULL;
  const bool w = !c.send_types.empty() || !c.recv_types.empty();
  // The types, where significant on this rank (the others may be anything).
  const bool gather = c.kind == Collective::kGather || c.kind == Collective::kGatherv;
  const bool scatter = c.kind == Collective::kScatter || c.kind == Collective::kScatterv;
  const bool send_sig = c.kind != Collective::kBarrier && !idle && !w && (gather ? !root : !(scatter && !root));
  const bool recv_sig = !idle && !w && (gather ? root : scatter ? !root : c.recv_type != MPI_DATATYPE_NULL);
  const Datatype* t = send_sig ? TypeArg(c.send_type, c.fn, &rc) : nullptr;
  const Datatype* rt = recv_sig && rc == MPI_SUCCESS ? TypeArg(c.recv_type, c.fn, &rc) : nullptr;
  if (rc != MPI_SUCCESS) return rc;
  std::vector<Datatype> send_types, recv_types;  // alltoallw's
  for (std::size_t i = 0; w && i < c.send_types.size() + c.recv_types.size(); ++i) {
    const bool is_send = i < c.send_types.size();
    const Datatype* each = TypeArg(is_send ? c.send_types[i] : c.recv_types[i - c.send_types.size()], c.fn, &rc);
    if (each == nullptr) return rc;
    (is_send ? send_types : recv_types).push_back(*each);
  }
  if (w && (send_types.size() != static_cast<std::size_t>(remote) ||
            recv_types.size() != static_cast<std::size_t>(remote))) {
    return Error(c.comm, c.fn, MPI_ERR_TYPE, "alltoallw on an intercommunicator: no send or receive types");
  }
  InterBuilder ib(b, slot);
  const auto i_of = [](int r) { return static_cast<std::size_t>(r); };
  switch (c.kind) {
    case Collective::kBarrier: {
      // Ranks 0 hear from their groups, swap word, and release their groups.
      if (ib.me() != 0) {
        const VertexId in = b.Send(Buf{}, 0, ib.Local(0));
        b.Recv(Buf{}, 0, ib.Local(0), {in});
        break;
      }
      std::vector<VertexId> arrived;
      for (int i = 1; i < ib.local_size(); ++i) arrived.push_back(b.Recv(Buf{}, 0, ib.Local(i)));
      const VertexId told = b.Send(Buf{}, 0, ib.Remote(0), arrived);
      const VertexId heard = b.Recv(Buf{}, 0, ib.Remote(0));
      for (int i = 1; i < ib.local_size(); ++i) b.Send(Buf{}, 0, ib.Local(i), {told, heard});
      break;
    }
    case Collective::kBcast:
      if (root) {
        for (int r = 0; r < remote; ++r) ib.Send(c.recv, c.count, *t, ib.Remote(r));
      } else if (!idle) {
        ib.Recv(c.recv, c.count, *t, ib.Remote(c.root));
      }
      break;
    case Collective::kGather:
    case Collective::kGatherv:
      if (root) {
        const bool v = c.kind == Collective::kGatherv;
        for (int r = 0; r < remote; ++r) {
          const int64_t n = v ? c.recv_counts[i_of(r)] : c.recv_count;
          const int64_t at = v ? c.recv_displs[i_of(r)] : r * c.recv_count;
          ib.Recv(const_cast<std::byte*>(At(c.recv, at * rt->extent())), n, *rt, ib.Remote(r));
        }
      } else if (!idle) {
        ib.Send(c.send, c.count, *t, ib.Remote(c.root));
      }
      break;
    case Collective::kScatter:
    case Collective::kScatterv:
      if (root) {
        const bool v = c.kind == Collective::kScatterv;
        for (int r = 0; r < remote; ++r) {
          const int64_t n = v ? c.send_counts[i_of(r)] : c.count;
          const int64_t at = v ? c.send_displs[i_of(r)] : r * c.count;
          ib.Send(At(c.send, at * t->extent()), n, *t, ib.Remote(r));
        }
      } else if (!idle) {
        ib.Recv(c.recv, c.recv_count, *rt, ib.Remote(c.root));
      }
      break;
    case Collective::kAllgather:
    case Collective::kAllgatherv:
    case Collective::kAlltoall:
    case Collective::kAlltoallv: {
      // Every rank sends to every remote rank and receives from each.
      const bool to_each = c.kind == Collective::kAlltoall || c.kind == Collective::kAlltoallv;
      const bool v = c.kind == Collective::kAllgatherv || c.kind == Collective::kAlltoallv;
      for (int r = 0; r < remote; ++r) {
        const auto i = i_of(r);
        const Datatype& rti = w ? recv_types[i] : *rt;
        const Datatype& sti = w ? send_types[i] : *t;
        const int64_t rn = v ? c.recv_counts[i] : c.recv_count;
        const int64_t rat = w ? c.recv_displs[i] : (v ? c.recv_displs[i] : r * c.recv_count) * rti.extent();
        ib.Recv(const_cast<std::byte*>(At(c.recv, rat)), rn, rti, ib.Remote(r));
        const int64_t sn = to_each && v ? c.send_counts[i] : c.count;
        const int64_t sat = w ? c.send_displs[i] : (to_each ? (v ? c.send_displs[i] : r * c.count) : 0) * sti.extent();
        ib.Send(At(c.send, sat), sn, sti, ib.Remote(r));
      }
      break;
    }
    case Collective::kReduce: {
      if (root) {
        ib.Recv(c.recv, c.count, *t, ib.Remote(0));
      } else if (!idle) {
        Buf acc;
        const VertexId ready = ib.ReduceAtLeader(c.send, c.count, *t, *c.op, &acc);
        if (ready >= 0) b.Send(acc, static_cast<uint64_t>(c.count * t->size()), ib.Remote(c.root), {ready});
      }
      break;
    }
    case Collective::kAllreduce:
    case Collective::kReduceScatter:
    case Collective::kReduceScatterBlock: {
      // Each group's reduction goes to the other's rank 0, which hands it
      // out: all of it (allreduce) or each rank its part.
      const bool all = c.kind == Collective::kAllreduce;
      std::vector<int64_t> parts(static_cast<std::size_t>(ib.local_size()) + 1, 0);
      for (int i = 0; i < ib.local_size(); ++i) {
        const int64_t mine = all ? c.count : c.kind == Collective::kReduceScatter ? c.recv_counts[i_of(i)] : c.count;
        parts[i_of(i) + 1] = all ? mine : parts[i_of(i)] + mine;
      }
      const int64_t total = parts.back();
      if (total == 0) break;  // every rank of both groups passes no data
      const auto part = [&](int i) { return all ? int64_t{0} : parts[i_of(i)]; };
      const auto len = [&](int i) { return all ? c.count : parts[i_of(i) + 1] - parts[i_of(i)]; };
      Buf acc;
      const VertexId ready = ib.ReduceAtLeader(c.send, total, *t, *c.op, &acc);
      if (ib.me() != 0) {
        ib.Recv(c.recv, len(ib.me()), *t, ib.Local(0));
        break;
      }
      Buf theirs;
      const VertexId swapped = ib.SwapAtLeaders(acc, ready, total, *t, &theirs);
      const auto es = static_cast<uint64_t>(t->size());
      for (int i = 1; i < ib.local_size(); ++i) {
        b.Send(theirs + static_cast<uint64_t>(part(i)) * es, static_cast<uint64_t>(len(i)) * es, ib.Local(i),
               {swapped});
      }
      if (len(0) > 0) ib.Place(theirs, len(0), *t, c.recv, {swapped});
      break;
    }
    default:
      return Error(c.comm, c.fn, MPI_ERR_COMM, "this collective is not provided on an intercommunicator");
  }
  if (b.vertices().empty()) b.Fence();  // a rank with no part still builds its schedule, keeping the sequence
  return MPI_SUCCESS;
}

}  // namespace

VertexId SendTyped(ScheduleBuilder& b, const void* p, int64_t count, const Datatype& t, int peer,
                   std::vector<VertexId> after) {
  const auto bytes = static_cast<uint64_t>(count * t.size());
  if (bytes == 0) return b.Send(Buf{}, 0, peer, after);
  if (t.contiguous()) return b.Send(Buf::User(p, "send"), bytes, peer, after);
  const Buf packed = b.Temp(bytes);
  const VertexId v = b.Pack(Buf::User(p, "send"), count, t, packed, after);
  return b.Send(packed, bytes, peer, {v});
}

VertexId RecvTyped(ScheduleBuilder& b, void* p, int64_t count, const Datatype& t, int peer,
                   std::vector<VertexId> after) {
  const auto bytes = static_cast<uint64_t>(count * t.size());
  if (bytes == 0) return b.Recv(Buf{}, 0, peer, after);
  if (t.contiguous()) return b.Recv(Buf::User(p, "recv"), bytes, peer, after);
  const Buf packed = b.Temp(bytes);
  const VertexId v = b.Recv(packed, bytes, peer, after);
  return b.Unpack(packed, count, t, Buf::User(p, "recv"), {v});
}

int MakeInter(MPI_Comm handle, const char* fn) {
  CommSlot& slot = *CommSlotOf(handle);
  absl::StatusOr<cartage::Comm> bridge = slot.comm->Dup();
  if (!bridge.ok()) return FromStatus(handle, fn, bridge.status());
  slot.bridge = *bridge;
  return MPI_SUCCESS;
}

int InterSchedule(const InterCall& c, std::shared_ptr<Schedule>* out) {
  int rc = MPI_SUCCESS;
  if (CommOf(c.comm, c.fn, &rc) == nullptr) return rc;
  const CommSlot& slot = *CommSlotOf(c.comm);
  ScheduleBuilder b(*slot.bridge, absl::StrCat(CollectiveName(c.kind), "/intercommunicator"));
  if (rc = Build(c, slot, b); rc != MPI_SUCCESS) return rc;
  absl::StatusOr<std::shared_ptr<Schedule>> s = b.Build();
  if (!s.ok()) return FromStatus(c.comm, c.fn, s.status());
  *out = *std::move(s);
  return MPI_SUCCESS;
}

}  // namespace cartage::mpi_binding
