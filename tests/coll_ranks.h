// What the parts of coll_ranks (the rank side of the collective tests)
// share: the element types the calls run over, what a rank's buffers hold
// before and after, and each part's entry points.
#ifndef CARTAGE_TESTS_COLL_RANKS_H_
#define CARTAGE_TESTS_COLL_RANKS_H_

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "datatype/segment_walk.h"
#include "cartage/cartage.h"
#include "kit/check.h"
#include "cartage/collectives.h"
#include "cartage/engine.h"
#include "cartage/xfer.h"

namespace cartage::test::coll {

using cartage::BasicType;
using cartage::Collective;
using cartage::CollectiveCall;
using cartage::Comm;
using cartage::Datatype;
using cartage::Op;
using cartage::OpKind;
using cartage::Request;
using Bytes = std::vector<unsigned char>;

namespace kit = cartage::kit;

// The affine map x -> a x + b (mod P), composed: (f op g)(x) = f(g(x)).
// Associative, not commutative.
constexpr int64_t kP = 1000003;
struct Affine {
  int32_t a, b;
};

struct TypeCase {
  const char* name;
  Datatype type;
  std::optional<Op> op;  // for reductions
  // The packed bytes of element `idx` of rank `rank`'s input.
  std::function<void(int rank, int64_t idx, unsigned char* out)> gen;
  // inout = in op inout, one packed element.
  std::function<void(const unsigned char* in, unsigned char* inout)> ref;
};

// Blocks of packed elements at displacements (in extents): a buffer's contents.
struct Piece {
  int64_t displ;
  Bytes packed;
};
constexpr unsigned char kSentinel = 0xAB;  // gaps, which must survive
constexpr unsigned char kGarbage = 0x5A;   // what a collective must overwrite

// What one rank's buffers hold before and after a call.
struct Plan {
  std::vector<Piece> send;
  int64_t send_span = 0;
  std::vector<Piece> before;  // the receive buffer before (in place: the input)
  std::vector<Piece> after;   // and after
  int64_t recv_span = 0;
  int64_t compare_span = -1;  // >= 0: only these leading elements are defined afterwards
  bool recv_in_place = false;  // scatter(v)'s root: kInPlace as the receive buffer
};

// Element types, their values, their reference reductions, and checking
// every algorithm of every collective against them (coll_ranks_reference.cc).
Affine Compose(Affine f, Affine g);
void AffineOp(const void* in, void* inout, int64_t count, const Datatype&, void*);
std::vector<TypeCase> Types();
// `elems` packed elements of rank `rank`, starting at global index `base`.
Bytes Packed(const TypeCase& t, int rank, int64_t base, int64_t elems);
// The reduction of ranks' elements [base, base + elems) over `ranks`, in order.
Bytes Reduced(const TypeCase& t, const std::vector<int>& ranks, int64_t base, int64_t elems);
// The layout of `span` elements: sentinel bytes, with the pieces unpacked in.
Bytes Layout(const TypeCase& t, const std::vector<Piece>& pieces, int64_t span);
// Garbage a collective must overwrite, `elems` elements of it.
Bytes Filler(const TypeCase& t, int64_t elems);
// What rank `r` of `n` sends and holds before and after `call`, its
// buffers pointed at them.
Plan MakePlan(const TypeCase& t, CollectiveCall& call, int r, int n, bool in_place);
void Check(const Comm& w, const TypeCase& t, CollectiveCall call, bool in_place, bool nonblocking);
void Algorithms(const Comm& w, const std::string& only);

// Persistent schedules, concurrent calls, the selection table
// (coll_ranks_calls.cc).
CollectiveCall SumCall(const void* in, void* out, int64_t count, BasicType type, const char* alg = "");
void Persistent(const Comm& w);
void Concurrent(const Comm& w);
// Selection and Faults return whether the job may end with a barrier.
bool Selection(const Comm& w);

// Failed calls end on every rank (coll_ranks_faults.cc).
void ExpectNothingLeft(const Comm& w, const char* after);
bool Faults(const Comm& w, const std::string& what);

// Collectives whose sides differ in type, and alltoallw (coll_ranks_types.cc).
void TwoTypes(const Comm& w);

// Seed 002's xfer blocks and a burst of large sends (coll_ranks_xfer.cc).
void Burst(const Comm& w);
void XferChains(const Comm& w);

}  // namespace cartage::test::coll

#endif  // CARTAGE_TESTS_COLL_RANKS_H_
