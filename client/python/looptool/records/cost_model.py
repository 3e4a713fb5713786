"""A cost model learned from tuning records: ranks the schedules of a program it has never seen.

What it sees of a kernel: the server's plan features (what the code generator decided: vector
width, register block, unrolling, footprints outside the block) and every loop of its loop tree
(extent, tail, depth, height, vectorize/unroll marks, whether its variable is reduced or
written, the extent its tiles of that variable cover), the loops through a DeepSets network
(a per-loop MLP, summed and max-pooled), so any number of loops. It predicts log GFLOPS relative
to the program's mean (squared error plus RankNet's pairwise loss within each run): only the
order of one program's schedules is learned, which is what a search needs, and the peak of the
host drops out.

    python3 -m looptool.records cost-model records.db [--out=model.pt] [--epochs=30]

trains on the train split and reports the Spearman rank correlation of predicted and measured
GFLOPS per validation program (mean and median), beside a ridge regression on the plan features
alone (the server's online model is such a regression).
"""
import dataclasses
import math
import re
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from looptool.records import Record, plan_feature_names
from looptool.records.programs import index_span

Array = npt.NDArray[Any]

LOOP_FEATURES = 17
_LOOP = re.compile(r"^( *)for (\S+) in (\d+)(?: r (\d+))? : L\d+(.*)$")
# A leaf; a streamed statement's write ends in " stream" (non-temporal stores, stream_L<p>), a
# folded one's reduction in " fold" (a pool's window rows folded, fold_L<p>).
_OP = re.compile(r"^( *)%\d+\[([^\]]*)\] <- (\w+)\((.*)\)(?: stream| fold)?$")
_ACCESS = re.compile(r"([A-Za-z_]\w*)\[([^\]]*)\]")
_VAR = re.compile(r"[A-Za-z_]\w*")


def access_features(program: str) -> Dict[str, List[float]]:
    """Per variable of `program` (as the server prints it), how the tensors hold it: whether it
    is the output's last (contiguous) index, the fraction of input accesses whose last index has
    it, the fraction of accesses without it (reused across its loop), and log2 of its smallest
    stride in elements over the accesses that have it (/20)."""
    lines = [ln for ln in program.strip().splitlines() if ln.strip()]
    if not lines:
        return {}
    sizes: Dict[str, int] = {}
    for item in lines[-1].split():
        if "=" in item:
            k, _, v = item.partition("=")
            if v.isdigit():
                sizes[k] = int(v)
    accesses: List[Tuple[bool, List[List[str]], List[int]]] = []  # (is output, vars, spans)
    for line in lines[:-1]:
        for n, (_, index) in enumerate(_ACCESS.findall(line)):
            dims = [_VAR.findall(d) for d in index.split(",")]
            spans = [index_span(d, sizes) for d in index.split(",")]
            accesses.append((n == 0, [[v for v in d if v in sizes] for d in dims], spans))
    out: Dict[str, List[float]] = {}
    inputs = [a for a in accesses if not a[0]] or accesses
    for var in sizes:
        out_last = any(a[0] and a[1] and var in a[1][-1] for a in accesses)
        in_last = sum(1 for a in inputs if a[1] and var in a[1][-1]) / len(inputs)
        absent = sum(1 for a in accesses if not any(var in d for d in a[1])) / len(accesses)
        stride = math.inf
        for _, dims, spans in accesses:
            for i, d in enumerate(dims):
                if var in d:
                    stride = min(stride, float(np.prod(spans[i + 1:], dtype=np.float64)))
        out[var] = [float(out_last), in_last, absent,
                    math.log2(stride) / 20 if stride != math.inf else 1.0]
    return out


def _base(var: str) -> str:
    return var.rstrip("'")


def loop_features(loop_tree: str, program: str = "") -> Array:
    """One row of LOOP_FEATURES numbers per loop of `loop_tree` (the loop_tree observation), in
    order: log2 extent, has a tail, log2 tail, depth, height, vectorize, unroll, its variable
    reduced, its variable in the written output, encloses computation (not only a write), log2
    of what its variable's loops from it inward cover, innermost, operations enclosed, and its
    variable's access_features in `program` (zeros without one)."""
    return _loops_with(loop_tree, access_features(program) if program else {})


