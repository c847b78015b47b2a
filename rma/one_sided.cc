// One-sided windows: every rank is carried by one method that writes and
// reads other ranks' memory itself (ofi on a provider with FI_RMA), and
// each rank's window memory is exposed through it when the window is made.
// A put or get whose target data is one block is then the origin's car_rma
// CAR (rma_op's OneSided row: idle -issue/StartRemote-> issued -stored->
// done), which the method moves with nothing for the target's agent to
// do; the others, and every accumulate, are served (the one accumulate
// path of such a window). Where there is no such method, a served
// window's agreement still tells every rank whether every rank's memory
// could be allocated.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "cartage/collectives.h"
#include "cartage/engine.h"
#include "datatype/segment_walk.h"
#include "rma/window_state.h"

namespace cartage::rma {

absl::StatusOr<uint64_t> OneSidedMin() {
  uint64_t v = WindowState::kOneSidedMin;
  const char* env = std::getenv("CARTAGE_RMA_ONE_SIDED_MIN");
  if (env != nullptr && !absl::SimpleAtoi(env, &v)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("window: CARTAGE_RMA_ONE_SIDED_MIN=%s: need a number of bytes", env));
  }
  return v;
}

absl::Status Agree(const Comm& comm, WindowState& w, bool ready, void* base, uint64_t bytes, uint64_t min) {
  struct Named {
    uint64_t ready;
    uint64_t exposed;
    uint64_t addr;
    uint64_t key;
  };
  Named mine{ready ? 1u : 0u, 0, 0, 0};
  // Refused where no one method with rma carries every rank, or where it
  // cannot register the memory: the window is then served.
  std::optional<engine::Exposed> e;
  if (ready) {
    if (absl::StatusOr<engine::Exposed> x = engine::Expose(comm, base, static_cast<std::size_t>(bytes)); x.ok()) {
      e = *x;
      mine = {1, 1, e->addr, e->key};
    }
  }
  std::vector<Named> all(static_cast<std::size_t>(comm.size()));
  static const Datatype kU64 = Datatype::Basic(datatype::BasicType::kUint64);
  absl::Status st = Allgather(comm, &mine, all.data(), 4, kU64);
  for (std::size_t r = 0; st.ok() && r < all.size(); ++r) {
    if (all[r].ready == 0) {
      st = absl::ResourceExhaustedError(absl::StrFormat(
          "window: rank %d could not allocate its %d bytes%s", r, w.sizes[r],
          static_cast<int>(r) == comm.rank() ? "" : " (every rank fails the window)"));
    }
  }
  const bool everywhere =
      st.ok() && std::all_of(all.begin(), all.end(), [](const Named& n) { return n.exposed == 1; });
  if (!everywhere) {
    if (e.has_value()) engine::Unexpose(comm, e->token);
    return st;
  }
  w.one_sided = true;
  w.remote_ordered = e->ordered;  // one method carries every rank: the same everywhere
  w.one_sided_min = min;
  w.exposed_token = e->token;
  for (const Named& n : all) {
    w.remote_addrs.push_back(n.addr);
    w.remote_keys.push_back(n.key);
  }
  return absl::OkStatus();
}

bool OpActions::OneSided(const OriginOp& op, const RmaSignal&) {
  return op.win->MovesRemotely(op.kind, op.bytes, op.runs);
}

void OpActions::StartRemote(OriginOp& op, const RmaSignal&, OpEvents& events) {
  const WindowState& w = *op.win;
  const Access& a = *op.access;
  const auto t = static_cast<std::size_t>(op.target);
  const bool put = op.kind == OpKind::kPut;
  const Datatype& type = put ? *a.origin_type : *a.result_type;
  const int64_t count = put ? a.origin_count : a.result_count;
  RemoteMove& r = op.remote.emplace();
  // The data here as one block: the buffer itself where it is contiguous,
  // else a temporary (packed before a put, unpacked once a get landed).
  std::byte* local = static_cast<std::byte*>(put ? const_cast<void*>(a.origin) : a.result);
  if (!type.contiguous()) {
    r.packed.resize(static_cast<std::size_t>(op.bytes));
    if (put) {
      datatype::Pack(a.origin, count, type, 0, static_cast<int64_t>(op.bytes), r.packed.data());
    } else {
      r.into = a.result;
      r.into_count = count;
      r.into_type = type;
    }
    local = r.packed.data();
  }
  const uint64_t offset = op.runs != nullptr && !op.runs->empty() ? static_cast<uint64_t>((*op.runs)[0].offset) : 0;
  const uint64_t there = w.remote_addrs[t] + op.disp * static_cast<uint64_t>(w.units[t]) + offset;
  const absl::Status st =
      engine::StartOneSided(w.comm, put, local, op.bytes, op.target, there, w.remote_keys[t], &r.req);
  if (!st.ok()) RaiseFailed(op, st, events);
}

void WindowState::FinishRemote(OriginOp& op) {
  RemoteMove& r = *op.remote;
  absl::Status st = r.req.Wait();  // completed: at once
  if (st.ok() && r.into != nullptr) {
    datatype::Unpack(r.packed.data(), r.into_count, *r.into_type, 0, static_cast<int64_t>(op.bytes), r.into);
  }
  RmaSignal x;
  x.error = std::move(st);
  (void)OpMachine::Dispatch(op, x.error.ok() ? OpEvent::kStored : OpEvent::kError, x);
}

}  // namespace cartage::rma
