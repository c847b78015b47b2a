// The MPI C binding: each call checks its handles and arguments as MPI
// defines them, then makes one call of cartage's public API. MPI's own
// bookkeeping (handles, error handlers, statuses) lives here; data moves
// only through cartage::Comm, cartage::Request and the collectives.
#include "mpi/include/mpi.h"

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "cartage/cartage.h"
#include "cartage/collectives.h"
#include "cartage/config.h"
#include "mpi/handles.h"

namespace cartage::mpi_binding {
namespace {

int Start(int* argc, char*** argv, std::optional<cartage::ThreadLevel> level, const char* fn) {
  (void)argc;
  (void)argv;
  State& s = S();
  if (s.world_started || s.phase == Phase::kAfter) {
    std::fprintf(stderr, "cartage mpi: %s: MPI is already %s\n", fn,
                 s.world_finalized || s.phase == Phase::kAfter ? "finalized" : "initialized");
    AbortJob(MPI_ERR_OTHER);
  }
  s.world_started = true;
  if (s.phase == Phase::kBefore) StartRuntime(level, fn);  // else a session started it already
  return MPI_SUCCESS;
}

}  // namespace

void StartRuntime(std::optional<cartage::ThreadLevel> level, const char* fn) {
  State& s = S();
  cartage::AgentOptions options;
  options.threads = level;
  absl::StatusOr<std::unique_ptr<cartage::Agent>> agent = cartage::Agent::FromEnvironment(options);
  if (!agent.ok()) {
    std::fprintf(stderr, "cartage mpi: %s: %s\n", fn, std::string(agent.status().message()).c_str());
    AbortJob(MPI_ERR_OTHER);
  }
  s.agent = *std::move(agent);
  s.main_thread = std::this_thread::get_id();
  const cartage::Comm world = s.agent->World();
  s.world_rank = world.rank();
  // MPI_COMM_SELF: this rank alone (a split by rank, collective over the world).
  absl::StatusOr<std::optional<cartage::Comm>> self = world.Split(world.rank(), 0);
  if (!self.ok() || !self->has_value()) {
    std::fprintf(stderr, "cartage mpi: %s: MPI_COMM_SELF: %s\n", fn,
                 self.ok() ? "no communicator" : std::string(self.status().message()).c_str());
    AbortJob(MPI_ERR_OTHER);
  }
  absl::StatusOr<cartage::Comm> own = world.Dup();
  if (!own.ok()) {
    std::fprintf(stderr, "cartage mpi: %s: %s\n", fn, std::string(own.status().message()).c_str());
    AbortJob(MPI_ERR_OTHER);
  }
  s.own_world = *std::move(own);
  NewComm(world, MPI_ERRORS_ARE_FATAL);  // slot 0: MPI_COMM_WORLD
  NewComm(**self, MPI_ERRORS_ARE_FATAL);  // slot 1: MPI_COMM_SELF
  s.phase = Phase::kRunning;
}

int StopRuntime(const char* fn) {
  State& s = S();
  if (s.live_sessions > 0 || (s.world_started && !s.world_finalized)) return MPI_SUCCESS;  // still needed
  FlushBuffered();
  WaitOrphans();
  {
    // Every communicator and request goes before the agent (an active one
    // left by the program is cancelled where it can be, then waited for).
    std::lock_guard<std::mutex> lock(s.mu);
    s.slots.clear();
    s.free_slots.clear();
    s.comms.clear();
    s.free_comms.clear();
  }
  const absl::Status st = s.agent->Finalize();
  s.phase = Phase::kAfter;
  s.agent.reset();
  if (!st.ok()) std::fprintf(stderr, "cartage mpi: %s: %s\n", fn, std::string(st.message()).c_str());
  return st.ok() ? MPI_SUCCESS : MPI_ERR_OTHER;
}

namespace {

// `comm`'s duplicate `d` as a handle in `*newcomm`: its error handler and
// attributes go with it, as MPI says, and an intercommunicator's two
// groups; `bridge` (a second duplicate) serves an intercommunicator's
// collectives, or one is made now.
int Adopt(MPI_Comm comm, cartage::Comm d, std::optional<cartage::Comm> bridge, MPI_Comm* newcomm, const char* fn) {
  int rc = MPI_SUCCESS;
  const CommSlot old = *CommSlotOf(comm);
  *newcomm = NewComm(std::move(d), old.handler);
  CommSlot* made = CommSlotOf(*newcomm);
  made->inter = old.inter;
  made->local_offset = old.local_offset;
  made->local_size = old.local_size;
  made->remote_offset = old.remote_offset;
  made->remote_size = old.remote_size;
  made->cart = old.cart;  // and its topology
  made->dims = old.dims;
  made->periods = old.periods;
  if (old.inter && bridge.has_value()) {
    made->bridge = *std::move(bridge);
  } else if (old.inter) {
    rc = MakeInter(*newcomm, fn);
  }
  if (rc == MPI_SUCCESS) rc = CopyAttrs(comm, *newcomm, true, fn);
  if (rc != MPI_SUCCESS) {
    (void)DeleteAttrs(*newcomm, true, fn);
    FreeComm(newcomm);
  }
  return rc;
}

// The whole elements of `datatype` a status's bytes make (MPI_UNDEFINED
// where they make none exactly): MPI_Get_count and its large-count form.
int CountOf(const MPI_Status* status, MPI_Datatype datatype, const char* fn, MPI_Count* count) {
  int rc = MPI_SUCCESS;
  const Datatype* type = TypeArg(datatype, fn, &rc);
  if (type == nullptr) return rc;
  const uint64_t bytes = static_cast<uint32_t>(status->count_lo) |
                         (static_cast<uint64_t>(static_cast<uint32_t>(status->count_hi_and_cancelled) >> 1) << 32);
  const auto size = static_cast<uint64_t>(type->size());
  *count = size == 0 ? 0 : bytes % size != 0 ? MPI_UNDEFINED : static_cast<MPI_Count>(bytes / size);
  return MPI_SUCCESS;
}

}  // namespace

int Post(const void* buf, int64_t count, MPI_Datatype type, int peer, int tag, MPI_Comm comm, MPI_Request* request,
         const char* fn, Posted what) {
  const bool recv = what == Posted::kRecv || what == Posted::kRecvInit;
  const bool persistent = what == Posted::kSendInit || what == Posted::kSsendInit || what == Posted::kRecvInit;
  Args a;
  if (int rc = Check(comm, fn, count, type, peer, tag, recv, &a); rc != MPI_SUCCESS) return rc;
  Slot* slot = NewSlot(request);
  slot->recv = recv;
  slot->comm = comm;
  slot->persistent = persistent;
  slot->offset = a.offset;
  if (peer == MPI_PROC_NULL) {
    slot->proc_null = true;
    return MPI_SUCCESS;
  }
  void* rbuf = const_cast<void*>(buf);
  absl::Status st;
  switch (what) {
    case Posted::kSend: st = a.comm->Isend(buf, count, *a.type, a.peer, tag, &slot->req); break;
    case Posted::kSsend: st = a.comm->Issend(buf, count, *a.type, a.peer, tag, &slot->req); break;
    case Posted::kRecv: st = a.comm->Irecv(rbuf, count, *a.type, SourceArg(a.peer), TagArg(tag), &slot->req); break;
    case Posted::kSendInit: st = a.comm->SendInit(buf, count, *a.type, a.peer, tag, &slot->req); break;
    case Posted::kSsendInit:
      // cartage has no persistent synchronous send: each start is an Issend
      // of what the call named, checked again (the type may have been freed
      // since, as MPI allows, so it is held here).
      slot->start = [slot, buf, count, t = *a.type, c = a.comm, peer = a.peer, tag, comm] {
        return FromStatus(comm, "MPI_Start", c->Issend(buf, count, t, peer, tag, &slot->req));
      };
      break;
    case Posted::kRecvInit:
      st = a.comm->RecvInit(rbuf, count, *a.type, SourceArg(a.peer), TagArg(tag), &slot->req);
      break;
  }
  if (!st.ok()) {
    FreeSlot(request);
    return FromStatus(comm, fn, st);
  }
  return MPI_SUCCESS;
}

// The calls, with C linkage: the same functions mpi.h declares.
extern "C" {

// ---- Set-up and tear-down ----------------------------------------------------------

int PMPI_Init(int* argc, char*** argv) { return Start(argc, argv, std::nullopt, "MPI_Init"); }

int PMPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  if (required < MPI_THREAD_SINGLE || required > MPI_THREAD_MULTIPLE) required = MPI_THREAD_MULTIPLE;
  const int rc = Start(argc, argv, static_cast<cartage::ThreadLevel>(required), "MPI_Init_thread");
  *provided = static_cast<int>(S().agent->thread_level());
  return rc;
}

int PMPI_Query_thread(int* provided) {
  int rc = MPI_SUCCESS;
  if (CommOf(MPI_COMM_WORLD, "MPI_Query_thread", &rc) == nullptr) return rc;
  *provided = static_cast<int>(S().agent->thread_level());
  return MPI_SUCCESS;
}

int PMPI_Is_thread_main(int* flag) {
  int rc = MPI_SUCCESS;
  if (CommOf(MPI_COMM_WORLD, "MPI_Is_thread_main", &rc) == nullptr) return rc;
  *flag = std::this_thread::get_id() == S().main_thread ? 1 : 0;
  return MPI_SUCCESS;
}

int PMPI_Finalize(void) {
  State& s = S();
  int rc = MPI_SUCCESS;
  if (CommOf(MPI_COMM_WORLD, "MPI_Finalize", &rc) == nullptr) return rc;
  if (!s.world_started || s.world_finalized) {
    return Error(MPI_COMM_WORLD, "MPI_Finalize", MPI_ERR_OTHER,
                 s.world_finalized ? "MPI is finalized already" : "MPI_Init was not called (only sessions run)");
  }
  // As MPI: MPI_COMM_SELF's attributes are deleted first, as if it were freed.
  if (rc = DeleteAttrs(MPI_COMM_SELF, true, "MPI_Finalize"); rc != MPI_SUCCESS) return rc;
  if (rc = DeleteAttrs(MPI_COMM_WORLD, true, "MPI_Finalize"); rc != MPI_SUCCESS) return rc;
  s.world_finalized = true;
  return StopRuntime("MPI_Finalize");  // a session still open keeps it running
}

int PMPI_Initialized(int* flag) {
  *flag = S().world_started ? 1 : 0;
  return MPI_SUCCESS;
}

int PMPI_Finalized(int* flag) {
  *flag = S().world_finalized ? 1 : 0;
  return MPI_SUCCESS;
}

int PMPI_Abort(MPI_Comm comm, int errorcode) {
  (void)comm;
  const State& s = S();
  std::fprintf(stderr, "cartage mpi: rank %d: MPI_Abort with code %d\n", s.world_rank, errorcode);
  AbortJob(errorcode);
}

int PMPI_Get_processor_name(char* name, int* resultlen) {
  char host[MPI_MAX_PROCESSOR_NAME] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "localhost");
  *resultlen = static_cast<int>(std::strlen(host));
  std::memcpy(name, host, static_cast<std::size_t>(*resultlen) + 1);
  return MPI_SUCCESS;
}

