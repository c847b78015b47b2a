#include "agent/pmi1.h"

#include <fcntl.h>

#include <algorithm>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "agent/bootstrap_wire.h"
#include "base/check.h"

namespace cartage::agent {

namespace {

constexpr std::size_t kMaxLine = 64 * 1024;
constexpr std::size_t kMaxValue = 32 * 1024;

bool Plain(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':' ||
         c == ';' || c == ',' || c == '/' || c == '+' || c == '@';
}

// How many bytes of an encoded value `n` parts hold: the first carries "n:".
std::size_t Capacity(std::size_t n, std::size_t part) {
  const std::size_t head = absl::StrCat(n, ":").size();
  return part > head ? (part - head) + (n - 1) * part : 0;
}

}  // namespace

bool Pmi1Exchange::Offered() { return std::getenv("PMI_FD") != nullptr; }

Pmi1Exchange::Pmi1Exchange(int rank, int size, int fd)
    : rank_(rank), size_(size), line_(fd, "the PMI-1 launcher", kMaxLine) {}

Pmi1Exchange::~Pmi1Exchange() {
  // The launcher counts a rank that leaves without it as one that failed.
  if (line_.Write("cmd=finalize").ok()) (void)line_.Read("PMI-1 finalize", rank_);
}

absl::StatusOr<std::unique_ptr<Pmi1Exchange>> Pmi1Exchange::FromEnvironment() {
  const char* fd_s = std::getenv("PMI_FD");
  const char* rank_s = std::getenv("PMI_RANK");
  const char* size_s = std::getenv("PMI_SIZE");
  int fd = -1, rank = -1, size = -1;
  if (fd_s == nullptr || rank_s == nullptr || size_s == nullptr || !absl::SimpleAtoi(fd_s, &fd) ||
      !absl::SimpleAtoi(rank_s, &rank) || !absl::SimpleAtoi(size_s, &size) || fd < 0 || size < 1 || rank < 0 ||
      rank >= size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bootstrap: incomplete PMI-1 environment (PMI_FD=%s PMI_RANK=%s PMI_SIZE=%s)", fd_s ? fd_s : "unset",
        rank_s ? rank_s : "unset", size_s ? size_s : "unset"));
  }
  if (::fcntl(fd, F_GETFD) < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("bootstrap: PMI_FD=%d is not an open descriptor", fd));
  }
  (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);  // programs this rank starts are not ranks
  auto x = std::unique_ptr<Pmi1Exchange>(new Pmi1Exchange(rank, size, fd));
  CARTAGE_RETURN_IF_ERROR(x->Call("cmd=init pmi_version=1 pmi_subversion=1", "response_to_init").status());
  CARTAGE_ASSIGN_OR_RETURN(auto maxes, x->Call("cmd=get_maxes", "maxes"));
  std::size_t keylen = 0, vallen = 0;
  if (absl::SimpleAtoi(maxes["keylen_max"], &keylen) && keylen >= 16) x->keylen_max_ = keylen;
  if (absl::SimpleAtoi(maxes["vallen_max"], &vallen) && vallen >= 64) x->vallen_max_ = vallen;
  CARTAGE_ASSIGN_OR_RETURN(auto kvs, x->Call("cmd=get_my_kvsname", "my_kvsname"));
  x->kvsname_ = kvs["kvsname"];
  if (x->kvsname_.empty()) return absl::DataLossError("bootstrap: the PMI-1 launcher named no kvsname");
  // The job's name in shared-memory names and logs: what the launcher calls it.
  std::string id = "pmi-";
  for (char c : x->kvsname_) id.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) ? c : '-');
  x->job_id_ = std::move(id);
  return x;
}

absl::flat_hash_map<std::string, std::string> Pmi1Exchange::Words(absl::string_view line) {
  absl::flat_hash_map<std::string, std::string> words;
  for (absl::string_view w : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    const std::size_t eq = w.find('=');
    if (eq == absl::string_view::npos) continue;
    words[std::string(w.substr(0, eq))] = std::string(w.substr(eq + 1));
  }
  return words;
}

std::string Pmi1Exchange::Encode(absl::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (Plain(c)) {
      out.push_back(c);
    } else {
      absl::StrAppendFormat(&out, "%%%02X", static_cast<unsigned char>(c));
    }
  }
  return out;
}

absl::StatusOr<std::string> Pmi1Exchange::Decode(absl::string_view word) {
  std::string out;
  out.reserve(word.size());
  for (std::size_t i = 0; i < word.size(); ++i) {
    if (word[i] != '%') {
      out.push_back(word[i]);
      continue;
    }
    int v = 0;
    if (i + 2 >= word.size() || !absl::SimpleHexAtoi(word.substr(i + 1, 2), &v) ||
        !absl::ascii_isxdigit(static_cast<unsigned char>(word[i + 1])) ||
        !absl::ascii_isxdigit(static_cast<unsigned char>(word[i + 2]))) {
      return absl::DataLossError("bootstrap: a malformed value from the PMI-1 launcher");
    }
    out.push_back(static_cast<char>(v));
    i += 2;
  }
  return out;
}

