"""layer_bench: every layer of a model dataset (resnet18-v0, mobilenet_v2-v0, bert_base-v0)
tuned by LoopTool against PyTorch's single-thread operator and oneDNN in its blocked layouts, on
the same core in the same run; per layer and weighted model totals.

    bazel build //client/cpp:looptool && \\
      /usr/bin/python3 bench/model/layer_bench.py [--dataset=resnet18-v0 ...] [--time-limit=10]

For each dataset, `looptool tune --dataset=NAME --json` tunes every program on an embedded
server (default search, --time-limit seconds each, one kernel worker core); then, pinned to that
core with torch.set_num_threads(1), each program's reference (datasets/models/<name>.txt) runs on
random data of the kernel's shapes: PyTorch's operator on dense NCHW tensors (F.conv2d, F.linear,
torch.bmm, pooling, add) and, for convolutions and linear layers, oneDNN through
torch.utils.mkldnn (weights reordered to its blocked format once, the input reordered once,
untimed; the output left in oneDNN's layout), every thread pool of the process limited to one
thread (OpenBLAS's too). Each time is the fastest single call within
--ref-seconds after a warm-up, as the server times kernels, those seconds spread over
--rounds rounds in which every call of the layer (each run's kernel, each reference) takes its
turn: a slow spell of the host (seconds long on a shared VM) then slows all of them alike, not
the one timed in it. Ours is timed the same way, in this process, in the same rounds as the
layer's references: every tuning run keeps its best schedules in a
schedule store (`--store`), `looptool export` makes them a kernel library, and each kernel is
called through looptool.kernels (Kernel.bind: a ctypes call, as PyTorch's calls pay Python too)
on random inputs. The search's own figure (its winner re-timed in its last seconds, far fewer
runs) is printed beside it. A layer's latency is FLOPs / GFLOPS; a model's total is the sum of
weight x latency.

`--runs=N` tunes every layer N times (N embedded servers one after another) and reports each
layer's spread (the slowest and fastest run's kernel as timed here, and (max - min) / max) and
each run's weighted total; the table's row is the run of median GFLOPS.

`--layout=nhwc`: the ResNet-18 and MobileNetV2 layers as looptool.model runs them channels last
(looptool.model.extract(rewrite=False, layout="nhwc"): the same layers, the same FLOPs, tensors
(H, W, C) and weights W[r,s,c,k]), tuned from program files (`looptool tune --benchmark=...`);
each layer's PyTorch time is then the faster of its NCHW call and the same call on
channels_last tensors (PyTorch's own channels-last path), and that is the ratio's reference.
BERT's matmuls have no layout to choose: they run as in the dataset. Results:
bench/results/layer_bench_nhwc.md. `--out-block=B` (with nhwc): convolutions of groups 1 with
more than B output channels (a multiple of B) and weights of 512 KiB or more also read their
weights blocked by B output channels, W[b,r,s,c,k], and write O[h,w,b,k] (extract(out_block=B)
with its default block_min_bytes; the same output bytes).

`--weights-k-last` (nchw; it replaced `--pointwise-ck`, which laid out the 1x1 convolutions
alone: results measured with that flag reproduce at their commits): the convolutions of groups
1 as looptool.model runs them in (C, H, W): weights laid out W[c,r,s,k] (1x1: W[c,k]) once,
untimed (extract(rewrite=False, weights_k_last=True)), where the datasets read PyTorch's
W[k,c,r,s]; the searches may then vectorize the output channels (the weights hold them
contiguously), broadcasting the input and storing the output with a stride. The other layers
are the datasets'.

`--linear-block=B`: linear layers `Y[m,n] += X[m,k] * W[k,n]` (BERT's) whose N is a multiple of
B above it read their weights blocked by B output features, `Y[m,b,n] += X[m,k] * W[b,k,n]`
(the same FLOPs and output bytes, tasks named `..._lbB`): one block of W is contiguous, where
W[k,n]'s rows of 3072 floats put every k of a column block in the same L1 set. The weights are
laid out once, untimed, as oneDNN's reorder of the mkldnn reference's weights.

torch.bmm (BERT's attention) is timed both with b contiguous and with b the transposed view of a
contiguous tensor (as BERT's matmul(q, k.transpose(-1, -2)) hands it K^T; our scores program
reads K[h,j,d] as the key projection writes it); the faster is the reference (`t` marks the
latter). Where a model has such alternative forms, its summary also gives the total against
PyTorch's first forms alone (NCHW convolutions, K^T contiguous): the reference issue 26 first
measured against.

`--transposed-keys`: attention's scores `S[h,i,j] += Q[h,i,d] * K[h,j,d]` run as two kernels, a
transpose `KT[h,d,j] = K[h,j,d]` and the plain batched matmul `S[h,i,j] += Q[h,i,d] *
KT[h,d,j]` (task `..._kt`), each tuned for --time-limit seconds: the repack is inside the timed
layer. The layer's time is one call of both, the matmul reading the transpose's output buffer
(checked once against numpy), timed as every other call; its GFLOPS the scores' FLOPs over that
time, and the search's column the same FLOPs over the two searches' times (results before
2026-12-03's evening gave the matmul's search alone there). PyTorch's reference is unchanged
(the faster of torch.bmm with K^T contiguous and with K^T the transposed view of K): PyTorch
pays no repack, so the comparison is K as the key projection writes it on both sides. Datasets
without a scores program run as without the flag.
"""
import tempfile
import argparse
import datetime
import json
import os
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Tuple