int PMPI_Get_version(int* version, int* subversion) {
  *version = MPI_VERSION;
  *subversion = MPI_SUBVERSION;
  return MPI_SUCCESS;
}

int PMPI_Get_library_version(char* version, int* resultlen) {
  const std::string text = absl::StrFormat("cartage %s (MPI binding, MPICH ABI)", CARTAGE_VERSION);
  *resultlen = static_cast<int>(text.size());
  std::memcpy(version, text.c_str(), text.size() + 1);
  return MPI_SUCCESS;
}

double PMPI_Wtime(void) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - S().epoch).count();
}

double PMPI_Wtick(void) { return 1e-9; }

// ---- Communicators and errors ------------------------------------------------------

int PMPI_Comm_rank(MPI_Comm comm, int* rank) {
  int rc = MPI_SUCCESS;
  const cartage::Comm* c = CommOf(comm, "MPI_Comm_rank", &rc);
  if (c == nullptr) return rc;
  const CommSlot* slot = CommSlotOf(comm);
  *rank = c->rank() - slot->local_offset;
  return MPI_SUCCESS;
}

int PMPI_Comm_size(MPI_Comm comm, int* size) {
  int rc = MPI_SUCCESS;
  const cartage::Comm* c = CommOf(comm, "MPI_Comm_size", &rc);
  if (c == nullptr) return rc;
  const CommSlot* slot = CommSlotOf(comm);
  *size = slot->inter ? slot->local_size : c->size();
  return MPI_SUCCESS;
}

int PMPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  int rc = MPI_SUCCESS;
  const cartage::Comm* c = CommOf(comm, "MPI_Comm_dup", &rc);
  if (c == nullptr) return rc;
  absl::StatusOr<cartage::Comm> d = c->Dup();
  if (!d.ok()) return FromStatus(comm, "MPI_Comm_dup", d.status());
  return Adopt(comm, *std::move(d), std::nullopt, newcomm, "MPI_Comm_dup");
}

// The agreement runs as a nonblocking collective (cartage::PendingDup);
// `*newcomm` is set when the request completes, as MPI allows.
int PMPI_Comm_idup(MPI_Comm comm, MPI_Comm* newcomm, MPI_Request* request) {
  int rc = MPI_SUCCESS;
  const cartage::Comm* c = CommOf(comm, "MPI_Comm_idup", &rc);
  if (c == nullptr) return rc;
  const bool inter = CommSlotOf(comm)->inter;
  auto dup = std::make_shared<cartage::PendingDup>();
  Slot* slot = NewSlot(request);
  slot->comm = comm;
  if (const absl::Status st = dup->Start(*c, inter ? 2 : 1, &slot->req); !st.ok()) {
    FreeSlot(request);
    return FromStatus(comm, "MPI_Comm_idup", st);
  }
  slot->then = [comm, newcomm, dup, inter]() {
    absl::StatusOr<cartage::Comm> d = dup->Take(0);
    if (!d.ok()) return FromStatus(comm, "MPI_Comm_idup", d.status());
    std::optional<cartage::Comm> bridge;
    if (inter) {
      absl::StatusOr<cartage::Comm> b = dup->Take(1);
      if (!b.ok()) return FromStatus(comm, "MPI_Comm_idup", b.status());
      bridge = *std::move(b);
    }
    return Adopt(comm, *std::move(d), std::move(bridge), newcomm, "MPI_Comm_idup");
  };
  return MPI_SUCCESS;
}

int PMPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  int rc = MPI_SUCCESS;
  const cartage::Comm* c = CommOf(comm, "MPI_Comm_split", &rc);
  if (c == nullptr) return rc;
  if (color < 0 && color != MPI_UNDEFINED) {
    return Error(comm, "MPI_Comm_split", MPI_ERR_ARG,
                 absl::StrFormat("color %d: a color is >= 0 or MPI_UNDEFINED", color));
  }
  if (CommSlotOf(comm)->inter) return SplitInter(comm, color, key, newcomm);
  absl::StatusOr<std::optional<cartage::Comm>> split = c->Split(color == MPI_UNDEFINED ? -1 : color, key);
  if (!split.ok()) return FromStatus(comm, "MPI_Comm_split", split.status());
  *newcomm = split->has_value() ? NewComm(**split, CommSlotOf(comm)->handler) : MPI_COMM_NULL;
  return MPI_SUCCESS;
}

int PMPI_Comm_free(MPI_Comm* comm) {
  int rc = MPI_SUCCESS;
  if (CommOf(*comm, "MPI_Comm_free", &rc) == nullptr) return rc;
  if (*comm == MPI_COMM_WORLD || *comm == MPI_COMM_SELF) {
    return Error(*comm, "MPI_Comm_free", MPI_ERR_COMM, "MPI_COMM_WORLD and MPI_COMM_SELF are not freed");
  }
  if (rc = DeleteAttrs(*comm, true, "MPI_Comm_free"); rc != MPI_SUCCESS) return rc;
  FreeComm(comm);
  return MPI_SUCCESS;
}

