// The rank side of the RMA tests (tests/rma_test.cc runs it through
// `cartage run` at several rank counts, on shm and on tcp). One launch runs
// the whole matrix: put, get and accumulate, with their data in the control
// message and in a message of its own, contiguous and derived datatypes on
// either side, zero-byte operations, accumulate ordering from one origin,
// every rank accumulating into one location, an access outside the window;
// every window compared element by element with a serial reference each
// rank computes for every rank. Rank 0 prints "PASS rma matrix".
//
// usage: rma_ranks matrix|passive|computing|torn|dead|shared|lockdead|groups|groupdead|dynamic|batching [shared|served]
// The second word says which way the allocated windows must go: shared
// (every rank maps them, the default) or served by the target's agent
// (tcp, ofi, or CARTAGE_RMA_SHARED=0).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "cartage/collectives.h"
#include "cartage/rma.h"
#include "kit/check.h"

using cartage::Comm;
using cartage::Datatype;
using cartage::Window;
using cartage::datatype::BasicType;
using cartage::datatype::Op;
using cartage::datatype::OpKind;
namespace kit = cartage::kit;

namespace {

const Datatype kF64 = Datatype::Basic(BasicType::kDouble);

bool g_expect_shared = true;
// The launch's windows that are neither shared nor single-copy are the
// method's one-sided writes and reads (ofi with FI_RMA, CARTAGE_RMA_SHARED=0).
bool g_expect_one_sided = false;

// An allocated window goes the way the launch says.
void ExpectPath(const Window& x, const char* what) {
  KIT_EXPECT(x.shared() == g_expect_shared, "%s: the window is %s", what, x.shared() ? "shared" : "served");
}

// Elements of one window; a put of kBig elements goes apart from its
// control message (more than kInlineMax bytes).
constexpr int64_t kElems = 1 << 15;
constexpr int64_t kBig = 20000;
constexpr int64_t kSmall = 24;

// The value rank r puts at element i of its block.
double Value(int r, int64_t i) { return r * 100000.0 + static_cast<double>(i) + 0.5; }

void ExpectWindow(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  for (std::size_t i = 0; i < want.size(); ++i) {
    KIT_EXPECT(got[i] == want[i], "%s: element %d is %g, expected %g", what, i, got[i], want[i]);
  }
}

int Matrix(const Comm& w) {
  const int me = w.rank();
  const int n = w.size();
  const int right = (me + 1) % n;
  const int left = (me + n - 1) % n;
  // Over the caller's memory, a displacement unit of one double.
  std::vector<double> mem(kElems, -1.0);
  auto win = Window::Create(w, mem.data(), mem.size() * sizeof(double), sizeof(double));
  KIT_OK(win.status());
  Window& x = **win;
  KIT_EXPECT(x.state() == "idle", "a new window is %s", std::string(x.state()));
  // On one host its puts and gets are the origin's own copies, where the
  // launch shares windows.
  KIT_EXPECT(!x.shared() && x.single_copy() == g_expect_shared && x.one_sided() == g_expect_one_sided,
             "the window over the caller's memory is %s",
             x.single_copy() ? "single-copy" : x.one_sided() ? "one-sided" : "served");
  // An operation before the first fence is refused.
  const absl::Status early = x.Put(mem.data(), 8, right, 0);
  KIT_EXPECT(early.code() == absl::StatusCode::kFailedPrecondition && absl::StrContains(early.message(), "no epoch"),
             "a put before any fence: %s", early.ToString());
  KIT_OK(x.Fence());
  KIT_EXPECT(x.state() == "open", "after the first fence: %s", std::string(x.state()));

  // ---- epoch 1: puts to the right -----------------------------------------------
  std::vector<double> src(kElems);
  for (int64_t i = 0; i < kElems; ++i) src[static_cast<std::size_t>(i)] = Value(me, i);
  // A small contiguous put (in the control message) at 0, a large one
  // (apart) at 100, a strided target (every other element) at 30000 from a
  // contiguous origin, and a strided origin into a contiguous target.
  auto every_other = Datatype::Vector(kSmall, 1, 2, kF64);
  KIT_OK(every_other.status());
  KIT_OK(x.Put(src.data(), kSmall * sizeof(double), right, 0));
  KIT_OK(x.Put(src.data(), kBig, kF64, right, 100, kBig, kF64));
  KIT_OK(x.Put(src.data(), kSmall, kF64, right, 30000, 1, *every_other));
  KIT_OK(x.Put(src.data(), 1, *every_other, right, 31000, kSmall, kF64));
  auto big_stride = Datatype::Vector(1000, 3, 5, kF64);  // 3,000 elements over 5,000: apart, non-contiguous
  KIT_OK(big_stride.status());
  KIT_OK(x.Put(src.data(), 3000, kF64, right, 20200, 1, *big_stride));
  KIT_OK(x.Put(src.data(), 0, right, 7));  // nothing, yet an operation
  KIT_OK(x.Fence());
  std::vector<double> want(kElems, -1.0);
  for (int64_t i = 0; i < kSmall; ++i) want[static_cast<std::size_t>(i)] = Value(left, i);
  for (int64_t i = 0; i < kBig; ++i) want[static_cast<std::size_t>(100 + i)] = Value(left, i);
  for (int64_t i = 0; i < kSmall; ++i) want[static_cast<std::size_t>(30000 + 2 * i)] = Value(left, i);
  for (int64_t i = 0; i < kSmall; ++i) want[static_cast<std::size_t>(31000 + i)] = Value(left, 2 * i);
  for (int64_t b = 0; b < 1000; ++b) {
    for (int64_t k = 0; k < 3; ++k) want[static_cast<std::size_t>(20200 + 5 * b + k)] = Value(left, 3 * b + k);
  }
  ExpectWindow(mem, want, "after the puts");

  // ---- epoch 2: gets from the right ------------------------------------------------
  // The right neighbour's window holds what its left (this rank) put.
  std::vector<double> got(kElems, -2.0);
  KIT_OK(x.Get(got.data(), kSmall * sizeof(double), right, 0));
  KIT_OK(x.Get(got.data() + 100, kBig, kF64, right, 100, kBig, kF64));
  KIT_OK(x.Get(got.data() + 30000, 1, *every_other, right, 30000, 1, *every_other));
  KIT_OK(x.Get(got.data() + 20200, 1, *big_stride, right, 20200, 1, *big_stride));
  KIT_OK(x.Get(got.data(), 0, right, 5));
  KIT_OK(x.Fence());
  for (int64_t i = 0; i < kSmall; ++i) {
    KIT_EXPECT(got[static_cast<std::size_t>(i)] == Value(me, i), "get element %d: %g", i, got[static_cast<std::size_t>(i)]);
  }
  for (int64_t i = 0; i < kBig; ++i) {
    KIT_EXPECT(got[static_cast<std::size_t>(100 + i)] == Value(me, i), "large get element %d: %g", i,
               got[static_cast<std::size_t>(100 + i)]);
  }
  for (int64_t i = 0; i < kSmall; ++i) {
    KIT_EXPECT(got[static_cast<std::size_t>(30000 + 2 * i)] == Value(me, i) &&
                   got[static_cast<std::size_t>(30001 + 2 * i)] == -2.0,
               "strided get element %d: %g, gap %g", i, got[static_cast<std::size_t>(30000 + 2 * i)],
               got[static_cast<std::size_t>(30001 + 2 * i)]);
  }
  for (int64_t b = 0; b < 1000; ++b) {
    for (int64_t k = 0; k < 5; ++k) {
      const double g = got[static_cast<std::size_t>(20200 + 5 * b + k)];
      KIT_EXPECT(k < 3 ? g == Value(me, 3 * b + k) : g == -2.0, "large strided get block %d element %d: %g", b, k, g);
    }
  }
  ExpectWindow(mem, want, "after the gets (unchanged)");

  // ---- epoch 3: accumulates ---------------------------------------------------------
  // Every rank adds (r + 1) * i into rank 0's elements [0, 64) (small) and
  // [1000, 1000 + kBig) (apart); then, from each rank to its right: a large
  // sum of 1 and then a small product by 2 over the same elements, which
  // only the issue order gives ((x + 1) * 2); and a max over a strided layout.
  const Op sum(OpKind::kSum), prod(OpKind::kProd), max(OpKind::kMax);
  std::vector<double> acc(kBig);
  for (int64_t i = 0; i < kBig; ++i) acc[static_cast<std::size_t>(i)] = (me + 1) * static_cast<double>(i);
  if (me == 0) std::fill(mem.begin(), mem.begin() + 64, 0.0);
  if (me == 0) std::fill(mem.begin() + 1000, mem.begin() + 1000 + kBig, 0.0);
  KIT_OK(cartage::Barrier(w));  // the zeros are in before anyone adds
  KIT_OK(x.Accumulate(acc.data(), 64, kF64, 0, 0, 64, kF64, sum));
  KIT_OK(x.Accumulate(acc.data(), kBig, kF64, 0, 1000, kBig, kF64, sum));
  std::vector<double> ones(kBig, 1.0), twos(kBig, 2.0);
  KIT_OK(x.Accumulate(ones.data(), 4000, kF64, right, 25300, 4000, kF64, sum));
  KIT_OK(x.Accumulate(twos.data(), 16, kF64, right, 25300, 16, kF64, prod));
  // Larger than what is there at even elements, smaller at odd ones.
  const auto high = [](int r, int64_t i) { return i % 2 == 0 ? 1e9 + static_cast<double>(i + r) : -1e9; };
  std::vector<double> highs(kSmall);
  for (int64_t i = 0; i < kSmall; ++i) highs[static_cast<std::size_t>(i)] = high(me, i);
  KIT_OK(x.Accumulate(highs.data(), kSmall, kF64, right, 30000, 1, *every_other, max));
  // Nothing to add or to fetch: no buffer is needed, and nothing changes.
  KIT_OK(x.Accumulate(nullptr, 0, kF64, right, 25300, 0, kF64, sum));
  KIT_OK(x.GetAccumulate(nullptr, 0, kF64, nullptr, 0, kF64, right, 25300, 0, kF64, sum));
  KIT_OK(x.Fence());
  // What this rank's window holds now, from the reference.
  std::vector<double> ref = want;
  if (me == 0) {
    const double ranks = n * (n + 1) / 2.0;
    for (int64_t i = 0; i < 64; ++i) ref[static_cast<std::size_t>(i)] = ranks * static_cast<double>(i);
    for (int64_t i = 0; i < kBig; ++i) ref[static_cast<std::size_t>(1000 + i)] = ranks * static_cast<double>(i);
  }
  for (int64_t i = 0; i < 4000; ++i) ref[static_cast<std::size_t>(25300 + i)] += 1.0;
  for (int64_t i = 0; i < 16; ++i) ref[static_cast<std::size_t>(25300 + i)] *= 2.0;
  for (int64_t i = 0; i < kSmall; ++i) {
    double& e = ref[static_cast<std::size_t>(30000 + 2 * i)];
    e = std::max(e, high(left, i));
  }
  ExpectWindow(mem, ref, "after the accumulates");

  // ---- errors ------------------------------------------------------------------------
  const absl::Status outside = x.Put(src.data(), 16 * sizeof(double), right, kElems - 8);
  KIT_EXPECT(outside.code() == absl::StatusCode::kOutOfRange &&
                 absl::StrContains(outside.message(), "window 1 (rank " + std::to_string(me)) &&
                 absl::StrContains(outside.message(), "put to rank " + std::to_string(right) + " at displacement ") &&
                 absl::StrContains(outside.message(), "outside rank " + std::to_string(right) + "'s window of 262144 bytes") &&
                 absl::StrContains(outside.message(), "nothing was written"),
             "a put past the window's end: %s", outside.ToString());
  const absl::Status mismatch = x.Get(got.data(), 3, kF64, right, 0, 2, kF64);
  KIT_EXPECT(mismatch.code() == absl::StatusCode::kInvalidArgument, "a get of 24 bytes into 16: %s", mismatch.ToString());
  const absl::Status no_rank = x.Put(src.data(), 8, n, 0);
  KIT_EXPECT(no_rank.code() == absl::StatusCode::kInvalidArgument, "a put to rank %d: %s", n, no_rank.ToString());
  const absl::Status user_op = x.Accumulate(src.data(), 1, kF64, right, 0, 1, kF64,
                                            Op::User([](const void*, void*, int64_t, const Datatype&, void*) {}, true));
  KIT_EXPECT(user_op.code() == absl::StatusCode::kInvalidArgument, "a user operator: %s", user_op.ToString());
  cartage::Request no_op_req;
  const absl::Status no_op = x.Raccumulate(src.data(), 1, kF64, right, 0, 1, kF64, cartage::RmaOp::NoOp(), &no_op_req);
  KIT_EXPECT(no_op.code() == absl::StatusCode::kInvalidArgument && !no_op_req.active(), "an accumulate of NoOp: %s",
             no_op.ToString());
  KIT_OK(x.Fence());
  ExpectWindow(mem, ref, "after the refused operations (unchanged)");
  KIT_EXPECT(x.issued() == 6 + 5 + 7, "issued %d operations", x.issued());
  // Served: the accumulates, and the puts and gets but those a single-copy
  // window copies (of 2 KiB or more: two of each) or a one-sided window's
  // method moves (those with one target block: the large put and get, and,
  // where the launch lowers CARTAGE_RMA_ONE_SIDED_MIN to 1, the small
  // contiguous put and get and the put from a strided origin too).
  const char* min = std::getenv("CARTAGE_RMA_ONE_SIDED_MIN");
  const int copied = x.single_copy() ? 4 : !x.one_sided() ? 0 : min != nullptr && std::string(min) == "1" ? 5 : 2;
  KIT_EXPECT(x.served() == static_cast<uint64_t>(6 + 5 - copied + (me == 0 ? n * 2 + 5 : 5)),
             "served %d operations", x.served());
  // A passive epoch on it: a put and a get under an exclusive lock on the
  // right neighbour (single-copy: once the lock is granted), once every
  // rank counted what it served (the lock requests are served too).
  KIT_OK(cartage::Barrier(w));
  constexpr int64_t kLocked = 1024;  // 8 KiB: single-copy where it can be
  std::vector<double> marked(kLocked), back(kLocked, -3.0);
  for (int64_t i = 0; i < kLocked; ++i) marked[static_cast<std::size_t>(i)] = 7777.0 + me * 10000 + i;
  KIT_OK(x.Lock(right, Window::LockType::kExclusive));
  KIT_OK(x.Put(marked.data(), kLocked, kF64, right, kElems - kLocked, kLocked, kF64));
  KIT_OK(x.Flush(right));
  KIT_OK(x.Get(back.data(), kLocked, kF64, right, kElems - kLocked, kLocked, kF64));
  KIT_OK(x.Unlock(right));
  ExpectWindow(back, marked, "the get under the lock");
  KIT_OK(cartage::Barrier(w));
  for (int64_t i = 0; i < kLocked; ++i) {
    KIT_EXPECT(mem[static_cast<std::size_t>(kElems - kLocked + i)] == 7777.0 + left * 10000 + i,
               "element %d after the left neighbour's locked put: %g", kElems - kLocked + i,
               mem[static_cast<std::size_t>(kElems - kLocked + i)]);
  }
  KIT_OK(x.Free());
  KIT_EXPECT(x.state() == "freed", "after free: %s", std::string(x.state()));

  // ---- fetches, on an allocated window of int64 counters and doubles ------------------
  const Datatype i64 = Datatype::Basic(BasicType::kInt64);
  auto atoms = Window::Allocate(w, 8 * sizeof(int64_t) + kBig * sizeof(double), sizeof(int64_t));
  KIT_OK(atoms.status());
  Window& a = **atoms;
  ExpectPath(a, "the window of counters");
  KIT_OK(a.Fence());
  // Every rank adds r + 1 to rank 0's counter and learns what it was: the
  // values it learns are the sums of some order of the ranks' additions.
  const int64_t add = me + 1;
  int64_t before = -1;
  KIT_OK(a.FetchAndOp(&add, &before, i64, 0, 0, Op(OpKind::kSum)));
  // Every rank swaps 0 for r + 1 in rank 0's second counter: one wins.
  const int64_t zero = 0;
  int64_t seen = -1;
  KIT_OK(a.CompareAndSwap(&add, &zero, &seen, i64, 0, 1));
  // A large get_accumulate (its data apart) that sums into the right
  // neighbour's doubles and fetches them; then a fetch that changes nothing.
  std::vector<double> mine(kBig), was(kBig, -3.0);
  for (int64_t i = 0; i < kBig; ++i) mine[static_cast<std::size_t>(i)] = static_cast<double>(me * 1000 + i);
  KIT_OK(a.GetAccumulate(mine.data(), kBig, kF64, was.data(), kBig, kF64, right, 8, kBig, kF64, Op(OpKind::kSum)));
  KIT_OK(a.Fence());
  int64_t now = -1;
  KIT_OK(a.FetchAndOp(nullptr, &now, i64, 0, 0, cartage::RmaOp::NoOp()));
  // And replace: this rank's value into its right neighbour's third counter.
  int64_t replaced = -1;
  const int64_t mark = 1000 + me;
  KIT_OK(a.FetchAndOp(&mark, &replaced, i64, right, 2, cartage::RmaOp::Replace()));
  KIT_OK(a.Fence());
  std::vector<int64_t> befores(static_cast<std::size_t>(n)), seens(static_cast<std::size_t>(n));
  KIT_OK(cartage::Allgather(w, &before, befores.data(), 1, i64));
  KIT_OK(cartage::Allgather(w, &seen, seens.data(), 1, i64));
  const int64_t total = static_cast<int64_t>(n) * (n + 1) / 2;
  KIT_EXPECT(now == total, "rank 0's counter reads %d, expected %d", now, total);
  // Sorted by what they saw, each rank saw the additions of those before it.
  std::vector<std::pair<int64_t, int>> order;
  for (int r = 0; r < n; ++r) order.push_back({befores[static_cast<std::size_t>(r)], r});
  std::sort(order.begin(), order.end());
  int64_t running = 0;
  for (const auto& [value, r] : order) {
    KIT_EXPECT(value == running, "rank %d fetched %d where the additions before it make %d", r, value, running);
    running += r + 1;
  }
  int winners = 0;
  for (int r = 0; r < n; ++r) winners += seens[static_cast<std::size_t>(r)] == 0 ? 1 : 0;
  KIT_EXPECT(winners == 1, "%d ranks won the compare-and-swap", winners);
  for (int r = 0; r < n; ++r) {
    const int64_t s = seens[static_cast<std::size_t>(r)];
    KIT_EXPECT(s == 0 || (s >= 1 && s <= n && seens[static_cast<std::size_t>(s - 1)] == 0),
               "rank %d saw %d in the swapped counter", r, s);
  }
  KIT_EXPECT(replaced == 0, "the replaced counter held %d", replaced);
  const auto* counters = static_cast<const int64_t*>(a.base());
  const auto* doubles = reinterpret_cast<const double*>(counters + 8);
  if (me == 0) {
    int winner = -1;
    for (int r = 0; r < n; ++r) winner = seens[static_cast<std::size_t>(r)] == 0 ? r : winner;
    KIT_EXPECT(counters[0] == total && counters[1] == winner + 1, "rank 0's counters: %d %d", counters[0], counters[1]);
  }
  KIT_EXPECT(counters[2] == 1000 + left, "the replaced counter now %d", counters[2]);
  for (int64_t i = 0; i < kBig; ++i) {
    KIT_EXPECT(was[static_cast<std::size_t>(i)] == 0.0 && doubles[i] == static_cast<double>(left * 1000 + i),
               "get_accumulate element %d: fetched %g, now %g", i, was[static_cast<std::size_t>(i)], doubles[i]);
  }
  // A fetch with a second type where the first lies.
  const absl::Status cas_double = a.CompareAndSwap(&add, &zero, &seen, kF64, 0, 1);
  KIT_EXPECT(cas_double.code() == absl::StatusCode::kInvalidArgument, "a compare-and-swap of a double: %s",
             cas_double.ToString());
  KIT_OK(a.Free());

  // An allocated window, used and freed again, after this one.
  auto second = Window::Allocate(w, 64, 1);
  KIT_OK(second.status());
  KIT_OK((*second)->Fence());
  const char hello[] = "hello from rank";
  KIT_OK((*second)->Put(hello, sizeof(hello), right, 0));
  KIT_OK((*second)->Put(&me, sizeof(me), right, 32));
  KIT_OK((*second)->Fence());
  const auto* b = static_cast<const char*>((*second)->base());
  int from = -1;
  std::memcpy(&from, b + 32, sizeof(from));
  KIT_EXPECT(std::strcmp(b, hello) == 0 && from == left, "the allocated window holds '%s' from %d", b, from);
  KIT_OK((*second)->Free());
  KIT_OK(cartage::Barrier(w));
  if (me == 0) std::printf("PASS rma matrix (%d ranks)\n", n);
  return 0;
}

// Passive target: locks, flushes, contention, and (with CARTAGE_PROGRESS_THREAD=1)
// a target that computes while the others' epochs on it complete.
int Passive(const Comm& w, bool target_computes) {
  const int me = w.rank();
  const int n = w.size();
  const Datatype i64 = Datatype::Basic(BasicType::kInt64);
  constexpr int64_t kApart = 2048;  // int64s: 16 KiB, data in a message of its own
  auto made = Window::Allocate(w, (64 + kApart) * sizeof(int64_t), sizeof(int64_t));
  KIT_OK(made.status());
  Window& x = **made;
  ExpectPath(x, "the passive window");
  auto* mine = static_cast<int64_t*>(x.base());
  // Without a lock, nothing goes.
  const absl::Status unlocked = x.Put(&me, sizeof(me), 0, 0);
  KIT_EXPECT(unlocked.code() == absl::StatusCode::kFailedPrecondition, "a put with no epoch: %s", unlocked.ToString());
  KIT_OK(cartage::Barrier(w));
  if (target_computes && me == 0) {
    // Rank 0 computes for 3 s without calling cartage; the others' epochs
    // on its window complete meanwhile through its progress thread.
    const auto start = std::chrono::steady_clock::now();
    volatile uint64_t spin = 0;
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(3)) spin = spin + 1;
  } else {
    // A read-modify-write of rank 0's counter under an exclusive lock, 20
    // times by every rank: only exclusion makes the count come out.
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 20; ++i) {
      KIT_OK(x.Lock(0, Window::LockType::kExclusive));
      KIT_EXPECT(x.state() == "passive", "inside a lock: %s", std::string(x.state()));
      int64_t v = -1;
      KIT_OK(x.Get(&v, 1, i64, 0, 0, 1, i64));
      KIT_OK(x.Flush(0));  // the get's data is in
      ++v;
      KIT_OK(x.Put(&v, 1, i64, 0, 0, 1, i64));
      KIT_OK(x.Unlock(0));
    }
    // Data apart from its control message, under a lock on the right
    // neighbour: the unlock waits for it to land there.
    std::vector<int64_t> block(kApart);
    for (int64_t i = 0; i < kApart; ++i) block[static_cast<std::size_t>(i)] = me * 1000000 + i;
    KIT_OK(x.Lock((me + 1) % n, Window::LockType::kExclusive));
    KIT_OK(x.Put(block.data(), kApart, i64, (me + 1) % n, 64, kApart, i64));
    KIT_OK(x.Accumulate(block.data(), kApart, i64, (me + 1) % n, 64, kApart, i64, Op(OpKind::kSum)));
    KIT_OK(x.Unlock((me + 1) % n));
    // Shared locks on every rank, an accumulate into each, flushed, then a
    // get that must see it.
    KIT_OK(x.LockAll());
    const int64_t one = 1;
    for (int r = 0; r < n; ++r) KIT_OK(x.Accumulate(&one, 1, i64, r, 1 + me, 1, i64, Op(OpKind::kSum)));
    KIT_OK(x.FlushAll());
    int64_t back = -1;
    KIT_OK(x.Get(&back, 1, i64, (me + 1) % n, 1 + me, 1, i64));
    KIT_OK(x.FlushLocal((me + 1) % n));
    KIT_EXPECT(back == 1, "after the flush, rank %d's element %d reads %d", (me + 1) % n, 1 + me, back);
    // Request-based: the put's request ends as its data left, the get's as
    // its data came (after the flush that completed the put there).
    cartage::Request put_req, get_req;
    const int64_t val = 100 + me;
    int64_t readback = -1;
    KIT_OK(x.Rput(&val, 1, i64, (me + 1) % n, 40 + me, 1, i64, &put_req));
    KIT_OK(put_req.Wait());
    KIT_OK(x.Flush((me + 1) % n));
    KIT_OK(x.Rget(&readback, 1, i64, (me + 1) % n, 40 + me, 1, i64, &get_req));
    KIT_OK(get_req.Wait());
    KIT_EXPECT(readback == 100 + me, "the request-based get read %d", readback);
    const absl::Status busy = x.Rget(&readback, 1, i64, (me + 1) % n, 40 + me, 1, i64, &get_req);
    KIT_OK(busy);  // a finished request is reused
    KIT_OK(get_req.Wait());
    const absl::Status fence = x.Fence();
    KIT_EXPECT(fence.code() == absl::StatusCode::kFailedPrecondition, "a fence inside a lock: %s", fence.ToString());
    KIT_OK(x.UnlockAll());
    KIT_EXPECT(x.state() == "idle", "after the last unlock: %s", std::string(x.state()));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (target_computes) {
      KIT_EXPECT(secs < 2.5, "the epochs took %.2f s while rank 0 computed for 3 s", secs);
      std::printf("rank %d: its epochs on a computing rank 0 took %.3f s\n", me, secs);
    }
  }
  const absl::Status no_lock = x.Unlock(0);
  KIT_EXPECT(no_lock.code() == absl::StatusCode::kFailedPrecondition, "an unlock with no lock: %s", no_lock.ToString());
  KIT_OK(cartage::Barrier(w));
  const int64_t origins = target_computes ? n - 1 : n;
  if (me == 0) KIT_EXPECT(mine[0] == 20 * origins, "rank 0's counter is %d, expected %d", mine[0], 20 * origins);
  for (int r = 0; r < n; ++r) {
    const int64_t want = target_computes && r == 0 ? 0 : 1;
    KIT_EXPECT(mine[1 + r] == want, "element %d (rank %d's accumulates) is %d", 1 + r, r, mine[1 + r]);
  }
  const int from = (me + n - 1) % n;
  if (!(target_computes && from == 0)) {
    for (int64_t i = 0; i < kApart; ++i) {
      KIT_EXPECT(mine[64 + i] == 2 * (from * 1000000 + i), "element %d (rank %d's put, then sum) is %d", 64 + i, from,
                 mine[64 + i]);
    }
    KIT_EXPECT(mine[40 + from] == 100 + from, "element %d (rank %d's request-based put) is %d", 40 + from, from,
               mine[40 + from]);
  }
  KIT_OK(x.Free());
  KIT_OK(cartage::Barrier(w));
  // A window freed while a used lock is held: the free says so, and the
  // unlock after it is refused, never sent to a target that serves nothing.
  if (!target_computes) {
    auto again = Window::Allocate(w, 64, sizeof(int64_t));
    KIT_OK(again.status());
    Window& y = **again;
    const int64_t one = 1;
    KIT_OK(y.Lock((me + 1) % n, Window::LockType::kShared));
    KIT_OK(y.Accumulate(&one, 1, i64, (me + 1) % n, 0, 1, i64, Op(OpKind::kSum)));
    KIT_OK(y.Flush((me + 1) % n));
    const absl::Status freed = y.Free();
    KIT_EXPECT(freed.code() == absl::StatusCode::kFailedPrecondition && absl::StrContains(freed.message(), "locks"),
               "a free with a lock held: %s", freed.ToString());
    const absl::Status late = y.Unlock((me + 1) % n);
    KIT_EXPECT(late.code() == absl::StatusCode::kFailedPrecondition && absl::StrContains(late.message(), "freed"),
               "an unlock after the free: %s", late.ToString());
    KIT_OK(cartage::Barrier(w));
  }
  if (me == 0) std::printf("PASS rma passive (%d ranks)\n", n);
  return 0;
}

