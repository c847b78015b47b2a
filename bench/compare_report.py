"""What bench/compare reports of a run: which samples count, each cell's
median and spread, the peer ÷ cartage ratios, the tables (compare.md), the
summary bench/RESULTS.md carries, the plots, and the check of an output
folder. bench/compare runs the cases; this reads what they measured."""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KiB, MiB = 1024, 1024 * 1024
COLLECTIVES = ("barrier", "bcast", "allreduce", "allgather", "alltoall")
P2P = ("pingpong", "bw", "bibw", "rate")
RMA = ("put_lat", "get_lat", "acc_lat", "put_bw")
SHORT = {"cartage": "cartage", "binary": "MPICH's binary on cartage", "mpich": "MPICH", "openmpi": "Open MPI"}
SYSTEMS = {
    "cartage": {"shm": "cartage (shm)", "tcp": "cartage (tcp)"},
    # --binary: osu_mpi.c as built for MPICH, run on cartage's libmpich.so.12
    "binary": {"shm": "MPICH's binary on cartage (shm)", "tcp": "MPICH's binary on cartage (tcp)"},
    "mpich": {"shm": "MPICH (ch4:ucx, UCX shm)", "tcp": "MPICH (UCX tcp)"},
    "openmpi": {"shm": "Open MPI (ob1, vader)", "tcp": "Open MPI (ob1, tcp BTL)"},
}
PEERS = ("mpich", "openmpi")


def is_matching(test):
    return test.startswith("match_")


def read(path, limit=-1):
    with open(path) as f:
        return f.read(limit)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ analysis

FLAG_RATIO = 1.5      # probes before and after a sample further apart than this: placement changed
NEAR_BELOW_NS = 120   # a probe below this is the "near" placement
HANDOFF_MAX_BYTES = KiB


def metric(row):
    for k in ("median_us", "median_MBps", "median_msgs_per_s"):
        if k in row:
            return row[k]
    return None


def flagged(sample):
    b, a = sample.get("probe_before_ns"), sample.get("probe_after_ns")
    if not b or not a:
        return True
    return max(a, b) / min(a, b) > FLAG_RATIO


def placement(ns):
    return "near" if ns < NEAR_BELOW_NS else "far"


def mean_probe(sample):
    return (sample["probe_before_ns"] + sample["probe_after_ns"]) / 2


def sample_state(sample):
    """The placement a launch ran in (its two probes' mean)."""
    return placement(mean_probe(sample))


def reference_state(data):
    """The placement most unflagged launches of the run saw: the main
    tables compare systems within it."""
    states = [sample_state(s) for s in data["samples"] if s["ok"] and not flagged(s)]
    return max(("far", "near"), key=states.count) if states else None


def cell(samples, size, state=None, strict=False):
    """The figures of one (case, system, size): the median over launches of
    each launch's median, min and max over every repetition of those
    launches, and how many. Launches whose probes disagree are left out;
    with `state`, only launches in that placement count. Where nothing is
    left and not `strict`, it falls back to the other placement ("other")
    and then to flagged launches ("flagged")."""
    usable = [s for s in samples if s["ok"] and size in s["rows"]]
    good = [s for s in usable if not flagged(s)]
    chosen, mark = good, ""
    if state is not None:
        chosen = [s for s in good if sample_state(s) == state]
        if not chosen and not strict:
            chosen, mark = good, "other"
    if not chosen and not strict:
        chosen, mark = usable, "flagged"
    rows = [s["rows"][size] for s in chosen]
    if not rows:
        return None
    return {"median": statistics.median(metric(r) for r in rows), "min": min(r["min"] for r in rows),
            "max": max(r["max"] for r in rows), "n": len(rows), "mark": mark}


def handoffs(samples, size):
    """Median over usable launches of latency / the launch's mean probe."""
    vals = []
    for s in samples:
        if s["ok"] and not flagged(s) and size in s["rows"]:
            vals.append(metric(s["rows"][size]) * 1000 / mean_probe(s))
    return statistics.median(vals) if vals else None


