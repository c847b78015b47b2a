// The MPI binding's buffered and ready sends. MPI_Bsend packs the message
// into the buffer the program attached (MPI_Buffer_attach) and sends it
// from there, so that the call returns at once whether or not a receive is
// posted; the space comes back once that send completes. A message that
// does not fit what is free is refused with MPI_ERR_BUFFER. A ready send
// (MPI_Rsend) needs nothing of cartage beyond a standard send.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/strings/str_format.h"
#include "datatype/segment_walk.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

// One message in the attached buffer: its span and its send.
struct Pending {
  int64_t offset = 0;
  int64_t span = 0;
  cartage::Request req;
};

struct Attached {
  std::mutex mu;
  std::byte* base = nullptr;  // null: none attached
  int64_t size = 0;
  std::vector<std::unique_ptr<Pending>> pending;  // by offset
};

Attached& A() {
  static Attached* a = new Attached;  // never destroyed: MPI_Finalize may come from atexit
  return *a;
}

// Gives back the space of sends that have completed (a round of progress each).
void Reclaim(Attached& a) {
  std::erase_if(a.pending, [](const std::unique_ptr<Pending>& p) { return p->req.Test(); });
}

// The offset of `span` free bytes (16-aligned), or -1.
int64_t Fit(const Attached& a, int64_t span) {
  int64_t at = 0;
  for (const auto& p : a.pending) {
    if (p->offset - at >= span) return at;
    at = (p->offset + p->span + 15) / 16 * 16;
  }
  return a.size - at >= span ? at : -1;
}

// `count` of `type` to `peer` of `c` (`dest` of `comm` as the program named it), checked.
int Buffered(const void* buf, int64_t count, const Datatype& type, const cartage::Comm* c, int peer, int dest,
             int tag, MPI_Comm comm, const char* fn) {
  if (dest == MPI_PROC_NULL) return MPI_SUCCESS;
  const int64_t bytes = count * type.size();
  const int64_t span = bytes + MPI_BSEND_OVERHEAD;
  Attached& at = A();
  std::lock_guard<std::mutex> lock(at.mu);
  Reclaim(at);
  const int64_t offset = at.base == nullptr ? -1 : Fit(at, span);
  if (offset < 0) {
    int64_t used = 0;
    for (const auto& p : at.pending) used += p->span;
    return Error(comm, fn, MPI_ERR_BUFFER,
                 absl::StrFormat("%d bytes (with MPI_BSEND_OVERHEAD) do not fit the attached buffer: %d bytes, "
                                 "%d of them held by %d sends not yet complete",
                                 span, at.size, used, at.pending.size()));
  }
  auto p = std::make_unique<Pending>();
  p->offset = offset;
  p->span = span;
  std::byte* data = at.base + offset;
  datatype::Pack(buf, count, type, 0, bytes, data);
  if (const absl::Status st = c->Isend(data, static_cast<std::size_t>(bytes), peer, tag, &p->req); !st.ok()) {
    return FromStatus(comm, fn, st);
  }
  const auto where = std::find_if(at.pending.begin(), at.pending.end(),
                                  [&](const std::unique_ptr<Pending>& q) { return q->offset > offset; });
  at.pending.insert(where, std::move(p));
  return MPI_SUCCESS;
}

int Buffered(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, const char* fn) {
  Args a;
  if (int rc = Check(comm, fn, count, datatype, dest, tag, false, &a); rc != MPI_SUCCESS) return rc;
  return Buffered(buf, count, *a.type, a.comm, a.peer, dest, tag, comm, fn);
}

}  // namespace

void FlushBuffered() {
  Attached& at = A();
  std::lock_guard<std::mutex> lock(at.mu);
  for (auto& p : at.pending) (void)p->req.Wait();  // a failed send was said by its peer's error already
  at.pending.clear();
}

extern "C" {

int PMPI_Buffer_attach(void* buffer, int size) {
  Attached& at = A();
  std::lock_guard<std::mutex> lock(at.mu);
  if (at.base != nullptr) {
    return Error(MPI_COMM_WORLD, "MPI_Buffer_attach", MPI_ERR_BUFFER, "a buffer is attached already");
  }
  if (size < 0 || (buffer == nullptr && size > 0)) {
    return Error(MPI_COMM_WORLD, "MPI_Buffer_attach", MPI_ERR_BUFFER,
                 absl::StrFormat("a buffer of %d bytes at %p", size, buffer));
  }
  at.base = static_cast<std::byte*>(buffer);
  at.size = size;
  return MPI_SUCCESS;
}

int PMPI_Buffer_detach(void* buffer_addr, int* size) {
  FlushBuffered();  // as MPI: waits until every message in it is sent
  Attached& at = A();
  std::lock_guard<std::mutex> lock(at.mu);
  void* base = at.base;
  std::memcpy(buffer_addr, &base, sizeof(base));  // buffer_addr is a void** passed as void*
  *size = static_cast<int>(at.size);
  at.base = nullptr;
  at.size = 0;
  return MPI_SUCCESS;
}

int PMPI_Bsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return Buffered(buf, count, datatype, dest, tag, comm, "MPI_Bsend");
}

int PMPI_Ibsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                MPI_Request* request) {
  if (int rc = Buffered(buf, count, datatype, dest, tag, comm, "MPI_Ibsend"); rc != MPI_SUCCESS) return rc;
  // The message is in the attached buffer: the request is complete at once.
  Slot* slot = NewSlot(request);
  slot->comm = comm;
  slot->proc_null = true;
  return MPI_SUCCESS;
}

int PMPI_Bsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                    MPI_Request* request) {
  Args a;
  if (int rc = Check(comm, "MPI_Bsend_init", count, datatype, dest, tag, false, &a); rc != MPI_SUCCESS) return rc;
  // Each start is a buffered send of what the call named (the type held
  // here: MPI lets the program free its handle); the message is then in
  // the attached buffer and the request complete at once.
  Slot* slot = NewSlot(request);
  slot->comm = comm;
  slot->persistent = true;
  slot->proc_null = true;
  slot->start = [buf, count, t = *a.type, c = a.comm, peer = a.peer, dest, tag, comm] {
    return Buffered(buf, count, t, c, peer, dest, tag, comm, "MPI_Start");
  };
  return MPI_SUCCESS;
}

int PMPI_Ssend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                    MPI_Request* request) {
  return Post(buf, count, datatype, dest, tag, comm, request, "MPI_Ssend_init", Posted::kSsendInit);
}

int PMPI_Rsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm) {
  return PMPI_Send(buf, count, datatype, dest, tag, comm);
}

int PMPI_Irsend(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                MPI_Request* request) {
  return Post(buf, count, datatype, dest, tag, comm, request, "MPI_Irsend", Posted::kSend);
}

int PMPI_Rsend_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                    MPI_Request* request) {
  return Post(buf, count, datatype, dest, tag, comm, request, "MPI_Rsend_init", Posted::kSendInit);
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Buffer_attach);
CARTAGE_MPI_ALIAS(MPI_Buffer_detach);
CARTAGE_MPI_ALIAS(MPI_Bsend);
CARTAGE_MPI_ALIAS(MPI_Ibsend);
CARTAGE_MPI_ALIAS(MPI_Bsend_init);
CARTAGE_MPI_ALIAS(MPI_Ssend_init);
CARTAGE_MPI_ALIAS(MPI_Rsend);
CARTAGE_MPI_ALIAS(MPI_Irsend);
CARTAGE_MPI_ALIAS(MPI_Rsend_init);