# One thread for every pool PyTorch may use, set before torch is imported: torch.set_num_threads
# does not reach OpenBLAS's own threads (F.linear ran on two cores here), and pinning this thread
# later does not pin threads made before.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "bazel-bin/client/python"), os.path.join(ROOT, "client/python")]
DATASETS = ["resnet18-v0", "mobilenet_v2-v0", "bert_base-v0"]


def read_dataset(name: str) -> List[Dict]:
    """[{name, weight, reference}] from datasets/models/<name>.txt."""
    rows = []
    path = os.path.join(ROOT, "datasets/models", f"{name}.txt")
    if not os.path.exists(path):
        known = sorted(f[:-4] for f in os.listdir(os.path.dirname(path)) if f.endswith("-v0.txt"))
        sys.exit(f"layer_bench: --dataset={name}: not a model dataset (known: {', '.join(known)})")
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("@ "):
                _, bench, weight, ref = line.rstrip("\n").split(" ", 3)
                rows.append({"name": bench, "weight": int(weight), "reference": ref})
    return rows


def shape(text: str) -> Tuple[int, ...]:
    return tuple(int(d) for d in text.split("x"))


def reference_ops(ref: str, channels_last: bool = False, transposed_b: bool = False
                  ) -> Tuple[Callable[[], object], Optional[Callable[[], object]]]:
    """(PyTorch's call, oneDNN's call or None) for a reference line; `channels_last`: PyTorch's
    call on channels_last tensors (4-D inputs and weights), oneDNN's as without; `transposed_b`:
    torch.bmm's b as the transposed view of a contiguous tensor (attention's K^T as BERT's
    matmul(q, k.transpose(-1, -2)) reads it) instead of contiguous."""
    import torch
    import torch.nn.functional as F
    import torch.utils.mkldnn
    op, *kv = ref.split()
    a = dict(item.split("=", 1) for item in kv)
    torch.manual_seed(0)
    if op == "conv2d":
        x, w = torch.randn(shape(a["input"])), torch.randn(shape(a["weight"]))
        stride, dil, groups = int(a["stride"]), int(a["dilation"]), int(a["groups"])
        conv = torch.nn.Conv2d(w.shape[1] * groups, w.shape[0], tuple(w.shape[2:]), stride=stride,
                               dilation=dil, groups=groups, bias=False).eval()
        conv.weight.data.copy_(w)
        mk = torch.utils.mkldnn.to_mkldnn(conv)
        xm = x.to_mkldnn()
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
            w = w.contiguous(memory_format=torch.channels_last)
        return (lambda: F.conv2d(x, w, None, stride, 0, dil, groups)), (lambda: mk(xm))
    if op == "linear":
        x, w = torch.randn(shape(a["input"])), torch.randn(shape(a["weight"]))
        lin = torch.nn.Linear(w.shape[1], w.shape[0], bias=False).eval()
        lin.weight.data.copy_(w)
        mk = torch.utils.mkldnn.to_mkldnn(lin)
        xm = x.to_mkldnn()
        return (lambda: F.linear(x, w)), (lambda: mk(xm))
    if op == "bmm":
        p, q = torch.randn(shape(a["a"])), torch.randn(shape(a["b"]))
        if transposed_b:
            q = q.transpose(-1, -2).contiguous().transpose(-1, -2)
        return (lambda: torch.bmm(p, q)), None
    if op in ("max_pool2d", "avg_pool2d"):
        x = torch.randn(shape(a["input"]))
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        k, s, d = int(a["kernel"]), int(a["stride"]), int(a["dilation"])
        if op == "max_pool2d":
            return (lambda: F.max_pool2d(x, k, s, 0, d)), None
        return (lambda: F.avg_pool2d(x, k, s)), None
    if op == "sum":
        x = torch.randn(shape(a["input"]))
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return (lambda: x.sum(dim=(2, 3))), None
    if op == "add":
        x, y = torch.randn(shape(a["input"])), torch.randn(shape(a["input"]))
        if a.get("relu") == "1":
            return (lambda: torch.relu(x + y)), None
        return (lambda: x + y), None
    raise ValueError(f"unknown reference op {op!r}")


