// The ofi method's provider: the one libfabric offers first after the
// include/exclude lists, and opening and closing its endpoint (fabric,
// domain, completion queue, address vector, the exchange of endpoint names).
// ofi_options.cc has the parameters and what they make of the provider.
#include "methods/ofi/ofi_method.h"

#include <dlfcn.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <cstdlib>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/check.h"
#include "methods/common/host_keys.h"

namespace cartage::methods::ofi {

namespace {

constexpr uint32_t kFiVersion = FI_VERSION(1, 9);
constexpr std::size_t kCqSize = 16384;
// Control messages from any rank the provider can take at once without
// keeping one as unexpected (each is reposted as soon as it completes).
constexpr int kControlReceives = 8;

// Debian's libfabric links libpsm_infinipath (and through it
// libinfinipath) and libpsm2, which install backtrace handlers for the fatal
// signals (and SIGTERM, SIGINT) at load and at provider start-up: a crashing
// rank then prints a backtrace, drops a *.btr file in the working directory
// and exits 1. A rank must die by its signal, so that its launcher names it.
// Their documented switches keep them from installing the handlers (set
// here, before a provider starts, where the launcher has not set them), and
// whatever handler one of them installed anyway goes back to the default;
// every other handler (ASan's, the program's own) stays.
constexpr const char* kBacktraceLibraries[] = {"libpsm", "libinfinipath", "libhfi"};

void RestoreFatalSignals() {
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTERM, SIGINT}) {
    struct sigaction sa {};
    if (::sigaction(sig, nullptr, &sa) != 0) continue;
    void* handler = (sa.sa_flags & SA_SIGINFO) != 0 ? reinterpret_cast<void*>(sa.sa_sigaction)
                                                   : reinterpret_cast<void*>(sa.sa_handler);
    Dl_info where{};
    if (handler == nullptr || ::dladdr(handler, &where) == 0 || where.dli_fname == nullptr) continue;
    const char* base = std::strrchr(where.dli_fname, '/');
    base = base != nullptr ? base + 1 : where.dli_fname;
    for (const char* lib : kBacktraceLibraries) {
      if (std::strncmp(base, lib, std::strlen(lib)) == 0) ::signal(sig, SIG_DFL);
    }
  }
}
// Runs once libfabric and its libraries are loaded, before main.
[[gnu::constructor]] void RestoreFatalSignalsAtLoad() {
  ::setenv("IPATH_NO_BACKTRACE", "1", /*overwrite=*/0);
  ::setenv("HFI_NO_BACKTRACE", "1", /*overwrite=*/0);
  RestoreFatalSignals();
}

}  // namespace

std::string FiError(ssize_t rc) { return fi_strerror(static_cast<int>(-rc)); }

// ---- Provider choice --------------------------------------------------------------

void FiInfoDeleter::operator()(fi_info* info) const { fi_freeinfo(info); }

bool ProviderNamed(const std::string& name, const std::vector<std::string>& list) {
  for (const std::string& want : list) {
    if (want == name) return true;
    for (absl::string_view part : absl::StrSplit(name, ';')) {
      if (part == want) return true;
    }
  }
  return false;
}

namespace {

// Tagged, reliable, ordered (MPI's non-overtaking rule), one thread per
// domain; the address vector as a table so that fi_addr_t is the rank.
FiInfoPtr Hints(bool directed, bool msg, bool rma, bool saw = false) {
  FiInfoPtr hints(fi_allocinfo());
  // FI_MSG carries the method's control messages, apart from the tagged
  // matching (a wildcard receive posted there would slow every match).
  // FI_RMA: windows' puts and gets as the provider's writes and reads.
  hints->caps = FI_TAGGED | FI_SEND | FI_RECV | (directed ? FI_DIRECTED_RECV : 0) | (msg ? FI_MSG : 0) |
                (rma ? FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE : 0);
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->domain_attr->av_type = FI_AV_TABLE;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
  // FI_ORDER_SAW: a message after a write finds the write placed (an
  // unlock then need not wait for the write's completion first).
  hints->tx_attr->msg_order = FI_ORDER_SAS | (saw ? FI_ORDER_SAW : 0);
  hints->rx_attr->msg_order = FI_ORDER_SAS | (saw ? FI_ORDER_SAW : 0);
  return hints;
}

}  // namespace

