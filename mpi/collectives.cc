// The MPI binding's collectives: each checks its arguments where MPI says
// they are significant, builds one cartage::CollectiveCall and runs it
// blocking (RunCollective), nonblocking (StartCollective) or persistent
// (InitCollective: MPI-4's *_init, started by MPI_Start). Where both sides
// of a call are significant and name different types or counts, the
// receive side's travel as the call's recv_type (MPI_Alltoallw's as its
// per-rank types).
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "cartage/collectives.h"
#include "datatype/op.h"
#include "datatype/segment_walk.h"
#include "mpi/collectives.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {


// A user operator's call: the function and the datatype handle it is
// passed. One for each pair, kept for the life of the process: cartage's
// schedule cache knows an operator by this address, so the same call must
// bring the same one (and a schedule it keeps never holds a freed one).
struct UserCall {
  MPI_User_function* fn;
  MPI_Datatype type;
};

UserCall* CallFor(MPI_User_function* fn, MPI_Datatype type) {
  static auto* calls = new std::map<std::pair<MPI_User_function*, MPI_Datatype>, std::unique_ptr<UserCall>>;
  std::unique_ptr<UserCall>& c = (*calls)[{fn, type}];  // the caller holds the state's lock
  if (c == nullptr) c = std::make_unique<UserCall>(UserCall{fn, type});
  return c.get();
}

void RunUser(const void* in, void* inout, int64_t count, const Datatype&, void* context) {
  auto* u = static_cast<UserCall*>(context);
  int len = static_cast<int>(count);
  MPI_Datatype type = u->type;
  u->fn(const_cast<void*>(in), inout, &len, &type);
}

// The operator a handle names for `datatype`: predefined, or the
// program's. An error code in `*rc` otherwise.
std::optional<Op> OpArg(MPI_Op op, MPI_Datatype datatype, MPI_Comm comm, const char* fn, int* rc) {
  if (const std::optional<OpKind> kind = OpOf(op)) return Op(*kind);
  if ((op & ~0x03ffffff) == kOpBase) {
    State& s = S();
    const auto i = static_cast<std::size_t>(op & 0x03ffffff);
    std::lock_guard<std::mutex> lock(s.mu);
    if (i < s.ops.size() && s.ops[i]->fn != nullptr) {
      return Op::User(&RunUser, s.ops[i]->commutative, CallFor(s.ops[i]->fn, datatype));
    }
  }
  *rc = Error(comm, fn, MPI_ERR_OP,
              absl::StrFormat("operator 0x%08x is not an operator (predefined, or made and not freed)",
                              static_cast<unsigned>(op)));
  return std::nullopt;
}

// Gives a nonblocking or persistent call its request, which `start`
// starts (or binds).
template <typename Start>
int WithRequest(MPI_Comm comm, const How& how, Start start) {
  Slot* slot = NewSlot(how.request);
  slot->comm = comm;
  slot->persistent = how.mode == Mode::kPersistent;
  if (const absl::Status st = start(&slot->req); !st.ok()) {
    FreeSlot(how.request);
    return FromStatus(comm, how.fn, st);
  }
  return MPI_SUCCESS;
}

// Runs `call` on `c` as `how` says.
int Dispatch(MPI_Comm comm, const How& how, const Comm& c, const CollectiveCall& call) {
  if (how.mode == Mode::kBlocking) return FromStatus(comm, how.fn, RunCollective(c, call));
  return WithRequest(comm, how, [&](Request* req) {
    return how.mode == Mode::kPersistent ? InitCollective(c, call, req) : StartCollective(c, call, req);
  });
}

// Where `comm` is an intercommunicator, runs `call` on it as `how` says
// (intercoll.cc's schedule) and says so, its outcome in `*rc`.
bool OnInter(MPI_Comm comm, const How& how, InterCall call, int* rc) {
  const CommSlot* slot = S().phase == Phase::kRunning ? CommSlotOf(comm) : nullptr;
  if (slot == nullptr || !slot->inter) return false;
  call.comm = comm;
  call.fn = how.fn;
  std::shared_ptr<Schedule> s;
  if (*rc = InterSchedule(call, &s); *rc != MPI_SUCCESS) return true;
  *rc = RunSchedule(comm, how, s);
  return true;
}