def fastest(call: Callable[[], object], seconds: float) -> float:
    """The fastest single call within `seconds`, after a tenth of that in warm-up."""
    import torch
    with torch.no_grad():
        end = time.perf_counter() + seconds / 10
        while time.perf_counter() < end:
            call()
        best, end = float("inf"), time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            call()
            best = min(best, time.perf_counter() - t0)
    return best


def fastest_in_rounds(calls: List[Callable[[], object]], seconds: float,
                      rounds: int) -> List[float]:
    """Each call's fastest single call: `seconds` of calls each, in `rounds` rounds in which the
    calls take turns (each turn warmed up as `fastest` does), so that all of them are timed
    across the same stretch of time."""
    best = [float("inf")] * len(calls)
    for _ in range(rounds):
        for i, call in enumerate(calls):
            best[i] = min(best[i], fastest(call, seconds / rounds))
    return best


def dataset_programs(dataset: str) -> Dict[str, Tuple[str, str]]:
    """{dataset name: (task name, program)} for every layer of `dataset`, as the dataset holds
    it."""
    out: Dict[str, Tuple[str, str]] = {}
    with open(os.path.join(ROOT, "datasets/models", f"{dataset}.txt"), encoding="utf-8") as f:
        lines = f.read().split("\n")
    for i, line in enumerate(lines):
        if line.startswith("@ "):
            name = line.split(" ")[1]
            out[name] = (name, lines[i + 1] + "\n" + lines[i + 2] + "\n")
    return out


SCORES = "S[h,i,j] += Q[h,i,d] * K[h,j,d]"


def transposed_key_programs(programs: Dict[str, Tuple[str, str]]
                            ) -> Tuple[Dict[str, Tuple[str, str]], Dict[str, Tuple[str, str]]]:
    """`programs` with every attention scores program `S[h,i,j] += Q[h,i,d] * K[h,j,d]` reading
    K^T instead (`S[h,i,j] += Q[h,i,d] * KT[h,d,j]`, task `<task>_kt`), and {dataset name:
    (repack task, its program)}: the transpose `KT[h,d,j] = K[h,j,d]` each such layer runs
    first. Neither changes when no program is a scores program."""
    out, repacks = dict(programs), {}
    for name, (task, program) in programs.items():
        statement, sizes = program.strip().split("\n")
        if statement != SCORES:
            continue
        size = dict(t.split("=") for t in sizes.split())
        h, j, d = size["h"], size["j"], size["d"]
        out[name] = (f"{task}_kt", f"S[h,i,j] += Q[h,i,d] * KT[h,d,j]\n{sizes}\n")
        repacks[name] = (f"kt_{h}x{d}x{j}", f"KT[h,d,j] = K[h,j,d]\nh={h} j={j} d={d}\n")
    return out, repacks


