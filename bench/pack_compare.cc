// Pack / unpack throughput of vector types through the segment engine, beside
// memcpy of the same packed bytes: the cartage side of bench/run-pack.sh,
// with the same types and timing loop as the MPI peer (bench/peers/).
//
// usage: cartage-pack-bench [REPS]
#include <cstdlib>
#include <cstring>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"  // a C header, shared with the MPI peer
#include "bench/peers/pack_harness.h"
#pragma GCC diagnostic pop
#include "datatype/segment_walk.h"
#include "datatype/datatype.h"

namespace {

using cartage::datatype::BasicType;
using cartage::datatype::Datatype;

constexpr long kPacked = 1L << 20;

struct Ctx {
  const Datatype* type;
  std::byte* user;
  std::byte* packed;
};

void DoPack(void* p) {
  auto* c = static_cast<Ctx*>(p);
  cartage::datatype::Pack(c->user, 1, *c->type, 0, kPacked, c->packed);
}
void DoUnpack(void* p) {
  auto* c = static_cast<Ctx*>(p);
  cartage::datatype::Unpack(c->packed, 1, *c->type, 0, kPacked, c->user);
}
void DoMemcpy(void* p) {
  auto* c = static_cast<Ctx*>(p);
  std::memcpy(c->packed, c->user, kPacked);
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 7;
  for (long block : {8L, 64L, 1024L}) {
    const Datatype type =
        *Datatype::Vector(kPacked / block, block / 8, 2 * (block / 8), Datatype::Basic(BasicType::kDouble));
    Ctx c{&type, static_cast<std::byte*>(pack_harness_alloc(2 * kPacked)),
          static_cast<std::byte*>(pack_harness_alloc(kPacked))};
    pack_harness_run("cartage", "pack", block, kPacked, reps, DoPack, &c);
    pack_harness_run("cartage", "unpack", block, kPacked, reps, DoUnpack, &c);
    pack_harness_run("memcpy", "copy", block, kPacked, reps, DoMemcpy, &c);
    std::free(c.user);
    std::free(c.packed);
  }
  return 0;
}
