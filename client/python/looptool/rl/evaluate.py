"""Greedy evaluation of a policy: one episode per benchmark, the final state's GFLOPS.

    PYTHONPATH=bazel-bin/client/python:client/python /usr/bin/python3 -m looptool.rl.evaluate \
        --policy=datasets/policies/sketch_value.json --servers=127.0.0.1:PORT

The benchmarks are the dataset's test split and the off-grid matmuls, as the first server lists
them. Each benchmark goes to its routed server (cluster.route). The table gives, per benchmark, the
start and final GFLOPS (the server's measurements), the fraction of the peak and the actions.
"""

import argparse
import math
import sys
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from looptool.connection import Connection
from looptool.rl import benchmarks as benchmarks_lib
from looptool.rl import cluster
from looptool.rl import policy_file
from looptool.rl import rollout

Sets = List[Tuple[str, benchmarks_lib.Benchmark]]
"""(set name: "test" or "offgrid", benchmark) pairs."""


def evaluate(connections: Mapping[str, Connection], benchmarks: Sets,
             policy: policy_file.Policy, max_steps: int = 10) -> List[Dict[str, Any]]:
    """Rows {benchmark, set, start_gflops, gflops, peak, fraction_of_peak, speedup, seconds,
    actions} for each benchmark whose episode finished; failures raise."""
    servers = list(connections)
    rows = []
    names = policy_file_action_names(connections[servers[0]], policy)
    for which, bench in benchmarks:
        conn = connections[cluster.route(bench, servers)]
        start = time.perf_counter()
        e = rollout.run_one(conn, bench, policy, "greedy", 0.0, max_steps)
        rows.append({
            "benchmark": benchmarks_lib.name_of(bench), "set": which,
            "start_gflops": float(e.gflops[0]), "gflops": e.final_gflops, "peak": e.peak,
            "fraction_of_peak": e.final_gflops / e.peak,
            "speedup": e.final_gflops / max(e.gflops[0], 1e-9),
            "seconds": time.perf_counter() - start,
            "actions": " ".join(names[a] for a in e.actions),
        })
    return rows


def policy_file_action_names(connection: Connection,
                             policy: policy_file.Policy) -> Tuple[str, ...]:
    return connection.spaces().action_space(policy.action_space).names


def geomean(values: Iterable[float]) -> float:
    values = [v for v in values if v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def default_sets(service: benchmarks_lib.Service, test_count: int = 25,
                 offgrid_count: int = 12, dataset: str = benchmarks_lib.DATASET) -> Sets:
    """The final evaluation's benchmarks, as `service` lists them: `test_count` of the
    dataset's test split and the first `offgrid_count` off-grid matmuls."""
    return ([("test", b) for b in benchmarks_lib.test_benchmarks(service, test_count, dataset)]
            + [("offgrid", b) for b in benchmarks_lib.offgrid_benchmarks(service, offgrid_count)])


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--policy", required=True)
    parser.add_argument("--servers", default="", help="HOST:PORT,...; default: start one")
    parser.add_argument("--test-count", type=int, default=25)
    parser.add_argument("--offgrid-count", type=int, default=12)
    parser.add_argument("--max-steps", type=int, default=10)
    args = parser.parse_args(argv)
    policy = policy_file.Policy.load(args.policy)
    with cluster.Servers([s for s in args.servers.split(",") if s]) as servers:
        connections = {a: Connection(a) for a in servers.addresses}
        sets = default_sets(connections[servers.addresses[0]], args.test_count,
                            args.offgrid_count)
        rows = evaluate(connections, sets, policy, args.max_steps)
        for r in rows:
            print(f"{r['set']:8} {r['benchmark']:16} {r['start_gflops']:7.1f} -> "
                  f"{r['gflops']:7.1f} GFLOPS ({100 * r['fraction_of_peak']:5.1f}% of peak) "
                  f"{r['seconds']:.2f} s  {r['actions']}")
        for which in ("test", "offgrid"):
            sel = [r for r in rows if r["set"] == which]
            if sel:
                print(f"{which}: geomean {geomean([r['fraction_of_peak'] for r in sel]):.3f} of "
                      f"peak, {geomean([r['speedup'] for r in sel]):.2f}x the start")
    return 0


if __name__ == "__main__":
    sys.exit(main())
