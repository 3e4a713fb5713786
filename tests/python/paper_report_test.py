"""bench/paper/report.py on a small run of known numbers: the table's ratios and percentages,
and the four figures written."""
import csv
import os
import tempfile
import unittest

from bench.paper import report


def write(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


class ReportTest(unittest.TestCase):
    def test_table_and_figures_from_one_run(self):
        with tempfile.TemporaryDirectory() as d:
            tb = ["shape", "set", "search", "gflops", "percent_of_peak", "speedup", "seconds",
                  "states_evaluated", "actions", "start_gflops", "peak_gflops", "onednn_gflops",
                  "openblas_gflops", "retimed_gflops"]
            write(os.path.join(d, "tune_bench.csv"), tb, [
                ["mm64_64_64", "test", "evolution", 50, 0, 0, 1.0, 10, 3, 25, 100, 100, 80, 50],
                ["mm80_80_80", "test", "evolution", 200, 0, 0, 1.0, 10, 3, 25, 100, 100, 80, 50],
                ["mm37_61_97", "offgrid", "evolution", 30, 0, 0, 1.0, 10, 3, 25, 100, 60, 40, 30],
                ["mm64_64_64", "test", "random", 25, 0, 0, 0.5, 10, 3, 25, 100, 100, 80, 25],
                ["resnet18_conv5_3x3", "conv", "evolution", 2, 0, 0, 10, 7, 1, 2, 100, 100, 0, 2],
            ])
            write(os.path.join(d, "tune_bench_curves.csv"),
                  ["shape", "set", "search", "seconds", "states_evaluated", "best_gflops"],
                  [["mm64_64_64", "test", "evolution", 0.1, 1, 25],
                   ["mm64_64_64", "test", "evolution", 0.9, 9, 50],
                   ["mm80_80_80", "test", "evolution", 0.5, 5, 200],
                   ["mm37_61_97", "offgrid", "evolution", 0.2, 2, 30]])
            write(os.path.join(d, "halide_bench.csv"),
                  ["shape", "set", "autoscheduler", "schedule_seconds", "gflops",
                   "onednn_gflops", "error"],
                  [["mm64_64_64", "test", "Adams2019", 0.2, 10, 100, ""],
                   ["mm80_80_80", "test", "Adams2019", 0.4, 40, 100, ""]])
            write(os.path.join(d, "numpy_bench.csv"), ["shape", "set", "gflops"],
                  [["mm64_64_64", "test", 70], ["mm80_80_80", "test", 70],
                   ["mm37_61_97", "offgrid", 30]])
            gflops, sets, peak, seconds = report.load(d)
            self.assertEqual(peak, 100)
            rows = {(r["method"], r["set"]): r for r in report.summary(gflops, sets, peak,
                                                                       seconds)}
            evo = rows[("evolution", "test")]
            self.assertEqual(evo["benchmarks"], 2)
            self.assertAlmostEqual(evo["geomean_vs_onednn"], 1.0)  # sqrt(0.5 * 2.0)
            self.assertEqual(evo["min_vs_onednn"], 0.5)
            self.assertEqual(evo["geomean_percent_of_peak"], 100.0)  # sqrt(50 * 200)
            self.assertEqual(evo["mean_tuning_seconds"], 1.0)
            self.assertEqual(rows[("evolution", "offgrid")]["geomean_vs_onednn"], 0.5)
            self.assertAlmostEqual(rows[("Halide Adams2019", "test")]["geomean_vs_onednn"], 0.2)
            self.assertAlmostEqual(rows[("Halide Adams2019", "test")]["mean_tuning_seconds"],
                                   0.3)
            self.assertEqual(rows[("random", "test")]["mean_tuning_seconds"], 0.5)
            self.assertEqual(rows[("numpy", "offgrid")]["geomean_vs_onednn"], 0.5)
            self.assertEqual(rows[("OpenBLAS", "test")]["geomean_vs_onednn"], 0.8)
            self.assertEqual(rows[("random", "test")]["benchmarks"], 1)
            # Convolutions: their own rows, no OpenBLAS reference.
            self.assertEqual(rows[("evolution", "conv")]["geomean_vs_onednn"], 0.02)
            self.assertEqual(rows[("evolution", "conv")]["mean_tuning_seconds"], 10.0)
            self.assertNotIn(("OpenBLAS", "conv"), rows)
            matmuls = {b: s for b, s in sets.items() if s != "conv"}
            convs = {b: s for b, s in sets.items() if s == "conv"}
            report.plots(d, gflops, matmuls, peak, "test host, peak 100 GFLOPS, today")
            report.plots(d, gflops, convs, peak, "test host, peak 100 GFLOPS, today", "_conv")
            for png in ("gflops_per_benchmark", "ratio_to_onednn", "anytime",
                        "performance_profile", "gflops_per_benchmark_conv",
                        "ratio_to_onednn_conv", "performance_profile_conv"):
                path = os.path.join(d, png + ".png")
                self.assertTrue(os.path.exists(path), png)
                with open(path, "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")


if __name__ == "__main__":
    unittest.main()
