#!/usr/bin/env bash
# The main job: installs what is missing, builds the release preset, and
# shows what cartage is today: its build (`cartage info`) and the state
# machines it runs, regenerated from the tables into diagrams/.
# (Once point-to-point lands, this becomes a multi-rank run on shared memory.)
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
cartage=build/release/tools/cartage/cartage
"${cartage}" info
echo
"${cartage}" diagrams --out diagrams