def _loops_with(loop_tree: str, access: Dict[str, List[float]]) -> Array:
    lines = [ln for ln in loop_tree.splitlines() if ln.strip()]
    loops: List[Dict[str, object]] = []
    stack: List[int] = []  # indices of open loops
    reduced, written = set(), set()
    for line in lines:
        line = re.sub(r"\s*<<<.*$", "", line)
        m = _LOOP.match(line)
        if m:
            depth = len(m.group(1))
            while stack and int(loops[stack[-1]]["depth"]) >= depth:  # type: ignore[call-overload]
                stack.pop()
            loops.append({"depth": depth, "var": _base(m.group(2)), "size": int(m.group(3)),
                          "tail": int(m.group(4) or 0), "marks": m.group(5), "parents": list(stack),
                          "children": 0, "ops": 0, "compute": False, "height": 0})
            for p in stack:
                loops[p]["children"] = int(loops[p]["children"]) + 1  # type: ignore[call-overload]
            stack.append(len(loops) - 1)
            continue
        o = _OP.match(line)
        if not o:
            continue
        depth = len(o.group(1))
        while stack and int(loops[stack[-1]]["depth"]) >= depth:  # type: ignore[call-overload]
            stack.pop()
        dims = [_base(d.strip()) for d in o.group(2).split(",") if d.strip()]
        op = o.group(3)
        if op == "write":
            written.update(dims)
        for i, p in enumerate(reversed(stack)):
            loops[p]["ops"] = int(loops[p]["ops"]) + 1  # type: ignore[call-overload]
            loops[p]["height"] = max(int(loops[p]["height"]), i)  # type: ignore[call-overload]
            if op != "write":
                loops[p]["compute"] = True
        if op in ("add", "max") and o.group(4).count("%") == 1:  # a reduction: dims dropped
            reduced_from = set(dims)
            for prev in lines:
                pm = _OP.match(prev)
                if pm and pm.group(3) not in ("add", "max", "write"):
                    reduced.update({_base(d.strip()) for d in pm.group(2).split(",")
                                    if d.strip()} - reduced_from)
    out = np.zeros((len(loops), LOOP_FEATURES), dtype=np.float32)
    for i, loop in enumerate(loops):
        size, tail = int(loop["size"]), int(loop["tail"])  # type: ignore[call-overload]
        cover = 1.0
        for j in range(i, len(loops)):
            if j == i or i in loops[j]["parents"]:  # type: ignore[operator]
                if loops[j]["var"] == loop["var"]:
                    cover *= max(int(loops[j]["size"]), 1)  # type: ignore[call-overload]
        marks = str(loop["marks"])
        out[i] = [math.log2(size + 1) / 10, tail > 0, math.log2(tail + 1) / 10,
                  int(loop["depth"]) / 10, int(loop["height"]) / 10,  # type: ignore[call-overload]
                  "vectorize" in marks, "unroll" in marks, loop["var"] in reduced,
                  loop["var"] in written, bool(loop["compute"]), math.log2(cover + 1) / 10,
                  int(loop["children"]) == 0, int(loop["ops"]) / 4,  # type: ignore[call-overload]
                  *access.get(str(loop["var"]), [0.0, 0.0, 0.0, 0.0])]
    return out


@dataclasses.dataclass
class Batch:
    """Kernels as tensors: loops padded to the longest, with their mask."""
    loops: Array   # (n, L, LOOP_FEATURES)
    mask: Array    # (n, L) 1 for a loop
    plan: Array    # (n, plan features)


def featurize(rows: Sequence[Record], plan_names: Optional[Sequence[str]] = None) -> Batch:
    names = list(plan_names) if plan_names is not None else plan_feature_names(rows)
    cache: Dict[str, Dict[str, List[float]]] = {}
    per = []
    for r in rows:
        if r.program not in cache:
            cache[r.program] = access_features(r.program)
        per.append(_loops_with(r.loop_tree, cache[r.program]))
    longest = max([len(p) for p in per] + [1])
    loops = np.zeros((len(rows), longest, LOOP_FEATURES), dtype=np.float32)
    mask = np.zeros((len(rows), longest), dtype=np.float32)
    for i, p in enumerate(per):
        loops[i, :len(p)] = p
        mask[i, :len(p)] = 1
    plan = np.array([[r.plan_features.get(n, 0.0) for n in names] for r in rows],
                    dtype=np.float32).reshape(len(rows), len(names))
    return Batch(loops, mask, plan)


