// The MPI binding's groups and the communicators made from them, and
// intercommunicators. A group is a list of world ranks kept here; a
// communicator made from one, or from two groups joined, is made by
// cartage::Comm (Split, CreateGroup, Join), whose members agree on its context.
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "cartage/cartage.h"
#include "mpi/handles.h"
#include "mpi/include/mpi.h"

namespace cartage::mpi_binding {
namespace {

// The world ranks of ranks first..first+n-1 of `c`.
std::vector<int> WorldRanks(const cartage::Comm& c, int first, int n) {
  std::vector<int> w;
  for (int r = first; r < first + n; ++r) w.push_back(c.world_rank(r));
  return w;
}

// The local group of a communicator (an intercommunicator's own side).
std::vector<int> LocalGroup(const cartage::Comm& c, const CommSlot& slot) {
  return slot.inter ? WorldRanks(c, slot.local_offset, slot.local_size) : WorldRanks(c, 0, c.size());
}

int IndexIn(const std::vector<int>& g, int world) {
  const auto it = std::find(g.begin(), g.end(), world);
  return it == g.end() ? MPI_UNDEFINED : static_cast<int>(it - g.begin());
}

// MPI_IDENT, MPI_SIMILAR or MPI_UNEQUAL.
int Compare(const std::vector<int>& a, const std::vector<int>& b) {
  if (a == b) return MPI_IDENT;
  std::vector<int> x = a;
  std::vector<int> y = b;
  std::sort(x.begin(), x.end());
  std::sort(y.begin(), y.end());
  return x == y ? MPI_SIMILAR : MPI_UNEQUAL;
}

// The members `ranks` names (ranks of `g`), checked: in range and distinct.
int Pick(const std::vector<int>& g, int n, const int* ranks, const char* fn, std::vector<int>* out) {
  if (n < 0) return Error(MPI_COMM_WORLD, fn, MPI_ERR_ARG, absl::StrFormat("negative count %d", n));
  std::vector<bool> seen(g.size(), false);
  for (int i = 0; i < n; ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= static_cast<int>(g.size()) || seen[static_cast<std::size_t>(r)]) {
      return Error(MPI_COMM_WORLD, fn, MPI_ERR_RANK,
                   absl::StrFormat("rank %d (entry %d) is %s a group of %d", r, i,
                                   r >= 0 && r < static_cast<int>(g.size()) ? "named twice in" : "not in", g.size()));
    }
    seen[static_cast<std::size_t>(r)] = true;
    out->push_back(r);
  }
  return MPI_SUCCESS;
}

// The ranks the triplets (first, last, stride) name, in order.
int Ranges(const std::vector<int>& g, int n, int ranges[][3], const char* fn, std::vector<int>* out) {
  if (n < 0) return Error(MPI_COMM_WORLD, fn, MPI_ERR_ARG, absl::StrFormat("negative count %d", n));
  std::vector<int> ranks;
  for (int i = 0; i < n; ++i) {
    const int first = ranges[i][0];
    const int last = ranges[i][1];
    const int stride = ranges[i][2];
    if (stride == 0 || (stride > 0 && first > last) || (stride < 0 && first < last)) {
      return Error(MPI_COMM_WORLD, fn, MPI_ERR_ARG,
                   absl::StrFormat("range %d (%d, %d, %d) names no rank", i, first, last, stride));
    }
    for (int r = first; stride > 0 ? r <= last : r >= last; r += stride) {
      ranks.push_back(r);
      if (ranks.size() > g.size()) break;  // Pick names the rank given twice
    }
  }
  return Pick(g, static_cast<int>(ranks.size()), ranks.data(), fn, out);
}

// Copies a name out as MPI does (at most MPI_MAX_OBJECT_NAME - 1 chars).
void PutName(const std::string& name, char* out, int* resultlen) {
  const std::size_t n = std::min<std::size_t>(name.size(), MPI_MAX_OBJECT_NAME - 1);
  std::memcpy(out, name.data(), n);
  out[n] = '\0';
  *resultlen = static_cast<int>(n);
}

}  // namespace

