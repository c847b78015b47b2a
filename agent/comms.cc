// Making communicators (cartage/cartage.h: Comm::Dup, Split, CreateGroup,
// Join). A new communicator's context must be free on each of its ranks;
// ranks make different communicators (a split's halves, a group's members
// only), so a rank's own count cannot say it. The members agree instead on
// the largest next number any of them proposes, and each takes it as used.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/strings/str_format.h"
#include "agent/runtime.h"
#include "cartage/cartage.h"

namespace cartage {

using agent::Runtime;

namespace {

// Tags on the parent's collective context below any schedule's (which
// start at 1024, collectives/schedule_engine.cc): the agreement of Dup and
// Split, of Join's local group, and CreateGroup's, by the caller's tag.
constexpr int kAgreeTag = 1;
constexpr int kJoinTag = 2;
constexpr int kGroupTagBase = 3;
constexpr int kGroupTags = 1024 - kGroupTagBase;

absl::Status Failed(absl::string_view op, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrFormat("%s: %s", op, s.message()));
}

}  // namespace

Comm Comm::Made(int rank, uint32_t context, std::shared_ptr<const std::vector<int>> group) const {
  rt_->ClaimContext(context);
  Runtime* lane = rt_->LaneFor(context);
  const int n = group ? static_cast<int>(group->size()) : size_;
  return Comm(lane, lane->life(), rank, n, context, std::move(group));
}

absl::StatusOr<uint32_t> Comm::AgreeContext(absl::Span<const int> members, int tag) const {
  const uint32_t collective = context_ + 1;
  uint32_t mine = rt_->ProposeContext();
  const int first = members.front();
  if (rank_ != first) {
    Request sent;
    Request back;
    uint32_t agreed = 0;
    CARTAGE_RETURN_IF_ERROR(Start(true, false, {&mine, sizeof(mine), nullptr}, first, tag, &sent,
                                  Persistence::kNone, collective));
    CARTAGE_RETURN_IF_ERROR(Start(false, false, {&agreed, sizeof(agreed), nullptr}, first, tag, &back,
                                  Persistence::kNone, collective));
    CARTAGE_RETURN_IF_ERROR(sent.Wait());
    CARTAGE_RETURN_IF_ERROR(back.Wait());
    return agreed;
  }
  const std::size_t n = members.size();
  std::vector<uint32_t> theirs(n, 0);
  std::vector<Request> reqs(n);
  for (std::size_t i = 1; i < n; ++i) {
    CARTAGE_RETURN_IF_ERROR(Start(false, false, {&theirs[i], sizeof(uint32_t), nullptr}, members[i], tag, &reqs[i],
                                  Persistence::kNone, collective));
  }
  for (std::size_t i = 1; i < n; ++i) {
    CARTAGE_RETURN_IF_ERROR(reqs[i].Wait());
    mine = std::max(mine, theirs[i]);
  }
  for (std::size_t i = 1; i < n; ++i) {
    CARTAGE_RETURN_IF_ERROR(Start(true, false, {&mine, sizeof(mine), nullptr}, members[i], tag, &reqs[i],
                                  Persistence::kNone, collective));
  }
  for (std::size_t i = 1; i < n; ++i) CARTAGE_RETURN_IF_ERROR(reqs[i].Wait());
  return mine;
}

absl::StatusOr<Comm> Comm::Dup() const {
  CARTAGE_RETURN_IF_ERROR(Alive("dup"));
  Runtime::Entry in(rt_);
  if (!in.ok()) return in.status("dup");
  std::vector<int> all(static_cast<std::size_t>(size_));
  std::iota(all.begin(), all.end(), 0);
  absl::StatusOr<uint32_t> context = AgreeContext(all, kAgreeTag);
  if (!context.ok()) return Failed("dup: agreeing on a context", context.status());
  return Made(rank_, *context, group_);
}

