"""The looptool CLI end to end: tune with an embedded server (--json), eval, benchmarks, and the
errors a user sees for a bad benchmark or search."""
import json
import os
import subprocess
import tempfile
import unittest

LOOPTOOL = os.path.join(os.getcwd(), "client/cpp/looptool")


def run(*args, timeout=120):
    return subprocess.run([LOOPTOOL, *args], capture_output=True, text=True, timeout=timeout)


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
        self.assertLess(out["seconds"], 3.0)
        self.assertGreater(out["states_evaluated"], 0)
        self.assertIn("for ", out["loop_tree"])

        # eval replays the actions to the same loop tree.
        e = run("eval", "--benchmark", out["benchmark"], "--actions", ",".join(out["actions"]),
                "--json")
        self.assertEqual(e.returncode, 0, e.stderr)
        self.assertEqual(json.loads(e.stdout)["loop_tree"], out["loop_tree"])

    def test_eval_text_and_program_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".lt", delete=False) as f:
            f.write("O[r] += I[r,c]\nr=64 c=48\n")
        p = run("eval", "--benchmark", f.name, "--actions", "up,split_4")
        os.unlink(f.name)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("benchmark://user-v0/" + os.path.basename(f.name)[:-3], p.stdout)
        self.assertIn("up         (no effect)", p.stdout)
        self.assertIn("for r in 16 : L0", p.stdout)

    def test_benchmarks(self):
        p = run("benchmarks")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"mm64_256_16_range-v0\s+2197\s+432")
        for d in ("conv2d-v0", "pool-v0", "reduce-v0", "transpose-v0", "mm_relu-v0"):
            self.assertIn(d, p.stdout)
        p = run("benchmarks", "--dataset=pool-v0")
        self.assertIn("benchmark://pool-v0/resnet_maxpool_3x3s2_64_56", p.stdout)

    def test_errors(self):
        p = run("tune", "--benchmark", "nonsense", "--time-limit", "1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("neither a benchmark:// URI", p.stderr)
        p = run("tune", "--benchmark", "mm64_64_64", "--search", "beam3", "--time-limit", "1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown search 'beam3'", p.stderr)
        p = run("tune", "--benchmark", "benchmark://pool-v0/nope", "--time-limit", "1")
        self.assertEqual(p.returncode, 1)
        self.assertIn("Benchmark not found: benchmark://pool-v0/nope", p.stderr)
        p = run("tune", "--benchmark", "mm64_64_64", "--timing", "fast", "--time-limit", "1")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--timing must be adaptive or fixed", p.stderr)


if __name__ == "__main__":
    unittest.main()
