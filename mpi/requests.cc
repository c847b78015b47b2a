// The MPI binding's requests: completion (the Wait and Test family),
// persistent requests, cancel and free. A request handle names a slot
// holding a cartage::Request (handles.h); a persistent one keeps its slot
// between runs, inactive until started.
#include <cstddef>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "cartage/cartage.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

// Completes a request that finished (Wait or a successful Test): its
// status; the slot is handed back, or, persistent, made inactive.
int Complete(MPI_Request* request, Slot* slot, const absl::Status& st, MPI_Status* status, const char* fn) {
  int rc = MPI_SUCCESS;
  if (slot->proc_null) {
    SetEmptyStatus(status);
  } else if (st.code() == absl::StatusCode::kCancelled) {
    SetStatus(status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0, MPI_SUCCESS);
    if (status != MPI_STATUS_IGNORE) status->count_hi_and_cancelled |= 1;  // MPI_Test_cancelled reads it
  } else {
    rc = FromStatus(slot->comm, fn, st);
    if (slot->recv) {
      SetStatus(status, slot->req.source(), slot->req.tag(), slot->req.bytes(), rc);
    } else if (status != MPI_STATUS_IGNORE) {
      status->MPI_ERROR = rc;
    }
  }
  if (slot->persistent) {
    slot->active = false;
  } else {
    FreeSlot(request);
  }
  return rc;
}

// A persistent request that is not started completes at once, with an
// empty status, as a null one does.
bool Inactive(const Slot& slot) { return slot.persistent && !slot.active; }

}  // namespace

extern "C" {

int PMPI_Wait(MPI_Request* request, MPI_Status* status) {
  int rc = MPI_SUCCESS;
  Slot* slot = *request == MPI_REQUEST_NULL ? nullptr : ActiveSlot(*request, "MPI_Wait", &rc);
  if (rc != MPI_SUCCESS) return rc;
  if (slot == nullptr || Inactive(*slot)) {
    SetEmptyStatus(status);
    return MPI_SUCCESS;
  }
  const absl::Status st = slot->proc_null ? absl::OkStatus() : slot->req.Wait();
  return Complete(request, slot, st, status, "MPI_Wait");
}

int PMPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  int rc = MPI_SUCCESS;
  Slot* slot = *request == MPI_REQUEST_NULL ? nullptr : ActiveSlot(*request, "MPI_Test", &rc);
  if (rc != MPI_SUCCESS) return rc;
  if (slot == nullptr || Inactive(*slot)) {
    *flag = 1;
    SetEmptyStatus(status);
    return MPI_SUCCESS;
  }
  *flag = slot->proc_null || slot->req.Test() ? 1 : 0;
  if (*flag == 0) return MPI_SUCCESS;
  const absl::Status st = slot->proc_null ? absl::OkStatus() : slot->req.Wait();  // finished: returns at once
  return Complete(request, slot, st, status, "MPI_Test");
}

int PMPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status* array_of_statuses) {
  int failed = 0;
  for (int i = 0; i < count; ++i) {
    MPI_Status* st = array_of_statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &array_of_statuses[i];
    if (PMPI_Wait(&array_of_requests[i], st) != MPI_SUCCESS) failed = 1;
  }
  // As MPI: one failure makes the call MPI_ERR_IN_STATUS; each status says which.
  return failed != 0 ? MPI_ERR_IN_STATUS : MPI_SUCCESS;
}

int PMPI_Waitany(int count, MPI_Request array_of_requests[], int* index, MPI_Status* status) {
  // The active requests; one to or from MPI_PROC_NULL is done already.
  std::vector<Request*> active;
  std::vector<int> at;
  for (int i = 0; i < count; ++i) {
    if (array_of_requests[i] == MPI_REQUEST_NULL) continue;
    int rc = MPI_SUCCESS;
    Slot* slot = ActiveSlot(array_of_requests[i], "MPI_Waitany", &rc);
    if (slot == nullptr) return rc;
    if (Inactive(*slot)) continue;
    if (slot->proc_null) {
      *index = i;
      return PMPI_Wait(&array_of_requests[i], status);
    }
    active.push_back(&slot->req);
    at.push_back(i);
  }
  if (active.empty()) {
    *index = MPI_UNDEFINED;
    SetEmptyStatus(status);
    return MPI_SUCCESS;
  }
  absl::StatusOr<std::size_t> done = WaitAny(absl::MakeConstSpan(active));
  if (!done.ok()) return FromStatus(MPI_COMM_WORLD, "MPI_Waitany", done.status());
  *index = at[*done];
  return PMPI_Wait(&array_of_requests[*index], status);
}

