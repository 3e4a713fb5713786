"""schedule_ab: the same schedules timed by two `looptool` CLI binaries, interleaved. A check that
a code-generator change made the kernels it changes faster, on any program (sketch_speed.py does
the same for ResNet-18's convolutions through servers).

    /usr/bin/python3 bench/codegen/schedule_ab.py OLD_CLI NEW_CLI PROGRAM_FILE [ACTIONS ...]
        [--rounds=7] [--action-space=loop_nest] [--isa=auto]

ACTIONS: comma-separated action names, or - for the program's start state (the default). Each
round runs `looptool eval` (a fresh embedded server, so no kernel cache answers for the other
binary) with OLD, then NEW; per schedule the best and the median of the rounds of each binary,
and new / old of the bests.
"""
import argparse
import json
import statistics
import subprocess
import sys
from typing import List


def gflops(cli: str, program: str, actions: str, space: str, isa: str) -> float:
    command = [cli, "eval", f"--benchmark={program}", f"--action_space={space}", f"--isa={isa}",
               "--json"]
    if actions != "-":
        command.append(f"--actions={actions}")
    p = subprocess.run(command, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"schedule_ab: {cli} eval failed: {p.stderr.strip()}")
    return float(json.loads(p.stdout)["gflops"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("program")
    parser.add_argument("actions", nargs="*", default=["-"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--action-space", default="loop_nest")
    parser.add_argument("--isa", default="auto")
    args = parser.parse_args()
    if not 1 <= args.rounds <= 100:
        parser.error("--rounds: 1..100")
    print("| schedule | old best | new best | new / old | old median | new median |")
    print("|---|---:|---:|---:|---:|---:|")
    for actions in args.actions or ["-"]:
        old: List[float] = []
        new: List[float] = []
        for _ in range(args.rounds):
            old.append(gflops(args.old, args.program, actions, args.action_space, args.isa))
            new.append(gflops(args.new, args.program, actions, args.action_space, args.isa))
        name = "start" if actions == "-" else f"`{actions}`"
        print(f"| {name} | {max(old):.2f} | {max(new):.2f} | {max(new) / max(old):.3f} | "
              f"{statistics.median(old):.2f} | {statistics.median(new):.2f} |", flush=True)


if __name__ == "__main__":
    main()
