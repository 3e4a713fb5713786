"""server_ab: the same `looptool tune` (default search) of the same programs against two server
binaries, several runs, each run on a fresh pair of servers. A check of a server-side change to
what a search can do in its time (how many states it evaluates, the kernels it ends with) and of
how much its results spread from run to run.

    /usr/bin/python3 bench/search_ab/server_ab.py OLD_SERVER NEW_SERVER \\
        --benchmarks=bert_base-v0/linear_128x768x768,... [--cli=bazel-bin/client/cpp/looptool] \\
        [--runs=3] [--time-limit=10] [--out=FILE.json]

Within a run both servers are up (their kernel workers share one core; one tunes at a time) and
each program is tuned on both, one right after the other, the side that goes first alternating
from program to program and from run to run. GFLOPS are each tune's own final measurement (its
search's re-timed best), not re-timed side by side: the host's speed drifts from run to run, so
compare sides within a run. Prints a Markdown table: GFLOPS per run, each side's spread over the
runs ((max - min) / max), new / old of the means, states evaluated (means); and the geomean.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from typing import Dict, List, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start(binary: str, port: int, cli: str) -> "subprocess.Popen[bytes]":
    """A server on 127.0.0.1:`port`, once it answers."""
    p = subprocess.Popen([binary, f"--port={port}"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    for _ in range(300):
        r = subprocess.run([cli, "benchmarks", f"--server=127.0.0.1:{port}",
                            "--dataset=bert_base-v0"], capture_output=True)
        if r.returncode == 0:
            return p
        if p.poll() is not None:
            raise RuntimeError(f"{binary} exited with {p.returncode} (port {port} taken?)")
        time.sleep(0.1)
    p.terminate()
    raise RuntimeError(f"{binary} did not answer on port {port}")


def main(argv: Sequence[str] = ()) -> int:
    a = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    a.add_argument("old")
    a.add_argument("new")
    a.add_argument("--benchmarks", required=True, help="dataset/name,... (benchmark:// added)")
    a.add_argument("--cli", default=os.path.join(ROOT, "bazel-bin/client/cpp/looptool"))
    a.add_argument("--runs", type=int, default=3)
    a.add_argument("--time-limit", type=float, default=10)
    a.add_argument("--port", type=int, default=50161, help="the first of 2 x runs ports")
    a.add_argument("--out", default="", help="the readings as JSON")
    args = a.parse_args(list(argv) or None)
    benches = [b for b in args.benchmarks.split(",") if b]
    if args.runs < 1 or not benches:
        a.error("need one run and one benchmark at least")
    got: Dict[str, Dict[str, List[float]]] = {
        b: {"old": [], "new": [], "old_states": [], "new_states": []} for b in benches}
    for run in range(args.runs):
        ports = {"old": args.port + 2 * run, "new": args.port + 2 * run + 1}
        servers = {side: start(getattr(args, side), ports[side], args.cli) for side in ports}
        try:
            for i, b in enumerate(benches):
                for side in (("old", "new") if (i + run) % 2 == 0 else ("new", "old")):
                    r = subprocess.run(
                        [args.cli, "tune", f"--server=127.0.0.1:{ports[side]}",
                         f"--benchmark=benchmark://{b}", f"--time_limit={args.time_limit}",
                         "--json"], capture_output=True, text=True)
                    if r.returncode != 0:
                        raise RuntimeError(f"{side} {b}: {r.stderr.strip()[-500:]}")
                    j = json.loads(r.stdout)
                    got[b][side].append(float(j["gflops"]))
                    got[b][side + "_states"].append(float(j.get("states_evaluated", 0)))
                print(f"run {run + 1} {b}: old {got[b]['old'][-1]:.1f} new {got[b]['new'][-1]:.1f}"
                      f" GFLOPS, states {got[b]['old_states'][-1]:.0f} / "
                      f"{got[b]['new_states'][-1]:.0f}", file=sys.stderr, flush=True)
        finally:
            for p in servers.values():
                p.terminate()
                p.wait()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(got, f, indent=1)
    print("| program | old GFLOPS per run | new GFLOPS per run | old spread | new spread "
          "| new / old (means) | states old / new (means) |")
    print("|---|---|---|---:|---:|---:|---:|")
    ratios = []
    for b in benches:
        o, n = got[b]["old"], got[b]["new"]
        ratio = statistics.mean(n) / statistics.mean(o)
        ratios.append(ratio)
        print(f"| {b} | {', '.join(f'{x:.1f}' for x in o)} | {', '.join(f'{x:.1f}' for x in n)} "
              f"| {(max(o) - min(o)) / max(o):.1%} | {(max(n) - min(n)) / max(n):.1%} "
              f"| {ratio:.3f} | {statistics.mean(got[b]['old_states']):.0f} / "
              f"{statistics.mean(got[b]['new_states']):.0f} |")
    print(f"\nnew / old, geomean over {len(ratios)}: "
          f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