def ratio(case, cartage, peer):
    """> 1: cartage is faster. Times: peer / cartage; rates: cartage / peer."""
    if cartage is None or peer is None or cartage["median"] <= 0 or peer["median"] <= 0:
        return None
    if case["lower_is_better"]:
        return peer["median"] / cartage["median"]
    return cartage["median"] / peer["median"]


def fmt(v):
    if v is None:
        return "—"
    if v == 0:
        return "0"
    if abs(v) >= 1000:
        return f"{round(v):,}"
    return f"{v:.3g}"


def size_label(n, matching=False):
    if matching:
        return f"{n:,}"
    for unit, name in ((MiB, "MiB"), (KiB, "KiB")):
        if n >= unit and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} B"


def samples_of(data, case_id, system):
    return [s for s in data["samples"] if s["case"] == case_id and s["system"] == system]


MARKS = {"": "", "other": " ‡", "flagged": " †"}


def case_table(data, case, state=None, strict=False):
    systems = data["systems"]
    head = ["queue length" if is_matching(case["test"]) else "bytes"]
    for s in systems:
        head.append(SYSTEMS[s][case["transport"]])
        if s != "cartage":
            head.append(f"{SHORT[s]} ÷ cartage")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for size in case["sizes"]:
        cells = {s: cell(samples_of(data, case["id"], s), size, state, strict) for s in systems}
        row = [size_label(size, is_matching(case["test"]))]
        for s in systems:
            c = cells[s]
            row.append("—" if c is None else f"{fmt(c['median'])} [{fmt(c['min'])}–{fmt(c['max'])}]{MARKS[c['mark']]}")
            if s != "cartage":
                r = ratio(case, cells.get("cartage"), c)
                if r is not None and (c["mark"] == "other") != (cells["cartage"]["mark"] == "other"):
                    r = None  # never a ratio across placements
                row.append("—" if r is None else f"{r:.2f}")
        lines.append("| " + " | ".join(row) + " |")
    return lines


def missing_notes(data, case):
    notes = []
    for s in data["systems"]:
        why = data.get("unavailable", {}).get(f"{case['id']}/{s}")
        if why:
            notes.append(f"- {SYSTEMS[s][case['transport']]}: {why}")
        failed = [x for x in samples_of(data, case["id"], s) if not x["ok"]]
        if failed:
            notes.append(f"- {SYSTEMS[s][case['transport']]}: {len(failed)} of "
                         f"{len(samples_of(data, case['id'], s))} launches failed: {failed[0]['error']}")
    return notes


def handoff_table(data, case):
    systems = data["systems"]
    lines = ["| bytes | " + " | ".join(SYSTEMS[s][case["transport"]] for s in systems) + " |",
             "|" + "---|" * (len(systems) + 1)]
    for size in [s for s in case["sizes"] if s <= HANDOFF_MAX_BYTES]:
        vals = [handoffs(samples_of(data, case["id"], s), size) for s in systems]
        lines.append(f"| {size_label(size)} | " + " | ".join("—" if v is None else f"{v:.2f}" for v in vals) + " |")
    return lines


