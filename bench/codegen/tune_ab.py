"""tune_ab: the same programs tuned by two server binaries, in turn. A check that a code-generator
change makes the kernels the searches find faster (sketch_speed.py and schedule_ab.py time fixed
schedules; a change that helps only schedules the searches reach, such as a block's tail, shows
here).

    /usr/bin/python3 bench/codegen/tune_ab.py OLD_SERVER NEW_SERVER PROGRAM_FILE_OR_URI ...
        [--isa=avx2] [--time-limit=10] [--rounds=2] [--out=FILE.md]
        [--old-flags="--flag=value ..."] [--new-flags=...]

OLD and NEW may be one binary started with different flags (--new-flags="--stream_stores_min_bytes=1"
compares a code-generator option).

One server of each binary runs throughout (each with its kernel worker on the same core; one
tunes at a time). For every program and round both tune it (`looptool tune --server`, the
default search, --time-limit seconds; the result re-timed as the CLI reports it, with the FMA
peak measured beside the re-timing), one right after the other, the binary that goes first
alternating from program to program and round to round: the host's clock drifts over minutes
(the boost clock falls under sustained load), so a binary that always went first, or tuned all
programs before the other did, would be compared at another clock. The ratio per program is
new / old of the best round's percent of peak (the clock divided out), with the GFLOPS beside
it; the geomean of those ratios closes the table.
"""
import argparse
import json
import os
import subprocess
import sys
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "bazel-bin/client/python"), os.path.join(ROOT, "client/python")]

from ab_report import finish  # noqa: E402
from looptool.server import LocalServer, ServerStartError, default_cli  # noqa: E402


def start(server: str, isa: str, flags: List[str]) -> LocalServer:
    try:
        return LocalServer(server, flags=[f"--isa={isa}"] + flags)
    except (ServerStartError, OSError) as e:
        sys.exit(f"tune_ab: the server {server} did not start: {e}")


def tuned(srv: LocalServer, path: str, seconds: float) -> Tuple[float, float]:
    """(GFLOPS, percent of the peak measured beside it) of `path`'s tuned kernel on `srv`."""
    p = subprocess.run([default_cli(), "tune", f"--server={srv.address}", f"--benchmark={path}",
                        f"--time_limit={seconds}", "--json"],
                       capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"tune_ab: tuning {path} on {srv.address} failed: {p.stderr.strip()}")
    result = json.loads(p.stdout.splitlines()[0])
    return float(result["gflops"]), float(result["percent_of_peak"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("programs", nargs="+")
    p.add_argument("--isa", default="avx2")
    p.add_argument("--time-limit", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", default="")
    p.add_argument("--old-flags", default="", help="more flags for the old server")
    p.add_argument("--new-flags", default="", help="more flags for the new server")
    args = p.parse_args()
    got: Dict[str, Dict[str, List[Tuple[float, float]]]] = {"old": {}, "new": {}}
    with start(args.old, args.isa, args.old_flags.split()) as old_srv, \
            start(args.new, args.isa, args.new_flags.split()) as new_srv:
        servers = {"old": old_srv, "new": new_srv}
        for r in range(args.rounds):
            for i, path in enumerate(args.programs):
                order = ("old", "new") if (r + i) % 2 == 0 else ("new", "old")
                for which in order:
                    got[which].setdefault(path, []).append(
                        tuned(servers[which], path, args.time_limit))
                print(f"round {r + 1} {path}: old {got['old'][path][-1][0]:.1f} new "
                      f"{got['new'][path][-1][0]:.1f} GFLOPS", file=sys.stderr)
    flags = "".join(f" --{k}-flags='{v}'" for k, v in (("old", args.old_flags),
                                                       ("new", args.new_flags)) if v)
    lines = [f"`bench/codegen/tune_ab.py OLD NEW ... --isa={args.isa} "
             f"--time-limit={args.time_limit:g} --rounds={args.rounds}{flags}`: each program tuned by "
             "a server of each binary, one right after the other, the first alternating; "
             "GFLOPS (% of the peak measured beside it) of the tuned kernels.", "",
             "| program | old, per round | new, per round | best new / best old (% of peak) "
             "| GFLOPS |", "|---|---|---|---:|---:|"]
    ratios = []
    for path in args.programs:
        old, new = got["old"][path], got["new"][path]
        ratios.append(max(x[1] for x in new) / max(x[1] for x in old))
        name = os.path.splitext(os.path.basename(path))[0]
        cell = lambda runs: ", ".join(f"{g:.1f} ({pct:.1f}%)" for g, pct in runs)  # noqa: E731
        lines.append(f"| {name} | {cell(old)} | {cell(new)} | {ratios[-1]:.3f} | "
                     f"{max(x[0] for x in new) / max(x[0] for x in old):.3f} |")
    finish(lines, ratios, "best new / best old (% of peak)", args.out)


if __name__ == "__main__":
    main()
