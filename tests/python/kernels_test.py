"""`looptool export` and `looptool.kernels`: tuned kernels taken away from the server.

One export (an embedded server) of a small program of every kind the catalog has (matmuls with
and without relu, convolutions of stride 1 and 2, 1x1 and depthwise, pooling, reductions, GEMV,
transposes, broadcast, concatenation, elementwise add with relu) and a tiled matmul with tails;
then
  * a C program compiled with gcc against the shared library and, separately, the static
    archive calls the matmul and checks it against a naive loop;
  * Python calls every kernel on numpy arrays and on torch tensors (through __dlpack__) and
    compares with numpy;
  * bad calls, a missing ISA, corrupt manifests and libraries get the errors the module names.
"""
import ctypes
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view as windows

from looptool import kernels

LOOPTOOL = os.path.join(os.getcwd(), "client/cpp/looptool")


def conv(I, W, stride):  # O[k,h,w] += I[c, stride*h+r, stride*w+s] * W[k,c,r,s]
    k, c, r, s = W.shape
    v = windows(I, (r, s), axis=(1, 2))[:, ::stride, ::stride]  # c, h, w, r, s
    return np.einsum("chwrs,kcrs->khw", v, W)


def depthwise(I, W, stride):  # O[c,h,w] += I[c, stride*h+r, stride*w+s] * W[c,r,s]
    c, r, s = W.shape
    v = windows(I, (r, s), axis=(1, 2))[:, ::stride, ::stride]
    return np.einsum("chwrs,crs->chw", v, W)


def relu(x):
    return np.maximum(x, 0)


# name: (program, numpy reference over the inputs by name)
PROGRAMS = {
    "matmul": ("C[m,n] += A[m,k] * B[k,n]\nm=24 n=40 k=56\n", lambda A, B: A @ B),
    "matmul_relu": ("C[m,n] += A[m,k] * B[k,n] -> relu\nm=16 n=48 k=32\n",
                    lambda A, B: relu(A @ B)),
    "conv3x3": ("O[k,h,w] += I[c, h+r, w+s] * W[k,c,r,s]\nk=16 h=10 w=12 c=8 r=3 s=3\n",
                lambda I, W: conv(I, W, 1)),
    "conv3x3s2": ("O[k,h,w] += I[c, 2*h+r, 2*w+s] * W[k,c,r,s]\nk=16 h=7 w=9 c=4 r=3 s=3\n",
                  lambda I, W: conv(I, W, 2)),
    "pointwise": ("O[k,h,w] += I[c,h,w] * W[k,c]\nk=24 h=6 w=10 c=16\n",
                  lambda I, W: np.einsum("chw,kc->khw", I, W)),
    "depthwise": ("O[c,h,w] += I[c, h+r, w+s] * W[c,r,s]\nc=16 h=9 w=11 r=3 s=3\n",
                  lambda I, W: depthwise(I, W, 1)),
    "depthwise_s2": ("O[c,h,w] += I[c, 2*h+r, 2*w+s] * W[c,r,s]\nc=8 h=5 w=7 r=3 s=3\n",
                     lambda I, W: depthwise(I, W, 2)),
    "maxpool": ("O[c,h,w] max= I[c, 2*h+r, 2*w+s]\nc=8 h=6 w=7 r=3 s=3\n",
                lambda I: windows(I, (3, 3), axis=(1, 2))[:, ::2, ::2].max(axis=(3, 4))),
    "maxpool_nhwc": ("O[h,w,c] max= I[2*h+r, 2*w+s, c]\nh=4 w=5 c=24 r=2 s=2\n",
                     lambda I: windows(I, (2, 2), axis=(0, 1))[::2, ::2].max(axis=(3, 4))),
    "global_sumpool": ("O[c] += I[c,h,w]\nc=40 h=7 w=7\n", lambda I: I.sum(axis=(1, 2))),
    "rowmax": ("O[r] max= I[r,c]\nr=20 c=70\n", lambda I: I.max(axis=1)),
    "colsum": ("O[c] += I[r,c]\nr=30 c=50\n", lambda I: I.sum(axis=0)),
    "gemv": ("y[m] += A[m,k] * x[k]\nm=33 k=65\n", lambda A, x: A @ x),
    "transpose": ("B[n,m] = A[m,n]\nm=24 n=40\n", lambda A: A.T),
    "hwc_to_chw": ("B[c,h,w] = A[h,w,c]\nh=5 w=6 c=20\n", lambda A: A.transpose(2, 0, 1)),
    "broadcast": ("B[m,n] = a[n]\nm=12 n=36\n", lambda a: np.broadcast_to(a, (12, 36))),
    "concat": ("C[m,a] = A[m,a]\nC[m,b+20] = B[m,b]\nm=6 a=20 b=12\n",
               lambda A, B: np.concatenate([A, B], axis=1)),
    "add_relu": ("C[m,n] = A[m,n] + B[m,n] -> relu\nm=10 n=50\n", lambda A, B: relu(A + B)),
}