def render_markdown(data):
    meta = data["meta"]
    out = ["# cartage beside MPICH and Open MPI", "",
           f"Generated by `{meta['command']}` on {meta['started']} (VM clock) in {meta['elapsed_s'] / 60:.1f} min; "
           "do not edit, run it again. Every raw figure, probe and command line is in `compare.json`.", "",
           "## Machine and versions", "", "| item | value |", "|---|---|"]
    for k, v in meta["machine"].items():
        out.append(f"| {k} | {v} |")
    probes = [(s["probe_before_ns"], s["probe_after_ns"]) for s in data["samples"] if s.get("probe_before_ns")]
    flat = [p for pair in probes for p in pair if p]
    n_flag = sum(1 for s in data["samples"] if flagged(s))
    near = [p for p in flat if placement(p) == "near"]
    far = [p for p in flat if placement(p) == "far"]
    ref = reference_state(data)
    out += ["", "## How to read the tables", "",
            f"- {meta['rounds']} round(s); in each, every case ran each system once, in an order rotated by the "
            f"round (A B C, B C A, …). A launch runs {meta['reps']} timed repetitions per size after a warm-up.",
            "- A cell is the **median over launches of each launch's median**, then **[min–max] over every "
            "repetition** of those launches.",
            f"- The tables compare the systems within one placement of the vCPUs, the one most launches saw: "
            f"**{ref or '—'}**. ‡ marks a cell with no launch in it (its figure is from the other placement). Where "
            "launches ran in the other placement too, their table follows, folded.",
            "- `peer ÷ cartage` is the peer's time over cartage's (for bandwidth and message rate, cartage's "
            "figure over the peer's): **> 1 means cartage is faster**.",
            "- Placement probe (bench/peers/handoff.c: two threads pinned to CPUs 0 and 1 hand a cache line "
            f"back and forth) before and after every launch: {len(flat)} probes, {len(near)} near "
            f"(< {NEAR_BELOW_NS} ns, median {fmt(statistics.median(near)) if near else '—'} ns), {len(far)} far "
            f"(median {fmt(statistics.median(far)) if far else '—'} ns). {n_flag} launch(es) whose two probes "
            f"differ by more than {FLAG_RATIO}x are left out of the medians; † marks a cell that had only such "
            "launches.",
            "- Small-message latency over shared memory is also given in hand-offs (each launch's latency over "
            "its own probe), which holds across placements.",
            "- Collectives at 4 ranks (and, in a full run, 8) are oversubscribed on this 2-CPU machine: there "
            "the wait strategy decides (a runtime that polls without yielding waits for the scheduler's time "
            "slice). Each runtime places the ranks as it does by default: `cartage run` pins ranks that "
            "outnumber the CPUs round-robin, Open MPI runs with `--bind-to none` (its own choice when "
            "oversubscribed) and MPICH unbound (its default). With ranks that fit, all three pin them to cores."]
    sections = [("Shared memory, 2 ranks", lambda c: c["transport"] == "shm" and c["test"] in P2P),
                ("TCP over loopback, 2 ranks", lambda c: c["transport"] == "tcp" and c["test"] in P2P),
                ("One-sided (RMA), 2 ranks: a lock, the operation, the unlock", lambda c: c["test"] in RMA),
                ("Collectives on shared memory", lambda c: c["test"] in COLLECTIVES),
                ("Matching with long queues (shared memory, 8-byte messages)", lambda c: is_matching(c["test"]))]
    for name, pick in sections:
        picked = [c for c in data["cases"] if pick(c)]
        if picked:
            out += ["", f"## {name}"]
        for case in picked:
            out += ["", f"### {case['title']}", ""] + case_table(data, case, ref)
            other = {"far": "near", "near": "far"}.get(ref)
            n_other = sum(1 for s in data["samples"] if s["case"] == case["id"] and s["ok"] and not flagged(s)
                          and sample_state(s) == other)
            if n_other:
                out += ["", f"<details><summary>The same case in the {other} placement ({n_other} "
                        f"launch{'es' if n_other > 1 else ''})</summary>",
                        ""] + case_table(data, case, other, strict=True) + ["", "</details>"]
            notes = missing_notes(data, case)
            if notes:
                out += [""] + notes
            if case["id"] in data["plots"]:
                out += ["", f"![{case['title']}]({data['plots'][case['id']]})"]
            if case["test"] == "pingpong" and case["transport"] == "shm":
                out += ["", "Small messages in cache-line hand-offs (latency ÷ the launch's probe):", ""]
                out += handoff_table(data, case)
    out += ["", "## Command lines", "", "One launch of each system per kind of case (every launch's exact line is "
            "in `compare.json`):", ""]
    seen = set()
    for s in data["samples"]:
        key = (s["system"], s["transport"], s["ranks"] > 2)
        if key not in seen:
            seen.add(key)
            env = " ".join(f"{k}={v}" for k, v in s["env"].items())
            line = " ".join(s["argv"]).replace(ROOT + "/", "")
            out.append(f"- `{(env + ' ') if env else ''}{line}`")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------- plots

