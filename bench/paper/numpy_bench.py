"""numpy's matmul (Debian's numpy over its BLAS, one thread) on the matmuls of a tune_bench run,
timed like the other references: pinned to one core, warm-up, then the fastest of repeated runs
within a budget. Writes numpy_bench.csv (shape,set,gflops) next to tune_bench.csv.

    OPENBLAS_NUM_THREADS=1 /usr/bin/python3 bench/paper/numpy_bench.py --dir bench/results/paper
"""
import argparse
import csv
import os
import re
import time

import numpy as np


def shapes_of(tune_csv):
    seen = {}
    with open(tune_csv) as f:
        for row in csv.DictReader(f):
            seen.setdefault(row["shape"], row["set"])
    return seen


def fastest(run, budget=0.05, warmup=0.01, min_runs=3):
    end = time.perf_counter() + warmup
    while time.perf_counter() < end:
        run()
    best, spent, runs = float("inf"), 0.0, 0
    while spent < budget or runs < min_runs:
        t0 = time.perf_counter()
        run()
        dt = time.perf_counter() - t0
        best, spent, runs = min(best, dt), spent + dt, runs + 1
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", required=True, help="where tune_bench.csv is and the CSV goes")
    p.add_argument("--core", type=int, default=-1, help="CPU to pin to (default: the last)")
    args = p.parse_args()
    core = args.core if args.core >= 0 else max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {core})
    rows = []
    for name, which in shapes_of(os.path.join(args.dir, "tune_bench.csv")).items():
        match = re.fullmatch(r"mm(\d+)_(\d+)_(\d+)", name)
        if match is None:
            continue  # a convolution layer: numpy has no convolution of its own
        m, n, k = map(int, match.groups())
        a = np.ones((m, k), np.float32)
        b = np.full((k, n), 0.5, np.float32)
        c = np.empty((m, n), np.float32)
        seconds = fastest(lambda: np.matmul(a, b, out=c))
        rows.append((name, which, 2.0 * m * n * k / seconds * 1e-9))
    with open(os.path.join(args.dir, "numpy_bench.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["shape", "set", "gflops"])
        for r in rows:
            w.writerow([r[0], r[1], f"{r[2]:.3f}"])
    print(f"numpy_bench: {len(rows)} shapes on cpu {core}, numpy {np.__version__}")


if __name__ == "__main__":
    main()
