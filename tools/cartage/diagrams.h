// `cartage diagrams`: writes every registered machine as DOT, Mermaid and SVG
// into a folder, with a README.md that indexes them; or checks that a folder
// holds exactly what the tables generate.
#ifndef CARTAGE_TOOLS_CARTAGE_DIAGRAMS_H_
#define CARTAGE_TOOLS_CARTAGE_DIAGRAMS_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "fsm/registry.h"

namespace cartage::tools {

// File name -> contents, for every file the diagrams folder should hold.
// SVGs are rendered by Graphviz `dot`, which must be on PATH.
absl::StatusOr<std::map<std::string, std::string>> GenerateDiagrams(const fsm::Registry& reg);

// Renders DOT to SVG with Graphviz `dot`.
absl::StatusOr<std::string> RenderSvg(const std::string& dot);

// Writes the files into `dir` (created if missing); prints what it wrote.
absl::Status WriteDiagrams(const std::map<std::string, std::string>& files, const std::string& dir);

// kFailedPrecondition listing every file of `dir` that is missing, differs or
// is not generated (stale), with the command that fixes it. DOT, Mermaid and
// README.md must match byte for byte; an SVG must show the same titles and
// labels (its coordinates depend on the machine's fonts).
absl::Status CheckDiagrams(const std::map<std::string, std::string>& files, const std::string& dir);

}  // namespace cartage::tools

#endif  // CARTAGE_TOOLS_CARTAGE_DIAGRAMS_H_
