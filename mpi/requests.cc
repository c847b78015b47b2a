// The MPI binding's requests: completion (the Wait and Test family),
// persistent requests, generalized requests, cancel and free. A request handle names a slot
// holding a cartage::Request (handles.h); a persistent one keeps its slot
// between runs, inactive until started.
#include <cstddef>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "cartage/cartage.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

// Whether every operation of an active slot has finished: a round of
// progress for each that has not.
bool Finished(Slot& slot) {
  if (slot.greq != nullptr) {
    if (slot.greq->complete.load(std::memory_order_acquire)) return true;
    (void)S().agent->Progress();  // a generalized request is completed by the program, maybe from a thread
    return slot.greq->complete.load(std::memory_order_acquire);
  }
  const bool first = slot.proc_null || slot.req.Test();
  return (!slot.also.has_value() || slot.also->Test()) && first;
}

// Waits until every operation of an active slot has finished: the status
// of the first that failed, else OK.
absl::Status Finish(Slot& slot) {
  if (slot.greq != nullptr) {
    while (!Finished(slot)) std::this_thread::yield();  // others may need this core
    return absl::OkStatus();
  }
  absl::Status st = slot.proc_null ? absl::OkStatus() : slot.req.Wait();
  if (slot.also.has_value()) {
    const absl::Status sent = slot.also->Wait();
    if (st.ok()) st = sent;
  }
  return st;
}

// A generalized request's completion: its status from the program's query
// function, then its free function; the first error of the two is the call's.
int CompleteGeneralized(Slot* slot, MPI_Status* status, const char* fn) {
  MPI_Status own;
  MPI_Status* st = status == MPI_STATUS_IGNORE ? &own : status;
  const Slot::Generalized& g = *slot->greq;
  const int queried = g.query(g.extra, st);
  const int freed = g.free(g.extra);
  const int rc = queried != MPI_SUCCESS ? queried : freed;
  if (rc == MPI_SUCCESS) return MPI_SUCCESS;
  return Error(slot->comm, fn, rc, absl::StrFormat("the generalized request's %s function returned %d",
                                                   queried != MPI_SUCCESS ? "query" : "free", rc));
}

// Completes a request that finished (Wait or a successful Test): its
// status; the slot is handed back, or, persistent, made inactive.
int Complete(MPI_Request* request, Slot* slot, const absl::Status& st, MPI_Status* status, const char* fn) {
  int rc = MPI_SUCCESS;
  if (slot->greq != nullptr) {
    rc = CompleteGeneralized(slot, status, fn);
  } else if (slot->proc_null) {
    SetEmptyStatus(status);
  } else if (st.code() == absl::StatusCode::kCancelled) {
    SetStatus(status, MPI_ANY_SOURCE, MPI_ANY_TAG, 0);
    if (status != MPI_STATUS_IGNORE) status->count_hi_and_cancelled |= 1;  // MPI_Test_cancelled reads it
  } else {
    rc = FromStatus(slot->comm, fn, st);
    if (slot->recv) {
      SetStatus(status, slot->req.source() - slot->offset, slot->req.tag(), slot->req.bytes());
    }
  }
  if (slot->then) {
    const std::function<int()> then = std::move(slot->then);
    slot->then = nullptr;
    if (rc == MPI_SUCCESS) rc = then();
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
    SetInactiveStatus(status);
    return MPI_SUCCESS;
  }
  const absl::Status st = Finish(*slot);
  return Complete(request, slot, st, status, "MPI_Wait");
}

int PMPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  int rc = MPI_SUCCESS;
  Slot* slot = *request == MPI_REQUEST_NULL ? nullptr : ActiveSlot(*request, "MPI_Test", &rc);
  if (rc != MPI_SUCCESS) return rc;
  if (slot == nullptr || Inactive(*slot)) {
    *flag = 1;
    SetInactiveStatus(status);
    return MPI_SUCCESS;
  }
  *flag = Finished(*slot) ? 1 : 0;
  if (*flag == 0) return MPI_SUCCESS;
  const absl::Status st = Finish(*slot);  // finished: returns at once
  return Complete(request, slot, st, status, "MPI_Test");
}