// Readers and one writer of a 64 KiB block on rank 0 (its data goes by
// rendezvous both ways): the writer fills it with one value under an
// exclusive lock, each reader gets it under a shared lock and must see one
// value throughout, never a block half written.
int Torn(const Comm& w) {
  const int me = w.rank();
  constexpr int64_t kBlockElems = 8192;
  constexpr int kRounds = 300;
  const Datatype i64 = Datatype::Basic(BasicType::kInt64);
  auto made = Window::Allocate(w, kBlockElems * sizeof(int64_t), sizeof(int64_t));
  KIT_OK(made.status());
  Window& x = **made;
  ExpectPath(x, "the torn window");
  std::vector<int64_t> block(kBlockElems);
  for (int k = 1; k <= kRounds && me > 0; ++k) {
    if (me == 1) {
      std::fill(block.begin(), block.end(), k);
      KIT_OK(x.Lock(0, Window::LockType::kExclusive));
      KIT_OK(x.Put(block.data(), kBlockElems, i64, 0, 0, kBlockElems, i64));
      KIT_OK(x.Unlock(0));
    } else {
      KIT_OK(x.Lock(0, Window::LockType::kShared));
      KIT_OK(x.Get(block.data(), kBlockElems, i64, 0, 0, kBlockElems, i64));
      KIT_OK(x.Unlock(0));
      for (int64_t i = 1; i < kBlockElems; ++i) {
        KIT_EXPECT(block[static_cast<std::size_t>(i)] == block[0], "read %d: element %d is %d, element 0 %d", k, i,
                   block[static_cast<std::size_t>(i)], block[0]);
      }
    }
  }
  KIT_OK(cartage::Barrier(w));
  KIT_OK(x.Free());
  if (me == 0) std::printf("PASS rma torn (%d ranks)\n", w.size());
  return 0;
}