// The world ranks a group handle names (MPI_GROUP_EMPTY: none), or null
// with an error of `fn` in `*rc`.
const std::vector<int>* GroupArg(MPI_Group group, const char* fn, int* rc) {
  static const std::vector<int> empty;
  if (group == MPI_GROUP_EMPTY) return &empty;
  State& s = S();
  if ((group & ~0x03ffffff) == kGroupBase) {
    const auto i = static_cast<std::size_t>(group & 0x03ffffff);
    std::lock_guard<std::mutex> lock(s.mu);
    if (i < s.groups.size() && s.groups[i]->world.has_value()) return &*s.groups[i]->world;
  }
  *rc = Error(MPI_COMM_WORLD, fn, MPI_ERR_GROUP,
              absl::StrFormat("group 0x%08x is not a group (MPI_GROUP_EMPTY, or one made and not freed)",
                              static_cast<unsigned>(group)));
  return nullptr;
}

MPI_Group NewGroup(std::vector<int> world) {
  if (world.empty()) return MPI_GROUP_EMPTY;
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  const int i = TakeSlot(s.groups, s.free_groups);
  s.groups[static_cast<std::size_t>(i)]->world = std::move(world);
  return kGroupBase | i;
}

// MPI_Comm_split of an intercommunicator: the ranks of each color, on
// both sides, form a new intercommunicator (MPI_COMM_NULL where a side has
// none). A split of the joined communicator by color, then one ordering it
// by side (the side first in the old one first) and key.
int SplitInter(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  const cartage::Comm& c = *CommSlotOf(comm)->comm;
  const CommSlot old = *CommSlotOf(comm);
  absl::StatusOr<std::optional<cartage::Comm>> by_color = c.Split(color == MPI_UNDEFINED ? -1 : color, key);
  if (!by_color.ok()) return FromStatus(comm, "MPI_Comm_split", by_color.status());
  if (!by_color->has_value()) {
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  const cartage::Comm& u = **by_color;
  const int side = old.local_offset == 0 ? 0 : 1;
  absl::StatusOr<std::optional<cartage::Comm>> by_side = u.Split(0, side * u.size() + u.rank());
  if (!by_side.ok()) return FromStatus(comm, "MPI_Comm_split", by_side.status());
  const cartage::Comm& n = **by_side;
  const std::vector<int> mine = WorldRanks(c, old.local_offset, old.local_size);
  int local = 0;
  for (int r = 0; r < n.size(); ++r) {
    if (IndexIn(mine, n.world_rank(r)) != MPI_UNDEFINED) ++local;
  }
  if (local == n.size()) {  // no rank of the other side took this color
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  *newcomm = NewComm(n, old.handler);
  CommSlot& slot = *CommSlotOf(*newcomm);
  slot.inter = true;
  slot.local_offset = side == 0 ? 0 : n.size() - local;
  slot.local_size = local;
  slot.remote_offset = side == 0 ? local : 0;
  slot.remote_size = n.size() - local;
  return MakeInter(*newcomm, "MPI_Comm_split");
}

extern "C" {

// ---- Groups ------------------------------------------------------------------------

int PMPI_Comm_group(MPI_Comm comm, MPI_Group* group) {
  int rc = MPI_SUCCESS;
  const cartage::Comm* c = CommOf(comm, "MPI_Comm_group", &rc);
  if (c == nullptr) return rc;
  *group = NewGroup(LocalGroup(*c, *CommSlotOf(comm)));
  return MPI_SUCCESS;
}

int PMPI_Comm_remote_group(MPI_Comm comm, MPI_Group* group) {
  int rc = MPI_SUCCESS;
  const cartage::Comm* c = CommOf(comm, "MPI_Comm_remote_group", &rc);
  if (c == nullptr) return rc;
  const CommSlot& slot = *CommSlotOf(comm);
  if (!slot.inter) return Error(comm, "MPI_Comm_remote_group", MPI_ERR_COMM, "not an intercommunicator");
  *group = NewGroup(WorldRanks(*c, slot.remote_offset, slot.remote_size));
  return MPI_SUCCESS;
}

int PMPI_Group_size(MPI_Group group, int* size) {
  int rc = MPI_SUCCESS;
  const std::vector<int>* g = GroupArg(group, "MPI_Group_size", &rc);
  if (g == nullptr) return rc;
  *size = static_cast<int>(g->size());
  return MPI_SUCCESS;
}

int PMPI_Group_rank(MPI_Group group, int* rank) {
  int rc = MPI_SUCCESS;
  const std::vector<int>* g = GroupArg(group, "MPI_Group_rank", &rc);
  if (g == nullptr) return rc;
  *rank = IndexIn(*g, S().world_rank);
  return MPI_SUCCESS;
}

int PMPI_Group_free(MPI_Group* group) {
  int rc = MPI_SUCCESS;
  if (GroupArg(*group, "MPI_Group_free", &rc) == nullptr) return rc;
  if (*group != MPI_GROUP_EMPTY) {
    State& s = S();
    const int i = *group & 0x03ffffff;
    std::lock_guard<std::mutex> lock(s.mu);
    s.groups[static_cast<std::size_t>(i)]->world.reset();
    s.free_groups.push_back(i);
  }
  *group = MPI_GROUP_NULL;
  return MPI_SUCCESS;
}

int PMPI_Group_incl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  int rc = MPI_SUCCESS;
  const std::vector<int>* g = GroupArg(group, "MPI_Group_incl", &rc);
  if (g == nullptr) return rc;
  std::vector<int> picked;
  if (int err = Pick(*g, n, ranks, "MPI_Group_incl", &picked); err != MPI_SUCCESS) return err;
  std::vector<int> world;
  for (int r : picked) world.push_back((*g)[static_cast<std::size_t>(r)]);
  *newgroup = NewGroup(std::move(world));
  return MPI_SUCCESS;
}

int PMPI_Group_excl(MPI_Group group, int n, const int ranks[], MPI_Group* newgroup) {
  int rc = MPI_SUCCESS;
  const std::vector<int>* g = GroupArg(group, "MPI_Group_excl", &rc);
  if (g == nullptr) return rc;
  std::vector<int> picked;
  if (int err = Pick(*g, n, ranks, "MPI_Group_excl", &picked); err != MPI_SUCCESS) return err;
  std::vector<bool> out(g->size(), false);
  for (int r : picked) out[static_cast<std::size_t>(r)] = true;
  std::vector<int> world;
  for (std::size_t r = 0; r < g->size(); ++r) {
    if (!out[r]) world.push_back((*g)[r]);
  }
  *newgroup = NewGroup(std::move(world));
  return MPI_SUCCESS;
}

int PMPI_Group_range_incl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup) {
  int rc = MPI_SUCCESS;
  const std::vector<int>* g = GroupArg(group, "MPI_Group_range_incl", &rc);
  if (g == nullptr) return rc;
  std::vector<int> picked;
  if (int err = Ranges(*g, n, ranges, "MPI_Group_range_incl", &picked); err != MPI_SUCCESS) return err;
  return PMPI_Group_incl(group, static_cast<int>(picked.size()), picked.data(), newgroup);
}

int PMPI_Group_range_excl(MPI_Group group, int n, int ranges[][3], MPI_Group* newgroup) {
  int rc = MPI_SUCCESS;
  const std::vector<int>* g = GroupArg(group, "MPI_Group_range_excl", &rc);
  if (g == nullptr) return rc;
  std::vector<int> picked;
  if (int err = Ranges(*g, n, ranges, "MPI_Group_range_excl", &picked); err != MPI_SUCCESS) return err;
  return PMPI_Group_excl(group, static_cast<int>(picked.size()), picked.data(), newgroup);
}

int PMPI_Group_union(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  int rc = MPI_SUCCESS;
  const std::vector<int>* a = GroupArg(group1, "MPI_Group_union", &rc);
  const std::vector<int>* b = a == nullptr ? nullptr : GroupArg(group2, "MPI_Group_union", &rc);
  if (b == nullptr) return rc;
  std::vector<int> world = *a;
  for (int w : *b) {
    if (IndexIn(*a, w) == MPI_UNDEFINED) world.push_back(w);
  }
  *newgroup = NewGroup(std::move(world));
  return MPI_SUCCESS;
}

int PMPI_Group_intersection(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  int rc = MPI_SUCCESS;
  const std::vector<int>* a = GroupArg(group1, "MPI_Group_intersection", &rc);
  const std::vector<int>* b = a == nullptr ? nullptr : GroupArg(group2, "MPI_Group_intersection", &rc);
  if (b == nullptr) return rc;
  std::vector<int> world;
  for (int w : *a) {
    if (IndexIn(*b, w) != MPI_UNDEFINED) world.push_back(w);
  }
  *newgroup = NewGroup(std::move(world));
  return MPI_SUCCESS;
}

int PMPI_Group_difference(MPI_Group group1, MPI_Group group2, MPI_Group* newgroup) {
  int rc = MPI_SUCCESS;
  const std::vector<int>* a = GroupArg(group1, "MPI_Group_difference", &rc);
  const std::vector<int>* b = a == nullptr ? nullptr : GroupArg(group2, "MPI_Group_difference", &rc);
  if (b == nullptr) return rc;
  std::vector<int> world;
  for (int w : *a) {
    if (IndexIn(*b, w) == MPI_UNDEFINED) world.push_back(w);
  }
  *newgroup = NewGroup(std::move(world));
  return MPI_SUCCESS;
}

int PMPI_Group_translate_ranks(MPI_Group group1, int n, const int ranks1[], MPI_Group group2, int ranks2[]) {
  int rc = MPI_SUCCESS;
  const std::vector<int>* a = GroupArg(group1, "MPI_Group_translate_ranks", &rc);
  const std::vector<int>* b = a == nullptr ? nullptr : GroupArg(group2, "MPI_Group_translate_ranks", &rc);
  if (b == nullptr) return rc;
  for (int i = 0; i < n; ++i) {
    const int r = ranks1[i];
    if (r == MPI_PROC_NULL) {
      ranks2[i] = MPI_PROC_NULL;
      continue;
    }
    if (r < 0 || r >= static_cast<int>(a->size())) {
      return Error(MPI_COMM_WORLD, "MPI_Group_translate_ranks", MPI_ERR_RANK,
                   absl::StrFormat("rank %d (entry %d) is not in a group of %d", r, i, a->size()));
    }
    ranks2[i] = IndexIn(*b, (*a)[static_cast<std::size_t>(r)]);
  }
  return MPI_SUCCESS;
}

int PMPI_Group_compare(MPI_Group group1, MPI_Group group2, int* result) {
  int rc = MPI_SUCCESS;
  const std::vector<int>* a = GroupArg(group1, "MPI_Group_compare", &rc);
  const std::vector<int>* b = a == nullptr ? nullptr : GroupArg(group2, "MPI_Group_compare", &rc);
  if (b == nullptr) return rc;
  *result = Compare(*a, *b);
  return MPI_SUCCESS;
}

// ---- Communicators from groups -------------------------------------------------------

int PMPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  int rc = MPI_SUCCESS;
  const cartage::Comm* c = CommOf(comm, "MPI_Comm_create", &rc);
  if (c == nullptr) return rc;
  const std::vector<int>* g = GroupArg(group, "MPI_Comm_create", &rc);
  if (g == nullptr) return rc;
  // Of an intercommunicator: each side names a group of its own ranks.
  const int at = IndexIn(*g, S().world_rank);
  if (CommSlotOf(comm)->inter) return SplitInter(comm, at == MPI_UNDEFINED ? MPI_UNDEFINED : 0, at, newcomm);
  // A split: the members of one group share a color (the lowest rank here
  // among them), ordered as the group; every rank of `comm` takes part.
  const std::vector<int> here = WorldRanks(*c, 0, c->size());
  int color = -1;
  for (int w : *g) {
    const int r = IndexIn(here, w);
    if (r == MPI_UNDEFINED) {
      return Error(comm, "MPI_Comm_create", MPI_ERR_GROUP,
                   absl::StrFormat("world rank %d of the group is not in the communicator", w));
    }
    color = color < 0 ? r : std::min(color, r);
  }
  const int key = IndexIn(*g, S().world_rank);
  absl::StatusOr<std::optional<cartage::Comm>> made = c->Split(key == MPI_UNDEFINED ? -1 : color, key);
  if (!made.ok()) return FromStatus(comm, "MPI_Comm_create", made.status());
  *newcomm = made->has_value() ? NewComm(**made, CommSlotOf(comm)->handler) : MPI_COMM_NULL;
  return MPI_SUCCESS;
}

int PMPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm* newcomm) {
  int rc = MPI_SUCCESS;
  const cartage::Comm* c = IntraOf(comm, "MPI_Comm_create_group", &rc);
  if (c == nullptr) return rc;
  const std::vector<int>* g = GroupArg(group, "MPI_Comm_create_group", &rc);
  if (g == nullptr) return rc;
  if (IndexIn(*g, S().world_rank) == MPI_UNDEFINED) {
    *newcomm = MPI_COMM_NULL;
    return MPI_SUCCESS;
  }
  const std::vector<int> here = WorldRanks(*c, 0, c->size());
  std::vector<int> members;
  for (int w : *g) {
    const int r = IndexIn(here, w);
    if (r == MPI_UNDEFINED) {
      return Error(comm, "MPI_Comm_create_group", MPI_ERR_GROUP,
                   absl::StrFormat("world rank %d of the group is not in the communicator", w));
    }
    members.push_back(r);
  }
  absl::StatusOr<cartage::Comm> made = c->CreateGroup(members, tag);
  if (!made.ok()) return FromStatus(comm, "MPI_Comm_create_group", made.status());
  *newcomm = NewComm(*std::move(made), CommSlotOf(comm)->handler);
  return MPI_SUCCESS;
}

int PMPI_Comm_compare(MPI_Comm comm1, MPI_Comm comm2, int* result) {
  int rc = MPI_SUCCESS;
  const cartage::Comm* a = CommOf(comm1, "MPI_Comm_compare", &rc);
  const cartage::Comm* b = a == nullptr ? nullptr : CommOf(comm2, "MPI_Comm_compare", &rc);
  if (b == nullptr) return rc;
  if (comm1 == comm2) {
    *result = MPI_IDENT;
    return MPI_SUCCESS;
  }
  const CommSlot& x = *CommSlotOf(comm1);
  const CommSlot& y = *CommSlotOf(comm2);
  if (x.inter != y.inter) {
    *result = MPI_UNEQUAL;
    return MPI_SUCCESS;
  }
  int local = Compare(LocalGroup(*a, x), LocalGroup(*b, y));
  if (x.inter) {
    const int remote = Compare(WorldRanks(*a, x.remote_offset, x.remote_size),
                               WorldRanks(*b, y.remote_offset, y.remote_size));
    local = std::max(local, remote);
  }
  *result = local == MPI_IDENT ? MPI_CONGRUENT : local;
  return MPI_SUCCESS;
}

