"""A loop_set policy's cost model: ranks the schedules its episodes end in, untimed.

It reads the server's `plan_features` observation (what the code generator planned for a
schedule's kernel: vector width and lane waste, the register block, unrolling, gathers, the
footprints outside the block; backend/costmodel/plan_features.h) and predicts log2 of the
kernel's GFLOPS up to a constant per program: only the order of one program's schedules is
learned (a squared error on the differences of pairs of one run, plus RankNet's pairwise loss),
so the host's peak drops out. An MLP:

    x = (plan_features[names] - mean) / scale
    s = Out(relu(L_k(... relu(L_0(x)))))

An episode is ranked by s - loss_weight * loss, where loss is how much less likely than the
policy's greedy episode it is (nats): the policy's own preference tempers the model's errors
(loss_weight is chosen on the validation programs' episodes: bench/rl/ranking_bench.py).

It is trained on tuning records (every kernel a search measured: looptool.records), where the
plan features of each kernel are kept, and stored in the policy file under "cost" (names, mean,
scale, layers); client/cpp/policy.cc reads the same entry and computes the same number.

    PYTHONPATH=bazel-bin/client/python:client/python /usr/bin/python3 -m looptool.rl.plan_cost \\
        --records=records.db --policy=loop_set.json --out=loop_set.json [--epochs=80]
"""

import argparse
import dataclasses
import json
import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from looptool.rl import policy_file

Array = npt.NDArray[Any]
Layer = Tuple[Array, Array]
OBSERVATION = "plan_features"


@dataclass
class PlanCost:
    """The weights and the numpy forward pass (float64) of the cost model."""
    names: List[str]
    mean: Array
    scale: Array
    layers: List[Layer] = field(default_factory=list)   # ReLU between, the last one to 1
    loss_weight: float = 0.0  # an episode's rank: predict() - loss_weight * its loss

    def __post_init__(self) -> None:
        self.mean = np.asarray(self.mean, np.float64)
        self.scale = np.asarray(self.scale, np.float64)
        if not self.names or self.mean.shape != (len(self.names),) or \
                self.scale.shape != (len(self.names),) or not np.all(self.scale > 0):
            raise ValueError("cost: names, mean and scale must have one positive scale per name")
        width = len(self.names)
        for w, b in self.layers:
            if w.shape[1] != width or b.shape != (w.shape[0],):
                raise ValueError("cost: layer sizes do not chain")
            width = w.shape[0]
        if not self.layers or width != 1:
            raise ValueError("cost: the last layer must give one number")
        if not (self.loss_weight >= 0 and math.isfinite(self.loss_weight)):
            raise ValueError("cost: loss_weight must be a number >= 0")

    def matrix(self, features: Sequence[Mapping[str, float]]) -> Array:
        """Rows of plan features (by name; a missing name is 0) -> the model's input matrix."""
        x = np.array([[float(f.get(n, 0.0)) for n in self.names] for f in features], np.float64)
        return x.reshape(len(features), len(self.names))

    def predict(self, features: Sequence[Mapping[str, float]]) -> Array:
        """Predicted log2 GFLOPS (up to a constant per program), one per row of features."""
        return self.predict_matrix(self.matrix(features))

    def predict_matrix(self, x: Array) -> Array:
        h = (np.asarray(x, np.float64) - self.mean) / self.scale
        for i, (w, b) in enumerate(self.layers):
            h = h @ w.T.astype(np.float64) + b.astype(np.float64)
            if i + 1 < len(self.layers):
                h = np.maximum(h, 0.0)
        out: Array = h[:, 0]
        return out

    def to_dict(self) -> Dict[str, Any]:
        return {"observation_space": OBSERVATION, "names": list(self.names),
                "loss_weight": float(self.loss_weight),
                "mean": policy_file._encode(self.mean.astype(np.float32)),
                "scale": policy_file._encode(self.scale.astype(np.float32)),
                "layers": [{"in": int(w.shape[1]), "out": int(w.shape[0]),
                            "weight": policy_file._encode(w), "bias": policy_file._encode(b)}
                           for w, b in self.layers]}

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "PlanCost":
        if d.get("observation_space") != OBSERVATION:
            raise ValueError(f"cost: observation_space must be {OBSERVATION}")
        names = [str(n) for n in d["names"]]
        n = len(names)
        layers = [(policy_file._decode(s["weight"], (s["out"], s["in"])),
                   policy_file._decode(s["bias"], (s["out"],))) for s in d["layers"]]
        loss_weight = d.get("loss_weight", 0.0)
        if isinstance(loss_weight, bool) or not isinstance(loss_weight, (int, float)):
            raise ValueError("cost: loss_weight is not a number")  # (as client/cpp/policy.cc)
        return cls(names, policy_file._decode(d["mean"], (n,)).astype(np.float64),
                   policy_file._decode(d["scale"], (n,)).astype(np.float64), layers,
                   float(loss_weight))


