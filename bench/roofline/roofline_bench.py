"""roofline_bench: how close do tuned memory-bound kernels come to their roofline bound? Tunes
every benchmark of the catalog's memory-bound datasets (reductions and GEMV, transposes, pooling,
elementwise and broadcasts) with `looptool tune --dataset=... --json` on an embedded server, and
prints each one's GFLOPS beside the bound the server reports for its program (the `roofline`
observation: the smaller of the FMA peak and the bytes moved over the host's bandwidth, reads
beyond the writes at the read bandwidth, writes beyond the reads at the fill bandwidth and the
rest at the copy bandwidth over buffers the size of its working set,
backend/costmodel/roofline.h), measured in the same run on the same core.
With --references, each benchmark's library reference (references.py: PyTorch one-threaded,
OpenBLAS for the 2-D transposes) is timed after the tuning, pinned to the core the embedded
server's kernel worker used, and compared. Writes a Markdown table (and the host's read, copy
and fill bandwidth curves).

    bazel build //client/cpp:looptool //service:looptool-server && \\
      PYTHONPATH=bazel-bin/client/python:client/python \\
      /usr/bin/python3 bench/roofline/roofline_bench.py [--time-limit=10] [--references] [--out=FILE]
        [--stream-stores-min-bytes=N]

--stream-stores-min-bytes=N tunes on an embedded server started with that flag
(service/server_flags.h: non-temporal stores of outputs of at least N bytes; 0, the default: none).
"""
import argparse
import datetime
import importlib.util
import json
import os
import subprocess
import sys
from typing import Dict, List

# The references' libraries one-threaded (references.py says why), before anything loads them.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATASETS = ["reduce-v0", "transpose-v0", "pool-v0", "elementwise-v0"]
TARGET = 0.80  # issue 26: memory-bound kernels at >= 80% of their roofline bound


def tune(cli, dataset, time_limit, stream_min_bytes=0):
    """One JSON object per benchmark of the dataset (`looptool tune --json`)."""
    p = subprocess.run([cli, "tune", f"--dataset={dataset}", f"--time_limit={time_limit}",
                        f"--stream_stores_min_bytes={stream_min_bytes}", "--json"],
                       capture_output=True, text=True, check=False)
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode != 0 and not rows:
        sys.exit(f"roofline_bench: looptool tune --dataset={dataset} failed: {p.stderr.strip()}")
    return rows


def curve(cli):
    """The host's memory levels and bandwidth curve, from one `roofline` observation."""
    p = subprocess.run([cli, "eval", "--benchmark=benchmark://reduce-v0/gemv_1024_1024",
                        "--json"], capture_output=True, text=True, check=False)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])["roofline"]
    except (ValueError, IndexError, KeyError):
        return None


def flop_counts(names, server_binary):
    """benchmark name -> the server's flop_count of its program."""
    from looptool.connection import Connection
    from looptool.env import LoopToolEnv
    from looptool.server import LocalServer
    out = {}
    with LocalServer(binary=server_binary) as server, Connection(server.address) as connection, \
            LoopToolEnv(connection, observation_space=None, reward_space=None) as env:
        for name in names:
            obs = env.reset(benchmark=f"benchmark://{name}", observation_spaces=["flop_count"])
            out[name] = float(obs[0])
    return out


def references(rows, server_binary):
    """name -> references.measure(...) for each tuned benchmark, pinned to the kernel worker's
    core (the embedded server's: the last CPU this process may run on)."""
    names = [r["benchmark"].replace("benchmark://", "") for r in rows if "error" not in r]
    counts = flop_counts(names, server_binary)
    # Pinned before torch is loaded, so that every thread it makes inherits the one core; the
    # pin is undone after (the servers started later must see every CPU).
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {max(allowed)})
    try:
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import references as refs
        return {name: refs.measure(name, counts[name]) for name in names}
    finally:
        os.sched_setaffinity(0, allowed)


def check_references_can_run(server_binary):
    """Fails before the tuning (minutes), not after it, when --references cannot run."""
    if not os.access(server_binary, os.X_OK):
        sys.exit(f"roofline_bench: --references needs the server binary: {server_binary}")
    # Found, not imported: torch must load only after the pin (references()).
    missing = [m for m in ("looptool._proto", "torch", "numpy") if not _findable(m)]
    if missing:
        sys.exit(f"roofline_bench: --references needs {', '.join(missing)} "
                 "(PYTHONPATH=bazel-bin/client/python:client/python /usr/bin/python3)")