// ---- Intercommunicators ----------------------------------------------------------------

int PMPI_Comm_test_inter(MPI_Comm comm, int* flag) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Comm_test_inter", &rc) == nullptr) return rc;
  *flag = CommSlotOf(comm)->inter ? 1 : 0;
  return MPI_SUCCESS;
}

int PMPI_Comm_remote_size(MPI_Comm comm, int* size) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Comm_remote_size", &rc) == nullptr) return rc;
  const CommSlot& slot = *CommSlotOf(comm);
  if (!slot.inter) return Error(comm, "MPI_Comm_remote_size", MPI_ERR_COMM, "not an intercommunicator");
  *size = slot.remote_size;
  return MPI_SUCCESS;
}

}  // extern "C"

namespace {

// Two joined groups as an intercommunicator handle in `*newintercomm`.
int AdoptJoined(const cartage::Comm::Joined& j, int local_size, MPI_Errhandler handler, MPI_Comm* newintercomm,
                const char* fn) {
  *newintercomm = NewComm(j.comm, handler);
  CommSlot& slot = *CommSlotOf(*newintercomm);
  slot.inter = true;
  slot.local_offset = j.local_offset;
  slot.local_size = local_size;
  slot.remote_offset = j.remote_offset;
  slot.remote_size = j.remote_size;
  return MakeInter(*newintercomm, fn);
}

}  // namespace

