// Steps that several algorithms share: the sinks of a phase, and the
// butterfly (recursive halving and doubling) over a power of two of ranks,
// with the folding that makes it work for any rank count (MPICH's scheme).
#include <vector>

#include "absl/strings/str_format.h"
#include "collectives/algorithms.h"

namespace cartage::alg {

std::vector<VertexId> SinksSince(const ScheduleBuilder& b, std::size_t first) {
  std::vector<bool> has_succ(b.vertices().size(), false);
  for (std::size_t v = first; v < b.vertices().size(); ++v) {
    for (const Edge& e : b.vertices()[v].after) has_succ[static_cast<std::size_t>(e.from)] = true;
  }
  std::vector<VertexId> sinks;
  for (std::size_t v = first; v < has_succ.size(); ++v) {
    if (!has_succ[v]) sinks.push_back(static_cast<VertexId>(v));
  }
  return sinks;
}

Fold MakeFold(int r, int n) {
  Fold f;
  while (f.pof2 * 2 <= n) f.pof2 *= 2;
  f.rem = n - f.pof2;
  f.newrank = r < 2 * f.rem ? (r % 2 == 0 ? -1 : r / 2) : r - f.rem;
  return f;
}

std::vector<VertexId> FoldIn(Ctx& c, const Fold& f, Buf acc, Buf tmp, int64_t elems, std::vector<VertexId> after,
                             const Buf* input) {
  if (c.r >= 2 * f.rem) return after;
  if (c.r % 2 == 0) {
    VertexId s = c.b.Send(input != nullptr ? *input : acc, c.Bytes(elems), c.r + 1, after);
    c.b.Note(s, "fold");
    return {s};
  }
  if (input != nullptr) {  // the even rank's vector straight into acc, this rank's reduced into it from the input
    VertexId got = c.b.Recv(acc, c.Bytes(elems), c.r - 1, after);
    c.b.Note(got, "fold");
    return {c.Reduce(*input, acc, elems, {got}, /*in_is_left=*/false)};  // the lower rank is the left operand
  }
  VertexId got = c.b.Recv(tmp, c.Bytes(elems), c.r - 1, after);
  c.b.Note(got, "fold");
  after.push_back(got);
  return {c.Reduce(tmp, acc, elems, after)};  // the lower rank is the left operand
}

std::vector<VertexId> HalvingReduceScatter(Ctx& c, const Fold& f, Buf acc, Buf tmp, const std::vector<int64_t>& start,
                                           const std::vector<VertexId>& after, const Buf* input) {
  std::vector<VertexId> made;
  std::vector<VertexId> deps = after;
  const int nr = f.newrank;
  int send_idx = 0, recv_idx = 0, last_idx = f.pof2;
  auto at = [&](Buf base, int idx) { return base + c.Bytes(start[static_cast<std::size_t>(idx)]); };
  auto span = [&](int lo, int hi) {
    return start[static_cast<std::size_t>(hi)] - start[static_cast<std::size_t>(lo)];
  };
  for (int mask = f.pof2 >> 1; mask > 0; mask >>= 1) {
    const int newdst = nr ^ mask;
    const int dst = f.Rank(newdst);
    int send_lo, send_hi, recv_lo, recv_hi;
    if (nr < newdst) {  // keep the lower half
      send_idx = recv_idx + mask;
      send_lo = send_idx, send_hi = last_idx, recv_lo = recv_idx, recv_hi = send_idx;
    } else {
      recv_idx = send_idx + mask;
      send_lo = send_idx, send_hi = recv_idx, recv_lo = recv_idx, recv_hi = last_idx;
    }
    VertexId s, got, red;
    if (input != nullptr && mask == f.pof2 >> 1) {
      // The first step with the input elsewhere: the half that goes leaves
      // from there, the partner's half of the kept one arrives straight in
      // acc, and this rank's is reduced into it (acc is written by nothing
      // else yet, and the send reads the input only).
      s = c.b.Send(at(*input, send_lo), c.Bytes(span(send_lo, send_hi)), dst, deps);
      got = c.b.Recv(at(acc, recv_lo), c.Bytes(span(recv_lo, recv_hi)), dst, deps);
      red = c.Reduce(at(*input, recv_lo), at(acc, recv_lo), span(recv_lo, recv_hi), {got}, /*in_is_left=*/c.r < dst);
    } else {
      s = c.b.Send(at(acc, send_lo), c.Bytes(span(send_lo, send_hi)), dst, deps);
      got = c.b.Recv(at(tmp, recv_lo), c.Bytes(span(recv_lo, recv_hi)), dst, deps);
      red = c.Reduce(at(tmp, recv_lo), at(acc, recv_lo), span(recv_lo, recv_hi), {s, got}, /*in_is_left=*/dst < c.r);
    }
    c.b.Note(s, absl::StrFormat("halving %d", mask));
    c.b.Note(got, absl::StrFormat("halving %d", mask));
    made.insert(made.end(), {s, got, red});
    deps = {red};
    send_idx = recv_idx;
    last_idx = recv_idx + mask;
  }
  return made;
}

std::vector<VertexId> DoublingAllgather(Ctx& c, const Fold& f, Buf acc, const std::vector<int64_t>& start,
                                        const std::vector<VertexId>& after, const std::vector<VertexId>& recv_after,
                                        const Buf* first_from) {
  std::vector<VertexId> made;
  std::vector<VertexId> send_deps = after;
  std::vector<VertexId> recv_deps = recv_after;
  const int nr = f.newrank;
  auto at = [&](int idx) { return acc + c.Bytes(start[static_cast<std::size_t>(idx)]); };
  auto bytes = [&](int lo, int n) {
    return c.Bytes(start[static_cast<std::size_t>(lo + n)] - start[static_cast<std::size_t>(lo)]);
  };
  for (int mask = 1; mask < f.pof2; mask <<= 1) {
    const int base = nr & ~(mask - 1);  // the new ranks whose data this rank holds: [base, base + mask)
    const int theirs = base ^ mask;
    const int dst = f.Rank(nr ^ mask);
    VertexId s = mask == 1 && first_from != nullptr ? c.b.Send(*first_from, bytes(base, mask), dst)
                                                    : c.b.Send(at(base), bytes(base, mask), dst, send_deps);
    VertexId got = c.b.Recv(at(theirs), bytes(theirs, mask), dst, recv_deps);
    c.b.Note(s, absl::StrFormat("doubling %d", mask));
    c.b.Note(got, absl::StrFormat("doubling %d", mask));
    made.insert(made.end(), {s, got});
    if (mask == 1 && first_from != nullptr) send_deps = after;  // later rounds send it from acc, once copied
    send_deps.push_back(got);
  }
  return made;
}

}  // namespace cartage::alg
