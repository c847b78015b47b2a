#include "agent/pmi.h"

#include <fcntl.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
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
constexpr std::size_t kMaxPmi1Line = 1024;
// A key no rank puts (bootstrap::ValidKey refuses '!'): PMI-2's barrier.
constexpr char kBarrierKey[] = "cartage!barrier";

bool Plain(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == ':' ||
         c == ',' || c == '/' || c == '+' || c == '@';
}

// How many bytes of an encoded value `n` parts hold: the first carries "n:".
std::size_t Capacity(std::size_t n, std::size_t part) {
  const std::size_t head = absl::StrCat(n, ":").size();
  return part > head ? (part - head) + (n - 1) * part : 0;
}

}  // namespace

bool PmiExchange::Offered() { return std::getenv("PMI_FD") != nullptr; }

PmiExchange::PmiExchange(int version, int rank, int size, int fd)
    : version_(version), rank_(rank), size_(size), line_(fd, absl::StrCat("the PMI-", version, " launcher"), kMaxLine) {}

PmiExchange::~PmiExchange() {
  // The launcher counts a rank that leaves without it as one that failed;
  // after an abandoned fence its reply could still come first, so none.
  if (abandoned_) return;
  if (version_ == 1) {
    if (line_.Write("cmd=finalize").ok()) (void)line_.Read("PMI-1 finalize", rank_);
  } else {
    (void)Call2("cmd=finalize;", "finalize-response", [] { return -1; });
  }
}

absl::StatusOr<std::unique_ptr<PmiExchange>> PmiExchange::FromEnvironment(int version) {
  CARTAGE_CHECK(version == 1 || version == 2);
  const char* fd_s = std::getenv("PMI_FD");
  const char* rank_s = std::getenv("PMI_RANK");
  const char* size_s = std::getenv("PMI_SIZE");
  int fd = -1, rank = -1, size = 1;
  // PMI-2 learns the size from fullinit; Slurm's pmi2 gives no PMI_SIZE.
  if (fd_s == nullptr || rank_s == nullptr || (version == 1 && size_s == nullptr) ||
      !absl::SimpleAtoi(fd_s, &fd) || !absl::SimpleAtoi(rank_s, &rank) ||
      (size_s != nullptr && !absl::SimpleAtoi(size_s, &size)) || fd < 0 || size < 1 || rank < 0 ||
      (size_s != nullptr && rank >= size)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "bootstrap: incomplete PMI-%d environment (PMI_FD=%s PMI_RANK=%s PMI_SIZE=%s)", version,
        fd_s ? fd_s : "unset", rank_s ? rank_s : "unset", size_s ? size_s : "unset"));
  }
  if (::fcntl(fd, F_GETFD) < 0) {
    return absl::InvalidArgumentError(absl::StrFormat("bootstrap: PMI_FD=%d is not an open descriptor", fd));
  }
  (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);  // programs this rank starts are not ranks
  auto x = std::unique_ptr<PmiExchange>(new PmiExchange(version, rank, size, fd));
  CARTAGE_RETURN_IF_ERROR(x->Init());
  return x;
}

