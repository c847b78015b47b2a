// The kit's datatype case: non-contiguous layouts on either side.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "cartage/cartage.h"
#include "kit/cases.h"
#include "kit/check.h"

namespace cartage::kit {

// Value of matrix element (r, c) as rank `from` fills it.
double Cell(int from, int64_t r, int64_t c) {
  return from * 1e9 + static_cast<double>(r) * 1000 + static_cast<double>(c);
}

// Columns of a rows x cols matrix go out as a vector type and land in a
// contiguous buffer on the other side, and back into a column (different
// types, one signature), at eager, pipelined and (CMA_MIN=0) rendezvous sizes;
// expected unexpected; a struct with gaps keeps its gaps; a typed receive too
// short is truncated element-exactly; a column to oneself.
void Datatypes(const Comm& w, Agent&) {
  const Datatype dbl = Datatype::Basic(BasicType::kDouble);
  const int me = w.rank();
  const int peer = w.size() > 1 ? 1 - me : me;
  if (me > 1) return;
  for (int64_t rows : {1L, 7L, 900L, 40000L}) {  // 8 B .. 320 KB of column data
    constexpr int64_t kCols = 5;
    const Datatype column = *Datatype::Vector(rows, 1, kCols, dbl);
    std::vector<double> m(static_cast<std::size_t>(rows * kCols));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < kCols; ++c) m[static_cast<std::size_t>(r * kCols + c)] = Cell(me, r, c);
    }
    // Column 3 out as a vector; the peer's column 3 in, contiguously.
    std::vector<double> flat(static_cast<std::size_t>(rows) + 1, -1.0);
    Request rr, sr;
    KIT_OK(w.Irecv(flat.data(), rows, dbl, peer, 20, &rr));
    KIT_OK(w.Isend(&m[3], 1, column, peer, 20, &sr));
    KIT_OK(WaitAll({&rr, &sr}));
    KIT_EXPECT(rr.bytes() == static_cast<uint64_t>(rows) * 8, "rows %d: %d bytes", rows, rr.bytes());
    for (int64_t r = 0; r < rows; ++r) {
      KIT_EXPECT(flat[static_cast<std::size_t>(r)] == Cell(peer, r, 3), "rows %d: element %d is %f", rows, r,
             flat[static_cast<std::size_t>(r)]);
    }
    KIT_EXPECT(flat.back() == -1.0, "rows %d: wrote past the contiguous buffer", rows);
    // Contiguous out, into column 1 of a fresh matrix; the other columns untouched.
    std::vector<double> into(m.size(), -2.0);
    KIT_OK(w.Irecv(&into[1], 1, column, peer, 21, &rr));
    KIT_OK(w.Isend(flat.data(), rows, dbl, peer, 21, &sr));
    KIT_OK(WaitAll({&rr, &sr}));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < kCols; ++c) {
        const double want = c == 1 ? Cell(me, r, 3) : -2.0;  // our own column 3, back via the peer
        KIT_EXPECT(into[static_cast<std::size_t>(r * kCols + c)] == want, "rows %d: (%d, %d) is %f, want %f", rows, r,
               c, into[static_cast<std::size_t>(r * kCols + c)], want);
      }
    }
    // Unexpected: the message is waiting before the typed receive is posted.
    std::fill(into.begin(), into.end(), -3.0);
    KIT_OK(w.Isend(&m[2], 1, column, peer, 22, &sr));
    KIT_OK(w.Probe(peer, 22).status());
    KIT_OK(w.Recv(&into[4], 1, column, peer, 22));
    KIT_OK(sr.Wait());
    for (int64_t r = 0; r < rows; ++r) {
      KIT_EXPECT(into[static_cast<std::size_t>(r * kCols + 4)] == Cell(peer, r, 2), "rows %d: unexpected row %d", rows, r);
      KIT_EXPECT(into[static_cast<std::size_t>(r * kCols + 3)] == -3.0, "rows %d: unexpected wrote column 3", rows);
    }
  }
  // struct { int32 a; [4-byte gap] double x; } x 3000: gaps keep their bytes.
  struct Rec {
    int32_t a;
    int32_t gap;
    double x;
  };
  const int64_t bl[] = {1, 1}, disp[] = {offsetof(Rec, a), offsetof(Rec, x)};
  const Datatype parts[] = {Datatype::Basic(BasicType::kInt32), dbl};
  const Datatype rec = *Datatype::Struct(bl, disp, parts);
  constexpr int kRecs = 3000;
  std::vector<Rec> out(kRecs), in(kRecs);
  for (int i = 0; i < kRecs; ++i) {
    out[i] = {i * 3 + me, 0x5eed, i * 0.25 + me};
    in[i] = {-1, 0x7777, -1.0};
  }
  Request rr, sr;
  KIT_OK(w.Irecv(in.data(), kRecs, rec, peer, 23, &rr));
  KIT_OK(w.Isend(out.data(), kRecs, rec, peer, 23, &sr));
  KIT_OK(WaitAll({&rr, &sr}));
  KIT_EXPECT(rr.bytes() == kRecs * 12u, "struct: %d bytes", rr.bytes());
  for (int i = 0; i < kRecs; ++i) {
    KIT_EXPECT(in[i].a == i * 3 + peer && in[i].x == i * 0.25 + peer && in[i].gap == 0x7777, "struct %d: %d %d %f", i,
           in[i].a, in[i].gap, in[i].x);
  }
  // Truncation: 10 doubles into a 4-element column receive.
  const Datatype col4 = *Datatype::Vector(4, 1, 2, dbl);
  std::vector<double> ten(10), grid(8, -5.0);
  for (int i = 0; i < 10; ++i) ten[static_cast<std::size_t>(i)] = 100 + i;
  KIT_OK(w.Irecv(grid.data(), 1, col4, peer, 24, &rr));
  KIT_OK(w.Isend(ten.data(), 10, dbl, peer, 24, &sr));
  const absl::Status t = rr.Wait();
  KIT_OK(sr.Wait());
  KIT_EXPECT(t.code() == absl::StatusCode::kOutOfRange, "typed truncation gave %s", t.ToString());
  for (int i = 0; i < 8; ++i) {
    const double want = i % 2 == 0 ? 100 + i / 2 : -5.0;
    KIT_EXPECT(grid[static_cast<std::size_t>(i)] == want, "truncated grid[%d] = %f", i, grid[static_cast<std::size_t>(i)]);
  }
  // A bad count is refused at once, naming the operation and the type.
  const absl::Status bad = w.Isend(ten.data(), -1, dbl, peer, 25, &sr);
  KIT_EXPECT(bad.code() == absl::StatusCode::kInvalidArgument &&
             bad.message().find("invalid count -1 of double") != std::string::npos,
         "bad count gave %s", bad.ToString());
  // A column to oneself (the self method packs it once).
  std::vector<double> m(30), col(10, 0);
  for (int i = 0; i < 30; ++i) m[static_cast<std::size_t>(i)] = i;
  const Datatype self_col = *Datatype::Vector(10, 1, 3, dbl);
  KIT_OK(w.Irecv(col.data(), 10, dbl, me, 26, &rr));
  KIT_OK(w.Send(&m[1], 1, self_col, me, 26));
  KIT_OK(rr.Wait());
  for (int i = 0; i < 10; ++i) KIT_EXPECT(col[static_cast<std::size_t>(i)] == 3 * i + 1, "self column %d", i);
}

}  // namespace cartage::kit