extern "C" {

int PMPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader, int tag,
                          MPI_Comm* newintercomm) {
  int rc = MPI_SUCCESS;
  const cartage::Comm* local = IntraOf(local_comm, "MPI_Intercomm_create", &rc);
  if (local == nullptr) return rc;
  if (local_leader < 0 || local_leader >= local->size()) {
    return Error(local_comm, "MPI_Intercomm_create", MPI_ERR_RANK,
                 absl::StrFormat("local leader %d is not a rank of a communicator of %d", local_leader,
                                 local->size()));
  }
  // The peer communicator and the remote leader mean something at the local leader only.
  const cartage::Comm* peer = local;
  if (local->rank() == local_leader) {
    peer = IntraOf(peer_comm, "MPI_Intercomm_create", &rc);
    if (peer == nullptr) return rc;
    if (remote_leader < 0 || remote_leader >= peer->size()) {
      return Error(local_comm, "MPI_Intercomm_create", MPI_ERR_RANK,
                   absl::StrFormat("remote leader %d is not a rank of a peer communicator of %d", remote_leader,
                                   peer->size()));
    }
    if (tag < 0 || tag > cartage::kMaxTag) {
      return Error(local_comm, "MPI_Intercomm_create", MPI_ERR_TAG,
                   absl::StrFormat("tag %d is outside 0..%d", tag, cartage::kMaxTag));
    }
  }
  absl::StatusOr<cartage::Comm::Joined> j = local->Join(local_leader, *peer, remote_leader, tag);
  if (!j.ok()) return FromStatus(local_comm, "MPI_Intercomm_create", j.status());
  return AdoptJoined(*j, local->size(), CommSlotOf(local_comm)->handler, newintercomm, "MPI_Intercomm_create");
}