// ---- Point-to-point ----------------------------------------------------------------

int PMPI_Send(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  Args a;
  if (int rc = Check(comm, "MPI_Send", count, datatype, dest, tag, false, &a); rc != MPI_SUCCESS) return rc;
  if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
  return FromStatus(comm, "MPI_Send", a.comm->Send(buf, count, *a.type, a.peer, tag));
}

int PMPI_Ssend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  MPI_Request r;
  if (int rc = Post(buf, count, datatype, dest, tag, comm, &r, "MPI_Ssend", Posted::kSsend); rc != MPI_SUCCESS) {
    return rc;
  }
  return PMPI_Wait(&r, MPI_STATUS_IGNORE);
}

int PMPI_Recv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  Args a;
  if (int rc = Check(comm, "MPI_Recv", count, datatype, source, tag, true, &a); rc != MPI_SUCCESS) return rc;
  if (source == MPI_PROC_NULL) {
    SetEmptyStatus(status);
    return MPI_SUCCESS;
  }
  cartage::ProbeResult got;
  const int rc =
      FromStatus(comm, "MPI_Recv", a.comm->Recv(buf, count, *a.type, SourceArg(a.peer), TagArg(tag), &got));
  SetStatus(status, got.source - a.offset, got.tag, got.bytes);
  return rc;
}

int PMPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf,
                  int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  MPI_Request r;
  if (int rc = Post(recvbuf, recvcount, recvtype, source, recvtag, comm, &r, "MPI_Sendrecv", Posted::kRecv);
      rc != MPI_SUCCESS) {
    return rc;
  }
  const int sent = PMPI_Send(sendbuf, sendcount, sendtype, dest, sendtag, comm);
  const int received = PMPI_Wait(&r, status);
  return sent != MPI_SUCCESS ? sent : received;
}

int PMPI_Sendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source,
                          int recvtag, MPI_Comm comm, MPI_Status* status) {
  MPI_Request r;
  if (int rc = PMPI_Isendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm, &r);
      rc != MPI_SUCCESS) {
    return rc;
  }
  return PMPI_Wait(&r, status);
}

int PMPI_Isendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf,
                   int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                   MPI_Request* request) {
  Args a;
  if (int rc = Check(comm, "MPI_Isendrecv", sendcount, sendtype, dest, sendtag, false, &a); rc != MPI_SUCCESS) {
    return rc;
  }
  // One request for both: the receive in its slot's `req`, the send beside it.
  if (int rc = Post(recvbuf, recvcount, recvtype, source, recvtag, comm, request, "MPI_Isendrecv", Posted::kRecv);
      rc != MPI_SUCCESS) {
    return rc;
  }
  if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
  int rc = MPI_SUCCESS;
  Slot* slot = ActiveSlot(*request, "MPI_Isendrecv", &rc);
  slot->also.emplace();
  if (const absl::Status st = a.comm->Isend(sendbuf, sendcount, *a.type, a.peer, sendtag, &*slot->also); !st.ok()) {
    slot->also.reset();
    (void)PMPI_Cancel(request);
    (void)PMPI_Wait(request, MPI_STATUS_IGNORE);
    return FromStatus(comm, "MPI_Isendrecv", st);
  }
  return MPI_SUCCESS;
}

