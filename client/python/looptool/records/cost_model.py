"""A cost model learned from tuning records: ranks the schedules of a program it has never seen.

What it sees of a kernel: the server's plan features (what the code generator decided: vector
width, register block, unrolling, footprints outside the block) and every loop of its loop tree
(extent, tail, depth, height, vectorize/unroll marks, whether its variable is reduced or
written, the extent its tiles of that variable cover), the loops through a DeepSets network
(a per-loop MLP, summed and max-pooled), so any number of loops. It predicts log GFLOPS relative
to the program's mean: only the order of one program's schedules is learned, which is what a
search needs, and the peak of the host drops out.

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

from looptool.records import Record

Array = npt.NDArray[Any]

LOOP_FEATURES = 13
_LOOP = re.compile(r"^( *)for (\S+) in (\d+)(?: r (\d+))? : L\d+(.*)$")
_OP = re.compile(r"^( *)%\d+\[([^\]]*)\] <- (\w+)\((.*)\)$")


def _base(var: str) -> str:
    return var.rstrip("'")


def loop_features(loop_tree: str) -> Array:
    """One row of LOOP_FEATURES numbers per loop of `loop_tree` (the loop_tree observation), in
    order: log2 extent, has a tail, log2 tail, depth, height, vectorize, unroll, its variable
    reduced, its variable in the written output, encloses computation (not only a write), log2
    of what its variable's loops from it inward cover, innermost, operations enclosed."""
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
                  int(loop["children"]) == 0, int(loop["ops"]) / 4]  # type: ignore[call-overload]
    return out


@dataclasses.dataclass
class Batch:
    """Kernels as tensors: loops padded to the longest, with their mask."""
    loops: Array   # (n, L, LOOP_FEATURES)
    mask: Array    # (n, L) 1 for a loop
    plan: Array    # (n, plan features)


def featurize(rows: Sequence[Record], plan_names: Optional[Sequence[str]] = None) -> Batch:
    names = list(plan_names) if plan_names is not None else (
        list(rows[0].plan_features) if rows else [])
    per = [loop_features(r.loop_tree) for r in rows]
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
    names = list(train[0].plan_features)
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


def train(rows: Sequence[Record], epochs: int = 30, seed: int = 0, batch: int = 512,
          lr: float = 2e-3, threads: int = 2) -> TrainedCostModel:
    """Fits the network to `rows` (relative log GFLOPS, mean squared error, Adam)."""
    import torch
    if not rows:
        raise ValueError("no records to train on")
    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    start = time.monotonic()
    names = list(rows[0].plan_features)
    b = featurize(rows, names)
    y = torch.from_numpy(relative_log_gflops(rows))
    loops, mask, plan = (torch.from_numpy(b.loops), torch.from_numpy(b.mask),
                         torch.from_numpy(b.plan))
    net = _network(len(names))
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(epochs):
        order = torch.from_numpy(rng.permutation(len(rows)))
        total = 0.0
        for i in range(0, len(rows), batch):
            idx = order[i:i + batch]
            loss = torch.nn.functional.mse_loss(net(loops[idx], mask[idx], plan[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(idx)
        losses.append(total / len(rows))
    return TrainedCostModel(net, names, time.monotonic() - start, losses)
