// The MPI binding's sessions (MPI-4): a library's own way into MPI, beside
// or without MPI_Init. The first session (or MPI_Init) starts the runtime
// and the last one out stops it. Its process sets are mpi://WORLD and
// mpi://SELF; a communicator is made from a group of one of them on the
// binding's own copy of the world, named by a string every member passes.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <strings.h>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "cartage/cartage.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

constexpr const char* kPsets[] = {"mpi://WORLD", "mpi://SELF"};
constexpr int kNumPsets = 2;

// The session a handle names, or null with an error of `fn` in `*rc`.
SessionSlot* SessionArg(MPI_Session session, const char* fn, int* rc) {
  State& s = S();
  if ((session & ~0x03ffffff) == kSessionBase) {
    const auto i = static_cast<std::size_t>(session & 0x03ffffff);
    std::lock_guard<std::mutex> lock(s.mu);
    if (i < s.sessions.size() && s.sessions[i].used) return &s.sessions[i];
  }
  *rc = Error(MPI_COMM_WORLD, fn, MPI_ERR_ARG,
              absl::StrFormat("session 0x%08x is not a session (made by MPI_Session_init, not finalized)",
                              static_cast<unsigned>(session)));
  return nullptr;
}

// The world ranks of a process set, or empty for a name that is none
// (case does not matter, as MPICH reads them).
std::vector<int> PsetRanks(const char* name) {
  const State& s = S();
  if (strcasecmp(name, kPsets[1]) == 0) return {s.world_rank};
  std::vector<int> all;
  if (strcasecmp(name, kPsets[0]) == 0) {
    for (int r = 0; r < s.agent->size(); ++r) all.push_back(r);
  }
  return all;
}

std::optional<cartage::ThreadLevel> LevelNamed(const std::string& name) {
  if (name == "MPI_THREAD_SINGLE") return cartage::ThreadLevel::kSingle;
  if (name == "MPI_THREAD_FUNNELED") return cartage::ThreadLevel::kFunneled;
  if (name == "MPI_THREAD_SERIALIZED") return cartage::ThreadLevel::kSerialized;
  if (name == "MPI_THREAD_MULTIPLE") return cartage::ThreadLevel::kMultiple;
  return std::nullopt;
}

const char* LevelName(cartage::ThreadLevel level) {
  switch (level) {
    case cartage::ThreadLevel::kSingle: return "MPI_THREAD_SINGLE";
    case cartage::ThreadLevel::kFunneled: return "MPI_THREAD_FUNNELED";
    case cartage::ThreadLevel::kSerialized: return "MPI_THREAD_SERIALIZED";
    case cartage::ThreadLevel::kMultiple: return "MPI_THREAD_MULTIPLE";
  }
  return "MPI_THREAD_SINGLE";
}

}  // namespace

extern "C" {

int PMPI_Session_init(MPI_Info info, MPI_Errhandler errhandler, MPI_Session* session) {
  const char* fn = "MPI_Session_init";
  State& s = S();
  if (s.phase == Phase::kAfter) {
    std::fprintf(stderr, "cartage mpi: %s: the runtime has stopped; cartage does not start it again\n", fn);
    return MPI_ERR_OTHER;
  }
  // The thread level the info asks for ("thread_level"), if it names one.
  std::optional<cartage::ThreadLevel> level;
  if (info != MPI_INFO_NULL) {
    char value[MPI_MAX_INFO_VAL + 1] = {};
    int flag = 0;
    if (int rc = PMPI_Info_get(info, "thread_level", MPI_MAX_INFO_VAL, value, &flag); rc != MPI_SUCCESS) return rc;
    if (flag != 0) level = LevelNamed(value);
  }
  if (s.phase == Phase::kBefore) StartRuntime(level, fn);
  if (int rc = HandlerArg(errhandler, fn); rc != MPI_SUCCESS) return rc;
  std::lock_guard<std::mutex> lock(s.mu);
  std::size_t i = 0;
  while (i < s.sessions.size() && s.sessions[i].used) ++i;
  if (i == s.sessions.size()) s.sessions.emplace_back();
  s.sessions[i] = SessionSlot{true, errhandler};
  ++s.live_sessions;
  *session = kSessionBase | static_cast<int>(i);
  return MPI_SUCCESS;
}

int PMPI_Session_finalize(MPI_Session* session) {
  int rc = MPI_SUCCESS;
  SessionSlot* slot = SessionArg(*session, "MPI_Session_finalize", &rc);
  if (slot == nullptr) return rc;
  State& s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    slot->used = false;
    --s.live_sessions;
  }
  *session = MPI_SESSION_NULL;
  return StopRuntime("MPI_Session_finalize");  // the last one out, without MPI_Init's world, stops it
}

int PMPI_Session_get_info(MPI_Session session, MPI_Info* info_used) {
  int rc = MPI_SUCCESS;
  if (SessionArg(session, "MPI_Session_get_info", &rc) == nullptr) return rc;
  if (rc = PMPI_Info_create(info_used); rc != MPI_SUCCESS) return rc;
  return PMPI_Info_set(*info_used, "thread_level", LevelName(S().agent->thread_level()));
}

int PMPI_Session_get_num_psets(MPI_Session session, MPI_Info info, int* npset_names) {
  (void)info;
  int rc = MPI_SUCCESS;
  if (SessionArg(session, "MPI_Session_get_num_psets", &rc) == nullptr) return rc;
  *npset_names = kNumPsets;
  return MPI_SUCCESS;
}