absl::StatusOr<std::optional<Comm>> Comm::Split(int color, int key) const {
  CARTAGE_RETURN_IF_ERROR(Alive("split"));
  Runtime::Entry in(rt_);
  if (!in.ok()) return in.status("split");
  // Everyone learns everyone's (color, key, proposed context) over this
  // communicator's collective context, so the exchange never meets
  // point-to-point traffic; all take the largest context, whatever color.
  const uint32_t collective = context_ + 1;
  const int mine[3] = {color, key, static_cast<int>(rt_->ProposeContext())};
  std::vector<int> all(3 * static_cast<std::size_t>(size_));
  std::vector<Request> reqs(2 * static_cast<std::size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    CARTAGE_RETURN_IF_ERROR(Start(false, false, {&all[3 * static_cast<std::size_t>(r)], sizeof(mine), nullptr}, r,
                                  kAgreeTag, &reqs[static_cast<std::size_t>(r)], Persistence::kNone, collective));
    CARTAGE_RETURN_IF_ERROR(Start(true, false, {const_cast<int*>(mine), sizeof(mine), nullptr}, r, kAgreeTag,
                                  &reqs[static_cast<std::size_t>(size_ + r)], Persistence::kNone, collective));
  }
  for (Request& r : reqs) {
    if (absl::Status s = r.Wait(); !s.ok()) return Failed("split: exchanging colors", s);
  }
  uint32_t context = 0;
  for (int r = 0; r < size_; ++r) {
    context = std::max(context, static_cast<uint32_t>(all[3 * static_cast<std::size_t>(r) + 2]));
  }
  rt_->ClaimContext(context);
  if (color < 0) return std::optional<Comm>();
  std::vector<std::tuple<int, int, int>> members;  // (key, rank here, world rank)
  for (int r = 0; r < size_; ++r) {
    if (all[3 * static_cast<std::size_t>(r)] == color) {
      members.emplace_back(all[3 * static_cast<std::size_t>(r) + 1], r, WorldRank(r));
    }
  }
  std::sort(members.begin(), members.end());
  auto group = std::make_shared<std::vector<int>>();
  int my_rank = 0;
  for (std::size_t i = 0; i < members.size(); ++i) {
    group->push_back(std::get<2>(members[i]));
    if (std::get<1>(members[i]) == rank_) my_rank = static_cast<int>(i);
  }
  return std::optional<Comm>(Made(my_rank, context, std::move(group)));
}

absl::StatusOr<Comm> Comm::CreateGroup(absl::Span<const int> members, int tag) const {
  CARTAGE_RETURN_IF_ERROR(Alive("create group"));
  if (tag < 0 || tag > kMaxTag) {
    return absl::InvalidArgumentError(absl::StrFormat("create group: invalid tag %d (0..%d)", tag, kMaxTag));
  }
  std::vector<bool> seen(static_cast<std::size_t>(size_), false);
  int my_rank = -1;
  auto group = std::make_shared<std::vector<int>>();
  for (std::size_t i = 0; i < members.size(); ++i) {
    const int r = members[i];
    if (r < 0 || r >= size_ || seen[static_cast<std::size_t>(r)]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "create group: member %d is rank %d, %s a communicator of %d", i, r,
          r >= 0 && r < size_ ? "twice in" : "not in", size_));
    }
    seen[static_cast<std::size_t>(r)] = true;
    if (r == rank_) my_rank = static_cast<int>(i);
    group->push_back(WorldRank(r));
  }
  if (my_rank < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("create group: rank %d calls it but is not a member", rank_));
  }
  Runtime::Entry in(rt_);
  if (!in.ok()) return in.status("create group");
  absl::StatusOr<uint32_t> context = AgreeContext(members, kGroupTagBase + tag % kGroupTags);
  if (!context.ok()) return Failed("create group: agreeing on a context", context.status());
  return Made(my_rank, *context, std::move(group));
}

