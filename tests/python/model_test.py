"""looptool.model: whole PyTorch models extracted, tuned over Dask, exported and run.

  * extract() on the tiny model (two convolutions and a linear) and on one of every kind gives
    the exact programs, folds BatchNorm (the folded layer computes what conv + BN computed),
    fuses relu only where nothing comes between, and lists what stays in PyTorch and why;
  * the allotment gives every task a slice first (heaviest first), then follows Ansor's
    gradient, and never offers a failed task;
  * `python3 -m looptool.model tune` then `run` on the tiny model (a LocalCluster, two local
    servers): every task reported once, a library exported, the model's output within 1e-4 of
    PyTorch's; the model of every kind through its kernels matches PyTorch too;
  * a server SIGKILLed while its slice runs: it is dropped, its tasks are tuned on the other,
    every task is reported once and the export and run still work;
  * bad input: an unknown model, a bad shape, an untraceable model, a missing library.
"""
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import unittest
import unittest.mock

import numpy as np
import torch

import tiny_models
from looptool import kernels
from looptool.model import commands, extract as extract_lib
from looptool.model.allot import Allotment
from looptool.model.replace import with_kernels
from looptool.server import LocalServer

SERVER = os.path.abspath("service/looptool-server")
CLI = os.path.abspath("client/cpp/looptool")
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
           LOOPTOOL_SERVER=SERVER, LOOPTOOL_CLI=CLI)
FAST = ["--timing_budget_ms=2"]  # the local servers time kernels briefly (no speed is checked)


def read_text(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def read_json(path: str) -> dict:
    return json.loads(read_text(path))


def model_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "looptool.model", *args], env=ENV,
                          capture_output=True, text=True, timeout=600)