def chain_call(kernels: List[object]) -> Callable[[], object]:
    """One call of `kernels` in order, each input named as an earlier kernel's output reading
    that output's buffer, every other input random (kernel_call's placement). The last kernel's
    result is checked once against numpy when the chain is a scores layer (K transposed, then
    Q K^T); raises AssertionError if it differs."""
    import numpy as np
    from looptool.model.commands import kernel_call
    if len(kernels) == 1:
        return kernel_call(kernels[0])
    rng = np.random.default_rng(0)
    produced: Dict[str, object] = {}
    calls = []
    for k in kernels:
        ins, outs = k.empty_tensors()  # type: ignore[attr-defined]
        named = {}
        for spec, a in zip(k.inputs, ins):  # type: ignore[attr-defined]
            if spec.name in produced:
                named[spec.name] = produced[spec.name]
            else:
                a[...] = rng.standard_normal(a.shape, dtype=np.float32)
                named[spec.name] = a
        for spec, a in zip(k.outputs, outs):  # type: ignore[attr-defined]
            a[...] = 0
            produced[spec.name] = a
        calls.append((k.bind(out=outs, **named), named))  # type: ignore[attr-defined]
    for call, _ in calls:
        call()
    first, last = calls[0][1], calls[-1][1]
    if "K" in first and "Q" in last:
        want = np.einsum("hid,hjd->hij", last["Q"], first["K"])
        got = produced["S"]
        if not np.allclose(got, want, rtol=1e-4, atol=1e-3):
            raise AssertionError("layer_bench: the transposed-key scores chain differs from "
                                 "numpy's Q K^T")
    bound = [c for c, _ in calls]

    def run() -> object:
        result = None
        for c in bound:
            result = c()
        return result
    return run


def search_gflops(result: Dict) -> float:
    """What the search reported for a layer: its kernel's GFLOPS, or for a layer with a repack
    (`--transposed-keys`) the layer's FLOPs over the sum of both searches' times."""
    repack = result.get("repack")
    if not repack or not repack.get("gflops") or "roofline" not in repack \
            or not result.get("gflops"):
        return float(result["gflops"])
    flops = result["roofline"]["flops"]
    seconds = flops / result["gflops"] + repack["roofline"]["flops"] / repack["gflops"]
    return flops / seconds


def blocked_linear_programs(dataset: str, block: int) -> Dict[str, Tuple[str, str]]:
    """{dataset name: (task name, program)} for every layer of `dataset`, its linear layers
    `Y[m,n] += X[m,k] * W[k,n]` whose N is a multiple of `block` above it reading their weights
    blocked by output feature instead: `Y[m,b,n] += X[m,k] * W[b,k,n]`, b = N / block (the same
    FLOPs and output bytes; the weights laid out once, untimed, as oneDNN's reorder). Empty when
    no layer is such a linear layer."""
    out = dataset_programs(dataset)
    for name, (_, program) in list(out.items()):
        statement, sizes = program.strip().split("\n")
        size = dict(t.split("=") for t in sizes.split())
        if statement == "Y[m,n] += X[m,k] * W[k,n]" and int(size["n"]) % block == 0 and \
                int(size["n"]) > block:
            out[name] = (f"{name}_lb{block}",
                         "Y[m,b,n] += X[m,k] * W[b,k,n]\n"
                         f"b={int(size['n']) // block} n={block} m={size['m']} k={size['k']}\n")
    return out if any(task != name for name, (task, _) in out.items()) else {}


def model_programs(dataset: str, nhwc: bool, out_block: int = 0,
                   weights_k_last: bool = False) -> Dict[str, Tuple[str, str]]:
    """For resnet18-v0 and mobilenet_v2-v0: {dataset name: (task name, its program)}, layer by
    layer from looptool.model.extract (empty for other datasets): the channels-last forms
    (`nhwc`; `out_block`: extract's, convolutions' weights blocked by output channel), or the
    (C, H, W) ones with `weights_k_last` (convolutions reading W[c,r,s,k], 1x1 W[c,k])."""
    model_name = {"resnet18-v0": "resnet18", "mobilenet_v2-v0": "mobilenet_v2"}.get(dataset)
    if model_name is None:
        return {}
    import torch
    import torchvision
    from looptool.model import extract as extract_lib
    model = getattr(torchvision.models, model_name)(weights=None).eval()
    x = torch.zeros(1, 3, 224, 224)
    nchw = extract_lib.extract(model, x, rewrite=False)
    form = (extract_lib.extract(model, x, rewrite=False, layout="nhwc", out_block=out_block)
            if nhwc else extract_lib.extract(model, x, rewrite=False,
                                                    weights_k_last=weights_k_last))
    out: Dict[str, Tuple[str, str]] = {}
    for a, b in zip(nchw.layers, form.layers):
        out.setdefault(a.task, (b.task, form.tasks[b.task].program))
    return out