// MPI-4's: the two groups meet on the binding's own copy of the world,
// each made a communicator of its members first; `stringtag` names the
// meeting (a tag from it, the same on every rank).
int PMPI_Intercomm_create_from_groups(MPI_Group local_group, int local_leader, MPI_Group remote_group,
                                      int remote_leader, const char* stringtag, MPI_Info info,
                                      MPI_Errhandler errhandler, MPI_Comm* newintercomm) {
  const char* fn = "MPI_Intercomm_create_from_groups";
  int rc = MPI_SUCCESS;
  if (rc = InfoCheck(info, fn); rc != MPI_SUCCESS) return rc;
  if (rc = HandlerArg(errhandler, fn); rc != MPI_SUCCESS) return rc;
  const std::vector<int>* local = GroupArg(local_group, fn, &rc);
  const std::vector<int>* remote = local == nullptr ? nullptr : GroupArg(remote_group, fn, &rc);
  if (remote == nullptr) return rc;
  const int me = IndexIn(*local, S().world_rank);
  if (me == MPI_UNDEFINED) return Error(MPI_COMM_WORLD, fn, MPI_ERR_GROUP, "this rank is not in the local group");
  const auto size_of = [](const std::vector<int>* g) { return static_cast<int>(g->size()); };
  if (local_leader < 0 || local_leader >= size_of(local) || remote_leader < 0 || remote_leader >= size_of(remote)) {
    return Error(MPI_COMM_WORLD, fn, MPI_ERR_RANK,
                 absl::StrFormat("leaders %d and %d of groups of %d and %d", local_leader, remote_leader,
                                 size_of(local), size_of(remote)));
  }
  uint32_t hash = 2166136261u;  // FNV-1a: the same tag wherever the string is the same
  for (const char* p = stringtag; *p != '\0'; ++p) hash = (hash ^ static_cast<unsigned char>(*p)) * 16777619u;
  const int tag = static_cast<int>(hash % static_cast<uint32_t>(cartage::kMaxTag));
  const cartage::Comm& world = *S().own_world;
  absl::StatusOr<cartage::Comm> mine = world.CreateGroup(*local, tag);
  if (!mine.ok()) return FromStatus(MPI_COMM_WORLD, fn, mine.status());
  absl::StatusOr<cartage::Comm::Joined> j = mine->Join(local_leader, world, (*remote)[remote_leader], tag);
  if (!j.ok()) return FromStatus(MPI_COMM_WORLD, fn, j.status());
  return AdoptJoined(*j, size_of(local), errhandler, newintercomm, fn);
}

int PMPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm* newintracomm) {
  int rc = MPI_SUCCESS;
  const cartage::Comm* c = CommOf(intercomm, "MPI_Intercomm_merge", &rc);
  if (c == nullptr) return rc;
  if (!CommSlotOf(intercomm)->inter) {
    return Error(intercomm, "MPI_Intercomm_merge", MPI_ERR_COMM, "not an intercommunicator");
  }
  // The group that passes high = false first; where both pass the same,
  // the group whose leader has the lower world rank.
  absl::StatusOr<std::optional<cartage::Comm>> merged = c->Split(0, high != 0 ? 1 : 0);
  if (!merged.ok()) return FromStatus(intercomm, "MPI_Intercomm_merge", merged.status());
  *newintracomm = NewComm(**merged, CommSlotOf(intercomm)->handler);
  return MPI_SUCCESS;
}

int PMPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
  (void)info;
  int rc = MPI_SUCCESS;
  const cartage::Comm* c = IntraOf(comm, "MPI_Comm_split_type", &rc);
  if (c == nullptr) return rc;
  if (split_type != MPI_COMM_TYPE_SHARED && split_type != MPI_UNDEFINED) {
    return Error(comm, "MPI_Comm_split_type", MPI_ERR_ARG,
                 absl::StrFormat("split type %d (MPI_COMM_TYPE_SHARED or MPI_UNDEFINED)", split_type));
  }
  // The ranks that share memory with this one are those shm (or self)
  // reaches; the lowest of them names the group.
  int color = -1;
  if (split_type == MPI_COMM_TYPE_SHARED) {
    for (int r = 0; r < c->size() && color < 0; ++r) {
      absl::StatusOr<cartage::PathInfo> path = c->PathTo(r);
      if (path.ok() && (path->method == "shm" || path->method == "self")) color = r;
    }
  }
  absl::StatusOr<std::optional<cartage::Comm>> made = c->Split(color, key);
  if (!made.ok()) return FromStatus(comm, "MPI_Comm_split_type", made.status());
  *newcomm = made->has_value() ? NewComm(**made, CommSlotOf(comm)->handler) : MPI_COMM_NULL;
  return MPI_SUCCESS;
}

// ---- Names ------------------------------------------------------------------------------

int PMPI_Comm_set_name(MPI_Comm comm, const char* comm_name) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Comm_set_name", &rc) == nullptr) return rc;
  CommSlotOf(comm)->name = std::string(comm_name).substr(0, MPI_MAX_OBJECT_NAME - 1);
  return MPI_SUCCESS;
}

int PMPI_Comm_get_name(MPI_Comm comm, char* comm_name, int* resultlen) {
  int rc = MPI_SUCCESS;
  if (CommOf(comm, "MPI_Comm_get_name", &rc) == nullptr) return rc;
  const std::string& set = CommSlotOf(comm)->name;
  PutName(!set.empty()               ? set
          : comm == MPI_COMM_WORLD ? std::string("MPI_COMM_WORLD")
          : comm == MPI_COMM_SELF  ? std::string("MPI_COMM_SELF")
                                   : std::string(),
          comm_name, resultlen);
  return MPI_SUCCESS;
}

}  // extern "C"
}  // namespace cartage::mpi_binding

CARTAGE_MPI_ALIAS(MPI_Comm_group);
CARTAGE_MPI_ALIAS(MPI_Comm_remote_group);
CARTAGE_MPI_ALIAS(MPI_Group_size);
CARTAGE_MPI_ALIAS(MPI_Group_rank);
CARTAGE_MPI_ALIAS(MPI_Group_free);
CARTAGE_MPI_ALIAS(MPI_Group_incl);
CARTAGE_MPI_ALIAS(MPI_Group_excl);
CARTAGE_MPI_ALIAS(MPI_Group_range_incl);
CARTAGE_MPI_ALIAS(MPI_Group_range_excl);
CARTAGE_MPI_ALIAS(MPI_Group_union);
CARTAGE_MPI_ALIAS(MPI_Group_intersection);
CARTAGE_MPI_ALIAS(MPI_Group_difference);
CARTAGE_MPI_ALIAS(MPI_Group_translate_ranks);
CARTAGE_MPI_ALIAS(MPI_Group_compare);
CARTAGE_MPI_ALIAS(MPI_Comm_create);
CARTAGE_MPI_ALIAS(MPI_Comm_create_group);
CARTAGE_MPI_ALIAS(MPI_Comm_compare);
CARTAGE_MPI_ALIAS(MPI_Comm_test_inter);
CARTAGE_MPI_ALIAS(MPI_Comm_remote_size);
CARTAGE_MPI_ALIAS(MPI_Intercomm_create);
CARTAGE_MPI_ALIAS(MPI_Intercomm_create_from_groups);
CARTAGE_MPI_ALIAS(MPI_Intercomm_merge);
CARTAGE_MPI_ALIAS(MPI_Comm_split_type);
CARTAGE_MPI_ALIAS(MPI_Comm_set_name);
CARTAGE_MPI_ALIAS(MPI_Comm_get_name);