// The rank-indexed counts of an intercommunicator's remote group (empty
// where not significant).
std::vector<int64_t> PerRemote(MPI_Comm comm, const int* values) {
  const int n = CommSlotOf(comm)->remote_size;
  return values == nullptr ? std::vector<int64_t>() : std::vector<int64_t>(values, values + n);
}

InterCall Inter(Collective kind, const void* send, int64_t count, MPI_Datatype send_type, void* recv,
                int64_t recv_count = 0, MPI_Datatype recv_type = MPI_DATATYPE_NULL, int root = 0) {
  InterCall c;
  c.kind = kind;
  c.send = send;
  c.count = count;
  c.send_type = send_type;
  c.recv = recv;
  c.recv_count = recv_count;
  c.recv_type = recv_type;
  c.root = root;
  return c;
}

CollectiveCall Call(Collective kind, const void* send, void* recv, int64_t count, const Datatype& type, int root = 0) {
  CollectiveCall c;
  c.kind = kind;
  c.send = send == MPI_IN_PLACE ? kInPlace : send;
  c.recv = recv == MPI_IN_PLACE ? const_cast<void*>(kInPlace) : recv;
  c.count = count;
  c.type = type;
  c.root = root;
  return c;
}

int CheckRoot(MPI_Comm comm, const char* fn, int root, const Comm& c) {
  if (root >= 0 && root < c.size()) return MPI_SUCCESS;
  return Error(comm, fn, MPI_ERR_ROOT,
               absl::StrFormat("root %d: no such rank in a communicator of %d", root, c.size()));
}

// A side of a gather, scatter, allgather or alltoall.
struct Side {
  int count;
  MPI_Datatype type;
  bool significant;
};
// The sides significant on this rank: `a` the first's (the send side's
// where it is significant), and where both are and they differ, the
// receive side's type and count in `recv_type` and `recv_count`.
struct Signature {
  Args a;
  int count = 0;
  std::optional<Datatype> recv_type;
  int recv_count = 0;

  int Check(MPI_Comm comm, const char* fn, Side send, Side recv) {
    const Side& one = send.significant ? send : recv;
    if (int rc = mpi_binding::Check(comm, fn, one.count, one.type, kCollective, 0, false, &a); rc != MPI_SUCCESS) {
      return rc;
    }
    count = one.count;
    if (!send.significant || !recv.significant) return MPI_SUCCESS;
    Args other;
    if (int rc = mpi_binding::Check(comm, fn, recv.count, recv.type, kCollective, 0, false, &other);
        rc != MPI_SUCCESS) {
      return rc;
    }
    if (other.type != a.type || recv.count != send.count) {
      recv_type = *other.type;
      recv_count = recv.count;
    }
    return MPI_SUCCESS;
  }
  // `call` with the receive side's type, where it differs.
  CollectiveCall With(CollectiveCall call) const {
    call.recv_type = recv_type;
    call.recv_count = recv_count;
    return call;
  }
};

// A rank-indexed int array as cartage's counts (empty where not significant).
std::vector<int64_t> PerRank(const int* values, int n) {
  return values == nullptr ? std::vector<int64_t>() : std::vector<int64_t>(values, values + n);
}

// An alltoallv's (or alltoallw's) per-rank counts and displacements.
struct Counts {
  const int *send_counts, *send_displs, *recv_counts, *recv_displs;
};
// `ic` with them, by remote rank.
InterCall Counted(MPI_Comm comm, InterCall ic, const Counts& v) {
  ic.send_counts = PerRemote(comm, v.send_counts);
  ic.send_displs = PerRemote(comm, v.send_displs);
  ic.recv_counts = PerRemote(comm, v.recv_counts);
  ic.recv_displs = PerRemote(comm, v.recv_displs);
  return ic;
}
// `call` with them, by rank; in place, what is sent is laid out as what is received.
CollectiveCall Counted(int n, bool in_place, CollectiveCall call, const Counts& v) {
  call.send_counts = PerRank(in_place ? v.recv_counts : v.send_counts, n);
  call.send_displs = PerRank(in_place ? v.recv_displs : v.send_displs, n);
  call.recv_counts = PerRank(v.recv_counts, n);
  call.recv_displs = PerRank(v.recv_displs, n);
  return call;
}

