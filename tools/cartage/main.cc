// The cartage command-line tool.
#include <iostream>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "car/machines.h"
#include "cartage/collectives.h"
#include "cartage/schedule.h"
#include "rma/rma_fsm.h"
#include "methods/tcp/tcp_method.h"
#include "fsm/registry.h"
#include "tools/cartage/diagrams.h"
#include "tools/cartage/kit_cmd.h"
#include "tools/cartage/launcher.h"
#include "tools/cartage/schedule_cmd.h"
#include "tools/cartage/trace_cmd.h"
#include "tools/cartage/why_stuck.h"

ABSL_FLAG(std::string, out, "diagrams", "diagrams: the folder to write or check");
ABSL_FLAG(bool, check, false, "diagrams: check the folder instead of writing it");
ABSL_FLAG(int, ranks, 8, "schedule: how many ranks");
ABSL_FLAG(uint64_t, bytes, 1024, "schedule: message bytes (per rank for gather, scatter, allgather, alltoall)");
ABSL_FLAG(std::string, format, "dot", "schedule: dot, mermaid, svg (Graphviz) or lanes (swim lanes, SVG)");
ABSL_FLAG(int, rank, -1, "schedule: one rank's schedule (default: the whole job's)");
ABSL_FLAG(bool, collectives, false, "info: the collective selection table alone");

namespace cartage::tools {
void PrintInfo(const fsm::Registry& reg);
}  // namespace cartage::tools

namespace {

constexpr absl::string_view kUsage =
    "usage: cartage <command> [options]\n"
    "\n"
    "commands:\n"
    "  run -n N [--prefix] [--timeout S] [--trace DIR] program [args...]\n"
    "                                start N ranks of program on this host\n"
    "  kit [--method NAME] [--plugin LIB.so] [--case A,B] [--list]\n"
    "                                run the conformance kit against a method (built in, or\n"
    "                                loaded from LIB.so): every case a job of real processes\n"
    "  info [--collectives]          version, compiled-in methods, state machines, CAR size, the\n"
    "                                collective selection table (--collectives: that alone;\n"
    "                                CARTAGE_COLL_EXPLAIN=1 or all says at run time why each call\n"
    "                                runs its algorithm)\n"
    "  diagrams [--out DIR] [--check]\n"
    "                                write DIR/<machine>.{dot,mmd,svg} and DIR/README.md for\n"
    "                                every registered state machine (default DIR: diagrams);\n"
    "                                with --check, exit 1 if DIR differs from the tables\n"
    "  schedule COLLECTIVE[/ALGORITHM] [--ranks N] [--bytes B] [--format dot|mermaid|svg|lanes] [--rank R]\n"
    "                                draw a collective's schedule (every rank's, or rank R's) on\n"
    "                                standard output; without an algorithm, the selection table's\n"
    "  trace DIR [--job ID] [--out FILE]\n"
    "                                merge a traced job (CARTAGE_TRACE=DIR, run --trace DIR) into\n"
    "                                one Perfetto / chrome://tracing JSON\n"
    "  trace check DIR               replay every traced job in DIR against the tables\n"
    "  trace diagram DIR [--machine M] [--out D]\n"
    "                                the diagrams with DIR's edge counts and state times on them\n"
    "  trace compare DIR_A DIR_B     whether two traced runs of the same traffic took the same\n"
    "                                lives (a fast path on and off)\n"
    "  why-stuck DIR [--job ID]      say why a traced job stopped, from its ranks' dumps (written\n"
    "                                at run --timeout, on SIGUSR1, at CARTAGE_WATCHDOG=SECONDS)\n"
    "  help, --help                  this text\n";

absl::Status Register(cartage::fsm::Registry& reg) {
  absl::Status registered = cartage::car::RegisterCarMachines(reg);
  registered.Update(cartage::methods::tcp::RegisterTcpMachines(reg));
  registered.Update(cartage::RegisterScheduleMachines(reg));
  registered.Update(cartage::rma::RegisterRmaMachines(reg));
  return registered;
}

int Diagrams(const cartage::fsm::Registry& reg) {
  auto files = cartage::tools::GenerateDiagrams(reg);
  if (!files.ok()) {
    std::cerr << "cartage diagrams: " << files.status().message() << "\n";
    return 1;
  }
  const std::string dir = absl::GetFlag(FLAGS_out);
  if (absl::GetFlag(FLAGS_check)) {
    const absl::Status s = cartage::tools::CheckDiagrams(*files, dir);
    if (!s.ok()) {
      std::cerr << "cartage diagrams --check: " << s.message() << "\n";
      return 1;
    }
    std::cout << "cartage diagrams --check: " << files->size() << " files in " << dir
              << " match the tables of " << reg.machines().size() << " machines\n";
    return 0;
  }
  const absl::Status s = cartage::tools::WriteDiagrams(*files, dir);
  if (!s.ok()) {
    std::cerr << "cartage diagrams: " << s.message() << "\n";
    return 1;
  }
  std::cout << "machines:";
  for (const auto& m : reg.machines()) std::cout << " " << m.name;
  std::cout << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // `run` passes everything after it to the program: no flag parsing here.
  if (argc >= 2 && absl::string_view(argv[1]) == "run") {
    return cartage::tools::RunLauncher(argc - 2, argv + 2);
  }
  if (argc >= 2 && absl::string_view(argv[1]) == "kit") return cartage::tools::RunKit(argc - 2, argv + 2);
  // The trace readers take their own arguments and need the tables.
  if (argc >= 2 && (absl::string_view(argv[1]) == "trace" || absl::string_view(argv[1]) == "why-stuck")) {
    cartage::fsm::Registry reg;
    if (const absl::Status s = Register(reg); !s.ok()) {
      std::cerr << "cartage: " << s.message() << "\n";
      return 1;
    }
    return absl::string_view(argv[1]) == "trace" ? cartage::tools::RunTrace(argc - 2, argv + 2, reg)
                                                 : cartage::tools::RunWhyStuck(argc - 2, argv + 2, reg);
  }
  for (int i = 1; i < argc; ++i) {
    const absl::string_view a = argv[i];
    if (a == "--help" || a == "-h" || a == "help") {
      std::cout << kUsage;
      return 0;
    }
  }
  absl::SetProgramUsageMessage(std::string(kUsage));
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() == 3 && absl::string_view(args[1]) == "schedule") {
    absl::StatusOr<std::string> out =
        cartage::tools::RenderSchedule(args[2], absl::GetFlag(FLAGS_ranks), absl::GetFlag(FLAGS_bytes),
                                       absl::GetFlag(FLAGS_format), absl::GetFlag(FLAGS_rank));
    if (!out.ok()) {
      std::cerr << "cartage " << out.status().message() << "\n";
      return 2;
    }
    std::cout << *out;
    return 0;
  }
  if (args.size() != 2) {
    std::cerr << kUsage;
    return 2;
  }
  cartage::fsm::Registry reg;
  if (const absl::Status s = Register(reg); !s.ok()) {
    std::cerr << "cartage: " << s.message() << "\n";
    return 1;
  }
  const absl::string_view command = args[1];
  if (command == "info") {
    if (absl::GetFlag(FLAGS_collectives)) {
      std::cout << cartage::DescribeSelection();
      return 0;
    }
    cartage::tools::PrintInfo(reg);
    return 0;
  }
  if (command == "diagrams") return Diagrams(reg);
  std::cerr << "cartage: unknown command '" << command << "'\n" << kUsage;
  return 2;
}
