// The MPI binding's collectives on intercommunicators (blocking): data
// goes from one group to the other. Each intercommunicator holds two
// communicators of its own for them (MakeInter): `bridge`, a duplicate of
// the one spanning both groups, whose point-to-point traffic never meets
// the program's, and `local`, its own group. A rooted call moves data
// between the root and each rank of the other group directly; a reduction
// is reduced in the sending group first (a cartage collective on `local`),
// then handed over by its rank 0.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "cartage/collectives.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

// One tag a collective kind on `bridge`: calls come in the same order on
// every rank, and messages of one tag between two ranks arrive in order.
enum Tag : int { kBcast = 1, kReduce, kGather, kScatter, kAllgather, kAlltoall, kAllreduce };

// Memory for `count` elements of `type`, laid out as the type says; at()
// is where element 0 starts (its lower bound may be negative).
struct Scratch {
  Scratch(int64_t count, const Datatype& t)
      : bytes(count == 0 ? 0 : static_cast<std::size_t>(t.true_extent() + (count - 1) * t.extent())),
        first(t.true_lb()) {}
  void* at() { return data.data() - first; }
  std::size_t bytes;
  int64_t first;
  std::vector<std::byte> data = std::vector<std::byte>(bytes);
};

std::byte* Offset(const void* buf, int64_t elements, const Datatype& t) {
  return static_cast<std::byte*>(const_cast<void*>(buf)) + elements * t.extent();
}