def render_plots(data, out_dir):
    """One SVG per case with more than one size: each system's medians
    against size, log scales. Returns {case id: file name}."""
    plots = {}
    ref = reference_state(data)
    data_dir = os.path.join(out_dir, "plot-data")
    os.makedirs(data_dir, exist_ok=True)
    if not shutil.which("gnuplot"):
        data["errors"].append("gnuplot not found: no plots")
        return plots
    for case in data["cases"]:
        sizes = [s for s in case["sizes"] if s > 0]
        if len(sizes) < 2:
            continue
        series = []
        for system in data["systems"]:
            pts = [(s, cell(samples_of(data, case["id"], system), s, ref)) for s in sizes]
            pts = [(s, c["median"]) for s, c in pts if c and c["median"] > 0]
            if pts:
                dat = os.path.join(data_dir, f"{case['id']}.{system}.dat")
                with open(dat, "w") as f:
                    f.writelines(f"{s} {v}\n" for s, v in pts)
                series.append((dat, SYSTEMS[system][case["transport"]]))
        if not series:
            continue
        name = f"{case['id']}.svg"
        unit = case["title"].split("(")[1].split(")")[0] if "(" in case["title"] else ""
        xlabel = "queue length" if is_matching(case["test"]) else "message size (bytes)"
        script = "\n".join([
            "set terminal svg size 760,480 dynamic font 'sans,11' background '#ffffff'",
            f"set output '{os.path.join(out_dir, name)}'",
            f"set title \"{case['title'].split(':')[0]}: {case['transport']}, {case['ranks']} ranks"
            f"{f', {ref} placement' if ref else ''}\" noenhanced",
            "set logscale xy", f"set xlabel \"{xlabel}\"", f"set ylabel \"{unit}\" noenhanced",
            "set key top left" if case["lower_is_better"] else "set key bottom right",
            "set grid", "set xtics (" + ", ".join(
                f"\"{size_label(x, is_matching(case['test'])).replace(' B', '')}\" {x}" for x in sizes) + ")",
            "set offsets graph 0.05, graph 0.05, 0, 0",
            "plot " + ", ".join(f"'{d}' using 1:2 with linespoints lw 2 title \"{t}\" noenhanced" for d, t in series)])
        r = subprocess.run(["gnuplot"], input=script, capture_output=True, text=True)
        if r.returncode != 0:
            data["errors"].append(f"gnuplot failed for {case['id']}: {r.stderr.strip()[:300]}")
            continue
        plots[case["id"]] = name
    return plots


# ------------------------------------------------------------------ checking

def verify(out_dir):
    """Every table present with figures, every plot drawn. Returns problems."""
    problems = []
    try:
        data = from_json(json.loads(read(os.path.join(out_dir, "compare.json"))))
        md = read(os.path.join(out_dir, "compare.md"))
    except (OSError, ValueError) as e:
        return [f"cannot read the results in {out_dir}: {e}"]
    for case in data["cases"]:
        if f"### {case['title']}" not in md:
            problems.append(f"no table for {case['id']}")
        for system in data["systems"]:
            if f"{case['id']}/{system}" in data.get("unavailable", {}):
                continue
            got = [cell(samples_of(data, case["id"], system), s) for s in case["sizes"]]
            if not any(got):
                problems.append(f"{case['id']}: no figures from {system}")
        if len([s for s in case["sizes"] if s > 0]) > 1:
            name = data["plots"].get(case["id"])
            path = os.path.join(out_dir, name) if name else None
            if not path or not os.path.exists(path) or "<svg" not in read(path, 4096):
                problems.append(f"{case['id']}: no plot")
    problems += data.get("errors", [])
    return problems