// As MPI: where one of several completions failed, the call returns
// MPI_ERR_IN_STATUS and every status's MPI_ERROR says how each went.
static int InStatus(const std::vector<int>& codes, MPI_Status* statuses) {
  bool failed = false;
  for (int rc : codes) failed = failed || rc != MPI_SUCCESS;
  if (!failed) return MPI_SUCCESS;
  if (statuses != MPI_STATUSES_IGNORE) {
    for (std::size_t i = 0; i < codes.size(); ++i) statuses[i].MPI_ERROR = codes[i];
  }
  return MPI_ERR_IN_STATUS;
}

int PMPI_Waitall(int count, MPI_Request array_of_requests[], MPI_Status* array_of_statuses) {
  std::vector<int> codes(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    MPI_Status* st = array_of_statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &array_of_statuses[i];
    codes[static_cast<std::size_t>(i)] = PMPI_Wait(&array_of_requests[i], st);
  }
  return InStatus(codes, array_of_statuses);
}

int PMPI_Waitany(int count, MPI_Request array_of_requests[], int* index, MPI_Status* status) {
  // The active requests; one to or from MPI_PROC_NULL is done already.
  std::vector<Request*> active;
  std::vector<int> at;
  bool composite = false;  // a request of two operations, or a generalized one
  for (int i = 0; i < count; ++i) {
    if (array_of_requests[i] == MPI_REQUEST_NULL) continue;
    int rc = MPI_SUCCESS;
    Slot* slot = ActiveSlot(array_of_requests[i], "MPI_Waitany", &rc);
    if (slot == nullptr) return rc;
    if (Inactive(*slot)) continue;
    if (slot->proc_null && !slot->also.has_value()) {
      *index = i;
      return PMPI_Wait(&array_of_requests[i], status);
    }
    composite = composite || slot->also.has_value() || slot->greq != nullptr;
    active.push_back(&slot->req);
    at.push_back(i);
  }
  if (active.empty()) {
    *index = MPI_UNDEFINED;
    SetInactiveStatus(status);
    return MPI_SUCCESS;
  }
  if (composite) {
    // No one cartage request stands for each: poll them in turn.
    for (;;) {
      for (const int i : at) {
        int rc = MPI_SUCCESS;
        if (Finished(*ActiveSlot(array_of_requests[i], "MPI_Waitany", &rc))) {
          *index = i;
          return PMPI_Wait(&array_of_requests[i], status);
        }
      }
      std::this_thread::yield();
    }
  }
  absl::StatusOr<std::size_t> done = WaitAny(absl::MakeConstSpan(active));
  if (!done.ok()) return FromStatus(MPI_COMM_WORLD, "MPI_Waitany", done.status());
  *index = at[*done];
  return PMPI_Wait(&array_of_requests[*index], status);
}

int PMPI_Testall(int count, MPI_Request array_of_requests[], int* flag, MPI_Status* array_of_statuses) {
  std::vector<Request*> active;
  bool generalized_done = true;
  for (int i = 0; i < count; ++i) {
    if (array_of_requests[i] == MPI_REQUEST_NULL) continue;
    int rc = MPI_SUCCESS;
    Slot* slot = ActiveSlot(array_of_requests[i], "MPI_Testall", &rc);
    if (slot == nullptr) return rc;
    if (Inactive(*slot)) continue;
    if (slot->greq != nullptr) {
      generalized_done = generalized_done && slot->greq->complete.load(std::memory_order_acquire);
      continue;
    }
    if (!slot->proc_null) active.push_back(&slot->req);
    if (slot->also.has_value()) active.push_back(&*slot->also);
  }
  // As MPI: all complete and are freed, or none is.
  *flag = TestAll(absl::MakeConstSpan(active)) && generalized_done ? 1 : 0;
  return *flag != 0 ? PMPI_Waitall(count, array_of_requests, array_of_statuses) : MPI_SUCCESS;
}

