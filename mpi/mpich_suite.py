#!/usr/bin/env python3
"""MPICH's own test suite (test/mpi of Debian's source package `mpich`),
built against cartage's MPI binding and run through `cartage run`.

Fetches the source once (adding a deb-src line for Debian's archive where
none is set), configures the suite with cartage-mpicc, builds the named
suites, and runs every line of their `testlist` files as MPICH's runtests
does: `name np [arg=..] [env=..] [timeLimit=..] [resultTest=..]`, a pass
being an exit status of 0 and " No Errors" as the only output (or, for
resultTest=TestErrFatal, TestStatus, TestStatusNoErrors, the status MPICH's
runtests asks for). Prints pass counts per suite and a one-line reason for
every failure, then compares the passes with the list of lines expected to
pass (mpi/mpich-suite.pass): a line expected to pass that fails twice in
a row is a regression, and the exit status is 1.

usage: mpich_suite.py --build BUILD_DIR [--suites pt2pt,coll,...]
                      [--timeout 30] [--update] [--only PATTERN]
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import time

SUITES = ["pt2pt", "coll", "datatype", "comm", "group", "init", "attr", "errhan", "info"]
HERE = os.path.dirname(os.path.abspath(__file__))
EXPECTED = os.path.join(HERE, "mpich-suite.pass")
VERSION = "4.0.2"
DEB_SRC = """Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def say(msg):
    print(msg, flush=True)


def fetch(cache):
    """The suite's sources (test/mpi of MPICH's release), fetched once."""
    tree = os.path.join(cache, f"mpich-{VERSION}", "test", "mpi")
    if os.path.isfile(os.path.join(tree, "configure")):
        return tree
    os.makedirs(cache, exist_ok=True)
    have_src = any("deb-src" in open(f, errors="replace").read()
                   for f in glob.glob("/etc/apt/sources.list") + glob.glob("/etc/apt/sources.list.d/*")
                   if os.path.isfile(f))
    if not have_src:
        if os.geteuid() != 0:
            sys.exit("mpich_suite: apt has no deb-src line, and adding one needs root")
        with open("/etc/apt/sources.list.d/cartage-deb-src.sources", "w") as f:
            f.write(DEB_SRC)
        subprocess.run(["apt-get", "update", "-q"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "source", "-q", "--download-only", f"mpich={VERSION}-3"], cwd=cache, check=True,
                   stdout=subprocess.DEVNULL)
    orig = os.path.join(cache, f"mpich_{VERSION}.orig.tar.xz")
    subprocess.run(["tar", "xJf", orig, f"mpich-{VERSION}/test/mpi"], cwd=cache, check=True)
    return tree