absl::Status PmiExchange::Init() {
  const std::string what = absl::StrCat("PMI-", version_, " init");
  if (version_ == 1) {
    CARTAGE_RETURN_IF_ERROR(Call("cmd=init pmi_version=1 pmi_subversion=1", "response_to_init").status());
    CARTAGE_ASSIGN_OR_RETURN(Words maxes, Call("cmd=get_maxes", "maxes"));
    std::size_t keylen = 0, vallen = 0;
    if (absl::SimpleAtoi(maxes["keylen_max"], &keylen) && keylen >= 16) keylen_max_ = keylen;
    if (absl::SimpleAtoi(maxes["vallen_max"], &vallen) && vallen >= 64) vallen_max_ = vallen;
    CARTAGE_ASSIGN_OR_RETURN(Words kvs, Call("cmd=get_my_kvsname", "my_kvsname"));
    kvsname_ = kvs["kvsname"];
  } else {
    // The version is agreed in a PMI-1 line; PMI-2's framing follows.
    CARTAGE_ASSIGN_OR_RETURN(Words init, Call("cmd=init pmi_version=2 pmi_subversion=0", "response_to_init"));
    if (init["pmi_version"] != "2") {
      return absl::FailedPreconditionError(absl::StrFormat(
          "bootstrap %s (rank %d): the launcher offers PMI version %s, not 2", what, rank_, init["pmi_version"]));
    }
    // Slurm wants the job named as it named it to the rank (PMI_JOBID).
    const char* jobid = std::getenv("PMI_JOBID");
    CARTAGE_ASSIGN_OR_RETURN(
        Words full, Call2(absl::StrCat("cmd=fullinit;", jobid != nullptr ? absl::StrCat("pmijobid=", jobid, ";") : "",
                                       "pmirank=", rank_, ";threaded=FALSE;"),
                          "fullinit-response", [] { return -1; }));
    int rank = -1, size = -1;
    if (!absl::SimpleAtoi(full["rank"], &rank) || !absl::SimpleAtoi(full["size"], &size) || size < 1 ||
        rank != rank_ || (std::getenv("PMI_SIZE") != nullptr && size != size_)) {
      return absl::DataLossError(absl::StrFormat("bootstrap %s (rank %d): the launcher says rank %s of %s", what,
                                                 rank_, full["rank"], full["size"]));
    }
    size_ = size;
    CARTAGE_ASSIGN_OR_RETURN(Words id, Call2("cmd=job-getid;", "job-getid-response", [] { return -1; }));
    kvsname_ = id["jobid"];
    keylen_max_ = 64;     // PMI2_MAX_KEYLEN
    vallen_max_ = 1024;   // PMI2_MAX_VALLEN
  }
  if (kvsname_.empty()) {
    return absl::DataLossError(absl::StrFormat("bootstrap %s: the launcher named no job", what));
  }
  // The job's name in shared-memory names and logs: what the launcher calls it.
  std::string id = "pmi-";
  for (char c : kvsname_) id.push_back(absl::ascii_isalnum(static_cast<unsigned char>(c)) ? c : '-');
  job_id_ = std::move(id);
  // Which ranks share this host: the launcher's word, or this rank alone
  // (every peer by the network) where it gives none.
  absl::StatusOr<std::string> mapping = GetWord("PMI_process_mapping", /*job_attr=*/true);
  if (absl::IsNotFound(mapping.status()) || (mapping.ok() && mapping->empty())) {
    host_ranks_ = {rank_};
    return absl::OkStatus();
  }
  if (!mapping.ok()) return mapping.status();
  CARTAGE_ASSIGN_OR_RETURN(host_ranks_, RanksOnHostOf(*mapping, rank_, size_));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> PmiExchange::NodeOfEachRank(absl::string_view mapping, int size) {
  const auto bad = [&] {
    return absl::DataLossError(absl::StrFormat("bootstrap: malformed PMI_process_mapping '%s'", mapping));
  };
  // "(vector,(0,2,4),(2,1,3))": blocks of (first node, nodes, ranks each).
  absl::string_view m = absl::StripAsciiWhitespace(mapping);
  if (!absl::ConsumePrefix(&m, "(vector,") || !absl::ConsumeSuffix(&m, ")")) return bad();
  struct Block {
    int node, nodes, ppn;
  };
  std::vector<Block> blocks;
  while (!m.empty()) {
    if (!absl::ConsumePrefix(&m, "(")) return bad();
    const std::size_t close = m.find(')');
    if (close == absl::string_view::npos) return bad();
    std::vector<absl::string_view> f = absl::StrSplit(m.substr(0, close), ',');
    Block b{};
    if (f.size() != 3 || !absl::SimpleAtoi(f[0], &b.node) || !absl::SimpleAtoi(f[1], &b.nodes) ||
        !absl::SimpleAtoi(f[2], &b.ppn) || b.node < 0 || b.nodes < 1 || b.ppn < 1 ||
        b.node > std::numeric_limits<int>::max() - b.nodes) {
      // A mapping may name more hosts and slots than the job fills.
      return bad();
    }
    blocks.push_back(b);
    m.remove_prefix(close + 1);
    absl::ConsumePrefix(&m, ",");
  }
  if (blocks.empty()) return bad();
  std::vector<int> node_of(static_cast<std::size_t>(size), -1);
  int next = 0;
  while (next < size) {  // a mapping shorter than the job repeats (ranks placed round-robin)
    for (const Block& b : blocks) {
      for (int n = 0; n < b.nodes && next < size; ++n) {
        for (int k = 0; k < b.ppn && next < size; ++k) node_of[static_cast<std::size_t>(next++)] = b.node + n;
      }
    }
  }
  return node_of;
}

absl::StatusOr<std::vector<int>> PmiExchange::RanksOnHostOf(absl::string_view mapping, int rank, int size) {
  CARTAGE_ASSIGN_OR_RETURN(const std::vector<int> node_of, NodeOfEachRank(mapping, size));
  std::vector<int> same;
  for (int r = 0; r < size; ++r) {
    if (node_of[static_cast<std::size_t>(r)] == node_of[static_cast<std::size_t>(rank)]) same.push_back(r);
  }
  return same;
}

PmiExchange::Words PmiExchange::Pmi1Words(absl::string_view line) {
  Words words;
  for (absl::string_view w : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
    const std::size_t eq = w.find('=');
    if (eq == absl::string_view::npos) continue;
    words[std::string(w.substr(0, eq))] = std::string(w.substr(eq + 1));
  }
  return words;
}

PmiExchange::Words PmiExchange::Pmi2Words(absl::string_view body) {
  Words words;
  std::string pair;
  const auto take = [&] {
    const std::size_t eq = pair.find('=');
    if (eq != std::string::npos) words[pair.substr(0, eq)] = pair.substr(eq + 1);
    pair.clear();
  };
  for (std::size_t i = 0; i < body.size(); ++i) {
    if (body[i] != ';') {
      pair.push_back(body[i]);
    } else if (i + 1 < body.size() && body[i + 1] == ';') {
      pair.push_back(';');  // ";;" is a ';' inside a value
      ++i;
    } else {
      take();
    }
  }
  take();
  return words;
}

std::string PmiExchange::Encode(absl::string_view value) {
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

absl::StatusOr<std::string> PmiExchange::Decode(absl::string_view word) {
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
      return absl::DataLossError("bootstrap: a malformed value from the PMI launcher");
    }
    out.push_back(static_cast<char>(v));
    i += 2;
  }
  return out;
}