// inout = in op inout, both laid out by `type`: `in` packed, then reduced
// into `inout` as a received stream would be.
absl::Status ReduceLocal(const Op& op, const void* in, void* inout, int64_t count, const Datatype& type) {
  const int64_t bytes = count * type.size();
  std::vector<std::byte> packed(static_cast<std::size_t>(bytes));
  datatype::Pack(in, count, type, 0, bytes, packed.data());
  return datatype::ReduceUnpack(op, packed.data(), count, type, 0, bytes, inout);
}

}  // namespace

// The reductions with one count: Reduce, Allreduce, Scan, Exscan,
// Reduce_scatter_block.
int Reduction(Collective kind, const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
              int root, MPI_Comm comm, const How& how) {
  if (int rc = 0; (kind == Collective::kReduce || kind == Collective::kAllreduce ||
                  kind == Collective::kReduceScatterBlock) &&
                 CommSlotOf(comm) != nullptr && CommSlotOf(comm)->inter) {
    const std::optional<Op> o = OpArg(op, datatype, comm, how.fn, &rc);
    if (!o.has_value()) return rc;
    InterCall ic = Inter(kind, sendbuf, count, datatype, recvbuf, 0, MPI_DATATYPE_NULL, root);
    ic.op = *o;
    OnInter(comm, how, ic, &rc);
    return rc;
  }
  Args a;
  if (int rc = Check(comm, how.fn, count, datatype, kCollective, 0, false, &a); rc != MPI_SUCCESS) return rc;
  if (kind == Collective::kReduce) {
    if (int rc = CheckRoot(comm, how.fn, root, *a.comm); rc != MPI_SUCCESS) return rc;
  }
  int rc = MPI_SUCCESS;
  const std::optional<Op> o = OpArg(op, datatype, comm, how.fn, &rc);
  if (!o.has_value()) return rc;
  CollectiveCall call = Call(kind, sendbuf, recvbuf, count, *a.type, root);
  call.op = *o;
  return Dispatch(comm, how, *a.comm, call);
}

int DoBarrier(MPI_Comm comm, const How& how) {
  InterCall ic = Inter(Collective::kBarrier, nullptr, 0, MPI_DATATYPE_NULL, nullptr);
  if (int rc = 0; OnInter(comm, how, ic, &rc)) return rc;
  int rc = MPI_SUCCESS;
  const Comm* c = IntraOf(comm, how.fn, &rc);
  if (c == nullptr) return rc;
  return Dispatch(comm, how, *c, Call(Collective::kBarrier, nullptr, nullptr, 0, Datatype::Basic(BasicType::kByte)));
}

int DoBcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, const How& how) {
  InterCall ic = Inter(Collective::kBcast, nullptr, count, datatype, buffer, 0, MPI_DATATYPE_NULL, root);
  if (int rc = 0; OnInter(comm, how, ic, &rc)) return rc;
  Args a;
  if (int rc = Check(comm, how.fn, count, datatype, kCollective, 0, false, &a); rc != MPI_SUCCESS) return rc;
  if (int rc = CheckRoot(comm, how.fn, root, *a.comm); rc != MPI_SUCCESS) return rc;
  return Dispatch(comm, how, *a.comm, Call(Collective::kBcast, buffer, buffer, count, *a.type, root));
}

// Gather and Scatter: the root's side and the others'.
int DoRooted(Collective kind, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
             int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, const How& how) {
  InterCall ic = Inter(kind, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root);
  if (int rc = 0; OnInter(comm, how, ic, &rc)) return rc;
  int rc = MPI_SUCCESS;
  const Comm* c = IntraOf(comm, how.fn, &rc);
  if (c == nullptr) return rc;
  if (rc = CheckRoot(comm, how.fn, root, *c); rc != MPI_SUCCESS) return rc;
  const bool at_root = c->rank() == root;
  const bool gather = kind == Collective::kGather;
  const bool in_place = at_root && (gather ? sendbuf : recvbuf) == MPI_IN_PLACE;
  const Side send{sendcount, sendtype, gather ? !in_place : at_root};
  const Side recv{recvcount, recvtype, gather ? at_root : !in_place};
  Signature sig;
  if (rc = sig.Check(comm, how.fn, send, recv); rc != MPI_SUCCESS) return rc;
  return Dispatch(comm, how, *c, sig.With(Call(kind, sendbuf, recvbuf, sig.count, *sig.a.type, root)));
}