# --- training ---------------------------------------------------------------------------------

@dataclass
class Dataset:
    """Kernels of tuning records: plan features, log2 GFLOPS, and their run and program."""
    names: List[str]
    x: Array          # (N, F) float64
    y: Array          # (N,) log2 GFLOPS
    run: Array        # (N,) run id
    program: Array    # (N,) program id


def dataset(rows: Sequence[Any], names: Optional[Sequence[str]] = None) -> Dataset:
    """looptool.records.Record rows with positive GFLOPS -> a Dataset (the plan feature names
    of the first row unless given)."""
    rows = [r for r in rows if r.gflops > 0]
    if names is None:
        names = list(rows[0].plan_features) if rows else []
    x = np.array([[float(r.plan_features.get(n, 0.0)) for n in names] for r in rows], np.float64)
    return Dataset(list(names), x.reshape(len(rows), len(names)),
                   np.log2(np.array([r.gflops for r in rows], np.float64)),
                   np.array([r.run_id for r in rows], np.int64),
                   np.array([r.program_id for r in rows], np.int64))


def _pairs(run: Array, count: int, rng: np.random.Generator) -> Tuple[Array, Array]:
    """`count` random pairs (i, j) of kernels of one run."""
    order = np.argsort(run, kind="stable")
    sorted_run = run[order]
    starts = np.searchsorted(sorted_run, sorted_run, side="left")
    ends = np.searchsorted(sorted_run, sorted_run, side="right")
    pick = rng.integers(0, len(run), count)
    span = ends[pick] - starts[pick]
    other = starts[pick] + (rng.random(count) * span).astype(np.int64)
    return order[pick], order[other]


def train(data: Dataset, epochs: int = 40, hidden: Sequence[int] = (64, 64), lr: float = 3e-3,
          pairs_per_epoch: int = 200_000, batch: int = 2048, seed: int = 0,
          log: Any = None) -> PlanCost:
    """Fits the MLP to pairs of kernels of one run: (s_i - s_j) to (y_i - y_j) by squared error,
    plus RankNet's logistic loss on their order where they differ by more than 5%."""
    import torch
    from torch import nn
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    mean = data.x.mean(axis=0)
    scale = data.x.std(axis=0)
    scale = np.where(scale > 1e-6, scale, 1.0)
    # as the file keeps them (float32), so that a model and its file's predict the same
    mean, scale = (v.astype(np.float32).astype(np.float64) for v in (mean, scale))
    sizes = [len(data.names), *hidden, 1]
    net = nn.Sequential(*[m for a, b in zip(sizes, sizes[1:])
                          for m in (nn.Linear(a, b), nn.ReLU())][:-1]).double()
    x = torch.from_numpy((data.x - mean) / scale)
    y = torch.from_numpy(data.y)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(epochs, 1))
    threshold = math.log2(1.05)
    for epoch in range(epochs):
        i, j = (torch.from_numpy(a) for a in _pairs(data.run, pairs_per_epoch, rng))
        total = 0.0
        for k in range(0, pairs_per_epoch, batch):
            a, b = i[k:k + batch], j[k:k + batch]
            ds = net(x[a])[:, 0] - net(x[b])[:, 0]
            dy = y[a] - y[b]
            order = (dy.abs() > threshold).double()
            rank = nn.functional.softplus(-torch.sign(dy) * ds * 4.0) * order
            loss = ((ds - dy) ** 2).mean() + rank.mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss) * len(a)
        sched.step()
        if log is not None and (epoch % 10 == 0 or epoch == epochs - 1):
            log(f"cost epoch {epoch}: loss {total / pairs_per_epoch:.4f}")
    linears = [m for m in net if isinstance(m, nn.Linear)]
    return PlanCost(list(data.names), mean, scale,
                    [(m.weight.detach().numpy().astype(np.float32).copy(),
                      m.bias.detach().numpy().astype(np.float32).copy()) for m in linears])


