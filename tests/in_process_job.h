// The ranks of one job inside a test process: a shared key-value exchange
// with a fence (for real method instances driven against each other, or
// whole agents on threads: agent/testing.h), and a MethodHost that matches
// nothing (every arriving message becomes an unexpected CAR with a
// temporary buffer), or, as TagMatchingHost, the receives a test posts.
#ifndef CARTAGE_TESTS_IN_PROCESS_JOB_H_
#define CARTAGE_TESTS_IN_PROCESS_JOB_H_

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "car/car_pool.h"
#include "methods/host.h"

namespace cartage::methods {

// A job of `size` ranks inside this process: a shared map and a barrier.
struct SharedJob {
  int size = 2;
  std::mutex mu;
  std::condition_variable cv;
  absl::flat_hash_map<std::string, std::string> values;
  int arrived = 0;
  uint64_t generation = 0;
  std::string id = absl::StrCat("test", getpid(), "x", std::random_device()());
};

class InProcessExchange : public Exchange {
 public:
  InProcessExchange(SharedJob* job, int rank) : job_(job), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return job_->size; }
  const std::string& job_id() const override { return job_->id; }
  absl::Status Put(absl::string_view key, absl::string_view value) override {
    std::lock_guard<std::mutex> l(job_->mu);
    job_->values[key] = std::string(value);
    return absl::OkStatus();
  }
  absl::Status Fence() override {
    return FenceWhile([] { return 0; });
  }
  absl::Status FenceWhile(absl::FunctionRef<int()> progress) override {
    std::unique_lock<std::mutex> l(job_->mu);
    const uint64_t gen = job_->generation;
    if (++job_->arrived == job_->size) {
      job_->arrived = 0;
      ++job_->generation;
      job_->cv.notify_all();
      return absl::OkStatus();
    }
    while (job_->generation == gen) {
      l.unlock();
      const int work = progress();
      l.lock();
      if (work == 0) job_->cv.wait_for(l, std::chrono::milliseconds(1));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Get(absl::string_view key) override {
    std::lock_guard<std::mutex> l(job_->mu);
    auto it = job_->values.find(key);
    if (it == job_->values.end()) return absl::NotFoundError(key);
    return it->second;
  }

 private:
  SharedJob* job_;
  int rank_;
};

// Matches nothing; unexpected messages get a CAR with a temporary buffer.
class TestHost : public MethodHost {
 public:
  car::Car* MatchIncoming(car::Envelope) override { return nullptr; }
  absl::StatusOr<car::Car*> NewUnexpected(const car::Envelope& e, uint64_t bytes) override {
    buffers_.emplace_back(bytes);
    car::CarSpec s;
    s.kind = car::CarKind::kUnexpected;
    s.flags = car::CarFlag::kRecvData;
    s.envelope = e;
    s.pack_buf = bytes > 0 ? buffers_.back().data() : nullptr;
    s.pack_size = bytes;
    absl::StatusOr<car::Car*> c = pool.Create(s);
    if (c.ok()) arrived.push_back(*c);
    return c;
  }
  void InstallAgentOps(car::Vc&) override {}
  car::CarPool pool{{.method_private_bytes = 128}};
  std::vector<car::Car*> arrived;  // every unexpected CAR, in arrival order
  // The temporary buffer of the i-th arrival.
  const std::vector<std::byte>& buffer(std::size_t i) const { return buffers_[i]; }

 private:
  std::vector<std::vector<std::byte>> buffers_;
};

// A TestHost that matches an arriving envelope with the first receive a
// test posted to it (`posted`) with the same tag.
class TagMatchingHost : public TestHost {
 public:
  car::Car* MatchIncoming(car::Envelope e) override {
    for (auto it = posted.begin(); it != posted.end(); ++it) {
      if ((*it)->envelope().tag != e.tag) continue;
      car::Car* c = *it;
      posted.erase(it);
      return c;
    }
    return nullptr;
  }
  std::vector<car::Car*> posted;
};

}  // namespace cartage::methods

#endif  // CARTAGE_TESTS_IN_PROCESS_JOB_H_
