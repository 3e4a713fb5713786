"""`python3 -m looptool.model tune|run`, and the same from Python: tune_model(), run_model().

    export PYTHONPATH=bazel-bin/client/python:client/python
    export LOOPTOOL_SERVER=bazel-bin/service/looptool-server   # the CLI is found beside it
    /usr/bin/python3 -m looptool.model tune --model=resnet18 --time-limit=600 --out=runs/resnet18
    /usr/bin/python3 -m looptool.model run --model=resnet18 --out=runs/resnet18

tune: extracts the model's layers (looptool.model.extract), checks each task's program on a
server, tunes the tasks over Dask (looptool.model.tuning: a LocalCluster by default, or
`--scheduler=tcp://HOST:8786`; `--servers=HOST:PORT,...`, else `--local-servers` started here,
each with its own timing core), keeps schedules in `--store` (default OUT/schedules.db), exports
the library to OUT/kernels, and writes OUT/report.{md,csv,png} and OUT/tune.json.

run: the model with its layers computed by OUT/kernels (looptool.model.replace), on one seeded
random input: the largest difference from PyTorch's output relative to PyTorch's largest
magnitude (max |ours - torch| / max |torch|; exit status 1 above `--tolerance`, 1e-4), and the
median single-thread latency of both (PyTorch eager and ours, interleaved, on one CPU) into
OUT/run.json and OUT/run.md.

`--layout`: the activations' layout, channels last (nhwc: every convolution vectorizes along
its channels, whatever its stride or map; looptool.model.extract's doc) or nchw; auto (the
default) is nhwc for a batch of 1; run's auto takes the layout OUT/tune.json records.
`--out-block=B` (nhwc): convolutions' weights blocked by B output channels (extract's
`out_block`; bench/results/layout_blocked_weights.md measures it); tune's default is 0 (not
blocked), run's what OUT/tune.json records. With `--choose-blocks`, tune picks the layout per
layer by measurement instead of by extract's size threshold: every convolution that can be
blocked is tuned in both forms (two tasks, sharing the time), the form whose tuned kernel is
faster is kept, and OUT/tune.json records the choice ("blocked_layers", and "block_choice":
both forms' GFLOPS per layer), which run then extracts with. "Faster" is measured after the
export: both forms' exported kernels timed side by side in this process on one core, in
alternating rounds (`retime_forms`), so that a slow spell of the host falls on both; the
searches' own figures are recorded beside those timings.

`--model` is a torchvision model name (built with random weights from `--seed`, its BatchNorm
statistics randomized too so that folding them is exercised) or `package.module:factory` (a
callable returning an nn.Module, used as it is). From Python, pass any nn.Module:

    from looptool.model import tune_model, run_model
    tune_model(my_module, torch.randn(1, 3, 224, 224), out="runs/mine", time_limit=120)
    print(run_model(my_module, torch.randn(1, 3, 224, 224), out="runs/mine"))
"""

import argparse
import ctypes
import dataclasses
import importlib
import json
import os
import statistics
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import torch

from looptool import kernels
from looptool.errors import ServiceError
from looptool.model import extract as extract_lib
from looptool.server import CLI_ENV_VAR, ServerStartError

LIBRARY = "model_kernels"
MAX_SERVERS = 64


def build_model(spec: str, seed: int) -> torch.nn.Module:
    """A torchvision model by name (random weights from `seed`, BatchNorm statistics
    randomized), or `module:factory`'s nn.Module."""
    torch.manual_seed(seed)
    if ":" in spec:
        module_name, attr = spec.split(":", 1)
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise ValueError(f"--model={spec}: cannot import {attr} from {module_name}: {e}")
        model = factory()
        if not isinstance(model, torch.nn.Module):
            raise ValueError(f"--model={spec}: {attr}() returned a {type(model).__name__}, "
                             "not a torch.nn.Module")
        return model.eval()
    import torchvision
    names = set(torchvision.models.list_models()) if hasattr(torchvision.models, "list_models") \
        else {n for n in dir(torchvision.models) if n.islower() and not n.startswith("_")
              and callable(getattr(torchvision.models, n))}
    if spec not in names:
        raise ValueError(f"--model={spec}: not a torchvision model (e.g. resnet18, "
                         "mobilenet_v2) nor module:factory")
    net: torch.nn.Module = getattr(torchvision.models, spec)(weights=None)
    g = torch.Generator().manual_seed(seed + 1)
    for m in net.modules():
        if isinstance(m, torch.nn.BatchNorm2d) and m.running_var is not None:
            assert m.running_mean is not None
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return net.eval()


