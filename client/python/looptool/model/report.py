"""The report of a model's tuning: tables (Markdown, and the per-task one as CSV) and a PNG.

One row per task, heaviest share first: its layers (how many, which modules), the GFLOPS and %
of peak the exporting server measured for its kernel (else the best slice's), one run's latency,
its share of the model's kernel time (weight x latency), slices and seconds spent, servers, and
the error of a task that failed. Then one row per layer in the model's order (its modules, task,
fused relu, epilogue, kernel latency), and the nodes left to PyTorch with the reason.
"""

import csv
import os
from typing import Any, Dict, List, Optional

from looptool.model.extract import Plan
from looptool.model.tuning import TuneRun

COLUMNS = ["task", "kind", "layers", "modules", "mflop", "gflops", "percent_of_peak",
           "latency_us", "weighted_us", "share_percent", "slices", "seconds", "servers", "error"]


def rows(plan: Plan, run: TuneRun, manifest: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    exported = {k["name"]: k for k in (manifest or {}).get("kernels", [])}
    out: List[Dict[str, Any]] = []
    for name, t in run.tasks.items():
        k = exported.get(name)
        gflops = float(k["gflops"]) if k else (t.best.gflops if t.best else 0.0)
        peak = float(k["peak_gflops"]) if k else (t.best.peak_gflops if t.best else 0.0)
        latency = t.flops / (gflops * 1e3) if gflops > 0 else 0.0  # µs
        modules = [m for layer in plan.layers_of(name) for m in layer.modules[:1]]
        out.append({
            "task": name, "kind": plan.tasks[name].kind, "layers": t.weight,
            "modules": " ".join(modules) or "-", "mflop": round(t.flops / 1e6, 3),
            "gflops": round(gflops, 2),
            "percent_of_peak": round(100 * gflops / peak, 1) if peak > 0 else 0.0,
            "latency_us": round(latency, 3), "weighted_us": round(latency * t.weight, 3),
            "share_percent": 0.0, "slices": t.slices, "seconds": round(t.seconds, 1),
            "servers": " ".join(t.servers), "error": "; ".join(t.errors[-1:]) if t.failed else "",
        })
    total = sum(r["weighted_us"] for r in out)
    for r in out:
        r["share_percent"] = round(100 * r["weighted_us"] / total, 1) if total > 0 else 0.0
    out.sort(key=lambda r: -float(r["weighted_us"]))
    return out


def write(plan: Plan, run: TuneRun, manifest: Optional[Dict[str, Any]], out_dir: str,
          title: str) -> List[Dict[str, Any]]:
    """report.md, report.csv and report.png in out_dir; returns the rows."""
    table = rows(plan, run, manifest)
    with open(os.path.join(out_dir, "report.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(table)
    total_ms = sum(r["weighted_us"] for r in table) / 1e3
    peak = max((float(k["peak_gflops"]) for k in (manifest or {}).get("kernels", [])),
               default=0.0)
    lines = [f"# {title}", "",
             f"{len(plan.layers)} layers as {len(plan.tasks)} tasks, tuned for "
             f"{run.seconds:.0f} s; the kernels' time for one run of the model: "
             f"{total_ms:.3f} ms" + (f" (peak {peak:.1f} GFLOPS)" if peak else "") + ".",
             ""]
    if run.dropped_servers:
        lines += [f"Servers dropped (stopped answering): {', '.join(run.dropped_servers)}.", ""]
    if run.lost_slices:
        lines += [f"Slices lost with their Dask worker and put back: {run.lost_slices}.", ""]
    lines += ["| " + " | ".join(COLUMNS[:-1]) + " |", "|" + "---|" * (len(COLUMNS) - 1)]
    for r in table:
        cells = [str(r[c]) for c in COLUMNS[:-1]]
        if r["error"]:
            cells[5] = f"failed: {r['error']}"
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Layers, in the model's order (latency: one call of the task's kernel; the "
              "epilogue runs in PyTorch after it):", "",
              "| layer | modules | task | relu in kernel | epilogue | latency_us |",
              "|---|---|---|---|---|---|"]
    latency = {r["task"]: r["latency_us"] for r in table}
    for layer in plan.layers:
        lines.append(f"| {layer.name} | {' '.join(layer.modules) or '-'} | {layer.task} | "
                     f"{'yes' if layer.kernel_relu else 'no'} | "
                     f"{' '.join(layer.epilogue()) or '-'} | {latency.get(layer.task, 0.0)} |")
    if plan.left:
        lines += ["", "Left to PyTorch:", ""]
        lines += [f"- `{x.node}` {x.op}: {x.why}" for x in plan.left]
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    _plot(table, os.path.join(out_dir, "report.png"), title)
    return table


def _plot(table: List[Dict[str, Any]], path: str, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [r["task"] for r in table][::-1]
    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 0.32 * len(names) + 1.6), sharey=True)
    a.barh(names, [r["weighted_us"] for r in table][::-1], color="tab:blue")
    a.set_xlabel("µs per model run (layers x latency)")
    b.barh(names, [r["percent_of_peak"] for r in table][::-1], color="tab:orange")
    b.set_xlabel("% of the measured FMA peak")
    a.tick_params(axis="y", labelsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
