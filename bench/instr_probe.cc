// instr-probe: what one 8-byte message and one 2-rank barrier cost in
// instructions, counted by callgrind (bench/run-instructions.sh), with no
// waiting in the count. bench/peers/instr_mpi.c is the same program over MPI.
//
// Ranks 0 and 1, N measured rounds after W warm-up rounds. In a round:
//   rank 0 sends 8 B, then counts it in a page both ranks map; rank 1
//   waits for that count, then receives: the message waits unread in the
//   transport, so the receive is posted and then finds it
//   the reply, the other way round
//   the same two messages by Isend and Irecv, each with its Wait
//   the same two messages with the receive posted first: the receiver
//   posts, says so in the page, the sender sends once it reads that, and
//   the receiver waits once the page says the message was sent
//   a barrier: one rank (alternately) says in the page that it enters; the
//   other waits for that, sleeps so that the first one's part lands, then
//   enters
// Only calls made through instr_send, instr_recv, instr_isend, instr_irecv,
// instr_post, instr_complete and instr_barrier are counted; the early
// barrier and the warm-up calls go around them.
//
// usage: cartage run -n 2 instr-probe [rounds, default 200] [sleep_us, the later
//        barrier rank's pause, default 2000]
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "bench/shared_page.h"
#include "cartage/cartage.h"
#include "cartage/collectives.h"

extern "C" {
// The counted calls, kept out of line and uncloned (noipa: a clone is
// named instr_recv.constprop.0) so callgrind can find them by name.
__attribute__((noipa)) absl::Status instr_send(const cartage::Comm* w, const char* buf, int peer) {
  return w->Send(buf, 8, peer, 0);
}
__attribute__((noipa)) absl::Status instr_recv(const cartage::Comm* w, char* buf, int peer) {
  return w->Recv(buf, 8, peer, 0);
}
// A nonblocking send or receive and its wait: the path a window of messages takes.
__attribute__((noipa)) absl::Status instr_isend(const cartage::Comm* w, const char* buf, int peer) {
  cartage::Request r;
  CARTAGE_RETURN_IF_ERROR(w->Isend(buf, 8, peer, 0, &r));
  return r.Wait();
}
__attribute__((noipa)) absl::Status instr_irecv(const cartage::Comm* w, char* buf, int peer) {
  cartage::Request r;
  CARTAGE_RETURN_IF_ERROR(w->Irecv(buf, 8, peer, 0, &r));
  return r.Wait();
}
// A receive posted before its message comes, in two counted parts: the
// post, and the wait whose progress finds the message and completes it (the
// path a window of receives takes: bandwidth, message rate).
__attribute__((noipa)) absl::Status instr_post(const cartage::Comm* w, char* buf, int peer, cartage::Request* r) {
  return w->Irecv(buf, 8, peer, 0, r);
}
__attribute__((noipa)) absl::Status instr_complete(cartage::Request* r) { return r->Wait(); }
__attribute__((noipa)) absl::Status instr_barrier(const cartage::Comm* w) { return cartage::Barrier(*w); }
}

namespace {

void AwaitAtLeast(const std::atomic<uint64_t>& word, uint64_t want) {
  while (word.load(std::memory_order_acquire) < want) sched_yield();
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 200;
  const int sleep_us = argc > 2 ? std::atoi(argv[2]) : 2000;
  constexpr int kWarmUp = 20;
  auto agent = cartage::Agent::FromEnvironment();
  if (!agent.ok()) {
    std::fprintf(stderr, "instr-probe: %s\n", std::string(agent.status().message()).c_str());
    return 1;
  }
  const cartage::Comm w = (*agent)->World();
  if (w.size() != 2 || rounds < 1 || sleep_us < 1) {
    std::fprintf(stderr, "usage: cartage run -n 2 instr-probe [rounds >= 1] [sleep_us >= 1]\n");
    return 2;
  }
  const int me = w.rank();
  const int peer = 1 - me;
  // Per rank: messages sent, and 1 + the round whose barrier it entered first.
  cartage::bench::SharedPage page(w);
  auto sent = [&page](int rank) -> std::atomic<uint64_t>& { return page.word(rank); };
  auto entered = [&page](int rank) -> std::atomic<uint64_t>& { return page.word(8 + rank); };
  auto posted = [&page](int rank) -> std::atomic<uint64_t>& { return page.word(16 + rank); };
  char out[8] = {'c', 'a', 'r', 't', 'a', 'g', 'e', static_cast<char>(me)};
  char in[8] = {};
  uint64_t received = 0;
  uint64_t peer_posted = 0;
  for (int r = 0; r < kWarmUp + rounds; ++r) {
    const bool counted = r >= kWarmUp;
    // Blocking first, then nonblocking with a wait (the warm-up's uncounted
    // calls are blocking either way).
    for (const bool blocking : {true, false}) {
      for (int from = 0; from < 2; ++from) {
        if (me == from) {
          CARTAGE_CHECK_OK(!counted  ? w.Send(out, 8, peer, 0)
                           : blocking ? instr_send(&w, out, peer)
                                      : instr_isend(&w, out, peer));
          sent(me).fetch_add(1, std::memory_order_release);
        } else {
          AwaitAtLeast(sent(peer), ++received);
          in[7] = 0;
          CARTAGE_CHECK_OK(!counted  ? w.Recv(in, 8, peer, 0)
                           : blocking ? instr_recv(&w, in, peer)
                                      : instr_irecv(&w, in, peer));
          if (in[7] != static_cast<char>(peer)) {
            std::fprintf(stderr, "instr-probe: rank %d got a wrong message in round %d\n", me, r);
            return 1;
          }
        }
      }
    }
    for (int from = 0; from < 2; ++from) {
      if (me == from) {
        AwaitAtLeast(posted(peer), ++peer_posted);
        CARTAGE_CHECK_OK(w.Send(out, 8, peer, 0));
        sent(me).fetch_add(1, std::memory_order_release);
      } else {
        in[7] = 0;
        cartage::Request req;
        CARTAGE_CHECK_OK(counted ? instr_post(&w, in, peer, &req) : w.Irecv(in, 8, peer, 0, &req));
        posted(me).fetch_add(1, std::memory_order_release);
        AwaitAtLeast(sent(peer), ++received);
        CARTAGE_CHECK_OK(counted ? instr_complete(&req) : req.Wait());
        if (in[7] != static_cast<char>(peer)) {
          std::fprintf(stderr, "instr-probe: rank %d got a wrong posted message in round %d\n", me, r);
          return 1;
        }
      }
    }
    if (me == r % 2) {
      AwaitAtLeast(entered(peer), static_cast<uint64_t>(r) + 1);
      ::usleep(static_cast<useconds_t>(sleep_us));
      CARTAGE_CHECK_OK(counted ? instr_barrier(&w) : cartage::Barrier(w));
    } else {
      entered(me).store(static_cast<uint64_t>(r) + 1, std::memory_order_release);
      CARTAGE_CHECK_OK(cartage::Barrier(w));
    }
  }
  // Per rank: sends, receives (blocking, nonblocking, posted first) and late barriers counted.
  std::printf("instr-probe rank %d: %d sends, %d receives of each kind, %d barriers counted\n", me, rounds, rounds,
              rounds / 2 + (me == 0 ? rounds % 2 : 0));
  return 0;
}
