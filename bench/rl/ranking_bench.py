"""ranking_bench: how well a loop_set policy's cost model picks among its likeliest episodes, and
the loss_weight its file should carry, measured on programs it never trained on.

    bazel build //service:looptool-server && /usr/bin/python3 bench/rl/ranking_bench.py \\
        --policy=loop_set.json --records=records.db [--split=validation] [--count=16]

For each program of the records' --split (the fastest record's program), on one server: the
policy's --count likeliest episodes (looptool.rl.episodes.likely_episodes), each final state's
plan_features and GFLOPS (every one timed here, unlike the searches). Then, for episode budgets
n and weights w, the kernel `--search=policy` would choose (the first n episodes' best
cost - w * loss) over the best of all --count episodes: the geomean, minimum and count below 0.8
per (n, w). Writes ranking_bench.md and the episodes (ranking_bench.jsonl) under --out.
"""
import argparse
import datetime
import json
import math
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "bazel-bin/client/python"), os.path.join(ROOT, "client/python")]

from looptool import Connection, LocalServer, LoopToolEnv  # noqa: E402
from looptool.errors import ServiceError  # noqa: E402
from looptool.rl import episodes, imitate, loop_set, report  # noqa: E402


def collect(server_binary: str, policy: loop_set.LoopSetPolicy, records: str, split: str,
            count: int, limit: int) -> List[Dict[str, Any]]:
    out = []
    demos = imitate.best_demos(records, split, 1)[:limit]
    with LocalServer(server_binary) as server, Connection(server.address) as conn, \
            LoopToolEnv(conn, action_space="loop_nest", observation_space=None,
                        reward_space=None) as env:
        for n, d in enumerate(demos):
            uri = f"benchmark://user-v0/records_{d.program_id}"
            rows = []
            for e in episodes.likely_episodes(env, uri, d.program, policy, count):
                try:
                    f = json.loads(str(e.env.observe(["plan_features"])["plan_features"]))
                    g = float(e.env.observe(["flops"])["flops"])
                except ServiceError:
                    f, g = {}, 0.0
                finally:
                    e.env.close()
                rows.append({"actions": e.actions, "loss": e.loss, "features": f, "gflops": g})
            out.append({"program_id": d.program_id, "rows": rows})
            print(f"{n + 1}/{len(demos)} program {d.program_id}: {len(rows)} episodes, best "
                  f"{max(r['gflops'] for r in rows):.1f} GFLOPS", file=sys.stderr)
    return out


def choose(policy: loop_set.LoopSetPolicy, rows: Sequence[Dict[str, Any]], n: int,
           weight: float) -> Dict[str, Any]:
    """What --search=policy with n candidates and this loss_weight picks (the first on ties)."""
    rows = list(rows[:n])
    if policy.cost is None or len(rows) == 1:
        return rows[0]
    score = policy.cost.predict([r["features"] for r in rows]) - weight * np.array(
        [r["loss"] for r in rows])
    score = np.where([bool(r["features"]) for r in rows], score, -np.inf)
    return rows[int(np.argmax(score))]


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy", required=True)
    p.add_argument("--records", required=True)
    p.add_argument("--split", default="validation")
    p.add_argument("--count", type=int, default=16)
    p.add_argument("--programs", type=int, default=1000)
    p.add_argument("--weights", default="0,0.1,0.3,0.5,0.75,1,1.5,2")
    p.add_argument("--server", default=os.path.join(ROOT, "bazel-bin/service/looptool-server"))
    p.add_argument("--out", default=os.path.join(ROOT, "bench/results/rl"))
    p.add_argument("--name", default="ranking_bench")
    args = p.parse_args(argv)
    policy = loop_set.load(args.policy)
    data = collect(args.server, policy, args.records, args.split, args.count, args.programs)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, args.name + ".jsonl"), "w") as f:
        f.writelines(json.dumps(x) + "\n" for x in data)
    lines = [f"# {args.name}", "",
             f"{datetime.date.today()}, {os.uname().nodename}; policy `{args.policy}` "
             f"(loss_weight in the file: {policy.cost.loss_weight if policy.cost else 'none'}); "
             f"{len(data)} {args.split} programs of `{os.path.basename(args.records)}`; each "
             f"program's {args.count} likeliest episodes all timed. A cell: the kernel "
             f"`--search=policy` would pick from the first n episodes (its cost model's score "
             f"minus w x the episode's loss) over the best of all {args.count}: geomean (min, "
             f"programs below 0.8).", "",
             "| n \\ w | " + " | ".join(args.weights.split(",")) + " |",
             "|---|" + "---:|" * len(args.weights.split(","))]
    budgets = sorted({1, 4, 8, args.count})
    for n in budgets:
        cells = []
        for w in (float(x) for x in args.weights.split(",")):
            ratios = []
            for prog in data:
                best = max(r["gflops"] for r in prog["rows"])
                if best > 0:
                    ratios.append(max(choose(policy, prog["rows"], n, w)["gflops"], 1e-3) / best)
            r = np.array(ratios)
            cells.append(f"{math.exp(np.mean(np.log(r))):.3f} ({r.min():.2f}, {(r < 0.8).sum()})")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    report.write_markdown(os.path.join(args.out, args.name + ".md"), lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
