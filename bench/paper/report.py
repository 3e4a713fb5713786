"""The LoopTune paper's evaluation, for this machine: figures (PNG) and tables (Markdown, CSV)
from one run's measurements (tune_bench.csv, tune_bench_curves.csv, halide_bench.csv,
numpy_bench.csv in --dir). Every number comes from those files; every figure is labelled with
the host CPU, the measured FMA peak and the date.

    PYTHONPATH=bazel-bin/client/python:client/python /usr/bin/python3 bench/paper/report.py --dir bench/results/paper

Figures (matmuls; the same with _conv for the convolution layers): gflops_per_benchmark.png (every search, the policy, policy_guided, Halide's
autoschedulers, numpy, OpenBLAS and oneDNN on each benchmark), ratio_to_onednn.png (the
distribution of each method's ratio to oneDNN), anytime.png (geomean best-so-far / oneDNN over
tuning time, per search), performance_profile.png (fraction of benchmarks on which a method is
within a factor x of the best method). Table: summary.md / summary.csv.
"""
import argparse
import collections
import csv
import math
import os

from looptool.rl.report import host_label


def read(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(f))


def geomean(values):
    values = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else 0.0


def load(d):
    """{method: {benchmark: gflops}}, {benchmark: set}, peak,
    {(method, set): mean tuning seconds}."""
    gflops = collections.defaultdict(dict)
    sets, seconds = {}, collections.defaultdict(list)  # (method, set) -> tuning seconds
    peak = 0.0
    for r in read(os.path.join(d, "tune_bench.csv")):
        b = r["shape"]
        sets[b] = r["set"]
        peak = max(peak, float(r["peak_gflops"]))
        gflops[r["search"]][b] = float(r["gflops"])
        seconds[r["search"], r["set"]].append(float(r["seconds"]))
        gflops["oneDNN"][b] = float(r["onednn_gflops"])
        if float(r["openblas_gflops"]) > 0:  # none for convolutions
            gflops["OpenBLAS"][b] = float(r["openblas_gflops"])
    for r in read(os.path.join(d, "halide_bench.csv")):
        name = f"Halide {r['autoscheduler']}"
        gflops[name][r["shape"]] = float(r["gflops"])
        seconds[name, r["set"]].append(float(r["schedule_seconds"]))
    for r in read(os.path.join(d, "numpy_bench.csv")):
        gflops["numpy"][r["shape"]] = float(r["gflops"])
    return gflops, sets, peak, {m: sum(s) / len(s) for m, s in seconds.items()}


def summary(gflops, sets, peak, seconds):
    rows = []
    for method, per in gflops.items():
        for which in ("test", "offgrid", "conv"):
            ratios = [per[b] / gflops["oneDNN"][b] for b in per
                      if sets.get(b) == which and gflops["oneDNN"].get(b)]
            if not ratios:
                continue
            rows.append({
                "method": method, "set": which, "benchmarks": len(ratios),
                "geomean_vs_onednn": round(geomean(ratios), 3),
                "min_vs_onednn": round(min(ratios), 3),
                "geomean_percent_of_peak": round(
                    100 * geomean([per[b] for b in per if sets.get(b) == which]) / peak, 1),
                "mean_tuning_seconds": (round(seconds[method, which], 3)
                                        if (method, which) in seconds else ""),
            })
    order = {"test": 0, "offgrid": 1, "conv": 2}
    rows.sort(key=lambda r: (order[r["set"]], -r["geomean_vs_onednn"]))
    return rows