// The last rank leaves after the first fence; the others' operations to it
// and their next fence fail, naming it, and none hangs.
// The ranks but the last, which is to die: they leave together, so that
// none sees another one leave before it saw the last one die.
Comm Survivors(const Comm& w) {
  auto split = w.Split(w.rank() == w.size() - 1 ? -1 : 0, w.rank());
  KIT_OK(split.status());
  return split->has_value() ? **split : w;
}

// Rank 0 asks for more memory than it can have; every rank's Allocate
// fails, naming rank 0, and the job goes on.
int Unallocatable(const Comm& w) {
  const int me = w.rank();
  const uint64_t huge = uint64_t{1} << 48;
  auto win = Window::Allocate(w, me == 0 ? huge : 1024, 1);
  KIT_EXPECT(!win.ok() && win.status().code() == absl::StatusCode::kResourceExhausted &&
                 absl::StrContains(win.status().message(), "rank 0 could not allocate its 281474976710656 bytes"),
             "an allocation rank 0 cannot make: %s", win.status().ToString());
  KIT_OK(cartage::Barrier(w));
  auto next = Window::Allocate(w, 64, 1);  // the next window is whole
  KIT_OK(next.status());
  KIT_OK((*next)->Free());
  if (me == 0) std::printf("PASS rma unallocatable (%d ranks)\n", w.size());
  return 0;
}

