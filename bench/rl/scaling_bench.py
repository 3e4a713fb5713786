"""Training throughput against timing cores: the committed policy's records generation, and the
Ape-X DQN trainer's actors.

    export PYTHONPATH=bazel-bin/client/python:client/python
    export LOOPTOOL_SERVER=$PWD/bazel-bin/service/looptool-server
    export LOOPTOOL_CLI=$PWD/bazel-bin/client/cpp/looptool
    /usr/bin/python3 bench/rl/scaling_bench.py --records=1,2,4,8 --programs=32 --seconds=2 \
        [--dqn=1x1,2x2,4x4,8x8] [--dqn-seconds=40] --out=DIR

`--records=N,...`: for each N, N servers, each timing on one CPU of its own, and
`python3 -m looptool.records generate` (the records command of the committed policy,
datasets/policies/loop_set.json, with the same nine kinds) tunes the same `--programs` programs
for `--seconds` each over them into a fresh records file. Reports wall time, programs, kernels
recorded, kernels per second, and the speed-up over the first N as a fraction of linear in timing
cores.

`--dqn=AxT,...`: `python3 -m looptool.rl.train --algo=apex-dqn` for `--dqn-seconds` with A actors
and one server of T timing cores (no evaluations); reports its environment steps per second.

Timing CPUs: one per physical core (SMT siblings are never both timing), from the highest
numbered; this process, the records command, the servers' other threads and the actors run on the
CPUs left, which exclude the timing CPUs' SMT siblings when enough CPUs remain. Writes
scaling.md and scaling.json to --out.
"""

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Sequence, Set, Tuple

from looptool.server import LocalServer

KINDS = "matmul,bmm,conv,depthwise,pool,reduction,gemv,transpose,elementwise"


def siblings(cpu: int) -> Set[int]:
    """The CPUs sharing `cpu`'s physical core (itself included)."""
    path = f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read().strip()
    except OSError:
        return {cpu}
    out: Set[int] = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def plan_cpus(n: int) -> Tuple[List[int], List[int], bool]:
    """(timing CPUs, the others, whether the others include a timing CPU or its SMT sibling)."""
    allowed = sorted(os.sched_getaffinity(0))
    timing: List[int] = []
    taken: Set[int] = set()
    for cpu in reversed(allowed):
        if cpu not in taken:
            timing.append(cpu)
            taken |= siblings(cpu)
        if len(timing) == n:
            break
    if len(timing) < n:
        raise SystemExit(f"scaling_bench: {n} timing cores asked, {len(timing)} physical cores")
    strict = [c for c in allowed if c not in taken]
    if len(strict) >= 2:
        return timing, strict, False
    loose = [c for c in allowed if c not in timing]
    if not loose:  # every CPU times: the rest shares them (not a clean measurement)
        return timing, allowed, True
    return timing, loose, len(strict) < len(loose)


def count_kernels(path: str) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM measurements").fetchone()[0])


def records_run(n: int, args: argparse.Namespace, work: str) -> Dict[str, object]:
    timing, others, shared = plan_cpus(n)
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, others)  # servers and the records command inherit it
    servers: List[LocalServer] = []
    try:
        for i, cpu in enumerate(timing):
            servers.append(LocalServer(flags=[f"--eval_cores={cpu}"], die_with_parent=True,
                                       working_dir=os.path.join(work, f"server{n}_{i}")))
        db = os.path.join(work, f"records{n}.db")
        cmd = [sys.executable, "-m", "looptool.records", "generate", f"--out={db}",
               f"--programs={args.programs}", f"--seed={args.seed}",
               f"--seconds={args.seconds}", f"--kinds={KINDS}", "--models=none",
               f"--chunk={args.programs}", "--servers=" + ",".join(s.address for s in servers)]
        if args.cli:
            cmd.append(f"--cli={args.cli}")
        start = time.monotonic()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - start
        if proc.returncode != 0:
            raise SystemExit(f"scaling_bench: records generate failed:\n{proc.stderr[-2000:]}")
        kernels = count_kernels(db)
    finally:
        for s in servers:
            s.close()
        os.sched_setaffinity(0, saved)
    return {"timing_cores": n, "timing_cpus": timing, "other_cpus": len(others),
            "siblings_shared": shared, "wall_s": round(wall, 2), "programs": args.programs,
            "kernels": kernels, "kernels_per_s": round(kernels / wall, 1),
            "programs_per_s": round(args.programs / wall, 3)}


