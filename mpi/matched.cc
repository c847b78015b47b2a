// The MPI binding's matched probes: MPI_Mprobe and MPI_Improbe take the
// message they find out of matching (cartage::Comm::Mprobe, Improbe) and
// hand out an MPI_Message; only MPI_Mrecv or MPI_Imrecv with it receives
// it, so that no other thread's receive can take it in between.
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/str_format.h"
#include "cartage/cartage.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

MPI_Message NewMessage(cartage::Message m, MPI_Comm comm, int offset) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  const int i = TakeSlot(s.messages_probed, s.free_messages);
  MessageSlot& slot = *s.messages_probed[static_cast<std::size_t>(i)];
  slot.message = std::move(m);
  slot.comm = comm;
  slot.offset = offset;
  return kMessageBase | i;
}

// Takes the message a handle names out of its slot (the handle becomes
// MPI_MESSAGE_NULL), or an error code of `fn`.
int TakeMessage(MPI_Message* handle, const char* fn, MessageSlot* out) {
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    const auto i = static_cast<std::size_t>(*handle & 0x03ffffff);
    if ((*handle & ~0x03ffffff) == kMessageBase && i < s.messages_probed.size() &&
        s.messages_probed[i]->message.has_value()) {
      MessageSlot& slot = *s.messages_probed[i];
      out->message = std::move(slot.message);
      out->comm = slot.comm;
      out->offset = slot.offset;
      slot.message.reset();
      s.free_messages.push_back(static_cast<int>(i));
      *handle = MPI_MESSAGE_NULL;
      return MPI_SUCCESS;
    }
  }
  return Error(MPI_COMM_WORLD, fn, MPI_ERR_REQUEST,
               absl::StrFormat("message 0x%08x is not one a matched probe found and no receive took",
                               static_cast<unsigned>(*handle)));
}

void Found(const cartage::Message& m, int offset, MPI_Status* status) {
  SetStatus(status, m.source() - offset, m.tag(), m.bytes());
}

}  // namespace

extern "C" {

int PMPI_Improbe(int source, int tag, MPI_Comm comm, int* flag, MPI_Message* message, MPI_Status* status) {
  Args a;
  if (int rc = Check(comm, "MPI_Improbe", 0, MPI_BYTE, source, tag, true, &a); rc != MPI_SUCCESS) return rc;
  if (source == MPI_PROC_NULL) {
    *flag = 1;
    *message = MPI_MESSAGE_NO_PROC;
    SetEmptyStatus(status);
    return MPI_SUCCESS;
  }
  absl::StatusOr<std::optional<cartage::Message>> got = a.comm->Improbe(SourceArg(a.peer), TagArg(tag));
  if (!got.ok()) return FromStatus(comm, "MPI_Improbe", got.status());
  *flag = got->has_value() ? 1 : 0;
  if (!got->has_value()) return MPI_SUCCESS;
  Found(**got, a.offset, status);
  *message = NewMessage(**std::move(got), comm, a.offset);
  return MPI_SUCCESS;
}

int PMPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message* message, MPI_Status* status) {
  Args a;
  if (int rc = Check(comm, "MPI_Mprobe", 0, MPI_BYTE, source, tag, true, &a); rc != MPI_SUCCESS) return rc;
  if (source == MPI_PROC_NULL) {
    *message = MPI_MESSAGE_NO_PROC;
    SetEmptyStatus(status);
    return MPI_SUCCESS;
  }
  absl::StatusOr<cartage::Message> got = a.comm->Mprobe(SourceArg(a.peer), TagArg(tag));
  if (!got.ok()) return FromStatus(comm, "MPI_Mprobe", got.status());
  Found(*got, a.offset, status);
  *message = NewMessage(*std::move(got), comm, a.offset);
  return MPI_SUCCESS;
}

int PMPI_Mrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Status* status) {
  if (*message == MPI_MESSAGE_NO_PROC) {
    *message = MPI_MESSAGE_NULL;
    SetEmptyStatus(status);
    return MPI_SUCCESS;
  }
  MessageSlot m;
  if (int rc = TakeMessage(message, "MPI_Mrecv", &m); rc != MPI_SUCCESS) return rc;
  Args a;
  if (int rc = Check(m.comm, "MPI_Mrecv", count, datatype, MPI_PROC_NULL, 0, true, &a); rc != MPI_SUCCESS) return rc;
  cartage::ProbeResult got;
  const int rc = FromStatus(m.comm, "MPI_Mrecv", a.comm->Mrecv(buf, count, *a.type, &*m.message, &got));
  SetStatus(status, got.source - m.offset, got.tag, got.bytes);
  return rc;
}

int PMPI_Imrecv(void* buf, int count, MPI_Datatype datatype, MPI_Message* message, MPI_Request* request) {
  if (*message == MPI_MESSAGE_NO_PROC) {
    *message = MPI_MESSAGE_NULL;
    Slot* slot = NewSlot(request);
    slot->proc_null = true;
    return MPI_SUCCESS;
  }
  MessageSlot m;
  if (int rc = TakeMessage(message, "MPI_Imrecv", &m); rc != MPI_SUCCESS) return rc;
  Args a;
  if (int rc = Check(m.comm, "MPI_Imrecv", count, datatype, MPI_PROC_NULL, 0, true, &a); rc != MPI_SUCCESS) {
    return rc;
  }
  Slot* slot = NewSlot(request);
  slot->recv = true;
  slot->comm = m.comm;
  slot->offset = m.offset;
  if (const absl::Status st = a.comm->Imrecv(buf, count, *a.type, &*m.message, &slot->req); !st.ok()) {
    FreeSlot(request);
    return FromStatus(m.comm, "MPI_Imrecv", st);
  }
  return MPI_SUCCESS;
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Improbe);
CARTAGE_MPI_ALIAS(MPI_Mprobe);
CARTAGE_MPI_ALIAS(MPI_Mrecv);
CARTAGE_MPI_ALIAS(MPI_Imrecv);