absl::StatusOr<PmiExchange::Words> PmiExchange::Call(absl::string_view request, absl::string_view reply_cmd,
                                                     bool check_rc) {
  const absl::string_view what = request.substr(0, request.find(' '));
  CARTAGE_RETURN_IF_ERROR(line_.Write(request));
  CARTAGE_ASSIGN_OR_RETURN(const std::string reply, line_.Read(absl::StrCat("PMI-1 ", what), rank_));
  return Checked(Pmi1Words(reply), reply, absl::StrCat("PMI-1 ", what), reply_cmd, check_rc);
}

absl::StatusOr<PmiExchange::Words> PmiExchange::Checked(Words words, absl::string_view reply, absl::string_view label,
                                                        absl::string_view reply_cmd, bool check_rc) const {
  if (words["cmd"] != reply_cmd) {
    return absl::DataLossError(absl::StrFormat("bootstrap %s (rank %d): unexpected reply '%s'", label, rank_,
                                               reply.substr(0, 120)));
  }
  if (check_rc && words.contains("rc") && words["rc"] != "0") {
    return absl::FailedPreconditionError(absl::StrFormat("bootstrap %s (rank %d): the launcher refused: %s", label,
                                                         rank_, reply.substr(0, 200)));
  }
  return words;
}

absl::StatusOr<PmiExchange::Words> PmiExchange::Call2(absl::string_view request, absl::string_view reply_cmd,
                                                      absl::FunctionRef<int()> progress, bool check_rc) {
  const absl::string_view what = request.substr(0, request.find(';'));
  const std::string label = absl::StrCat("PMI-2 ", what);
  CARTAGE_RETURN_IF_ERROR(line_.WriteBytes(absl::StrFormat("%-6d%s", request.size(), request)));
  CARTAGE_ASSIGN_OR_RETURN(const std::string head, line_.ReadBytes(6, label, rank_, progress));
  std::size_t n = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(head), &n)) {
    return absl::DataLossError(absl::StrFormat("bootstrap %s (rank %d): a reply without its length ('%s')", label,
                                               rank_, absl::CHexEscape(head)));
  }
  CARTAGE_ASSIGN_OR_RETURN(const std::string reply, line_.ReadBytes(n, label, rank_, progress));
  return Checked(Pmi2Words(reply), reply, label, reply_cmd, check_rc);
}

absl::Status PmiExchange::PutWord(absl::string_view key, absl::string_view word) {
  if (version_ == 2) {
    return Call2(absl::StrCat("cmd=kvs-put;key=", key, ";value=", word, ";"), "kvs-put-response", [] {
             return -1;
           }).status();
  }
  return Call(absl::StrCat("cmd=put kvsname=", kvsname_, " key=", key, " value=", word), "put_result").status();
}

