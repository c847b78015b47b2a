// The kit's list of cases, and what the cases share.
#include "kit/cases.h"
#include "kit/check.h"

#include <sys/mman.h>

#include <csignal>
#include <cstdlib>

namespace cartage::kit {

namespace {

// clang-format off
constexpr Case kCases[] = {
// name            ranks run                one_rank in_process leaves checks (, multiple)
  {"envelope",     3,    &Envelope,         false,   true,      false, "the sender's world rank in every envelope", false},
  {"order",        2,    &Order,            false,   true,      false, "100,096 messages in posting order", false},
  {"wildcard",     2,    &Wildcard,         false,   true,      false, "wildcard and specific receives: the earlier posted wins", false},
  {"unexpected",   2,    &Unexpected,       false,   true,      false, "100,000 unexpected messages taken newest first", false},
  {"anytag",       4,    &AnyTagAnySource,  false,   true,      false, "any source and tag from three ranks, each in order", false},
  {"sizes",        2,    &Sizes,            false,   true,      false, "0 B to 64 MiB both ways at once, every byte", false},
  {"truncation",   2,    &Truncation,       false,   true,      false, "a message longer than its receive: kOutOfRange, nothing past", false},
  {"cancel",       2,    &Cancel,           false,   true,      false, "a cancelled receive takes no message", false},
  {"ssend",        2,    &Ssend,            false,   true,      false, "a synchronous send waits for its match", false},
  {"probe",        2,    &ProbeThenRecv,    false,   true,      false, "probe, then receive what it found", false},
  {"dup",          3,    &DupIsolation,     false,   true,      false, "communicators never see each other's messages", false},
  {"badargs",      2,    &BadArguments,     false,   true,      false, "bad ranks, tags, buffers and requests refused by name", false},
  {"persistent",   2,    &Persistent,       false,   true,      false, "persistent requests, registered once, 1000 starts", false},
  {"waitvariants", 2,    &WaitVariants,     false,   true,      false, "WaitAny, WaitSome, TestAll, TestAny", false},
  {"split",        5,    &Split,            false,   true,      false, "split by color and key, a ring in each half", false},
  {"datatypes",    2,    &Datatypes,        false,   true,      false, "non-contiguous layouts on either side", false},
  {"outstanding",  2,    &Outstanding,      false,   true,      false, "10,000 operations outstanding each way", false},
  {"exhaustion",   2,    &Exhaustion,       false,   true,      false, "128 MiB sent to a receiver away: queued, never failed", false},
  {"finalize",     2,    &FinalizeDelivers, false,   true,      false, "sent, then finalized at once: every message delivered", false},
  {"unreceived",   2,    &FinalizeUnreceived, false, true,      false, "messages nobody receives: taken at finalize, named", false},
  {"threads",      2,    &Threads,          false,   true,      false, "four threads of a rank at once: exchanges, wildcards, matched probes, cancels", true},
  {"earlyexit",    2,    &EarlyExit,        false,   false,     true,  "a peer that exits without finalizing is named", false},
  {"peerdies",     2,    &PeerDies,         false,   false,     true,  "a peer that dies mid-transfer fails the receive", false},
  {"vcerror",      3,    &VcError,          false,   false,     true,  "a VC in the error state fails new operations at once", false},
  // For a method that reaches only the rank itself.
  {"self",         1,    &Self,             true,    true,      false, "a rank's messages to itself", false},
  {"datatypes",    1,    &Datatypes,        true,    true,      false, "non-contiguous layouts to oneself", false},
  {"outstanding",  1,    &Outstanding,      true,    true,      false, "10,000 operations outstanding to oneself", false},
};
// The project's own tests' modes (tests/p2p_test.cc), not the kit's.
constexpr Case kExtra[] = {
  {"holdprobe",    2,    &HoldThenProbe,    false,   true,      false, "an envelope held unread is still found by Iprobe", false},
  {"self",         2,    &Self,             false,   true,      false, "a rank's messages to itself, beside other ranks", false},
  {"unexpectedmem", 2,   &UnexpectedMemory, false,   false,     false, "10^6 unexpected 8-byte messages: bytes each, memory after the drain", false},
  {"unexpectedcap", 2,   &UnexpectedCap,    false,   false,     false, "past CARTAGE_UNEXPECTED_MAX_MB: a clear error, what came before delivered", false},
  {"fastsender",    2,   &FastSender,       false,   false,     false, "a sender 100,000 messages ahead: what waits stays within the cap", false},
  {"strangerkilled", 3,  &StrangerKilled,   false,   false,     true,  "launcher stopped, a rank killed: one that never talked to it learns in < 2 s", false},
  {"killself",     1,    &KillSelf,         false,   false,     false, "the rank kills itself", false},
  {"segv",         1,    &Segv,             false,   false,     false, "the rank writes through a null pointer", false},
  {"abort",        1,    &Abort,            false,   false,     false, "the rank aborts", false},
};
// clang-format on

}  // namespace

absl::Span<const Case> Cases() { return kCases; }

const Case* FindCase(absl::string_view name) {
  for (const Case& c : kCases) {
    if (name == c.name) return &c;
  }
  for (const Case& c : kExtra) {
    if (name == c.name) return &c;
  }
  return nullptr;
}

void Ready(const Comm& w, int tag) {
  char c = 'r';
  if (w.rank() == 1) KIT_OK(w.Send(&c, 1, 0, tag));
  if (w.rank() == 0) KIT_OK(w.Recv(&c, 1, 1, tag));
}

void Fill(std::vector<unsigned char>& v, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& b : v) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b = static_cast<unsigned char>(x);
  }
}

void KillSelf(const Comm&, Agent&) { std::raise(SIGKILL); }

void Segv(const Comm&, Agent&) {
  // A page no access may touch: a real fault (a null store would be caught
  // first by UBSan in the sanitizer build).
  void* page = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  *static_cast<volatile int*>(page) = 1;
}

void Abort(const Comm&, Agent&) { std::abort(); }

}  // namespace cartage::kit