def relative_log_gflops(rows: Sequence[Record]) -> Array:
    """log GFLOPS less its program's mean (per run: hosts differ)."""
    y = np.log(np.array([r.gflops for r in rows], dtype=np.float64))
    out = y.copy()
    groups: Dict[int, List[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(r.run_id, []).append(i)
    for idx in groups.values():
        out[idx] -= y[idx].mean()
    return out.astype(np.float32)


def rank(a: Array) -> Array:
    """Ranks from 0, ties given their average rank."""
    order = np.argsort(a, kind="mergesort")
    ranks = np.empty(len(a), dtype=np.float64)
    sorted_a = a[order]
    i = 0
    while i < len(a):
        j = i
        while j + 1 < len(a) and sorted_a[j + 1] == sorted_a[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(a: Array, b: Array) -> float:
    ra, rb = rank(np.asarray(a, dtype=np.float64)), rank(np.asarray(b, dtype=np.float64))
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def spearman_by_program(predicted: Array, rows: Sequence[Record],
                        min_kernels: int = 10) -> Dict[int, float]:
    """The Spearman correlation of predicted and measured GFLOPS over each run's kernels (runs
    with at least `min_kernels`), by run id."""
    groups: Dict[int, List[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(r.run_id, []).append(i)
    g = np.array([r.gflops for r in rows])
    return {run: spearman(predicted[idx], g[idx]) for run, idx in groups.items()
            if len(idx) >= min_kernels}


def ridge(train: Sequence[Record], lam: float = 1e-3) -> Tuple[List[str], Array]:
    """The baseline: a ridge regression of relative log GFLOPS on the plan features."""
    names = plan_feature_names(train)
    x = featurize(train, names).plan.astype(np.float64)
    y = relative_log_gflops(train).astype(np.float64)
    w = np.linalg.solve(x.T @ x + lam * len(x) * np.eye(x.shape[1]), x.T @ y)
    return names, w


def _network(plan_width: int, hidden: int = 64):  # type: ignore[no-untyped-def]
    import torch

    class DeepSetsCostModel(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.loop = torch.nn.Sequential(
                torch.nn.Linear(LOOP_FEATURES, hidden), torch.nn.ReLU(),
                torch.nn.Linear(hidden, hidden), torch.nn.ReLU())
            self.head = torch.nn.Sequential(
                torch.nn.Linear(2 * hidden + plan_width, 2 * hidden), torch.nn.ReLU(),
                torch.nn.Linear(2 * hidden, hidden), torch.nn.ReLU(),
                torch.nn.Linear(hidden, 1))

        def forward(self, loops, mask, plan):  # type: ignore[no-untyped-def]
            h = self.loop(loops) * mask.unsqueeze(-1)
            summed = h.sum(dim=1)
            maxed = (h - (1 - mask.unsqueeze(-1)) * 1e4).max(dim=1).values
            return self.head(torch.cat([summed, maxed, plan], dim=-1)).squeeze(-1)

    return DeepSetsCostModel()


@dataclasses.dataclass
class TrainedCostModel:
    network: object           # torch.nn.Module
    plan_names: List[str]
    seconds: float
    losses: List[float]

    def predict(self, rows: Sequence[Record], batch: int = 4096) -> Array:
        import torch
        out = []
        with torch.no_grad():
            for i in range(0, len(rows), batch):
                b = featurize(rows[i:i + batch], self.plan_names)
                out.append(self.network(torch.from_numpy(b.loops), torch.from_numpy(b.mask),  # type: ignore[operator]
                                        torch.from_numpy(b.plan)).numpy())
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)


def _pairwise(pred: Any, y: Any, groups: Any) -> Any:
    """RankNet's loss over the pairs of one group (run) whose measured speeds differ by more than
    5%: softplus of the predicted order's error."""
    import torch
    same = groups.unsqueeze(0) == groups.unsqueeze(1)
    better = (y.unsqueeze(1) - y.unsqueeze(0)) > 0.05
    pairs = same & better
    if not bool(pairs.any()):
        return pred.sum() * 0
    margin = pred.unsqueeze(1) - pred.unsqueeze(0)
    return torch.nn.functional.softplus(-margin[pairs]).mean()


def train(rows: Sequence[Record], epochs: int = 30, seed: int = 0, batch: int = 512,
          lr: float = 2e-3, threads: int = 2, pairwise: float = 4.0) -> TrainedCostModel:
    """Fits the network to `rows`: mean squared error of relative log GFLOPS plus `pairwise` x
    RankNet's loss over the pairs of each run in a batch (batches are whole slices of runs:
    kernels are shuffled within their run, runs in order), Adam."""
    import torch
    if not rows:
        raise ValueError("no records to train on")
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    start = time.monotonic()
    names = plan_feature_names(rows)
    b = featurize(rows, names)
    y = torch.from_numpy(relative_log_gflops(rows))
    loops, mask, plan = (torch.from_numpy(b.loops), torch.from_numpy(b.mask),
                         torch.from_numpy(b.plan))
    net = _network(len(names))
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    runs = np.array([r.run_id for r in rows])
    groups = torch.from_numpy(runs)
    by_run: Dict[int, List[int]] = {}
    for i, r in enumerate(runs):
        by_run.setdefault(int(r), []).append(i)
    run_ids = list(by_run)
    losses = []
    for _ in range(epochs):
        # Runs in a random order, each run's kernels cut in random chunks of up to 64, the chunks
        # of all runs shuffled: a batch holds pairs of the same run.
        chunks: List[List[int]] = []
        for run in rng.permutation(run_ids):
            members = [int(i) for i in rng.permutation(by_run[int(run)])]
            chunks += [members[j:j + 64] for j in range(0, len(members), 64)]
        flat = [i for c in (chunks[k] for k in rng.permutation(len(chunks))) for i in c]
        order = torch.tensor(flat, dtype=torch.long)
        total = 0.0
        for i in range(0, len(rows), batch):
            idx = order[i:i + batch]
            pred = net(loops[idx], mask[idx], plan[idx])
            loss = torch.nn.functional.mse_loss(pred, y[idx])
            if pairwise > 0:
                loss = loss + pairwise * _pairwise(pred, y[idx], groups[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
        losses.append(total / len(rows))
    return TrainedCostModel(net, names, time.monotonic() - start, losses)
