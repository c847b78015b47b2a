#!/usr/bin/env python3
"""The layers' one-way rule, checked: a folder includes only its own headers
and those of the folders below it (docs/architecture.md, "Layers"), a
method's folder no other method's, and nothing includes the agent's or the
collectives' internals from outside them. Prints every violation, with the
file and line, and exits 1 if there is one.

usage: layering_test.py [REPO]
       layering_test.py --self-test   (a small tree that breaks each rule)"""

import os
import re
import sys

# Lower numbers sit lower; a folder may include its own rank and below.
RANK = {"base": 0, "datatype": 1, "fsm": 1, "car": 2, "methods": 3, "agent": 5, "collectives": 6, "rma": 7, "kit": 7,
        "tools": 8, "examples": 8, "bench": 8, "tests": 8, "mpi": 8}
# fsm and datatype know nothing of each other.
APART = {("fsm", "datatype"), ("datatype", "fsm")}
PUBLIC = {"cartage/cartage.h": "agent", "cartage/engine.h": "agent", "cartage/collectives.h": "collectives",
          "cartage/schedule.h": "collectives", "cartage/xfer.h": "collectives", "cartage/rma.h": "rma"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer(path):
    """(folder, method) of a repository path: method is the method's folder
    name for methods/<m>/..., else None."""
    parts = path.split("/")
    if parts[0] == "methods" and len(parts) > 2 and parts[1] != "common":
        return "methods", parts[1]
    return parts[0], None


def rank(folder, method):
    return RANK[folder] + (1 if folder == "methods" and method else 0)


def check(repo):
    problems = []
    for top in RANK:
        for dirpath, _, files in os.walk(os.path.join(repo, top)):
            for name in files:
                if not name.endswith((".h", ".cc", ".c")):
                    continue
                path = os.path.relpath(os.path.join(dirpath, name), repo)
                folder, method = layer(path)
                with open(os.path.join(repo, path), errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        inc = m.group(1)
                        if inc == "cartage/config.h":
                            continue  # generated: what was built
                        target = PUBLIC.get(inc)
                        if target is None:
                            if "/" not in inc:
                                continue
                            target_folder, target_method = layer(inc)
                        else:
                            target_folder, target_method = target, None
                        if target_folder not in RANK:
                            continue
                        where = f"{path}:{number}: includes \"{inc}\""
                        if (folder, target_folder) in APART:
                            problems.append(f"{where}: {folder}/ and {target_folder}/ know nothing of each other")
                        elif rank(target_folder, target_method) > rank(folder, method):
                            problems.append(f"{where}: {target_folder}/ sits above {folder}/")
                        elif method and target_method and method != target_method:
                            problems.append(f"{where}: one method's folder includes another's")
                        elif target is None and target_folder in ("agent", "collectives", "rma") and folder != target_folder \
                                and folder not in ("tools", "tests", "bench"):
                            problems.append(f"{where}: {target_folder}/'s internals (use its public headers)")
    return problems


def self_test():
    """A tree that breaks each rule once, and one include that keeps them."""
    import tempfile
    files = {"fsm/a.h": '#include "car/car.h"\n#include "base/check.h"\n',
             "datatype/b.h": '#include "fsm/machine.h"\n',
             "methods/shm/c.cc": '#include "methods/tcp/tcp_wire.h"\n#include "methods/common/wire_cars.h"\n',
             "collectives/d.cc": '#include "agent/runtime.h"\n#include "cartage/engine.h"\n'}
    with tempfile.TemporaryDirectory() as repo:
        for path, text in files.items():
            os.makedirs(os.path.join(repo, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(repo, path), "w") as f:
                f.write(text)
        found = check(repo)
    want = ["fsm/a.h:1", "datatype/b.h:1", "methods/shm/c.cc:1", "collectives/d.cc:1"]
    ok = len(found) == len(want) and all(any(p.startswith(w + ":") for p in found) for w in want)
    print("\n".join(found))
    print("layering self-test:", "caught every violation" if ok else "MISSED")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    problems = check(repo)
    for p in problems:
        print(p)
    print(f"layering: {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