class ExtractTest(unittest.TestCase):
    def test_the_tiny_model(self):
        model = tiny_models.two_convs_and_linear()
        plan = extract_lib.extract(model, torch.randn(1, 3, 16, 16))
        self.assertEqual({n: t.program for n, t in plan.tasks.items()}, {
            # stride 2 as stride 1 over the input's 2x2 phases: 4x3 channels, 2x2 taps, and a
            # channel of 1s for the bias (BatchNorm's), so the relu is the kernel's; the
            # weights laid out with the output channels last
            "conv_c3_k8_8x8_3x3_s2_phases_bias_relu":
                "O[k,h,w] += I[c, h+r, w+s] * W[c,r,s,k] -> relu\nk=8 h=8 w=8 c=13 r=2 s=2\n",
            "conv_c8_k16_8x8_3x3_s1_bias_relu":
                "O[k,h,w] += I[c, h+r, w+s] * W[c,r,s,k] -> relu\nk=16 h=8 w=8 c=9 r=3 s=3\n",
            "sumpool_global_c16_8x8": "O[c] += I[c,h,w]\nc=16 h=8 w=8\n",
            "linear_1_16_10_bias": "y[n] += x[k] * W[k,n]\nk=17 n=10\n",
        })
        conv1, conv2, pool, fc = plan.layers
        self.assertEqual(conv1.nodes, ["conv1", "bn1", "relu"])
        self.assertEqual((conv1.epilogue(), conv1.kernel_relu, conv1.bias_axis), ([], True, 0))
        self.assertEqual(conv1.padding, (1, 1))
        # 16 rows padded to 18 = 2 * 9: phases of 9 rows, 8 outputs + 2 taps - 1
        self.assertEqual((conv1.phase_stride, conv1.phases_kept, conv1.padded_shape),
                         (2, 2, (3, 18, 18)))
        self.assertEqual(conv1.kernel_input_shapes, [(13, 9, 9), (13, 2, 2, 8)])
        self.assertEqual(conv2.inputs, ["relu"])
        self.assertEqual((pool.epilogue(), pool.scale), (["scale"], 1 / 64))
        self.assertEqual(fc.inputs, ["flatten"])
        # the weight transposed, W[k,n], and the bias as its 17th row
        np.testing.assert_array_equal(fc.weight[:16], model.fc.weight.detach().numpy().T)
        np.testing.assert_array_equal(fc.weight[16], model.fc.bias.detach().numpy())
        self.assertEqual((fc.kernel_input_shapes[0], fc.bias_axis, fc.epilogue()), ((17,), 0, []))
        self.assertEqual(plan.left, [extract_lib.Left("flatten", "flatten",
                                                      "layout only (no arithmetic)")])
        # BatchNorm folded and the weights rearranged: over the padded input's phases (channel
        # c*4 + a*2 + b holds rows 2y+a, columns 2x+b of channel c) and a channel of 1s, the
        # layer's weights compute conv1 then bn1, bias included
        x = torch.randn(1, 3, 16, 16)
        padded = torch.nn.functional.pad(x, (1, 1, 1, 1))[0]
        phases = padded.view(3, 9, 2, 9, 2).permute(0, 2, 4, 1, 3).reshape(12, 9, 9)
        phases = torch.cat([phases, torch.ones(1, 9, 9)])[None]
        with torch.no_grad():
            want = model.bn1(model.conv1(x))
            w = torch.from_numpy(conv1.weight).permute(3, 0, 1, 2)  # back to (k, c, r, s)
            got = torch.nn.functional.conv2d(phases, w)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)

    def test_the_tiny_model_channels_last(self):
        model = tiny_models.two_convs_and_linear()
        x = torch.randn(1, 3, 16, 16)
        plan = extract_lib.extract(model, x, layout="nhwc")
        self.assertEqual({n: t.program for n, t in plan.tasks.items()}, {
            # strided as it is (lanes along k), the channel of 1s last
            "conv_c3_k8_8x8_3x3_s2_bias_nhwc_relu":
                "O[h,w,k] += I[2*h+r, 2*w+s, c] * W[r,s,c,k] -> relu\n"
                "k=8 h=8 w=8 c=4 r=3 s=3\n",
            "conv_c8_k16_8x8_3x3_s1_bias_nhwc_relu":
                "O[h,w,k] += I[h+r, w+s, c] * W[r,s,c,k] -> relu\nk=16 h=8 w=8 c=9 r=3 s=3\n",
            "sumpool_global_c16_8x8_nhwc": "O[c] += I[h,w,c]\nc=16 h=8 w=8\n",
            "linear_1_16_10_bias": "y[n] += x[k] * W[k,n]\nk=17 n=10\n",
        })
        conv1, conv2, pool, fc = plan.layers
        self.assertTrue(conv1.channels_last and conv2.channels_last and pool.channels_last)
        self.assertFalse(fc.channels_last)
        self.assertEqual((conv1.phase_stride, conv1.bias_axis, conv1.padding), (1, 2, (1, 1)))
        self.assertEqual(conv1.kernel_input_shapes, [(17, 17, 4), (3, 3, 4, 8)])
        self.assertEqual((conv1.kernel_output_shape, conv1.input_views), ((8, 8, 8),
                                                                         [(16, 16, 3)]))
        self.assertEqual((pool.kernel_input_shapes, pool.kernel_output_shape), ([(8, 8, 16)],
                                                                               (16,)))
        # The second convolution's weights: the nchw plan's (BatchNorm-free, bias last)
        # transposed to W[r,s,c,k].
        nchw = extract_lib.extract(model, x, weights_k_last=False).layers[1]
        np.testing.assert_array_equal(conv2.weight, nchw.weight.transpose(2, 3, 1, 0))
        # The first's: BatchNorm folded, over the padded (H, W, C) input with a channel of 1s.
        padded = torch.nn.functional.pad(x, (1, 1, 1, 1))[0].permute(1, 2, 0)[:17, :17]
        padded = torch.cat([padded, torch.ones(17, 17, 1)], dim=2)
        w = torch.from_numpy(conv1.weight).permute(3, 2, 0, 1)  # back to (k, c, r, s)
        with torch.no_grad():
            want = model.bn1(model.conv1(x))
            got = torch.nn.functional.conv2d(padded.permute(2, 0, 1)[None], w, stride=2)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
        with self.assertRaisesRegex(extract_lib.ExtractError, "layout nhwc takes a batch of 1"):
            extract_lib.extract(model, torch.randn(2, 3, 16, 16), layout="nhwc")
        with self.assertRaisesRegex(extract_lib.ExtractError, "layout 'chwn': one of nchw"):
            extract_lib.extract(model, x, layout="chwn")

    def test_run_takes_the_layout_tune_recorded(self):
        one, two = torch.zeros(1, 3, 8, 8), torch.zeros(2, 3, 8, 8)
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(commands.resolve_layout("auto", one, out), "nhwc")  # no record
            self.assertEqual(commands.resolve_layout("auto", two, out), "nchw")
            path = os.path.join(out, "tune.json")
            with open(path, "w") as f:
                json.dump({"layout": "nchw"}, f)
            self.assertEqual(commands.resolve_layout("auto", one, out), "nchw")
            self.assertEqual(commands.resolve_layout("auto", one), "nhwc")  # tune: no reading
            self.assertEqual(commands.resolve_layout("nhwc", one, out), "nhwc")  # as given
            for corrupt in ("{not json", "[1, 2]", '{"layout": "chwn"}'):
                with open(path, "w") as f:
                    f.write(corrupt)
                self.assertEqual(commands.resolve_layout("auto", one, out), "nhwc", corrupt)

    def test_run_takes_the_blocks_tune_recorded(self):
        with tempfile.TemporaryDirectory() as out:
            self.assertEqual(commands.resolve_out_block(None, out), 0)  # no record
            with open(os.path.join(out, "tune.json"), "w") as f:
                json.dump({"layout": "nhwc", "out_block": 32}, f)
            self.assertEqual(commands.resolve_out_block(None, out), 32)
            self.assertEqual(commands.resolve_out_block(None), 0)  # tune: no reading
            self.assertEqual(commands.resolve_out_block(16, out), 16)  # as given
            self.assertEqual(commands.resolve_out_block(None, out, "nchw"), 0)  # no blocks there
            with open(os.path.join(out, "tune.json"), "w") as f:
                json.dump({"out_block": "32"}, f)
            self.assertEqual(commands.resolve_out_block(None, out), 0)
            # The layers tune --choose-blocks kept blocked: a list of names, else none recorded.
            self.assertIsNone(commands.recorded_block_layers(out))
            for recorded, read in ((["conv1", "layer1_0_conv2"], ["conv1", "layer1_0_conv2"]),
                                   ([], []), ("conv1", None), ([1], None)):
                with open(os.path.join(out, "tune.json"), "w") as f:
                    json.dump({"blocked_layers": recorded}, f)
                self.assertEqual(commands.recorded_block_layers(out), read, recorded)
            with open(os.path.join(out, "tune.json"), "w") as f:
                f.write("[not a record")
            self.assertIsNone(commands.recorded_block_layers(out))
            self.assertEqual(commands.resolve_out_block(None, out), 0)

    def test_every_kind_and_what_stays_in_pytorch(self):
        plan = extract_lib.extract(tiny_models.every_kind(), torch.randn(1, 3, 32, 32))
        self.assertEqual([(x.task, x.kernel_relu, x.epilogue()) for x in plan.layers], [
            ("conv_c3_k8_16x16_7x7_s2_phases_bias_relu", True, []),
            ("maxpool_c8_8x8_3x3_s2", False, []),
            ("conv_c8_k8_8x8_3x3_s1_relu", True, []),     # no bias: relu in the kernel
            ("depthwise_c8_8x8_3x3_s1", False, ["bias", "clamp(0,6)"]),
            ("grouped_conv_g2_c8_k8_8x8_3x3_s1_d2", False, ["bias"]),
            ("add_relu_8x8x8", True, []),
            ("conv_c8_k16_4x4_1x1_s2_subsampled_bias", False, []),
            ("sumpool_c16_2x2_2x2_s2", False, ["scale"]),
            ("linear_2_4_5_bias", False, []),
        ])
        programs = {n: t.program.splitlines()[0] for n, t in plan.tasks.items()}
        self.assertEqual(programs["maxpool_c8_8x8_3x3_s2"], "O[c,h,w] max= I[c, 2*h+r, 2*w+s]")
        self.assertEqual(programs["conv_c8_k8_8x8_3x3_s1_relu"],
                         "O[k,h,w] += I[c, h+r, w+s] * W[c,r,s,k] -> relu")
        self.assertEqual(programs["grouped_conv_g2_c8_k8_8x8_3x3_s1_d2"],
                         "O[g,k,h,w] += I[g,c, h+2*r, w+2*s] * W[g,k,c,r,s]")
        self.assertEqual(programs["conv_c8_k16_4x4_1x1_s2_subsampled_bias"],
                         "O[k,h,w] += I[c,h,w] * W[c,k]")
        self.assertEqual(plan.tasks["conv_c3_k8_16x16_7x7_s2_phases_bias_relu"].program,
                         "O[k,h,w] += I[c, h+r, w+s] * W[c,r,s,k] -> relu\n"
                         "k=8 h=16 w=16 c=13 r=4 s=4\n")
        self.assertEqual(programs["add_relu_8x8x8"],
                         "C[d0,d1,d2] = A[d0,d1,d2] + B[d0,d1,d2] -> relu")
        self.assertEqual(plan.tasks["linear_2_4_5_bias"].program,
                         "Y[m,n] += X[m,k] * W[k,n]\nm=2 n=5 k=5\n")
        self.assertEqual(plan.layers[-1].bias_axis, 1)   # a fifth feature per row
        self.assertEqual(plan.layers[1].pad_value, -np.inf)
        self.assertEqual(plan.layers[5].inputs, ["pool", "grouped"])
        self.assertEqual([(x.node, x.why) for x in plan.left], [
            ("sigmoid", "sigmoid: the loop-nest language has no such operation"),
            ("reflect", "padding_mode 'reflect' (only zero padding is copied in)"),
            ("permute", "layout only (no arithmetic)"),
            ("norm", "LayerNorm: the loop-nest language has no such layer"),
            ("reshape", "layout only (no arithmetic)"),
            ("getitem", "layout only (no arithmetic)"),
        ])

    def test_a_batch_keeps_its_index_and_shared_shapes_share_a_task(self):
        def conv():
            return torch.nn.Conv2d(4, 4, 3, padding=1, bias=False)
        model = torch.nn.Sequential(conv(), torch.nn.ReLU(), conv(), torch.nn.ReLU(), conv())
        plan = extract_lib.extract(model, torch.randn(2, 4, 6, 6))
        self.assertEqual({n: plan.weight(n) for n in plan.tasks},
                         {"conv_c4_k4_6x6_3x3_s1_n2_relu": 2, "conv_c4_k4_6x6_3x3_s1_n2": 1})
        self.assertEqual(plan.tasks["conv_c4_k4_6x6_3x3_s1_n2_relu"].program,
                         "O[n,k,h,w] += I[n,c, h+r, w+s] * W[c,r,s,k] -> relu\n"
                         "n=2 k=4 h=6 w=6 c=4 r=3 s=3\n")
        self.assertEqual([x.kernel_relu for x in plan.layers], [True, True, False])
        self.assertEqual([x.nodes for x in plan.layers], [["_0", "_1"], ["_2", "_3"], ["_4"]])

    def test_bad_models_are_refused_with_a_reason(self):
        class Branchy(torch.nn.Module):
            def forward(self, x):
                return x if x.sum() > 0 else -x  # data-dependent control flow
        with self.assertRaisesRegex(extract_lib.ExtractError, "torch.fx cannot trace"):
            extract_lib.extract(Branchy(), torch.randn(1, 3))
        with self.assertRaisesRegex(extract_lib.ExtractError, r"does not run on an input of "
                                    r"shape \(1, 5, 8, 8\)"):
            extract_lib.extract(tiny_models.two_convs_and_linear(), torch.randn(1, 5, 8, 8))
        with self.assertRaisesRegex(extract_lib.ExtractError, "kernels take float32"):
            extract_lib.extract(tiny_models.two_convs_and_linear(),
                                torch.randn(1, 3, 8, 8, dtype=torch.float64))