def tune(cli: str, dataset: str, time_limit: float, files: Optional[List[str]] = None,
         isa: str = "auto", store: Optional[str] = None) -> Tuple[Dict[str, Dict], int]:
    """Each benchmark's `looptool tune --json` result by name (the benchmark URI's last part),
    and the kernel worker's core. `files`: these program files tuned instead of the dataset;
    `isa`: the embedded server's --isa (the kernels' vector unit); `store`: the schedule store
    the best schedules are kept in (for `export_kernels`)."""
    command = [cli, "tune", f"--dataset={dataset}"]
    if files:
        command = [cli, "tune", "--benchmark=" + ",".join(files)]
    # The kernel worker's core, named (the server's default, the last allowed CPU, made
    # explicit): the references are then pinned to it. (`--json` prints no "kernel worker on
    # cpu N" line to read it from.)
    core = max(os.sched_getaffinity(0))
    p = subprocess.run(command + [f"--time_limit={time_limit}", f"--isa={isa}", "--json",
                                  f"--eval_cores={core}"]
                       + ([f"--store={store}"] if store else []),
                       capture_output=True,
                       text=True, check=False)
    rows = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    if not rows:
        sys.exit(f"layer_bench: looptool tune --dataset={dataset} failed: {p.stderr.strip()}")
    return {r["benchmark"].rsplit("/", 1)[1]: r for r in rows}, core


def export_kernels(cli: str, store: str, directory: str, isa: str, core: int,
                   files: Optional[List[str]] = None) -> Dict[str, object]:
    """The store's schedules exported (`looptool export`) as a library in `directory` and
    loaded (looptool.kernels): {benchmark name: Kernel}. `files`: the program files tuned (a
    store names no file; export needs them)."""
    import looptool.kernels
    p = subprocess.run([cli, "export", f"--store={store}", f"--output={directory}",
                        "--library=layer_bench", f"--isa={isa}", f"--eval_cores={core}"]
                       + (["--benchmark=" + ",".join(files)] if files else []),
                       capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"layer_bench: looptool export --store={store} failed: {p.stderr.strip()}")
    library = looptool.kernels.load(directory)
    return {k.manifest["benchmark"].rsplit("/", 1)[1]: k for k in library.values()}


