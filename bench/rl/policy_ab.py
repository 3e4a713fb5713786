"""policy_ab: two client binaries' `looptool tune --search=policy` (or another search) on the same
programs, each against its own server, in turn. A check that a change to a search's client side (its
candidates, ranking or timing) makes its final kernels faster; policy_search_bench.py compares a
policy with the 10 s search instead.

    /usr/bin/python3 bench/rl/policy_ab.py OLD_CLI NEW_CLI [--sets=resnet18-v0,catalog,...]
        [--search=policy] [--policy=loop_set] [--seconds=...] [--rounds=3] [--out=FILE.md]
        [--server=NEW_SERVER] [--old-server=OLD_SERVER]

Two servers run throughout, one per client binary (each caches the first measurement of every
kernel: a client tuning second on a shared server would read the first's numbers, and time more
candidates in its budget; their kernel workers share one core, one tunes at a time). Both are
--server's binary unless --old-server names the old side's: a check of a change to what the server
serves a search (its plan features, say; the re-timings below compile both sides' actions on the
new server). Each program is tuned by both binaries, one right after the other, the binary that
goes first alternating from program to program (the host's speed drifts over minutes). Then both
final kernels are re-timed side by side (`looptool eval` of each one's actions by the new binary,
--rounds interleaved rounds of --retime-seconds, the order rotated each round, the fastest of each
kept; a kernel both found is timed once a round): the ratio per program is new / old of those
re-timings, and each binary's own measurement (its search's GFLOPS) is listed beside them. Sets as
policy_search_bench's. Every program is new to both servers when its two tunings run, so
`--sets=dir:bench/rl/programs/large_memory` checks a search's first call on programs no server
has seen (its reference run and first timings unpaid); `--server-flags=--isa=avx2` for AVX2.
"""
import argparse
import datetime
import math
import os
import sys
from typing import Dict, List, Sequence

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(ROOT, "bazel-bin/client/python"), os.path.join(ROOT, "client/python")]

from looptool.connection import Connection  # noqa: E402
from looptool.server import LocalServer  # noqa: E402
from policy_search_bench import MODELS, benchmark_sets, geomean, retime_finals, tune  # noqa: E402


def main(argv: Sequence[str] = ()) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("--sets", default="test,offgrid," + ",".join(MODELS) + ",catalog")
    p.add_argument("--search", default="policy")
    p.add_argument("--policy", default="loop_set")
    p.add_argument("--seconds", type=float, default=1.0,
                   help="--time_limit of each tune call (policy: its own budget, "
                        "--policy_seconds, applies within it)")
    p.add_argument("--catalog-count", type=int, default=4)
    p.add_argument("--offgrid-count", type=int, default=12)
    p.add_argument("--server", default=os.path.join(ROOT, "bazel-bin/service/looptool-server"))
    p.add_argument("--old-server", default="",
                   help="the old side's server binary (default: --server's), to check a "
                        "change to what the server serves a search (its plan features, say)")
    p.add_argument("--server-flags", default="",
                   help="flags of both servers, space-separated (--isa=avx2, say)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--retime-seconds", type=float, default=0.2)
    p.add_argument("--out", default="")
    args = p.parse_args(list(argv) or None)
    old_server = args.old_server or args.server
    flags = args.server_flags.split()
    with LocalServer(args.server, flags=flags) as srv, \
            LocalServer(old_server, flags=flags) as old_srv:
        with Connection(srv.address) as conn:
            programs = benchmark_sets(conn, args.sets.split(","), args.catalog_count,
                                      args.offgrid_count)
        finals: Dict[str, Dict[str, Dict[str, object]]] = {"old": {}, "new": {}}
        for i, (_, uri) in enumerate(programs):
            order = ["old", "new"] if i % 2 == 0 else ["new", "old"]
            for kind in order:
                cli, address = ((args.old, old_srv.address) if kind == "old"
                                else (args.new, srv.address))
                finals[kind].update(tune(cli, address, [uri], args.search, args.seconds,
                                         args.policy))
            print(f"{uri}: old {finals['old'][uri].get('gflops', 0):.1f} "
                  f"new {finals['new'][uri].get('gflops', 0):.1f}", flush=True)
        uris = [u for _, u in programs]
        again = retime_finals(args.new, srv.address, uris, finals, args.rounds,
                              args.retime_seconds)
    lines = [f"# policy_ab: `--search={args.search}`, two client binaries\n",
             f"{datetime.date.today()}; old `{args.old}` on server `{old_server}`, new "
             f"`{args.new}` on `{args.server}`"
             + (f" (both `{args.server_flags}`)" if flags else "")
             + f"; `--time_limit={args.seconds}`, policy "
             f"`{args.policy}`; "
             f"finals re-timed side by side ({args.rounds} rounds of {args.retime_seconds} s, "
             "the fastest kept).\n",
             "| set | benchmark | old GFLOPS (its search's) | new (its search's) | old re-timed | "
             "new re-timed | new / old | old actions | new actions |",
             "|---|---|---:|---:|---:|---:|---:|---|---|"]
    by_set: Dict[str, List[float]] = {}
    for set_name, uri in programs:
        o, n = finals["old"][uri], finals["new"][uri]
        ro, rn = again["old"].get(uri, 0.0), again["new"].get(uri, 0.0)
        ratio = rn / ro if ro > 0 and rn > 0 else float("nan")
        if not math.isnan(ratio):
            by_set.setdefault(set_name, []).append(ratio)
        lines.append(f"| {set_name} | {uri.split('/')[-1]} | {float(o.get('gflops', 0)):.1f} | "
                     f"{float(n.get('gflops', 0)):.1f} | {ro:.1f} | {rn:.1f} | {ratio:.3f} | "
                     f"{' '.join(o.get('actions', []))} | "  # type: ignore
                     f"{' '.join(n.get('actions', []))} |")  # type: ignore
    lines += ["", "| set | programs | new / old re-timed, geomean | min | max |",
              "|---|---:|---:|---:|---:|"]
    every: List[float] = []
    for set_name, ratios in by_set.items():
        every += ratios
        lines.append(f"| {set_name} | {len(ratios)} | {geomean(ratios):.3f} | "
                     f"{min(ratios):.3f} | {max(ratios):.3f} |")
    if every:
        lines.append(f"| all | {len(every)} | {geomean(every):.3f} | {min(every):.3f} | "
                     f"{max(every):.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
