// A rank program for the launcher tests: `bootstrap_helper MODE`.
// It opens whichever exchange its launcher offers (`cartage run`'s, PMIx,
// PMI-2, PMI-1) or CARTAGE_BOOTSTRAP names.
//   kv      every rank publishes a value with awkward bytes, fences, reads all
//   big     every rank publishes a 32 KiB value of every byte, fences, reads all
//   rounds  ten fence rounds, each reading the previous round's values
//   die     rank 1 aborts after the first fence; the others wait in a second
//   badkey  presents a wrong job key
//   cpus    prints the CPUs the rank may run on ("rank R cpus 0,1")
//   barrier rank 0 arrives late and leaves a mark; every rank sees it after the fence
//   hosts   prints the ranks the launcher placed on this rank's host, and its hostname
#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "agent/bootstrap.h"
#include "agent/bootstrap_wire.h"

using cartage::methods::Exchange;

namespace {
int Fail(const absl::Status& s) {
  std::fprintf(stderr, "helper: %s\n", std::string(s.message()).c_str());
  return 3;
}
std::string ValueOf(int rank) { return absl::StrCat("v ", rank, "\n\t\x01 end"); }
std::string BigValueOf(int rank) {
  std::string v(32 * 1024, '\0');
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<char>((i * 7 + static_cast<std::size_t>(rank)) & 0xff);
  return v;
}
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "badkey") setenv(cartage::agent::bootstrap::kEnvJobKey, "00ff", 1);
  auto boot = cartage::agent::OpenJobExchange();
  if (!boot.ok()) return Fail(boot.status());
  Exchange& b = **boot;
  // Every rank publishes value_of(rank) under prefix.rank, fences, and checks everyone's.
  auto exchange_all = [&b](const char* prefix, std::string (*value_of)(int)) -> absl::Status {
    if (auto s = b.Put(absl::StrCat(prefix, ".", b.rank()), value_of(b.rank())); !s.ok()) return s;
    if (auto s = b.Fence(); !s.ok()) return s;
    for (int r = 0; r < b.size(); ++r) {
      auto v = b.GetFrom(r, absl::StrCat(prefix, ".", r));
      if (!v.ok()) return v.status();
      if (*v != value_of(r)) return absl::DataLossError(absl::StrCat("wrong ", prefix, " value from ", r));
    }
    return absl::OkStatus();
  };
  if (mode == "kv") {
    if (auto s = exchange_all("value", &ValueOf); !s.ok()) return Fail(s);
    auto missing = b.GetFrom(b.size() - 1, "value.none");
    if (missing.status().code() != absl::StatusCode::kNotFound) return Fail(missing.status());
    std::printf("rank %d of %d: read %d values\n", b.rank(), b.size(), b.size());
  } else if (mode == "big") {
    if (auto s = exchange_all("big", &BigValueOf); !s.ok()) return Fail(s);
    std::printf("rank %d of %d: read %d values of 32 KiB\n", b.rank(), b.size(), b.size());
  } else if (mode == "rounds") {
    for (int round = 0; round < 10; ++round) {
      if (auto s = b.Put(absl::StrCat("r", round, ".", b.rank()), absl::StrCat(round * 100 + b.rank()));
          !s.ok()) {
        return Fail(s);
      }
      if (auto s = b.Fence(); !s.ok()) return Fail(s);
      const int peer = (b.rank() + 1) % b.size();
      auto v = b.GetFrom(peer, absl::StrCat("r", round, ".", peer));
      if (!v.ok()) return Fail(v.status());
      if (*v != absl::StrCat(round * 100 + peer)) {
        return Fail(absl::DataLossError(absl::StrCat("round ", round, ": rank ", peer, "'s value is '", *v, "'")));
      }
    }
    std::printf("rank %d: 10 rounds\n", b.rank());
  } else if (mode == "die") {
    if (auto s = b.Fence(); !s.ok()) return Fail(s);
    if (b.rank() == 1) std::abort();
    if (auto s = b.Fence(); !s.ok()) return Fail(s);  // never completes: rank 1 is gone
    std::printf("rank %d: second fence passed\n", b.rank());
  } else if (mode == "cpus") {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) != 0) return Fail(absl::InternalError("sched_getaffinity"));
    std::string list;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) absl::StrAppend(&list, list.empty() ? "" : ",", c);
    }
    std::printf("rank %d cpus %s\n", b.rank(), list.c_str());
  } else if (mode == "barrier") {
    // A fence that let a rank through before rank 0 came would miss the mark.
    const std::string mark = absl::StrCat("/tmp/cartage-barrier-", b.job_id());
    if (b.rank() == 0) {
      usleep(300 * 1000);
      if (FILE* f = std::fopen(mark.c_str(), "w"); f != nullptr) std::fclose(f);
    }
    if (auto s = b.Fence(); !s.ok()) return Fail(s);
    const bool seen = access(mark.c_str(), F_OK) == 0;
    if (auto s = b.Fence(); !s.ok()) return Fail(s);
    if (b.rank() == 0) unlink(mark.c_str());
    if (!seen) return Fail(absl::FailedPreconditionError("the fence returned before rank 0 reached it"));
    std::printf("rank %d: the fence waited for rank 0\n", b.rank());
  } else if (mode == "hosts") {
    std::string list;
    for (int r : b.HostRanks()) absl::StrAppend(&list, list.empty() ? "" : ",", r);
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    std::printf("rank %d of %d: host ranks %s on %s\n", b.rank(), b.size(), list.c_str(), name);
  } else {
    std::fprintf(stderr, "helper: unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  std::fflush(stdout);
  return 0;
}