def _ranks(v: Array) -> Array:
    """Ranks with ties averaged (as Spearman's rho wants)."""
    order = np.argsort(v, kind="stable")
    r = np.empty(len(v), np.float64)
    r[order] = np.arange(len(v), dtype=np.float64)
    for value in np.unique(v):
        tie = v == value
        if tie.sum() > 1:
            r[tie] = r[tie].mean()
    return r


def spearman_per_run(model: PlanCost, data: Dataset, min_kernels: int = 10) -> List[float]:
    """Spearman's rho of predicted and measured GFLOPS, per run of at least `min_kernels`."""
    pred = model.predict_matrix(data.x)
    out = []
    for run in np.unique(data.run):
        m = data.run == run
        if m.sum() < min_kernels:
            continue
        a, b = _ranks(pred[m]), _ranks(data.y[m])
        sa, sb = a - a.mean(), b - b.mean()
        denom = math.sqrt(float((sa ** 2).sum() * (sb ** 2).sum()))
        out.append(float((sa * sb).sum() / denom) if denom > 0 else 0.0)
    return out


def top1_regret(model: PlanCost, data: Dataset) -> List[float]:
    """Per run: the measured GFLOPS of the kernel the model ranks first over the run's best
    (what choosing by the model alone would reach)."""
    pred = model.predict_matrix(data.x)
    out = []
    for run in np.unique(data.run):
        m = np.flatnonzero(data.run == run)
        out.append(float(2.0 ** (data.y[m[np.argmax(pred[m])]] - data.y[m].max())))
    return out


def fit_records(path: str, epochs: int = 80, hidden: Sequence[int] = (128, 128), seed: int = 0,
                log: Any = None, loss_weight: float = 0.5) -> Tuple[PlanCost, Dict[str, Any]]:
    """A cost model trained on the train split of the records at `path`, and how well it ranks
    the validation split's runs (Spearman's rho per run; the first-ranked kernel's GFLOPS over
    the run's best)."""
    from looptool import records as records_lib
    t0 = time.time()
    train_rows = records_lib.load(path, split="train")
    if not train_rows:
        raise ValueError(f"{path}: no train records")
    data = dataset(train_rows)
    # (replace() checks the weight as the constructor does)
    model = dataclasses.replace(train(data, epochs, hidden, seed=seed, log=log),
                                loss_weight=loss_weight)
    val = dataset(records_lib.load(path, split="validation"), data.names)
    rho = spearman_per_run(model, val) if len(val.y) else []
    regret = top1_regret(model, val) if len(val.y) else []
    return model, {"train_kernels": int(len(data.y)), "validation_runs": len(rho),
                   "spearman_mean": float(np.mean(rho)) if rho else 0.0,
                   "spearman_median": float(np.median(rho)) if rho else 0.0,
                   "top1_over_best_geomean":
                       float(2.0 ** np.mean(np.log2(regret))) if regret else 0.0,
                   "epochs": epochs, "hidden": list(hidden), "seed": seed,
                   "loss_weight": loss_weight,
                   "seconds": round(time.time() - t0, 1)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    from looptool.rl import loop_set
    p = argparse.ArgumentParser(prog="python3 -m looptool.rl.plan_cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", required=True)
    p.add_argument("--policy", required=True, help="the loop_set policy file to add it to")
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=80)
    p.add_argument("--hidden", default="128,128")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--loss-weight", type=float, default=0.5,
                   help="an episode's rank: the model's score minus this times its loss")
    args = p.parse_args(argv)
    if not (args.loss_weight >= 0 and math.isfinite(args.loss_weight)):
        p.error("--loss-weight must be a number >= 0")
    policy = loop_set.load(args.policy)
    model, stats = fit_records(args.records, args.epochs,
                               [int(h) for h in args.hidden.split(",")], args.seed,
                               log=lambda m: print(m, file=sys.stderr),
                               loss_weight=args.loss_weight)
    policy.cost = model
    policy.meta["cost"] = dict(stats, command="python3 -m looptool.rl.plan_cost " +
                               " ".join(argv if argv is not None else sys.argv[1:]))
    policy.save(args.out)
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