int PMPI_Testall(int count, MPI_Request array_of_requests[], int* flag, MPI_Status* array_of_statuses) {
  std::vector<Request*> active;
  for (int i = 0; i < count; ++i) {
    if (array_of_requests[i] == MPI_REQUEST_NULL) continue;
    int rc = MPI_SUCCESS;
    Slot* slot = ActiveSlot(array_of_requests[i], "MPI_Testall", &rc);
    if (slot == nullptr) return rc;
    if (!slot->proc_null && !Inactive(*slot)) active.push_back(&slot->req);
  }
  // As MPI: all complete and are freed, or none is.
  *flag = TestAll(absl::MakeConstSpan(active)) ? 1 : 0;
  return *flag != 0 ? PMPI_Waitall(count, array_of_requests, array_of_statuses) : MPI_SUCCESS;
}

int PMPI_Send_init(const void* buf, int count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return Post(buf, count, datatype, dest, tag, comm, request, "MPI_Send_init", Posted::kSendInit);
}

int PMPI_Recv_init(void* buf, int count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm,
                   MPI_Request* request) {
  return Post(buf, count, datatype, source, tag, comm, request, "MPI_Recv_init", Posted::kRecvInit);
}

int PMPI_Start(MPI_Request* request) {
  int rc = MPI_SUCCESS;
  Slot* slot = ActiveSlot(*request, "MPI_Start", &rc);
  if (slot == nullptr) return rc;
  if (!slot->persistent || slot->active) {
    return Error(slot->comm, "MPI_Start", MPI_ERR_REQUEST,
                 absl::StrFormat("request 0x%08x is %s", static_cast<unsigned>(*request),
                                 slot->persistent ? "active already" : "not persistent"));
  }
  if (!slot->proc_null) {
    if (const absl::Status st = slot->req.Start(); !st.ok()) return FromStatus(slot->comm, "MPI_Start", st);
  }
  slot->active = true;
  return MPI_SUCCESS;
}

int PMPI_Startall(int count, MPI_Request array_of_requests[]) {
  for (int i = 0; i < count; ++i) {
    if (int rc = PMPI_Start(&array_of_requests[i]); rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

int PMPI_Request_free(MPI_Request* request) {
  int rc = MPI_SUCCESS;
  Slot* slot = ActiveSlot(*request, "MPI_Request_free", &rc);
  if (slot == nullptr) return rc;
  if (slot->persistent && !slot->active) {
    if (!slot->proc_null) {
      if (const absl::Status st = slot->req.Free(); !st.ok()) return FromStatus(slot->comm, "MPI_Request_free", st);
    }
    FreeSlot(request);
  } else if (slot->proc_null) {
    FreeSlot(request);
  } else {
    OrphanSlot(request);  // its operation goes on; the slot comes back once it completes
  }
  return MPI_SUCCESS;
}

int PMPI_Cancel(MPI_Request* request) {
  int rc = MPI_SUCCESS;
  Slot* slot = ActiveSlot(*request, "MPI_Cancel", &rc);
  if (slot == nullptr) return rc;
  // Only a receive not yet matched can be; anything else completes as it would.
  if (slot->recv && !slot->proc_null && !Inactive(*slot)) (void)slot->req.Cancel();
  return MPI_SUCCESS;
}

int PMPI_Test_cancelled(const MPI_Status* status, int* flag) {
  *flag = status->count_hi_and_cancelled & 1;
  return MPI_SUCCESS;
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Wait);
CARTAGE_MPI_ALIAS(MPI_Test);
CARTAGE_MPI_ALIAS(MPI_Waitall);
CARTAGE_MPI_ALIAS(MPI_Waitany);
CARTAGE_MPI_ALIAS(MPI_Testall);
CARTAGE_MPI_ALIAS(MPI_Send_init);
CARTAGE_MPI_ALIAS(MPI_Recv_init);
CARTAGE_MPI_ALIAS(MPI_Start);
CARTAGE_MPI_ALIAS(MPI_Startall);
CARTAGE_MPI_ALIAS(MPI_Request_free);
CARTAGE_MPI_ALIAS(MPI_Cancel);
CARTAGE_MPI_ALIAS(MPI_Test_cancelled);