int PMPI_Testany(int count, MPI_Request array_of_requests[], int* index, int* flag, MPI_Status* status) {
  bool any_active = false;
  for (int i = 0; i < count; ++i) {
    if (array_of_requests[i] == MPI_REQUEST_NULL) continue;
    int rc = MPI_SUCCESS;
    Slot* slot = ActiveSlot(array_of_requests[i], "MPI_Testany", &rc);
    if (slot == nullptr) return rc;
    if (Inactive(*slot)) continue;
    any_active = true;
    if (Finished(*slot)) {
      *index = i;
      *flag = 1;
      return PMPI_Wait(&array_of_requests[i], status);  // complete: returns at once
    }
  }
  *index = MPI_UNDEFINED;
  *flag = any_active ? 0 : 1;  // as MPI: none active is a completion with no index
  if (!any_active) SetInactiveStatus(status);
  return MPI_SUCCESS;
}

// Testsome, and Waitsome once one completed: every completed request's
// index and status; MPI_UNDEFINED where none is active.
static int Some(int incount, MPI_Request array_of_requests[], int* outcount, int array_of_indices[],
                MPI_Status* array_of_statuses, const char* fn) {
  bool any_active = false;
  int n = 0;
  std::vector<int> codes;
  for (int i = 0; i < incount; ++i) {
    if (array_of_requests[i] == MPI_REQUEST_NULL) continue;
    int rc = MPI_SUCCESS;
    Slot* slot = ActiveSlot(array_of_requests[i], fn, &rc);
    if (slot == nullptr) return rc;
    if (Inactive(*slot)) continue;
    any_active = true;
    if (!Finished(*slot)) continue;
    MPI_Status* st = array_of_statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &array_of_statuses[n];
    codes.push_back(PMPI_Wait(&array_of_requests[i], st));
    array_of_indices[n++] = i;
  }
  *outcount = any_active ? n : MPI_UNDEFINED;
  return InStatus(codes, array_of_statuses);
}

int PMPI_Testsome(int incount, MPI_Request array_of_requests[], int* outcount, int array_of_indices[],
                  MPI_Status* array_of_statuses) {
  return Some(incount, array_of_requests, outcount, array_of_indices, array_of_statuses, "MPI_Testsome");
}

int PMPI_Waitsome(int incount, MPI_Request array_of_requests[], int* outcount, int array_of_indices[],
                  MPI_Status* array_of_statuses) {
  // Waits for one (Waitany), then takes every other that completed too.
  int index = MPI_UNDEFINED;
  MPI_Status first;
  if (int rc = PMPI_Waitany(incount, array_of_requests, &index, &first); rc != MPI_SUCCESS) return rc;
  if (index == MPI_UNDEFINED) {
    *outcount = MPI_UNDEFINED;
    return MPI_SUCCESS;
  }
  array_of_indices[0] = index;
  if (array_of_statuses != MPI_STATUSES_IGNORE) array_of_statuses[0] = first;
  int more = 0;
  const int rc = Some(incount, array_of_requests, &more, array_of_indices + 1,
                      array_of_statuses == MPI_STATUSES_IGNORE ? MPI_STATUSES_IGNORE : array_of_statuses + 1,
                      "MPI_Waitsome");
  *outcount = 1 + (more == MPI_UNDEFINED ? 0 : more);
  return rc;
}

int PMPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  if (request == MPI_REQUEST_NULL) {
    *flag = 1;
    SetInactiveStatus(status);
    return MPI_SUCCESS;
  }
  int rc = MPI_SUCCESS;
  Slot* slot = ActiveSlot(request, "MPI_Request_get_status", &rc);
  if (slot == nullptr) return rc;
  if (Inactive(*slot)) {
    *flag = 1;
    SetInactiveStatus(status);
    return MPI_SUCCESS;
  }
  *flag = Finished(*slot) ? 1 : 0;
  if (*flag == 0) return MPI_SUCCESS;
  if (slot->greq != nullptr) {
    // As MPI: the query function tells the status; the request stays.
    MPI_Status own;
    const Slot::Generalized& g = *slot->greq;
    const int queried = g.query(g.extra, status == MPI_STATUS_IGNORE ? &own : status);
    return queried == MPI_SUCCESS ? MPI_SUCCESS
                                  : Error(slot->comm, "MPI_Request_get_status", queried,
                                          absl::StrFormat("the generalized request's query function returned %d",
                                                          queried));
  }
  if (slot->proc_null) {
    SetEmptyStatus(status);
  } else if (slot->recv) {
    SetStatus(status, slot->req.source() - slot->offset, slot->req.tag(), slot->req.bytes());
  }
  return MPI_SUCCESS;
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
  if (slot->start) {
    if (int rc2 = slot->start(); rc2 != MPI_SUCCESS) return rc2;
  } else if (!slot->proc_null) {
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
    if (!slot->proc_null && !slot->start) {
      if (const absl::Status st = slot->req.Free(); !st.ok()) return FromStatus(slot->comm, "MPI_Request_free", st);
    }
    FreeSlot(request);
  } else if (Completed(*slot)) {
    Retire(*slot);
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
  if (slot->greq != nullptr) {
    // The program's cancel function decides; it is told whether the request completed.
    const Slot::Generalized& g = *slot->greq;
    const int rc2 = g.cancel(g.extra, g.complete.load(std::memory_order_acquire) ? 1 : 0);
    return rc2 == MPI_SUCCESS ? MPI_SUCCESS
                              : Error(slot->comm, "MPI_Cancel", rc2,
                                      absl::StrFormat("the generalized request's cancel function returned %d", rc2));
  }
  // Only a receive not yet matched can be; anything else completes as it would.
  if (slot->recv && !slot->proc_null && !Inactive(*slot)) (void)slot->req.Cancel();
  return MPI_SUCCESS;
}

int PMPI_Grequest_start(MPI_Grequest_query_function* query_fn, MPI_Grequest_free_function* free_fn,
                        MPI_Grequest_cancel_function* cancel_fn, void* extra_state, MPI_Request* request) {
  int rc = MPI_SUCCESS;
  if (CommOf(MPI_COMM_WORLD, "MPI_Grequest_start", &rc) == nullptr) return rc;
  if (query_fn == nullptr || free_fn == nullptr || cancel_fn == nullptr) {
    return Error(MPI_COMM_WORLD, "MPI_Grequest_start", MPI_ERR_ARG, "a query, free or cancel function is null");
  }
  Slot* slot = NewSlot(request);
  slot->greq = std::make_unique<Slot::Generalized>();
  slot->greq->query = query_fn;
  slot->greq->free = free_fn;
  slot->greq->cancel = cancel_fn;
  slot->greq->extra = extra_state;
  return MPI_SUCCESS;
}

int PMPI_Grequest_complete(MPI_Request request) {
  int rc = MPI_SUCCESS;
  Slot* slot = ActiveSlot(request, "MPI_Grequest_complete", &rc);
  if (slot == nullptr) return rc;
  if (slot->greq == nullptr) {
    return Error(slot->comm, "MPI_Grequest_complete", MPI_ERR_REQUEST,
                 absl::StrFormat("request 0x%08x is not a generalized request", static_cast<unsigned>(request)));
  }
  slot->greq->complete.store(true, std::memory_order_release);
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
CARTAGE_MPI_ALIAS(MPI_Testany);
CARTAGE_MPI_ALIAS(MPI_Testsome);
CARTAGE_MPI_ALIAS(MPI_Waitsome);
CARTAGE_MPI_ALIAS(MPI_Request_get_status);
CARTAGE_MPI_ALIAS(MPI_Send_init);
CARTAGE_MPI_ALIAS(MPI_Recv_init);
CARTAGE_MPI_ALIAS(MPI_Start);
CARTAGE_MPI_ALIAS(MPI_Startall);
CARTAGE_MPI_ALIAS(MPI_Request_free);
CARTAGE_MPI_ALIAS(MPI_Cancel);
CARTAGE_MPI_ALIAS(MPI_Test_cancelled);
CARTAGE_MPI_ALIAS(MPI_Grequest_start);
CARTAGE_MPI_ALIAS(MPI_Grequest_complete);