// Waits for every request; the first failure, named by `fn`.
absl::Status WaitAll(std::vector<Request>& reqs) {
  absl::Status first;
  for (Request& r : reqs) {
    if (absl::Status s = r.Wait(); !s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace

int MakeInter(MPI_Comm handle, const char* fn) {
  CommSlot& slot = *CommSlotOf(handle);
  const cartage::Comm& joined = *slot.comm;
  const int side = slot.local_offset == 0 ? 0 : 1;
  absl::StatusOr<std::optional<cartage::Comm>> local = joined.Split(side, joined.rank());
  if (!local.ok()) return FromStatus(handle, fn, local.status());
  absl::StatusOr<cartage::Comm> bridge = joined.Dup();
  if (!bridge.ok()) return FromStatus(handle, fn, bridge.status());
  slot.local = **local;
  slot.bridge = *bridge;
  return MPI_SUCCESS;
}

int InterCollective(const InterCall& c) {
  int rc = MPI_SUCCESS;
  if (CommOf(c.comm, c.fn, &rc) == nullptr) return rc;
  const CommSlot& slot = *CommSlotOf(c.comm);
  const cartage::Comm& b = *slot.bridge;
  const cartage::Comm& local = *slot.local;
  const int remote = slot.remote_size;
  const auto peer = [&](int r) { return slot.remote_offset + r; };  // a remote rank on `bridge`
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
  // The types, where significant on this rank (the others may be anything).
  const bool gather = c.kind == Collective::kGather || c.kind == Collective::kGatherv;
  const bool scatter = c.kind == Collective::kScatter || c.kind == Collective::kScatterv;
  const bool send_sig = c.kind != Collective::kBarrier && !idle && (gather ? !root : !(scatter && !root));
  const bool recv_sig = !idle && (gather ? root : scatter ? !root : c.recv_type != MPI_DATATYPE_NULL);
  const Datatype* t = send_sig ? TypeArg(c.send_type, c.fn, &rc) : nullptr;
  const Datatype* rt = recv_sig && rc == MPI_SUCCESS ? TypeArg(c.recv_type, c.fn, &rc) : nullptr;
  if (rc != MPI_SUCCESS) return rc;
  // The requests a call waits for: one for each remote rank at a root,
  // two (to and from) for each in the all- forms.
  const bool all = c.kind == Collective::kAllgather || c.kind == Collective::kAllgatherv ||
                   c.kind == Collective::kAlltoall || c.kind == Collective::kAlltoallv;
  std::vector<Request> reqs(static_cast<std::size_t>(all ? 2 * remote : root ? remote : 0));
  absl::Status st;
  switch (c.kind) {
    case Collective::kBarrier: st = Barrier(b); break;
    case Collective::kBcast:
      if (root) {
        for (int r = 0; r < remote && st.ok(); ++r) st = b.Isend(c.recv, c.count, *t, peer(r), kBcast, &reqs[static_cast<std::size_t>(r)]);
      } else if (!idle) {
        st = b.Recv(c.recv, c.count, *t, peer(c.root), kBcast);
      }
      break;
    case Collective::kGather:
    case Collective::kGatherv:
      if (root) {
        for (int r = 0; r < remote && st.ok(); ++r) {
          const bool v = c.kind == Collective::kGatherv;
          const int64_t n = v ? c.recv_counts[static_cast<std::size_t>(r)] : c.recv_count;
          const int64_t at = v ? c.recv_displs[static_cast<std::size_t>(r)] : r * c.recv_count;
          st = b.Irecv(Offset(c.recv, at, *rt), n, *rt, peer(r), kGather, &reqs[static_cast<std::size_t>(r)]);
        }
      } else if (!idle) {
        st = b.Send(c.send, c.count, *t, peer(c.root), kGather);
      }
      break;
    case Collective::kScatter:
    case Collective::kScatterv:
      if (root) {
        for (int r = 0; r < remote && st.ok(); ++r) {
          const bool v = c.kind == Collective::kScatterv;
          const int64_t n = v ? c.send_counts[static_cast<std::size_t>(r)] : c.count;
          const int64_t at = v ? c.send_displs[static_cast<std::size_t>(r)] : r * c.count;
          st = b.Isend(Offset(c.send, at, *t), n, *t, peer(r), kScatter, &reqs[static_cast<std::size_t>(r)]);
        }
      } else if (!idle) {
        st = b.Recv(c.recv, c.recv_count, *rt, peer(c.root), kScatter);
      }
      break;
    case Collective::kAllgather:
    case Collective::kAllgatherv:
    case Collective::kAlltoall:
    case Collective::kAlltoallv: {
      // Every rank sends to every remote rank and receives from each.
      const bool to_each = c.kind == Collective::kAlltoall || c.kind == Collective::kAlltoallv;
      const bool v = c.kind == Collective::kAllgatherv || c.kind == Collective::kAlltoallv;
      const int tag = to_each ? kAlltoall : kAllgather;
      for (int r = 0; r < remote && st.ok(); ++r) {
        const auto i = static_cast<std::size_t>(r);
        const int64_t rn = v ? c.recv_counts[i] : c.recv_count;
        const int64_t rat = v ? c.recv_displs[i] : r * c.recv_count;
        st = b.Irecv(Offset(c.recv, rat, *rt), rn, *rt, peer(r), tag, &reqs[2 * i]);
        if (!st.ok()) break;
        const int64_t sn = to_each && v ? c.send_counts[i] : c.count;
        const int64_t sat = to_each ? (v ? c.send_displs[i] : r * c.count) : 0;
        st = b.Isend(Offset(c.send, sat, *t), sn, *t, peer(r), tag, &reqs[2 * i + 1]);
      }
      break;
    }
    case Collective::kReduce:
    case Collective::kAllreduce: {
      // The sending group reduces to its rank 0, which hands the result over.
      const bool both = c.kind == Collective::kAllreduce;
      if (root) {
        st = b.Recv(c.recv, c.count, *t, peer(0), kReduce);
        break;
      }
      if (idle) break;
      Scratch reduced(c.count, *t);
      st = Reduce(local, c.send, reduced.at(), c.count, *t, *c.op, 0);
      if (!st.ok()) break;
      if (!both) {
        if (local.rank() == 0) st = b.Send(reduced.at(), c.count, *t, peer(c.root), kReduce);
        break;
      }
      if (local.rank() == 0) {
        Request sent;
        st = b.Isend(reduced.at(), c.count, *t, peer(0), kAllreduce, &sent);
        if (st.ok()) st = b.Recv(c.recv, c.count, *t, peer(0), kAllreduce);
        if (absl::Status s = sent.Wait(); st.ok()) st = s;
      }
      if (st.ok()) st = Bcast(local, c.recv, c.count, *t, 0);
      break;
    }
    default:
      return Error(c.comm, c.fn, MPI_ERR_COMM, "this collective is not provided on an intercommunicator");
  }
  if (absl::Status s = WaitAll(reqs); st.ok()) st = s;
  return FromStatus(c.comm, c.fn, st);
}

}  // namespace cartage::mpi_binding