# The C program: the matmul (tiled, with tails) against a naive loop.
C_PROGRAM = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include "looptool_kernels.h"

enum { M = 64, N = 80, K = 96 };

int main(void) {
  static float A[M][K], B[K][N], C[M][N];
  for (int i = 0; i < M; ++i) for (int k = 0; k < K; ++k) A[i][k] = (float)((i * 7 + k * 3) % 11) - 5;
  for (int k = 0; k < K; ++k) for (int j = 0; j < N; ++j) B[k][j] = (float)((k * 5 + j) % 7) - 3;
  for (int i = 0; i < M; ++i) for (int j = 0; j < N; ++j) C[i][j] = NAN;
  const char* missing = looptool_kernels_cpu_missing();
  if (missing != NULL) { printf("cpu: %s\n", missing); return 3; }
  if (mm_tiled(&C[0][0], &A[0][0], &B[0][0]) != 0) { printf("returned nonzero\n"); return 4; }
  for (int i = 0; i < M; ++i) for (int j = 0; j < N; ++j) {
    float want = 0;
    for (int k = 0; k < K; ++k) want += A[i][k] * B[k][j];
    if (C[i][j] != want) { printf("C[%d][%d] = %g, want %g\n", i, j, C[i][j], want); return 1; }
  }
  float* tensors[3] = {&C[0][0], &A[0][0], &B[0][0]};
  C[5][7] = NAN;
  mm_tiled_tensors(tensors);
  if (isnan(C[5][7])) { printf("the raw entry did not write\n"); return 5; }
  printf("ok\n");
  return 0;
}
"""


def run(*args, timeout=300):
    return subprocess.run([LOOPTOOL, *args], capture_output=True, text=True, timeout=timeout)


def _vm_flags(address):
    """The VmFlags line of the mapping in /proc/self/smaps that holds `address`, or None where
    this host cannot say (no transparent huge pages in its kernel, no VmFlags in its smaps)."""
    if not os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"):
        return None
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(" ", 1)[0]
            if "-" in head and not head.endswith(":"):
                begin, end = (int(x, 16) for x in head.split("-"))
                inside = begin <= address < end
            elif inside and line.startswith("VmFlags:"):
                return line
    return None


class KernelsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kernels_test")
        files = []
        for name, (program, _) in PROGRAMS.items():
            path = os.path.join(cls.tmp, name + ".lt")
            with open(path, "w") as f:
                f.write(program)
            files.append(path)
        cls.out = os.path.join(cls.tmp, "all")
        p = run("export", "--benchmark=" + ",".join(files), "--output=" + cls.out,
                "--timing-budget-ms=1", "--json")
        assert p.returncode == 0, p.stderr
        cls.export_reply = json.loads(p.stdout)
        # A tiled matmul: k split by 8, n by 32 (80 = 2 x 32 + a tail of 16).
        cls.mm = os.path.join(cls.tmp, "mm")
        mm_file = os.path.join(cls.tmp, "mm_tiled.lt")
        with open(mm_file, "w") as f:
            f.write("C[m,n] += A[m,k] * B[k,n]\nm=64 n=80 k=96\n")
        p = run("export", "--benchmark=" + mm_file, "--output=" + cls.mm,
                "--actions=down,split_8,down,down,split_32,up,swap_up", "--timing-budget-ms=1")
        assert p.returncode == 0, p.stderr
        cls.mm_export_stdout = p.stdout

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_export_writes_the_four_files_and_a_manifest_per_kernel(self):
        self.assertEqual(self.export_reply["kernels"], len(PROGRAMS))
        for key in ("header", "shared_library", "static_library", "manifest"):
            self.assertTrue(os.path.isfile(self.export_reply[key]), key)
        with open(self.export_reply["manifest"]) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["format"], "looptool-kernels-1")
        self.assertEqual([k["name"] for k in manifest["kernels"]], list(PROGRAMS))
        conv = manifest["kernels"][2]
        self.assertEqual(conv["program"],
                         "O[k, h, w] += I[c, h + r, w + s] * W[k, c, r, s]\n"
                         "k=16 h=10 w=12 c=8 r=3 s=3\n")
        self.assertEqual([(t["name"], t["shape"], t["role"]) for t in conv["tensors"]],
                         [("O", [16, 10, 12], "output"), ("I", [8, 12, 14], "input"),
                          ("W", [16, 8, 3, 3], "input")])
        self.assertEqual(conv["flops"], 2 * 16 * 10 * 12 * 8 * 9)
        self.assertGreater(conv["gflops"], 0)
        self.assertGreater(conv["code_bytes"], 0)
        self.assertIn(conv["isa"], ("avx512", "avx2", "sse"))
        with open(self.export_reply["header"]) as f:
            header = f.read()
        self.assertIn("int conv3x3(float* O, const float* I, const float* W);", header)
        self.assertIn("void conv3x3_tensors(float* const* tensors);", header)
        self.assertIn("const char* looptool_kernels_cpu_missing(void);", header)
        # Only our symbols are exported: the check, and two per kernel.
        nm = subprocess.run(["nm", "-D", "--defined-only", self.export_reply["shared_library"]],
                            capture_output=True, text=True, check=True).stdout
        symbols = sorted(line.split()[-1] for line in nm.splitlines() if " T " in line)
        self.assertEqual(symbols, sorted(["looptool_kernels_cpu_missing"] +
                                         [n for p in PROGRAMS for n in (p, p + "_tensors")]))

    def test_a_c_program_links_the_shared_and_the_static_library(self):
        source = os.path.join(self.tmp, "main.c")
        with open(source, "w") as f:
            f.write(C_PROGRAM)
        for how, flags in (("shared", ["-L" + self.mm, "-llooptool_kernels",
                                       "-Wl,-rpath," + self.mm]),
                           ("static", [os.path.join(self.mm, "liblooptool_kernels.a")])):
            exe = os.path.join(self.tmp, "main_" + how)
            subprocess.run(["gcc", "-std=c11", "-O1", "-Wall", "-Werror", "-I" + self.mm, source,
                            "-o", exe, *flags, "-lm"], check=True)
            p = subprocess.run([exe], capture_output=True, text=True, timeout=60)
            self.assertEqual((p.returncode, p.stdout), (0, "ok\n"), how)

    def test_python_calls_every_kind_against_numpy(self):
        lib = kernels.load(self.out)
        self.assertEqual(sorted(lib), sorted(PROGRAMS))
        rng = np.random.default_rng(7)
        for name, (_, reference) in PROGRAMS.items():
            kernel = lib[name]
            inputs = {t.name: rng.uniform(-1, 1, t.shape).astype(np.float32)
                      for t in kernel.inputs}
            want = reference(**inputs)
            got = kernel(*inputs.values())
            self.assertEqual(got.shape, want.shape, name)
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)
            # By name, into an output passed in (poisoned first: every element is written).
            out = np.full(kernel.outputs[0].shape, np.nan, dtype=np.float32)
            self.assertIs(kernel(out=out, **inputs), out)
            np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5, err_msg=name)

    def test_bind_and_aligned_empty(self):
        k = kernels.load(self.mm).mm_tiled
        rng = np.random.default_rng(3)
        A, B, C = kernels.empty((64, 96)), kernels.empty((96, 80)), kernels.empty((64, 80))
        for array in (A, B, C):
            self.assertEqual(array.ctypes.data % 64, 0)
            self.assertEqual(array.dtype, np.float32)
        A[...] = rng.uniform(-1, 1, A.shape)
        B[...] = rng.uniform(-1, 1, B.shape)
        C[...] = np.nan
        run = k.bind(A, B, out=C)
        self.assertIs(run(), C)
        np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)
        A *= 2  # a bound call reads the arrays' contents anew
        run()
        np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)
        self.assertEqual(k(A, B).ctypes.data % 64, 0)  # outputs it allocates are aligned too
        with self.assertRaisesRegex(kernels.KernelArgumentError, "input B: shape"):
            k.bind(A, B[:1], out=C)

    def test_arrays_placed_as_the_server_placed_its_tensors(self):
        for offset in (0, 64, 1088, 4032):
            a = kernels.empty((3, 1000), page_offset=offset)
            self.assertEqual((a.ctypes.data % 4096, a.shape, a.dtype), (offset, (3, 1000),
                                                                           np.float32))
        for bad in (-64, 32, 4096, 64.0):
            with self.assertRaisesRegex(ValueError, "multiple of 64"):
                kernels.empty((4,), page_offset=bad)
        # From 4 MiB (the block's whole pages, offset included) on, past a 2 MiB boundary in a
        # mapping advised as huge pages, as the server's allocator places them; just below,
        # past a page only.
        below = (4 << 20) - 4096 - 1088
        for floats, offset, huge in ((below // 4, 1088, False), (below // 4 + 1, 1088, True),
                                     (1 << 20, 0, True), ((6 << 18) + 5, None, True)):
            a = kernels.empty((floats,), page_offset=offset)
            self.assertEqual(a.ctypes.data % (2 << 20 if huge else 4096), offset or 0,
                             (floats, offset))
            self.assertEqual((a.shape, a.dtype, a.flags.writeable), ((floats,), np.float32, True))
            a[:] = 1.5
            self.assertEqual(float(a[-1]), 1.5)
            if huge:
                for at in (a.ctypes.data, a.ctypes.data + 4 * floats - 1):
                    flags = _vm_flags(at)
                    if flags is not None:
                        self.assertIn(" hg", flags, (floats, offset))
        # The server's AllocateTensors starts tensor t 17 t cache lines past a page.
        self.assertEqual([kernels.server_page_offset(t) for t in range(5)],
                         [0, 1088, 2176, 3264, 256])
        k = kernels.load(self.mm).mm_tiled
        self.assertEqual([t.name for t in k.tensors], ["C", "A", "B"])  # ids: output first
        (A, B), (C,) = k.empty_tensors()
        self.assertEqual([A.shape, B.shape, C.shape], [(64, 96), (96, 80), (64, 80)])
        self.assertEqual([C.ctypes.data % 4096, A.ctypes.data % 4096, B.ctypes.data % 4096],
                         [0, 1088, 2176])
        rng = np.random.default_rng(5)
        A[...] = rng.uniform(-1, 1, A.shape)
        B[...] = rng.uniform(-1, 1, B.shape)
        C[...] = np.nan
        self.assertIs(k(A, B, out=C), C)
        np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)

    def test_huge_page_sizes_are_the_servers(self):
        # One fact in three languages: the sizes from which the server's allocator
        # (util/aligned_allocator.h), this module and the export's timing program
        # (bench/export/export_timing.c) map a tensor in huge pages, and those pages' size.
        def sizes(path, pattern):
            with open(path) as f:
                m = re.search(pattern, f.read())
            if m is None:
                self.fail(f"{path} does not hold {pattern}")
            return [int(m.group(i)) << int(m.group(i + 1)) for i in (1, 3)]

        ours = [kernels._HUGE_BYTES, kernels._HUGE_PAGE]
        self.assertEqual(sizes("util/aligned_allocator.h",
                               r"kHugeBytes = std::size_t\{(\d+)\} << (\d+);\s*"
                               r"static constexpr std::size_t kHugePage = "
                               r"std::size_t\{(\d+)\} << (\d+);"), ours)
        self.assertEqual(sizes("bench/export/export_timing.c",
                               r"kHugeBytes = (\d+) << (\d+), kHugePage = (\d+) << (\d+) \}"),
                         ours)

    def test_torch_tensors_through_dlpack(self):
        import torch
        lib = kernels.load(os.path.join(self.mm, "liblooptool_kernels.so"))
        A = torch.randn(64, 96)
        B = torch.randn(96, 80)
        C = torch.full((64, 80), float("nan"))
        self.assertIs(lib.mm_tiled(A, B, out=C), C)
        torch.testing.assert_close(C, A @ B, rtol=1e-4, atol=1e-4)
        with self.assertRaisesRegex(kernels.KernelArgumentError, "not C-contiguous"):
            lib.mm_tiled(A, B.t().contiguous().t())
        with self.assertRaisesRegex(kernels.KernelArgumentError, "require gradient"):
            lib.mm_tiled(A.requires_grad_(), B)

    def test_bad_calls(self):
        lib = kernels.load(self.mm)
        k = lib.mm_tiled
        A = np.zeros((64, 96), np.float32)
        B = np.zeros((96, 80), np.float32)
        cases = [
            (lambda: k(A), "mm_tiled: missing input B"),
            (lambda: k(A, B, A), "takes 2 inputs \\(A, B\\), got 3"),
            (lambda: k(A, X=B), "no input named 'X'"),
            (lambda: k(A, B[:50]), "input B: shape is \\(50, 80\\), the kernel takes \\(96, 80\\)"),
            (lambda: k(A.astype(np.float64), B), "input A: dtype is float64"),
            (lambda: k(np.zeros((96, 64), np.float32).T, B), "input A: not C-contiguous"),
            (lambda: k(A, B, out=np.zeros((64, 80), np.float32)[:, ::-1]),
             "output C: not C-contiguous"),
            (lambda: k(A, [[1.0]]), "expected a numpy array or an object with __dlpack__"),
            (lambda: k(A, B, out=(np.zeros((64, 80), np.float32),) * 2), "1 outputs, got 2"),
            (lambda: k(A, B, out={"D": A}), "out names \\['D'\\], the outputs are \\['C'\\]"),
        ]
        for call, message in cases:
            with self.assertRaisesRegex(kernels.KernelArgumentError, message):
                call()
        with self.assertRaisesRegex(kernels.KernelArgumentError, "input A: dtype is >f4"):
            k(A.astype(">f4"), B)
        # float32 under another dtype object (metadata) is float32: accepted, computed.
        tagged = np.zeros((64, 80), dtype=np.dtype(np.float32, metadata={"tag": 1}))
        self.assertIs(k(A + 1, B + 1, out=tagged), tagged)
        np.testing.assert_array_equal(tagged, (A + 1) @ (B + 1))
        readonly = np.zeros((64, 80), np.float32)
        readonly.setflags(write=False)
        with self.assertRaisesRegex(kernels.KernelArgumentError, "output C: the array is read-only"):
            k(A, B, out=readonly)
        both = np.zeros(64 * 96 + 64 * 80, np.float32)
        with self.assertRaisesRegex(kernels.KernelArgumentError, "output C overlaps A"):
            k(both[:64 * 96].reshape(64, 96), B, out=both[64 * 16:64 * 16 + 64 * 80].reshape(64, 80))
        self.assertIn("mm_tiled", repr(lib))
        with self.assertRaisesRegex(AttributeError, "no kernel 'nope'"):
            lib.nope

    def test_a_cpu_without_the_isa_is_refused_with_what_it_lacks(self):
        with open(os.path.join(self.mm, "looptool_kernels.json")) as f:
            needed = json.load(f)["kernels"][0]["cpu_features"]
        if not needed:
            self.skipTest("exported for plain x86-64 (sse): nothing can be missing")
        with self.assertRaisesRegex(kernels.UnsupportedCpuError,
                                    f"this CPU lacks {needed[0]}.*kernels mm_tiled"):
            kernels.load(self.mm, cpu_features=[f for f in needed[1:]])
        # The library's own check agrees with the manifest here.
        lib = ctypes.CDLL(os.path.join(self.mm, "liblooptool_kernels.so"))
        lib.looptool_kernels_cpu_missing.restype = ctypes.c_char_p
        self.assertIsNone(lib.looptool_kernels_cpu_missing())

    def test_corrupt_or_missing_files(self):
        bad = os.path.join(self.tmp, "bad")
        shutil.copytree(self.mm, bad)
        manifest = os.path.join(bad, "looptool_kernels.json")
        with self.assertRaisesRegex(kernels.KernelLibraryError, "no kernel manifest at"):
            kernels.load(os.path.join(bad, "nothing.json"))
        with open(manifest) as f:
            good = json.load(f)
        for text, message in (("{not json", "is not a LoopTool kernel manifest: Expecting"),
                              ('{"format": "other"}', "format 'other'"),
                              (json.dumps({**good, "kernels": [{"name": "x"}]}),
                               "incomplete or corrupt")):
            with open(manifest, "w") as f:
                f.write(text)
            with self.assertRaisesRegex(kernels.KernelLibraryError, message):
                kernels.load(bad)
        with open(manifest, "w") as f:
            json.dump(good, f)
        so = os.path.join(bad, "liblooptool_kernels.so")
        with open(so, "wb") as f:
            f.write(b"\x7fELF but not really")
        with self.assertRaisesRegex(kernels.KernelLibraryError, "cannot load .*liblooptool"):
            kernels.load(bad)
        renamed = dict(good)
        renamed["kernels"] = [dict(good["kernels"][0], tensors_symbol="missing_tensors")]
        shutil.copy(os.path.join(self.mm, "liblooptool_kernels.so"), so)
        with open(manifest, "w") as f:
            json.dump(renamed, f)
        with self.assertRaisesRegex(kernels.KernelLibraryError,
                                    "does not match its manifest: no missing_tensors"):
            kernels.load(bad)

    def test_export_from_a_store_and_from_a_tune_run(self):
        store = os.path.join(self.tmp, "store.db")
        p = run("tune", "--benchmark=mm64_64_64,mm32_48_16", "--store=" + store,
                "--search=random", "--time-limit=0.5", "--timing-budget-ms=1", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        tuned = {json.loads(line)["benchmark"]: json.loads(line) for line in p.stdout.splitlines()}
        out = os.path.join(self.tmp, "from_store")
        p = run("export", "--store=" + store, "--output=" + out, "--library=stored",
                "--timing-budget-ms=1")
        self.assertEqual(p.returncode, 0, p.stderr)
        lib = kernels.load(out)
        self.assertEqual(sorted(lib), ["mm32_48_16", "mm64_64_64"])
        for name, kernel in lib.items():
            entry = kernel.manifest
            record = tuned[entry["benchmark"]]
            self.assertEqual(entry["actions"], record["actions"])
            self.assertEqual(entry["tuned"]["search"], "random")
            self.assertEqual(entry["tuned"]["gflops"], record["gflops"])
            A = np.ones(kernel.inputs[0].shape, np.float32)
            B = np.ones(kernel.inputs[1].shape, np.float32)
            np.testing.assert_array_equal(kernel(A, B), A @ B)
        # Another CPU's schedule of mm64_64_64, listed first (hosts sort by name) and "faster":
        # export takes this CPU's.
        import sqlite3
        with sqlite3.connect(store) as db:
            db.execute("INSERT INTO schedules SELECT benchmark, ' A faster CPU', action_space, "
                       "'[\"split_2\"]', loop_tree, gflops * 100, peak_gflops, search, server, "
                       "seconds, updated_unix FROM schedules WHERE benchmark LIKE '%mm64_64_64'")
        p = run("export", "--store=" + store, "--benchmark=mm64_64_64",
                "--output=" + os.path.join(self.tmp, "this_host"), "--timing-budget-ms=1")
        self.assertEqual(p.returncode, 0, p.stderr)
        entry = kernels.load(os.path.join(self.tmp, "this_host")).mm64_64_64.manifest
        self.assertEqual(entry["actions"], tuned[entry["benchmark"]]["actions"])
        self.assertEqual(entry["tuned"]["host_cpu"], tuned[entry["benchmark"]]["host_cpu"])
        # Schedules that no longer replay (a space the server no longer has, actions it no longer
        # knows): the benchmark's next schedule is exported; a benchmark none of whose schedules
        # replays is skipped, said so, when the whole store is exported, and fails the export by
        # name.
        with sqlite3.connect(store) as db:
            db.execute("INSERT INTO schedules SELECT benchmark, host_cpu, 'a_gone_space', "
                       "actions, loop_tree, gflops * 1000, peak_gflops, search, server, seconds, "
                       "updated_unix FROM schedules WHERE benchmark LIKE '%mm32_48_16'")
            db.execute("INSERT INTO schedules SELECT benchmark, host_cpu, 'loop_nest', "
                       "'[\"no_such_action\"]', loop_tree, gflops * 100, peak_gflops, search, "
                       "server, seconds, updated_unix FROM schedules "
                       "WHERE benchmark LIKE '%mm32_48_16' AND action_space = 'loop_tool'")
            db.execute("INSERT INTO schedules SELECT replace(benchmark, 'mm32_48_16', "
                       "'mm16_16_16'), host_cpu, action_space, '[\"no_such_action\"]', "
                       "loop_tree, gflops, peak_gflops, search, server, seconds, updated_unix "
                       "FROM schedules WHERE benchmark LIKE '%mm32_48_16' "
                       "AND action_space = 'loop_tool'")
        out = os.path.join(self.tmp, "replayed")
        p = run("export", "--store=" + store, "--output=" + out, "--timing-budget-ms=1", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        reply = json.loads(p.stdout)
        self.assertEqual(reply["skipped"], ["benchmark://mm64_256_16_range-v0/mm16_16_16"])
        self.assertIn("skipped benchmark://mm64_256_16_range-v0/mm16_16_16: none of its stored "
                      "schedules replays", p.stderr)
        self.assertIn("benchmark://mm64_256_16_range-v0/mm32_48_16: a stored schedule does not "
                      "replay (the server has no action space 'a_gone_space'); trying the one "
                      "tuned on", p.stderr)
        self.assertEqual(p.stderr.count("mm32_48_16: a stored schedule does not replay"), 2)
        lib = kernels.load(out)
        self.assertEqual(sorted(lib), ["mm32_48_16", "mm64_64_64"])
        self.assertEqual(lib.mm32_48_16.manifest["actions"],
                         tuned[lib.mm32_48_16.manifest["benchmark"]]["actions"])
        self.assertEqual(lib.mm32_48_16.manifest["action_space"], "loop_tool")
        p = run("export", "--store=" + store, "--benchmark=mm16_16_16",
                "--output=" + os.path.join(self.tmp, "bad"), "--timing-budget-ms=1")
        self.assertEqual(p.returncode, 1)
        self.assertIn("mm16_16_16: no stored schedule of it replays (the last: ", p.stderr)
        with sqlite3.connect(store) as db:
            db.execute("DELETE FROM schedules WHERE benchmark LIKE '%mm16_16_16'")
        # One benchmark of the store, by name; one the store lacks.
        p = run("export", "--store=" + store, "--benchmark=mm32_48_16",
                "--output=" + os.path.join(self.tmp, "one"), "--timing-budget-ms=1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(list(kernels.load(os.path.join(self.tmp, "one"))), ["mm32_48_16"])
        p = run("export", "--store=" + store, "--benchmark=mm16_16_16",
                "--output=" + os.path.join(self.tmp, "none"), "--timing-budget-ms=1")
        self.assertEqual(p.returncode, 1)
        self.assertIn("has no schedule of benchmark://mm64_256_16_range-v0/mm16_16_16", p.stderr)
        # tune --export-dir: the run's best, exported.
        out = os.path.join(self.tmp, "from_tune")
        p = run("tune", "--benchmark=mm64_80_96", "--search=random", "--time-limit=0.5",
                "--timing-budget-ms=1", "--export-dir=" + out, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        result = json.loads(p.stdout)  # one JSON object, the library's files in it
        self.assertEqual(result["export"]["kernels"], 1)
        self.assertEqual(result["export"]["manifest"], os.path.join(out, "looptool_kernels.json"))
        kernel = kernels.load(out).mm64_80_96
        self.assertEqual(kernel.manifest["actions"], result["actions"])
        self.assertEqual(kernel.manifest["tuned"]["search"], "random")
        # An export that fails after the tuning: the result printed without "export", status 2.
        blocker = os.path.join(self.tmp, "a_file")
        with open(blocker, "w") as f:
            f.write("not a directory\n")
        p = run("tune", "--benchmark=mm64_80_96", "--search=random", "--time-limit=0.2",
                "--timing-budget-ms=1", "--export-dir=" + os.path.join(blocker, "lib"), "--json")
        self.assertEqual(p.returncode, 2, p.stderr)
        result = json.loads(p.stdout)
        self.assertNotIn("export", result)
        self.assertGreater(result["gflops"], 0)
        self.assertIn(blocker, p.stderr)
        # A library name that is no C identifier fails before any tuning.
        p = run("tune", "--benchmark=mm64_80_96", "--time-limit=30", "--export-dir=" + out,
                "--library=9lives", "--json")
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stdout, "")
        self.assertIn("library name '9lives' is not a C identifier", p.stderr)

    def test_streamed_stores_exported_and_called_aligned_or_not(self):
        # An embedded server with --stream_stores_min_bytes: the output is written with
        # non-temporal stores when 64-byte aligned, by a plain copy of the code otherwise; the
        # manifest and the header say so, and both bodies compute what numpy does.
        src = os.path.join(self.tmp, "add_streamed.lt")
        with open(src, "w") as f:
            f.write("C[m,n] = A[m,n] + B[m,n]\nm=64 n=64\n")
        out = os.path.join(self.tmp, "streamed")
        p = run("export", "--benchmark=" + src, "--output=" + out, "--library=streamed",
                "--stream-stores-min-bytes=1", "--timing-budget-ms=1", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        reply = json.loads(p.stdout)
        with open(reply["manifest"]) as f:
            tensors = {t["name"]: t for t in json.load(f)["kernels"][0]["tensors"]}
        self.assertTrue(tensors["C"].get("streamed"))
        self.assertNotIn("streamed", tensors["A"])
        with open(reply["header"]) as f:
            self.assertIn("non-temporal stores (past the caches) into C when 64-byte aligned",
                          f.read())
        k = kernels.load(out).add_streamed
        rng = np.random.default_rng(11)
        A = rng.uniform(-1, 1, (64, 64)).astype(np.float32)
        B = rng.uniform(-1, 1, (64, 64)).astype(np.float32)
        aligned = kernels.empty((64, 64))
        backing = kernels.empty((64 * 64 + 1,))  # 64-byte aligned
        unaligned = backing[1:].reshape(64, 64)  # 4 bytes past an aligned base
        self.assertEqual(aligned.ctypes.data % 64, 0)
        self.assertNotEqual(unaligned.ctypes.data % 64, 0)
        for C in (aligned, unaligned):
            C[...] = np.nan
            self.assertIs(k(A, B, out=C), C)
            np.testing.assert_array_equal(C, A + B)
        # Without the flag nothing is streamed.
        p = run("export", "--benchmark=" + src, "--output=" + out + "_plain", "--library=plain",
                "--timing-budget-ms=1", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(json.loads(p.stdout)["manifest"]) as f:
            plain = json.load(f)["kernels"][0]["tensors"]
        self.assertFalse([t for t in plain if "streamed" in t])

    def test_cli_errors(self):
        p = run("export", "--benchmark=mm64_64_64")
        self.assertEqual(p.returncode, 2)
        self.assertIn("export needs --output=DIR", p.stderr)
        p = run("export", "--benchmark=mm64_64_64,mm32_32_32", "--actions=down",
                "--output=" + self.tmp)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--actions applies to one --benchmark", p.stderr)
        p = run("export", "--benchmark=mm64_64_64", "--output=" + self.tmp, "--library=9lives")
        self.assertEqual(p.returncode, 2)
        self.assertIn("library name '9lives' is not a C identifier", p.stderr)
        p = run("export", "--store=" + os.path.join(self.tmp, "none.db"), "--output=" + self.tmp)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no schedule store at", p.stderr)


if __name__ == "__main__":
    unittest.main()
