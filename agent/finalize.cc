// Finalize: every rank reaches it before anyone detaches, and while it waits
// for the others it keeps every method moving, so that what was sent is
// delivered (a provider that still holds messages pushes them out) and what
// was sent to this rank is taken. A message no receive took is received into
// scratch memory, so that its sender (waiting for a rendezvous or a
// synchronous match) finishes too, and named in finalize's status.
#include <chrono>
#include <numeric>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"
#include "agent/runtime.h"
#include "cartage/cartage.h"

namespace cartage::agent {

struct Runtime::Leftovers {
  int count = 0;
  car::Envelope first;  // the first one's envelope and size
  uint64_t first_bytes = 0;
  absl::Status failed;  // taking one failed: finalize takes no more
  std::vector<std::byte> scratch;

  void Note(const car::Envelope& e, uint64_t bytes) {
    if (count++ == 0) {
      first = e;
      first_bytes = bytes;
    }
  }
  absl::Status Report(int rank) const {
    if (count == 0) return failed;
    std::string what = absl::StrFormat(
        "finalize (rank %d): %d message%s sent to this rank %s never received; the first: from rank %d "
        "(context %u, tag %d, %d bytes)",
        rank, count, count == 1 ? "" : "s", count == 1 ? "was" : "were", first.rank, first.context_id, first.tag,
        first_bytes);
    if (!failed.ok()) absl::StrAppend(&what, "; taking one failed: ", failed.message());
    return absl::FailedPreconditionError(what);
  }
};

int Runtime::TakeLeftovers(Leftovers& left) {
  if (!left.failed.ok()) return 0;
  int taken = 0;
  // Every context this rank knows: the world's two and each communicator's.
  const uint32_t last = first_->next_context_.load(std::memory_order_relaxed) + 1;
  std::vector<uint32_t> contexts(last + 1);
  std::iota(contexts.begin(), contexts.end(), 0u);
  for (uint32_t unique : UniqueContextsMade()) {
    contexts.push_back(unique);
    contexts.push_back(unique + 1);
  }
  for (uint32_t context : contexts) {
    for (;;) {
      absl::StatusOr<std::optional<methods::Method::Probed>> found = Peek(context, car::kAnySource, car::kAnyTag);
      if (!found.ok() || !found->has_value()) break;
      const methods::Method::Probed m = **found;
      if (left.scratch.size() < m.bytes) left.scratch.resize(m.bytes);
      const car::MessageSpec spec{.kind = car::CarKind::kRecv,
                                  .envelope = {context, m.source, m.tag},
                                  .segment = car::Segment::Of(left.scratch.data(), m.bytes,
                                                              datatype::BasicType::kByte)};
      Request req;
      absl::Status s = Create(spec, m.source, &req);
      if (s.ok()) s = Post(&req);
      if (s.ok()) s = req.Wait();
      left.Note(spec.envelope, m.bytes);
      ++taken;
      if (!s.ok()) {
        left.failed = s;
        return taken;
      }
    }
  }
  return taken;
}

absl::Status Runtime::Finalize() {
  if (finalized_) return absl::OkStatus();
  StopProgressThread();  // from here on only the finalizing thread runs the runtime
  // In a trace, finalize is a span of its own: a rank that hangs there is
  // told apart from one that computes (cartage why-stuck).
  const uint64_t span = fsm::BeginSpan("finalize", ~0u);
  for (Runtime* l : lanes_) l->BeginFinalize();
  // One fence for every lane, which moves them all while it waits: a peer
  // still pushing a message through one lane must not wait on a rank that
  // fences in another.
  // A runtime whose set-up failed part-way (a method that did not open, a
  // plugin that did not load) has nothing to finalize with its peers.
  const bool up = matcher_ != nullptr;
  Leftovers left;
  absl::Status fenced;
  if (up) {
    // A rank that is gone never reaches the fence, and not every launcher
    // fails the fence for it (PMI's wait for ever), so after a grace the
    // wait is given up. The grace lets a launcher that does say so speak
    // first (its word names the death), and lets the fence's reply reach
    // this rank where the peer found gone only finalized after it.
    using Clock = std::chrono::steady_clock;
    constexpr auto kGrace = std::chrono::seconds(5);
    int gone = FirstGone();
    Clock::time_point gone_seen = Clock::now();
    fenced = exchange_->FenceWhile([&] {
      int work = 0;
      for (Runtime* l : lanes_) {
        if (l->matcher_ != nullptr) work += l->ProgressAll(/*idle_due=*/true) + l->TakeLeftovers(left);
      }
      const Clock::time_point now = Clock::now();
      if (gone < 0 && now - last_peer_check_ > std::chrono::milliseconds(100)) {
        CheckPeers();
        if ((gone = FirstGone()) >= 0) gone_seen = now;
      }
      return gone >= 0 && now - gone_seen > kGrace ? methods::Exchange::kFenceCannotComplete : work;
    });
    if (absl::IsAborted(fenced)) {
      fenced = absl::UnavailableError(absl::StrFormat(
          "finalize (rank %d): rank %d is gone, so the job's fence cannot complete", rank_, gone));
    }
  }
  // The other lanes go first: lane 0 holds the exchange they share.
  for (auto it = lanes_.rbegin(); it != lanes_.rend(); ++it) (*it)->CloseLane(left);
  absl::Status status = left.Report(rank_);
  status.Update(fenced);
  fsm::EndSpan(span, "finalize", ~0u, status.ok());
  if (trace_ != nullptr) trace_->SetLiveLister(nullptr);  // the pools go before the trace
  for (Runtime* l : lanes_) {
    if (l->life_ != nullptr) l->life_->store(false);
  }
  return status;
}

void Runtime::AbandonLanes() {
  Leftovers none;
  for (const auto& l : siblings_) {
    l->BeginFinalize();
    l->CloseLane(none);
    l->life_->store(false);
  }
  BeginFinalize();
  CloseLane(none);
  life_->store(false);
}

void Runtime::BeginFinalize() {
  finalized_ = true;
  // What the layers above keep per agent (cached collective schedules, with
  // their CARs and registrations) goes first, while the pool and methods live.
  extensions_.clear();
  last_extension_key_ = nullptr;
  last_extension_ = nullptr;
  hold_.allowed = false;  // nothing is held back now: no receive is coming for it
}

void Runtime::CloseLane(Leftovers& left) {
  const bool up = matcher_ != nullptr;
  for (auto& [p, lent] : lent_) lent.first->FreeBuffer(lent.second);
  lent_.clear();
  routes_.CloseAll();
  // What arrived after the last look: counted, then its CARs and buffers go back.
  std::vector<car::Car*> late;
  if (up) matcher_->TakeAllUnexpected(&late);
  for (car::Car* u : late) {
    left.Note(u->envelope(), u->bytes_total());
    ReleaseUnexpected(u);
  }
  std::vector<CompactMessage*> compacted;
  if (up) matcher_->TakeAllCompact(&compacted);
  for (CompactMessage* r : compacted) {
    left.Note(r->envelope, r->bytes);
    FreeCompact(r);
  }
}

}  // namespace cartage::agent
