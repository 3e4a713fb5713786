"""Generating and inspecting tuning records.

    python3 -m looptool.records generate --out=records.db [--programs=400] [--seed=0]
        [--seconds=3] [--models=alexnet,vgg16,googlenet,densenet121,mnasnet1_0 | --models=none]
        [--servers=HOST:PORT,...] [--search=evolution] [--chunk=N] [--max-flops=3e8]
        [--policy=loop_set.json [--guided-candidates=16]]
    python3 -m looptool.records summary records.db [--json]
    python3 -m looptool.records cost-model records.db [--epochs=30] [--out=model.pt]
        [--train-timings=full,settled,confirmed,slower] [--labels=search|remeasured]
    python3 -m looptool.records sample records.db --out=sample.db [--programs=8] [--per-run=30]
    python3 -m looptool.records remeasure records.db [--split=validation] [--server=HOST:PORT]
        [--limit=N]

`generate` draws `--programs` synthetic programs (looptool.records.programs) and adds every
distinct layer of the training models, then tunes each for `--seconds` (a model layer above
--max-flops for 4x that, at least 10 s) with `looptool tune
--records` (the CLI: $LOOPTOOL_CLI, or the one beside $LOOPTOOL_SERVER's build), `--chunk`
programs per call (default: 10 per server, at least 40; each call waits for its slowest
program): on `--servers` (spread over them, one program per server at a time, a dead
server's program redone elsewhere), or on a server the CLI starts here. Every kernel the searches
measure goes into `--out`, as it is measured; running it again adds new runs to the same file (a
new --seed draws other programs). A progress bar, and a summary at the end.

`cost-model --train-timings` trains only on the readings timed so (`Record.timing`: `once` and
`untimed` readings, one run or none, are the ones that most often read far from a full-budget
timing); `--labels=remeasured` ranks the held-out splits against `remeasure`'s readings.

`remeasure` times each kernel of a split again, alone, with the server's full budget (the
searches' readings stop early or skip kernels that look slow: looptool.records.remeasure), on
`--server` or on one it starts here, into the file's `remeasurements` table.

With `--search=policy_guided --policy=FILE --guided-candidates=N` it records the kernels a
policy's own episodes end in: the N likeliest episodes of each program, each timed while the
time lasts (what the policy's cost model must rank: looptool.rl.plan_cost trains on them too).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Set

from looptool import records as records_lib
from looptool.records import programs as programs_lib


def _progress(total: int) -> Any:
    try:
        from tqdm import tqdm
        return tqdm(total=total, unit="program", file=sys.stderr, dynamic_ncols=True)
    except ImportError:  # tqdm is optional: a line per program then
        return None


def tune_chunk(cli: str, chunk: Sequence[programs_lib.Program], directory: str, out: str,
               seconds: float, seed: int, search: str, servers: str,
               on_result: Callable[[Dict[str, object]], None],
               extra: Sequence[str] = ()) -> List[Dict[str, object]]:
    """Tunes one chunk of programs with one `looptool tune` call; returns its JSON results."""
    files = []
    for p in chunk:
        path = os.path.join(directory, f"{p.kind}__{p.name}.lt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(p.text)
        files.append(path)
    cmd = [cli, "tune", "--benchmark=" + ",".join(files), f"--time_limit={seconds}",
           f"--seed={seed}", f"--search={search}", f"--records={out}", "--json", *extra]
    if servers:
        cmd.append(f"--servers={servers}")
    results: List[Dict[str, object]] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("{"):
                r = json.loads(line)
                results.append(r)
                on_result(r)
        stderr = proc.stderr.read() if proc.stderr else ""
        proc.wait()
    if not results and proc.returncode != 0:
        why = (stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise RuntimeError(f"looptool tune failed: {why}")
    return results


def chunk_size(args: argparse.Namespace) -> int:
    """Programs per `looptool tune` call: --chunk, else 10 per server and at least 40. A call
    ends with its slowest program, its servers idle meanwhile: more servers need longer calls."""
    if args.chunk > 0:
        return int(args.chunk)
    servers = len([s for s in str(args.servers).split(",") if s])
    return max(40, 10 * servers)


def generate(args: argparse.Namespace) -> int:
    from looptool.server import default_cli  # not looptool.model: that imports PyTorch
    if not 0 <= args.guided_candidates <= 1024:
        print("looptool.records: --guided-candidates takes 1..1024 (0: the CLI's default)",
              file=sys.stderr)
        return 2
    cli = args.cli or default_cli()
    if not os.path.exists(cli):
        print(f"looptool.records: no looptool CLI at {cli} (set $LOOPTOOL_CLI or --cli)",
              file=sys.stderr)
        return 2
    models = [] if args.models in ("", "none") else args.models.split(",")
    try:
        kinds = args.kinds.split(",") if args.kinds else programs_lib.KINDS
        programs = programs_lib.synthetic(args.programs, seed=args.seed, max_flops=args.max_flops,
                                          kinds=kinds)
        if models:
            programs += programs_lib.model_layers(models, max_flops=args.max_model_flops)
    except ValueError as e:
        print(f"looptool.records: {e}", file=sys.stderr)
        return 2
    extra = []
    if args.policy:
        extra.append(f"--policy={args.policy}")
    if args.guided_candidates > 0:  # one wave of them, each timed while the time lasts, and
        # no neighbors of the fastest (the records hold the policy's own episodes)
        extra += [f"--guided_candidates={args.guided_candidates}",
                  f"--guided_timed={args.guided_candidates}", "--guided_neighbor_share=0"]
    bar = _progress(len(programs))
    done = {"ok": 0, "failed": 0, "recorded": 0}
    failures: List[str] = []

    def on_result(r: Dict[str, object]) -> None:
        if "error" in r:
            done["failed"] += 1
            failures.append(f"{r.get('benchmark')}: {r.get('code')}: {r.get('error')}")
        else:
            done["ok"] += 1
            done["recorded"] += int(r.get("recorded", 0))  # type: ignore[call-overload]
        if bar is not None:
            bar.set_postfix(kernels=done["recorded"], failed=done["failed"], refresh=False)
            bar.update(1)
        else:
            print(f"[{done['ok'] + done['failed']}/{len(programs)}] {r.get('benchmark')}: "
                  f"{r.get('recorded', 0)} kernels", file=sys.stderr)

    # Programs above --max-flops (model layers) get 4x the time, at least 10 s: their untuned
    # start is measured first, which takes seconds.
    def seconds_for(p: programs_lib.Program) -> float:
        base = float(args.seconds)
        return base if programs_lib.flops(p.text) <= args.max_flops else max(10.0, 4 * base)

    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="looptool-records-") as d:
        for seconds in sorted({seconds_for(p) for p in programs}):
            group = [p for p in programs if seconds_for(p) == seconds]
            for chunk in programs_lib.iterate(group, chunk_size(args)):
                try:
                    tune_chunk(cli, chunk, d, args.out, seconds, args.seed, args.search,
                               args.servers, on_result, extra)
                except RuntimeError as e:
                    if bar is not None:
                        bar.close()
                    print(f"looptool.records: {e}", file=sys.stderr)
                    return 1
    if bar is not None:
        bar.close()
    wall = time.monotonic() - start
    print(f"generated: {done['ok']} programs tuned ({done['failed']} failed), "
          f"{done['recorded']} kernels recorded in {wall:.0f} s "
          f"({done['recorded'] / max(wall, 1e-9):.1f} kernels/s) into {args.out}",
          file=sys.stderr)
    for f in failures[:20]:
        print(f"  failed: {f}", file=sys.stderr)
    return 0 if done["ok"] > 0 or not programs else 1


def show_summary(args: argparse.Namespace) -> int:
    try:
        s = records_lib.summary(args.path)
    except records_lib.RecordsError as e:
        print(f"looptool.records: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(s, indent=1, sort_keys=True))
        return 0
    print(f"{args.path}: {s['format']}")
    print(f"programs  {s['programs']}")
    print(f"kernels   {s['kernels']} in {s['runs']} runs")
    print(f"hosts     {s['hosts']}")
    print(f"timings   {s['timings']}")
    print(f"{'kind':<12} {'programs':>8} {'kernels':>8} {'best/peak':>10} {'best/roofline':>14}")
    for kind, k in sorted(s["per_kind"].items()):  # type: ignore[attr-defined]
        roof = k["best_fraction_of_roofline"]
        print(f"{kind:<12} {k['programs']:>8} {k['kernels']:>8} "
              f"{100 * k['best_fraction_of_peak']:>9.1f}% "
              f"{'' if roof is None else f'{100 * roof:.1f}%':>14}")
    return 0


def train_cost_model(args: argparse.Namespace) -> int:
    import numpy as np
    from looptool.records import cost_model
    try:
        keep = train_timings(args.train_timings)
        train_rows = records_lib.load(args.path, split="train")
        held = {s: records_lib.load(args.path, split=s) for s in ("validation", "evaluation")}
    except (records_lib.RecordsError, ValueError) as e:
        print(f"looptool.records: {e}", file=sys.stderr)
        return 2
    if keep is not None:
        dropped = len(train_rows)
        train_rows = [r for r in train_rows if r.timing in keep]
        dropped -= len(train_rows)
        print(f"training on readings timed {', '.join(sorted(keep))}: {dropped} train kernels "
              "left out")
    if args.labels == "remeasured":
        from looptool.records import remeasure
        held = {s: remeasure.with_remeasured_labels(rows) for s, rows in held.items()}
    if not train_rows:
        print(f"looptool.records: {args.path} has no train records"
              f"{' so timed' if keep is not None else ''}", file=sys.stderr)
        return 2
    names, w = cost_model.ridge(train_rows)
    model = cost_model.train(train_rows, epochs=args.epochs, seed=args.seed,
                             pairwise=args.pairwise)
    print(f"trained on {len(train_rows)} kernels of "
          f"{len({r.program_id for r in train_rows})} programs in {model.seconds:.0f} s "
          f"({args.epochs} epochs, pairwise weight {args.pairwise}; loss {model.losses[0]:.3f} "
          f"-> {model.losses[-1]:.3f})")
    print(f"{'split':<11} {'runs':>5} {'kernels':>8} {'Spearman per run: net mean':>27} "
          f"{'median':>7} {'ridge mean':>11} {'median':>7}")
    for split, rows in [("train", train_rows), *held.items()]:
        if not rows:
            continue
        net = cost_model.spearman_by_program(model.predict(rows), rows)
        base = cost_model.spearman_by_program(cost_model.featurize(rows, names).plan @ w, rows)
        if not net:
            continue
        print(f"{split:<11} {len(net):>5} {len(rows):>8} {np.mean(list(net.values())):>27.3f} "
              f"{np.median(list(net.values())):>7.3f} {np.mean(list(base.values())):>11.3f} "
              f"{np.median(list(base.values())):>7.3f}")
    if args.out:
        import torch
        torch.save({"state_dict": model.network.state_dict(),  # type: ignore[attr-defined]
                    "plan_names": model.plan_names, "loop_features": cost_model.LOOP_FEATURES,
                    "epochs": args.epochs, "seed": args.seed, "records": args.path}, args.out)
        print(f"saved {args.out}")
    return 0


def train_timings(spec: str) -> Optional[Set[str]]:
    """--train-timings: None (every reading) for an empty spec, else the set of TIMINGS names it
    lists (ValueError naming any other)."""
    if not spec:
        return None
    names = {t.strip() for t in spec.split(",") if t.strip()}
    unknown = sorted(names - set(records_lib.TIMINGS))
    if unknown or not names:
        what = ", ".join(unknown) if unknown else repr(spec)
        raise ValueError(f"--train-timings: {what} is not a timing "
                         f"(one of {', '.join(records_lib.TIMINGS)})")
    return names


def cut_sample(args: argparse.Namespace) -> int:
    """A small records file from a large one: the first run of one program per kind, with the
    first `--per-run` kernels of each and its fastest; the schema, the format and the evaluation
    programs as they are."""
    import sqlite3
    try:
        src = records_lib.connect(args.path)
    except records_lib.RecordsError as e:
        print(f"looptool.records: {e}", file=sys.stderr)
        return 2
    if os.path.exists(args.out):
        print(f"looptool.records: {args.out} exists; not overwriting it", file=sys.stderr)
        return 2
    dst = sqlite3.connect(args.out)
    src.backup(dst)
    src.close()
    runs: Dict[str, int] = {}
    for run_id, benchmark in dst.execute("SELECT id, benchmark FROM runs ORDER BY id"):
        runs.setdefault(records_lib._kind(benchmark) or "other", run_id)
    keep = sorted(runs.values())[:args.programs]
    marks = ",".join("?" * len(keep))
    dst.execute(f"DELETE FROM measurements WHERE run_id NOT IN ({marks})", keep)
    dst.execute("DELETE FROM measurements WHERE id NOT IN (SELECT id FROM (SELECT id, "
                "row_number() OVER (PARTITION BY run_id ORDER BY id) AS n, row_number() OVER "
                "(PARTITION BY run_id ORDER BY coalesce(retimed_gflops, gflops) DESC) AS best "
                "FROM measurements) WHERE n <= ? OR best = 1)", (args.per_run,))
    dst.execute(f"DELETE FROM runs WHERE id NOT IN ({marks})", keep)
    dst.execute("DELETE FROM programs WHERE id NOT IN (SELECT program_id FROM runs)")
    dst.commit()
    dst.execute("PRAGMA journal_mode = DELETE")
    dst.execute("VACUUM")
    n = dst.execute("SELECT count(*) FROM measurements").fetchone()[0]
    dst.close()
    print(f"{args.out}: {len(keep)} runs, {n} kernels")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m looptool.records",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="tune a distribution of programs into a records file")
    g.add_argument("--out", required=True, help="the SQLite records file (created or added to)")
    g.add_argument("--programs", type=int, default=400, help="synthetic programs to draw")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--kinds", default="",
                   help=f"comma-separated kinds to draw (default all: {','.join(programs_lib.KINDS)})")
    g.add_argument("--seconds", type=float, default=3.0, help="search time per program")
    g.add_argument("--models", default=",".join(programs_lib.TRAINING_MODELS),
                   help="torchvision models whose layers to add (comma-separated), or none")
    g.add_argument("--servers", default="", help="HOST:PORT,... (default: one started here)")
    g.add_argument("--search", default="evolution")
    g.add_argument("--policy", default="",
                   help="the policy file `looptool tune` searches with (policy, policy_guided)")
    g.add_argument("--guided-candidates", type=int, default=0,
                   help="policy_guided: a loop_set policy's episodes timed per program at most "
                        "(0: the CLI's default)")
    g.add_argument("--chunk", type=int, default=0,
                   help="programs per looptool tune call (0: 10 per server, at least 40)")
    g.add_argument("--max-flops", type=float, default=programs_lib.DEFAULT_MAX_FLOPS,
                   help="synthetic programs above this many FLOPs are not drawn")
    g.add_argument("--max-model-flops", type=float, default=2e9,
                   help="model layers above this many FLOPs are left out (those above "
                        "--max-flops get 4x --seconds, at least 10)")
    g.add_argument("--cli", default="", help="the looptool CLI (default: $LOOPTOOL_CLI, ...)")
    s = sub.add_parser("summary", help="what a records file holds")
    s.add_argument("path")
    s.add_argument("--json", action="store_true")
    c = sub.add_parser("cost-model", help="train a cost model on the train split, report "
                                          "its per-program Spearman on the others")
    c.add_argument("path")
    c.add_argument("--epochs", type=int, default=30)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--pairwise", type=float, default=4.0,
                   help="weight of the pairwise ranking loss beside the squared error")
    c.add_argument("--out", default="", help="save the trained model (torch.save) here")
    c.add_argument("--train-timings", default="",
                   help="train only on readings timed so (comma-separated: "
                        f"{','.join(records_lib.TIMINGS)}; default: every reading; readings "
                        "of files from before the timing column are then left out)")
    c.add_argument("--labels", default="search", choices=("search", "remeasured"),
                   help="what the held-out splits are ranked against: the searches' readings, "
                        "or `remeasure`'s full-budget ones (kernels without one left out)")
    m = sub.add_parser("sample", help="cut a small records file from a large one")
    m.add_argument("path")
    m.add_argument("--out", required=True)
    m.add_argument("--programs", type=int, default=8, help="programs (one per kind) at most")
    m.add_argument("--per-run", type=int, default=30, help="kernels per run (and its fastest)")
    r = sub.add_parser("remeasure", help="time a split's kernels again with the full budget")
    r.add_argument("path")
    r.add_argument("--split", default="validation", choices=records_lib.SPLITS)
    r.add_argument("--server", default="", help="HOST:PORT (default: one started here)")
    r.add_argument("--limit", type=int, default=0, help="kernels to time at most (0: all)")
    r.add_argument("--timings", type=int, default=2,
                   help="full-budget timings of each kernel, the fastest kept (a stall of the "
                        "core can slow every run of one)")
    return parser


def remeasure_max_timings() -> int:
    from looptool.records import remeasure as remeasure_lib
    return remeasure_lib.MAX_TIMINGS


def remeasure_split(args: argparse.Namespace) -> int:
    import sqlite3
    from looptool import errors
    from looptool.records import remeasure as remeasure_lib
    from looptool.server import LocalServer, ServerStartError
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    try:
        records_lib.connect(args.path).close()  # (a bad file before a server starts)
        if args.server:
            counts = remeasure_lib.remeasure(args.path, args.server, args.split, args.limit, log,
                                             args.timings)
        else:
            with LocalServer() as server:
                counts = remeasure_lib.remeasure(args.path, server.address, args.split,
                                                 args.limit, log, args.timings)
    except (records_lib.RecordsError, ServerStartError) as e:
        print(f"remeasure: {e}", file=sys.stderr)
        return 2
    except (errors.ServiceError, sqlite3.Error) as e:
        print(f"remeasure: {e} (the kernels timed before it stopped are kept: run it again to "
              "go on)", file=sys.stderr)
        return 2
    print(json.dumps({"records": args.path, "split": args.split, "timings": args.timings,
                      **counts}))
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "sample":
        return cut_sample(args)
    if args.command == "remeasure":
        if args.limit < 0:
            parser.error("--limit must be >= 0")
        if not 1 <= args.timings <= remeasure_max_timings():
            parser.error(f"--timings must be 1..{remeasure_max_timings()}")
        return remeasure_split(args)
    if args.command == "cost-model":
        return train_cost_model(args)
    if args.command == "generate":
        if args.programs < 0 or args.seconds <= 0 or args.chunk < 0:
            parser.error("--programs must be >= 0, --seconds > 0 and --chunk >= 0")
        return generate(args)
    return show_summary(args)


if __name__ == "__main__":
    sys.exit(main())
