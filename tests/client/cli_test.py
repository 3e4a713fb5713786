"""The looptool CLI end to end: tune with an embedded server (--json), eval, benchmarks, peak,
and the errors a user sees for a bad benchmark or search."""
import json
import os
import subprocess
import tempfile
import unittest

LOOPTOOL = os.path.join(os.getcwd(), "client/cpp/looptool")


REPLAN = os.path.join(os.getcwd(), "tools/replan_records")


def run(*args, timeout=120):
    return subprocess.run([LOOPTOOL, *args], capture_output=True, text=True, timeout=timeout)


def replan(db, *args):
    p = subprocess.run([REPLAN, "--records=" + db, *args], capture_output=True, text=True,
                       timeout=120, check=True)
    return json.loads(p.stdout)


class CliTest(unittest.TestCase):
    def test_tune_json(self):
        p = run("tune", "--benchmark", "mm64_80_96", "--search", "random", "--time-limit", "1.5",
                "--json", "--timing-budget-ms=1")
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout)
        for key in ("benchmark", "search", "actions", "loop_tree", "gflops", "start_gflops",
                    "peak_gflops", "speedup", "seconds", "states_evaluated"):
            self.assertIn(key, out)
        self.assertEqual(out["benchmark"], "benchmark://mm64_256_16_range-v0/mm64_80_96")
        self.assertEqual(out["search"], "random")
        self.assertGreaterEqual(out["gflops"], out["start_gflops"])
        self.assertAlmostEqual(out["speedup"], out["gflops"] / out["start_gflops"], places=9)
        self.assertLess(out["seconds"], 10.0)  # (the limit itself: search_algorithms_test)
        self.assertGreater(out["states_evaluated"], 0)
        self.assertIn("for ", out["loop_tree"])

        # eval replays the actions to the same loop tree.
        e = run("eval", "--benchmark", out["benchmark"], "--actions", ",".join(out["actions"]),
                "--json", "--eval_seconds=1")
        self.assertEqual(e.returncode, 0, e.stderr)
        ev = json.loads(e.stdout)
        self.assertEqual(ev["loop_tree"], out["loop_tree"])
        # Re-timed for the time given, the fastest counting, the first measurement beside it.
        self.assertGreater(ev["retimings"], 1)
        self.assertGreater(ev["measured_gflops"], 0)
        # The start is measured once: the speedup compares first measurements.
        self.assertAlmostEqual(ev["speedup"], ev["measured_gflops"] / ev["start_gflops"], places=9)
        # --eval_seconds=0: the one measurement a search would take.
        e = run("eval", "--benchmark", out["benchmark"], "--actions", ",".join(out["actions"]),
                "--json", "--eval_seconds=0")
        ev = json.loads(e.stdout)
        self.assertEqual((ev["retimings"], ev["gflops"]), (0, ev["measured_gflops"]))
        e = run("eval", "--benchmark", out["benchmark"], "--eval_seconds=61")
        self.assertEqual(e.returncode, 2, e.stderr)
        self.assertIn("--eval_seconds must be 0..60, not 61", e.stderr)

    def test_tune_with_the_built_in_policies(self):
        # One greedy episode of a built-in policy in its own action space, only the final state
        # timed; eval replays its actions (in that space) to the same loop tree. The default
        # chooses one of the server's sketches (loop_nest tiles and interchanges); looptune_dqn
        # walks LoopTune's cursor space for up to 10 actions.
        for policy, space in (("", "loop_nest"), ("--policy=looptune_dqn", "loop_tune")):
            p = run("tune", "--benchmark", "mm64_80_96", "--search=policy", "--json",
                    "--timing-budget-ms=1", *([policy] if policy else []))
            self.assertEqual(p.returncode, 0, p.stderr)
            out = json.loads(p.stdout)
            self.assertEqual(out["search"], "policy")
            self.assertEqual(out["states_evaluated"], 1)
            self.assertEqual(out["start_gflops"], 0)
            self.assertGreater(out["gflops"], 0)
            self.assertLessEqual(len(out["actions"]), 10)
            if space == "loop_nest":
                self.assertTrue(out["actions"])
                self.assertTrue(all(a.startswith(("tile_L", "interchange_L"))
                                    for a in out["actions"]), out["actions"])
            else:
                self.assertLessEqual(set(out["actions"]), {
                    "up", "down", "swap_up", "swap_down", "split_4", "split_8", "split_16"})
            e = run("eval", "--benchmark", out["benchmark"], "--actions",
                    ",".join(out["actions"]), "--action-space", space, "--json")
            self.assertEqual(e.returncode, 0, e.stderr)
            self.assertEqual(json.loads(e.stdout)["loop_tree"], out["loop_tree"])
        g = run("tune", "--benchmark", "mm64_80_96", "--search=policy_guided", "--time-limit=1",
                "--json", "--timing-budget-ms=1")
        self.assertEqual(g.returncode, 0, g.stderr)
        self.assertGreater(json.loads(g.stdout)["states_evaluated"], 1)

    def test_loop_set_by_name_is_the_policy_of_the_servers_isa(self):
        # `--policy=loop_set` on an AVX2 server plays the built-in policy learned from AVX2
        # records (its greedy episode: the file's), not the AVX-512 one (which tiles this matmul
        # otherwise).
        def greedy(policy):
            p = run("tune", "--benchmark=mm64_160_96", "--search=policy", "--isa=avx2",
                    "--policy=" + policy, "--policy-candidates=1", "--json",
                    "--timing-budget-ms=1")
            self.assertEqual(p.returncode, 0, p.stderr)
            out = json.loads(p.stdout)
            self.assertEqual(out["states_evaluated"], 1)
            return out["actions"]
        by_name = greedy("loop_set")
        self.assertTrue(by_name)
        self.assertEqual(by_name, greedy("datasets/policies/loop_set_avx2.json"))
        self.assertNotEqual(by_name, greedy("datasets/policies/loop_set.json"))

    def test_bad_policy_files(self):
        p = run("tune", "--search=policy", "--policy=/nonexistent/policy.json")
        self.assertEqual(p.returncode, 1)
        self.assertIn("cannot read policy file /nonexistent/policy.json", p.stderr)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write('{"format": "something else"}')
        p = run("tune", "--search=policy", f"--policy={f.name}")
        os.unlink(f.name)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not a LoopTool policy file: format is not looptool-policy", p.stderr)

    def test_eval_text_and_program_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".lt", delete=False) as f:
            f.write("O[r] += I[r,c]\nr=64 c=48\n")
        p = run("eval", "--benchmark", f.name, "--actions", "up,split_4")
        os.unlink(f.name)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("benchmark://user-v0/" + os.path.basename(f.name)[:-3], p.stdout)
        self.assertIn("up         (no effect)", p.stdout)
        self.assertIn("for r in 16 : L0", p.stdout)
        # The code generator's plan for the server's target (the kernel_plan observation).
        self.assertIn("kernel plan\n  statement 1: O[r] += I[r, c]\n", p.stdout)
        self.assertRegex(p.stdout, r"\n    (avx512|avx2|sse), \d+ lanes?(, horizontal)?, \d+ "
                                   r"accumulators?\n")
        self.assertIn("-- register scope", p.stdout)

    def test_peak(self):
        # The peak of the core asked for, measured by an embedded server started for it; the
        # text form names the core and the host.
        p = run("peak", "--json", "--eval_cores=0")
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout)
        self.assertEqual((out["cpu"], out["measured"]), (0, "now"))
        self.assertGreater(out["peak_gflops"], 1)
        self.assertTrue(out["host_cpu"])
        p = run("peak", "--eval_cores=0")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"^peak +[0-9.]+ GFLOPS  \(FMA peak of one core, .+; measured "
                                   r"now on cpu 0\)\n$")
        # A CPU the machine does not have: refused, not measured unpinned and named as asked.
        p = run("peak", "--eval_cores=1000")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("cannot run a kernel worker on cpu 1000", p.stderr)
        self.assertEqual(p.stdout, "")

    def test_benchmarks(self):
        p = run("benchmarks")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"mm64_256_16_range-v0\s+2197\s+432")
        for d in ("conv2d-v0", "pool-v0", "reduce-v0", "transpose-v0", "mm_relu-v0"):
            self.assertIn(d, p.stdout)
        p = run("benchmarks", "--dataset=pool-v0")
        self.assertIn("benchmark://pool-v0/resnet_maxpool_3x3s2_64_56", p.stdout)

    def test_tune_a_dataset_into_a_store(self):
        # A dataset's test split tuned with the embedded server, kept in a schedule store; a
        # second single-benchmark run starts from the stored schedule; `schedules` lists and
        # exports what is kept.
        with tempfile.TemporaryDirectory() as d:
            store = os.path.join(d, "schedules.db")
            # (1 s: the untiled start of a 1024 x 1024 reduction, checked against the
            # interpreter and timed, within it on a loaded machine too; else the search's
            # DEADLINE_EXCEEDED sends it to a second attempt.)
            p = run("tune", "--dataset=reduce-v0", "--split=all", "--max-benchmarks=3",
                    "--time-limit=1", f"--store={store}", "--json", "--timing-budget-ms=1")
            self.assertEqual(p.returncode, 0, p.stderr)
            lines = [json.loads(l) for l in p.stdout.splitlines()]
            self.assertEqual(sorted(l["benchmark"] for l in lines), sorted(
                "benchmark://reduce-v0/" + n
                for n in ("rowsum_1024_1024", "colsum_1024_1024", "rowmax_512_2048")))
            for l in lines:
                self.assertGreater(l["gflops"], 0)
                self.assertEqual(l["attempts"], 1)
                self.assertTrue(l["stored"])
                self.assertEqual(l["stored_prefix"], 0)
            self.assertIn("tuned 3 of 3 benchmarks", p.stderr)
            first = {l["benchmark"]: l for l in lines}

            s = run("schedules", f"--store={store}", "--json")
            self.assertEqual(s.returncode, 0, s.stderr)
            kept = {j["benchmark"]: j for j in map(json.loads, s.stdout.splitlines())}
            self.assertEqual(set(kept), set(first))
            for uri, j in kept.items():
                self.assertEqual(j["actions"], first[uri]["actions"])
                self.assertEqual(j["gflops"], first[uri]["gflops"])
                self.assertEqual(j["host_cpu"], first[uri]["host_cpu"])
                self.assertEqual(j["action_space"], "loop_nest")  # evolution's
            text = run("schedules", f"--store={store}")
            self.assertIn("benchmark://reduce-v0/rowsum_1024_1024", text.stdout)
            self.assertIn("3 schedules in", text.stderr)
            self.assertEqual(run("schedules", f"--store={store}", "--host=no such cpu",
                                 "--json").stdout, "")

            uri = "benchmark://reduce-v0/rowmax_512_2048"
            again = run("tune", f"--benchmark={uri}", "--time-limit=1", f"--store={store}",
                        "--json", "--timing-budget-ms=1")
            self.assertEqual(again.returncode, 0, again.stderr)
            out = json.loads(again.stdout)
            n = len(first[uri]["actions"])
            self.assertEqual(out["stored_prefix"], n)
            self.assertEqual(out["actions"][:n], first[uri]["actions"])

            with open(os.path.join(d, "text.db"), "w") as f:
                f.write("not a database, just text of some length for SQLite to refuse\n")
            bad = run("tune", "--benchmark=mm64_64_64", f"--store={d}/text.db", "--time-limit=1")
            self.assertEqual(bad.returncode, 2)
            self.assertIn("is not a LoopTool schedule store", bad.stderr)

    def test_tune_a_list_of_programs(self):
        # Program files and a URI in one list: each tuned once, programs under user-v0.
        with tempfile.TemporaryDirectory() as d:
            files = []
            for name, text in (("rows", "O[r] += I[r,c]\nr=64 c=48\n"),
                               ("cols", "O[c] += I[r,c]\nr=32 c=96\n")):
                files.append(os.path.join(d, name + ".lt"))
                with open(files[-1], "w") as f:
                    f.write(text)
            p = run("tune", "--benchmark=" + ",".join(files + ["mm64_64_64"]),
                    "--time-limit=0.3", "--json", "--timing-budget-ms=1")
            self.assertEqual(p.returncode, 0, p.stderr)
            got = sorted(json.loads(l)["benchmark"] for l in p.stdout.splitlines())
            self.assertEqual(got, ["benchmark://mm64_256_16_range-v0/mm64_64_64",
                                   "benchmark://user-v0/cols", "benchmark://user-v0/rows"])

    def test_records_keep_every_measured_kernel_once(self):
        # Two searches (one program, one test-split benchmark) into one records file: each
        # kernel a run measured is kept once, as many as the run says it recorded; the actions of
        # its best record reach that record's loop tree; the test matmul is in the evaluation
        # split, and every program of the servers' test splits is known as such.
        import sqlite3
        with tempfile.TemporaryDirectory() as d:
            db = os.path.join(d, "records.db")
            program = os.path.join(d, "rows.lt")
            with open(program, "w") as f:
                f.write("O[r] += I[r,c]\nr=64 c=48\n")
            test_matmul = "benchmark://mm64_256_16_range-v0/mm64_80_64"
            results = []
            for benchmark in (program, test_matmul):
                p = run("tune", "--benchmark=" + benchmark, "--time-limit=1", "--json",
                        "--timing-budget-ms=1", "--records=" + db)
                self.assertEqual(p.returncode, 0, p.stderr)
                results.append(json.loads(p.stdout))
            c = sqlite3.connect(db)
            for benchmark, out in zip((program, test_matmul), results):
                self.assertGreater(out["recorded"], 3)
                n, distinct = c.execute(
                    "SELECT count(*), count(DISTINCT schedule) FROM measurements WHERE run_id = ?",
                    (out["records_run"],)).fetchone()
                self.assertEqual((n, distinct), (out["recorded"], out["recorded"]))
                actions, tree, gflops, peak, fraction, split = c.execute(
                    "SELECT actions, loop_tree, gflops, peak_gflops, fraction_of_peak, split "
                    "FROM records WHERE run_id = ? ORDER BY gflops DESC LIMIT 1",
                    (out["records_run"],)).fetchone()
                self.assertAlmostEqual(fraction, gflops / peak)
                # The run's peak is the server's (what every measured kernel is divided by).
                self.assertAlmostEqual(peak, out["server_peak_gflops"])
                e = run("eval", "--benchmark", benchmark, "--action_space=loop_nest",
                        "--actions", ",".join(json.loads(actions)), "--json")
                self.assertEqual(e.returncode, 0, e.stderr)
                self.assertEqual(json.loads(e.stdout)["loop_tree"], tree)
            splits = [r[0] for r in c.execute(
                "SELECT split FROM programs ORDER BY id").fetchall()]
            self.assertIn(splits[0], ("train", "validation"))
            self.assertEqual(splits[1], "evaluation")
            self.assertGreater(c.execute("SELECT count(*) FROM evaluation_programs").fetchone()[0],
                               25)
            # Plan features by name, and the roofline of each run.
            features = json.loads(c.execute("SELECT plan_features FROM measurements LIMIT 1")
                                  .fetchone()[0])
            self.assertEqual(features["bias"], 1.0)
            self.assertGreater(c.execute("SELECT min(roofline_gflops) FROM runs").fetchone()[0], 0)
            # tools/replan_records replays every kernel's actions to the same features; where a
            # feature is missing (a record of an older server), it adds it.
            kernels = c.execute("SELECT count(*) FROM measurements").fetchone()[0]
            self.assertEqual(replan(db, "--check"), {
                "records": db, "kernels": kernels, "replayed": kernels, "failed": 0,
                "changed": 0, "added": 0, "updated": False})
            c.execute("UPDATE measurements SET plan_features = "
                      "json_remove(plan_features, '$.tail_loops') WHERE id % 2 = 0")
            c.commit()
            halved = c.execute("SELECT count(*) FROM measurements WHERE id % 2 = 0").fetchone()[0]
            self.assertGreater(halved, 0)
            self.assertEqual(replan(db)["added"], halved)
            self.assertEqual(replan(db, "--check")["added"], 0)
            self.assertEqual(json.loads(c.execute(
                "SELECT plan_features FROM measurements WHERE id = 2").fetchone()[0]).keys(),
                features.keys())
            # A file another writer holds: refused after the 10 s wait, nothing written.
            before = c.execute("SELECT id, plan_features FROM measurements").fetchall()
            c.execute("UPDATE measurements SET plan_features = "
                      "json_remove(plan_features, '$.tail_loops')")
            c.commit()
            stripped = c.execute("SELECT id, plan_features FROM measurements").fetchall()
            c.execute("BEGIN EXCLUSIVE")
            p = subprocess.run([REPLAN, "--records=" + db], capture_output=True, text=True,
                               timeout=60)
            c.rollback()
            self.assertEqual(p.returncode, 2)
            self.assertIn("cannot start writing", p.stderr)
            self.assertIn("nothing changed", p.stderr)
            self.assertEqual(c.execute("SELECT id, plan_features FROM measurements").fetchall(),
                             stripped)
            self.assertNotEqual(stripped, before)
            self.assertEqual(replan(db)["added"], kernels)
            for bad, message in ((db + ".missing", "must name a tuning records file"),
                                 (os.path.join(d, "notes.txt"), "is not a tuning records file")):
                with open(os.path.join(d, "notes.txt"), "w") as f:
                    f.write("not a database\n" * 100)
                p = subprocess.run([REPLAN, "--records=" + bad], capture_output=True, text=True,
                                   timeout=60)
                self.assertEqual(p.returncode, 2)
                self.assertIn(message, p.stderr)

    def test_tune_many_refusals(self):
        p = run("tune", "--dataset=reduce-v0", "--split=some")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown split 'some': use all, train or test", p.stderr)
        p = run("tune", "--dataset=no-such-v0")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown dataset 'no-such-v0'", p.stderr)
        p = run("tune", "--dataset=reduce-v0", "--max-benchmarks=0")
        self.assertEqual(p.returncode, 2)
        p = run("tune", "--benchmark=mm64_80_96", "--search=policy", "--policy_seconds=0")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--policy_seconds must be in 0.001..3600, not 0", p.stderr)
        p = run("tune", "--benchmark=mm64_80_96", "--search=policy", "--policy_timed=0")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--policy_timed must be in 1..1024, not 0", p.stderr)
        p = run("tune", "--benchmark=mm64_80_96", "--search=policy_guided", "--guided_timed=1025")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--guided_timed must be in 1..1024, not 1025", p.stderr)
        p = run("tune", "--benchmark=mm64_80_96", "--search=policy_guided",
                "--guided_neighbor_share=0.6")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--guided_neighbor_share must be in 0..0.5, not 0.6", p.stderr)
        p = run("tune", "--benchmark=mm64_80_96", "--search=policy", "--pass_predicted_slower=-1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--pass_predicted_slower must be 0 or more, not -1", p.stderr)
        p = run("tune", "--dataset=reduce-v0", "--server=127.0.0.1:1", "--servers=127.0.0.1:2")
        self.assertEqual(p.returncode, 2)
        self.assertIn("not both", p.stderr)
        p = run("schedules")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--store", p.stderr)
        p = run("schedules", "--store=/nonexistent/x.db")
        self.assertEqual(p.returncode, 2)
        self.assertIn("no schedule store at /nonexistent/x.db", p.stderr)

    def test_errors(self):
        p = run("tune", "--benchmark", "nonsense", "--time-limit", "1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("neither a benchmark:// URI", p.stderr)
        p = run("tune", "--benchmark", "mm64_64_64", "--search", "beam3", "--time-limit", "1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown search 'beam3'", p.stderr)
        # A name longer than the file system takes (a long list of benchmarks is one) is no
        # file, and not a crash.
        p = run("tune", "--benchmark=" + "x" * 5000, "--time-limit", "1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("neither a benchmark:// URI", p.stderr)
        p = run("export", "--output=" + tempfile.gettempdir(), "--benchmark=" + "x" * 5000)
        self.assertEqual(p.returncode, 2)
        self.assertIn("neither a benchmark:// URI", p.stderr)
        p = run("tune", "--benchmark", "benchmark://pool-v0/nope", "--time-limit", "1")
        self.assertEqual(p.returncode, 1)
        self.assertIn("Benchmark not found: benchmark://pool-v0/nope", p.stderr)
        # The server flags' own types refuse bad values (Abseil's flag parser exits 1).
        p = run("tune", "--benchmark", "mm64_64_64", "--timing", "fast", "--time-limit", "1")
        self.assertEqual(p.returncode, 1)
        self.assertIn("Illegal value 'fast' specified for flag 'timing'; must be adaptive or fixed",
                      p.stderr)
        p = run("tune", "--benchmark", "mm64_64_64", "--eval-cores", "x", "--time-limit", "1")
        self.assertEqual(p.returncode, 1)
        self.assertIn("specified for flag 'eval_cores'; takes CPU numbers", p.stderr)


if __name__ == "__main__":
    unittest.main()
