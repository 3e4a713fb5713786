#!/usr/bin/python3
"""`--search=policy` on layers the server sees for the first time, then again.

    bazel build //client/cpp:looptool //service:looptool-server && \\
    /usr/bin/python3 bench/rl/cold_policy_bench.py --out=cold.json

One fresh server (warmed by one matmul, which pays its one-time FMA peak and memory profile);
then each layer of ResNet-18, MobileNetV2 and BERT-base in turn, tuned twice with
`looptool tune --search=policy` (a separate CLI call each): first cold (the program's first
measurement, which waits for the reference run every kernel is verified against), then warm.
policy_search_bench measures the warm case only (its untrained run pays each program's reference
first). Prints one line per layer and a summary; --out writes the rows as JSON
([uri, cold seconds, timed, GFLOPS, wall, warm seconds, timed, GFLOPS, wall]). --cli and
--server pick the binaries (to compare two builds, run it once with each); --server-flags
passes flags to the server (--prepare_references=false: each reference made at the program's
first measurement, as before the server computed it when a session starts).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time
from typing import List, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "bazel-bin/client/python"), os.path.join(ROOT, "client/python")]

from looptool import errors  # noqa: E402
from looptool.connection import Connection  # noqa: E402
from looptool.server import LocalServer, ServerStartError  # noqa: E402

MODELS = ["resnet18-v0", "mobilenet_v2-v0", "bert_base-v0"]


def tune(cli: str, address: str, uri: str, policy: str) -> Tuple[float, int, float, float]:
    """(the search's seconds, candidates timed, GFLOPS, the CLI call's wall seconds)."""
    started = time.time()
    proc = subprocess.run([cli, "tune", f"--server={address}", f"--benchmark={uri}",
                           "--search=policy", f"--policy={policy}", "--json"],
                          capture_output=True, text=True)
    wall = time.time() - started
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        raise SystemExit(f"looptool tune {uri} failed: {proc.stderr.strip()[-400:]}")
    r = json.loads(lines[0])
    return float(r["seconds"]), int(r["states_evaluated"]), float(r["gflops"]), wall


def geomean(xs: Sequence[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cli", default=os.path.join(ROOT, "bazel-bin/client/cpp/looptool"))
    p.add_argument("--server", default=os.path.join(ROOT, "bazel-bin/service/looptool-server"))
    p.add_argument("--policy", default="loop_set")
    p.add_argument("--sets", default=",".join(MODELS))
    p.add_argument("--budget", type=float, default=0.3,
                   help="the searches' budget, for the summary's count of overruns")
    p.add_argument("--out", default="")
    p.add_argument("--server-flags", default="",
                   help="space-separated flags for the server, e.g. --prepare_references=false")
    args = p.parse_args()
    rows: List[list] = []
    try:  # the server starts here
        server = LocalServer(args.server, flags=args.server_flags.split())
    except ServerStartError as e:
        raise SystemExit(f"--server / --server-flags: {e}") from None
    with server, Connection(server.address) as conn:
        try:
            uris = [u for d in args.sets.split(",") for u in conn.dataset_benchmarks(d)]
        except (ValueError, errors.ServiceError) as e:
            raise SystemExit(f"--sets: {e}") from None
        tune(args.cli, server.address, "benchmark://mm64_256_16_range-v0/mm64_64_64", args.policy)
        for uri in uris:
            cold = tune(args.cli, server.address, uri, args.policy)
            warm = tune(args.cli, server.address, uri, args.policy)
            rows.append([uri, *cold, *warm])
            print(f"{uri}: cold {cold[0]:.3f} s, {cold[1]} timed, {cold[2]:.1f} GFLOPS; "
                  f"warm {warm[0]:.3f} s, {warm[1]} timed, {warm[2]:.1f} GFLOPS", flush=True)
    over = [r for r in rows if r[1] > args.budget + 0.005]
    print(f"{len(over)} of {len(rows)} cold searches past {args.budget} s "
          f"(longest {max(r[1] for r in rows):.3f} s); candidates timed, mean: cold "
          f"{sum(r[2] for r in rows) / len(rows):.1f}, warm {sum(r[6] for r in rows) / len(rows):.1f}; "
          f"cold / warm GFLOPS, geomean {geomean([r[3] / r[7] for r in rows]):.3f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f)


if __name__ == "__main__":
    main()