def _findable(module):
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:
        return False


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--time-limit", type=float, default=10, help="seconds per benchmark")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench/results/roofline_bench.md"))
    parser.add_argument("--cli", default=os.path.join(ROOT, "bazel-bin/client/cpp/looptool"))
    parser.add_argument("--server", default=os.path.join(ROOT, "bazel-bin/service/looptool-server"))
    parser.add_argument("--stream-stores-min-bytes", type=int, default=0,
                        help="the embedded server's --stream_stores_min_bytes (0: off)")
    parser.add_argument("--references", action="store_true",
                        help="time each benchmark's library reference too (references.py)")
    args = parser.parse_args()
    if args.references:
        check_references_can_run(args.server)
    rows = []
    for dataset in DATASETS:
        rows += tune(args.cli, dataset, args.time_limit, args.stream_stores_min_bytes)
        print(f"{dataset}: {len(rows)} benchmarks so far", file=sys.stderr)
    refs = references(rows, args.server) if args.references else {}
    lines = [
        "# Memory-bound kernels against their roofline bound",
        "",
        f"`/usr/bin/python3 bench/roofline/roofline_bench.py --time-limit={args.time_limit:g}"
        f"{' --references' if args.references else ''}"
        + (f" --stream-stores-min-bytes={args.stream_stores_min_bytes}"
           if args.stream_stores_min_bytes else "") + "` "
        f"({datetime.date.today()}); `looptool tune` (default search, {args.time_limit:g} s "
        "each, one embedded server, one kernel worker core). Bound: the smaller of the FMA peak "
        "and the bytes moved (every tensor once) over the bandwidth of buffers the size of the "
        "working set: as many bytes read as are written, and the written ones, at the copy "
        "bandwidth (a copy's bytes read and written per second), the other reads at the read "
        "bandwidth, the other writes at the fill bandwidth (bytes written per second by stores "
        "alone); all three measured by the server on the kernel worker's core."
        + (" Reference: the library's call timed after the tuning on the same core (PyTorch "
           "1.13 one-threaded; for the 2-D transposes the faster of it and OpenBLAS's "
           "cblas_somatcopy), in the program's own layout; its GFLOPS count the program's "
           "flop_count, and its result is checked against numpy." if refs else ""),
        "",
        "| benchmark | GFLOPS | % of peak | bound GFLOPS | bound by | data fits | % of bound |"
        + (" reference | its GFLOPS | its % of bound | ours / it |" if refs else ""),
        "|---|---:|---:|---:|---|---|---:|" + ("---|---:|---:|---:|" if refs else ""),
    ]
    reached = []
    # Best schedules whose ir marks a statement `stream S` (stream_L<p>: non-temporal stores) or
    # `fold S` (fold_L<p>: a stride-2 window's rows folded).
    marked: Dict[str, List[str]] = {"stream ": [], "fold ": []}
    for r in rows:
        name = r["benchmark"].replace("benchmark://", "")
        for keyword, names in marked.items():
            if any(line.startswith(keyword) for line in r.get("ir", "").split("\n")):
                names.append(name)
        if "error" in r:
            lines.append(f"| {name} | error: {r['error']} | | | | | |" + (" | | | |" if refs else ""))
            continue
        bound = r.get("roofline_gflops", 0) or float("nan")
        pct = r.get("percent_of_roofline", 0)
        reached.append(pct / 100)
        line = (f"| {name} | {r['gflops']:.2f} | {r['percent_of_peak']:.1f} | {bound:.2f} | "
                f"{'memory' if r.get('memory_bound') else 'FMA peak'} | "
                f"{r.get('roofline_level', '')} | {pct:.1f} |")
        ref = refs.get(name)
        if ref:
            if ref["relative_error"] > 1e-5:
                line += (f" {ref['label']}: disagrees with numpy (relative error "
                         f"{ref['relative_error']:g}), not timed | | | |")
            else:
                line += (f" {ref['label']} | {ref['gflops']:.2f} | "
                         f"{100 * ref['gflops'] / bound:.1f} | "
                         f"{r['gflops'] / ref['gflops']:.2f}x |")
        elif refs:
            line += " | | | |"
        lines.append(line)
    ok = sum(1 for f in reached if f >= TARGET)
    peak = rows[0].get("peak_gflops", 0) if rows else 0
    lines += ["", f"{ok} of {len(reached)} at >= {TARGET:.0%} of their bound; "
              f"FMA peak {peak:.1f} GFLOPS ({rows[0].get('host_cpu', '') if rows else ''})."]
    lines += ["", "Best schedules that stream their output (a `stream_L<p>` action: non-temporal "
              "stores): " + (", ".join(marked["stream "]) or "none") + "."]
    lines += ["", "Best schedules that fold a stride-2 window's rows (a `fold_L<p>` action): "
              + (", ".join(marked["fold "]) or "none") + "."]
    memory = curve(args.cli)
    if memory:
        copies = {p["bytes"]: p["gbytes_per_second"] for p in memory.get("copy_bandwidth", [])}
        fills = {p["bytes"]: p["gbytes_per_second"] for p in memory.get("fill_bandwidth", [])}
        lines += ["", "The host's bandwidth (GB/s) over buffers of each size: reads, copies "
                  "(bytes read and written) and fills (bytes written); copies and fills the "
                  "faster of regular and non-temporal stores, measured up to 64 MiB:", "",
                  "| | " + " | ".join(f"{p['bytes'] >> 10} KiB" for p in memory["bandwidth"])
                  + " |",
                  "|---|" + "---:|" * len(memory["bandwidth"]),
                  "| read | " + " | ".join(f"{p['gbytes_per_second']:.0f}"
                                           for p in memory["bandwidth"]) + " |",
                  "| copy | " + " | ".join(f"{copies[p['bytes']]:.0f}" if p["bytes"] in copies
                                           else "-" for p in memory["bandwidth"]) + " |",
                  "| fill | " + " | ".join(f"{fills[p['bytes']]:.0f}" if p["bytes"] in fills
                                           else "-" for p in memory["bandwidth"]) + " |",
                  "", "Levels: " + ", ".join(f"{l['name']} {l['bytes'] >> 10} KiB"
                                            for l in memory["levels"] if l["bytes"]) + "."]
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
