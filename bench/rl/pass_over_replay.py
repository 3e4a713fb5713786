"""pass_over_replay: replays the --search=policy runs of a tuning-records file (`looptool tune
--search=policy --records=FILE`) to ask what passing over candidates predicted slower would
have cost: for each margin, how many of the runs' timings (and how much of their time) a
candidate scored that far below the fastest timed before it would have skipped, and whether any
run's fastest kernel would have been among them (its kept fastest over its fastest, geomean and
the worst). Scores are the policy's cost model on the recorded plan_features (its loss term
left out: the records do not keep an episode's likelihood).

    /usr/bin/python3 bench/rl/pass_over_replay.py RECORDS.db [--policy=POLICY.json]
"""
import argparse
import json
import math
import os
import sqlite3
import sys
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "bazel-bin/client/python"), os.path.join(ROOT, "client/python")]
from looptool.rl import loop_set  # noqa: E402

MARGINS = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0)


def runs(path: str, policy: loop_set.LoopSetPolicy) -> Dict[str, List[Tuple[float, float, float]]]:
    """{benchmark: [(GFLOPS, score, seconds into the search)]} per policy run, in timing order."""
    db = sqlite3.connect(path)
    out: Dict[str, List[Tuple[float, float, float]]] = {}
    for run_id, benchmark in db.execute("SELECT id, benchmark FROM runs WHERE search = 'policy'"):
        rows = []
        for g, rg, f, sec in db.execute(
                "SELECT gflops, COALESCE(retimed_gflops, gflops), plan_features, seconds "
                "FROM measurements WHERE run_id = ? ORDER BY id", (run_id,)):
            score = float(policy.cost.predict([json.loads(f)])[0]) if f else -math.inf
            rows.append((max(g, rg), score, sec))
        if rows:
            out[f"{benchmark}#{run_id}"] = rows
    return out


def replay(rows: Sequence[Tuple[float, float, float]], margin: float) -> Tuple[float, int, float]:
    """(the fastest kept, timings passed over, their seconds) for one run at `margin`."""
    best: Optional[Tuple[float, float]] = None
    passed, passed_seconds, before = 0, 0.0, 0.0
    for g, score, sec in rows:
        took, before = sec - before, sec
        if best is not None and score < best[1] - margin:
            passed += 1
            passed_seconds += took
            continue
        if best is None or g > best[0]:
            best = (g, score)
    assert best is not None
    return best[0], passed, passed_seconds


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("records")
    p.add_argument("--policy", default=os.path.join(ROOT, "datasets/policies/loop_set.json"),
                   help="a loop_set policy file with a cost model (default: the committed one)")
    a = p.parse_args(argv)
    policy = loop_set.load(a.policy)
    if policy.cost is None:
        raise SystemExit(f"{a.policy} has no cost model")
    data = runs(a.records, policy)
    if not data:
        raise SystemExit(f"{a.records} holds no --search=policy run")
    timings = sum(len(r) for r in data.values())
    seconds = sum(r[-1][2] for r in data.values())
    print(f"{len(data)} runs, {timings} timings, {seconds:.2f} s")
    print("| margin | timings passed over | their seconds | kept fastest / fastest, geomean "
          "| worst |")
    print("|---:|---:|---:|---:|---:|")
    for m in MARGINS:
        kept, passed, passed_s = [], 0, 0.0
        for rows in data.values():
            best, n, s = replay(rows, m)
            kept.append(best / max(g for g, _, _ in rows))
            passed += n
            passed_s += s
        geo = math.exp(sum(math.log(k) for k in kept) / len(kept))
        print(f"| {m} | {passed} ({100 * passed / timings:.0f}%) | {passed_s:.2f} | {geo:.4f} | "
              f"{min(kept):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