namespace {

std::string Name(const char* s) { return s != nullptr ? s : ""; }

// The same provider, fabric and domain as `i` in `list`, or null.
fi_info* Same(fi_info* list, const fi_info* i) {
  for (fi_info* j = list; j != nullptr; j = j->next) {
    if (Name(j->fabric_attr->prov_name) == Name(i->fabric_attr->prov_name) &&
        Name(j->fabric_attr->name) == Name(i->fabric_attr->name) &&
        Name(j->domain_attr->name) == Name(i->domain_attr->name)) {
      return j;
    }
  }
  return nullptr;
}

}  // namespace

absl::StatusOr<ProviderChoice> ChooseProvider(const OfiOptions& options, FiInfoPtr* out) {
  std::vector<std::string> seen;
  // First with FI_DIRECTED_RECV (ofi_tag_full needs it), then without; each
  // first with FI_MSG (the control messages), then without.
  for (const auto& [directed, msg] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true},
                                      std::pair{false, false}}) {
    FiInfoPtr hints = Hints(directed, msg, /*rma=*/false);
    fi_info* list = nullptr;
    const int rc = fi_getinfo(kFiVersion, nullptr, nullptr, 0, hints.get(), &list);
    RestoreFatalSignals();  // providers starting up may have installed theirs
    if (rc != 0) continue;
    FiInfoPtr owner(list);
    for (fi_info* i = list; i != nullptr; i = i->next) {
      const std::string prov = Name(i->fabric_attr->prov_name);
      if (std::find(seen.begin(), seen.end(), prov) == seen.end()) seen.push_back(prov);
      if (!options.include.empty() && !ProviderNamed(prov, options.include)) continue;
      if (ProviderNamed(prov, options.exclude)) continue;
      const bool cq_data = i->domain_attr->cq_data_size >= 4 && (i->caps & FI_DIRECTED_RECV) != 0;
      absl::StatusOr<TagLayout> layout =
          TagLayout::Make(options.tag_mode, ReservedBits(i->ep_attr->mem_tag_format), cq_data,
                          static_cast<int>(std::min<std::size_t>(i->domain_attr->cq_data_size, 8)));
      if (!layout.ok()) {
        if (!options.include.empty()) {
          return absl::Status(layout.status().code(), absl::StrCat("ofi: provider ", prov, ": ",
                                                                   layout.status().message()));
        }
        continue;  // another provider may suit the mode
      }
      // The provider chosen, asked again with FI_RMA (first with sends
      // ordered after writes, then without): where it offers it (the same
      // provider, fabric and domain, the same tag format), that is the
      // endpoint opened. FI_RMA never changes which provider wins.
      FiInfoPtr with_rma;
      fi_info* chosen = i;
      for (bool saw : {true, false}) {
        if (!options.rma || chosen != i) break;
        if (saw && !options.rma_ordered) continue;
        FiInfoPtr rma_hints = Hints(directed, msg, /*rma=*/true, saw);
        fi_info* rma_list = nullptr;
        const int rma_rc = fi_getinfo(kFiVersion, nullptr, nullptr, 0, rma_hints.get(), &rma_list);
        RestoreFatalSignals();
        if (rma_rc != 0) continue;
        with_rma.reset(rma_list);
        fi_info* j = Same(rma_list, i);
        if (j != nullptr && (j->caps & FI_RMA) != 0 && j->ep_attr->mem_tag_format == i->ep_attr->mem_tag_format &&
            j->domain_attr->cq_data_size == i->domain_attr->cq_data_size) {
          chosen = j;
        }
      }
      ProviderChoice c{prov,
                       Name(chosen->fabric_attr->name),
                       Name(chosen->domain_attr->name),
                       *layout,
                       chosen->ep_attr->max_msg_size,
                       chosen->tx_attr->inject_size,
                       prov == "shm",
                       chosen != i,
                       (chosen->domain_attr->mr_mode & FI_MR_VIRT_ADDR) != 0,
                       // (a provider may give the order unasked: relied on only where asked for)
                       options.rma_ordered && (chosen->tx_attr->msg_order & FI_ORDER_SAW) != 0,
                       chosen->rx_attr->iov_limit,
                       msg};
      if (out != nullptr) out->reset(fi_dupinfo(chosen));
      return c;
    }
  }
  return absl::NotFoundError(absl::StrFormat(
      "ofi: no tagged reliable-datagram provider suits (libfabric offers [%s]; CARTAGE_OFI_PROVIDER_INCLUDE=%s, "
      "_EXCLUDE=%s)",
      absl::StrJoin(seen, ", "), absl::StrJoin(options.include, ","), absl::StrJoin(options.exclude, ",")));
}