class AllotmentTest(unittest.TestCase):
    def test_first_every_task_then_the_gradient(self):
        a = Allotment({"big": (1, 8e9), "many": (4, 1e9), "small": (1, 1e9)})
        self.assertEqual(a.next(["big", "many", "small"]), "big")   # weight x flops first
        a.record("big", 10.0, 1.0)                                  # 0.8 s
        self.assertEqual(a.next(["big", "many", "small"]), "many")
        a.record("many", 10.0, 1.0)                                 # 0.1 s, four layers
        self.assertEqual(a.next(["big", "many", "small"]), "small")
        a.record("small", 100.0, 1.0)                               # 0.01 s
        self.assertEqual(a.untuned(), [])
        self.assertAlmostEqual(a.latency(), 0.8 + 4 * 0.1 + 0.01)
        # forward terms: big 0.8 * 0.8, many 0.8 * 0.4, small 0.8 * 0.01
        self.assertEqual(a.next(["big", "many", "small"]), "big")
        a.record("big", 10.0, 1.0)   # no gain: big's priority halves (0.8 * 0.8 / 2)
        self.assertAlmostEqual(a.priority("big"), 0.8 * 0.8 / 2)
        self.assertEqual(a.next(["big", "many", "small"]), "big")
        a.record("big", 80.0, 1.0)   # 0.1 s: the gain (0.7) weighs alpha = 0.2
        self.assertAlmostEqual(a.priority("big"), 0.2 * 0.7 + 0.8 * 0.1 / 3)
        a.fail("big")
        self.assertEqual(a.next(["big", "small"]), "small")
        self.assertIsNone(a.next(["big"]))
        self.assertAlmostEqual(a.latency(), 4 * 0.1 + 0.01)


