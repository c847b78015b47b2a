// The kit's finalize cases: a rank that sends and at once finalizes still
// has every message delivered; messages nobody receives neither hang their
// sender nor go unnamed.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "cartage/cartage.h"
#include "kit/cases.h"
#include "kit/check.h"

namespace cartage::kit {

namespace {

std::byte Pattern(std::size_t i, int salt) { return static_cast<std::byte>((i * 131 + static_cast<std::size_t>(salt)) & 0xff); }

std::vector<std::byte> Patterned(std::size_t bytes, int salt) {
  std::vector<std::byte> v(bytes);
  for (std::size_t i = 0; i < bytes; ++i) v[i] = Pattern(i, salt);
  return v;
}

constexpr std::size_t kPage = 4096;
constexpr int kPages = 2048;

}  // namespace

void FinalizeDelivers(const Comm& w, Agent&) {
  // Through ofi, libfabric's tcp provider keeps about 16 KB per unexpected
  // message (the Unexpected case says more); 20,000 keep its memory modest.
  const absl::StatusOr<PathInfo> path = w.PathTo(1 - w.rank());
  KIT_OK(path.status());
  const int messages = path->method == "ofi" ? 20000 : 100000;
  const std::vector<std::byte> big = Patterned(1u << 20, 1);
  const std::vector<std::byte> bigger = Patterned(3u << 20, 2);
  const std::vector<std::byte> sync = Patterned(64, 3);
  if (w.rank() == 0) {
    for (int i = 0; i < messages; ++i) {
      const uint64_t v = static_cast<uint64_t>(i) * 7;
      KIT_OK(w.Send(&v, sizeof(v), 1, 1));  // eager: complete once handed over
    }
    // Then 8 MiB in 4 KiB messages: more than the sockets and rings hold,
    // so that some are still on their way when finalize begins.
    const std::vector<std::byte> page = Patterned(kPage, 5);
    for (int i = 0; i < kPages; ++i) KIT_OK(w.Send(page.data(), page.size(), 1, 5));
    Request r[3];
    KIT_OK(w.Isend(big.data(), big.size(), 1, 2, &r[0]));
    KIT_OK(w.Isend(bigger.data(), bigger.size(), 1, 3, &r[1]));
    KIT_OK(w.Issend(sync.data(), sync.size(), 1, 4, &r[2]));
    // Returns with all three in flight: their Requests wait as they go, and
    // finalize follows at once, while rank 1 has not received anything yet.
  } else if (w.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    for (int i = 0; i < messages; ++i) {
      uint64_t v = 0;
      KIT_OK(w.Recv(&v, sizeof(v), 0, 1));
      KIT_EXPECT(v == static_cast<uint64_t>(i) * 7, "message %d carried %d", i, v);
    }
    std::vector<std::byte> got(bigger.size());
    const std::vector<std::byte> page = Patterned(kPage, 5);
    for (int i = 0; i < kPages; ++i) {
      KIT_OK(w.Recv(got.data(), kPage, 0, 5));
      KIT_EXPECT(std::equal(page.begin(), page.end(), got.begin()), "4 KiB message %d differs", i);
    }
    KIT_OK(w.Recv(got.data(), big.size(), 0, 2));
    KIT_EXPECT(std::equal(big.begin(), big.end(), got.begin()), "the 1 MiB message differs");
    KIT_OK(w.Recv(got.data(), bigger.size(), 0, 3));
    KIT_EXPECT(got == bigger, "the 3 MiB message differs");
    KIT_OK(w.Recv(got.data(), sync.size(), 0, 4));
    KIT_EXPECT(std::equal(sync.begin(), sync.end(), got.begin()), "the synchronous message differs");
  }
}

void FinalizeUnreceived(const Comm& w, Agent& a) {
  const std::vector<std::byte> big = Patterned(1u << 20, 4);
  if (w.rank() == 0) {
    Request r[2];
    KIT_OK(w.Isend(big.data(), big.size(), 1, 7, &r[0]));  // rendezvous: waits for a match
    KIT_OK(w.Issend(big.data(), 16, 1, 8, &r[1]));         // synchronous: waits for a match
    const uint64_t v = 9;
    KIT_OK(w.Send(&v, sizeof(v), 1, 9));
    // Rank 1 never posts a receive: its finalize takes them, and both sends
    // complete rather than wait for ever.
    KIT_OK(r[0].Wait());
    KIT_OK(r[1].Wait());
  } else if (w.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const absl::Status s = a.Finalize();
    KIT_EXPECT(s.code() == absl::StatusCode::kFailedPrecondition, "finalize gave %s", s.ToString());
    KIT_EXPECT(s.message().find("finalize (rank 1): 3 messages sent to this rank were never received; "
                                "the first: from rank 0 (context 0, tag 7, 1048576 bytes)") != std::string::npos,
               "%s", s.ToString());
    const absl::Status again = a.Finalize();
    KIT_EXPECT(again.code() == absl::StatusCode::kFailedPrecondition, "a second finalize gave %s", again.ToString());
    int x = 0;
    const absl::Status after = w.Send(&x, sizeof(x), 0, 0);
    KIT_EXPECT(after.code() == absl::StatusCode::kFailedPrecondition, "a send after finalize gave %s",
               after.ToString());
  }
}

}  // namespace cartage::kit