absl::StatusOr<std::string> PmiExchange::GetWord(absl::string_view key, bool job_attr) {
  Words words;
  if (version_ == 2) {
    const std::string request = job_attr ? absl::StrCat("cmd=info-getjobattr;key=", key, ";")
                                         : absl::StrCat("cmd=kvs-get;jobid=", kvsname_, ";srcid=-1;key=", key, ";");
    CARTAGE_ASSIGN_OR_RETURN(words, Call2(request, job_attr ? "info-getjobattr-response" : "kvs-get-response",
                                          [] { return -1; }, /*check_rc=*/false));
    if (words["rc"] != "0" || words["found"] != "TRUE" || !words.contains("value")) {
      return absl::NotFoundError(absl::StrFormat("bootstrap Get: no value for '%s'", key));
    }
    return words["value"];
  }
  CARTAGE_ASSIGN_OR_RETURN(words, Call(absl::StrCat("cmd=get kvsname=", kvsname_, " key=", key), "get_result",
                                       /*check_rc=*/false));
  if (words["rc"] != "0" || !words.contains("value")) {
    return absl::NotFoundError(absl::StrFormat("bootstrap Get: no value for '%s'", key));
  }
  return words["value"];
}

absl::Status PmiExchange::Put(absl::string_view key, absl::string_view value) {
  if (!bootstrap::ValidKey(key) || key.size() + 8 > keylen_max_) {
    return absl::InvalidArgumentError(absl::StrFormat("bootstrap Put: invalid key '%s'", key));
  }
  if (value.size() > kMaxValue) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bootstrap Put '%s': value of %d bytes exceeds 32 KiB", key, value.size()));
  }
  const std::string word = Encode(value);
  std::size_t part = vallen_max_ - 1;  // some servers count a terminating NUL
  if (version_ == 1) {
    // A PMI-1 line is at most 1024 bytes (Slurm reads no more), whatever
    // vallen_max says: the request's own words, the longest part key, newline.
    const std::size_t words = absl::StrCat("cmd=put kvsname=", kvsname_, " key=", key, "#99999 value=\n").size();
    part = std::min(part, kMaxPmi1Line > words + 16 ? kMaxPmi1Line - words : std::size_t{16});
  }
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

absl::StatusOr<std::string> PmiExchange::Get(absl::string_view key) {
  if (!bootstrap::ValidKey(key)) {
    return absl::InvalidArgumentError(absl::StrFormat("bootstrap Get: invalid key '%s'", key));
  }
  CARTAGE_ASSIGN_OR_RETURN(std::string word, GetWord(key));
  const std::size_t colon = word.find(':');
  std::size_t n = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(word.substr(0, colon), &n) || n < 1 ||
      n > kMaxValue) {
    return absl::DataLossError(
        absl::StrFormat("bootstrap Get '%s': malformed value from the PMI-%d launcher", key, version_));
  }
  word.erase(0, colon + 1);
  for (std::size_t i = 1; i < n; ++i) {
    CARTAGE_ASSIGN_OR_RETURN(std::string more, GetWord(absl::StrCat(key, "#", i)));
    word += more;
  }
  return Decode(word);
}

absl::Status PmiExchange::Fence() {
  return FenceWhile([] { return -1; });
}

absl::Status PmiExchange::FenceWhile(absl::FunctionRef<int()> progress) {
  absl::Status s = FenceOnce(progress);
  if (absl::IsAborted(s)) abandoned_ = true;
  return s;
}

absl::Status PmiExchange::FenceOnce(absl::FunctionRef<int()> progress) {
  if (version_ == 2) {
    CARTAGE_RETURN_IF_ERROR(Call2("cmd=kvs-fence;", "kvs-fence-response", progress).status());
    // Hydra answers kvs-fence at once and holds back instead a get of a key
    // nobody put until every rank has fenced: such a get makes the fence a
    // barrier there (Slurm's fence is one already; the get costs it a trip).
    return Call2(absl::StrCat("cmd=kvs-get;jobid=", kvsname_, ";srcid=-1;key=", kBarrierKey, ";"),
                 "kvs-get-response", progress, /*check_rc=*/false)
        .status();
  }
  CARTAGE_RETURN_IF_ERROR(line_.Write("cmd=barrier_in"));
  CARTAGE_ASSIGN_OR_RETURN(const std::string reply, line_.Read("PMI-1 barrier", rank_, progress));
  if (Pmi1Words(reply)["cmd"] != "barrier_out") {
    return absl::DataLossError(
        absl::StrFormat("bootstrap PMI-1 barrier (rank %d): unexpected reply '%s'", rank_, reply.substr(0, 120)));
  }
  return absl::OkStatus();
}

}  // namespace cartage::agent
