#!/usr/bin/env python3
"""Checks a Trace Event Format file as Perfetto and chrome://tracing read it.

  trace_event_check.py FILE.json   -> exit 0, or 1 naming every problem
  trace_event_check.py --self-test -> proves each rule fires on a broken file

Rules: every event's fields are typed (name, ph, pid, tid, ts; dur on a
complete slice); begin/end pairs balance per track and name the same slice;
on each track the slices' timestamps never go back, and complete slices nest
or stand apart; every flow id has one start and one finish, the finish no
earlier, and each end lies in a slice of its own track (so the arrow binds).
"""
import bisect
import json
import sys
from collections import defaultdict

PHASES = set("XBEiIsftMbenC")
SLICE_PHASES = set("XBEiI")


def check(doc):
    problems = []
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        return ["the top level is not an object with a traceEvents list"]
    tracks = defaultdict(list)  # (pid, tid) -> slice-type events, in file order
    flows = defaultdict(list)
    for i, ev in enumerate(doc["traceEvents"]):
        where = f"event {i}"
        if not isinstance(ev, dict):
            problems.append(f"{where}: not an object")
            continue
        ph = ev.get("ph")
        if not isinstance(ph, str) or ph not in PHASES:
            problems.append(f"{where}: phase {ph!r} is none of {''.join(sorted(PHASES))}")
            continue
        if not isinstance(ev.get("name"), str):
            problems.append(f"{where}: name is not a string")
        for k in ("pid", "tid"):
            if not isinstance(ev.get(k), int) or isinstance(ev.get(k), bool):
                problems.append(f"{where}: {k} is not an integer")
        if "cat" in ev and not isinstance(ev["cat"], str):
            problems.append(f"{where}: cat is not a string")
        if "args" in ev and not isinstance(ev["args"], dict):
            problems.append(f"{where}: args is not an object")
        if ph == "M":
            continue
        ts = ev.get("ts")
        if not isinstance(ts, (int, float)) or isinstance(ts, bool):
            problems.append(f"{where}: ts is not a number")
            continue
        if ph == "X":
            dur = ev.get("dur")
            if not isinstance(dur, (int, float)) or isinstance(dur, bool) or dur < 0:
                problems.append(f"{where}: a complete slice needs a dur >= 0")
                continue
        track = (ev.get("pid"), ev.get("tid"))
        if ph in SLICE_PHASES:
            tracks[track].append((i, ev))
        elif ph in "stf":
            if "id" not in ev:
                problems.append(f"{where}: a flow event has no id")
            else:
                flows[(ev.get("cat"), ev["id"])].append((i, ev))

    slices = defaultdict(list)  # track -> (start, end)
    for track, evs in tracks.items():
        last = None
        stack = []
        open_x = []  # ends of the complete slices enclosing this point
        for i, ev in evs:
            ts = ev["ts"]
            if last is not None and ts < last:
                problems.append(f"event {i}: ts {ts} goes back on track pid {track[0]} tid {track[1]} (was {last})")
            last = ts
            ph = ev["ph"]
            if ph == "B":
                stack.append((i, ev))
            elif ph == "E":
                if not stack:
                    problems.append(f"event {i}: an end with no begin on track pid {track[0]} tid {track[1]}")
                else:
                    j, b = stack.pop()
                    if ev.get("name") not in (None, "", b.get("name")):
                        problems.append(f"event {i}: ends {ev.get('name')!r} but {b.get('name')!r} (event {j}) is open")
                    slices[track].append((b["ts"], ts))
            elif ph == "X":
                end = ts + ev["dur"]
                while open_x and open_x[-1] <= ts + 1e-6:  # ends where the next begins (µs, 3 decimals)
                    open_x.pop()
                if open_x and end > open_x[-1] + 1e-6:
                    problems.append(f"event {i}: slice [{ts}, {end}] overlaps an enclosing one ending at "
                                    f"{open_x[-1]} on track pid {track[0]} tid {track[1]} without nesting")
                open_x.append(end)
                slices[track].append((ts, end))
            else:
                slices[track].append((ts, ts))
        for j, b in stack:
            problems.append(f"event {j}: begin {b.get('name')!r} never ends")

    # Per track: slices by start, and the latest end among those that start
    # no later than each, so a point's enclosing slice is a binary search away.
    track_starts, track_reach = {}, {}
    for track, spans in slices.items():
        spans.sort()
        track_starts[track] = [b for b, _ in spans]
        far, ends = float("-inf"), []
        for _, e in spans:
            far = max(far, e)
            ends.append(far)
        track_reach[track] = ends

    def bound(ev):
        track = (ev.get("pid"), ev.get("tid"))
        k = bisect.bisect_right(track_starts.get(track, []), ev["ts"] + 1e-6) - 1
        return k >= 0 and track_reach[track][k] >= ev["ts"] - 1e-6

    for (cat, fid), evs in flows.items():
        starts = [ev for _, ev in evs if ev["ph"] == "s"]
        finishes = [ev for _, ev in evs if ev["ph"] == "f"]
        if len(starts) != 1 or len(finishes) != 1:
            problems.append(f"flow {cat}/{fid}: {len(starts)} starts and {len(finishes)} finishes (one each)")
            continue
        s, f = starts[0], finishes[0]
        if f["ts"] < s["ts"]:
            problems.append(f"flow {cat}/{fid}: finishes at {f['ts']}, before it starts at {s['ts']}")
        for ev in (s, f):
            if not bound(ev):
                problems.append(f"flow {cat}/{fid}: its {ev['ph']} at {ev['ts']} lies in no slice of pid "
                                f"{ev.get('pid')} tid {ev.get('tid')}")
    return problems