def save(fig, ax, path, title, legend_columns=1):
    """Titles, legends (none for 0 columns), writes and closes one figure."""
    import matplotlib.pyplot as plt
    ax.set_title(title, fontsize=9)
    if legend_columns:
        ax.legend(fontsize=7, ncol=legend_columns)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plots(d, gflops, sets, peak, label, suffix=""):
    """The four figures over the benchmarks of `sets` (file names end in `suffix`)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    benchmarks = sorted(sets, key=lambda b: (sets[b] != "test", b))
    gflops = {m: {b: g for b, g in per.items() if b in sets} for m, per in gflops.items()}
    gflops = {m: per for m, per in gflops.items() if per}
    methods = sorted(gflops, key=lambda m: -geomean(
        [gflops[m][b] / gflops["oneDNN"][b] for b in gflops[m] if gflops["oneDNN"].get(b)]))
    markers = "os^vD<>phx*+1234"

    fig, ax = plt.subplots(figsize=(max(10, 0.45 * len(benchmarks)), 6))
    for i, m in enumerate(methods):
        xs = [j for j, b in enumerate(benchmarks) if b in gflops[m]]
        ax.plot(xs, [gflops[m][benchmarks[j]] for j in xs], markers[i % len(markers)],
                label=m, alpha=0.8)
    ax.axhline(peak, color="gray", linestyle=":", label="FMA peak")
    ax.set_xticks(range(len(benchmarks)))
    ax.set_xticklabels([b + (" *" if sets[b] == "offgrid" else "") for b in benchmarks],
                       rotation=90, fontsize=7)
    ax.set_ylabel("GFLOPS (one core)")
    save(fig, ax, os.path.join(d, f"gflops_per_benchmark{suffix}.png"),
         f"GFLOPS per benchmark (* off the grid)\n{label}", legend_columns=2)

    fig, ax = plt.subplots(figsize=(10, 5))
    data = [[gflops[m][b] / gflops["oneDNN"][b] for b in gflops[m] if gflops["oneDNN"].get(b)]
            for m in methods]
    ax.boxplot(data, labels=methods, vert=True)
    ax.axhline(1.0, color="gray", linestyle=":")
    ax.set_ylabel("GFLOPS / oneDNN's")
    ax.tick_params(axis="x", rotation=60, labelsize=7)
    save(fig, ax, os.path.join(d, f"ratio_to_onednn{suffix}.png"),
         f"Ratio to oneDNN, all benchmarks\n{label}", legend_columns=0)

    curves = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in read(os.path.join(d, "tune_bench_curves.csv")):
        if r["shape"] in sets:
            curves[r["search"]][r["shape"]].append((float(r["seconds"]),
                                                    float(r["best_gflops"])))
    if curves:
        end = max(t for per in curves.values() for pts in per.values() for t, _ in pts)
        grid = [end * i / 100 for i in range(1, 101)]
        fig, ax = plt.subplots(figsize=(8, 5))
        for search, per in sorted(curves.items()):
            ys = []
            for t in grid:
                ratios = []
                for b, pts in per.items():
                    seen = [g for s, g in pts if s <= t and g > 0]
                    if seen and gflops["oneDNN"].get(b):
                        ratios.append(max(seen) / gflops["oneDNN"][b])
                # Drawn once every benchmark has a measured schedule (policy: at its end).
                ys.append(geomean(ratios) if len(ratios) == len(per) else float("nan"))
            ax.plot(grid, ys, label=search)
        ax.axhline(1.0, color="gray", linestyle=":", label="oneDNN")
        ax.set_xlabel("tuning time (s)")
        ax.set_ylabel("geomean best-so-far / oneDNN")
        save(fig, ax, os.path.join(d, f"anytime{suffix}.png"),
             f"Anytime: best schedule found over time\n{label}")

    best = {b: max(gflops[m].get(b, 0) for m in methods) for b in benchmarks}
    taus = [1 + 0.02 * i for i in range(101)]
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, m in enumerate(methods):
        fractions = [sum(1 for b in benchmarks if gflops[m].get(b, 0) * tau >= best[b])
                     / len(benchmarks) for tau in taus]
        ax.plot(taus, fractions, label=m, linestyle="-" if i < 10 else "--")
    ax.set_xlabel("within a factor x of the best method")
    ax.set_ylabel("fraction of benchmarks")
    save(fig, ax, os.path.join(d, f"performance_profile{suffix}.png"),
         f"Performance profile\n{label}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", required=True)
    p.add_argument("--seconds", type=float, default=0, help="the run's wall time, for the table")
    args = p.parse_args()
    gflops, sets, peak, seconds = load(args.dir)
    if not sets:
        raise SystemExit(f"report: no tune_bench.csv in {args.dir}")
    label = host_label(peak)
    rows = summary(gflops, sets, peak, seconds)
    with open(os.path.join(args.dir, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    md = [f"# The paper's evaluation on this machine\n", f"{label}. Benchmarks: "
          f"{sum(1 for s in sets.values() if s == 'test')} test-split matmuls and "
          f"{sum(1 for s in sets.values() if s == 'offgrid')} off the grid, "
          f"{sum(1 for s in sets.values() if s == 'conv')} convolution layers; every number from "
          f"this run" + (f" ({args.seconds / 60:.1f} min)" if args.seconds else "") + ".\n",
          "| method | set | benchmarks | geomean vs oneDNN | min vs oneDNN | geomean % of peak "
          "| mean tuning seconds |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        md.append(f"| {r['method']} | {r['set']} | {r['benchmarks']} | "
                  f"{r['geomean_vs_onednn']:.2f} | {r['min_vs_onednn']:.2f} | "
                  f"{r['geomean_percent_of_peak']} | {r['mean_tuning_seconds']} |")
    md += ["", "![GFLOPS per benchmark](gflops_per_benchmark.png)",
           "![Ratio to oneDNN](ratio_to_onednn.png)", "![Anytime](anytime.png)",
           "![Performance profile](performance_profile.png)", ""]
    if any(s == "conv" for s in sets.values()):
        md += ["Convolution layers:", "", "![GFLOPS per layer](gflops_per_benchmark_conv.png)",
               "![Ratio to oneDNN](ratio_to_onednn_conv.png)", "![Anytime](anytime_conv.png)",
               "![Performance profile](performance_profile_conv.png)", ""]
    with open(os.path.join(args.dir, "summary.md"), "w") as f:
        f.write("\n".join(md))
    matmuls = {b: s for b, s in sets.items() if s != "conv"}
    convs = {b: s for b, s in sets.items() if s == "conv"}
    plots(args.dir, gflops, matmuls, peak, label)
    if convs:
        plots(args.dir, gflops, convs, peak, label, suffix="_conv")
    print("\n".join(md))


if __name__ == "__main__":
    main()