int Dead(const Comm& w) {
  const int me = w.rank();
  const int n = w.size();
  const Comm survivors = Survivors(w);
  auto win = Window::Allocate(w, 1024, 1);
  KIT_OK(win.status());
  ExpectPath(**win, "the window");
  std::vector<char> own(4096);
  auto created = Window::Create(w, own.data(), own.size(), 1);  // single-copy where the launch shares
  KIT_OK(created.status());
  KIT_OK((*created)->Fence());
  KIT_OK((*win)->Fence());
  if (me == n - 1) {
    std::fflush(stdout);
    _exit(0);  // gone without finalizing
  }
  std::vector<char> data(512, 'x');
  absl::Status s = (*win)->Put(data.data(), data.size(), n - 1, 0);
  if (s.ok()) s = (*win)->Put(data.data(), 8, n - 1, 600);
  if (s.ok()) s = (*win)->Fence();
  KIT_EXPECT(!s.ok(), "a fence with rank %d dead succeeded", n - 1);
  KIT_EXPECT(absl::StrContains(s.message(), "rank " + std::to_string(n - 1)), "the error does not name rank %d: %s",
             n - 1, s.ToString());
  std::printf("rank %d: the fence failed: %s\n", me, s.ToString().c_str());
  const absl::Status again = (*win)->Fence();
  KIT_EXPECT(!again.ok(), "a fence after a failed one succeeded");
  // Over the caller's memory: the put itself fails (a single copy into a
  // process that is gone), or the fence after it.
  std::vector<char> large(4096, 'y');
  absl::Status copied = (*created)->Put(large.data(), large.size(), n - 1, 0);
  if (copied.ok()) copied = (*created)->Fence();
  KIT_EXPECT(!copied.ok() && absl::StrContains(copied.message(), "rank " + std::to_string(n - 1)),
             "a put into dead rank %d's window over its memory: %s", n - 1, copied.ToString());
  std::printf("rank %d: the put over the caller's memory failed: %s\n", me, copied.ToString().c_str());
  std::fflush(stdout);
  KIT_OK(cartage::Barrier(survivors));
  return 0;
}