absl::StatusOr<Comm::Joined> Comm::Join(int local_leader, const Comm& peer, int remote_leader, int tag) const {
  CARTAGE_RETURN_IF_ERROR(Alive("join"));
  if (local_leader < 0 || local_leader >= size_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("join: local leader %d is not a rank of a communicator of %d", local_leader, size_));
  }
  Runtime::Entry in(rt_);
  if (!in.ok()) return in.status("join");
  const uint32_t collective = context_ + 1;
  // The local group's largest proposal, at its leader.
  std::vector<int> all(static_cast<std::size_t>(size_));
  std::iota(all.begin(), all.end(), 0);
  std::swap(all[0], all[static_cast<std::size_t>(local_leader)]);
  absl::StatusOr<uint32_t> local = AgreeContext(all, kJoinTag);
  if (!local.ok()) return Failed("join: agreeing in the local group", local.status());
  // Header: agreed context, the remote group's size, whether the local
  // group comes first; then the remote group's world ranks.
  int header[3] = {0, 0, 0};
  std::vector<int> remote;
  if (rank_ == local_leader) {
    std::vector<int> mine = {static_cast<int>(*local), peer.world_rank(peer.rank())};
    for (int r = 0; r < size_; ++r) mine.push_back(WorldRank(r));
    Request sent;
    if (absl::Status s = peer.Isend(mine.data(), mine.size() * sizeof(int), remote_leader, tag, &sent); !s.ok()) {
      return Failed("join: to the remote leader", s);
    }
    absl::StatusOr<ProbeResult> found = peer.Probe(remote_leader, tag);
    if (!found.ok()) return Failed("join: from the remote leader", found.status());
    if (found->bytes < 3 * sizeof(int) || found->bytes % sizeof(int) != 0) {
      return absl::DataLossError(absl::StrFormat("join: the remote leader sent %d bytes", found->bytes));
    }
    std::vector<int> theirs(found->bytes / sizeof(int));
    if (absl::Status s = peer.Recv(theirs.data(), found->bytes, remote_leader, tag); !s.ok()) {
      return Failed("join: from the remote leader", s);
    }
    if (absl::Status s = sent.Wait(); !s.ok()) return Failed("join: to the remote leader", s);
    header[0] = std::max(static_cast<int>(*local), theirs[0]);
    header[1] = static_cast<int>(theirs.size()) - 2;
    header[2] = mine[1] < theirs[1] ? 1 : 0;
    remote.assign(theirs.begin() + 2, theirs.end());
    std::vector<Request> reqs(2 * static_cast<std::size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      if (r == local_leader) continue;
      const auto i = 2 * static_cast<std::size_t>(r);
      CARTAGE_RETURN_IF_ERROR(Start(true, false, {header, sizeof(header), nullptr}, r, kJoinTag, &reqs[i],
                                    Persistence::kNone, collective));
      CARTAGE_RETURN_IF_ERROR(Start(true, false,
                                    {remote.data(), static_cast<int64_t>(remote.size() * sizeof(int)), nullptr}, r,
                                    kJoinTag, &reqs[i + 1], Persistence::kNone, collective));
    }
    for (Request& r : reqs) {
      if (absl::Status s = r.Wait(); !s.ok()) return Failed("join: to the local group", s);
    }
  } else {
    Request got;
    CARTAGE_RETURN_IF_ERROR(Start(false, false, {header, sizeof(header), nullptr}, local_leader, kJoinTag, &got,
                                  Persistence::kNone, collective));
    if (absl::Status s = got.Wait(); !s.ok()) return Failed("join: from the local leader", s);
    if (header[1] <= 0) return absl::DataLossError(absl::StrFormat("join: a remote group of %d", header[1]));
    remote.resize(static_cast<std::size_t>(header[1]));
    Request ranks;
    CARTAGE_RETURN_IF_ERROR(Start(false, false, {remote.data(), static_cast<int64_t>(remote.size() * sizeof(int)), nullptr}, local_leader,
                                  kJoinTag, &ranks, Persistence::kNone, collective));
    if (absl::Status s = ranks.Wait(); !s.ok()) return Failed("join: from the local leader", s);
  }
  const bool first = header[2] == 1;
  auto group = std::make_shared<std::vector<int>>();
  for (int half = 0; half < 2; ++half) {
    if ((half == 0) == first) {
      for (int r = 0; r < size_; ++r) group->push_back(WorldRank(r));
    } else {
      group->insert(group->end(), remote.begin(), remote.end());
    }
  }
  const int me = WorldRank(rank_);
  if (std::find(remote.begin(), remote.end(), me) != remote.end()) {
    return absl::InvalidArgumentError(absl::StrFormat("join: world rank %d is in both groups", me));
  }
  const int local_offset = first ? 0 : static_cast<int>(remote.size());
  Joined j{.comm = Made(local_offset + rank_, static_cast<uint32_t>(header[0]), std::move(group)),
           .local_offset = local_offset,
           .remote_offset = first ? size_ : 0,
           .remote_size = static_cast<int>(remote.size())};
  return j;
}

}  // namespace cartage
