#!/usr/bin/env python3
"""Tests of bench/compare's own logic: which samples count, the ratios'
direction, the tables, the regenerated section of RESULTS.md, the output
check, the command lines, and how a launch that hangs after DONE or past
its limit is killed (with its whole process group). The harness's end-to-end
run (`bench/compare --quick`) is in .ci/run."""

import importlib.machinery
import importlib.util
import json
import os
import sys
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_loader = importlib.machinery.SourceFileLoader("compare", os.path.join(ROOT, "bench", "compare"))
_spec = importlib.util.spec_from_loader("compare", _loader)
compare = importlib.util.module_from_spec(_spec)
_loader.exec_module(compare)
sys.path.insert(0, os.path.join(ROOT, "bench"))
import compare_report as report  # noqa: E402  (the analysis and tables bench/compare imports)


def row(size, median, lo, hi, key="median_us"):
    return {"test": "t", "size": size, key: median, "min": lo, "max": hi}


def sample(system, case_id, rows, before=200.0, after=205.0, ok=True):
    return {"round": 0, "case": case_id, "system": system, "transport": "shm", "ranks": 2, "argv": ["x"],
            "env": {}, "rc": 0 if ok else 1, "ok": ok, "error": "" if ok else "exit 1", "note": "",
            "wall_s": 1.0, "probe_before_ns": before, "probe_after_ns": after,
            "rows": {r["size"]: r for r in rows}}


def dataset(samples, cases, unavailable=None):
    return {"meta": {"command": "bench/compare --test", "started": "now", "elapsed_s": 6.0, "rounds": 2, "reps": 3,
                     "quick": True, "machine": {"CPU": "test"}},
            "systems": ["cartage", "mpich", "openmpi"], "cases": [c.to_json() for c in cases],
            "samples": samples, "unavailable": unavailable or {}, "plots": {}, "errors": []}