// General active target on `x` (a window of kGroupElems doubles, unit 8,
// all -1): a ring of posts and starts (puts small and large, a get, an
// accumulate), one target that many origins accumulate into while it
// tests, every rank to every rank (itself too), an access epoch inside a
// fence's, and the errors of groups and of calls out of turn.
constexpr int64_t kGroupElems = 2 * kBig + 64;

void Groups(const Comm& w, Window& x, const char* what) {
  const int me = w.rank();
  const int n = w.size();
  const int right = (me + 1) % n;
  const int left = (me + n - 1) % n;
  auto* mem = static_cast<double*>(x.base());
  std::vector<double> want(mem, mem + kGroupElems);
  KIT_EXPECT(x.state() == "idle" && x.exposure() == "idle", "%s: a new window is %s, exposure %s", what,
             std::string(x.state()), std::string(x.exposure()));

  // A ring: exposed to the left, an access epoch to the right.
  std::vector<double> src(kBig);
  for (int64_t i = 0; i < kBig; ++i) src[static_cast<std::size_t>(i)] = Value(me, i);
  const int from_left[] = {left};
  const int to_right[] = {right};
  KIT_OK(x.Post(from_left));
  KIT_EXPECT(x.exposure() == "posted", "%s: after post the exposure is %s", what, std::string(x.exposure()));
  KIT_OK(x.Start(to_right));
  KIT_EXPECT(x.state() == "started", "%s: after start: %s", what, std::string(x.state()));
  KIT_OK(x.Put(src.data(), kSmall, kF64, right, 0, kSmall, kF64));
  KIT_OK(x.Put(src.data(), kBig, kF64, right, 64, kBig, kF64));
  double got_right = 0;
  KIT_OK(x.Get(&got_right, 1, kF64, right, kGroupElems - 1, 1, kF64));  // untouched there: -1
  const double three = 3;
  KIT_OK(x.Accumulate(&three, 1, kF64, right, kGroupElems - 2, 1, kF64, Op(OpKind::kSum)));
  // Out of turn, while started: a target outside the group, a fence, a lock.
  const absl::Status outside = x.Put(src.data(), 8, left, 0);
  KIT_EXPECT(n == 2 || (outside.code() == absl::StatusCode::kFailedPrecondition &&
                        absl::StrContains(outside.message(), "not in the group")),
             "%s: a put to rank %d outside the start's group: %s", what, left, outside.ToString());
  KIT_EXPECT(x.Fence().code() == absl::StatusCode::kFailedPrecondition, "%s: a fence while started", what);
  KIT_EXPECT(x.Lock(right).code() == absl::StatusCode::kFailedPrecondition, "%s: a lock while started", what);
  KIT_EXPECT(x.Post(from_left).code() == absl::StatusCode::kFailedPrecondition, "%s: a second post", what);
  KIT_OK(x.Complete());
  KIT_OK(x.Wait());
  KIT_EXPECT(x.state() == "idle" && x.exposure() == "idle", "%s: after the ring: %s, exposure %s", what,
             std::string(x.state()), std::string(x.exposure()));
  for (int64_t i = 0; i < kSmall; ++i) want[static_cast<std::size_t>(i)] = Value(left, i);
  for (int64_t i = 0; i < kBig; ++i) want[static_cast<std::size_t>(64 + i)] = Value(left, i);
  want[kGroupElems - 2] += 3;
  ExpectWindow(std::vector<double>(mem, mem + kGroupElems), want, what);
  KIT_EXPECT(got_right == -1.0, "%s: the get from rank %d read %g", what, right, got_right);

  // Every other rank accumulates into rank 0, which tests until they are done.
  KIT_OK(cartage::Barrier(w));  // every rank read its ring's results
  std::vector<int> others;
  for (int r = 1; r < n; ++r) others.push_back(r);
  const int zero[] = {0};
  if (me == 0) {
    KIT_OK(x.Post(others));
    int rounds = 0;
    for (;;) {
      absl::StatusOr<bool> ended = x.Test();
      KIT_OK(ended.status());
      if (*ended) break;
      ++rounds;
    }
    KIT_EXPECT(x.exposure() == "idle", "%s: after the tests: %s", what, std::string(x.exposure()));
    double sum = 0;
    for (int r = 1; r < n; ++r) sum += r;
    KIT_EXPECT(mem[1] == want[1] + 50 * sum, "%s: element 1 after every origin's 50 additions: %g (expected %g)", what,
               mem[1], want[1] + 50 * sum);
  } else {
    KIT_OK(x.Start(zero));
    for (int k = 0; k < 50; ++k) {
      const double add = me;
      KIT_OK(x.Accumulate(&add, 1, kF64, 0, 1, 1, kF64, Op(OpKind::kSum)));
    }
    KIT_OK(x.Complete());
  }
  KIT_OK(cartage::Barrier(w));
  if (me == 0) {
    double sum = 0;
    for (int r = 1; r < n; ++r) sum += r;
    want[1] += 50 * sum;
  }

  // Every rank to every rank, itself too, inside a fence's epoch: its rank
  // at element 40 + r of every window.
  std::vector<int> all;
  for (int r = 0; r < n; ++r) all.push_back(r);
  KIT_OK(x.Fence());
  KIT_OK(x.Post(all));
  KIT_OK(x.Start(all));
  const double mine = me;
  for (int r = 0; r < n; ++r) KIT_OK(x.Put(&mine, 1, kF64, r, static_cast<uint64_t>(40 + me), 1, kF64));
  KIT_OK(x.Complete());
  KIT_EXPECT(x.state() == "open", "%s: after a start and complete inside a fence's epoch: %s", what,
             std::string(x.state()));
  KIT_OK(x.Wait());
  for (int r = 0; r < n; ++r) want[static_cast<std::size_t>(40 + r)] = r;
  ExpectWindow(std::vector<double>(mem, mem + kGroupElems), want, what);
  KIT_OK(x.Fence());

  // Groups and calls out of turn.
  const int twice[] = {right, right};
  const int none[] = {n};
  KIT_EXPECT(x.Start(twice).code() == absl::StatusCode::kInvalidArgument, "%s: a start naming a rank twice", what);
  const absl::Status no_rank = x.Post(none);
  KIT_EXPECT(no_rank.code() == absl::StatusCode::kInvalidArgument && absl::StrContains(no_rank.message(), "no rank"),
             "%s: a post to rank %d: %s", what, n, no_rank.ToString());
  KIT_EXPECT(x.Complete().code() == absl::StatusCode::kFailedPrecondition, "%s: a complete with nothing started", what);
  KIT_EXPECT(x.Wait().code() == absl::StatusCode::kFailedPrecondition, "%s: a wait with nothing posted", what);
  KIT_EXPECT(x.Test().status().code() == absl::StatusCode::kFailedPrecondition, "%s: a test with nothing posted",
             what);
  KIT_EXPECT(x.state() == "open" && x.exposure() == "idle", "%s: after the refused calls: %s, exposure %s", what,
             std::string(x.state()), std::string(x.exposure()));
}

