"""How well loop_set cost models rank a records file's kernels, beside how well any model could
given the records' own timing noise.

    python3 -m looptool.rl.rank_eval --records=records.db [--split=validation] \\
        [--labels=search|remeasured] datasets/policies/loop_set.json other.json ...

For each policy file's cost model (plan_cost.PlanCost), per run of at least 10 kernels:
Spearman's rho of its scores against the measured log2 GFLOPS, and the GFLOPS of the kernel it
ranks first over the run's best. Reported for the searches' runs (all, memory-bound, compute-
bound: a run is memory-bound when its program's roofline bound is below the peak) and the
policy episodes' runs (plan_cost.EPISODE_SEARCHES) apart, and the runs it ranks worst.

The noise ceiling: a kernel measured in two runs of its program (records keep it once per run)
gives two readings of one truth. From every such pair, sigma = median |log2 a - log2 b| /
(0.6745 * sqrt(2)) (each reading's normal noise, from the median of the difference of two), for
memory-bound and compute-bound programs apart. A model that knew every kernel's true speed
would still rank the readings with rho of about Spearman(y, y + N(0, sigma^2)) per run (y the
readings: an estimate, as y already holds one draw of the noise): that mean is the ceiling.

With `--labels=remeasured` the labels are the kernels' full-budget readings
(`python3 -m looptool.records remeasure`; the searches' own readings stop early or skip kernels
that look slow), over the kernels that have one; the ceiling still comes from the searches'
readings.
"""
import argparse
import collections
import json
import math
import sys
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from looptool.rl import plan_cost as pc

Array = npt.NDArray[Any]
MIN_KERNELS = 10
# The median of |a - b| for a, b independent N(0, s^2), over s.
_MEDIAN_ABS_DIFF = 0.6745 * math.sqrt(2.0)


def spearman(a: Array, b: Array) -> float:
    """Spearman's rho (ties averaged); 0 where either side is constant."""
    ra, rb = pc._ranks(np.asarray(a, np.float64)), pc._ranks(np.asarray(b, np.float64))
    sa, sb = ra - ra.mean(), rb - rb.mean()
    denom = math.sqrt(float((sa ** 2).sum() * (sb ** 2).sum()))
    return float((sa * sb).sum() / denom) if denom > 0 else 0.0


def is_memory_bound(row: Any) -> bool:
    """Whether a record's program is bound by memory on its host (roofline below the peak)."""
    return bool(0 < row.roofline_gflops < row.peak_gflops)


@dataclass
class Noise:
    """Timing noise read off kernels measured in more than one run of their program."""
    pairs: int               # kernels with two or more runs' readings (the first two count)
    median_abs_log2: float   # median |log2 a - log2 b| over them (0 without pairs)
    sigma: float             # one reading's noise in log2 units (0 without pairs)


def noise(rows: Sequence[Any]) -> Noise:
    """The Noise of `rows` (looptool.records.Record with positive GFLOPS), all kinds together."""
    first: Dict[Tuple[int, str], Dict[int, float]] = collections.defaultdict(dict)
    for r in rows:
        if r.gflops > 0:
            first[(r.program_id, r.schedule)].setdefault(r.run_id, r.gflops)
    diffs = [abs(math.log2(v[0]) - math.log2(v[1]))
             for v in (list(runs.values()) for runs in first.values()) if len(v) >= 2]
    if not diffs:
        return Noise(0, 0.0, 0.0)
    med = float(np.median(diffs))
    return Noise(len(diffs), med, med / _MEDIAN_ABS_DIFF)


def noise_ceiling(y: Array, sigma: float, draws: int = 8, seed: int = 0) -> float:
    """The mean over `draws` of Spearman(y, y + N(0, sigma^2)): 1 when sigma is 0."""
    if sigma <= 0:
        return 1.0
    rng = np.random.default_rng(seed)
    y = np.asarray(y, np.float64)
    return float(np.mean([spearman(y + rng.normal(0.0, sigma, len(y)), y)
                          for _ in range(draws)]))


def _runs(rows: Sequence[Any]) -> Dict[int, List[Any]]:
    out: Dict[int, List[Any]] = collections.defaultdict(list)
    for r in rows:
        if r.gflops > 0:
            out[r.run_id].append(r)
    return {k: v for k, v in out.items() if len(v) >= MIN_KERNELS}