def peak_now(cli: str, isa: str, core: int) -> float:
    """The FMA peak of `core` measured now (`looptool peak`: an embedded server on that core
    measures it as it starts), so that a layer's fraction of peak divides two numbers taken at
    the same clock: a search's peak, measured while other searches compiled, can be a quarter
    lower than one measured when the layer is timed here."""
    p = subprocess.run([cli, "peak", f"--isa={isa}", f"--eval_cores={core}", "--json"],
                       capture_output=True, text=True, check=False)
    if p.returncode != 0:
        sys.exit(f"layer_bench: looptool peak failed: {p.stderr.strip()}")
    return float(json.loads(p.stdout)["peak_gflops"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", action="append", help=f"default: {', '.join(DATASETS)}")
    parser.add_argument("--time-limit", type=float, default=10, help="seconds per layer")
    parser.add_argument("--ref-seconds", type=float, default=1.0,
                        help="seconds of calls per reference")
    parser.add_argument("--out", default=os.path.join(ROOT, "bench/results/layer_bench.md"))
    parser.add_argument("--cli", default=os.path.join(ROOT, "bazel-bin/client/cpp/looptool"))
    parser.add_argument("--layout", default="nchw", choices=("nchw", "nhwc"),
                        help="the CNN layers as the datasets hold them (nchw) or as "
                             "looptool.model runs them (nhwc: channels last)")
    parser.add_argument("--isa", default="auto", choices=("auto", "avx512", "avx2"),
                        help="the kernels' vector unit (the server's --isa)")
    parser.add_argument("--ref-isa", default="native", choices=("native", "avx2"),
                        help="the references' vector unit: as PyTorch and oneDNN choose "
                        "(native), or at most AVX2 (ONEDNN_MAX_CPU_ISA=AVX2, "
                        "ATEN_CPU_CAPABILITY=avx2)")
    parser.add_argument("--weights-k-last", action="store_true", dest="weights_k_last",
                        help="(C, H, W) convolutions of groups 1 as looptool.model runs them: "
                             "weights W[c,r,s,k], 1x1 W[c,k] (the datasets read W[k,c,r,s])")
    parser.add_argument("--out-block", type=int, default=0,
                        help="with --layout=nhwc: convolutions' weights blocked by this many "
                             "output channels (0: W[r,s,c,k])")
    parser.add_argument("--linear-block", type=int, default=0,
                        help="linear layers Y[m,n] += X[m,k] * W[k,n] (BERT's) read their "
                             "weights blocked by this many output features, W[b,k,n] "
                             "(0: W[k,n])")
    parser.add_argument("--transposed-keys", action="store_true",
                        help="attention's scores as a transpose of K to K^T and a plain "
                             "batched matmul, both timed as the layer")
    parser.add_argument("--rounds", type=int, default=5,
                        help="rounds each layer's calls take turns in (--ref-seconds spread "
                             "over them)")
    parser.add_argument("--runs", type=int, default=1,
                        help="tuning runs per dataset (spread per layer)")
    args = parser.parse_args()
    if not 1 <= args.runs <= 10:
        parser.error("--runs: 1..10")
    if not 1 <= args.rounds <= 100:
        parser.error("--rounds: 1..100")
    nhwc = args.layout == "nhwc"
    if args.out_block < 0:
        parser.error("--out-block: 0 (not blocked) or a positive number of output channels")
    if args.out_block and not nhwc:
        parser.error("--out-block: with --layout=nhwc")
    if args.weights_k_last and nhwc:
        parser.error("--weights-k-last: with --layout=nchw (channels last reads W[r,s,c,k] "
                     "anyway)")
    if args.linear_block < 0:
        parser.error("--linear-block: 0 (not blocked) or a positive number of output features")
    if nhwc and args.out == parser.get_default("out"):
        args.out = os.path.join(ROOT, "bench/results/layer_bench_nhwc.md")
    if args.ref_isa == "avx2":  # read when oneDNN and ATen start: before torch is imported
        os.environ["ONEDNN_MAX_CPU_ISA"] = "AVX2"
        os.environ["ATEN_CPU_CAPABILITY"] = "avx2"
    import torch
    from looptool.model.commands import kernel_call
    torch.set_num_threads(1)
    lines = ["# Model layers: LoopTool against PyTorch and oneDNN, one core", "",
             f"`/usr/bin/python3 bench/model/layer_bench.py --time-limit={args.time_limit:g}"
             + (" --layout=nhwc" if nhwc else "")
             + (f" --out-block={args.out_block}" if args.out_block else "")
             + (" --weights-k-last" if args.weights_k_last else "")
             + (f" --linear-block={args.linear_block}" if args.linear_block else "")
             + (" --transposed-keys" if args.transposed_keys else "")
             + (f" --runs={args.runs}" if args.runs > 1 else "")
             + (f" --rounds={args.rounds}" if args.rounds != 5 else "")
             + (f" --isa={args.isa}" if args.isa != "auto" else "")
             + (f" --ref-isa={args.ref_isa}" if args.ref_isa != "native" else "") + "` "
             f"({datetime.date.today()}, torch {torch.__version__}). Ratios are reference time "
             "/ our time (above 1: we are faster), measured in the same run on the same core."
             + (" Layers channels last (layer names: the datasets'; the tuned programs: "
                "looptool.model's nhwc forms); PyTorch: the faster of its NCHW and "
                "channels_last calls (`cl` marks the latter)." if nhwc else "")
             + (" Convolutions of groups 1 as looptool.model runs them in (C, H, W): weights "
                "W[c,r,s,k] (1x1: W[c,k]), laid out once, untimed (the tuned programs: "
                "extract(weights_k_last=True)'s)."
                if args.weights_k_last else ""),
             ""]
    summary = []
    for dataset in args.dataset or DATASETS:
        layers = read_dataset(dataset)
        programs = (model_programs(dataset, nhwc, args.out_block, args.weights_k_last)
                    if nhwc or args.weights_k_last else {})
        if not programs and args.linear_block:
            programs = blocked_linear_programs(dataset, args.linear_block)
        repacks: Dict[str, Tuple[str, str]] = {}
        if args.transposed_keys:
            keyed, repacks = transposed_key_programs(programs or dataset_programs(dataset))
            if repacks:
                programs = keyed
            else:
                print(f"layer_bench: --transposed-keys: {dataset} has no attention scores "
                      f"program ({SCORES}); its layers run as without it", file=sys.stderr)
        work = tempfile.TemporaryDirectory(prefix="layer_bench")
        files = []
        for task, program in list(programs.values()) + list(repacks.values()):
            files.append(os.path.join(work.name, task + ".lt"))
            with open(files[-1], "w", encoding="utf-8") as f:
                f.write(program)
        runs = []  # per run: ({name: tune result}, {name: exported Kernel})
        for i in range(args.runs):
            store = os.path.join(work.name, f"run{i}.db")
            by_name, core = tune(args.cli, dataset, args.time_limit, files, args.isa, store)
            # A search that had no time to re-time its best stores nothing: not exported.
            stored = [f for f in files
                      if by_name.get(os.path.basename(f)[:-3], {}).get("stored")]
            kernels = export_kernels(args.cli, store, os.path.join(work.name, f"run{i}"),
                                     args.isa, core, stored) if stored or not files else {}
            if programs:  # by dataset name
                by_name = {name: dict(by_name[task], task=task,
                                      repack=by_name.get(repacks[name][0]) if name in repacks
                                      else None)
                           for name, (task, _) in programs.items() if task in by_name}
                # A layer with a repack: its kernels in call order (the repack's first).
                kernels = {name: [kernels[t] for t in
                                  ([repacks[name][0]] if name in repacks else []) + [task]]
                           for name, (task, _) in programs.items()
                           if task in kernels and (name not in repacks
                                                   or repacks[name][0] in kernels)}
            runs.append((by_name, kernels))
        os.sched_setaffinity(0, {core})
        tuned = {}
        for layer in layers:  # every run's result of each layer (or the first error)
            rs = [dict(run[0].get(layer["name"], {"error": "not tuned"}),
                       kernel=run[1].get(layer["name"])) for run in runs]
            bad = [r for r in rs if "error" in r or r["kernel"] is None or "roofline" not in r]
            tuned[layer["name"]] = dict(bad[0], error=bad[0].get("error", "not exported")) \
                if bad else {"runs": rs}
        first = next(iter(runs[0][0].values()))
        peaks: List[float] = []  # measured beside each layer's timings
        lines += [f"## {dataset}", "",
                  f"Kernel worker and references on cpu {core} ({first.get('host_cpu', '')}); "
                  "FMA peak PEAKS. GFLOPS: the tuned kernel, exported "
                  "and timed here as the references are (fastest call of "
                  f"{args.ref_seconds:g} s, in {args.rounds} rounds taking turns with the "
                  "layer's references); search's: what the search reported for it. % peak "
                  "and % roofline: of the peak measured right after the layer's timings "
                  "(`looptool peak`; the bandwidth bound as the search's).", "",
                  "| layer | x | GFLOPS | search's | % peak | % roofline | ours ms | PyTorch ms | "
                  "/ PyTorch | oneDNN ms | / oneDNN |"
                  + (f" GFLOPS over {args.runs} runs | spread |" if args.runs > 1 else ""),
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
                  + ("---|---:|" if args.runs > 1 else "")]
        run_totals = [0.0] * args.runs
        spreads: List[Tuple[float, str]] = []
        ours_total = torch_total = 0.0
        # PyTorch's first call alone (the program's own layout: NCHW, K as the program reads
        # it), where some layer also had an alternative form timed.
        plain_total, alternatives = 0.0, 0
        onednn_ratios: List[float] = []
        conv_ratios: List[float] = []
        for layer in layers:
            r = tuned.get(layer["name"], {"error": "not tuned"})
            if "error" in r:
                lines.append(f"| {layer['name']} | {layer['weight']} | error: {r['error']} |"
                             " | | | | | | | |")
                continue
            # Ours as the references are timed, run by run (the table's row: the median run).
            flops = r["runs"][0]["roofline"]["flops"]
            # Every call of the layer, timed in the same rounds: each run's kernel on random
            # inputs placed as the server's timer placed them, PyTorch's call (and its
            # channels-last or transposed form where one exists), oneDNN's.
            pt_call, dnn_call = reference_ops(layer["reference"])
            calls = [chain_call(run["kernel"]) if isinstance(run["kernel"], list)
                     else kernel_call(run["kernel"]) for run in r["runs"]] + [pt_call]
            alternative = None
            if nhwc and programs and layer["name"] in programs and not \
                    layer["reference"].startswith(("add", "linear", "bmm")):
                alternative = (reference_ops(layer["reference"], channels_last=True)[0], " cl")
            if layer["reference"].startswith("bmm"):
                alternative = (reference_ops(layer["reference"], transposed_b=True)[0], " t")
            if alternative:
                calls.append(alternative[0])
            if dnn_call:
                calls.append(dnn_call)
            seconds = fastest_in_rounds(calls, args.ref_seconds, args.rounds)
            in_order = []
            for run, t in zip(r["runs"], seconds):
                run["fresh_gflops"] = flops / (t * 1e9)
                in_order.append(run["fresh_gflops"])
            r = dict(sorted(r["runs"], key=lambda x: x["fresh_gflops"])[len(in_order) // 2],
                     runs=in_order)
            ours = flops / (r["fresh_gflops"] * 1e9)
            pt, mark = seconds[len(in_order)], ""
            if alternative and seconds[len(in_order) + 1] < pt:
                pt, mark = seconds[len(in_order) + 1], alternative[1]
            dnn = seconds[-1] if dnn_call else None
            peak = peak_now(args.cli, args.isa, core)
            peaks.append(peak)
            # The roofline at this peak: the memory bound as the search's (its memory time, the
            # bytes over its level's bandwidths), the compute bound this peak.
            rl = r["roofline"]
            bound = min(peak, rl["flops"] / rl["memory_seconds"] * 1e-9) \
                if rl.get("memory_seconds") else peak
            ours_total += layer["weight"] * ours
            torch_total += layer["weight"] * pt
            plain_total += layer["weight"] * seconds[len(in_order)]
            alternatives += 1 if alternative else 0
            spread = ""
            if args.runs > 1 and flops:
                g = r["runs"]
                for i, gi in enumerate(g):
                    run_totals[i] += layer["weight"] * flops / (gi * 1e9)
                spreads.append(((max(g) - min(g)) / max(g), layer["name"]))
                spread = f" {min(g):.1f}-{max(g):.1f} | {100 * spreads[-1][0]:.1f}% |"
            if dnn:
                onednn_ratios.append(dnn / ours)
                if layer["reference"].startswith("conv2d"):
                    conv_ratios.append(dnn / ours)
            lines.append(
                f"| {layer['name']}{' (K^T + matmul)' if layer['name'] in repacks else ''} | "
                f"{layer['weight']} | {r['fresh_gflops']:.1f} | "
                f"{search_gflops(r):.1f} | {100 * r['fresh_gflops'] / peak:.1f} | "
                f"{100 * r['fresh_gflops'] / bound:.1f} | "
                f"{ours * 1e3:.3f} | {pt * 1e3:.3f}{mark} | {pt / ours:.2f}x | "
                + (f"{dnn * 1e3:.3f} | {dnn / ours:.2f}x |" if dnn else "- | - |") + spread)
            print(f"{dataset} {layer['name']}: {pt / ours:.2f}x PyTorch", file=sys.stderr)
        def geomean(ratios: List[float]) -> float:
            return float(torch.tensor(ratios).log().mean().exp()) if ratios else 0.0

        if ours_total == 0:  # no layer tuned and timed: errors only
            lines = [line.replace("FMA peak PEAKS", "FMA peak not measured") for line in lines]
            summary.append(f"**{dataset}**: no layer tuned")
            work.cleanup()
            continue
        total = (f"**{dataset}**: weighted total ours {ours_total * 1e3:.2f} ms, PyTorch "
                 f"{torch_total * 1e3:.2f} ms: **{torch_total / ours_total:.2f}x PyTorch**; "
                 f"geomean {geomean(onednn_ratios):.2f}x oneDNN over {len(onednn_ratios)} "
                 "conv/linear layers"
                 + (f", {geomean(conv_ratios):.2f}x over the {len(conv_ratios)} convolutions"
                    if conv_ratios else ""))
        if alternatives:
            total += (f"; against PyTorch's first forms alone (NCHW convolutions, K^T "
                      f"contiguous) {plain_total * 1e3:.2f} ms: {plain_total / ours_total:.2f}x")
        if args.runs > 1 and spreads:
            worst = max(spreads)
            total += (f"; {args.runs} tuning runs' weighted totals "
                      + ", ".join(f"{torch_total / t:.2f}x" for t in run_totals)
                      + " PyTorch; "
                      f"{sum(1 for sp, _ in spreads if sp <= 0.03)} of {len(spreads)} layers "
                      f"within 3%, the widest {100 * worst[0]:.1f}% ({worst[1]})")
        searches = sorted(run[name]["peak_gflops"] for run, _ in runs for name in run
                          if run[name].get("peak_gflops"))
        text = f"{min(peaks):.1f}-{max(peaks):.1f} GFLOPS measured beside the layers' timings"
        if searches:
            text += f" (the searches': {searches[0]:.1f}-{searches[-1]:.1f})"
        lines = [line.replace("FMA peak PEAKS", "FMA peak " + text) for line in lines]
        lines += ["", total, ""]
        summary.append(total)
        work.cleanup()
    lines = lines[:4] + summary + [""] + lines[4:]
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
