#include "agent/pmix.h"

#include <pmix.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "agent/bootstrap_wire.h"
#include "base/check.h"

namespace cartage::agent {

struct PmixExchange::Proc {
  pmix_proc_t proc;
};

struct PmixExchange::FenceDone {
  std::atomic<bool> done{false};
  std::atomic<pmix_status_t> status{PMIX_SUCCESS};
};

namespace {

constexpr std::size_t kMaxValue = 32 * 1024;

absl::Status Failed(absl::string_view what, int rank, pmix_status_t rc) {
  const std::string text =
      absl::StrFormat("bootstrap PMIx %s (rank %d): %s (%d)", what, rank, PMIx_Error_string(rc), rc);
  if (rc == PMIX_ERR_NOT_FOUND) return absl::NotFoundError(text);
  if (rc == PMIX_ERR_TIMEOUT) return absl::DeadlineExceededError(text);
  if (rc == PMIX_ERR_UNREACH || rc == PMIX_ERR_LOST_CONNECTION) return absl::UnavailableError(text);
  return absl::InternalError(text);
}

// A value PMIx_Get handed back, released as PMIX_VALUE_RELEASE does.
struct ValueDeleter {
  void operator()(pmix_value_t* v) const {
    PMIx_Value_destruct(v);
    std::free(v);
  }
};
using Value = std::unique_ptr<pmix_value_t, ValueDeleter>;

// `optional`: look only at what this process holds; else ask the server,
// which answers from what it holds (PMIX_IMMEDIATE) rather than wait for
// the key to appear. Either way a key nobody put is kNotFound at once.
absl::StatusOr<Value> GetValue(const pmix_proc_t& from, const char* key, absl::string_view what, int rank,
                               bool optional = false) {
  pmix_info_t info;
  std::memset(&info, 0, sizeof(info));
  bool yes = true;
  const pmix_status_t loaded = PMIx_Info_load(&info, optional ? PMIX_OPTIONAL : PMIX_IMMEDIATE, &yes, PMIX_BOOL);
  if (loaded != PMIX_SUCCESS) return Failed(what, rank, loaded);
  pmix_value_t* v = nullptr;
  const pmix_status_t rc = PMIx_Get(&from, key, &info, 1, &v);
  PMIx_Value_destruct(&info.value);
  if (rc != PMIX_SUCCESS || v == nullptr) return Failed(what, rank, rc != PMIX_SUCCESS ? rc : PMIX_ERR_NOT_FOUND);
  return Value(v);
}

// Whole numbers come back as whichever integer type the server stored.
absl::StatusOr<uint64_t> Unsigned(const pmix_value_t& v, absl::string_view what, int rank) {
  switch (v.type) {
    case PMIX_UINT32: return v.data.uint32;
    case PMIX_UINT16: return v.data.uint16;
    case PMIX_UINT64: return v.data.uint64;
    case PMIX_SIZE: return v.data.size;
    case PMIX_INT: return v.data.integer >= 0 ? static_cast<uint64_t>(v.data.integer) : 0;
    default: break;
  }
  return absl::DataLossError(
      absl::StrFormat("bootstrap PMIx %s (rank %d): a value of type %d, not a number", what, rank, v.type));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PmixExchange>> PmixExchange::FromEnvironment() {
  // The values every rank put come with the fence (gds/hash), not through
  // the server's shared-memory store: under Slurm a get right after a
  // fence could read that store before the server had written the new
  // values into it, and miss them.
  ::setenv("PMIX_MCA_gds", "hash", /*overwrite=*/0);
  auto x = std::unique_ptr<PmixExchange>(new PmixExchange());
  x->me_ = std::make_unique<Proc>();
  std::memset(&x->me_->proc, 0, sizeof(x->me_->proc));
  const pmix_status_t rc = PMIx_Init(&x->me_->proc, nullptr, 0);
  if (rc != PMIX_SUCCESS) {
    x->me_.reset();  // nothing to finalize
    return Failed("init", -1, rc);
  }
  x->rank_ = static_cast<int>(x->me_->proc.rank);
  pmix_proc_t job;
  std::memset(&job, 0, sizeof(job));
  std::memcpy(job.nspace, x->me_->proc.nspace, sizeof(job.nspace));
  job.rank = PMIX_RANK_WILDCARD;
  CARTAGE_ASSIGN_OR_RETURN(Value size_v, GetValue(job, PMIX_JOB_SIZE, "job size", x->rank_));
  CARTAGE_ASSIGN_OR_RETURN(const uint64_t size, Unsigned(*size_v, "job size", x->rank_));
  if (size < 1 || size > (1u << 24) || x->rank_ < 0 || static_cast<uint64_t>(x->rank_) >= size) {
    return absl::DataLossError(
        absl::StrFormat("bootstrap PMIx: rank %d of a job of %d ranks", x->rank_, size));
  }
  x->size_ = static_cast<int>(size);
  // The ranks on this host, as the launcher placed them.
  CARTAGE_ASSIGN_OR_RETURN(Value peers_v, GetValue(job, PMIX_LOCAL_PEERS, "local peers", x->rank_));
  if (peers_v->type != PMIX_STRING || peers_v->data.string == nullptr) {
    return absl::DataLossError(absl::StrFormat("bootstrap PMIx local peers (rank %d): not a string", x->rank_));
  }
  for (absl::string_view r : absl::StrSplit(peers_v->data.string, ',', absl::SkipWhitespace())) {
    int peer = -1;
    if (!absl::SimpleAtoi(r, &peer) || peer < 0 || peer >= x->size_) {
      return absl::DataLossError(absl::StrFormat("bootstrap PMIx local peers (rank %d): malformed list '%s'",
                                                 x->rank_, peers_v->data.string));
    }
    x->host_ranks_.push_back(peer);
  }
  std::sort(x->host_ranks_.begin(), x->host_ranks_.end());
  x->host_ranks_.erase(std::unique(x->host_ranks_.begin(), x->host_ranks_.end()), x->host_ranks_.end());
  if (!std::binary_search(x->host_ranks_.begin(), x->host_ranks_.end(), x->rank_)) {
    return absl::DataLossError(absl::StrFormat(
        "bootstrap PMIx local peers (rank %d): '%s' leaves this rank out", x->rank_, peers_v->data.string));
  }
  std::string id = "pmix-";
  for (char c : absl::string_view(x->me_->proc.nspace)) {
    id.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) ? c : '-');
  }
  x->job_id_ = std::move(id);
  return x;
}

PmixExchange::~PmixExchange() {
  if (me_ != nullptr) (void)PMIx_Finalize(nullptr, 0);
}

absl::Status PmixExchange::Put(absl::string_view key, absl::string_view value) {
  if (!bootstrap::ValidKey(key) || key.size() >= PMIX_MAX_KEYLEN) {
    return absl::InvalidArgumentError(absl::StrFormat("bootstrap Put: invalid key '%s'", key));
  }
  if (value.size() > kMaxValue) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bootstrap Put '%s': value of %d bytes exceeds 32 KiB", key, value.size()));
  }
  pmix_byte_object_t bo;
  bo.bytes = const_cast<char*>(value.data());  // PMIx_Value_load copies it
  bo.size = value.size();
  pmix_value_t v;
  std::memset(&v, 0, sizeof(v));
  pmix_status_t rc = PMIx_Value_load(&v, &bo, PMIX_BYTE_OBJECT);
  if (rc == PMIX_SUCCESS) rc = PMIx_Put(PMIX_GLOBAL, std::string(key).c_str(), &v);
  PMIx_Value_destruct(&v);
  if (rc != PMIX_SUCCESS) return Failed(absl::StrCat("put '", key, "'"), rank_, rc);
  committed_ = false;
  return absl::OkStatus();
}

