"""policy_search_bench: a learned policy's one-shot schedule (`looptool tune --search=policy`) and
its guided search against the default search, per program, on one server in one run.

    bazel build //client/cpp:looptool //service:looptool-server && \\
      /usr/bin/python3 bench/rl/policy_search_bench.py [--policy=loop_set] [--isa=avx2] [--sets=...]

All on one server, in this order per set: the untrained network (--untrained; it pays each
program's one-time reference run, which the server verifies kernels against), the baselines, the
policy, its first-ranked episode alone timed (--top1), its greedy episode alone (--greedy),
policy_guided, evolution; a kernel an earlier one timed is
not timed again (the server's cache), so policy_guided may find the policy's kernel timed.

Sets: the 25 test matmuls of mm64_256_16_range-v0 (tune_bench's choice), the 12 off-grid matmuls,
every layer of resnet18-v0, mobilenet_v2-v0 and bert_base-v0 (never trained on), the first
--catalog-count test programs of each other catalog dataset, and `dir:DIR`, the program files
(*.txt) in DIR (bench/rl/programs/large_memory: large transposes and other memory-bound programs
outside the policies' evaluation sets and records). For each program, on one server (one
kernel worker core): `--search=policy` (the policy's likeliest episodes from the untiled nest,
ranked by its cost model untimed, then timed in that order while --policy-seconds last, wave
after wave of the next likeliest while time is left, at most --policy-timed in all, the fastest
kept; wall
time from the CLI's start of the search to its result), `--search=
policy_guided` within --guided-seconds, and the default search (evolution) within
--search-seconds. Ratios are of the server's GFLOPS for the final kernels, measured in this run.
Then, per set, the final kernels of policy, policy_guided and the search are re-timed side by side
(`looptool eval`, --retime-rounds interleaved rounds, the fastest of each kept): the second table's
ratios compare kernels measured alike, where the first's compare each search's own measurements,
taken minutes apart (small kernels move by 10-40% between such moments on a shared host).
Writes policy_search_bench.md and .csv under --out.
"""
import argparse
import csv
import datetime
import glob
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "bazel-bin/client/python"), os.path.join(ROOT, "client/python")]

from looptool.connection import Connection  # noqa: E402
from looptool.env import LoopToolEnv  # noqa: E402
from looptool.rl import benchmarks as B  # noqa: E402
from looptool.rl import report  # noqa: E402
from looptool.server import LocalServer  # noqa: E402

CATALOG = ["conv2d-v0", "pool-v0", "reduce-v0", "transpose-v0", "elementwise-v0", "mm_relu-v0"]
MODELS = ["resnet18-v0", "mobilenet_v2-v0", "bert_base-v0"]


def benchmark_sets(conn: Connection, sets: Sequence[str], catalog_count: int,
                   offgrid_count: int) -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    for s in sets:
        if s == "test":
            out += [("test matmuls", b.uri) for b in B.test_benchmarks(conn, 25)]
        elif s == "offgrid":
            out += [("off-grid matmuls", b.uri) for b in B.offgrid_benchmarks(conn, offgrid_count)]
        elif s in MODELS:
            out += [(s, u) for u in conn.dataset_benchmarks(s)]
        elif s == "catalog":
            for d in CATALOG:
                out += [("catalog", u) for u in conn.dataset_benchmarks(d, "test")[:catalog_count]]
        elif s.startswith("dir:"):
            # Program files (the loop-nest language), a set named for their directory.
            files = sorted(glob.glob(os.path.join(s[4:], "*.txt")))
            if not files:
                raise SystemExit(f"set {s}: no program files (*.txt) there")
            out += [(os.path.basename(os.path.normpath(s[4:])), f) for f in files]
        else:
            raise SystemExit(f"unknown set {s}")
    return out


