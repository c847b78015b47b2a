#include "agent/params.h"

namespace cartage::agent {

std::vector<methods::ParamInfo> Params() {
  return {
      {"CARTAGE_METHODS", "self,shm,tcp",
       "methods to use, in order of preference; each peer goes by the first that reaches it (self is added "
       "when missing); every rank must be given the same"},
      {"CARTAGE_METHOD_PATH", "", "out-of-tree methods to load: shared libraries, colon-separated"},
      {"CARTAGE_BOOTSTRAP", "auto",
       "the launcher's exchange a rank opens: auto (cartage run's, else PMIx where PMIX_RANK and a server URI "
       "are set, else PMI-1 where PMI_FD is, else a job of one), cartage, pmix, pmi2, pmi1 or singleton"},
      {"CARTAGE_OVERSUBSCRIBED", "auto",
       "auto: the job counts as oversubscribed where the ranks the launcher placed on a host outnumber its "
       "CPUs (on several hosts, where any host's do); yes or no say so (on one host every rank must agree). It "
       "sets the wait's spin, shm's defaults and the collectives' choices"},
      {"CARTAGE_WAIT_SPIN", "2000",
       "idle progress rounds before a waiting rank yields its CPU (20 where ranks outnumber CPUs, 4 where "
       "three or more share each CPU or this rank's); when set, it holds whatever the placement"},
      {"CARTAGE_WAIT_YIELD_US", "2000", "then how long it yields before it blocks on what its methods can wake "
                                        "it with; 0: block at once"},
      {"CARTAGE_THREADS", "single",
       "which threads may call the agent: single or funneled (only the thread that made it), serialized (any "
       "thread, one call at a time) or multiple (any thread, any time); a call the level does not allow is "
       "refused with an error naming it. A program's AgentOptions take precedence"},
      {"CARTAGE_PROGRESS_THREAD", "0",
       "1: a thread of the agent's own advances operations (rendezvous, collectives) while the program "
       "computes, sleeping on the methods' wake-ups when idle"},
      {"CARTAGE_LANES", "1",
       "with CARTAGE_THREADS=multiple, up to 64 lanes: each its own engine lock, CAR pool, matcher and methods "
       "(opened once a lane), a communicator's traffic going by the lane its context picks, so that threads on "
       "communicators of different lanes never wait for one another's lock"},
      {"CARTAGE_FAST_PATH", "1",
       "0: every blocking send and receive goes by a Request, as its nonblocking form does; the transitions are "
       "the same either way (cartage trace compare)"},
      {"CARTAGE_UNEXPECTED_MAX_MB", "1024",
       "the most memory (MiB) a rank keeps for messages that arrived before their receive (their CARs and "
       "buffers); a message past it fails its sender's VC with kResourceExhausted naming it, never an "
       "out-of-memory kill. ofi, whose provider keeps them, holds each sender back at its share of it "
       "(CARTAGE_OFI_HOLD_S)"},
      {"CARTAGE_HOST_TAG", "",
       "ranks with different tags count as on different hosts: tcp and ofi do not watch one another's pids, "
       "and learn of a death from their connection or from a rank that saw it (to run the multi-host paths on "
       "one machine)"},
      {"CARTAGE_TRACE", "",
       "a folder: every rank records its transitions and collective calls and writes DIR/<job>.<rank>.trace at "
       "finalize, exit, SIGUSR1 and the launcher's timeout (cartage trace, cartage why-stuck read them); set it "
       "on every rank (cartage run --trace does)"},
      {"CARTAGE_TRACE_RECORDS", "262144", "the trace ring's size in records (48 bytes each); older records are "
                                          "dropped, and counted, when it wraps"},
      {"CARTAGE_WATCHDOG", "", "seconds: with CARTAGE_TRACE, a rank that records no transition for that long "
                               "writes its trace and says so on standard error"},
  };
}

}  // namespace cartage::agent