int GroupsMode(const Comm& w) {
  std::vector<double> own(kGroupElems, -1.0);
  auto created = Window::Create(w, own.data(), own.size() * sizeof(double), sizeof(double));
  KIT_OK(created.status());
  Groups(w, **created, "over the caller's memory");
  KIT_OK((*created)->Free());
  auto allocated = Window::Allocate(w, kGroupElems * sizeof(double), sizeof(double));
  KIT_OK(allocated.status());
  ExpectPath(**allocated, "the allocated window");
  std::fill_n(static_cast<double*>((*allocated)->base()), kGroupElems, -1.0);
  KIT_OK(cartage::Barrier(w));  // every rank's -1 in before any is read
  Groups(w, **allocated, "allocated");
  KIT_OK((*allocated)->Free());
  if (w.rank() == 0) std::printf("PASS rma groups (%d ranks)\n", w.size());
  return 0;
}

// A dynamic window: regions attached and detached while it lives, their
// addresses passed on by the program; puts, a get, accumulates and a
// fetch into them in fence and lock epochs; the refusals at the target of
// an access past a region and into a detached one (the target's fence
// fails, naming the origin; nothing is written); the errors of attach and
// detach.
int Dynamic(const Comm& w) {
  const int me = w.rank();
  const int n = w.size();
  const int right = (me + 1) % n;
  const int left = (me + n - 1) % n;
  const Datatype i64 = Datatype::Basic(BasicType::kInt64);
  auto made = Window::CreateDynamic(w);
  KIT_OK(made.status());
  Window& x = **made;
  KIT_EXPECT(x.dynamic() && !x.shared() && x.bytes() == 0, "a dynamic window: dynamic %d shared %d bytes %d",
             x.dynamic(), x.shared(), x.bytes());
  std::vector<double> block(kBig, -1.0);
  std::vector<int64_t> counters(8, 0);
  KIT_OK(x.Attach(block.data(), block.size() * sizeof(double)));
  KIT_OK(x.Attach(counters.data(), counters.size() * sizeof(int64_t)));
  // Every rank's two addresses, as the program passes them on.
  const uint64_t mine[2] = {Window::Address(block.data()), Window::Address(counters.data())};
  std::vector<uint64_t> at(2 * static_cast<std::size_t>(n));
  const Datatype u64 = Datatype::Basic(BasicType::kUint64);
  KIT_OK(cartage::Allgather(w, mine, at.data(), 2, u64));
  const auto block_of = [&](int r) { return at[2 * static_cast<std::size_t>(r)]; };
  const auto counters_of = [&](int r) { return at[2 * static_cast<std::size_t>(r) + 1]; };

  std::vector<double> src(kBig);
  for (int64_t i = 0; i < kBig; ++i) src[static_cast<std::size_t>(i)] = Value(me, i);
  KIT_OK(x.Fence());
  KIT_OK(x.Put(src.data(), kSmall, kF64, right, block_of(right), kSmall, kF64));
  KIT_OK(x.Put(src.data(), kBig - 100, kF64, right, block_of(right) + 100 * sizeof(double), kBig - 100, kF64));
  const int64_t add = me + 1;
  KIT_OK(x.Accumulate(&add, 1, i64, 0, counters_of(0), 1, i64, Op(OpKind::kSum)));
  KIT_OK(x.Fence());
  std::vector<double> want(kBig, -1.0);
  for (int64_t i = 0; i < kSmall; ++i) want[static_cast<std::size_t>(i)] = Value(left, i);
  for (int64_t i = 0; i < kBig - 100; ++i) want[static_cast<std::size_t>(100 + i)] = Value(left, i);
  ExpectWindow(block, want, "the dynamic window's block after the puts");
  if (me == 0) {
    KIT_EXPECT(counters[0] == int64_t{n} * (n + 1) / 2, "rank 0's counter after every rank's addition: %d",
               counters[0]);
  }
  // A get, and a fetch under a lock.
  std::vector<double> got(kSmall, -2.0);
  KIT_OK(x.Get(got.data(), kSmall, kF64, right, block_of(right), kSmall, kF64));
  KIT_OK(x.Fence());
  for (int64_t i = 0; i < kSmall; ++i) {
    KIT_EXPECT(got[static_cast<std::size_t>(i)] == Value(me, i), "dynamic get element %d: %g", i,
               got[static_cast<std::size_t>(i)]);
  }
  KIT_OK(x.Lock(0, Window::LockType::kExclusive));
  int64_t before = -1;
  KIT_OK(x.FetchAndOp(&add, &before, i64, 0, counters_of(0) + sizeof(int64_t), Op(OpKind::kSum)));
  KIT_OK(x.Unlock(0));
  KIT_OK(cartage::Barrier(w));
  if (me == 0) {
    KIT_EXPECT(counters[1] == int64_t{n} * (n + 1) / 2, "rank 0's second counter after every rank's fetch: %d",
               counters[1]);
  }

  // Errors of attach and detach.
  const absl::Status overlap = x.Attach(block.data() + 10, 8);
  KIT_EXPECT(overlap.code() == absl::StatusCode::kInvalidArgument && absl::StrContains(overlap.message(), "overlaps"),
             "an attach inside an attached region: %s", overlap.ToString());
  KIT_EXPECT(x.Attach(nullptr, 8).code() == absl::StatusCode::kInvalidArgument, "an attach of null");
  KIT_EXPECT(x.Detach(block.data() + 1).code() == absl::StatusCode::kInvalidArgument,
             "a detach where no region starts");
  std::vector<int64_t> plain(4);
  auto fixed = Window::Create(w, plain.data(), plain.size() * sizeof(int64_t), 8);
  KIT_OK(fixed.status());
  KIT_EXPECT((*fixed)->Attach(plain.data(), 8).code() == absl::StatusCode::kFailedPrecondition,
             "an attach to a window that is not dynamic");
  KIT_OK((*fixed)->Free());

  // Refused at the target: rank 1 puts past the end of rank 0's block and
  // into its counters, detached; rank 0's fence fails naming rank 1, and
  // neither is written.
  KIT_OK(x.Detach(counters.data()));
  KIT_OK(cartage::Barrier(w));  // detached before anyone reaches for it
  const std::vector<double> block_before = block;
  const std::vector<int64_t> counters_before = counters;
  KIT_OK(x.Fence());
  if (me == 1) {
    KIT_OK(x.Put(src.data(), 8, kF64, 0, block_of(0) + (kBig - 4) * sizeof(double), 8, kF64));
    KIT_OK(x.Put(&add, 1, i64, 0, counters_of(0), 1, i64));
  }
  const absl::Status fenced = x.Fence();
  if (me == 0) {
    KIT_EXPECT(fenced.code() == absl::StatusCode::kInvalidArgument && absl::StrContains(fenced.message(), "rank 1") &&
                   absl::StrContains(fenced.message(), "in no region attached to this window"),
               "rank 0's fence after accesses outside its regions: %s", fenced.ToString());
  } else {
    KIT_OK(fenced);
  }
  ExpectWindow(block, block_before, "the block after the refused put");
  KIT_EXPECT(counters == counters_before, "the detached counters were written");
  KIT_OK(x.Free());
  if (me == 0) std::printf("PASS rma dynamic (%d ranks)\n", n);
  return 0;
}

