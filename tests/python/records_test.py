"""looptool.records: the loader on the committed sample (datasets/records/sample.db), the
program distribution, bad files, and `python3 -m looptool.records generate` end to end (two
programs, each kernel recorded once), and `remeasure` (each validation kernel timed again once)."""
import contextlib
import dataclasses
import io
import itertools
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest
import unittest.mock

import numpy as np

from looptool import records
from looptool.records import cost_model, programs, remeasure
from looptool.rl import rank_eval
from looptool.server import LocalServer

SAMPLE = os.path.abspath("datasets/records/sample.db")
CLI = os.path.abspath("client/cpp/looptool")
SERVER = os.path.abspath("service/looptool-server")


class LoaderTest(unittest.TestCase):
    def test_the_sample(self):
        rows = records.load(SAMPLE)
        db = sqlite3.connect(SAMPLE)
        self.assertEqual(len(rows), db.execute("SELECT count(*) FROM measurements").fetchone()[0])
        # Every field as the view has it, for one record.
        r = rows[5]
        view = db.execute("SELECT program, split, gflops, fraction_of_peak, actions, "
                          "plan_features, host_cpu, isa FROM records WHERE id = ?",
                          (r.id,)).fetchone()
        self.assertEqual((r.program, r.split, r.gflops, r.fraction_of_peak), view[:4])
        self.assertEqual(r.actions, json.loads(view[4]))
        self.assertEqual(r.plan_features, json.loads(view[5]))
        self.assertEqual((r.host_cpu, r.isa), view[6:])
        self.assertAlmostEqual(r.fraction_of_peak, r.gflops / r.peak_gflops)
        self.assertTrue(r.kind)
        # Written before the searches said how they timed each kernel.
        self.assertEqual({(x.timing, x.timed_runs) for x in rows}, {(None, None)})
        # Once per kernel per run.
        self.assertEqual(len({(x.run_id, x.schedule) for x in rows}), len(rows))
        # Splits partition the records.
        by_split = {s: records.load(SAMPLE, split=s) for s in records.SPLITS}
        self.assertEqual(sum(len(v) for v in by_split.values()), len(rows))
        self.assertTrue(by_split["train"])
        self.assertTrue(all(x.split == "train" for x in by_split["train"]))
        # Filters.
        self.assertEqual(len(records.load(SAMPLE, isa="no-such-isa")), 0)
        self.assertEqual(len(records.load(SAMPLE, host=rows[0].host_cpu)), len(rows))
        kinds = {x.kind for x in rows}
        one = sorted(kinds)[0]
        self.assertEqual({x.kind for x in records.load(SAMPLE, kinds=[one])}, {one})

    def test_features_and_the_best(self):
        rows = records.load(SAMPLE)
        names, x = records.feature_matrix(rows)
        self.assertEqual(names[:4], ["bias", "vectorized", "horizontal", "log2_width"])
        self.assertEqual(x.shape, (len(rows), len(names)))
        self.assertEqual(x.dtype, np.float32)
        np.testing.assert_array_equal(x[:, 0], 1.0)
        self.assertEqual(x[7, 3], np.float32(rows[7].plan_features["log2_width"]))
        best = records.best_per_program(rows)
        self.assertEqual(set(best), {x.program_id for x in rows})
        for pid, b in best.items():
            speeds = [(x.retimed_gflops or x.gflops) for x in rows if x.program_id == pid]
            self.assertEqual(b.retimed_gflops or b.gflops, max(speeds))
        self.assertEqual(records.best_per_program(rows, host="no such host"), {})
        self.assertEqual(records.feature_matrix([])[1].shape, (0, 0))

    def test_features_of_mixed_versions(self):
        # A record of a later server version (a feature appended) after one of an earlier: the
        # columns are the union, first appearance first, and the older record reads 0 there,
        # whichever comes first; the cost model's featurize agrees.
        rows = records.load(SAMPLE)
        old = dataclasses.replace(rows[0], plan_features={
            k: v for k, v in rows[0].plan_features.items() if k != "vectorized"})
        new = dataclasses.replace(rows[1], plan_features=dict(rows[1].plan_features,
                                                              folded_rows=1.0))
        for pair in ([old, new], [new, old]):
            names, x = records.feature_matrix(pair)
            self.assertEqual(set(names), set(new.plan_features))
            self.assertEqual(len(names), len(set(names)))
            at = names.index("folded_rows")
            self.assertEqual(x[pair.index(old), at], 0)
            self.assertEqual(x[pair.index(new), at], 1)
            self.assertEqual(cost_model.featurize(pair).plan.shape, x.shape)
        self.assertEqual(records.plan_feature_names([old, new])[-1], "folded_rows")

    def test_summary(self):
        s = records.summary(SAMPLE)
        rows = records.load(SAMPLE)
        self.assertEqual(sum(s["kernels"].values()), len(rows))
        self.assertEqual(sum(k["kernels"] for k in s["per_kind"].values()), len(rows))
        self.assertEqual(sum(s["programs"].values()), len({x.program_id for x in rows}))
        # the sample: 8 runs of 3 s, from one generator (33 s from first start to last end)
        self.assertEqual(s["runs"], 8)
        self.assertEqual(s["timings"], {"unknown": len(rows)})
        self.assertAlmostEqual(s["search_seconds"], 8 * 3.0)
        self.assertAlmostEqual(s["span_seconds"], 32.839, places=3)
        for k in s["per_kind"].values():
            self.assertGreater(k["best_fraction_of_peak"], 0)
            self.assertLessEqual(k["best_fraction_of_peak"], 1.2)

    def test_bad_files(self):
        with self.assertRaisesRegex(records.RecordsError, "no tuning records at /nonexistent"):
            records.load("/nonexistent/records.db")
        with tempfile.TemporaryDirectory() as d:
            text = os.path.join(d, "text.db")
            with open(text, "w") as f:
                f.write("not a database at all, but long enough to have a header" * 4)
            with self.assertRaisesRegex(records.RecordsError, "is not a LoopTool tuning records"):
                records.load(text)
            other = os.path.join(d, "other.db")
            db = sqlite3.connect(other)
            db.execute("CREATE TABLE meta (key TEXT, value TEXT)")
            db.execute("INSERT INTO meta VALUES ('format', 'someone else 3')")
            db.commit()
            db.close()
            with self.assertRaisesRegex(records.RecordsError, "'someone else 3'"):
                records.load(other)
        with self.assertRaisesRegex(ValueError, "unknown split 'test'"):
            records.load(SAMPLE, split="test")