# ----------------------------------------------------------------- summary

def _best_peer(data, case, size, state, fallback=None):
    """The better peer's cell for (case, size) in `state`, or None. With
    `fallback` (a cell mark: "other" or "flagged"), the peers' cells taken
    the same way where cartage's had to be."""
    best = None
    for peer in data["systems"]:
        if peer not in PEERS:  # cartage, and MPICH's binary on it
            continue
        samples = samples_of(data, case["id"], peer)
        c = cell(samples, size, state, strict=True) if fallback is None else cell(samples, size, state)
        if c is None or (fallback is not None and c["mark"] != fallback):
            continue
        if best is None or (c["median"] < best["median"]) == case["lower_is_better"]:
            best = c
    return best


SUMMARY_MARKS = {"other": "‡", "flagged": "†"}


def _summary_cell(data, case, size, state):
    """cartage's median and, beside it, the better peer's over cartage's
    (> 1: cartage is faster), within `state`. Where cartage has no launch
    there, its figure as compare.md falls back to it (marked), beside peers
    taken the same way."""
    mine = cell(samples_of(data, case["id"], "cartage"), size, state, strict=True)
    fallback = None
    if mine is None:
        mine = cell(samples_of(data, case["id"], "cartage"), size, state)
        if mine is None:
            return "—"
        fallback = mine["mark"]
    r = ratio(case, mine, _best_peer(data, case, size, state, fallback))
    figure = fmt(mine["median"]) + SUMMARY_MARKS.get(fallback, "")
    return f"{figure} ({r:.2f})" if r is not None else figure