def ceilings(rows: Sequence[Any]) -> Dict[str, Any]:
    """The noise of memory-bound and compute-bound programs apart, and the mean noise ceiling
    over the searches' runs of each (and of all)."""
    search = [r for r in rows if r.search not in pc.EPISODE_SEARCHES]
    out: Dict[str, Any] = {}
    per_run: Dict[str, List[float]] = {"memory": [], "compute": []}
    for name, memory in (("memory", True), ("compute", False)):
        part = [r for r in rows if is_memory_bound(r) == memory]
        n = noise(part)
        out[f"{name}_noise_pairs"] = n.pairs
        out[f"{name}_noise_median_abs_log2"] = n.median_abs_log2
        out[f"{name}_noise_sigma_log2"] = n.sigma
        for run_rows in _runs([r for r in search if is_memory_bound(r) == memory]).values():
            y = np.log2([r.gflops for r in run_rows])
            per_run[name].append(noise_ceiling(y, n.sigma, seed=run_rows[0].run_id))
        out[f"search_{name}_ceiling_mean"] = (float(np.mean(per_run[name]))
                                              if per_run[name] else 0.0)
    both = per_run["memory"] + per_run["compute"]
    out["search_ceiling_mean"] = float(np.mean(both)) if both else 0.0
    return out


def evaluate(model: pc.PlanCost, rows: Sequence[Any],
             worst: int = 10) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """Ranking stats of `model` over `rows` (as plan_cost's fit reports them, the searches'
    runs also split by memory-bound and compute-bound), and its `worst` search runs by rho."""
    rows = [r for r in rows if r.gflops > 0]
    data = pc.dataset(rows, model.names)
    memory_runs = {r.run_id for r in rows if is_memory_bound(r)}
    memory = np.array([x in memory_runs for x in data.run], bool)
    search = ~data.episodes
    stats: Dict[str, Any] = {}
    for name, mask in (("search_", search), ("search_memory_", search & memory),
                       ("search_compute_", search & ~memory), ("episodes_", data.episodes)):
        stats.update(pc._ranking_stats(model, pc.subset(data, mask), name))
    pred = model.predict_matrix(data.x)
    info = {r.run_id: r for r in rows}
    listed = []
    for run in np.unique(data.run[search]):
        m = data.run == run
        if m.sum() < MIN_KERNELS:
            continue
        r = info[int(run)]
        listed.append({"run": int(run), "benchmark": r.benchmark, "kind": r.kind,
                       "memory_bound": is_memory_bound(r), "kernels": int(m.sum()),
                       "spearman": spearman(pred[m], data.y[m])})
    listed.sort(key=lambda d: float(d["spearman"]))
    return stats, listed[:worst]


def main(argv: Optional[Sequence[str]] = None) -> int:
    from looptool import records as records_lib
    p = argparse.ArgumentParser(prog="python3 -m looptool.rl.rank_eval", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", required=True)
    p.add_argument("--split", default="validation", choices=records_lib.SPLITS)
    p.add_argument("--worst", type=int, default=10, help="the runs ranked worst to list")
    p.add_argument("--labels", default="search", choices=("search", "remeasured"),
                   help="rank against the searches' readings, or the full-budget ones")
    p.add_argument("policies", nargs="*", help="loop_set policy files with a cost model")
    args = p.parse_args(argv)
    if args.worst < 0:
        p.error("--worst must be >= 0")
    try:
        models = [(f, pc.load_cost(f)) for f in args.policies]
    except (OSError, ValueError) as e:
        p.error(f"a policy file: {e}")
    try:
        rows = [r for r in records_lib.load(args.records, split=args.split) if r.gflops > 0]
    except ValueError as e:
        print(f"rank_eval: {e}", file=sys.stderr)
        return 2
    if not rows:
        print(f"rank_eval: {args.records}: no {args.split} records", file=sys.stderr)
        return 2
    ceiling = ceilings(rows)
    if args.labels == "remeasured":
        from looptool.records import remeasure
        rows = remeasure.with_remeasured_labels(rows)
        if not rows:
            print(f"rank_eval: {args.records}: no remeasured {args.split} kernels (python3 -m "
                  "looptool.records remeasure)", file=sys.stderr)
            return 2
    print(json.dumps({"records": args.records, "split": args.split, "labels": args.labels,
                      "kernels": len(rows), **ceiling}))
    for f, cost in models:
        stats, worst = evaluate(cost, rows, args.worst)
        print(json.dumps({"policy": f, **stats, "worst_runs": worst}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