class CostModelTest(unittest.TestCase):
    TREE = ("for m in 64 : L0  <<<<<< cursor (line 0 )\n"
            " for n in 2 r 3 : L1\n"
            "  for k in 16 : L2 unroll\n"
            "   for n' in 16 : L3 vectorize\n"
            "    %2[m, n, k] <- multiply(%0, %1)\n"
            "    %3[m, n] <- add(%2)\n"
            " for n in 35 : L5\n"
            "  %4[m, n] <- write(%3)\n")
    PROGRAM = "C[m, n] += A[m, k] * B[k, n]\nm=64 n=35 k=16\n"

    def test_loop_features_by_hand(self):
        f = cost_model.loop_features(self.TREE, self.PROGRAM)
        self.assertEqual(f.shape, (5, cost_model.LOOP_FEATURES))
        log = lambda v: np.float32(np.log2(v) / 10)  # noqa: E731
        # n (2 r 3): tail 3, depth 1, height 2, covers 2 x 16 of n; written, not reduced; the
        # output's last index, B's too (half the inputs), absent from A (a third of accesses),
        # stride 1.
        np.testing.assert_allclose(
            f[1], [log(3), 1, log(4), 0.1, 0.2, 0, 0, 0, 1, 1, log(33), 0, 0.5,
                   1, 0.5, 1 / 3, 0], rtol=1e-6)
        # k: unrolled, reduced, stride 35 in B (16 in A? no: k is A's last index: stride 1).
        self.assertEqual(f[2][6], 1)   # unroll
        self.assertEqual(f[2][7], 1)   # reduced
        self.assertEqual(f[2][8], 0)   # not written
        self.assertEqual(f[3][5], 1)   # n' vectorized
        self.assertEqual(f[3][11], 1)  # innermost
        # A streamed statement's write (`write(%3) stream`) is read as the plain one.
        streamed = cost_model.loop_features(
            self.TREE.replace("<- write(%3)\n", "<- write(%3) stream\n"), self.PROGRAM)
        np.testing.assert_array_equal(streamed, f)
        self.assertEqual(f[4][9], 0)   # the write loop computes nothing
        # Without the program, the access features are zeros.
        np.testing.assert_array_equal(cost_model.loop_features(self.TREE)[:, 13:], 0)

    def test_ranks_and_spearman(self):
        np.testing.assert_array_equal(cost_model.rank(np.array([3.0, 1.0, 2.0, 2.0])),
                                      [3, 0, 1.5, 1.5])
        self.assertAlmostEqual(cost_model.spearman(np.arange(5), np.arange(5) ** 2), 1.0)
        self.assertAlmostEqual(cost_model.spearman(np.arange(5), -np.arange(5)), -1.0)
        self.assertEqual(cost_model.spearman(np.ones(4), np.arange(4)), 0.0)

    def test_training_learns_the_sample(self):
        rows = records.load(SAMPLE)
        model = cost_model.train(rows, epochs=40, seed=1, batch=64)
        self.assertLess(model.losses[-1], 0.7 * model.losses[0])
        by_run = cost_model.spearman_by_program(model.predict(rows), rows)
        self.assertEqual(len(by_run), 8)
        self.assertGreater(float(np.mean(list(by_run.values()))), 0.5)
        with self.assertRaisesRegex(ValueError, "no records to train on"):
            cost_model.train([])

    def test_the_command_trains_on_the_timings_asked_for(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.db")
            shutil.copy(SAMPLE, path)
            with contextlib.closing(sqlite3.connect(path)) as db, db:
                db.execute("ALTER TABLE measurements ADD COLUMN timing TEXT")
                db.execute("ALTER TABLE measurements ADD COLUMN timed_runs INTEGER")
                db.execute("UPDATE measurements SET timing = CASE WHEN id % 3 = 0 THEN 'once' "
                           "ELSE 'full' END")
            train = records.load(path, split="train")
            once = sum(r.timing == "once" for r in train)
            self.assertTrue(0 < once < len(train))

            def run(*flags: str) -> "subprocess.CompletedProcess[str]":
                return subprocess.run(
                    [sys.executable, "-m", "looptool.records", "cost-model", path, "--epochs=1",
                     *flags], capture_output=True, text=True, env=env, timeout=300)
            p = run("--train-timings=full,settled")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(f"training on readings timed full, settled: {once} train kernels "
                          "left out", p.stdout)
            self.assertIn(f"trained on {len(train) - once} kernels", p.stdout)
            p = run()
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn(f"trained on {len(train)} kernels", p.stdout)
            for flags, says in ((["--train-timings=full,sloppy"], "sloppy is not a timing"),
                                (["--train-timings=untimed"], "has no train records so timed"),
                                (["--labels=best"], "invalid choice")):
                p = run(*flags)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(says, p.stderr)
                self.assertNotIn("Traceback", p.stderr)


class ProgramsTest(unittest.TestCase):
    def test_synthetic_draws(self):
        a = programs.synthetic(200, seed=3)
        self.assertEqual(a, programs.synthetic(200, seed=3))
        self.assertNotEqual(a, programs.synthetic(200, seed=4))
        self.assertEqual(len({p.text for p in a}), 200)
        self.assertEqual({p.kind for p in a}, set(programs.KINDS))
        # flops() bounds 2 x the sizes' product; the draws cap the product by the kind's
        # operations per point (at least 1); linear layers by LINEAR_FLOPS_FACTOR times it.
        cap = programs.DEFAULT_MAX_FLOPS
        self.assertTrue(all(programs.flops(p.text) <= 2 * cap for p in a if p.kind != "linear"))
        linears = programs.synthetic(40, seed=3, kinds=["linear"])
        self.assertTrue(all(programs.flops(p.text) <= programs.LINEAR_FLOPS_FACTOR * cap
                            for p in linears))
        self.assertTrue(any(programs.flops(p.text) > cap for p in linears))
        self.assertTrue(all(p.text.startswith("Y[m,n] += X[m,k] * W[k,n]") for p in linears))
        self.assertTrue(all(programs.within_limits(p.text) for p in a))
        self.assertFalse(programs.within_limits("O[k,h,w] += I[c, 4*h, 4*w] * W[k,c]\n"
                                                "k=8 h=112 w=112 c=256\n"))  # I: 50,694,400
        self.assertFalse(programs.within_limits("y[n] += x[k] * W[k,n]\nk=9216 n=4096\n"))
        self.assertTrue(programs.within_limits("C[m,a] = A[m,a]\nC[m,b+512] = B[m,b]\n"
                                               "m=4 a=512 b=100\n"))
        strides = {t for p in a if p.kind == "conv" for t in ("2*h", "3*h", "4*h") if t in p.text}
        self.assertEqual(strides, {"2*h", "3*h", "4*h"})
        self.assertTrue(any("W[k,c]\n" in p.text for p in a))  # 1x1
        bmms = [p.text for p in a if p.kind == "bmm"]
        self.assertTrue(any("* B[b,n,k]\n" in t for t in bmms))  # batched, B transposed
        self.assertTrue(any("* B[n,k]\n" in t for t in bmms))    # B transposed, no batch
        # attention's products: scores (B transposed) and context, a head width k that is a
        # multiple of 8 in 16..128 (bmm's reductions are anything), with and without heads
        attention = programs.synthetic(30, seed=3, kinds=["attention"])
        self.assertTrue(all(16 <= int(re.search(r"\bk=(\d+)", p.text)[1]) <= 128 and
                            int(re.search(r"\bk=(\d+)", p.text)[1]) % 8 == 0 for p in attention))
        self.assertTrue(any(p.text.startswith("C[b,m,n] += A[b,m,k] * B[b,n,k]\n")
                            for p in attention))
        self.assertTrue(any(p.text.startswith("C[b,m,k] += A[b,m,n] * B[b,n,k]\n")
                            for p in attention))
        self.assertTrue(any(p.text.startswith("C[m,n] += A[m,k] * B[n,k]\n") for p in attention))
        self.assertTrue(all(programs.flops(p.text) <= cap and p.kind == "attention"
                            for p in attention))
        # never BERT-base's own (evaluation) shape, whatever the seed
        rng = unittest.mock.Mock(randint=lambda a, b: 8, choice=lambda c: 12,
                                 random=lambda: 0.1)
        with unittest.mock.patch.object(programs, "_extent", side_effect=[128, 128, 128, 64]):
            drawn = programs.attention(rng, cap)
        self.assertEqual(drawn.name, "scores_12x128x64x64")
        # large transposes: 2-D (powers of two among them) and CHW <-> HWC, 0.5-4 M elements;
        # never one of the catalog's 2-D transposes (evaluated), whatever the draw
        large = programs.synthetic(60, seed=8, kinds=["large_transpose"])
        sizes = [[int(x) for x in re.findall(r"=(\d+)", p.text)] for p in large]
        self.assertTrue(all(p.kind == "large_transpose" for p in large))
        self.assertTrue(all((1 << 19) <= math.prod(s) <= (1 << 22) for s in sizes))
        self.assertTrue(any(p.text.startswith("B[n,m] = A[m,n]\n") and
                            all(x & (x - 1) == 0 for x in s) for p, s in zip(large, sizes)))
        self.assertTrue(any(p.text.startswith("B[h,w,c] = A[c,h,w]\n") for p in large))
        self.assertTrue(any(p.text.startswith("B[c,h,w] = A[h,w,c]\n") for p in large))
        self.assertFalse(any(tuple(s) in programs.EVALUATION_TRANSPOSES for s in sizes))
        rng = unittest.mock.Mock(random=lambda: 0.1,
                                 choice=unittest.mock.Mock(side_effect=[1024, 512, 1024, 1024]))
        self.assertEqual(programs.large_transpose(rng, cap).name, "transpose_1024x1024")
        self.assertEqual(programs.synthetic(5, kinds=["gemv"])[0].kind, "gemv")
        with self.assertRaisesRegex(ValueError, "unknown program kinds \\['fft'\\]"):
            programs.synthetic(3, kinds=["fft"])

    def test_evaluation_models_are_refused(self):
        with self.assertRaisesRegex(ValueError, "resnet18: for evaluation only"):
            programs.model_layers(["alexnet", "resnet18"])


class RemeasureTest(unittest.TestCase):
    def test_each_validation_kernel_is_timed_again_once(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.db")
            shutil.copy(SAMPLE, path)
            wanted = [r for r in records.load(path, split="validation") if r.gflops > 0]
            self.assertEqual(len(wanted), 26)
            self.assertTrue(all(r.remeasured_gflops is None for r in wanted))
            # A kernel whose record no longer matches what its actions build, and one whose
            # actions are not its space's: not timed.
            db = sqlite3.connect(path)
            db.execute("UPDATE measurements SET schedule = 'compute 1: m(1)\n' WHERE id = ?",
                       (wanted[7].id,))
            db.execute("UPDATE measurements SET actions = '[\"split_4\"]' WHERE id = ?",
                       (wanted[9].id,))
            db.commit()
            db.close()
            with LocalServer(SERVER, flags=["--timing_budget_ms=2"]) as server:
                self.assertEqual(remeasure.remeasure(path, server.address, limit=5),
                                 {"kernels": 5, "failed": 0, "kept": 0})
                got = {r.id for r in records.load(path) if r.remeasured_gflops is not None}
                self.assertEqual(got, {r.id for r in wanted[:5]})
                # The rest timed three times each, the fastest reading kept with its peak
                # (readings stood in for: 1, 3, 2 GFLOPS, peaks 9, 8, 7).
                readings = itertools.cycle([(1.0, 9.0), (3.0, 8.0), (2.0, 7.0)])
                calls = []

                def stand_in(env: object) -> "tuple[float, float]":
                    calls.append(env)
                    return next(readings)

                with unittest.mock.patch("looptool.env.LoopToolEnv.remeasure", stand_in):
                    self.assertEqual(remeasure.remeasure(path, server.address, timings=3),
                                     {"kernels": 21, "failed": 2, "kept": 5})
                self.assertEqual(len(calls), 3 * 19)
                for bad in (0, remeasure.MAX_TIMINGS + 1):
                    with self.assertRaisesRegex(ValueError, "timings must be 1..16"):
                        remeasure.remeasure(path, server.address, timings=bad)
                self.assertEqual(remeasure.remeasure(path, server.address),
                                 {"kernels": 0, "failed": 0, "kept": 26})
            db = sqlite3.connect(path)
            self.assertEqual(db.execute("SELECT count(*), sum(gflops = 0) FROM remeasurements")
                             .fetchone(), (26, 2))
            self.assertEqual(db.execute("SELECT count(*) FROM remeasurements WHERE gflops = 3 "
                                        "AND peak_gflops = 8").fetchone(), (19,))
            db.close()
            rows = records.load(path)
            timed = {r.id for r in rows if r.remeasured_gflops is not None}
            self.assertEqual(timed, {r.id for r in wanted} - {wanted[7].id, wanted[9].id})
            self.assertTrue(all(r.remeasured_gflops > 0 for r in rows if r.id in timed))
            labelled = remeasure.with_remeasured_labels(rows)
            self.assertEqual([r.gflops for r in labelled],
                             [r.remeasured_gflops for r in rows if r.id in timed])
            # rank_eval ranks against them; a file without them is refused, saying why.
            with contextlib.redirect_stdout(io.StringIO()) as out:
                self.assertEqual(rank_eval.main([f"--records={path}", "--labels=remeasured"]),
                                 0)
            first = json.loads(out.getvalue().splitlines()[0])
            self.assertEqual((first["labels"], first["kernels"]), ("remeasured", 24))
            with contextlib.redirect_stderr(io.StringIO()) as err:
                self.assertEqual(rank_eval.main([f"--records={SAMPLE}", "--labels=remeasured"]),
                                 2)
            self.assertIn("no remeasured validation kernels", err.getvalue())

    def test_the_command_refuses_bad_input(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.db")
            shutil.copy(SAMPLE, path)
            for args, says in ((["/nonexistent.db"], "no tuning records at"),
                               ([path, "--limit=-1"], "--limit must be >= 0"),
                               ([path, "--timings=0"], "--timings must be 1..16"),
                               ([path, "--split=test"], "invalid choice"),
                               ([path, "--server=127.0.0.1:1"], "No server answered")):
                p = subprocess.run([sys.executable, "-m", "looptool.records", "remeasure",
                                    *args], capture_output=True, text=True, env=env, timeout=60)
                self.assertEqual(p.returncode, 2, p.stderr)
                self.assertIn(says, p.stderr)
                self.assertNotIn("Traceback", p.stderr)
            # Nothing lost or half-written: the records as they were, no reading kept.
            self.assertEqual(len(records.load(path)), len(records.load(SAMPLE)))
            self.assertTrue(all(r.remeasured_gflops is None for r in records.load(path)))


class GenerateTest(unittest.TestCase):
    @staticmethod
    def generate(d: str, *flags: str) -> "tuple[str, subprocess.CompletedProcess[str]]":
        """`looptool.records generate` of two drawn programs (seed 5) into d/r.db."""
        out = os.path.join(d, "r.db")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        return out, subprocess.run(
            [sys.executable, "-m", "looptool.records", "generate", f"--out={out}",
             "--programs=2", "--seed=5", "--models=none", f"--cli={CLI}", *flags],
            capture_output=True, text=True, timeout=300, env=env)

    def test_two_programs_end_to_end(self):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
            out, p = self.generate(d, "--seconds=0.5")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("generated: 2 programs tuned (0 failed)", p.stderr)
            recorded = int(p.stderr.split("(0 failed), ")[1].split(" kernels")[0])
            rows = records.load(out)
            self.assertEqual(len(rows), recorded)
            self.assertEqual(len({(r.run_id, r.schedule) for r in rows}), len(rows))
            # Each kernel says how it was timed: not at all (0 runs) or in some runs.
            for r in rows:
                self.assertIn(r.timing, records.TIMINGS)
                assert r.timed_runs is not None
                self.assertEqual(r.timed_runs == 0, r.timing in ("untimed", "abandoned"),
                                 (r.timing, r.timed_runs))
                if r.timing == "once":
                    self.assertEqual(r.timed_runs, 1)
            self.assertEqual(sorted({r.kind for r in rows}),
                             sorted({q.kind for q in programs.synthetic(2, seed=5)}))
            s = subprocess.run([sys.executable, "-m", "looptool.records", "summary", out,
                                "--json"], capture_output=True, text=True, env=env)
            self.assertEqual(s.returncode, 0, s.stderr)
            self.assertEqual(sum(json.loads(s.stdout)["kernels"].values()), recorded)
            self.assertEqual(sum(json.loads(s.stdout)["timings"].values()), recorded)
            self.assertNotIn("unknown", json.loads(s.stdout)["timings"])
            bad = subprocess.run([sys.executable, "-m", "looptool.records", "summary",
                                  os.path.join(d, "none.db")], capture_output=True, text=True,
                                 env=env)
            self.assertEqual(bad.returncode, 2)
            self.assertIn("no tuning records at", bad.stderr)

    def test_policy_episodes_end_to_end(self):
        # --search=policy_guided with a loop_set policy records the ends of its likeliest
        # episodes, at most --guided-candidates per program, each once, as runs of that search
        with tempfile.TemporaryDirectory() as d:
            # (the search ends when its 4 candidates are timed: the limit is a bound only)
            out, p = self.generate(d, "--seconds=10", "--search=policy_guided",
                                   "--policy=loop_set", "--guided-candidates=4")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("generated: 2 programs tuned (0 failed)", p.stderr)
            rows = records.load(out)
            runs = {r.run_id for r in rows}
            self.assertEqual(len(runs), 2)
            self.assertEqual({r.search for r in rows}, {"policy_guided"})
            self.assertTrue(all(r.timing in records.TIMINGS for r in rows))
            for run in runs:
                n = len([r for r in rows if r.run_id == run])
                self.assertGreaterEqual(n, 2)
                self.assertLessEqual(n, 4)
            self.assertEqual(len({(r.run_id, r.schedule) for r in rows}), len(rows))

    def test_generate_does_not_load_pytorch(self):
        # Importing PyTorch costs every records call seconds (about 6 of 8 s of fixed cost per
        # call on a 16-CPU machine); generating needs only the CLI, SQLite and numpy.
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        code = ("import sys, looptool.records.__main__ as m; "
                "r = m.main(['generate', '--out=none.db', '--cli=/nonexistent/looptool']); "
                "print(r, 'torch' in sys.modules)")
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout.strip(), "2 False")  # 2: no CLI there

    def test_guided_candidates_out_of_range_is_refused(self):
        from looptool.records import __main__ as generate_main
        for n in ("-1", "1025"):
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code = generate_main.main(["generate", "--out=none.db", f"--guided-candidates={n}"])
            self.assertEqual(code, 2)
            self.assertIn("--guided-candidates takes 1..1024", err.getvalue())
        self.assertFalse(os.path.exists("none.db"))

    def test_chunk_size_grows_with_servers(self):
        from looptool.records import __main__ as generate_main
        parse = generate_main.build_parser().parse_args
        self.assertEqual(generate_main.chunk_size(parse(["generate", "--out=x"])), 40)
        eight = ",".join(f"127.0.0.1:{9000 + i}" for i in range(8))
        self.assertEqual(generate_main.chunk_size(parse(["generate", "--out=x",
                                                         f"--servers={eight}"])), 80)
        self.assertEqual(generate_main.chunk_size(parse(["generate", "--out=x", "--chunk=7",
                                                         f"--servers={eight}"])), 7)


if __name__ == "__main__":
    unittest.main()