def render_summary(data):
    """The section bench/RESULTS.md carries: every case in a few tables, each
    cell cartage's median with the better peer ÷ cartage beside it, within
    the placement most launches saw; compare.md has the rest."""
    meta = data["meta"]
    ref = reference_state(data)
    probes = [p for s in data["samples"] for p in (s.get("probe_before_ns"), s.get("probe_after_ns")) if p]
    in_ref = [p for p in probes if placement(p) == ref]
    cases = {c["id"]: c for c in data["cases"]}
    out = ["# cartage beside MPICH and Open MPI", "",
           f"`{meta['command']}` on {meta['started']}, {meta['machine'].get('CPU', '?')}, "
           f"{meta['rounds']} interleaved round(s), {ref or '—'} placement "
           f"(hand-off probe median {fmt(statistics.median(in_ref)) if in_ref else '—'} ns). "
           "Each cell: cartage's median, and in brackets the better peer's over cartage's "
           "(> 1: cartage is faster); ‡: no launch in that placement, the figure is from the other; "
           "†: every launch saw the placement change. Every system, spread and placement: "
           "[results/compare.md](results/compare.md); raw figures: `results/compare.json`."]

    def grid(title, rows, cols, pick):
        lines = ["", f"## {title}", "", "| | " + " | ".join(c for c, _ in cols) + " |",
                 "|" + "---|" * (len(cols) + 1)]
        for label, key in rows:
            cells = []
            for _, col in cols:
                found = pick(key, col)
                cells.append("—" if found is None else _summary_cell(data, found[0], found[1], ref))
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        return lines

    for transport, name in (("shm", "Point-to-point, shared memory, 2 ranks"), ("tcp", "Point-to-point, TCP loopback, 2 ranks")):
        tests = [t for t in ("pingpong", "bw", "bibw", "rate") if f"{transport}-{t}-2" in cases]
        if not tests:
            continue
        sizes = sorted({z for t in tests for z in cases[f"{transport}-{t}-2"]["sizes"]})
        heads = {"pingpong": "ping-pong µs", "bw": "bandwidth MB/s", "bibw": "bi-directional MB/s",
                 "rate": "message rate /s"}
        out += grid(name, [(size_label(z), z) for z in sizes], [(heads[t], t) for t in tests],
                    lambda z, t, tr=transport: (cases[f"{tr}-{t}-2"], z)
                    if z in cases[f"{tr}-{t}-2"]["sizes"] else None)
    rma = [c for c in data["cases"] if c["test"] in RMA]
    if rma:
        sizes = sorted({z for c in rma for z in c["sizes"]})
        heads = {"put_lat": "put µs", "get_lat": "get µs", "acc_lat": "accumulate µs", "put_bw": "put bandwidth MB/s"}
        cols = [(f"{c['transport']} {heads[c['test']]}", c["id"]) for c in rma]
        out += grid("One-sided, 2 ranks (an epoch: lock, the operation, unlock; bandwidth: 64 puts an epoch)",
                    [(size_label(z), z) for z in sizes], cols,
                    lambda z, cid: (cases[cid], z) if z in cases[cid]["sizes"] else None)
    coll = [c for c in data["cases"] if c["test"] in COLLECTIVES]
    if coll:
        sizes = sorted({z for c in coll for z in c["sizes"]})
        rows = [(f"{c['test']}, {c['ranks']} ranks", c["id"]) for c in coll]
        out += grid("Collectives, shared memory (µs a call; 4 and 8 ranks share 2 CPUs)", rows,
                    [(size_label(z), z) for z in sizes],
                    lambda cid, z: (cases[cid], z) if z in cases[cid]["sizes"] else None)
    match = [c for c in data["cases"] if is_matching(c["test"])]
    if match:
        depths = sorted({z for c in match for z in c["sizes"]})
        out += grid("Matching with long queues (µs a message)", [(f"{c['test']}", c["id"]) for c in match],
                    [(f"{z:,} deep", z) for z in depths],
                    lambda cid, z: (cases[cid], z) if z in cases[cid]["sizes"] else None)
    return "\n".join(out) + "\n"


def update_results(md, results_md):
    """Replaces the generated section of bench/RESULTS.md (between the
    markers) with `md`, headings one level down and plot paths relative."""
    begin, end = "<!-- bench/compare: begin (generated; do not edit) -->", "<!-- bench/compare: end -->"
    body = re.sub(r"^(#+) ", lambda m: "#" + m.group(1) + " ", md, flags=re.M)
    body = re.sub(r"\]\(([^)]+\.svg)\)", r"](results/\1)", body)
    body = body.replace("`compare.json`", "`bench/results/compare.json`")
    text = read(results_md)
    section = f"{begin}\n{body}{end}"
    if begin in text and end in text:
        # The generated section has one "## " heading, its own. More means a
        # hand-written section was put below the marker by mistake: replacing
        # it would lose it (as happened once), so refuse and name them all.
        headings = re.findall(r"^## .*$", text[text.index(begin):text.index(end)], flags=re.M)
        if len(headings) > 1:
            sys.exit(f"compare: {results_md}: the generated section holds {len(headings)} '## ' sections, "
                     f"its own and hand-written ones; move those above '{begin}': " + "; ".join(headings))
        text = text[:text.index(begin)] + section + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    with open(results_md, "w") as f:
        f.write(text)


def to_json(data):
    """The results as written: each sample's rows (keyed by size in memory;
    JSON keys would be strings) as a list."""
    out = dict(data)
    out["samples"] = [dict(s, rows=list(s["rows"].values())) for s in data["samples"]]
    return out


def from_json(data):
    """Inverse of to_json, for --verify and for tests."""
    data["samples"] = [dict(s, rows={r["size"]: r for r in s["rows"]}) for s in data["samples"]]
    return data