class TuneExportRunTest(unittest.TestCase):
    def tune_tiny(self, out, *flags):
        """`looptool.model tune` of the tiny model into `out` (6 s of 1 s slices), its exit
        status checked; the process and the arguments naming the model and `out`."""
        args = ["--model=tiny_models:two_convs_and_linear", "--input-shape=1,3,16,16",
                f"--out={out}"]
        p = model_cli("tune", *args, "--time-limit=6", "--slice=1", "--no-progress", *flags)
        self.assertEqual(p.returncode, 0, p.stderr)
        return p, args

    def test_the_tiny_model_end_to_end(self):
        with tempfile.TemporaryDirectory() as out:
            # --out-block=4 (the tiny weights stay unblocked: under 512 KiB); tune.json records
            # it and run (without the flag) extracts with it.
            p, args = self.tune_tiny(out, "--local-servers=2", "--out-block=4")
            self.assertIn("4 layers as 4 tasks; 1 nodes left to PyTorch", p.stderr)
            summary = read_json(os.path.join(out, "tune.json"))
            self.assertEqual(sorted(r["task"] for r in summary["report"]), [
                "conv_c3_k8_8x8_3x3_s2_bias_nhwc_relu", "conv_c8_k16_8x8_3x3_s1_bias_nhwc_relu",
                "linear_1_16_10_bias",
                "sumpool_global_c16_8x8_nhwc"])  # batch 1: channels last by default
            self.assertEqual((summary["layout"], summary["out_block"]), ("nhwc", 4))
            self.assertEqual(len(summary["servers"]), 2)
            for r in summary["report"]:
                self.assertGreater(r["gflops"], 0, r)
                self.assertGreaterEqual(r["slices"], 1, r)
            for name in ("report.md", "report.csv", "report.png", "schedules.db",
                         "kernels/model_kernels.json", "kernels/libmodel_kernels.so"):
                self.assertTrue(os.path.exists(os.path.join(out, name)), name)
            report = read_text(os.path.join(out, "report.md"))
            self.assertIn("- `flatten` flatten: layout only (no arithmetic)", report)
            self.assertEqual(len(kernels.load(os.path.join(out, "kernels"))), 4)

            p = model_cli("run", *args, "--repeats=3")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            run = read_json(os.path.join(out, "run.json"))
            self.assertLessEqual(run["max_relative_error"], 1e-4)
            self.assertEqual((run["layers"], run["layers_on_kernels"]), (4, 4))
            self.assertEqual(run["out_block"], 4)
            self.assertGreater(run["torch_eager_ms"], 0)
            self.assertGreater(run["looptool_ms"], 0)
            self.assertIn("max |ours - torch| / max |torch| = ", p.stdout)

    def test_blocks_chosen_by_measurement(self):
        # --choose-blocks: both forms of each convolution that can be blocked are tuned, the
        # faster is recorded and run computes the model with it.
        with tempfile.TemporaryDirectory() as out:
            p, args = self.tune_tiny(out, "--out-block=4", "--choose-blocks")
            self.assertIn("4 layers as 6 tasks (2 convolutions in both forms)", p.stderr)
            summary = read_json(os.path.join(out, "tune.json"))
            choice = summary["block_choice"]
            self.assertEqual([c["task"] for c in choice], [
                "conv_c3_k8_8x8_3x3_s2_bias_nhwc_relu", "conv_c8_k16_8x8_3x3_s1_bias_nhwc_relu"])
            for c in choice:
                self.assertGreater(min(c["gflops"], c["blocked_gflops"]), 0, c)
                # Chosen by the exported kernels timed side by side, not the searches' figures.
                self.assertGreater(min(c["seconds"], c["blocked_seconds"]), 0, c)
                self.assertEqual(c["blocked"], c["blocked_seconds"] < c["seconds"], c)
            chosen = [c["layer"] for c in choice if c["blocked"]]
            self.assertEqual(summary["blocked_layers"], sorted(chosen))
            # The report covers the chosen form of each layer only.
            self.assertEqual(sorted(r["task"] for r in summary["report"]), sorted(
                [c["blocked_task"] if c["blocked"] else c["task"] for c in choice]
                + ["linear_1_16_10_bias", "sumpool_global_c16_8x8_nhwc"]))
            p = model_cli("run", *args, "--repeats=3")
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            run = read_json(os.path.join(out, "run.json"))
            self.assertLessEqual(run["max_relative_error"], 1e-4)
            self.assertEqual((run["layers"], run["layers_on_kernels"]), (4, 4))
            self.assertEqual(run["blocked_layers"], summary["blocked_layers"])
            # Without --out-block there is nothing to choose between.
            p = model_cli("tune", *args, "--time-limit=6", "--no-progress", "--choose-blocks")
            self.assertEqual(p.returncode, 2)
            self.assertIn("--choose-blocks chooses between blocked and unblocked weights",
                          p.stderr)

    @staticmethod
    def start_schedule_library(plan, out):
        """The plan's tasks exported at their start schedules (looptool export, no tuning)."""
        files = []
        for task in plan.tasks.values():
            files.append(os.path.join(out, task.name + ".lt"))
            with open(files[-1], "w") as f:
                f.write(task.program)
        subprocess.run([CLI, "export", f"--benchmark={','.join(files)}", f"--output={out}/lib",
                        "--library=start"], check=True, capture_output=True)
        return kernels.load(os.path.join(out, "lib"))

    def test_every_kind_through_its_kernels(self):
        # What each layer's padding, crop, phases, channel of 1s, epilogue and fused relu make
        # of its kernel must be PyTorch's output.
        model = tiny_models.every_kind()
        x = torch.randn(1, 3, 32, 32)
        plan = extract_lib.extract(model, x)
        with tempfile.TemporaryDirectory() as out:
            library = self.start_schedule_library(plan, out)
            ours, missing = with_kernels(plan, library)
            self.assertEqual(missing, [])
            with torch.no_grad():
                want, got = model(x), ours(x)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
            self.assertEqual(sum(1 for n in ours.graph.nodes
                                 if str(n.target).startswith("looptool_layer_")), 9)
            # An input of another batch or size than the example's: a clear error.
            with self.assertRaisesRegex(ValueError, r"layer relu \(conv_c3_k8_16x16_7x7_s2_"
                                        r"phases_bias_relu\) was extracted for float32 inputs "
                                        r"of 3072 elements .* got torch.float32 \(2, 3, 32, 32\)"):
                with torch.no_grad():
                    ours(torch.randn(2, 3, 32, 32))
            # A library without a task: its layers stay in PyTorch, and say so.
            partial = {k: v for k, v in library.items() if not k.startswith("maxpool")}
            ours, missing = with_kernels(plan, partial)
            self.assertEqual(missing, ["maxpool_c8_8x8_3x3_s2"])
            with torch.no_grad():
                np.testing.assert_allclose(ours(x).numpy(), want.numpy(), rtol=1e-4, atol=1e-5)

    def through_kernels(self, model, x, layout="nchw", **extract_args):
        """The model through its plan's start-schedule kernels equals PyTorch's output; returns
        (the plan, the model on kernels)."""
        plan = extract_lib.extract(model, x, layout=layout, **extract_args)
        with tempfile.TemporaryDirectory() as out:
            ours, missing = with_kernels(plan, self.start_schedule_library(plan, out))
            self.assertEqual(missing, [])
            with torch.no_grad():
                np.testing.assert_allclose(ours(x).numpy(), model(x).numpy(), rtol=1e-4,
                                           atol=1e-5)
        return plan, ours

    def test_every_kind_channels_last_through_its_kernels(self):
        # The same in (H, W, C): padding and the channel of 1s along the last axis, strided
        # windows read as they are, the epilogue's bias along channels, a grouped convolution
        # (nchw) between channels-last layers; a 15x17 image too.
        for model, x in ((tiny_models.every_kind(), torch.randn(1, 3, 32, 32)),
                         (tiny_models.two_convs_and_linear(), torch.randn(1, 3, 15, 17))):
            plan, ours = self.through_kernels(model, x, layout="nhwc")
            self.assertGreaterEqual(sum(layer.channels_last for layer in plan.layers), 3)
            # A channels-last layer hands on its output in channels_last strides (the next one
            # reads it without a copy).
            first = next(m for name, m in ours.named_children()
                         if name.startswith("looptool_layer_"))
            with torch.no_grad():
                y = first(x)
            self.assertEqual(tuple(y.shape), plan.layers[0].result_shape)
            self.assertTrue(y.is_contiguous(memory_format=torch.channels_last))

    def test_weights_with_output_channels_last_through_their_kernels(self):
        # (C, H, W) convolutions of groups 1 read W[c,r,s,k] (1x1: W[c,k]) with weights_k_last,
        # PyTorch's W[k,c,r,s] (W[k,c]) without; strided windows as they are (rewrite=False)
        # and over phases; the grouped and depthwise convolutions keep theirs. Both forms'
        # start-schedule kernels (the output channels innermost: strided stores) are PyTorch's.
        model, x = tiny_models.every_kind(), torch.randn(1, 3, 32, 32)
        for rewrite in (True, False):
            forms = {}
            for k_last in (True, False):
                plan, _ = self.through_kernels(model, x, rewrite=rewrite, weights_k_last=k_last)
                forms[k_last] = {layer.nodes[0]: (plan.tasks[layer.task].program.split(" * ")[-1]
                                                  .split()[0], layer.weight.shape)
                                 for layer in plan.layers if layer.kind == "conv"}
            self.assertEqual(len(forms[True]), 3)
            for node, (weights, shape) in forms[True].items():
                before, before_shape = forms[False][node]
                self.assertEqual((weights, before), ("W[c,k]", "W[k,c]") if len(shape) == 2
                                 else ("W[c,r,s,k]", "W[k,c,r,s]"))
                self.assertEqual(shape, (*before_shape[1:], before_shape[0]))
        # Dilated windows, at stride 1 and 2 (not phased), read W[c,r,s,k] alike.
        dilated = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=2, dilation=2), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 8, 3, stride=2, padding=2, dilation=2, bias=False))
        plan, _ = self.through_kernels(dilated, torch.randn(1, 3, 11, 13))
        self.assertEqual([plan.tasks[layer.task].program.splitlines()[0]
                          for layer in plan.layers],
                         ["O[k,h,w] += I[c, h+2*r, w+2*s] * W[c,r,s,k] -> relu",
                          "O[k,h,w] += I[c, 2*h+2*r, 2*w+2*s] * W[c,r,s,k]"])
        # Kernels tuned for PyTorch's layout do not compute a plan that lays the weights out
        # otherwise (a square 1x1's W[k,c] and W[c,k] even share a shape): a clear error.
        square = torch.nn.Sequential(torch.nn.Conv2d(8, 8, 1, bias=False))
        x8 = torch.randn(1, 8, 4, 4)
        first = extract_lib.extract(square, x8, weights_k_last=False)
        last = extract_lib.extract(square, x8)
        self.assertEqual(last.layers[0].task, first.layers[0].task)
        with tempfile.TemporaryDirectory() as out:
            library = self.start_schedule_library(first, out)
            with self.assertRaisesRegex(ValueError, re.escape(
                    "(conv_c8_k8_4x4_1x1_s1): the library's kernel computes "
                    "'O[k, h, w] += I[c, h, w] * W[k, c] / k=8 h=4 w=4 c=8', the layer's task "
                    "'O[k,h,w] += I[c, h, w] * W[c,k] / k=8 h=4 w=4 c=8'")):
                with_kernels(last, library)
            ours, missing = with_kernels(first, library)
            with torch.no_grad():
                np.testing.assert_allclose(ours(x8).numpy(), square(x8).numpy(), rtol=1e-4,
                                           atol=1e-5)
            # The whole program counts, not the accesses alone: a kernel of the same accesses
            # without the layer's fused relu, or of other sizes (a call's shape check would
            # come only later, and not for every size), filed under the layer's task name.
            kernel = library[first.layers[0].task]
            relu = extract_lib.extract(torch.nn.Sequential(square, torch.nn.ReLU()), x8,
                                       weights_k_last=False)
            wider = extract_lib.extract(square, torch.randn(1, 8, 6, 6), weights_k_last=False)
            for plan, what in ((relu, "-> relu"), (wider, "h=6 w=6")):
                self.assertIn(what, plan.tasks[plan.layers[0].task].program)
                with self.assertRaisesRegex(ValueError, "a kernel tuned for another program"):
                    with_kernels(plan, {plan.layers[0].task: kernel})

    def test_output_channels_blocked(self):
        # out_block=4, block_min_bytes=0: every convolution of groups 1 with more than 4 output
        # channels reads W[b,r,s,c,k] = W[r,s,c,4*b+k] and writes O[h,w,b,k]; the rest as without.
        model, x = tiny_models.two_convs_and_linear(), torch.randn(1, 3, 16, 16)
        flat = extract_lib.extract(model, x, layout="nhwc")
        plan = extract_lib.extract(model, x, layout="nhwc", out_block=4, block_min_bytes=0)
        self.assertEqual(plan.tasks["conv_c8_k16_8x8_3x3_s1_bias_nhwc_ob4_relu"].program,
                         "O[h,w,b,k] += I[h+r, w+s, c] * W[b,r,s,c,k] -> relu\n"
                         "b=4 k=4 h=8 w=8 c=9 r=3 s=3\n")
        conv2 = plan.layers[1]
        self.assertEqual((conv2.out_block, conv2.kernel_output_shape), (4, (8, 8, 4, 4)))
        self.assertEqual(conv2.kernel_input_shapes[1], (4, 3, 3, 9, 4))
        np.testing.assert_array_equal(
            conv2.weight, flat.layers[1].weight.reshape(3, 3, 9, 4, 4).transpose(3, 0, 1, 2, 4))
        with self.assertRaisesRegex(extract_lib.ExtractError, "out_block 4: 0, or a block"):
            extract_lib.extract(model, x, out_block=4)
        # Weights under block_min_bytes stay W[r,s,c,k]: conv2's take 9*9*16*4 = 5184 bytes.
        sizes = {n: [layer.out_block for layer in extract_lib.extract(
            model, x, layout="nhwc", out_block=4, block_min_bytes=n).layers] for n in
            (5184, 5185, extract_lib.BLOCKED_WEIGHTS_MIN_BYTES)}
        self.assertEqual(sizes, {5184: [0, 4, 0, 0], 5185: [0, 0, 0, 0],
                                 extract_lib.BLOCKED_WEIGHTS_MIN_BYTES: [0, 0, 0, 0]})
        # block_layers names the layers to block (by first node), whatever their size; layers
        # that cannot be blocked (the linear one) stay as they are.
        named = {tuple(names): [layer.out_block for layer in extract_lib.extract(
            model, x, layout="nhwc", out_block=4, block_layers=names).layers] for names in
            ([], [plan.layers[1].nodes[0]], [layer.nodes[0] for layer in plan.layers])}
        self.assertEqual(list(named.values()), [[0, 0, 0, 0], [0, 4, 0, 0], [4, 4, 0, 0]])
        # tune --choose-blocks: one plan with both forms of each convolution that can be blocked.
        both, forms = commands.both_forms(model, x, 4)
        self.assertEqual(forms, {
            plan.layers[0].nodes[0]: ("conv_c3_k8_8x8_3x3_s2_bias_nhwc_relu",
                                      "conv_c3_k8_8x8_3x3_s2_bias_nhwc_ob4_relu"),
            plan.layers[1].nodes[0]: ("conv_c8_k16_8x8_3x3_s1_bias_nhwc_relu",
                                      "conv_c8_k16_8x8_3x3_s1_bias_nhwc_ob4_relu")})
        self.assertEqual(len(both.tasks), 6)
        self.assertEqual([both.weight(t) for pair in forms.values() for t in pair], [1] * 4)
        # Through the kernels: the stem, a plain 3x3, a strided 1x1 with its bias in the
        # kernel blocked, and (rewrite=False) biases left to the epilogue, added per block.
        for model, x, rewrite in ((tiny_models.every_kind(), torch.randn(1, 3, 32, 32), True),
                                  (tiny_models.every_kind(), torch.randn(1, 3, 32, 32), False),
                                  (tiny_models.two_convs_and_linear(), torch.randn(1, 3, 15, 17),
                                   False)):
            plan, _ = self.through_kernels(model, x, layout="nhwc", out_block=4, rewrite=rewrite,
                                           block_min_bytes=0)
            self.assertGreaterEqual(sum(layer.out_block == 4 for layer in plan.layers), 2)
            self.assertTrue(any(layer.out_block and layer.bias is not None
                                for layer in plan.layers) or rewrite)

    def test_a_batch_and_odd_sizes_through_their_kernels(self):
        # Batch 2 (the index n kept, no phases, the channel of 1s on axis 1) and a 15x17 image
        # (phases over a padded input of odd size, cropped and extended).
        for shape in ((2, 3, 16, 16), (1, 3, 15, 17)):
            self.through_kernels(tiny_models.two_convs_and_linear(), torch.randn(*shape))

    def test_bad_input_is_one_clear_line(self):
        p = model_cli("tune", "--model=no_such_net")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--model=no_such_net: not a torchvision model", p.stderr)
        p = model_cli("run", "--model=resnet18", "--input-shape=1,x")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--input-shape takes sizes like 1,3,224,224", p.stderr)
        with tempfile.TemporaryDirectory() as out:
            p = model_cli("run", "--model=tiny_models:two_convs_and_linear",
                          "--input-shape=1,3,16,16", f"--out={out}")
            self.assertEqual(p.returncode, 2)
            self.assertIn("looptool.model: ", p.stderr)
            self.assertIn("kernels", p.stderr)
            p = model_cli("tune", "--model=tiny_models:two_convs_and_linear",
                          "--input-shape=1,3,16,16", f"--out={out}", "--time-limit=1",
                          "--slice=1")
            self.assertEqual(p.returncode, 2)
            self.assertIn("--time-limit=1 s cannot give each of the 4 tasks one 1 s slice on "
                          "1 servers; give at least 4 s", p.stderr)
            # A server nobody listens on: one line naming what failed, exit status 1.
            p = model_cli("tune", "--model=tiny_models:two_convs_and_linear",
                          "--input-shape=1,3,16,16", f"--out={out}", "--servers=127.0.0.1:1",
                          "--no-progress")
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("looptool.model: ", p.stderr)
            self.assertIn("UNAVAILABLE", p.stderr)
            self.assertNotIn("Traceback", p.stderr)