int PMPI_Isendrecv_replace(void* buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source,
                           int recvtag, MPI_Comm comm, MPI_Request* request) {
  Args a;
  if (int rc = Check(comm, "MPI_Isendrecv_replace", count, datatype, dest, sendtag, false, &a); rc != MPI_SUCCESS) {
    return rc;
  }
  // What is sent is a copy of the bytes the type spans at `buf` (its
  // layout kept), held by the request, so that the receive may land in
  // `buf` at once.
  const Datatype& t = *a.type;
  const int64_t span = count == 0 || dest == MPI_PROC_NULL ? 0 : t.true_extent() + (count - 1) * t.extent();
  std::vector<std::byte> copy(static_cast<std::size_t>(span));
  const std::byte* first = static_cast<const std::byte*>(buf) + t.true_lb();
  if (span > 0) std::memcpy(copy.data(), first, static_cast<std::size_t>(span));
  const std::byte* from = copy.data() - t.true_lb();
  if (int rc = PMPI_Isendrecv(from, count, datatype, dest, sendtag, buf, count, datatype, source, recvtag, comm,
                              request);
      rc != MPI_SUCCESS) {
    return rc;
  }
  int rc = MPI_SUCCESS;
  ActiveSlot(*request, "MPI_Isendrecv_replace", &rc)->kept = std::move(copy);  // a vector's move keeps its bytes where they are
  return MPI_SUCCESS;
}

int PMPI_Isend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
               MPI_Request* request) {
  return Post(buf, count, datatype, dest, tag, comm, request, "MPI_Isend", Posted::kSend);
}

int PMPI_Issend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                MPI_Request* request) {
  return Post(buf, count, datatype, dest, tag, comm, request, "MPI_Issend", Posted::kSsend);
}

int PMPI_Irecv(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
               MPI_Request* request) {
  return Post(buf, count, datatype, source, tag, comm, request, "MPI_Irecv", Posted::kRecv);
}

int PMPI_Iprobe(int source, int tag, MPI_Comm comm, int* flag, MPI_Status* status) {
  Args a;
  if (int rc = Check(comm, "MPI_Iprobe", 0, MPI_BYTE, source, tag, true, &a); rc != MPI_SUCCESS) return rc;
  *flag = 1;
  if (source == MPI_PROC_NULL) {
    SetEmptyStatus(status);
    return MPI_SUCCESS;
  }
  absl::StatusOr<std::optional<cartage::ProbeResult>> got = a.comm->Iprobe(SourceArg(a.peer), TagArg(tag));
  if (!got.ok()) return FromStatus(comm, "MPI_Iprobe", got.status());
  *flag = got->has_value() ? 1 : 0;
  if (got->has_value()) SetStatus(status, (*got)->source - a.offset, (*got)->tag, (*got)->bytes);
  return MPI_SUCCESS;
}

int PMPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status* status) {
  Args a;
  if (int rc = Check(comm, "MPI_Probe", 0, MPI_BYTE, source, tag, true, &a); rc != MPI_SUCCESS) return rc;
  if (source == MPI_PROC_NULL) {
    SetEmptyStatus(status);
    return MPI_SUCCESS;
  }
  absl::StatusOr<cartage::ProbeResult> got = a.comm->Probe(SourceArg(a.peer), TagArg(tag));
  if (!got.ok()) return FromStatus(comm, "MPI_Probe", got.status());
  SetStatus(status, got->source - a.offset, got->tag, got->bytes);
  return MPI_SUCCESS;
}

int PMPI_Get_count(const MPI_Status* status, MPI_Datatype datatype, int* count) {
  MPI_Count n = 0;
  const int rc = CountOf(status, datatype, "MPI_Get_count", &n);
  *count = n > INT32_MAX ? MPI_UNDEFINED : static_cast<int>(n);
  return rc;
}

// The large-count forms (MPI-4): the same calls with an MPI_Count.
int PMPI_Send_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  Args a;
  if (int rc = Check(comm, "MPI_Send_c", count, datatype, dest, tag, false, &a); rc != MPI_SUCCESS) return rc;
  if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
  return FromStatus(comm, "MPI_Send_c", a.comm->Send(buf, count, *a.type, a.peer, tag));
}

