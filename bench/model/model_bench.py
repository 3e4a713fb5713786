"""A whole model tuned over Dask on two local servers, one SIGKILLed mid-run, then run through
its kernels against PyTorch eager (one thread), into bench/results/model_<model>.md.

    bazel build //service:looptool-server //client/cpp:looptool //client/python:looptool
    PYTHONPATH=bazel-bin/client/python:client/python \
    LOOPTOOL_SERVER=bazel-bin/service/looptool-server \
    /usr/bin/python3 bench/model/model_bench.py --model=resnet18 --time-limit=600 --kill-after=60

The second server is killed with SIGKILL at the first slice to come back after --kill-after
seconds (0: no fault). The tuning report (per task), the run's error and both latencies, the
time budget against the time taken, and what the fault cost go into the results file.
"""

import argparse
import io
import json
import os
import signal
import sys
import time

from looptool.model import commands
from looptool.server import LocalServer


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="resnet18")
    p.add_argument("--input-shape", default="1,3,224,224")
    p.add_argument("--time-limit", type=float, default=600)
    p.add_argument("--kill-after", type=float, default=60)
    p.add_argument("--out", default="")
    p.add_argument("--results", default="bench/results")
    p.add_argument("--repeats", type=int, default=20)
    p.add_argument("--layout", default="auto", choices=("auto", "nhwc", "nchw"),
                   help="looptool.model's layout (auto: nhwc at batch 1); a layout named here "
                        "is in the results' file name")
    args = p.parse_args()
    suffix = "" if args.layout == "auto" else "_" + args.layout
    out = args.out or f"runs/model_bench_{args.model}{suffix}"
    shape = [int(d) for d in args.input_shape.split(",")]
    model = commands.build_model(args.model, 0)
    example = commands.example_input(shape, 0)

    cpus = sorted(os.sched_getaffinity(0))
    servers = [LocalServer(flags=[f"--eval_cores={cpus[-1 - i]}"], die_with_parent=True)
               for i in range(2)]
    victim = servers[1]
    start = time.monotonic()
    fault = {}

    def on_slice(result: object) -> None:
        if args.kill_after > 0 and not fault and time.monotonic() - start >= args.kill_after:
            os.kill(victim.pid, signal.SIGKILL)
            fault["killed_at_s"] = round(time.monotonic() - start, 1)

    log = io.StringIO()
    try:
        summary = commands.tune_model(model, example, out, time_limit=args.time_limit,
                                      servers=[s.address for s in servers], progress=False,
                                      title=args.model, log=log, on_slice=on_slice,
                                      layout=args.layout)
    finally:
        for s in servers:
            s.close()
    wall = time.monotonic() - start
    run = commands.run_model(model, example, out, repeats=args.repeats, title=args.model,
                             layout=args.layout)
    report = open(os.path.join(out, "report.md")).read()
    lines = [
        f"# {args.model}: tuned over Dask on two servers, run through its kernels", "",
        f"`/usr/bin/python3 bench/model/model_bench.py --model={args.model} "
        f"--time-limit={args.time_limit:g} --kill-after={args.kill_after:g}"
        + (f" --layout={args.layout}" if suffix else "") + "`", "",
        f"- layout: {summary['layout']} (activations channels last: nhwc; or nchw)",
        f"- host: {os.uname().nodename}, {len(cpus)} CPUs; the servers' timing cores "
        f"{cpus[-1]} and {cpus[-2] if len(cpus) > 1 else cpus[-1]}",
        f"- time budget {summary['time_limit']:g} s in {summary['slice_seconds']:.3g} s slices; "
        f"tuning took {summary['seconds']:.1f} s (the whole command, with Dask's start and "
        f"the export, {wall:.1f} s)",
        f"- fault: " + (f"server {victim.address} SIGKILLed {fault['killed_at_s']} s in; "
                        f"dropped: {', '.join(summary['dropped_servers']) or 'none'}; "
                        f"slices lost with a worker: {summary['lost_slices']}"
                        if fault else "none"),
        f"- tasks reported: {len(summary['report'])} of {summary['tasks']}, failed: "
        f"{sum(1 for r in summary['report'] if r['error'])}",
        f"- run (one thread, CPU {run['cpu']}, median of {run['repeats']}): PyTorch eager "
        f"{run['torch_eager_ms']:.2f} ms, LoopTool {run['looptool_ms']:.2f} ms "
        f"({run['speedup']:.2f}x); max |ours - torch| / max |torch| = "
        f"{run['max_relative_error']:.2e}; {run['layers_on_kernels']} of {run['layers']} layers "
        f"on kernels",
        "", "## Tuning report", "", report.split("\n", 2)[2],
    ]
    os.makedirs(args.results, exist_ok=True)
    path = os.path.join(args.results, f"model_{args.model}{suffix}.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    with open(os.path.join(args.results, f"model_{args.model}{suffix}.json"), "w") as f:
        json.dump({"tune": summary, "run": run, "fault": fault, "wall_s": wall}, f, indent=1)
    print("\n".join(lines[:10]))
    print(log.getvalue(), file=sys.stderr)
    return 0 if run["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
