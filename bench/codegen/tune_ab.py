"""tune_ab: the same programs tuned by two server binaries, in turn. A check that a code-generator
change makes the kernels the searches find faster (sketch_speed.py and schedule_ab.py time fixed
schedules; a change that helps only schedules the searches reach, such as a block's tail, shows
here).

    /usr/bin/python3 bench/codegen/tune_ab.py OLD_SERVER NEW_SERVER PROGRAM_FILE ...
        [--isa=avx2] [--time-limit=10] [--rounds=2] [--out=FILE.md]

Each round starts a fresh server of OLD, tunes every program (`looptool tune --server`, the
default search, --time-limit seconds; the result re-timed as the CLI reports it), stops it, then
the same with NEW. Per program the best and every round's GFLOPS of each binary and new / old of
the bests; the geomean of those ratios.
"""
import argparse
import json
import os
import subprocess
import sys
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "bazel-bin/client/python"), os.path.join(ROOT, "client/python")]

from ab_report import finish  # noqa: E402
from looptool.server import LocalServer, ServerStartError, default_cli  # noqa: E402


def tuned(server: str, isa: str, programs: List[str], seconds: float) -> Dict[str, float]:
    """GFLOPS of each program's tuned kernel on a fresh server of `server`."""
    out: Dict[str, float] = {}
    try:
        srv = LocalServer(server, flags=[f"--isa={isa}"])
    except (ServerStartError, OSError) as e:
        sys.exit(f"tune_ab: the server {server} did not start: {e}")
    with srv:
        for path in programs:
            p = subprocess.run([default_cli(), "tune", f"--server={srv.address}",
                                f"--benchmark={path}", f"--time_limit={seconds}", "--json"],
                               capture_output=True, text=True, check=False)
            if p.returncode != 0:
                sys.exit(f"tune_ab: tuning {path} on {server} failed: {p.stderr.strip()}")
            out[path] = float(json.loads(p.stdout)["gflops"])
    return out


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
    args = p.parse_args()
    got: Dict[str, Dict[str, List[float]]] = {"old": {}, "new": {}}
    for _ in range(args.rounds):
        for which, binary in (("old", args.old), ("new", args.new)):
            for path, gflops in tuned(binary, args.isa, args.programs, args.time_limit).items():
                got[which].setdefault(path, []).append(gflops)
    lines = [f"`bench/codegen/tune_ab.py OLD NEW ... --isa={args.isa} "
             f"--time-limit={args.time_limit:g} --rounds={args.rounds}`: each program tuned by "
             "a fresh server of each binary in turn; GFLOPS of the tuned kernels.", "",
             "| program | old, per round | new, per round | best new / best old |",
             "|---|---|---|---:|"]
    ratios = []
    for path in args.programs:
        old, new = got["old"][path], got["new"][path]
        ratios.append(max(new) / max(old))
        name = os.path.splitext(os.path.basename(path))[0]
        lines.append(f"| {name} | {', '.join(f'{x:.1f}' for x in old)} | "
                     f"{', '.join(f'{x:.1f}' for x in new)} | {ratios[-1]:.3f} |")
    finish(lines, ratios, "best new / best old", args.out)

if __name__ == "__main__":
    main()