int PMPI_Session_get_nth_pset(MPI_Session session, MPI_Info info, int n, int* pset_len, char* pset_name) {
  (void)info;
  const char* fn = "MPI_Session_get_nth_pset";
  int rc = MPI_SUCCESS;
  if (SessionArg(session, fn, &rc) == nullptr) return rc;
  if (n < 0 || n >= kNumPsets) {
    return Error(MPI_COMM_WORLD, fn, MPI_ERR_ARG, absl::StrFormat("process set %d of %d", n, kNumPsets));
  }
  const auto len = static_cast<int>(std::strlen(kPsets[n]) + 1);
  // As MPI: a length of 0 asks for the length (its terminating null counted).
  if (*pset_len > 0) {
    const int copied = std::min(*pset_len - 1, len - 1);
    std::memcpy(pset_name, kPsets[n], static_cast<std::size_t>(copied));
    pset_name[copied] = '\0';
  }
  *pset_len = len;
  return MPI_SUCCESS;
}

int PMPI_Session_get_pset_info(MPI_Session session, const char* pset_name, MPI_Info* info) {
  const char* fn = "MPI_Session_get_pset_info";
  int rc = MPI_SUCCESS;
  if (SessionArg(session, fn, &rc) == nullptr) return rc;
  const std::vector<int> ranks = PsetRanks(pset_name);
  if (ranks.empty()) return Error(MPI_COMM_WORLD, fn, MPI_ERR_ARG, absl::StrFormat("no process set \"%s\"", pset_name));
  if (rc = PMPI_Info_create(info); rc != MPI_SUCCESS) return rc;
  return PMPI_Info_set(*info, "mpi_size", std::to_string(ranks.size()).c_str());
}

int PMPI_Session_get_errhandler(MPI_Session session, MPI_Errhandler* errhandler) {
  int rc = MPI_SUCCESS;
  const SessionSlot* slot = SessionArg(session, "MPI_Session_get_errhandler", &rc);
  if (slot == nullptr) return rc;
  *errhandler = slot->handler;
  return MPI_SUCCESS;
}

int PMPI_Session_set_errhandler(MPI_Session session, MPI_Errhandler errhandler) {
  int rc = MPI_SUCCESS;
  SessionSlot* slot = SessionArg(session, "MPI_Session_set_errhandler", &rc);
  if (slot == nullptr) return rc;
  if (rc = HandlerArg(errhandler, "MPI_Session_set_errhandler"); rc != MPI_SUCCESS) return rc;
  slot->handler = errhandler;
  return MPI_SUCCESS;
}

int PMPI_Group_from_session_pset(MPI_Session session, const char* pset_name, MPI_Group* newgroup) {
  const char* fn = "MPI_Group_from_session_pset";
  int rc = MPI_SUCCESS;
  if (SessionArg(session, fn, &rc) == nullptr) return rc;
  std::vector<int> ranks = PsetRanks(pset_name);
  if (ranks.empty()) return Error(MPI_COMM_WORLD, fn, MPI_ERR_ARG, absl::StrFormat("no process set \"%s\"", pset_name));
  *newgroup = NewGroup(std::move(ranks));
  return MPI_SUCCESS;
}

int PMPI_Comm_create_from_group(MPI_Group group, const char* stringtag, MPI_Info info, MPI_Errhandler errhandler,
                                MPI_Comm* newcomm) {
  const char* fn = "MPI_Comm_create_from_group";
  int rc = MPI_SUCCESS;
  if (rc = InfoCheck(info, fn); rc != MPI_SUCCESS) return rc;
  if (rc = HandlerArg(errhandler, fn); rc != MPI_SUCCESS) return rc;
  const std::vector<int>* members = GroupArg(group, fn, &rc);
  if (members == nullptr) return rc;
  State& s = S();
  if (std::find(members->begin(), members->end(), s.world_rank) == members->end()) {
    return Error(MPI_COMM_WORLD, fn, MPI_ERR_GROUP, "this rank is not in the group");
  }
  uint32_t hash = 2166136261u;  // FNV-1a: the same tag wherever the string is the same
  for (const char* p = stringtag; *p != '\0'; ++p) hash = (hash ^ static_cast<unsigned char>(*p)) * 16777619u;
  const int tag = static_cast<int>(hash % static_cast<uint32_t>(cartage::kMaxTag));
  absl::StatusOr<cartage::Comm> made = s.own_world->CreateGroup(*members, tag);
  if (!made.ok()) return FromStatus(MPI_COMM_WORLD, fn, made.status());
  *newcomm = NewComm(*std::move(made), errhandler);
  return MPI_SUCCESS;
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Session_init);
CARTAGE_MPI_ALIAS(MPI_Session_finalize);
CARTAGE_MPI_ALIAS(MPI_Session_get_info);
CARTAGE_MPI_ALIAS(MPI_Session_get_num_psets);
CARTAGE_MPI_ALIAS(MPI_Session_get_nth_pset);
CARTAGE_MPI_ALIAS(MPI_Session_get_pset_info);
CARTAGE_MPI_ALIAS(MPI_Session_get_errhandler);
CARTAGE_MPI_ALIAS(MPI_Session_set_errhandler);
CARTAGE_MPI_ALIAS(MPI_Group_from_session_pset);
CARTAGE_MPI_ALIAS(MPI_Comm_create_from_group);