def dqn_run(actors: int, cores: int, args: argparse.Namespace, work: str) -> Dict[str, object]:
    timing, others, shared = plan_cpus(cores)
    out = os.path.join(work, f"dqn{actors}x{cores}")
    saved = os.sched_getaffinity(0)
    # The trainer takes the last CPUs of its affinity as timing CPUs: give it the others and
    # the chosen timing CPUs, which sort last only when they are the highest numbered.
    os.sched_setaffinity(0, sorted(set(others) | set(timing)))
    try:
        cmd = [sys.executable, "-m", "looptool.rl.train", "--algo=apex-dqn",
               f"--time-limit={args.dqn_seconds}", f"--actors={actors}",
               f"--timing-cores={cores}", f"--seed={args.seed}", f"--out={out}",
               "--eval-every=1e9", "--final-test-count=0", "--final-offgrid-count=0",
               "--no-progress", "--checkpoint-every=1e9"]
        start = time.monotonic()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - start
    finally:
        os.sched_setaffinity(0, saved)
    if proc.returncode != 0:
        raise SystemExit(f"scaling_bench: train failed:\n{proc.stderr[-3000:]}")
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    steps = int(summary.get("env_steps", 0))
    seconds = float(summary.get("training_seconds", args.dqn_seconds))
    return {"actors": actors, "timing_cores": cores, "siblings_shared": shared,
            "steps": steps, "train_s": round(seconds, 1), "wall_s": round(wall, 1),
            "steps_per_s": round(steps / seconds, 1) if seconds > 0 else 0.0,
            "updates": summary.get("updates")}


def table(rows: Sequence[Dict[str, object]], key: str, cores_key: str = "timing_cores") -> None:
    base = rows[0]
    for r in rows:
        speedup = float(r[key]) / float(base[key]) if float(base[key]) > 0 else 0.0
        r["speedup"] = round(speedup, 2)
        r["of_linear"] = round(speedup / (int(r[cores_key]) / int(base[cores_key])), 2)


def main(argv: Sequence[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", default="1,2", help="timing cores of each records run")
    p.add_argument("--programs", type=int, default=32)
    p.add_argument("--seconds", type=float, default=2.0)
    p.add_argument("--seed", type=int, default=5)
    p.add_argument("--cli", default="")
    p.add_argument("--dqn", default="", help="AxT,...: actors x timing cores of each DQN run")
    p.add_argument("--dqn-seconds", type=float, default=40.0)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    try:
        record_cores = [int(x) for x in args.records.split(",") if x]
        dqn_specs = [tuple(int(v) for v in x.split("x")) for x in args.dqn.split(",") if x]
    except ValueError:
        p.error("--records takes N,... and --dqn AxT,... (positive integers)")
    if any(n < 1 for n in record_cores) or any(len(t) != 2 or min(t) < 1 for t in dqn_specs):
        p.error("--records takes N,... and --dqn AxT,... (positive integers)")
    if args.programs < 1 or args.seconds <= 0 or args.dqn_seconds <= 0:
        p.error("--programs must be >= 1, --seconds and --dqn-seconds > 0")
    os.makedirs(args.out, exist_ok=True)
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f
                        if line.startswith("model name")), "")
    except OSError:
        pass
    report: Dict[str, object] = {"cpu": cpu, "cpus": len(os.sched_getaffinity(0)),
                                 "records": [], "dqn": []}
    with tempfile.TemporaryDirectory(prefix="looptool-scaling-") as work:
        records: List[Dict[str, object]] = []
        for n in record_cores:
            records.append(records_run(n, args, work))
            print(json.dumps(records[-1]), flush=True)
        if records:
            table(records, "kernels_per_s")
        report["records"] = records
        dqn: List[Dict[str, object]] = []
        for a, t in dqn_specs:
            dqn.append(dqn_run(a, t, args, work))
            print(json.dumps(dqn[-1]), flush=True)
        if dqn:
            table(dqn, "steps_per_s")
        report["dqn"] = dqn
    with open(os.path.join(args.out, "scaling.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    lines = [f"# Training throughput against timing cores ({cpu}, {report['cpus']} CPUs)", ""]
    if records:
        lines += [f"records generate: {args.programs} programs x {args.seconds} s "
                  f"(seed {args.seed}, kinds {KINDS})", "",
                  "| timing cores | other CPUs | wall s | kernels | kernels/s | speed-up | "
                  "of linear |", "|---:|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['timing_cores']} | {r['other_cpus']}"
                  f"{' (shared)' if r['siblings_shared'] else ''} | {r['wall_s']} | "
                  f"{r['kernels']} | {r['kernels_per_s']} | {r['speedup']}x | "
                  f"{r['of_linear']} |" for r in records]
        lines.append("")
    if dqn:
        lines += [f"apex-dqn, {args.dqn_seconds} s each", "",
                  "| actors | timing cores | steps | steps/s | speed-up | of linear |",
                  "|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {r['actors']} | {r['timing_cores']} | {r['steps']} | "
                  f"{r['steps_per_s']} | {r['speedup']}x | {r['of_linear']} |" for r in dqn]
    with open(os.path.join(args.out, "scaling.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
