"""The learning curve and the evaluation table, as CSV, Markdown and PNG (matplotlib, Agg)."""

import csv
import os
import time
from typing import Any, Dict, Optional, Sequence

from looptool.rl.evaluate import geomean


def host_label(peak_gflops: Optional[float] = None) -> str:
    """"<CPU model>, peak N GFLOPS, <date>": what every figure is labelled with."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    peak = f", measured FMA peak {peak_gflops:.0f} GFLOPS" if peak_gflops else ""
    return f"{model}{peak}, {time.strftime('%Y-%m-%d')}"


def write_csv(path: str, rows: Sequence[Dict[str, Any]]) -> None:
    if not rows:
        return
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def write_markdown(path: str, lines: Sequence[str]) -> None:
    """The lines as a Markdown file, and echoed to stdout."""
    text = "\n".join(lines) + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print(text, end="")


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend (no display needed)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def learning_curve(out_dir: str, curve: Sequence[Dict[str, Any]], title: str) -> None:
    """curve.csv and curve.png: training episodes' final fraction of peak and the greedy
    evaluation's, against environment steps."""
    write_csv(os.path.join(out_dir, "curve.csv"), curve)
    if not curve:
        return
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    steps = [r["env_steps"] for r in curve]
    ax.plot(steps, [r["train_fraction_of_peak"] for r in curve], label="training episodes "
            "(exploring), final state")
    ev = [r for r in curve if r.get("eval_fraction_of_peak") not in (None, "")]
    if ev:
        ax.plot([r["env_steps"] for r in ev], [r["eval_fraction_of_peak"] for r in ev], "o-",
                label="greedy policy on test benchmarks")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("GFLOPS / measured FMA peak (geomean)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "curve.png"), dpi=110)
    plt.close(fig)


def evaluation_table(out_dir: str, rows: Sequence[Dict[str, Any]], title: str) -> None:
    """eval.csv, eval.md and eval.png: per benchmark, start and final fraction of peak."""
    write_csv(os.path.join(out_dir, "eval.csv"), rows)
    lines = [f"# {title}", "",
             "| set | benchmark | start GFLOPS | policy GFLOPS | % of peak | x start | s | actions |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['set']} | {r['benchmark']} | {r['start_gflops']:.1f} | "
                     f"{r['gflops']:.1f} | {100 * r['fraction_of_peak']:.1f} | "
                     f"{r['speedup']:.2f} | {r['seconds']:.2f} | {r['actions']} |")
    lines.append("")
    for which in sorted({r["set"] for r in rows}):
        sel = [r for r in rows if r["set"] == which]
        lines.append(f"- {which}: {len(sel)} benchmarks, geomean "
                     f"{100 * geomean([r['fraction_of_peak'] for r in sel]):.1f}% of peak, "
                     f"{geomean([r['speedup'] for r in sel]):.2f}x the start state")
    with open(os.path.join(out_dir, "eval.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    if not rows:
        return
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(7, 0.25 * len(rows)), 4))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], [100 * r["start_gflops"] / r["peak"] for r in rows], 0.4,
           label="start state")
    ax.bar([i + 0.2 for i in x], [100 * r["fraction_of_peak"] for r in rows], 0.4,
           label="policy (greedy, 10 steps)")
    ax.set_xticks(list(x))
    ax.set_xticklabels([r["benchmark"] for r in rows], rotation=90, fontsize=6)
    ax.set_ylabel("% of measured FMA peak")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "eval.png"), dpi=110)
    plt.close(fig)
