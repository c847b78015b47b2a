// The job's exchange as one lane of an agent sees it (CARTAGE_LANES): every
// lane opens its own methods, which publish under the same keys ("tcp.3"),
// so each lane's keys are prefixed with its number. The lanes share the
// bootstrap's exchange, and its calls are made one at a time: a lane's
// method may look a peer up lazily while another lane's does.
#ifndef CARTAGE_AGENT_LANE_EXCHANGE_H_
#define CARTAGE_AGENT_LANE_EXCHANGE_H_

#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "methods/host.h"

namespace cartage::agent {

class LaneExchange final : public methods::Exchange {
 public:
  // The bootstrap's exchange, and the lock its lanes take around it.
  struct Shared {
    std::unique_ptr<methods::Exchange> base;
    // Recursive: a fence's progress callback may reach a method's lazy look-up.
    std::recursive_mutex mu;
  };
  // Lane 0 keeps the keys as they are: a job of one lane publishes what it always did.
  LaneExchange(std::shared_ptr<Shared> shared, int lane)
      : shared_(std::move(shared)), prefix_(lane == 0 ? std::string() : absl::StrCat("lane", lane, ".")) {}

  int rank() const override { return shared_->base->rank(); }
  int size() const override { return shared_->base->size(); }
  const std::string& job_id() const override { return shared_->base->job_id(); }
  absl::Status Put(absl::string_view key, absl::string_view value) override {
    std::lock_guard<std::recursive_mutex> lock(shared_->mu);
    return shared_->base->Put(absl::StrCat(prefix_, key), value);
  }
  absl::Status Fence() override {
    std::lock_guard<std::recursive_mutex> lock(shared_->mu);
    return shared_->base->Fence();
  }
  absl::Status FenceWhile(absl::FunctionRef<int()> progress) override {
    std::lock_guard<std::recursive_mutex> lock(shared_->mu);
    return shared_->base->FenceWhile(progress);
  }
  absl::StatusOr<std::string> Get(absl::string_view key) override {
    std::lock_guard<std::recursive_mutex> lock(shared_->mu);
    return shared_->base->Get(absl::StrCat(prefix_, key));
  }
  absl::StatusOr<std::string> GetFrom(int from, absl::string_view key) override {
    std::lock_guard<std::recursive_mutex> lock(shared_->mu);
    return shared_->base->GetFrom(from, absl::StrCat(prefix_, key));
  }
  std::vector<int> HostRanks() const override { return shared_->base->HostRanks(); }

 private:
  std::shared_ptr<Shared> shared_;
  std::string prefix_;
};

}  // namespace cartage::agent

#endif  // CARTAGE_AGENT_LANE_EXCHANGE_H_