absl::StatusOr<absl::flat_hash_map<std::string, std::string>> Pmi1Exchange::Call(absl::string_view request,
                                                                                  absl::string_view reply_cmd) {
  const absl::string_view what = request.substr(0, request.find(' '));
  CARTAGE_RETURN_IF_ERROR(line_.Write(request));
  CARTAGE_ASSIGN_OR_RETURN(const std::string reply, line_.Read(absl::StrCat("PMI-1 ", what), rank_));
  auto words = Words(reply);
  if (words["cmd"] != reply_cmd) {
    return absl::DataLossError(absl::StrFormat("bootstrap PMI-1 %s (rank %d): unexpected reply '%s'", what, rank_,
                                               reply.substr(0, 120)));
  }
  if (reply_cmd != "get_result" && words.contains("rc") && words["rc"] != "0") {
    return absl::FailedPreconditionError(absl::StrFormat("bootstrap PMI-1 %s (rank %d): the launcher refused: %s",
                                                         what, rank_, reply.substr(0, 200)));
  }
  return words;
}

absl::Status Pmi1Exchange::PutWord(absl::string_view key, absl::string_view word) {
  return Call(absl::StrCat("cmd=put kvsname=", kvsname_, " key=", key, " value=", word), "put_result").status();
}

absl::StatusOr<std::string> Pmi1Exchange::GetWord(absl::string_view key) {
  CARTAGE_ASSIGN_OR_RETURN(auto words, Call(absl::StrCat("cmd=get kvsname=", kvsname_, " key=", key), "get_result"));
  if (words["rc"] != "0" || !words.contains("value")) {
    return absl::NotFoundError(absl::StrFormat("bootstrap Get: no value for '%s'", key));
  }
  return words["value"];
}

absl::Status Pmi1Exchange::Put(absl::string_view key, absl::string_view value) {
  if (!bootstrap::ValidKey(key) || key.size() + 8 > keylen_max_) {
    return absl::InvalidArgumentError(absl::StrFormat("bootstrap Put: invalid key '%s'", key));
  }
  if (value.size() > kMaxValue) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bootstrap Put '%s': value of %d bytes exceeds 32 KiB", key, value.size()));
  }
  const std::string word = Encode(value);
  const std::size_t part = vallen_max_ - 1;  // some servers count a terminating NUL
  std::size_t n = 1;
  while (Capacity(n, part) < word.size()) ++n;
  const std::string head = absl::StrCat(n, ":");
  const std::size_t first = std::min(word.size(), part - head.size());
  CARTAGE_RETURN_IF_ERROR(PutWord(key, absl::StrCat(head, absl::string_view(word).substr(0, first))));
  for (std::size_t i = 1, at = first; i < n; ++i, at += part) {
    CARTAGE_RETURN_IF_ERROR(PutWord(absl::StrCat(key, "#", i), absl::string_view(word).substr(at, part)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> Pmi1Exchange::Get(absl::string_view key) {
  if (!bootstrap::ValidKey(key)) {
    return absl::InvalidArgumentError(absl::StrFormat("bootstrap Get: invalid key '%s'", key));
  }
  CARTAGE_ASSIGN_OR_RETURN(std::string word, GetWord(key));
  const std::size_t colon = word.find(':');
  std::size_t n = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(word.substr(0, colon), &n) || n < 1 ||
      n > kMaxValue) {
    return absl::DataLossError(absl::StrFormat("bootstrap Get '%s': malformed value from the PMI-1 launcher", key));
  }
  word.erase(0, colon + 1);
  for (std::size_t i = 1; i < n; ++i) {
    CARTAGE_ASSIGN_OR_RETURN(std::string more, GetWord(absl::StrCat(key, "#", i)));
    word += more;
  }
  return Decode(word);
}

absl::Status Pmi1Exchange::Fence() {
  return FenceWhile([] { return -1; });
}

absl::Status Pmi1Exchange::FenceWhile(absl::FunctionRef<int()> progress) {
  CARTAGE_RETURN_IF_ERROR(line_.Write("cmd=barrier_in"));
  CARTAGE_ASSIGN_OR_RETURN(const std::string reply, line_.Read("PMI-1 barrier", rank_, progress));
  if (Words(reply)["cmd"] != "barrier_out") {
    return absl::DataLossError(
        absl::StrFormat("bootstrap PMI-1 barrier (rank %d): unexpected reply '%s'", rank_, reply.substr(0, 120)));
  }
  return absl::OkStatus();
}

}  // namespace cartage::agent