def self_test():
    good = {"traceEvents": [
        {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "rank 0"}},
        {"name": "a", "ph": "X", "pid": 0, "tid": 1, "ts": 1.0, "dur": 2.0},
        {"name": "b", "ph": "X", "pid": 0, "tid": 1, "ts": 1.5, "dur": 0.5},
        {"name": "c", "ph": "B", "pid": 1, "tid": 1, "ts": 2.0},
        {"name": "c", "ph": "E", "pid": 1, "tid": 1, "ts": 3.0},
        {"name": "m", "cat": "message", "ph": "s", "id": 1, "pid": 0, "tid": 1, "ts": 1.0},
        {"name": "m", "cat": "message", "ph": "f", "bp": "e", "id": 1, "pid": 1, "tid": 1, "ts": 2.5},
    ]}
    assert check(good) == [], check(good)
    broken = {
        "untyped pid": lambda t: t["traceEvents"][1].update(pid="0"),
        "bad phase": lambda t: t["traceEvents"][1].update(ph="Q"),
        "no dur": lambda t: t["traceEvents"][1].pop("dur"),
        "unbalanced": lambda t: t["traceEvents"].pop(4),
        "time goes back": lambda t: t["traceEvents"][2].update(ts=0.5, dur=0.1),
        "overlap without nesting": lambda t: t["traceEvents"][2].update(dur=5.0),
        "unpaired flow": lambda t: t["traceEvents"].pop(6),
        "flow backwards": lambda t: t["traceEvents"][6].update(ts=0.5),
        "flow binds nothing": lambda t: t["traceEvents"][6].update(ts=9.0),
    }
    for what, breaks in broken.items():
        t = json.loads(json.dumps(good))
        breaks(t)
        if not check(t):
            print(f"trace_event_check: the rule for '{what}' did not fire")
            return 1
    print(f"trace_event_check: {len(broken)} broken files, each refused")
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print(__doc__)
        return 2
    with open(argv[1]) as f:
        doc = json.load(f)
    problems = check(doc)
    for p in problems[:50]:
        print(p)
    n = len(doc.get("traceEvents", [])) if isinstance(doc, dict) else 0
    print(f"trace_event_check: {argv[1]}: {n} events, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
