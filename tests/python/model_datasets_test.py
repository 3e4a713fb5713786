"""The model datasets compiled into the server are what datasets/models/generate.py makes of
torchvision's models now: regenerated into a temporary directory, every file equals the committed
one (programs, weights, references), and the references describe the same layers as the
programs (FLOPs of the PyTorch op = FLOPs of the program)."""
import os
import re
import subprocess
import sys
import tempfile
import unittest

DATASETS = os.path.abspath("datasets/models")
MODELS = ["resnet18", "mobilenet_v2", "bert_base"]


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def blocks(text: str):
    """(name, weight, reference, program lines) per benchmark."""
    out = []
    for line in text.splitlines():
        if line.startswith("@ "):
            _, name, weight, ref = line.split(" ", 3)
            out.append((name, int(weight), ref, []))
        elif out and not line.startswith("#"):
            out[-1][3].append(line)
    return out


def program_flops(lines) -> int:
    """2 per point of a multiply-add nest, 1 per point of a max or a plain sum."""
    sizes = dict(kv.split("=") for kv in lines[-1].split())
    volume = 1
    for v in sizes.values():
        volume *= int(v)
    return (2 if "*" in lines[0] else 1) * volume


def reference_flops(ref: str) -> int:
    op, *kv = ref.split()
    a = dict(item.split("=", 1) for item in kv)
    dims = {k: [int(d) for d in v.split("x")] for k, v in a.items() if re.fullmatch(r"[\dx]+", v)}
    if op == "conv2d":
        n, c, h, w = dims["input"]
        k, cg, r, s = dims["weight"]
        st, d = int(a["stride"]), int(a["dilation"])
        ho, wo = (h - d * (r - 1) - 1) // st + 1, (w - d * (s - 1) - 1) // st + 1
        return 2 * n * k * cg * r * s * ho * wo
    if op == "linear":
        m, kk = dims["input"]
        return 2 * m * kk * dims["weight"][0]
    if op == "bmm":
        b, i, kk = dims["a"]
        return 2 * b * i * kk * dims["b"][2]
    raise ValueError(op)


class ModelDatasetsTest(unittest.TestCase):
    def test_committed_files_are_what_the_generator_makes(self):
        with tempfile.TemporaryDirectory() as out:
            p = subprocess.run([sys.executable, os.path.join(DATASETS, "generate.py"),
                                f"--out={out}", *[f"--model={m}" for m in MODELS]],
                               capture_output=True, text=True, check=False,
                               env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                   p for p in sys.path if p)))
            self.assertEqual(p.returncode, 0, p.stderr)
            for m in MODELS:
                self.assertEqual(read(os.path.join(out, f"{m}-v0.txt")),
                                 read(os.path.join(DATASETS, f"{m}-v0.txt")), m)

    def test_references_compute_what_the_programs_compute(self):
        checked = 0
        for m in MODELS:
            for name, weight, ref, lines in blocks(read(os.path.join(DATASETS, f"{m}-v0.txt"))):
                self.assertGreaterEqual(weight, 1, name)
                if ref.split()[0] in ("conv2d", "linear", "bmm"):
                    self.assertEqual(reference_flops(ref), program_flops(lines), name)
                    checked += 1
        self.assertEqual(checked, 12 + 31 + 5)  # every conv, linear and matmul of the three

    def test_resnet18_has_its_layers(self):
        rows = blocks(read(os.path.join(DATASETS, "resnet18-v0.txt")))
        self.assertEqual(sum(w for _, w, _, _ in rows), 31)
        convs = [r for r in rows if r[2].startswith(("conv2d", "linear"))]
        self.assertEqual(len(convs), 12)                     # distinct
        self.assertEqual(sum(w for _, w, _, _ in convs), 21)  # in all


if __name__ == "__main__":
    unittest.main()