def recorded_by_tune(out: str, key: str) -> Any:
    """The value OUT/tune.json records under `key`, or None (no `out`, no readable record, or
    no such key)."""
    if not out:
        return None
    try:
        with open(os.path.join(out, "tune.json")) as f:
            return json.load(f).get(key)
    except (OSError, ValueError, AttributeError):
        return None


def resolve_layout(layout: str, example: torch.Tensor, out: str = "") -> str:
    """"auto": the layout OUT/tune.json records (run after tune), else channels last ("nhwc")
    for a batch of 1 and "nchw" otherwise; any other value as it is. tune and run must extract
    with the same layout: their tasks' names differ."""
    if layout != "auto":
        return layout
    recorded = recorded_by_tune(out, "layout")
    if recorded in extract_lib.LAYOUTS:
        return str(recorded)
    return "nhwc" if example.dim() == 4 and int(example.shape[0]) == 1 else "nchw"


def resolve_out_block(out_block: Optional[int], out: str = "", layout: str = "nhwc") -> int:
    """None: the out_block OUT/tune.json records (run after tune) for layout nhwc, else 0; any
    other value as it is. tune and run must extract with the same blocks: their tasks' names
    differ."""
    if out_block is not None:
        return out_block
    if layout != "nhwc":
        return 0
    recorded = recorded_by_tune(out, "out_block")
    return recorded if isinstance(recorded, int) and recorded >= 0 else 0


def recorded_block_layers(out: str) -> Optional[List[str]]:
    """The layers OUT/tune.json records as blocked by measurement (tune --choose-blocks), or
    None (none recorded: extract's size threshold decides)."""
    recorded = recorded_by_tune(out, "blocked_layers")
    if isinstance(recorded, list) and all(isinstance(n, str) for n in recorded):
        return recorded
    return None


def both_forms(model: torch.nn.Module, example: torch.Tensor, out_block: int
               ) -> Tuple[extract_lib.Plan, Dict[str, Tuple[str, str]]]:
    """For tune --choose-blocks: one plan holding the unblocked layers and, beside them, the
    blocked form of every convolution that can be blocked (whatever its weights' size), and
    {layer's first node: (unblocked task, blocked task)}."""
    plain = extract_lib.extract(model, example, layout="nhwc")
    blocked = extract_lib.extract(model, example, layout="nhwc", out_block=out_block,
                                  block_min_bytes=0)
    if [x.nodes for x in plain.layers] != [x.nodes for x in blocked.layers]:
        raise RuntimeError("the blocked and unblocked extractions found different layers")
    forms = {a.nodes[0]: (a.task, b.task) for a, b in zip(plain.layers, blocked.layers)
             if b.out_block}
    tasks = dict(plain.tasks)
    for _, task in forms.values():
        tasks.setdefault(task, blocked.tasks[task])
    layers = plain.layers + [b for b in blocked.layers if b.out_block]
    return extract_lib.Plan(plain.graph_module, plain.input_shape, tasks, layers,
                            plain.left), forms


def kernel_call(kernel: kernels.Kernel, seed: int = 0) -> Any:
    """A call of `kernel` on random inputs placed as the server's timer places them (bound once:
    each call runs the kernel alone)."""
    import numpy as np
    inputs, outputs = kernel.empty_tensors()
    rng = np.random.default_rng(seed)
    for a in inputs + outputs:
        a[...] = rng.standard_normal(a.shape, dtype=np.float32)
    return kernel.bind(*inputs, out=outputs)


def retime_forms(library: kernels.KernelLibrary, forms: Dict[str, Tuple[str, str]],
                 seconds: float = 0.5, rounds: int = 5) -> Dict[str, Tuple[float, float]]:
    """{layer: (fastest call of the unblocked task's kernel, of the blocked one's), seconds} for
    every form pair whose two kernels are both in `library`: per round, each kernel's calls for
    `seconds / rounds` (the first call of each round untimed), the two kernels alternating, on
    one core; layers with the same pair of tasks share one timing."""
    out: Dict[str, Tuple[float, float]] = {}
    by_pair: Dict[Tuple[str, str], Tuple[float, float]] = {}  # layers sharing tasks: timed once
    with _OneCpu():
        for layer, (a, b) in forms.items():
            if a not in library or b not in library:
                continue
            if (a, b) in by_pair:
                out[layer] = by_pair[(a, b)]
                continue
            calls = [kernel_call(library[a]), kernel_call(library[b])]
            best = [float("inf"), float("inf")]
            for _ in range(rounds):
                for i, call in enumerate(calls):
                    call()
                    end = time.perf_counter() + seconds / rounds / 2
                    while True:
                        t0 = time.perf_counter()
                        call()
                        t1 = time.perf_counter()
                        best[i] = min(best[i], t1 - t0)
                        if t1 >= end:
                            break
            out[layer] = by_pair[(a, b)] = (best[0], best[1])
    return out


