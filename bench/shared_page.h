// A page two ranks map, for what a benchmark's ranks tell each other outside
// the runtime it measures (a flag for the hand-off probe, counts for
// instr-probe). Rank 0 creates it and sends its name over the runtime.
#ifndef CARTAGE_BENCH_SHARED_PAGE_H_
#define CARTAGE_BENCH_SHARED_PAGE_H_

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>

#include "cartage/cartage.h"

namespace cartage::bench {

class SharedPage {
 public:
  // Ranks 0 and 1 of `w`; tag 1 carries the name and the answer.
  explicit SharedPage(const Comm& w) {
    char name[64] = {};
    if (w.rank() == 0) {
      std::snprintf(name, sizeof(name), "/cartage-bench-%d", getpid());
      const int fd = shm_open(name, O_CREAT | O_RDWR | O_EXCL, 0600);
      CARTAGE_CHECK(fd >= 0 && ftruncate(fd, 4096) == 0) << "shm_open " << name;
      Map(fd);
      CARTAGE_CHECK_OK(w.Send(name, sizeof(name), 1, 1));
      char ack;
      CARTAGE_CHECK_OK(w.Recv(&ack, 1, 1, 1));
      shm_unlink(name);
    } else {
      CARTAGE_CHECK_OK(w.Recv(name, sizeof(name), 0, 1));
      const int fd = shm_open(name, O_RDWR, 0);
      CARTAGE_CHECK(fd >= 0) << "shm_open " << name;
      Map(fd);
      const char ack = 1;
      CARTAGE_CHECK_OK(w.Send(&ack, 1, 0, 1));
    }
  }
  ~SharedPage() { munmap(page_, 4096); }
  SharedPage(const SharedPage&) = delete;
  SharedPage& operator=(const SharedPage&) = delete;
  // The i-th of the page's 512 words.
  std::atomic<uint64_t>& word(int i) { return reinterpret_cast<std::atomic<uint64_t>*>(page_)[i]; }

 private:
  void Map(int fd) {
    page_ = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    CARTAGE_CHECK(page_ != MAP_FAILED) << "mmap";
  }
  void* page_ = nullptr;
};

}  // namespace cartage::bench

#endif  // CARTAGE_BENCH_SHARED_PAGE_H_
