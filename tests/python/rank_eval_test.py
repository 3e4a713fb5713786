"""looptool.rl.rank_eval: the noise read off kernels measured in two runs, the noise ceiling, and
a cost model's ranking stats on the committed records sample (the same numbers plan_cost's fit
reports), from Python and from its command."""
import contextlib
import dataclasses
import io
import json
import math
import os
import unittest

import numpy as np

from looptool import records
from looptool.rl import loop_set, plan_cost as pc, rank_eval

SAMPLE = os.path.abspath("datasets/records/sample.db")
POLICY = os.path.abspath("datasets/policies/loop_set.json")


class RankEvalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rows = records.load(SAMPLE)

    def test_noise_of_kernels_measured_twice(self):
        a = self.rows[0]
        # Three kernels each measured in runs 1 and 2 (ratios 2, 1 and 4: |log2| 1, 0, 2) and in
        # a third run that does not count (the first two readings do); one measured once.
        rows = []
        for k, (x, y) in enumerate(((10.0, 20.0), (8.0, 8.0), (1.0, 4.0))):
            for run, g in ((1, x), (2, y), (3, 1000.0)):
                rows.append(dataclasses.replace(a, run_id=run, schedule=f"s{k}", gflops=g))
        rows.append(dataclasses.replace(a, run_id=1, schedule="alone", gflops=5.0))
        n = rank_eval.noise(rows)
        self.assertEqual(n.pairs, 3)
        self.assertAlmostEqual(n.median_abs_log2, 1.0)
        self.assertAlmostEqual(n.sigma, 1.0 / (0.6745 * math.sqrt(2.0)))
        # Another program's kernel of the same schedule is another kernel.
        other = [dataclasses.replace(r, program_id=r.program_id + 1) for r in rows[:1]]
        self.assertEqual(rank_eval.noise(rows[:1] + other), rank_eval.Noise(0, 0.0, 0.0))

    def test_the_ceiling_falls_with_the_noise(self):
        y = np.linspace(0.0, 3.0, 200)
        self.assertEqual(rank_eval.noise_ceiling(y, 0.0), 1.0)
        c = [rank_eval.noise_ceiling(y, s) for s in (0.05, 0.3, 1.5)]
        self.assertGreater(c[0], 0.99)
        self.assertTrue(1.0 > c[0] > c[1] > c[2] > 0.0, c)
        self.assertEqual(rank_eval.noise_ceiling(y, 0.3, seed=4),
                         rank_eval.noise_ceiling(y, 0.3, seed=4))

    def test_spearman(self):
        self.assertAlmostEqual(rank_eval.spearman(np.arange(6), np.arange(6) ** 3), 1.0)
        self.assertAlmostEqual(rank_eval.spearman(np.arange(6), -np.arange(6)), -1.0)
        self.assertEqual(rank_eval.spearman(np.ones(5), np.arange(5)), 0.0)

    def test_a_models_stats_are_plan_costs_and_its_worst_run_is_listed_first(self):
        model = loop_set.load(POLICY).cost
        stats, worst = rank_eval.evaluate(model, self.rows, worst=3)
        data = pc.dataset(self.rows, model.names)
        rho = pc.spearman_per_run(model, data)
        self.assertEqual(stats["search_runs"], 8)
        self.assertEqual(stats["episodes_runs"], 0)
        self.assertAlmostEqual(stats["search_spearman_mean"], float(np.mean(rho)))
        # The sample has 5 memory-bound runs and 3 compute-bound ones (the roofline below the
        # peak or not).
        memory = {r.run_id for r in self.rows if 0 < r.roofline_gflops < r.peak_gflops}
        self.assertEqual(len(memory), 5)
        self.assertEqual((stats["search_memory_runs"], stats["search_compute_runs"]), (5, 3))
        self.assertAlmostEqual(
            stats["search_memory_runs"] * stats["search_memory_spearman_mean"] +
            stats["search_compute_runs"] * stats["search_compute_spearman_mean"],
            8 * stats["search_spearman_mean"])
        self.assertEqual(len(worst), 3)
        self.assertAlmostEqual(worst[0]["spearman"], min(rho))
        self.assertEqual([w["spearman"] for w in worst],
                         sorted(w["spearman"] for w in worst))
        self.assertEqual(worst[0]["memory_bound"], worst[0]["run"] in memory)

    def test_the_command(self):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(rank_eval.main(["--records=" + SAMPLE, "--split=train", "--worst=2",
                                             POLICY]), 0)
        head, model = (json.loads(line) for line in out.getvalue().splitlines())
        train = [r for r in self.rows if r.split == "train"]
        self.assertEqual(head["kernels"], len(train))
        # The sample measures every kernel in one run only: no noise read, ceilings of 1.
        self.assertEqual(head["memory_noise_pairs"], 0)
        self.assertEqual(head["search_ceiling_mean"], 1.0)
        self.assertEqual(model["policy"], POLICY)
        self.assertEqual(len(model["worst_runs"]), 2)
        stats, _ = rank_eval.evaluate(loop_set.load(POLICY).cost, train)
        self.assertAlmostEqual(model["search_spearman_mean"], stats["search_spearman_mean"])
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit):
            rank_eval.main(["--records=" + SAMPLE, "--worst=-1"])
        self.assertIn("--worst must be >= 0", err.getvalue())
        with contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(rank_eval.main(["--records=" + SAMPLE, "--split=evaluation"]), 2)


if __name__ == "__main__":
    unittest.main()