def configure(tree, work, build):
    """A copy of the suite configured for cartage's binding (timestamps kept,
    so that make does not ask for autotools)."""
    stamp = os.path.join(work, ".configured")
    if os.path.exists(stamp):
        return
    if os.path.exists(work):
        shutil.rmtree(work)
    shutil.copytree(tree, work, symlinks=True)
    cc = os.path.join(build, "mpi", "cartage-mpicc")
    # Fortran, C++, MPI-IO, spawn, RMA and partitioned tests are not built
    # (not in the binding); --disable-shared links the helpers statically.
    flags = ["--disable-fortran", "--disable-cxx", "--disable-romio", "--disable-spawn", "--disable-ft-tests",
             "--disable-rma", "--disable-part", "--disable-perftest", "--disable-shared"]
    with open(os.path.join(work, "configure.log"), "w") as log:
        subprocess.run(["./configure", f"MPICC={cc}", f"CC={cc}"] + flags, cwd=work, check=True, stdout=log,
                       stderr=subprocess.STDOUT)
    for helper in ["util", "dtpools"]:
        subprocess.run(["make", "-j", str(os.cpu_count())], cwd=os.path.join(work, helper), check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    open(stamp, "w").close()


def lines_of(work, suite):
    """The testlist's lines: (key, name, np, options)."""
    out = []
    for raw in open(os.path.join(work, suite, "testlist")):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        name = words[0]
        np = int(words[1]) if len(words) > 1 and words[1].isdigit() else 1
        opts = {"arg": [], "env": []}
        for w in words[2:]:
            k, _, v = w.partition("=")
            if k in ("arg", "env"):
                opts[k].append(v)
            else:
                opts[k] = v
        out.append((f"{suite}/{line}", name, np, opts))
    return out


def build_reason(log):
    """One line for why a test did not build: the functions it lacks, or the first error."""
    missing = sorted(set(re.findall(r"undefined reference to `([A-Za-z_0-9]+)'", log)))
    if missing:
        return "not built: the binding lacks " + ", ".join(missing)
    undeclared = sorted(set(re.findall(r"[‘']([A-Za-z_0-9]+)[’'] undeclared", log)))
    if undeclared:
        return "not built: mpi.h lacks " + ", ".join(undeclared)
    for line in log.splitlines():
        if "error" in line:
            return "not built: " + line.strip()[:160]
    return "not built"


def build(work, suite, names):
    """Builds the suite's programs; returns {name: reason} for those that failed."""
    d = os.path.join(work, suite)
    subprocess.run(["make", "-k", "-j", str(os.cpu_count())] + sorted(names), cwd=d, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    failed = {}
    for n in names:
        if not os.access(os.path.join(d, n), os.X_OK):
            r = subprocess.run(["make", n], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            failed[n] = build_reason(r.stdout)
    return failed


def judge(status, out, result_test):
    """None for a pass, else a one-line reason, as MPICH's runtests judges."""
    lines = [line for line in out.splitlines() if line.strip()]
    no_errors = any(re.match(r"^\s*No [Ee]rrors\s*$", line) for line in lines)
    others = [line for line in lines if not re.match(r"^\s*(No [Ee]rrors|Test Passed)\s*$", line)]
    if status is None:
        return "timed out, and the launcher did not stop it"
    # A job the launcher stopped at its time limit failed, as MPICH's
    # mpiexec reports it: what init/timeout asks for (TestErrFatal).
    if status == 124 and result_test != "TestErrFatal":
        return "timed out"
    if result_test in ("TestStatus", "TestErrFatal"):
        return None if status != 0 else "exited 0 where it must fail"
    if result_test == "TestStatusNoErrors":
        if not no_errors:
            return "no \"No Errors\""
        return None if status != 0 else "exited 0 where it must fail"
    if others:
        return f"exit {status}: {others[0].strip()[:160]}"
    if not no_errors:
        return f"exit {status} without \"No Errors\""
    return None if status == 0 else f"exit {status}"


def run_one(launcher, work, suite, name, np, opts, timeout):
    # A line's own timeLimit may be shorter, never longer: a hang costs at most `timeout`.
    limit = min(int(opts.get("timeLimit", timeout)), timeout)
    env = dict(os.environ)
    for e in opts["env"]:
        k, _, v = e.partition("=")
        env[k] = v
    cmd = [launcher, "run", "-n", str(np), "--timeout", str(limit), f"./{name}"] + opts["arg"]
    start = time.time()
    try:
        r = subprocess.run(cmd, cwd=os.path.join(work, suite), env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace", timeout=limit + 30)
        status, out = r.returncode, r.stdout
    except subprocess.TimeoutExpired:
        status, out = None, ""
    return judge(status, out, opts.get("resultTest")), time.time() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="cartage's build folder (cartage-mpicc, the launcher)")
    ap.add_argument("--suites", default=",".join(SUITES))
    ap.add_argument("--cache", default=os.path.expanduser("~/.cache/cartage/mpich"))
    ap.add_argument("--work", default=None, help="where the suite is built (default BUILD/mpich-tests)")
    ap.add_argument("--timeout", type=int, default=int(os.environ.get("MPITEST_TIMEOUT", "30")))
    ap.add_argument("--only", default=None, help="run only the lines matching this regular expression")
    ap.add_argument("--update", action="store_true", help="rewrite the list of lines expected to pass")
    a = ap.parse_args()
    build_dir = os.path.abspath(a.build)
    work = os.path.abspath(a.work or os.path.join(build_dir, "mpich-tests"))
    launcher = os.path.join(build_dir, "tools", "cartage", "cartage")
    tree = fetch(a.cache)
    configure(tree, work, build_dir)
    expected = set()
    if os.path.exists(EXPECTED):
        expected = {line.rstrip("\n") for line in open(EXPECTED) if line.strip() and not line.startswith("#")}
    passed, failures, table = set(), [], []
    for suite in a.suites.split(","):
        lines = lines_of(work, suite)
        if a.only:
            lines = [x for x in lines if re.search(a.only, x[0])]
        unbuilt = build(work, suite, {x[1] for x in lines})
        ok = 0
        for key, name, np, opts in lines:
            if name in unbuilt:
                failures.append((key, unbuilt[name]))
                continue
            reason, secs = run_one(launcher, work, suite, name, np, opts, a.timeout)
            if reason is not None and key in expected:
                # A line that passes as a rule gets a second run before it
                # counts as a regression (these machines are noisy); both
                # outcomes are printed.
                say(f"again {key}: the first run failed ({reason})")
                reason, secs = run_one(launcher, work, suite, name, np, opts, a.timeout)
            if reason is None:
                ok += 1
                passed.add(key)
            else:
                failures.append((key, reason))
            say(f"{'pass' if reason is None else 'FAIL'} {key} ({secs:.1f} s){'' if reason is None else ': ' + reason}")
        table.append((suite, len(lines), ok))
    say("\nMPICH test suite on cartage (testlist lines passed):")
    say(f"{'suite':10} {'lines':>6} {'passed':>7} {'%':>6}")
    for suite, n, ok in table:
        say(f"{suite:10} {n:6d} {ok:7d} {100.0 * ok / n if n else 0:6.1f}")
    total_n = sum(n for _, n, _ in table)
    total_ok = sum(ok for _, _, ok in table)
    say(f"{'all':10} {total_n:6d} {total_ok:7d} {100.0 * total_ok / total_n if total_n else 0:6.1f}")
    say("\nFailures, each with its reason:")
    for key, reason in failures:
        say(f"  {key}: {reason}")
    ran = {f"{s}/" for s, _, _ in table}
    considered = {k for k in expected if any(k.startswith(p) for p in ran)}
    if a.only:
        considered = {k for k in considered if re.search(a.only, k)}
    regressed = sorted(considered - passed)
    if a.update:
        keep = (expected - considered) | passed
        with open(EXPECTED, "w") as f:
            f.write("# The testlist lines of MPICH's test suite that pass on cartage (mpi/mpich_suite.py --update).\n")
            for k in sorted(keep):
                f.write(k + "\n")
        say(f"\nwrote {len(keep)} lines to {EXPECTED}")
        return 0
    new = sorted(passed - expected)
    if new:
        say(f"\n{len(new)} lines pass that the list does not hold yet (mpich_suite.py --update adds them)")
    if regressed:
        say(f"\n{len(regressed)} lines expected to pass failed:")
        for k in regressed:
            say(f"  {k}")
        return 1
    say(f"\nevery one of the {len(considered)} lines expected to pass passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