// ---- Opening ---------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<OfiMethod>> OfiMethod::Create(Exchange& exchange, MethodHost* host,
                                                             const OfiOptions& options) {
  std::unique_ptr<OfiMethod> m(new OfiMethod());
  m->options_ = options;
  m->host_ = host;
  m->rank_ = exchange.rank();
  m->size_ = exchange.size();
  FiInfoPtr info;
  CARTAGE_ASSIGN_OR_RETURN(m->provider_, ChooseProvider(options, &info));
  m->caps_ = CapsOf(&m->provider_);
  if (m->size_ - 1 > m->layout().max_source()) {
    return absl::FailedPreconditionError(
        absl::StrFormat("ofi: the job has %d ranks but tag layout %s names ranks up to %d (try ofi_tag_full)",
                        m->size_, m->layout().Describe(), m->layout().max_source()));
  }
  CARTAGE_RETURN_IF_ERROR(m->Open(exchange, info.get()));
  return m;
}

absl::Status OfiMethod::Open(Exchange& exchange, fi_info* info) {
  auto failed = [&](const char* what, ssize_t rc) {
    return absl::UnavailableError(
        absl::StrFormat("ofi: rank %d: %s on %s: %s", rank_, what, provider_.name, FiError(rc)));
  };
  int rc = fi_fabric(info->fabric_attr, &fabric_, nullptr);
  if (rc != 0) return failed("fi_fabric", rc);
  rc = fi_domain(fabric_, info, &domain_, nullptr);
  if (rc != 0) return failed("fi_domain", rc);
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = kCqSize;
  cq_attr.wait_obj = FI_WAIT_FD;  // Block sleeps on it; without one, Block naps
  if (fi_cq_open(domain_, &cq_attr, &cq_, nullptr) != 0) {
    cq_attr.wait_obj = FI_WAIT_NONE;
    rc = fi_cq_open(domain_, &cq_attr, &cq_, nullptr);
    if (rc != 0) return failed("fi_cq_open", rc);
  } else if (fi_control(&cq_->fid, FI_GETWAIT, &wait_fd_) != 0) {
    wait_fd_ = -1;
  }
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = static_cast<std::size_t>(size_);
  rc = fi_av_open(domain_, &av_attr, &av_, nullptr);
  if (rc != 0) return failed("fi_av_open", rc);
  rc = fi_endpoint(domain_, info, &ep_, nullptr);
  if (rc != 0) return failed("fi_endpoint", rc);
  rc = fi_ep_bind(ep_, &cq_->fid, FI_TRANSMIT | FI_RECV);
  if (rc != 0) return failed("binding the completion queue", rc);
  rc = fi_ep_bind(ep_, &av_->fid, 0);
  if (rc != 0) return failed("binding the address vector", rc);
  rc = fi_enable(ep_);
  if (rc != 0) return failed("fi_enable", rc);

  // Publish "endpoint name (hex);pid;host key"; read everyone's.
  std::string name(256, '\0');
  std::size_t len = name.size();
  rc = fi_getname(&ep_->fid, name.data(), &len);
  if (rc != 0) return failed("fi_getname", rc);
  name.resize(len);
  host_key_ = HostKey();
  CARTAGE_RETURN_IF_ERROR(exchange.Put(absl::StrCat("ofi.", rank_),
                                       absl::StrCat(absl::BytesToHexString(name), ";", ::getpid(), ";", host_key_)));
  CARTAGE_RETURN_IF_ERROR(exchange.Fence());
  peers_.resize(static_cast<std::size_t>(size_));
  addrs_.assign(static_cast<std::size_t>(size_), FI_ADDR_UNSPEC);
  for (int p = 0; p < size_; ++p) {
    Peer& peer = peers_[static_cast<std::size_t>(p)];
    CARTAGE_ASSIGN_OR_RETURN(std::string record, exchange.GetFrom(p, absl::StrCat("ofi.", p)));
    std::vector<std::string> f = absl::StrSplit(record, ';');
    std::string peer_name;
    if (f.size() != 3 || !absl::SimpleAtoi(f[1], &peer.pid) || f[0].size() % 2 != 0 ||
        !absl::c_all_of(f[0], [](char ch) { return absl::ascii_isxdigit(static_cast<unsigned char>(ch)); })) {
      return absl::DataLossError(absl::StrFormat("ofi: rank %d published a malformed record '%s'", p, record));
    }
    peer_name = absl::HexStringToBytes(f[0]);
    peer.host_key = f[2];
    fi_addr_t a = FI_ADDR_UNSPEC;
    if (fi_av_insert(av_, peer_name.data(), 1, &a, 0, nullptr) != 1) {
      return absl::UnavailableError(absl::StrFormat("ofi: rank %d cannot insert rank %d's address", rank_, p));
    }
    addrs_[static_cast<std::size_t>(p)] = a;
    peer.name = absl::StrFormat("ofi to rank %d", p);
    peer.vc = kOps;
    peer.vc.name = peer.name;
    peer.vc.context = this;
    peer.vc.peer = p;
  }
  any_ = kOps;  // wildcard receives: the provider matches them too
  any_.name = "ofi from any rank";
  any_.context = this;
  entries_.resize(static_cast<std::size_t>(options_.events));
  account_.assign(static_cast<std::size_t>(size_), Account{});
  held_max_ = host_ != nullptr ? host_->UnexpectedMax() : uint64_t{1} << 30;
  window_ = std::max(held_max_ / static_cast<uint64_t>(std::max(size_ - 1, 1)), 8 * Charge(0));
  step_ = window_ / 4;
  if (provider_.control) {
    for (int i = 0; i < std::min(size_, kControlReceives); ++i) PostControlRecv(NewOp(OfiOp::Kind::kCtlRecv, nullptr, -1));
  } else {
    window_ = std::numeric_limits<uint64_t>::max() / 2;  // no control messages: nothing would release a held send
  }
  if (provider_.rx_iov_limit >= 2) {
    void* sink = ::mmap(nullptr, kSinkBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (sink != MAP_FAILED) sink_ = static_cast<std::byte*>(sink);
  }
  return absl::OkStatus();
}

OfiMethod::~OfiMethod() { CloseFabric(); }

void OfiMethod::CloseFabric() {
  if (ep_ != nullptr) fi_close(&ep_->fid);
  for (fid_mr*& mr : exposed_) {  // windows never freed (a rank that failed first)
    if (mr != nullptr) fi_close(&mr->fid);
    mr = nullptr;
  }
  if (av_ != nullptr) fi_close(&av_->fid);
  if (cq_ != nullptr) fi_close(&cq_->fid);
  if (domain_ != nullptr) fi_close(&domain_->fid);
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  ep_ = nullptr;
  av_ = nullptr;
  cq_ = nullptr;
  domain_ = nullptr;
  fabric_ = nullptr;
  for (OfiOp& op : ops_) {
    delete[] op.bounce;
    op.bounce = nullptr;
  }
  if (sink_ != nullptr) ::munmap(sink_, kSinkBytes);
  sink_ = nullptr;
}

void OfiMethod::Close() {
  if (closed_) return;
  closed_ = true;
  // Acknowledgements still waiting on FI_EAGAIN go before the endpoint closes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (queued() > 0 && std::chrono::steady_clock::now() < deadline) Progress();
  CloseFabric();
}

}  // namespace cartage::methods::ofi