def alive(pid):
    """Running (a zombie waiting for its reaper is not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Samples(unittest.TestCase):
    def test_probes_that_disagree_flag_the_sample(self):
        self.assertFalse(report.flagged(sample("cartage", "c", [], 200, 290)))
        self.assertTrue(report.flagged(sample("cartage", "c", [], 60, 200)))
        self.assertTrue(report.flagged(sample("cartage", "c", [], 200, 60)))
        self.assertTrue(report.flagged(sample("cartage", "c", [], None, 200)))

    def test_cell_leaves_flagged_launches_out(self):
        s = [sample("cartage", "c", [row(8, 0.2, 0.1, 0.3)], 60, 200),
             sample("cartage", "c", [row(8, 0.5, 0.45, 0.55)]),
             sample("cartage", "c", [row(8, 0.7, 0.65, 0.9)])]
        c = report.cell(s, 8)
        self.assertEqual((c["median"], c["min"], c["max"], c["n"], c["mark"]), (0.6, 0.45, 0.9, 2, ""))

    def test_cell_uses_flagged_launches_when_nothing_else_exists_and_says_so(self):
        s = [sample("cartage", "c", [row(8, 0.2, 0.1, 0.3)], 60, 200), sample("cartage", "c", [], ok=False)]
        c = report.cell(s, 8)
        self.assertEqual((c["median"], c["n"], c["mark"]), (0.2, 1, "flagged"))
        self.assertIsNone(report.cell(s, 64))

    def test_placement_picks_launches_and_falls_back_only_when_allowed(self):
        near = sample("cartage", "c", [row(8, 0.15, 0.14, 0.16)], 55, 60)
        far = [sample("cartage", "c", [row(8, v, v, v)], 200, 210) for v in (0.40, 0.42, 0.44)]
        self.assertEqual(report.sample_state(near), "near")
        self.assertEqual(report.cell([near] + far, 8, "far")["median"], 0.42)
        c = report.cell([near] + far, 8, "near")
        self.assertEqual((c["median"], c["n"], c["mark"]), (0.15, 1, ""))
        c = report.cell(far, 8, "near")
        self.assertEqual((c["median"], c["mark"]), (0.42, "other"))
        self.assertIsNone(report.cell(far, 8, "near", strict=True))
        self.assertEqual(report.reference_state(dataset([near] + far, [])), "far")
        self.assertEqual(report.reference_state(dataset([near], [])), "near")

    def test_failed_launches_never_count(self):
        s = [sample("mpich", "c", [row(8, 9.0, 9.0, 9.0)], ok=False), sample("mpich", "c", [row(8, 1.0, 1.0, 1.0)])]
        self.assertEqual(report.cell(s, 8)["median"], 1.0)

    def test_handoffs_divide_by_the_launchs_own_probes(self):
        s = [sample("cartage", "c", [row(8, 0.4, 0.4, 0.4)], 190, 210),
             sample("cartage", "c", [row(8, 0.12, 0.12, 0.12)], 60, 60),
             sample("cartage", "c", [row(8, 5.0, 5.0, 5.0)], 60, 200)]  # flagged: ignored
        self.assertAlmostEqual(report.handoffs(s, 8), 2.0)


class Ratios(unittest.TestCase):
    def test_above_one_means_cartage_is_faster_for_times_and_for_rates(self):
        lat = compare.Case("pingpong", "shm", 2, [8]).to_json()
        bw = compare.Case("bw", "shm", 2, [8]).to_json()
        self.assertEqual(report.ratio(lat, {"median": 1.0}, {"median": 2.0}), 2.0)
        self.assertEqual(report.ratio(lat, {"median": 2.0}, {"median": 1.0}), 0.5)
        self.assertEqual(report.ratio(bw, {"median": 200.0}, {"median": 100.0}), 2.0)
        self.assertEqual(report.ratio(bw, {"median": 50.0}, {"median": 100.0}), 0.5)
        self.assertIsNone(report.ratio(lat, None, {"median": 1.0}))


class Tables(unittest.TestCase):
    def test_table_cells_and_a_missing_system(self):
        case = compare.Case("allreduce", "shm", 4, [8, 65536])
        s = [sample("mpich", case.id, [row(8, 5000, 4000, 8000), row(65536, 20000, 16000, 30000)]),
             sample("openmpi", case.id, [row(8, 17.3, 17.0, 17.7), row(65536, 126, 125, 128)])]
        data = dataset(s, [case], {f"{case.id}/cartage": "no such test"})
        table = report.case_table(data, data["cases"][0])
        self.assertEqual(table[0], "| bytes | cartage (shm) | MPICH (ch4:ucx, UCX shm) | MPICH ÷ cartage | "
                                   "Open MPI (ob1, vader) | Open MPI ÷ cartage |")
        self.assertEqual(table[2], "| 8 B | — | 5,000 [4,000–8,000] | — | 17.3 [17–17.7] | — |")
        self.assertEqual(table[3], "| 64 KiB | — | 20,000 [16,000–30,000] | — | 126 [125–128] | — |")
        md = report.render_markdown(data)
        self.assertIn("oversubscribed", md)
        self.assertIn("- cartage (shm): no such test", md)

    def test_ratio_column(self):
        case = compare.Case("pingpong", "shm", 2, [8])
        s = [sample("cartage", case.id, [row(8, 0.4, 0.39, 0.41)]), sample("mpich", case.id, [row(8, 0.6, 0.6, 0.7)]),
             sample("openmpi", case.id, [row(8, 0.3, 0.3, 0.3)], 200, 500)]  # flagged, but all there is
        data = dataset(s, [case])
        self.assertEqual(report.case_table(data, data["cases"][0])[2],
                         "| 8 B | 0.4 [0.39–0.41] | 0.6 [0.6–0.7] | 1.50 | 0.3 [0.3–0.3] † | 0.75 |")


    def test_tables_compare_within_the_reference_placement_and_fold_the_other(self):
        # Open MPI ran only in the near placement: its far cell falls back
        # (‡) and gets no ratio; the folded near table compares it.
        case = compare.Case("pingpong", "shm", 2, [8])
        s = [sample("cartage", case.id, [row(8, 0.4, 0.4, 0.4)]), sample("cartage", case.id, [row(8, 0.15, 0.15, 0.15)], 50, 50),
             sample("mpich", case.id, [row(8, 0.6, 0.6, 0.6)]), sample("openmpi", case.id, [row(8, 0.2, 0.2, 0.2)], 50, 50)]
        data = dataset(s, [case])
        md = report.render_markdown(data)
        self.assertIn("| 8 B | 0.4 [0.4–0.4] | 0.6 [0.6–0.6] | 1.50 | 0.2 [0.2–0.2] ‡ | — |", md)
        self.assertIn("The same case in the near placement (2 launches)", md)
        self.assertIn("| 8 B | 0.15 [0.15–0.15] | — | — | 0.2 [0.2–0.2] | 1.33 |", md)


class Summary(unittest.TestCase):
    def test_each_cell_is_cartage_and_the_better_peer_over_cartage_in_the_reference_placement(self):
        lat = compare.Case("pingpong", "shm", 2, [8, 64])
        rate = compare.Case("rate", "shm", 2, [8])
        coll = compare.Case("barrier", "shm", 4, [0])
        s = [sample("cartage", lat.id, [row(8, 0.4, 0.4, 0.4), row(64, 0.5, 0.5, 0.5)]),
             sample("mpich", lat.id, [row(8, 0.6, 0.6, 0.6), row(64, 0.45, 0.45, 0.45)]),
             sample("openmpi", lat.id, [row(8, 0.5, 0.5, 0.5), row(64, 0.1, 0.1, 0.1)], 50, 50),  # near: not counted
             sample("cartage", rate.id, [row(8, 9e6, 9e6, 9e6, "median_msgs_per_s")]),
             sample("mpich", rate.id, [row(8, 6e6, 6e6, 6e6, "median_msgs_per_s")]),
             sample("openmpi", rate.id, [row(8, 12e6, 12e6, 12e6, "median_msgs_per_s")]),
             sample("cartage", coll.id, [row(0, 2.0, 2.0, 2.0)]), sample("openmpi", coll.id, [row(0, 3.0, 3.0, 3.0)])]
        md = report.render_summary(dataset(s, [lat, rate, coll]))
        self.assertIn("far placement", md)
        self.assertIn("| 8 B | 0.4 (1.50) | 9,000,000 (0.75) |", md)  # Open MPI's near 0.5 is not the far cell
        self.assertIn("| 64 B | 0.5 (0.90) | — |", md)
        self.assertIn("| barrier, 4 ranks | 2 (1.50) |", md)
        self.assertIn("[results/compare.md](results/compare.md)", md)

    def test_a_cell_with_no_launch_in_the_placement_falls_back_marked_beside_peers_taken_alike(self):
        lat = compare.Case("pingpong", "shm", 2, [8])
        bw = compare.Case("bw", "shm", 2, [8])
        s = [sample("cartage", lat.id, [row(8, 0.4, 0.4, 0.4)]),  # far: the reference placement
             sample("mpich", lat.id, [row(8, 0.6, 0.6, 0.6)]),
             sample("cartage", bw.id, [row(8, 40.0, 40, 40, "median_MBps")], 50, 200),  # saw the change
             sample("mpich", bw.id, [row(8, 50.0, 50, 50, "median_MBps")]),  # steady: not taken alike
             sample("openmpi", bw.id, [row(8, 80.0, 80, 80, "median_MBps")], 200, 50)]
        md = report.render_summary(dataset(s, [lat, bw]))
        self.assertIn("| 8 B | 0.4 (1.50) | 40† (0.50) |", md)


class Results(unittest.TestCase):
    @staticmethod
    def write(path, text):
        with open(path, "w") as f:
            f.write(text)

    def test_the_generated_section_is_replaced_and_nothing_else(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "RESULTS.md")
            self.write(path, "# Benchmark results\n\nhand-written\n")
            report.update_results("# Title\n\n## Part\n\n![p](a.svg)\n", path)
            once = report.read(path)
            self.assertIn("hand-written\n", once)
            self.assertIn("## Title\n\n### Part\n\n![p](results/a.svg)\n", once)
            report.update_results("# Other\n", path)
            twice = report.read(path)
            self.assertNotIn("Title", twice)
            self.assertIn("## Other\n", twice)
            self.assertEqual(twice.count("bench/compare: begin"), 1)
            self.assertTrue(twice.startswith("# Benchmark results\n\nhand-written\n"))

    def test_a_hand_written_section_inside_the_generated_one_is_refused_and_kept(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "RESULTS.md")
            self.write(path, "# Benchmark results\n")
            report.update_results("# Title\n\n## Part\n", path)
            text = report.read(path).replace("-->\n## Title", "-->\n## Measured by hand\n\nkeep me\n\n## Title")
            self.write(path, text)
            with self.assertRaises(SystemExit) as e:
                report.update_results("# Title\n", path)
            self.assertIn("holds 2 '## ' sections", str(e.exception.code))
            self.assertIn("## Measured by hand", str(e.exception.code))
            self.assertEqual(report.read(path), text)


class Verify(unittest.TestCase):
    def write(self, d, data):
        with open(os.path.join(d, "compare.md"), "w") as f:
            f.write(report.render_markdown(data))
        with open(os.path.join(d, "compare.json"), "w") as f:
            json.dump(report.to_json(data), f)

    def test_complete_output_passes_and_gaps_are_named(self):
        case = compare.Case("pingpong", "shm", 2, [8, 64])
        rows = [row(8, 0.4, 0.4, 0.4), row(64, 0.5, 0.5, 0.5)]
        s = [sample(x, case.id, rows) for x in ("cartage", "mpich", "openmpi")]
        with tempfile.TemporaryDirectory() as d:
            data = dataset(s, [case])
            data["plots"] = {case.id: "p.svg"}
            with open(os.path.join(d, "p.svg"), "w") as f:
                f.write('<?xml version="1.0"?>\n<svg></svg>\n')
            self.write(d, data)
            self.assertEqual(report.verify(d), [])
            os.remove(os.path.join(d, "p.svg"))
            self.assertEqual(report.verify(d), ["shm-pingpong-2: no plot"])
            data["samples"] = s[:2]
            self.write(d, data)
            self.assertIn("shm-pingpong-2: no figures from openmpi", report.verify(d))
            os.remove(os.path.join(d, "compare.md"))
            self.assertTrue(report.verify(d)[0].startswith("cannot read the results"))


class Commands(unittest.TestCase):
    class Cfg:
        cartage, cartage_bench, launch_timeout, reps, coll_target_s = "cartage", "cartage-bench", 60, 3, 0.01

        def peer_binary(self, system):
            return f"osu_{system}"

    def test_peer_command_lines(self):
        cfg = self.Cfg()
        argv, env = compare.command("openmpi", compare.Case("pingpong", "tcp", 2, [8]), cfg)
        self.assertEqual(argv[:2], ["mpirun.openmpi", "--allow-run-as-root"])
        self.assertIn("self,tcp", argv)
        self.assertEqual(argv[argv.index("btl_tcp_if_include") + 1], "lo")
        self.assertEqual(argv[argv.index("oob_tcp_if_include") + 1], "lo")
        self.assertEqual(env, {})
        argv, env = compare.command("mpich", compare.Case("pingpong", "tcp", 2, [8]), cfg)
        self.assertEqual(env["UCX_TLS"], "self,tcp")
        self.assertEqual(env["UCX_NET_DEVICES"], "lo")
        argv, _ = compare.command("openmpi", compare.Case("allreduce", "shm", 64, [8]), cfg)
        self.assertIn("--oversubscribe", argv)
        self.assertNotIn("core", argv)
        argv, env = compare.command("cartage", compare.Case("bw", "tcp", 2, [8, 64]), cfg)
        self.assertEqual(env, {"CARTAGE_METHODS": "tcp"})
        self.assertEqual(argv[-6:], ["bw", "--json", "--reps", "3", "--sizes", "8,64"])


class Launch(unittest.TestCase):
    def test_a_job_that_hangs_after_done_is_killed_with_its_children_and_its_figures_kept(self):
        with tempfile.TemporaryDirectory() as d:
            pidfile = os.path.join(d, "pid")
            script = f"sleep 60 & echo $! > {pidfile}; echo '{{\"size\":8}}'; echo DONE; wait"
            start = time.monotonic()
            rc, out, _, note, _ = compare.launch(["sh", "-c", script], {}, timeout=30, done_grace=0.3)
            self.assertLess(time.monotonic() - start, 10)
            self.assertEqual(rc, 0)
            self.assertEqual(out, ['{"size":8}', "DONE"])
            self.assertIn("after DONE", note)
            child = int(report.read(pidfile))
            deadline = time.monotonic() + 5
            while alive(child) and time.monotonic() < deadline:
                time.sleep(0.05)
            self.assertFalse(alive(child), "the job's child outlived the kill")

    def test_a_job_past_its_limit_is_killed_and_fails(self):
        rc, _, _, note, wall = compare.launch(["sh", "-c", "echo started >&2; sleep 60"], {}, timeout=0.5)
        self.assertNotEqual(rc, 0)
        self.assertIn("limit", note)
        self.assertLess(wall, 10)

    def test_exit_status_and_stderr_come_back(self):
        rc, out, err, note, _ = compare.launch(["sh", "-c", "echo x; echo oops >&2; exit 3"], {}, timeout=10)
        self.assertEqual((rc, out, err.strip(), note), (3, ["x"], "oops", ""))


if __name__ == "__main__":
    unittest.main(verbosity=2)