class FaultTest(unittest.TestCase):
    def test_a_server_killed_mid_slice(self):
        servers = [LocalServer(SERVER, flags=FAST) for _ in range(2)]
        victim = servers[1]
        killed = threading.Event()

        def on_slice(result):
            # The first slice back from the other server: the victim most likely has one running
            # now (killed mid-slice); if its slice had just ended, the next one or the run's
            # final probe finds it dead. Either way it must be dropped and its tasks redone.
            if not killed.is_set() and result.server == servers[0].address:
                os.kill(victim.pid, signal.SIGKILL)
                killed.set()

        model = tiny_models.two_convs_and_linear()
        x = torch.randn(1, 3, 16, 16)
        try:
            with tempfile.TemporaryDirectory() as out, \
                    unittest.mock.patch.dict(os.environ, {"LOOPTOOL_CLI": CLI}):
                summary = commands.tune_model(
                    model, x, out, time_limit=6, slice_seconds=1,
                    servers=[s.address for s in servers], progress=False,
                    log=io.StringIO(), on_slice=on_slice)
                self.assertTrue(killed.is_set())
                self.assertEqual(summary["dropped_servers"], [victim.address])
                tasks = [r["task"] for r in summary["report"]]
                self.assertEqual(len(tasks), len(set(tasks)))   # each reported once
                self.assertEqual(len(tasks), 4)
                for r in summary["report"]:
                    self.assertFalse(r["error"], r)
                    self.assertGreater(r["gflops"], 0, r)
                self.assertTrue(summary["library"])
                run = commands.run_model(model, x, out, repeats=2)
                self.assertLessEqual(run["max_relative_error"], 1e-4)
        finally:
            for s in servers:
                s.close()


if __name__ == "__main__":
    unittest.main()