int PMPI_Recv_c(void* buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                MPI_Status* status) {
  MPI_Request r;
  if (int rc = Post(buf, count, datatype, source, tag, comm, &r, "MPI_Recv_c", Posted::kRecv); rc != MPI_SUCCESS) {
    return rc;
  }
  return PMPI_Wait(&r, status);
}

int PMPI_Isend_c(const void* buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                 MPI_Request* request) {
  return Post(buf, count, datatype, dest, tag, comm, request, "MPI_Isend_c", Posted::kSend);
}

int PMPI_Irecv_c(void* buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                 MPI_Request* request) {
  return Post(buf, count, datatype, source, tag, comm, request, "MPI_Irecv_c", Posted::kRecv);
}

int PMPI_Get_count_c(const MPI_Status* status, MPI_Datatype datatype, MPI_Count* count) {
  return CountOf(status, datatype, "MPI_Get_count_c", count);
}

int PMPI_Type_size(MPI_Datatype datatype, int* size) {
  int rc = MPI_SUCCESS;
  const Datatype* type = TypeArg(datatype, "MPI_Type_size", &rc);
  if (type == nullptr) return rc;
  *size = static_cast<int>(type->size());
  return MPI_SUCCESS;
}

}  // extern "C"
}  // namespace cartage::mpi_binding



CARTAGE_MPI_ALIAS(MPI_Init);
CARTAGE_MPI_ALIAS(MPI_Init_thread);
CARTAGE_MPI_ALIAS(MPI_Query_thread);
CARTAGE_MPI_ALIAS(MPI_Is_thread_main);
CARTAGE_MPI_ALIAS(MPI_Finalize);
CARTAGE_MPI_ALIAS(MPI_Initialized);
CARTAGE_MPI_ALIAS(MPI_Finalized);
CARTAGE_MPI_ALIAS(MPI_Abort);
CARTAGE_MPI_ALIAS(MPI_Get_processor_name);
CARTAGE_MPI_ALIAS(MPI_Get_version);
CARTAGE_MPI_ALIAS(MPI_Get_library_version);
CARTAGE_MPI_ALIAS(MPI_Wtime);
CARTAGE_MPI_ALIAS(MPI_Wtick);
CARTAGE_MPI_ALIAS(MPI_Comm_rank);
CARTAGE_MPI_ALIAS(MPI_Comm_size);
CARTAGE_MPI_ALIAS(MPI_Comm_dup);
CARTAGE_MPI_ALIAS(MPI_Comm_idup);
CARTAGE_MPI_ALIAS(MPI_Comm_split);
CARTAGE_MPI_ALIAS(MPI_Comm_free);
CARTAGE_MPI_ALIAS(MPI_Send);
CARTAGE_MPI_ALIAS(MPI_Ssend);
CARTAGE_MPI_ALIAS(MPI_Recv);
CARTAGE_MPI_ALIAS(MPI_Sendrecv);
CARTAGE_MPI_ALIAS(MPI_Sendrecv_replace);
CARTAGE_MPI_ALIAS(MPI_Isendrecv);
CARTAGE_MPI_ALIAS(MPI_Isendrecv_replace);
CARTAGE_MPI_ALIAS(MPI_Send_c);
CARTAGE_MPI_ALIAS(MPI_Recv_c);
CARTAGE_MPI_ALIAS(MPI_Isend_c);
CARTAGE_MPI_ALIAS(MPI_Irecv_c);
CARTAGE_MPI_ALIAS(MPI_Get_count_c);
CARTAGE_MPI_ALIAS(MPI_Isend);
CARTAGE_MPI_ALIAS(MPI_Issend);
CARTAGE_MPI_ALIAS(MPI_Irecv);
CARTAGE_MPI_ALIAS(MPI_Iprobe);
CARTAGE_MPI_ALIAS(MPI_Probe);
CARTAGE_MPI_ALIAS(MPI_Get_count);
CARTAGE_MPI_ALIAS(MPI_Type_size);