def example_input(shape: Sequence[int], seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed + 2))


def tune_model(model: torch.nn.Module, example: torch.Tensor, out: str, *,
               time_limit: float = 0.0, slice_seconds: float = 0.0,
               servers: Sequence[str] = (), local_servers: int = 1,
               scheduler: str = "", workers: int = 0, store: str = "",
               library: str = LIBRARY, auth_token_file: str = "", seed: int = 0,
               progress: bool = True, title: str = "model", server_flags: Sequence[str] = (),
               log: Any = sys.stderr, on_slice: Any = None,
               layout: str = "auto", out_block: Optional[int] = None,
               choose_blocks: bool = False) -> Dict[str, Any]:
    """Tunes the model's tasks and exports their kernels to OUT/kernels (module doc). Returns
    the summary written to OUT/tune.json. `on_slice(tuning.SliceResult)` sees each slice as it
    comes back; `server_flags` go to the local servers. `choose_blocks`: each convolution's
    weights blocked by `out_block` or not, whichever form tunes faster (module doc)."""
    from looptool import auth
    from looptool.model import report as report_lib
    from looptool.model import tuning
    from looptool.rl import cluster

    layout = resolve_layout(layout, example)
    out_block = resolve_out_block(out_block, layout=layout)
    forms: Dict[str, Any] = {}
    if choose_blocks:
        if layout != "nhwc" or out_block <= 0:
            raise ValueError("--choose-blocks chooses between blocked and unblocked weights: "
                             "give --out-block=B (B > 0) with layout nhwc")
        plan, forms = both_forms(model, example, out_block)
    else:
        plan = extract_lib.extract(model, example, layout=layout, out_block=out_block)
    if not plan.tasks:
        raise ValueError("the model has no layer a kernel can compute: "
                         + "; ".join(f"{x.node}: {x.why}" for x in plan.left[:10]))
    os.makedirs(out, exist_ok=True)
    task_dir = os.path.join(out, "tasks")
    tuning.write_tasks(plan, task_dir)
    count = len(servers) or local_servers
    if time_limit <= 0:
        time_limit = 10.0 * len(plan.tasks) / count
    if slice_seconds <= 0:
        slice_seconds = max(2.0, min(30.0, time_limit * count / (3 * len(plan.tasks))))
    first_round = -(-len(plan.tasks) // count) * slice_seconds
    if first_round > time_limit:
        raise ValueError(f"--time-limit={time_limit:g} s cannot give each of the "
                         f"{len(plan.tasks)} tasks one {slice_seconds:g} s slice on {count} "
                         f"servers; give at least {first_round:g} s, or a shorter --slice")
    token = auth.read_auth_token_file(auth_token_file) if auth_token_file else None
    options = tuning.TuneOptions(time_limit=time_limit, slice_seconds=slice_seconds,
                                 store=os.path.abspath(store or os.path.join(out,
                                                                             "schedules.db")),
                                 auth_token_file=os.path.abspath(auth_token_file)
                                 if auth_token_file else "", auth_token=token, seed=seed)
    if not os.path.exists(options.cli):
        raise FileNotFoundError(f"the looptool CLI is not at {options.cli}: set "
                                f"${CLI_ENV_VAR} (bazel-bin/client/cpp/looptool)")
    print(f"{title}: {len(plan.layers) - len(forms)} layers as {len(plan.tasks)} tasks"
          + (f" ({len(forms)} convolutions in both forms)" if forms else "") + "; "
          f"{len(plan.left)} nodes left to PyTorch; {time_limit:g} s of "
          f"{slice_seconds:.3g} s slices on {count} servers", file=log)
    with cluster.Servers(list(servers) or None, count=local_servers,
                         server_flags=server_flags) as srv:
        client, local_cluster = cluster.start_dask(workers or len(srv.addresses),
                                                   scheduler or None)
        bar = None
        try:
            flops = tuning.task_flops(plan, srv.addresses[0], token)
            if progress:
                from tqdm import tqdm
                bar = tqdm(total=round(time_limit), unit="s", desc="tuning", file=log)

            def on_progress(elapsed: float, allot: Any) -> None:
                if bar is None:
                    return
                bar.n = min(round(elapsed), bar.total)
                latency = allot.latency()
                tuned = len(allot.tasks) - len(allot.untuned())
                bar.set_postfix_str(f"tasks {tuned}/{len(allot.tasks)}" + (
                    f", kernels {1e3 * latency:.3f} ms" if latency else ""), refresh=True)

            run = tuning.tune_tasks(plan, srv.addresses, client, options, flops, on_progress,
                                   on_slice)
        finally:
            if bar is not None:
                bar.close()
            client.close()
            if local_cluster is not None:
                local_cluster.close()
        live = [s for s in srv.addresses if s not in run.dropped_servers]
        manifest = None
        export_error = ""
        if live:
            try:
                manifest = tuning.export(plan, run, task_dir, os.path.join(out, "kernels"),
                                         library, live[0], options)
            except RuntimeError as e:
                export_error = str(e)
        else:
            export_error = "no server answers to export from"
    choice: Dict[str, Any] = {}
    if choose_blocks:
        def gflops(task: str) -> float:
            best = run.tasks[task].best if task in run.tasks else None
            return best.gflops if best is not None else 0.0

        timed: Dict[str, Tuple[float, float]] = {}
        if manifest:
            try:
                timed = retime_forms(kernels.load(os.path.join(out, "kernels")), forms)
            except kernels.KernelLibraryError as e:  # the searches' figures decide instead
                print(f"{title}: the exported kernels could not be loaded to time the two "
                      f"forms side by side ({e}); choosing by the searches' figures", file=log)

        def blocked_is_faster(layer: str) -> bool:
            a, b = forms[layer]
            if layer in timed:
                return timed[layer][1] < timed[layer][0]
            return gflops(b) > gflops(a)  # a form failed to export: the searches' figures

        def entry(layer: str) -> Dict[str, Any]:
            a, b = forms[layer]
            e = {"layer": layer, "task": a, "gflops": round(gflops(a), 2), "blocked_task": b,
                 "blocked_gflops": round(gflops(b), 2), "blocked": layer in blocked_layers}
            if layer in timed:
                e["seconds"], e["blocked_seconds"] = timed[layer]
            return e

        blocked_layers = sorted(n for n in forms if blocked_is_faster(n))
        choice = {"blocked_layers": blocked_layers,
                  "block_choice": [entry(n) for n in forms]}
        # The report covers the layers as run will compute them.
        plan = extract_lib.extract(model, example, layout=layout, out_block=out_block,
                                   block_layers=blocked_layers)
        run = dataclasses.replace(run, tasks={n: t for n, t in run.tasks.items()
                                              if n in plan.tasks})
        print(f"{title}: {len(blocked_layers)} of {len(forms)} convolutions faster with their "
              f"weights blocked by {out_block}", file=log)
    table = report_lib.write(plan, run, manifest, out, title)
    summary = {
        "title": title, "input_shape": list(plan.input_shape), "layers": len(plan.layers),
        "layout": layout, "out_block": out_block, **choice,
        "tasks": len(plan.tasks), "time_limit": time_limit, "slice_seconds": slice_seconds,
        "seconds": round(run.seconds, 2), "servers": list(srv.addresses),
        "dropped_servers": run.dropped_servers, "lost_slices": run.lost_slices,
        "store": options.store, "library": os.path.join(out, "kernels") if manifest else "",
        "export_error": export_error, "report": table,
        "left": [{"node": x.node, "op": x.op, "why": x.why} for x in plan.left],
    }
    with open(os.path.join(out, "tune.json"), "w") as f:
        json.dump(summary, f, indent=1)
    failed = [r["task"] for r in table if r["error"]]
    print(f"{title}: tuned in {run.seconds:.1f} s; "
          + (f"{len(failed)} tasks failed ({', '.join(failed)}); " if failed else "")
          + (f"kernels in {summary['library']}" if manifest else f"no export: {export_error}")
          + f"; report {os.path.join(out, 'report.md')}", file=log)
    return summary


def _openblas() -> Any:
    """The OpenBLAS PyTorch loaded (Debian's torch calls BLAS through libblas.so.3), or None:
    its own thread pool is not torch.set_num_threads's (F.linear ran on two threads with it)."""
    try:
        lib = ctypes.CDLL("libblas.so.3")
    except OSError:
        return None
    return lib if hasattr(lib, "openblas_set_num_threads") else None


class _OneCpu:
    """Within: this process on one CPU (the last it may use), PyTorch and OpenBLAS on one
    thread; all as they were after."""

    def __enter__(self) -> int:
        self.cpus = os.sched_getaffinity(0)
        self.threads = torch.get_num_threads()
        self.blas = _openblas()
        self.blas_threads = self.blas.openblas_get_num_threads() if self.blas else 1
        cpu = max(self.cpus)
        os.sched_setaffinity(0, {cpu})
        torch.set_num_threads(1)
        if self.blas:
            self.blas.openblas_set_num_threads(1)
        return cpu

    def __exit__(self, *exc: object) -> None:
        os.sched_setaffinity(0, self.cpus)
        torch.set_num_threads(self.threads)
        if self.blas:
            self.blas.openblas_set_num_threads(self.blas_threads)


def run_model(model: torch.nn.Module, example: torch.Tensor, out: str, *,
              library_dir: str = "", repeats: int = 20, warmup: int = 3,
              tolerance: float = 1e-4, title: str = "model",
              layout: str = "auto", out_block: Optional[int] = None) -> Dict[str, Any]:
    """The model through OUT/kernels against PyTorch: error and latency (module doc). Returns the
    summary written to OUT/run.json."""
    from looptool.model.replace import with_kernels

    library = kernels.load(library_dir or os.path.join(out, "kernels"))
    layout = resolve_layout(layout, example, out)
    # The layers tune chose to block by measurement, when it did and run takes its blocks.
    block_layers = recorded_block_layers(out) if out_block is None and layout == "nhwc" \
        else None
    out_block = resolve_out_block(out_block, out, layout)
    plan = extract_lib.extract(model, example, layout=layout, out_block=out_block,
                               block_layers=block_layers)
    ours, missing = with_kernels(plan, library)
    with torch.no_grad(), _OneCpu() as cpu:
        reference = model(example)
        result = ours(example)
        scale = float(reference.abs().max())
        error = float((result - reference).abs().max()) / (scale if scale > 0 else 1.0)
        for _ in range(warmup):
            model(example)
            ours(example)
        eager: List[float] = []
        mine: List[float] = []
        for _ in range(repeats):
            t = time.perf_counter()
            model(example)
            eager.append(time.perf_counter() - t)
            t = time.perf_counter()
            ours(example)
            mine.append(time.perf_counter() - t)
    kernel_layers = sum(1 for layer in plan.layers if layer.task not in missing)
    eager_ms, ours_ms = 1e3 * statistics.median(eager), 1e3 * statistics.median(mine)
    summary = {
        "title": title, "input_shape": list(example.shape), "cpu": cpu,
        "max_relative_error": error, "tolerance": tolerance, "ok": error <= tolerance,
        "layout": layout, "out_block": out_block, "blocked_layers": block_layers,
        "torch_eager_ms": eager_ms, "looptool_ms": ours_ms, "speedup": eager_ms / ours_ms,
        "repeats": repeats,
        "layers": len(plan.layers), "layers_on_kernels": kernel_layers,
        "tasks_missing_from_library": missing,
        "left": [{"node": x.node, "op": x.op, "why": x.why} for x in plan.left],
        "torch_threads": 1,
    }
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "run.json"), "w") as f:
        json.dump(summary, f, indent=1)
    text = (f"# {title} through LoopTool kernels\n\n"
            f"- input {tuple(example.shape)}; {kernel_layers} of {len(plan.layers)} layers on "
            f"kernels; {len(plan.left)} nodes left to PyTorch\n"
            f"- max |ours - torch| / max |torch| = {error:.2e} (tolerance {tolerance:g})\n"
            f"- one thread on CPU {cpu}, median of {repeats}: PyTorch eager "
            f"{summary['torch_eager_ms']:.3f} ms, LoopTool {summary['looptool_ms']:.3f} ms "
            f"({summary['speedup']:.2f}x)\n")
    if missing:
        text += f"- tasks without a kernel in the library (left to PyTorch): {', '.join(missing)}\n"
    with open(os.path.join(out, "run.md"), "w") as f:
        f.write(text)
    return summary


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python3 -m looptool.model",
                                description="Tune a PyTorch model's layers with LoopTool, and "
                                            "run it through the exported kernels.")
    sub = p.add_subparsers(dest="command", required=True)
    for name in ("tune", "run"):
        s = sub.add_parser(name)
        s.add_argument("--model", required=True,
                       help="a torchvision model name (resnet18) or package.module:factory")
        s.add_argument("--input-shape", default="1,3,224,224")
        s.add_argument("--out", default="", help="default: runs/model_<model>")
        s.add_argument("--seed", type=int, default=0)
        s.add_argument("--layout", default="auto", choices=("auto", *extract_lib.LAYOUTS),
                       help="activations' layout: nhwc (channels last), nchw, or auto (tune: "
                            "nhwc for a batch of 1; run: the one OUT/tune.json records)")
        s.add_argument("--out-block", type=int, default=None,
                       help="nhwc: convolutions' weights blocked by this many output channels "
                            "(tune's default 0: not blocked; run's: what OUT/tune.json records)")
        if name == "tune":
            s.add_argument("--choose-blocks", action="store_true",
                           help="with --out-block: tune every convolution that can be blocked "
                                "in both forms and keep the faster (default: blocked from "
                                "512 KiB of weights)")
            s.add_argument("--time-limit", type=float, default=0,
                           help="seconds of tuning (default: 10 per task per server)")
            s.add_argument("--slice", type=float, default=0,
                           help="seconds of one slice (default: about a third of a task's "
                                "share, 2..30)")
            s.add_argument("--servers", default="", help="HOST:PORT,... (default: start "
                                                         "--local-servers here)")
            s.add_argument("--local-servers", type=int, default=1)
            s.add_argument("--scheduler", default="",
                           help="tcp://HOST:8786 (default: a LocalCluster)")
            s.add_argument("--workers", type=int, default=0,
                           help="LocalCluster workers (default: one per server)")
            s.add_argument("--store", default="", help="default: OUT/schedules.db")
            s.add_argument("--library", default=LIBRARY)
            s.add_argument("--auth-token-file", default="")
            s.add_argument("--no-progress", action="store_true")
        else:
            s.add_argument("--library-dir", default="", help="default: OUT/kernels")
            s.add_argument("--repeats", type=int, default=20)
            s.add_argument("--tolerance", type=float, default=1e-4)
    args = p.parse_args(argv)
    try:
        args.shape = [int(d) for d in args.input_shape.split(",")]
    except ValueError:
        args.shape = []
    if not args.shape or not all(1 <= d <= 1 << 16 for d in args.shape):
        p.error(f"--input-shape takes sizes like 1,3,224,224; got {args.input_shape!r}")
    args.out = args.out or os.path.join("runs", "model_" + args.model.replace(":", "_"))
    if args.command == "tune":
        servers = [s for s in args.servers.split(",") if s]
        if len(servers) > MAX_SERVERS or not 1 <= args.local_servers <= MAX_SERVERS:
            p.error(f"--servers and --local-servers: 1..{MAX_SERVERS}")
        if args.time_limit < 0 or args.slice < 0 or not 0 <= args.workers <= 256:
            p.error("--time-limit and --slice must not be negative; --workers is 0..256")
        args.server_list = servers
    elif not 1 <= args.repeats <= 100000:
        p.error("--repeats must be 1..100000")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        model = build_model(args.model, args.seed)
        example = example_input(args.shape, args.seed)
        if args.command == "tune":
            summary = tune_model(
                model, example, args.out, time_limit=args.time_limit, slice_seconds=args.slice,
                servers=args.server_list, local_servers=args.local_servers,
                scheduler=args.scheduler, workers=args.workers, store=args.store,
                library=args.library, auth_token_file=args.auth_token_file, seed=args.seed,
                progress=not args.no_progress, title=args.model, layout=args.layout,
                out_block=args.out_block, choose_blocks=args.choose_blocks)
            return 0 if summary["library"] and not any(r["error"] for r in summary["report"]) \
                else 1
        summary = run_model(model, example, args.out, library_dir=args.library_dir,
                            repeats=args.repeats, tolerance=args.tolerance, title=args.model,
                            layout=args.layout, out_block=args.out_block)
        with open(os.path.join(args.out, "run.md")) as f:
            print(f.read(), end="")
        return 0 if summary["ok"] else 1
    except (ValueError, FileNotFoundError, extract_lib.ExtractError,
            kernels.KernelLibraryError) as e:
        print(f"looptool.model: {e}", file=sys.stderr)
        return 2
    except (ServiceError, ServerStartError) as e:  # a server that cannot be reached or started
        print(f"looptool.model: {e}", file=sys.stderr)
        return 1