// The last rank leaves once the window is made: the others' start towards
// it, and their wait for it, fail naming it, and none hangs.
int GroupDead(const Comm& w) {
  const int me = w.rank();
  const int n = w.size();
  const Comm survivors = Survivors(w);
  auto win = Window::Allocate(w, 64, 8);
  KIT_OK(win.status());
  ExpectPath(**win, "the window");
  KIT_OK(cartage::Barrier(w));
  if (me == n - 1) {
    std::fflush(stdout);
    _exit(0);  // gone without finalizing
  }
  const int last[] = {n - 1};
  const std::string named = "rank " + std::to_string(n - 1);
  absl::Status posted = (*win)->Post(last);
  const absl::Status started = (*win)->Start(last);
  KIT_EXPECT(!started.ok() && absl::StrContains(started.message(), named), "a start towards dead %s: %s", named,
             started.ToString());
  KIT_EXPECT((*win)->state() == "failed", "after the failed start the window is %s", std::string((*win)->state()));
  std::printf("rank %d: the start failed: %s\n", me, started.ToString().c_str());
  if (posted.ok()) posted = (*win)->Wait();
  KIT_EXPECT(!posted.ok() && absl::StrContains(posted.message(), named), "a wait for dead %s: %s", named,
             posted.ToString());
  std::printf("rank %d: the wait failed: %s\n", me, posted.ToString().c_str());
  std::fflush(stdout);
  KIT_OK(cartage::Barrier(survivors));
  return 0;
}

// A shared window (AllocateShared): each rank's memory right after the
// previous rank's, the program's own stores into another rank's memory
// seen there after a fence, operations on it, plain increments of one
// element under exclusive locks ordered by Sync (only exclusion makes the
// count), and the errors of SharedQuery and of an access outside it.
// Where the ranks cannot map each other's memory, every rank is refused.
int Shared(const Comm& w) {
  const int me = w.rank();
  const int n = w.size();
  const Datatype i64 = Datatype::Basic(BasicType::kInt64);
  const auto elems = [](int r) { return int64_t{16} + r; };  // uneven sizes: contiguity at odd offsets
  auto made = Window::AllocateShared(w, static_cast<uint64_t>(elems(me)) * sizeof(int64_t), sizeof(int64_t));
  if (!g_expect_shared) {
    KIT_EXPECT(made.status().code() == absl::StatusCode::kFailedPrecondition &&
                   absl::StrContains(made.status().message(), "cannot map"),
               "allocate_shared where the ranks cannot map each other's memory: %s", made.status().ToString());
    if (me == 0) std::printf("PASS rma shared refused (%d ranks)\n", n);
    return 0;
  }
  KIT_OK(made.status());
  Window& x = **made;
  ExpectPath(x, "the shared window");
  std::vector<int64_t*> at(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) {
    auto q = x.SharedQuery(r);
    KIT_OK(q.status());
    KIT_EXPECT(q->bytes == static_cast<uint64_t>(elems(r)) * sizeof(int64_t) && q->disp_unit == 8,
               "rank %d's memory: %d bytes, unit %d", r, q->bytes, q->disp_unit);
    at[static_cast<std::size_t>(r)] = static_cast<int64_t*>(q->base);
    if (r > 0) {
      KIT_EXPECT(at[static_cast<std::size_t>(r)] == at[static_cast<std::size_t>(r - 1)] + elems(r - 1),
                 "rank %d's memory does not follow rank %d's", r, r - 1);
    }
  }
  int64_t* mine = at[static_cast<std::size_t>(me)];
  KIT_EXPECT(mine == x.base(), "SharedQuery(%d) is not this rank's base", me);
  for (int64_t i = 0; i < elems(me); ++i) KIT_EXPECT(mine[i] == 0, "element %d starts as %d", i, mine[i]);
  const int right = (me + 1) % n;
  const int left = (me + n - 1) % n;
  KIT_OK(x.Fence());
  for (int64_t i = 0; i < 16; ++i) at[static_cast<std::size_t>(right)][i] = me * 1000 + i;
  KIT_OK(x.Fence());
  for (int64_t i = 0; i < 16; ++i) {
    KIT_EXPECT(mine[i] == left * 1000 + i, "element %d, stored by rank %d, reads %d", i, left, mine[i]);
  }
  // The next epoch's operations land as they are issued: not before every
  // rank has read this one's.
  KIT_OK(cartage::Barrier(w));
  // Operations: a put into the left neighbour's last element, every rank's
  // addition to rank 0's element 1.
  const int64_t v = 7 + me;
  KIT_OK(x.Put(&v, 1, i64, left, static_cast<uint64_t>(elems(left) - 1), 1, i64));
  const int64_t add = me + 1;
  KIT_OK(x.Accumulate(&add, 1, i64, 0, 1, 1, i64, Op(OpKind::kSum)));
  KIT_OK(x.Fence());
  KIT_EXPECT(mine[elems(me) - 1] == 7 + right, "the last element reads %d, rank %d put %d", mine[elems(me) - 1], right,
             7 + right);
  if (me == 0) {
    KIT_EXPECT(mine[1] == (n - 1) * 1000 + 1 + n * (n + 1) / 2, "element 1 after every rank's addition: %d", mine[1]);
  }
  // Plain increments under an exclusive lock.
  for (int k = 0; k < 50; ++k) {
    KIT_OK(x.Lock(0, Window::LockType::kExclusive));
    KIT_OK(x.Sync());
    at[0][2] += 1;
    KIT_OK(x.Sync());
    KIT_OK(x.Unlock(0));
  }
  KIT_OK(cartage::Barrier(w));
  KIT_OK(x.Sync());
  KIT_EXPECT(at[0][2] == (n - 1) * 1000 + 2 + 50 * n, "rank 0's element 2 after %d locked increments: %d", 50 * n,
             at[0][2]);
  // Errors.
  KIT_OK(x.Lock(right, Window::LockType::kShared));
  const absl::Status outside = x.Put(&v, 1, i64, right, static_cast<uint64_t>(elems(right)), 1, i64);
  KIT_EXPECT(outside.code() == absl::StatusCode::kOutOfRange && absl::StrContains(outside.message(), "window"),
             "a put past rank %d's memory: %s", right, outside.ToString());
  KIT_OK(x.Unlock(right));
  KIT_EXPECT(x.SharedQuery(n).status().code() == absl::StatusCode::kInvalidArgument, "shared_query of rank %d", n);
  // A segment /dev/shm cannot hold is refused on every rank, before any
  // page of it could fault.
  auto huge = Window::AllocateShared(w, uint64_t{1} << 46, 1);
  KIT_EXPECT(huge.status().code() == absl::StatusCode::kResourceExhausted &&
                 absl::StrContains(huge.status().message(), "shared segment"),
             "a 64 TiB shared window: %s", huge.status().ToString());
  KIT_OK(cartage::Barrier(w));
  KIT_OK(x.Free());
  KIT_EXPECT(x.Sync().code() == absl::StatusCode::kFailedPrecondition, "sync after free");
  std::vector<int64_t> own(4);
  auto created = Window::Create(w, own.data(), own.size() * sizeof(int64_t), sizeof(int64_t));
  KIT_OK(created.status());
  KIT_EXPECT(!(*created)->shared() && (*created)->SharedQuery(0).status().code() == absl::StatusCode::kFailedPrecondition,
             "a window over the caller's memory is not shared");
  KIT_OK((*created)->Free());
  if (me == 0) std::printf("PASS rma shared (%d ranks)\n", n);
  return 0;
}