def tune(cli: str, address: str, uris: Sequence[str], search: str, seconds: float,
         policy: str, extra: Sequence[str] = ()) -> Dict[str, Dict[str, object]]:
    """{uri: the CLI's JSON result} for one `looptool tune` call over `uris`."""
    cmd = [cli, "tune", "--benchmark=" + ",".join(uris), f"--search={search}",
           f"--time_limit={seconds}", f"--server={address}", "--json", *extra]
    if search.startswith("policy"):
        cmd.append(f"--policy={policy}")
    out: Dict[str, Dict[str, object]] = {}
    # A program file's result names the benchmark the CLI made of it (user-v0, the file's stem).
    files = {f"benchmark://user-v0/{os.path.splitext(os.path.basename(u))[0]}": u
             for u in uris if os.path.isfile(u)}
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            out[files.get(str(r.get("benchmark")), str(r.get("benchmark")))] = r
    if not out:
        raise SystemExit(f"looptool tune {search} failed: {proc.stderr.strip()[-400:]}")
    return out


def strip_cursor(ir: str) -> str:
    """A program's `ir` text without its cursor line: the schedule alone."""
    return "\n".join(line for line in ir.splitlines() if not line.startswith("cursor"))


def retime(cli: str, address: str, uri: str, actions: Sequence[str], seconds: float,
           ir: str) -> float:
    """The fastest of `looptool eval`'s re-timings (--eval_seconds) of the kernel that `actions`
    (loop_nest's) make from the program's start; 0 when it fails, or when the schedule it gets
    is not `ir`'s (the one the search reported)."""
    cmd = [cli, "eval", f"--benchmark={uri}", "--action_space=loop_nest",
           "--actions=" + ",".join(actions), f"--eval_seconds={seconds}",
           f"--server={address}", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            if strip_cursor(str(r.get("ir", ""))) != strip_cursor(ir):
                print(f"re-timing {uri}: the actions give another schedule than the search's",
                      file=sys.stderr, flush=True)
                return 0.0
            return float(r.get("gflops", 0))
    print(f"re-timing {uri} failed: {proc.stderr.strip()[-300:]}", file=sys.stderr, flush=True)
    return 0.0


def retime_finals(cli: str, address: str, uris: Sequence[str],
                  finals: Dict[str, Dict[str, Dict[str, object]]], rounds: int,
                  seconds: float) -> Dict[str, Dict[str, float]]:
    """{kind: {uri: GFLOPS}}: each kind's final kernel (`finals[kind][uri]`, a CLI result)
    re-timed by `looptool eval` in `rounds` rounds, the kinds' order rotated each round so that
    none is always timed first, the fastest kept; a kernel two kinds share (the same actions) is
    timed once a round and counts for both."""
    best: Dict[str, Dict[str, float]] = {k: {} for k in finals}
    kinds = list(finals)
    for r in range(rounds):
        for u in uris:
            seen: Dict[Tuple[str, ...], float] = {}
            for k in kinds[r % len(kinds):] + kinds[:r % len(kinds)]:
                res = finals[k].get(u)
                if res is None or "actions" not in res:
                    continue
                key: Tuple[str, ...] = tuple(res["actions"])  # type: ignore
                if key not in seen:
                    seen[key] = retime(cli, address, u, key, seconds, str(res.get("ir", "")))
                best[k][u] = max(best[k].get(u, 0.0), seen[key])
    return best


def server_isa(conn: Connection) -> str:
    """The ISA the server generates code for, as its `kernel_abi` observation says."""
    with LoopToolEnv(conn, action_space="loop_nest", observation_space=None,
                     reward_space=None) as env:
        env.reset("benchmark://user-v0/isa", program="y[i] = x[i]\ni=16\n",
                  observation_spaces=[])
        return str(json.loads(env.observation["kernel_abi"])["isa"])


def untrained_like(policy: str, out: str, isa: str) -> str:
    """A loop_set policy file of `policy`'s architecture with PyTorch's initial weights (seed 0),
    its cost model too (same layer sizes, same input normalization); its path. `loop_set`: the
    built-in file of the server's `isa` (loop_set.built_in_path)."""
    import torch
    from looptool.rl import loop_set, plan_cost
    path = (loop_set.built_in_path(isa, os.path.join(ROOT, "datasets/policies"))
            if policy == "loop_set" else policy)
    trained = loop_set.load(path)
    torch.manual_seed(0)
    net = loop_set.network(trained.input_size, [w.shape[0] for w, _ in trained.trunk],
                           trained.query[0].shape[0])
    fresh = net.to_policy({"untrained": True, "architecture_of": os.path.basename(path)})
    if trained.cost is not None:
        sizes = [len(trained.cost.names)] + [w.shape[0] for w, _ in trained.cost.layers]
        layers = [torch.nn.Linear(a, b) for a, b in zip(sizes, sizes[1:])]
        fresh.cost = plan_cost.PlanCost(
            trained.cost.names, trained.cost.mean, trained.cost.scale,
            [(m.weight.detach().numpy().copy(), m.bias.detach().numpy().copy()) for m in layers])
    os.makedirs(os.path.dirname(out), exist_ok=True)
    fresh.save(out)
    return out


def geomean(xs: Sequence[float]) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else 0.0


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy", default="loop_set")
    p.add_argument("--sets", default="test,offgrid," + ",".join(MODELS) + ",catalog")
    p.add_argument("--search-seconds", type=float, default=10)
    p.add_argument("--guided-seconds", type=float, default=1)
    p.add_argument("--catalog-count", type=int, default=4)
    p.add_argument("--offgrid-count", type=int, default=12)
    p.add_argument("--cli", default=os.path.join(ROOT, "bazel-bin/client/cpp/looptool"))
    p.add_argument("--server", default=os.path.join(ROOT, "bazel-bin/service/looptool-server"))
    p.add_argument("--isa", default="auto", choices=("auto", "avx512", "avx2", "sse"),
                   help="the server's code generation target (--policy=loop_set: the built-in "
                        "policy of that ISA)")
    p.add_argument("--out", default=os.path.join(ROOT, "bench/results/rl"))
    p.add_argument("--name", default="policy_search_bench")
    p.add_argument("--untrained", default="",
                   help="a policy file of the same architecture with untrained weights: its "
                        "episodes too (learning matters: trained / untrained); 'auto': made "
                        "here from --policy's layer sizes (PyTorch's initialization, seed 0), "
                        "its cost model too (same sizes, untrained)")
    p.add_argument("--policy-candidates", type=int, default=16,
                   help="--search=policy: episodes ranked by the policy's cost model (1: greedy)")
    p.add_argument("--policy-timed", type=int, default=64,
                   help="--search=policy: the ranked episodes timed in order in all waves, this "
                        "many at most, the fastest kept (every policy of the run)")
    p.add_argument("--policy-seconds", type=float, default=0.3,
                   help="--search=policy: its budget, episodes and timings (every policy of the "
                        "run; the time limit is 60 s)")
    p.add_argument("--policy-extra", default="",
                   help="more `looptool tune` flags for the policy's own --search=policy run "
                        "(after the others; the last of a flag counts), e.g. "
                        "'--policy_timed=16 --time_limit=0.3'")
    p.add_argument("--top1", action="store_true",
                   help="also the policy with only its first-ranked episode timed "
                        "(--policy_timed=1)")
    p.add_argument("--baselines", default="",
                   help="NAME=POLICY[@N],...: other policies (any kind, e.g. RL from scratch) "
                        "whose --search=policy runs on the same server after the untrained one "
                        "(with --policy_candidates=N where given, else --policy-candidates): a "
                        "column of ratios each, and a baselines table")
    p.add_argument("--greedy", action="store_true",
                   help="also the greedy episode alone (--policy_candidates=1)")
    p.add_argument("--retime-rounds", type=int, default=3,
                   help="after each set's searches, the final kernels of policy, policy_guided "
                        "and the search re-timed (`looptool eval`) in this many interleaved "
                        "rounds, the fastest of each kept: ratios of kernels timed alike, side "
                        "by side (0: none)")
    p.add_argument("--retime-seconds", type=float, default=0.2,
                   help="--eval_seconds of each re-timing")
    args = p.parse_args(argv)
    if args.retime_rounds < 0:
        p.error(f"--retime-rounds must be 0 or more, not {args.retime_rounds}")
    if not 0 < args.retime_seconds <= 60:
        p.error(f"--retime-seconds must be above 0 and at most 60 (looptool eval's "
                f"--eval_seconds), not {args.retime_seconds}")
    baselines = []
    for spec in (x for x in args.baselines.split(",") if x):
        name, _, path = spec.partition("=")
        path, at, count = path.partition("@")
        if not name or not path or (at and not count.isdigit()):
            raise SystemExit(f"--baselines: NAME=POLICY[@N],... (got {spec!r})")
        baselines.append((name, path, [f"--policy_candidates={count}",
                                       f"--policy_timed={args.policy_timed}",
                                       f"--policy_seconds={args.policy_seconds}"] if at else None))
    rows: List[Dict[str, object]] = []
    started = time.time()
    with LocalServer(args.server, flags=[f"--isa={args.isa}"]) as server, \
            Connection(server.address) as conn:
        if args.untrained == "auto":  # of the policy file of the server's own ISA
            args.untrained = untrained_like(args.policy, os.path.join(
                tempfile.mkdtemp(prefix="untrained-"), "loop_set_untrained.json"),
                server_isa(conn))
        programs = benchmark_sets(conn, args.sets.split(","), args.catalog_count,
                                  args.offgrid_count)
        peak = 0.0
        for which in dict.fromkeys(w for w, _ in programs):
            uris = [u for w, u in programs if w == which]
            print(f"{which}: {len(uris)} programs", file=sys.stderr, flush=True)
            # The untrained network first: it pays each program's one-time reference run (the
            # interpreter's outputs the server verifies every kernel against), the others don't.
            ranked = [f"--policy_candidates={args.policy_candidates}",
                      f"--policy_timed={args.policy_timed}",
                      f"--policy_seconds={args.policy_seconds}"]
            untrained = (tune(args.cli, server.address, uris, "policy", 60, args.untrained,
                              ranked) if args.untrained else {})
            others = {name: tune(args.cli, server.address, uris, "policy", 60, path,
                                 flags or ranked)
                      for name, path, flags in baselines}
            policy = tune(args.cli, server.address, uris, "policy", 60, args.policy,
                          ranked + args.policy_extra.split())
            top1 = (tune(args.cli, server.address, uris, "policy", 60, args.policy,
                         [f"--policy_candidates={args.policy_candidates}", "--policy_timed=1"])
                    if args.top1 else {})
            greedy = (tune(args.cli, server.address, uris, "policy", 60, args.policy,
                           ["--policy_candidates=1"]) if args.greedy else {})
            guided = tune(args.cli, server.address, uris, "policy_guided", args.guided_seconds,
                          args.policy)
            search = tune(args.cli, server.address, uris, "evolution", args.search_seconds,
                          args.policy)
            retimed = (retime_finals(args.cli, server.address, uris,
                                     {"search": search, "policy": policy, "guided": guided},
                                     args.retime_rounds, args.retime_seconds)
                       if args.retime_rounds > 0 else {})
            for u in uris:
                if u not in policy or u not in search:
                    continue
                g_search = float(search[u]["gflops"])  # type: ignore[arg-type]
                peak = float(search[u].get("peak_gflops", peak))  # type: ignore[arg-type]
                row = {"set": which, "benchmark": u.rsplit("/", 1)[-1],
                       "search_gflops": g_search,
                       "policy_gflops": float(policy[u]["gflops"]),  # type: ignore[arg-type]
                       "policy_seconds": float(policy[u]["seconds"]),  # type: ignore[arg-type]
                       "policy_timed": int(policy[u].get("states_evaluated", 0)),  # type: ignore
                       "guided_gflops": float(guided[u]["gflops"]) if u in guided else 0.0,
                       "guided_seconds": float(guided[u]["seconds"]) if u in guided else 0.0,
                       "guided_timed": int(guided[u].get("states_evaluated", 0))  # type: ignore
                       if u in guided else 0,
                       "policy_actions": " ".join(policy[u]["actions"]),  # type: ignore
                       "search_actions": " ".join(search[u]["actions"])}  # type: ignore
                if u in greedy:
                    row["greedy_gflops"] = float(greedy[u]["gflops"])  # type: ignore[arg-type]
                    row["greedy_seconds"] = float(greedy[u]["seconds"])  # type: ignore
                    row["greedy_ratio"] = row["greedy_gflops"] / g_search if g_search else 0.0
                if u in top1:
                    row["top1_gflops"] = float(top1[u]["gflops"])  # type: ignore[arg-type]
                    row["top1_ratio"] = row["top1_gflops"] / g_search if g_search else 0.0
                for name, results in others.items():
                    if u in results:
                        g = float(results[u]["gflops"])  # type: ignore[arg-type]
                        row[f"{name}_ratio"] = g / g_search if g_search else 0.0
                row["policy_ratio"] = row["policy_gflops"] / g_search if g_search else 0.0
                row["guided_ratio"] = row["guided_gflops"] / g_search if g_search else 0.0
                if retimed:
                    g_search_again = retimed["search"].get(u, 0.0)
                    for k in ("search", "policy", "guided"):
                        row[f"{k}_retimed_gflops"] = retimed[k].get(u, 0.0)
                    for k in ("policy", "guided"):
                        g = retimed[k].get(u, 0.0)
                        row[f"{k}_retimed_ratio"] = (g / g_search_again
                                                     if g_search_again and g else 0.0)
                if u in untrained:
                    row["untrained_gflops"] = float(untrained[u]["gflops"])  # type: ignore
                    row["untrained_seconds"] = float(untrained[u]["seconds"])  # type: ignore
                    row["untrained_ratio"] = (row["untrained_gflops"] / g_search  # type: ignore
                                              if g_search else 0.0)
                    row["trained_over_untrained"] = (
                        row["policy_gflops"] / row["untrained_gflops"]  # type: ignore[operator]
                        if row["untrained_gflops"] else 0.0)
                rows.append(row)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, args.name + ".csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(k for r in rows for k in r)))
        w.writeheader()
        w.writerows(rows)
    lines = [f"# {args.name}", "",
             f"{datetime.date.today()}, {os.uname().nodename}; policy `{args.policy}`; server "
             f"--isa={args.isa}; measured "
             f"FMA peak {peak:.1f} GFLOPS; one server, one kernel worker core; "
             f"{time.time() - started:.0f} s in all. Ratios are of the server's GFLOPS for the "
             f"final kernels, this run: `--search=policy` (untimed episodes, the few its cost "
             f"model ranks first timed) "
             f"and `--search=policy_guided` ({args.guided_seconds:g} s) over the default search "
             f"(evolution, {args.search_seconds:g} s).", "",
             f"`policy` ranks its {args.policy_candidates} likeliest episodes by its cost model, "
             "untimed (the first wave with the states its greedy episodes passed through, the "
             "start among them, also with its outputs streamed and pool windows folded), "
             f"and times them in that order while {args.policy_seconds:g} s from its "
             f"start last (the first whatever the time), then the next {args.policy_candidates} "
             f"likeliest likewise while time is left, {args.policy_timed} timed at most in all, "
             "keeping the fastest; `top1` "
             "times the first alone; `greedy` is its greedy episode alone." +
             (f" The policy's own run with `{args.policy_extra}`." if args.policy_extra else ""),
             "",
             "| set | programs | policy / search, geomean | min | below 0.8 | policy seconds, "
             "mean (max) | " + ("greedy / search, geomean | min | " if args.greedy else "") +
             "guided / search, geomean | min | guided seconds, mean (max) | trained / untrained, "
             "geomean |",
             "|---|---:|---:|---:|---:|---:|" + ("---:|---:|" if args.greedy else "") +
             "---:|---:|---:|---:|"]
    groups = [(w, [r for r in rows if r["set"] == w])
              for w in dict.fromkeys(str(r["set"]) for r in rows)] + [("all", rows)]
    for which, rs in groups:
        pr = [float(r["policy_ratio"]) for r in rs]  # type: ignore[arg-type]
        gr = [float(r["guided_ratio"]) for r in rs]  # type: ignore[arg-type]
        secs = [float(r["policy_seconds"]) for r in rs]  # type: ignore[arg-type]
        gsecs = [float(r["guided_seconds"]) for r in rs]  # type: ignore[arg-type]
        yr = [float(r.get("greedy_ratio", 0)) for r in rs]  # type: ignore[arg-type]
        lines.append(f"| {which} | {len(rs)} | {geomean(pr):.3f} | {min(pr):.3f} | "
                     f"{sum(x < 0.8 for x in pr)} | {sum(secs) / len(secs):.3f} "
                     f"({max(secs):.3f}) | " +
                     (f"{geomean(yr):.3f} | {min(yr):.3f} | " if args.greedy else "") +
                     f"{geomean(gr):.3f} | {min(gr):.3f} | "
                     f"{sum(gsecs) / len(gsecs):.2f} ({max(gsecs):.2f}) | "
                     f"{geomean([float(r.get('trained_over_untrained', 0)) for r in rs]):.2f} |")
    if args.retime_rounds > 0:
        lines += ["", "Re-timed side by side: after each set's searches, the final kernels of "
                  "`policy`, `policy_guided` and the search, each re-timed by `looptool eval "
                  f"--eval_seconds={args.retime_seconds:g}` in {args.retime_rounds} interleaved "
                  "rounds on the same server, the fastest of each kept (a kernel two of them "
                  "share timed once a round). The table above compares each search's own "
                  "measurements, taken minutes apart, the search's the fastest re-timing of its "
                  "best 3; this one compares kernels measured alike.", "",
                  "| set | programs | policy / search, geomean | min | below 0.8 | below 0.95 | "
                  "guided / search, geomean | min | below 1.0 |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for which, rs in groups:
            pr = [float(r.get("policy_retimed_ratio", 0)) for r in rs]  # type: ignore
            gr = [float(r.get("guided_retimed_ratio", 0)) for r in rs]  # type: ignore
            failed = sum(x <= 0 for x in pr + gr)
            pr, gr = [x for x in pr if x > 0], [x for x in gr if x > 0]
            if not pr or not gr:
                continue
            lines.append(f"| {which} | {len(rs)}" + (f" ({failed} not re-timed)" if failed
                                                      else "") +
                         f" | {geomean(pr):.3f} | {min(pr):.3f} | {sum(x < 0.8 for x in pr)} | "
                         f"{sum(x < 0.95 for x in pr)} | {geomean(gr):.3f} | {min(gr):.3f} | "
                         f"{sum(x < 1.0 for x in gr)} |")
    columns = [("untrained", "untrained_ratio")] if args.untrained else []
    columns += [(name, f"{name}_ratio") for name, _, _ in baselines]
    columns += ([("greedy", "greedy_ratio")] if args.greedy else [])
    columns += ([("top1", "top1_ratio")] if args.top1 else []) + [
        ("policy", "policy_ratio"), (f"policy_guided {args.guided_seconds:g} s", "guided_ratio")]
    if len(columns) > 2:
        lines += ["", "Every policy on one harness: `--search=policy` (each kind's own episodes, "
                  "only final states timed) over the default search, geomean per set.", "",
                  "| set | " + " | ".join(c for c, _ in columns) + " |",
                  "|---|" + "---:|" * len(columns)]
        for which, rs in groups:
            cells = []
            for _, key in columns:
                got = [float(r[key]) for r in rs if float(r.get(key, 0)) > 0]  # type: ignore
                cells.append(f"{geomean(got):.3f}" + (f" ({len(got)} of {len(rs)})"
                                                       if len(got) < len(rs) else ""))
            lines.append(f"| {which} | " + " | ".join(cells) + " |")
    lines += ["", f"Per program: {args.name}.csv."]
    report.write_markdown(os.path.join(args.out, args.name + ".md"), lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