absl::Status PmixExchange::Fence() {
  CARTAGE_RETURN_IF_ERROR(Commit());
  pmix_info_t info;
  CARTAGE_RETURN_IF_ERROR(CollectInfo(info));
  const pmix_status_t rc = PMIx_Fence(nullptr, 0, &info, 1);
  return rc == PMIX_SUCCESS ? absl::OkStatus() : Failed("fence", rank_, rc);
}

absl::Status PmixExchange::Commit() {
  if (committed_) return absl::OkStatus();
  const pmix_status_t rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) return Failed("commit", rank_, rc);
  committed_ = true;
  return absl::OkStatus();
}

// A fence that hands every rank all the values put before it.
absl::Status PmixExchange::CollectInfo(::pmix_info& info) const {
  bool collect = true;
  std::memset(&info, 0, sizeof(info));
  const pmix_status_t rc = PMIx_Info_load(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  return rc == PMIX_SUCCESS ? absl::OkStatus() : Failed("fence", rank_, rc);
}

absl::Status PmixExchange::FenceWhile(absl::FunctionRef<int()> progress) {
  CARTAGE_RETURN_IF_ERROR(Commit());
  pmix_info_t info;
  CARTAGE_RETURN_IF_ERROR(CollectInfo(info));
  pmix_status_t rc = PMIX_SUCCESS;
  // The fence completes on libpmix's own thread; this one progresses
  // meanwhile, or naps (ranks that outnumber cores).
  auto done = std::make_unique<FenceDone>();
  rc = PMIx_Fence_nb(nullptr, 0, &info, 1, [](pmix_status_t status, void* cb) {
    auto* d = static_cast<FenceDone*>(cb);
    d->status.store(status, std::memory_order_relaxed);
    d->done.store(true, std::memory_order_release);
  }, done.get());
  if (rc == PMIX_OPERATION_SUCCEEDED) return absl::OkStatus();
  if (rc != PMIX_SUCCESS) return Failed("fence", rank_, rc);
  while (!done->done.load(std::memory_order_acquire)) {
    const int work = progress();
    if (work == kFenceCannotComplete) {
      abandoned_fences_.push_back(std::move(done));
      return absl::AbortedError(absl::StrFormat("bootstrap PMIx fence (rank %d): abandoned, a rank is gone", rank_));
    }
    if (work <= 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  rc = done->status.load(std::memory_order_relaxed);
  return rc == PMIX_SUCCESS ? absl::OkStatus() : Failed("fence", rank_, rc);
}

absl::StatusOr<std::string> PmixExchange::GetFrom(int from, absl::string_view key) {
  if (!bootstrap::ValidKey(key) || key.size() >= PMIX_MAX_KEYLEN) {
    return absl::InvalidArgumentError(absl::StrFormat("bootstrap Get: invalid key '%s'", key));
  }
  if (from < 0 || from >= size_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bootstrap Get '%s': rank %d is not in a job of %d", key, from, size_));
  }
  pmix_proc_t proc;
  std::memset(&proc, 0, sizeof(proc));
  std::memcpy(proc.nspace, me_->proc.nspace, sizeof(proc.nspace));
  proc.rank = static_cast<pmix_rank_t>(from);
  const std::string what = absl::StrCat("get '", key, "'");
  // What this process holds first; then the server: Slurm's may answer a
  // fence before this process holds every rank's values.
  absl::StatusOr<Value> v = GetValue(proc, std::string(key).c_str(), what, rank_, /*optional=*/true);
  if (absl::IsNotFound(v.status())) {
    v = GetValue(proc, std::string(key).c_str(), what, rank_, /*optional=*/false);
  }
  if (absl::IsNotFound(v.status())) {
    return absl::NotFoundError(absl::StrFormat("bootstrap Get: no value for '%s' from rank %d", key, from));
  }
  if (!v.ok()) return v.status();
  if ((*v)->type != PMIX_BYTE_OBJECT) {
    return absl::DataLossError(
        absl::StrFormat("bootstrap PMIx get '%s' (rank %d): a value of type %d", key, rank_, (*v)->type));
  }
  const pmix_byte_object_t& bo = (*v)->data.bo;
  return std::string(bo.bytes != nullptr ? bo.bytes : "", bo.size);
}

absl::StatusOr<std::string> PmixExchange::Get(absl::string_view key) {
  // PMIx keeps each rank's values apart: without the rank, ask each.
  for (int r = 0; r < size_; ++r) {
    absl::StatusOr<std::string> v = GetFrom(r, key);
    if (!absl::IsNotFound(v.status())) return v;
  }
  return absl::NotFoundError(absl::StrFormat("bootstrap Get: no value for '%s'", key));
}

}  // namespace cartage::agent