// The last rank dies holding an exclusive lock on rank 0's shared window:
// every other rank's lock on it fails, naming it, and none hangs.
int LockDead(const Comm& w) {
  const int me = w.rank();
  const int n = w.size();
  const Comm survivors = Survivors(w);
  auto made = Window::Allocate(w, 64, 8);
  KIT_OK(made.status());
  Window& x = **made;
  ExpectPath(x, "the window");
  if (me == n - 1) {
    KIT_OK(x.Lock(0, Window::LockType::kExclusive));
    KIT_OK(cartage::Barrier(w));  // the others ask only once it holds the lock
    char go = 0;
    KIT_OK(w.Recv(&go, 1, 0, 7));  // rank 0 is through the barrier too
    std::fflush(stdout);
    _exit(0);  // gone without finalizing, the lock held
  }
  KIT_OK(cartage::Barrier(w));
  if (me == 0) KIT_OK(w.Send("g", 1, n - 1, 7));
  const absl::Status s = x.Lock(0, Window::LockType::kExclusive);
  KIT_EXPECT(!s.ok(), "a lock held by dead rank %d was granted", n - 1);
  KIT_EXPECT(absl::StrContains(s.message(), "rank " + std::to_string(n - 1)), "the error does not name rank %d: %s",
             n - 1, s.ToString());
  KIT_EXPECT(x.state() != "passive", "after the failed lock the window is %s", std::string(x.state()));
  std::printf("rank %d: the lock failed: %s\n", me, s.ToString().c_str());
  std::fflush(stdout);
  KIT_OK(cartage::Barrier(survivors));
  return 0;
}

// A served window's small operations to one target travel together: one
// control message carries a series of them (and a lock's requests), and
// leaves once the next would not fit, once an operation's data follows
// apart, or once an epoch's call or a request's wait needs them done.
int Batching(const Comm& w) {
  const int me = w.rank();
  const int n = w.size();
  const int right = (me + 1) % n;
  const int left = (me + n - 1) % n;
  auto made = Window::Allocate(w, kElems * sizeof(double), sizeof(double));
  KIT_OK(made.status());
  Window& x = **made;
  ExpectPath(x, "batching");
  double* mem = static_cast<double*>(x.base());
  std::fill(mem, mem + kElems, -1.0);
  std::vector<double> src(kBig);
  for (int64_t i = 0; i < kBig; ++i) src[static_cast<std::size_t>(i)] = Value(me, i);
  std::vector<double> want(kElems, -1.0);
  const auto expect_from_left = [&](int64_t at, int64_t count, int64_t from) {
    for (int64_t i = 0; i < count; ++i) want[static_cast<std::size_t>(at + i)] = Value(left, from + i);
  };
  const auto sent_since = [&x](uint64_t before) { return x.control_messages() - before; };
  KIT_OK(x.Fence());

  // 64 puts of one element: one record each, all in one message, which
  // leaves with the fence.
  uint64_t before = x.control_messages();
  for (int64_t i = 0; i < 64; ++i) KIT_OK(x.Put(&src[static_cast<std::size_t>(i)], 1, kF64, right, i, 1, kF64));
  KIT_EXPECT(sent_since(before) == 0, "64 small puts sent %d control messages before the fence", sent_since(before));
  KIT_OK(x.Fence());
  KIT_EXPECT(sent_since(before) == 1, "64 small puts and a fence: %d control messages", sent_since(before));
  expect_from_left(0, 64, 0);
  ExpectWindow(std::vector<double>(mem, mem + kElems), want, "after 64 batched puts");
  KIT_OK(cartage::Barrier(w));  // read before the next epoch's puts land

  // A put whose data goes apart closes the batch its record joins.
  before = x.control_messages();
  for (int64_t i = 0; i < 10; ++i) KIT_OK(x.Put(&src[static_cast<std::size_t>(i)], 1, kF64, right, 100 + i, 1, kF64));
  KIT_OK(x.Put(src.data(), kBig - 200, kF64, right, 200, kBig - 200, kF64));
  KIT_EXPECT(sent_since(before) == 1, "10 small puts and a large one: %d control messages", sent_since(before));
  for (int64_t i = 0; i < 10; ++i) KIT_OK(x.Put(&src[static_cast<std::size_t>(i)], 1, kF64, right, 110 + i, 1, kF64));
  KIT_OK(x.Fence());
  KIT_EXPECT(sent_since(before) == 2, "10 small, a large, 10 small and a fence: %d control messages",
             sent_since(before));
  expect_from_left(100, 10, 0);
  expect_from_left(110, 10, 0);
  expect_from_left(200, kBig - 200, 0);
  ExpectWindow(std::vector<double>(mem, mem + kElems), want, "after the small puts around a large one");
  KIT_OK(cartage::Barrier(w));

  // 200 puts of 64 bytes: records of 112 bytes (header 32, one block 16,
  // data 64), 73 to a batch of at most 8 KiB: three messages.
  before = x.control_messages();
  const int64_t at = kBig;  // past the large put
  for (int64_t i = 0; i < 200; ++i) {
    KIT_OK(x.Put(&src[static_cast<std::size_t>(8 * i)], 8, kF64, right, at + 8 * i, 8, kF64));
  }
  KIT_EXPECT(sent_since(before) == 2, "200 puts of 64 bytes before the fence: %d control messages",
             sent_since(before));
  KIT_OK(x.Fence());
  KIT_EXPECT(sent_since(before) == 3, "200 puts of 64 bytes and a fence: %d control messages", sent_since(before));
  expect_from_left(at, 1600, 0);
  ExpectWindow(std::vector<double>(mem, mem + kElems), want, "after 200 puts of 64 bytes");
  KIT_OK(cartage::Barrier(w));

  // A request's progress sends the batch that holds its operation (its
  // wait needs it sent).
  before = x.control_messages();
  cartage::Request req;
  KIT_OK(x.Rput(src.data(), 4, kF64, right, kElems - 100, 4, kF64, &req));
  KIT_OK(req.Wait());
  KIT_EXPECT(sent_since(before) == 1, "a small rput's wait: %d control messages", sent_since(before));
  KIT_OK(x.Fence());
  expect_from_left(kElems - 100, 4, 0);

  // A lock, five accumulates, a fetch and the unlock: one message (the
  // answers come back apart).
  const int64_t counter = kElems - 1;
  mem[counter] = 0.0;
  KIT_OK(cartage::Barrier(w));
  before = x.control_messages();
  KIT_OK(x.Lock(right, Window::LockType::kExclusive));
  const double add = me + 1.0;
  for (int i = 0; i < 5; ++i) KIT_OK(x.Accumulate(&add, 1, kF64, right, counter, 1, kF64, Op(OpKind::kSum)));
  double fetched = -1.0;
  const double one = 1.0;
  KIT_OK(x.FetchAndOp(&one, &fetched, kF64, right, counter, Op(OpKind::kSum)));
  KIT_OK(x.Unlock(right));
  KIT_EXPECT(sent_since(before) == 1, "lock, 5 accumulates, a fetch and the unlock: %d control messages",
             sent_since(before));
  KIT_EXPECT(fetched == 5 * add, "the fetch after 5 accumulates of %g got %g", add, fetched);
  KIT_OK(cartage::Barrier(w));
  KIT_EXPECT(mem[counter] == 5 * (left + 1.0) + 1.0, "the counter after the locked accumulates: %g", mem[counter]);
  want[static_cast<std::size_t>(counter)] = mem[counter];
  ExpectWindow(std::vector<double>(mem, mem + kElems), want, "after the locked epoch");
  KIT_OK(x.Free());
  if (me == 0) std::printf("PASS rma batching (%d ranks)\n", n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  g_expect_shared = argc <= 2 || std::string(argv[2]) == "shared";
  g_expect_one_sided = argc > 2 && std::string(argv[2]) == "one-sided";
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "rma_ranks: %s\n", agent.status().ToString().c_str());
    return 1;
  }
  const Comm w = (*agent)->World();
  kit::t_rank = w.rank();
  if (mode == "matrix") return Matrix(w);
  if (mode == "dead") return Dead(w);
  if (mode == "passive") return Passive(w, false);
  if (mode == "computing") return Passive(w, true);
  if (mode == "torn") return Torn(w);
  if (mode == "shared") return Shared(w);
  if (mode == "lockdead") return LockDead(w);
  if (mode == "groups") return GroupsMode(w);
  if (mode == "groupdead") return GroupDead(w);
  if (mode == "dynamic") return Dynamic(w);
  if (mode == "batching") return Batching(w);
  if (mode == "unallocatable") return Unallocatable(w);
  std::fprintf(stderr,
               "usage: rma_ranks matrix|passive|computing|torn|dead|shared|lockdead|groups|groupdead|dynamic|batching|unallocatable [shared|served|one-sided]\n");
  return 2;
}
