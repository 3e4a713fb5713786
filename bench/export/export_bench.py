"""export_bench: does an exported kernel run as fast as the server said? Tunes a few layers on an
embedded server (`looptool tune --store`), exports them (`looptool export --store`: the server
compiles each schedule again and reports its GFLOPS), then times every kernel from C
(export_timing.c, compiled with gcc, the library dlopen'ed) and from Python
(`looptool.kernels`), on the core the server's kernel worker used, the same way the server
does: warm-up, single runs, the fastest. Writes a Markdown table of the ratios.

    bazel build //client/cpp:looptool && \\
      /usr/bin/python3 bench/export/export_bench.py [--time-limit=15] [--out=FILE]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "bazel-bin/client/python"), os.path.join(ROOT, "client/python")]
from looptool import kernels  # noqa: E402

BENCHMARKS = [
    "benchmark://mm64_256_16_range-v0/mm112_208_256",
    "benchmark://mm64_256_16_range-v0/mm256_256_256",
    "benchmark://conv2d-v0/resnet18_conv4_3x3",
    "benchmark://conv2d-v0/resnet18_conv5_3x3",
    "benchmark://conv2d-v0/mobilenet_depthwise_256_28",
    "benchmark://reduce-v0/gemv_1024_1024",
]


def python_gflops(kernel, cpu, bound, single=False, placed=True, seconds=1.0):
    """GFLOPS of checked calls (kernel(*args, out=out)), or of a bound call (kernel.bind).

    single=False: samples of back-to-back calls lasting about 200 µs (as timeit batches), the
    fastest sample per call. single=True: every call timed alone (perf_counter_ns around it: the
    call's Python and ctypes cost and one clock read are charged to it), the fastest call: the
    server's and export_timing.c's method, so that the ratio compares like with like.
    placed=True: the arrays placed within their pages as the server placed the tensors
    (Kernel.empty_tensors); False: kernels.empty's (a cache line, wherever numpy puts it; from
    4 MiB on, past a 2 MiB boundary in huge pages either way)."""
    os.sched_setaffinity(0, {cpu})
    if placed:
        args, outs = kernel.empty_tensors()
        out = outs[0] if len(outs) == 1 else outs
    else:
        args = [kernels.empty(t.shape) for t in kernel.inputs]
        out = kernels.empty(kernel.outputs[0].shape) if len(kernel.outputs) == 1 else None
    for a in args:
        a[...] = 1
    call = kernel.bind(*args, out=out) if bound else lambda: kernel(*args, out=out)
    end = time.perf_counter() + 0.2
    calls = 0
    while time.perf_counter() < end:
        call()
        calls += 1
    clock = time.perf_counter_ns
    if single:
        best_ns, spent_ns, runs = 1 << 62, 0, 0
        while spent_ns < seconds * 1e9 or runs < 10:
            start = clock()
            call()
            t = clock() - start
            spent_ns += t
            best_ns = min(best_ns, t)
            runs += 1
        return kernel.flops / best_ns
    # Samples of `reps` back-to-back calls, so that Python's clock and loop are not charged to a
    # short kernel; each call still pays its own Python and ctypes cost.
    reps = max(1, round(200e-6 / (0.2 / calls)))
    best, spent, runs = 1e30, 0.0, 0
    while spent < seconds or runs < 10:
        start = time.perf_counter()
        for _ in range(reps):
            call()
        t = time.perf_counter() - start
        spent += t
        best = min(best, t / reps)
        runs += 1
    return kernel.flops / best / 1e9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--time-limit", type=float, default=15)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench/results/export_bench.md"))
    parser.add_argument("--looptool", default=os.path.join(ROOT, "bazel-bin/client/cpp/looptool"))
    args = parser.parse_args()
    cpu = os.cpu_count() - 1  # the embedded server's kernel worker's core
    tmp = tempfile.mkdtemp(prefix="export_bench")
    store = os.path.join(tmp, "store.db")
    out = os.path.join(tmp, "lib")
    subprocess.run([args.looptool, "tune", "--benchmark=" + ",".join(BENCHMARKS),
                    "--store=" + store, f"--time-limit={args.time_limit}"], check=True)
    subprocess.run([args.looptool, "export", "--store=" + store, "--output=" + out], check=True)
    harness = os.path.join(tmp, "export_timing")
    subprocess.run(["gcc", "-O2", "-std=c11", os.path.join(ROOT, "bench/export/export_timing.c"),
                    "-o", harness, "-ldl"], check=True)
    lib = kernels.load(out)
    so = os.path.join(out, lib.manifest["shared_library"])
    rows = []
    for entry in lib.manifest["kernels"]:
        kernel = lib[entry["name"]]
        elements = [str(math.prod(t["shape"])) for t in entry["tensors"]]
        c = json.loads(subprocess.run(
            [harness, so, entry["tensors_symbol"], str(cpu), str(entry["flops"]), *elements],
            check=True, capture_output=True, text=True).stdout)
        py = python_gflops(kernel, cpu, bound=False)
        bound = python_gflops(kernel, cpu, bound=True)
        single = python_gflops(kernel, cpu, bound=True, single=True)
        anywhere = python_gflops(kernel, cpu, bound=True, single=True, placed=False)
        rows.append((entry["name"], entry["gflops"], c["gflops"], py, bound, single, anywhere,
                     entry["peak_gflops"], entry["isa"],
                     1e6 * entry["flops"] / entry["gflops"] / 1e9))
        print(f"{entry['name']:32s} server {entry['gflops']:8.2f}  C {c['gflops']:8.2f} "
              f"({c['gflops'] / entry['gflops']:.3f}x)  Python {py:8.2f} "
              f"({py / entry['gflops']:.3f}x)  bound {bound:8.2f} "
              f"({bound / entry['gflops']:.3f}x)  bound single {single:8.2f} "
              f"({single / entry['gflops']:.3f}x)  kernels.empty {anywhere:8.2f} "
              f"({anywhere / entry['gflops']:.3f}x)", flush=True)
    host = lib.manifest["kernels"][0]["host_cpu"]
    with open(args.out, "w") as f:
        f.write("# Exported kernels against the server's own timing\n\n")
        f.write(f"`/usr/bin/python3 bench/export/export_bench.py --time-limit={args.time_limit:g}`"
                f" on {host}, {time.strftime('%Y-%m-%d')}: each layer tuned (evolution, "
                f"{args.time_limit:g} s), exported with `looptool export --store`, whose server "
                "times the kernel again (its GFLOPS below); then the exported library timed from "
                f"C (bench/export/export_timing.c, dlopen) and from Python (`looptool.kernels`: "
                f"every call checked, and a call checked once with `Kernel.bind`) on cpu {cpu}, "
                "the core the server's kernel "
                "worker used: warm-up 0.2 s, then for 1 s single runs (C, as the server's "
                "timer; and Python's bound call, `single` below: each call's Python and ctypes "
                "cost and a clock read charged to it) or samples of back-to-back calls lasting "
                "about 200 µs (Python, as timeit batches: each call pays its Python and ctypes "
                "cost, the clock is read per sample), the fastest per call. The single runs "
                "compare like with like: the fastest of single runs is never slower than the "
                "fastest mean of a few consecutive runs, which is the batched columns' bias on "
                "short, memory-bound kernels. C and Python place every tensor within its pages "
                "where the server's timer does (tensor i 17 i cache lines past a page: "
                "`Kernel.empty_tensors`), but for the `kernels.empty` column (bound, single "
                "runs, arrays on a cache line wherever numpy puts them): a tensor's place within "
                "its pages moves a memory-bound kernel's speed by several percent. One process "
                "after another, on the same core, in one run.\n\n")
        f.write("| kernel | ISA | µs | server GFLOPS | C GFLOPS | C / server | Python GFLOPS | "
                "Python / server | bound GFLOPS | bound / server | bound single GFLOPS | "
                "single / server | kernels.empty GFLOPS | kernels.empty / server | peak GFLOPS |\n"
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
        for name, server, c, py, bound, single, anywhere, peak, isa, us in rows:
            f.write(f"| {name} | {isa} | {us:.0f} | {server:.2f} | {c:.2f} | {c / server:.3f} | "
                    f"{py:.2f} | {py / server:.3f} | {bound:.2f} | {bound / server:.3f} | "
                    f"{single:.2f} | {single / server:.3f} | {anywhere:.2f} | "
                    f"{anywhere / server:.3f} | {peak:.1f} |\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