// Allgather and Alltoall: one signature, MPI_IN_PLACE, then the call.
int DoAllToAll(Collective kind, const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
               int recvcount, MPI_Datatype recvtype, MPI_Comm comm, const How& how) {
  InterCall ic = Inter(kind, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype);
  if (int rc = 0; OnInter(comm, how, ic, &rc)) return rc;
  Signature sig;
  if (int rc = sig.Check(comm, how.fn, {sendcount, sendtype, sendbuf != MPI_IN_PLACE}, {recvcount, recvtype, true});
      rc != MPI_SUCCESS) {
    return rc;
  }
  return Dispatch(comm, how, *sig.a.comm, sig.With(Call(kind, sendbuf, recvbuf, sig.count, *sig.a.type)));
}

int DoGatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
              const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, const How& how) {
  if (int rc = 0; CommSlotOf(comm) != nullptr && CommSlotOf(comm)->inter) {
    InterCall ic = Inter(Collective::kGatherv, sendbuf, sendcount, sendtype, recvbuf, 0, recvtype, root);
    if (root == MPI_ROOT) {
      ic.recv_counts = PerRemote(comm, recvcounts);
      ic.recv_displs = PerRemote(comm, displs);
    }
    OnInter(comm, how, ic, &rc);
    return rc;
  }
  int rc = MPI_SUCCESS;
  const Comm* c = IntraOf(comm, how.fn, &rc);
  if (c == nullptr) return rc;
  if (rc = CheckRoot(comm, how.fn, root, *c); rc != MPI_SUCCESS) return rc;
  const bool at_root = c->rank() == root;
  const bool in_place = at_root && sendbuf == MPI_IN_PLACE;
  Signature sig;
  if (rc = sig.Check(comm, how.fn, {0, sendtype, !in_place}, {0, recvtype, at_root}); rc != MPI_SUCCESS) return rc;
  const int n = at_root ? c->size() : 0;
  CollectiveCall call =
      sig.With(Call(Collective::kGatherv, sendbuf, recvbuf, in_place ? 0 : sendcount, *sig.a.type, root));
  call.recv_counts = PerRank(recvcounts, n);
  call.recv_displs = PerRank(displs, n);
  return Dispatch(comm, how, *c, call);
}

int DoScatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
               void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, const How& how) {
  if (int rc = 0; CommSlotOf(comm) != nullptr && CommSlotOf(comm)->inter) {
    InterCall ic = Inter(Collective::kScatterv, sendbuf, 0, sendtype, recvbuf, recvcount, recvtype, root);
    if (root == MPI_ROOT) {
      ic.send_counts = PerRemote(comm, sendcounts);
      ic.send_displs = PerRemote(comm, displs);
    }
    OnInter(comm, how, ic, &rc);
    return rc;
  }
  int rc = MPI_SUCCESS;
  const Comm* c = IntraOf(comm, how.fn, &rc);
  if (c == nullptr) return rc;
  if (rc = CheckRoot(comm, how.fn, root, *c); rc != MPI_SUCCESS) return rc;
  const bool at_root = c->rank() == root;
  const bool in_place = at_root && recvbuf == MPI_IN_PLACE;
  Signature sig;
  if (rc = sig.Check(comm, how.fn, {0, sendtype, at_root}, {0, recvtype, !in_place}); rc != MPI_SUCCESS) return rc;
  const int n = at_root ? c->size() : 0;
  CollectiveCall call =
      sig.With(Call(Collective::kScatterv, sendbuf, recvbuf, in_place ? 0 : recvcount, *sig.a.type, root));
  call.send_counts = PerRank(sendcounts, n);
  call.send_displs = PerRank(displs, n);
  return Dispatch(comm, how, *c, call);
}

int DoAllgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                 const int displs[], MPI_Datatype recvtype, MPI_Comm comm, const How& how) {
  if (int rc = 0; CommSlotOf(comm) != nullptr && CommSlotOf(comm)->inter) {
    InterCall ic = Inter(Collective::kAllgatherv, sendbuf, sendcount, sendtype, recvbuf, 0, recvtype);
    ic.recv_counts = PerRemote(comm, recvcounts);
    ic.recv_displs = PerRemote(comm, displs);
    OnInter(comm, how, ic, &rc);
    return rc;
  }
  const bool in_place = sendbuf == MPI_IN_PLACE;
  Signature sig;
  if (int rc = sig.Check(comm, how.fn, {0, sendtype, !in_place}, {0, recvtype, true}); rc != MPI_SUCCESS) return rc;
  const Args& a = sig.a;
  const int n = a.comm->size();
  // In place, this rank's own block is already where it goes: its count is its receive count.
  const int own = in_place && recvcounts != nullptr ? recvcounts[a.comm->rank()] : sendcount;
  CollectiveCall call = sig.With(Call(Collective::kAllgatherv, sendbuf, recvbuf, own, *a.type));
  call.recv_counts = PerRank(recvcounts, n);
  call.recv_displs = PerRank(displs, n);
  return Dispatch(comm, how, *a.comm, call);
}

int DoAlltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
                const How& how) {
  if (int rc = 0; CommSlotOf(comm) != nullptr && CommSlotOf(comm)->inter) {
    InterCall ic = Inter(Collective::kAlltoallv, sendbuf, 0, sendtype, recvbuf, 0, recvtype);
    OnInter(comm, how, Counted(comm, ic, {sendcounts, sdispls, recvcounts, rdispls}), &rc);
    return rc;
  }
  const bool in_place = sendbuf == MPI_IN_PLACE;
  Signature sig;
  if (int rc = sig.Check(comm, how.fn, {0, sendtype, !in_place}, {0, recvtype, true}); rc != MPI_SUCCESS) return rc;
  const Args& a = sig.a;
  CollectiveCall call = sig.With(Call(Collective::kAlltoallv, sendbuf, recvbuf, 0, *a.type));
  const Counts v{sendcounts, sdispls, recvcounts, rdispls};
  return Dispatch(comm, how, *a.comm, Counted(a.comm->size(), in_place, call, v));
}

int RunSchedule(MPI_Comm comm, const How& how, const std::shared_ptr<Schedule>& s) {
  if (how.mode == Mode::kBlocking) return FromStatus(comm, how.fn, s->Run());
  return WithRequest(comm, how, [&](Request* req) {
    return how.mode == Mode::kPersistent ? s->Bind(req) : s->Start(req);
  });
}

int DoAlltoallw(const void* sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[],
                void* recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[],
                MPI_Comm comm, const How& how) {
  const bool in_place = sendbuf == MPI_IN_PLACE;
  if (int rc = 0; CommSlotOf(comm) != nullptr && CommSlotOf(comm)->inter) {
    InterCall ic = Counted(comm, Inter(Collective::kAlltoallv, sendbuf, 0, MPI_DATATYPE_NULL, recvbuf),
                           {sendcounts, sdispls, recvcounts, rdispls});
    const int n = CommSlotOf(comm)->remote_size;
    if (sendtypes != nullptr) ic.send_types.assign(sendtypes, sendtypes + n);
    if (recvtypes != nullptr) ic.recv_types.assign(recvtypes, recvtypes + n);
    OnInter(comm, how, ic, &rc);
    return rc;
  }
  int rc = MPI_SUCCESS;
  const Comm* c = IntraOf(comm, how.fn, &rc);
  if (c == nullptr) return rc;
  const int n = c->size();
  // Each rank's types, checked as any call's; in place, what is sent is laid out as what is received.
  auto types = [&](const MPI_Datatype* handles, const int* counts, std::vector<Datatype>* out) {
    for (int i = 0; i < n; ++i) {
      Args a;
      if (rc = Check(comm, how.fn, counts[i], handles[i], kCollective, 0, false, &a); rc != MPI_SUCCESS) return false;
      out->push_back(*a.type);
    }
    return true;
  };
  CollectiveCall call = Call(Collective::kAlltoallv, sendbuf, recvbuf, 0, Datatype::Basic(BasicType::kByte));
  if (!types(recvtypes, recvcounts, &call.recv_types)) return rc;
  if (in_place) {
    call.send_types = call.recv_types;
  } else if (!types(sendtypes, sendcounts, &call.send_types)) {
    return rc;
  }
  return Dispatch(comm, how, *c, Counted(n, in_place, call, {sendcounts, sdispls, recvcounts, rdispls}));
}

int DoReduceScatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op,
                    MPI_Comm comm, const How& how) {
  if (int rc = 0; CommSlotOf(comm) != nullptr && CommSlotOf(comm)->inter) {
    const std::optional<Op> o = OpArg(op, datatype, comm, how.fn, &rc);
    if (!o.has_value()) return rc;
    InterCall ic = Inter(Collective::kReduceScatter, sendbuf, 0, datatype, recvbuf);
    ic.op = *o;
    // This group's counts: each group's vector is their sum long.
    const int n = CommSlotOf(comm)->local_size;
    if (recvcounts != nullptr) ic.recv_counts.assign(recvcounts, recvcounts + n);
    OnInter(comm, how, ic, &rc);
    return rc;
  }
  Args a;
  if (int rc = Check(comm, how.fn, 0, datatype, kCollective, 0, false, &a); rc != MPI_SUCCESS) return rc;
  int rc = MPI_SUCCESS;
  const std::optional<Op> o = OpArg(op, datatype, comm, how.fn, &rc);
  if (!o.has_value()) return rc;
  CollectiveCall call = Call(Collective::kReduceScatter, sendbuf, recvbuf, 0, *a.type);
  call.op = *o;
  call.recv_counts = PerRank(recvcounts, a.comm->size());
  return Dispatch(comm, how, *a.comm, call);
}




extern "C" {

// ---- User operators --------------------------------------------------------------------

int PMPI_Op_create(MPI_User_function* user_fn, int commute, MPI_Op* op) {
  if (user_fn == nullptr) return Error(MPI_COMM_WORLD, "MPI_Op_create", MPI_ERR_ARG, "a null function");
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  const int i = TakeSlot(s.ops, s.free_ops);
  s.ops[static_cast<std::size_t>(i)]->fn = user_fn;
  s.ops[static_cast<std::size_t>(i)]->commutative = commute != 0;
  *op = kOpBase | i;
  return MPI_SUCCESS;
}

int PMPI_Op_free(MPI_Op* op) {
  State& s = S();
  const auto i = static_cast<std::size_t>(*op & 0x03ffffff);
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if ((*op & ~0x03ffffff) == kOpBase && i < s.ops.size() && s.ops[i]->fn != nullptr) {
      s.ops[i]->fn = nullptr;  // calls under way hold their own copy of the function
      s.free_ops.push_back(static_cast<int>(i));
      *op = MPI_OP_NULL;
      return MPI_SUCCESS;
    }
  }
  return Error(MPI_COMM_WORLD, "MPI_Op_free", MPI_ERR_OP,
               absl::StrFormat("operator 0x%08x is not one the program made", static_cast<unsigned>(*op)));
}

int PMPI_Op_commutative(MPI_Op op, int* commute) {
  int rc = MPI_SUCCESS;
  const std::optional<Op> o = OpArg(op, MPI_BYTE, MPI_COMM_WORLD, "MPI_Op_commutative", &rc);
  if (!o.has_value()) return rc;
  *commute = o->commutative() ? 1 : 0;
  return MPI_SUCCESS;
}

int PMPI_Reduce_local(const void* inbuf, void* inoutbuf, int count, MPI_Datatype datatype, MPI_Op op) {
  int rc = MPI_SUCCESS;
  const Datatype* t = TypeArg(datatype, "MPI_Reduce_local", &rc);
  if (t == nullptr) return rc;
  const std::optional<Op> o = OpArg(op, datatype, MPI_COMM_WORLD, "MPI_Reduce_local", &rc);
  if (!o.has_value()) return rc;
  if (count < 0) return Error(MPI_COMM_WORLD, "MPI_Reduce_local", MPI_ERR_COUNT, absl::StrFormat("count %d", count));
  return FromStatus(MPI_COMM_WORLD, "MPI_Reduce_local", ReduceLocal(*o, inbuf, inoutbuf, count, *t));
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Op_create);
CARTAGE_MPI_ALIAS(MPI_Op_free);
CARTAGE_MPI_ALIAS(MPI_Op_commutative);
CARTAGE_MPI_ALIAS(MPI_Reduce_local);
