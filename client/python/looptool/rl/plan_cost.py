"""A loop_set policy's cost model: ranks the schedules its episodes end in, untimed.

It reads the server's `plan_features` observation (what the code generator planned for a
schedule's kernel: vector width and lane waste, the register block, unrolling, gathers, the
footprints outside the block; backend/costmodel/plan_features.h) and predicts log2 of the
kernel's GFLOPS up to a constant per program: only the order of one program's schedules is
learned (a squared error on the differences of pairs of one run, plus RankNet's pairwise loss),
so the host's peak drops out. An MLP:

    x = (plan_features[names] - mean) / scale
    s = mlp_weight * Out(relu(L_k(... relu(L_0(x))))) + sum of the trees' leaves

The trees (optional, --trees=N) are XGBoost's pairwise ranking trees over the raw plan features,
trained on the same pairs of one run and blended in with --tree-share of the score, their
leaves scaled so that they spread within a run as much as the MLP does (blend()): a model of
another kind, whose errors differ from the MLP's. --trees-onto-policy blends them onto the
policy's cost model as it is, without training an MLP again.

An episode is ranked by s - loss_weight * loss, where loss is how much less likely than the
policy's greedy episode it is (nats): the policy's own preference tempers the model's errors
(loss_weight is chosen on the validation programs' episodes: bench/rl/ranking_bench.py).

It is trained on tuning records (every kernel a search measured: looptool.records), where the
plan features of each kernel are kept, and stored in the policy file under "cost" (names, mean,
scale, layers; mlp_weight and trees when it has them); client/cpp/policy.cc reads the same
entry and computes the same number. Records
of a policy's own episodes (runs of search policy_guided: `looptool.records generate
--search=policy_guided --policy=...`) are what it must rank at its use; --episode-share draws that
share of the training pairs from them. Several seeds (--seed=0,1) train one model each, and
--with=FILE,... adds earlier models; their mean is kept as one MLP (ensemble()).

    PYTHONPATH=bazel-bin/client/python:client/python /usr/bin/python3 -m looptool.rl.plan_cost \\
        --records=records.db --policy=loop_set.json --out=loop_set.json [--epochs=80] \\
        [--seed=0,1] [--episode-share=0.6] [--with=earlier.json] [--loss-weight=0.5] \\
        [--trees=600 [--tree-depth=6] [--tree-share=0.3] [--trees-onto-policy]]
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

from looptool.records import plan_feature_names
from looptool.rl import policy_file

Array = npt.NDArray[Any]
Layer = Tuple[Array, Array]
OBSERVATION = "plan_features"


# Nodes of a tree ensemble, at most (a file's; client/cpp/plan_cost.h has the same bound).
MAX_TREE_NODES = 1 << 22


@dataclass
class Trees:
    """Regression trees over the raw plan features (not normalized), their leaves summed: the
    nodes of all trees in one set of arrays, each tree's nodes after its root and every child
    after its parent. At an inner node (feature >= 0) a kernel goes left when float32(its
    feature) < threshold (XGBoost's rule), else right; a leaf (feature -1) adds its value."""
    roots: Array      # (T,) int64: each tree's root node
    feature: Array    # (N,) int64: the feature's index in PlanCost.names; -1 at a leaf
    threshold: Array  # (N,) float32
    left: Array       # (N,) int64: the child for feature < threshold (-1 at a leaf)
    right: Array      # (N,) int64
    value: Array      # (N,) float32: a leaf's value (0 at inner nodes)

    def check(self, features: int) -> None:
        """ValueError, saying what, unless the arrays are one tree ensemble over `features`
        (as client/cpp/plan_cost.cc checks them)."""
        n = len(self.feature)
        if not 0 < n <= MAX_TREE_NODES or not 0 < len(self.roots) <= n or any(
                len(a) != n for a in (self.threshold, self.left, self.right, self.value)):
            raise ValueError(f"cost.trees: 1..{MAX_TREE_NODES} nodes, as many of each field, "
                             "and 1..nodes roots")
        inner = self.feature >= 0
        idx = np.arange(n)
        if np.any(self.feature >= features) or np.any(self.feature < -1) or \
                np.any((self.roots < 0) | (self.roots >= n)) or \
                np.any(inner & ((self.left <= idx) | (self.left >= n) |
                                (self.right <= idx) | (self.right >= n))) or \
                np.any(~inner & ((self.left != -1) | (self.right != -1))) or \
                not np.all(np.isfinite(self.threshold)) or not np.all(np.isfinite(self.value)):
            raise ValueError("cost.trees: a node's feature, children or numbers are out of "
                             "range (children come after their parent)")

    def predict_matrix(self, x: Array) -> Array:
        """The sum of the trees' leaves for each row of `x` (features in names' order)."""
        x32 = np.asarray(x, np.float64).astype(np.float32)
        rows = np.arange(len(x32))
        out = np.zeros(len(x32), np.float64)
        for root in self.roots:
            node = np.full(len(x32), int(root), np.int64)
            while True:
                f = self.feature[node]
                inner = f >= 0
                if not inner.any():
                    break
                go_left = x32[rows, np.maximum(f, 0)] < self.threshold[node]
                node = np.where(inner, np.where(go_left, self.left[node], self.right[node]),
                                node)
            out += self.value[node].astype(np.float64)
        return out

    def scaled(self, factor: float) -> "Trees":
        """The same trees with every leaf times `factor` (as float32)."""
        return dataclasses.replace(
            self, value=(self.value.astype(np.float64) * factor).astype(np.float32))

    def to_dict(self) -> Dict[str, Any]:
        return {"nodes": int(len(self.feature)), "trees": int(len(self.roots)),
                "roots": _encode_ints(self.roots), "feature": _encode_ints(self.feature),
                "threshold": policy_file._encode(self.threshold),
                "left": _encode_ints(self.left), "right": _encode_ints(self.right),
                "value": policy_file._encode(self.value)}

    @classmethod
    def from_dict(cls, d: Dict[str, Any], features: int) -> "Trees":
        n, t = d.get("nodes"), d.get("trees")
        if not isinstance(n, int) or isinstance(n, bool) or not isinstance(t, int) or \
                isinstance(t, bool) or not 0 < n <= MAX_TREE_NODES or not 0 < t <= n:
            raise ValueError(f"cost.trees: nodes and trees must be integers, "
                             f"0 < trees <= nodes <= {MAX_TREE_NODES}")
        trees = cls(_decode_ints(d["roots"], t), _decode_ints(d["feature"], n),
                    policy_file._decode(d["threshold"], (n,)), _decode_ints(d["left"], n),
                    _decode_ints(d["right"], n), policy_file._decode(d["value"], (n,)))
        trees.check(features)
        return trees


def _encode_ints(a: Array) -> str:
    """Integers as the file keeps them: float32, exact below 2^24 (MAX_TREE_NODES is below)."""
    return policy_file._encode(np.asarray(a, np.float32))


def _decode_ints(text: str, n: int) -> Array:
    v = policy_file._decode(text, (n,))
    if not np.all(v == np.round(v)):
        raise ValueError("cost.trees: an index is not an integer")
    return v.astype(np.int64)


def trees_from_xgboost(booster: Any) -> Trees:
    """An XGBoost booster's trees (numerical splits, no categorical ones) as Trees: its margin
    less its constant base_score, which no ranking sees."""
    model = json.loads(bytes(booster.save_raw("json")))["learner"]["gradient_booster"]["model"]
    roots: List[int] = []
    feature: List[int] = []
    left: List[int] = []
    right: List[int] = []
    threshold: List[float] = []
    value: List[float] = []
    for tree in model["trees"]:
        base = len(feature)
        roots.append(base)
        kids_l, kids_r = tree["left_children"], tree["right_children"]
        for i, cond in enumerate(tree["split_conditions"]):
            leaf = kids_l[i] == -1
            feature.append(-1 if leaf else int(tree["split_indices"][i]))
            threshold.append(0.0 if leaf else cond)
            left.append(-1 if leaf else base + kids_l[i])
            right.append(-1 if leaf else base + kids_r[i])
            value.append(cond if leaf else 0.0)
    return Trees(np.array(roots, np.int64), np.array(feature, np.int64),
                 np.array(threshold, np.float32), np.array(left, np.int64),
                 np.array(right, np.int64), np.array(value, np.float32))


@dataclass
class PlanCost:
    """The weights and the numpy forward pass (float64) of the cost model."""
    names: List[str]
    mean: Array
    scale: Array
    layers: List[Layer] = field(default_factory=list)   # ReLU between, the last one to 1
    loss_weight: float = 0.0  # an episode's rank: predict() - loss_weight * its loss
    # Optional regression trees added to the MLP's score, that score weighted by mlp_weight
    # (fit_records --trees: a blend of the two kinds of model).
    trees: Optional[Trees] = None
    mlp_weight: float = 1.0

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
        if not (self.mlp_weight >= 0 and math.isfinite(self.mlp_weight)):
            raise ValueError("cost: mlp_weight must be a number >= 0")
        if self.trees is not None:
            self.trees.check(len(self.names))

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
        if self.mlp_weight != 1.0:
            out = out * self.mlp_weight
        if self.trees is not None:
            out = out + self.trees.predict_matrix(x)
        return out

    def to_dict(self) -> Dict[str, Any]:
        d = {"observation_space": OBSERVATION, "names": list(self.names),
             "loss_weight": float(self.loss_weight),
             "mean": policy_file._encode(self.mean.astype(np.float32)),
             "scale": policy_file._encode(self.scale.astype(np.float32)),
             "layers": [policy_file.encode_layer(w, b) for w, b in self.layers]}
        if self.trees is not None:
            d["mlp_weight"] = float(self.mlp_weight)
            d["trees"] = self.trees.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "PlanCost":
        if d.get("observation_space") != OBSERVATION:
            raise ValueError(f"cost: observation_space must be {OBSERVATION}")
        names = [str(n) for n in d["names"]]
        n = len(names)
        layers = [policy_file.decode_layer(s) for s in d["layers"]]
        loss_weight = d.get("loss_weight", 0.0)
        if isinstance(loss_weight, bool) or not isinstance(loss_weight, (int, float)):
            raise ValueError("cost: loss_weight is not a number")  # (as client/cpp/policy.cc)
        mlp_weight = d.get("mlp_weight", 1.0)
        if isinstance(mlp_weight, bool) or not isinstance(mlp_weight, (int, float)):
            raise ValueError("cost: mlp_weight is not a number")
        trees = d.get("trees")
        if trees is not None and not isinstance(trees, dict):
            raise ValueError("cost.trees is not an object")
        return cls(names, policy_file._decode(d["mean"], (n,)).astype(np.float64),
                   policy_file._decode(d["scale"], (n,)).astype(np.float64), layers,
                   float(loss_weight),
                   Trees.from_dict(trees, n) if trees is not None else None, float(mlp_weight))


def _fold_normalization(m: PlanCost) -> PlanCost:
    """The same function with mean 0 and scale 1: (x - mean) / scale folded into the first
    layer (to the float32 the file keeps)."""
    w, b = m.layers[0]
    w64 = w.astype(np.float64) / m.scale
    b64 = b.astype(np.float64) - w64 @ m.mean
    return PlanCost(list(m.names), np.zeros(len(m.names)), np.ones(len(m.names)),
                    [(w64.astype(np.float32), b64.astype(np.float32)), *m.layers[1:]],
                    m.loss_weight, m.trees, m.mlp_weight)


def ensemble(models: Sequence[PlanCost]) -> PlanCost:
    """One PlanCost that predicts the mean of `models`' predictions, exactly: their layers side
    by side (the first ones stacked, the hidden ones block-diagonal, the last ones concatenated
    and divided by their number), so that the file format and client/cpp/policy.cc read it as
    one MLP (the file keeps the hidden layers' blocks alone: policy_file.encode_layer). The models must share their names and depth; where their normalizations differ
    (trained on other data) each is folded into its first layer. The first's loss_weight is
    kept."""
    if not models:
        raise ValueError("ensemble: no models")
    if any(m.trees is not None or m.mlp_weight != 1.0 for m in models):
        raise ValueError("ensemble: a model has trees (blend the trees after the ensemble)")
    first = models[0]
    for m in models[1:]:
        if m.names != first.names or len(m.layers) != len(first.layers):
            raise ValueError("ensemble: the models differ in their inputs or their depth")
    if any(not np.array_equal(m.mean, first.mean) or not np.array_equal(m.scale, first.scale)
           for m in models[1:]):
        models = [_fold_normalization(m) for m in models]
        first = models[0]
    depth = len(first.layers)
    layers: List[Layer] = []
    for i in range(depth):
        ws = [m.layers[i][0].astype(np.float64) for m in models]
        bs = [m.layers[i][1].astype(np.float64) for m in models]
        if i + 1 == depth:  # the output: the mean of the members' (one linear layer: of rows)
            w = np.mean(ws, axis=0) if depth == 1 else np.concatenate(ws, axis=1) / len(ws)
            b = np.mean(bs, axis=0)
        elif i == 0:  # every member reads the same input
            w, b = np.concatenate(ws, axis=0), np.concatenate(bs)
        else:  # each member's hidden units read only its own
            w = np.zeros((sum(x.shape[0] for x in ws), sum(x.shape[1] for x in ws)))
            r = c = 0
            for x in ws:
                w[r:r + x.shape[0], c:c + x.shape[1]] = x
                r, c = r + x.shape[0], c + x.shape[1]
            b = np.concatenate(bs)
        layers.append((w.astype(np.float32), b.astype(np.float32)))
    return PlanCost(list(first.names), first.mean.copy(), first.scale.copy(), layers,
                    first.loss_weight)


# --- training ---------------------------------------------------------------------------------

@dataclass
class Dataset:
    """Kernels of tuning records: plan features, log2 GFLOPS, and their run and program."""
    names: List[str]
    x: Array          # (N, F) float64
    y: Array          # (N,) log2 GFLOPS
    run: Array        # (N,) run id
    program: Array    # (N,) program id
    episodes: Array   # (N,) bool: of a run over a policy's episodes (EPISODE_SEARCHES)


# Runs whose kernels are the ends of a policy's own episodes, what --search=policy ranks
# (`looptool.records generate --search=policy_guided --policy=...`), not a search's wanderings.
# The records keep the search, not the policy: policy_guided with a sketch_value policy (an
# evolution from its sketches) would count too, so keep such runs in another records file.
EPISODE_SEARCHES = ("policy_guided", "policy")


def dataset(rows: Sequence[Any], names: Optional[Sequence[str]] = None) -> Dataset:
    """looptool.records.Record rows with positive GFLOPS -> a Dataset (the plan feature names
    of the rows, records.plan_feature_names, unless given; 0 where a row lacks one)."""
    rows = [r for r in rows if r.gflops > 0]
    if names is None:
        names = plan_feature_names(rows)
    x = np.array([[float(r.plan_features.get(n, 0.0)) for n in names] for r in rows], np.float64)
    return Dataset(list(names), x.reshape(len(rows), len(names)),
                   np.log2(np.array([r.gflops for r in rows], np.float64)),
                   np.array([r.run_id for r in rows], np.int64),
                   np.array([r.program_id for r in rows], np.int64),
                   np.array([r.search in EPISODE_SEARCHES for r in rows], bool))


def subset(data: Dataset, mask: Array) -> Dataset:
    """The kernels of `data` where `mask` holds."""
    return Dataset(list(data.names), data.x[mask], data.y[mask], data.run[mask],
                   data.program[mask], data.episodes[mask])


def _pairs(run: Array, count: int, rng: np.random.Generator,
           p: Optional[Array] = None) -> Tuple[Array, Array]:
    """`count` random pairs (i, j) of kernels of one run: i drawn with probabilities `p`
    (uniformly when None), j uniformly from i's run."""
    order = np.argsort(run, kind="stable")
    sorted_run = run[order]
    starts = np.searchsorted(sorted_run, sorted_run, side="left")
    ends = np.searchsorted(sorted_run, sorted_run, side="right")
    if p is None:
        pick = rng.integers(0, len(run), count)
    else:  # the same draw, in the sorted order
        pick = rng.choice(len(run), count, p=p[order])
    span = ends[pick] - starts[pick]
    other = starts[pick] + (rng.random(count) * span).astype(np.int64)
    return order[pick], order[other]


def pair_weights(data: Dataset, episode_share: float) -> Optional[Array]:
    """Per kernel, the probability it is drawn first in a pair: `episode_share` of the draws go to
    the kernels of episode runs (uniformly among them), the rest to the others; None (uniform
    over all) when the share is 0 or one of the two groups is empty."""
    n_ep = int(data.episodes.sum())
    if episode_share <= 0 or n_ep == 0 or n_ep == len(data.y):
        return None
    share = min(float(episode_share), 1.0)
    return np.where(data.episodes, share / n_ep, (1.0 - share) / (len(data.y) - n_ep))


def train(data: Dataset, epochs: int = 40, hidden: Sequence[int] = (64, 64), lr: float = 3e-3,
          pairs_per_epoch: int = 200_000, batch: int = 2048, seed: int = 0,
          log: Any = None, episode_share: float = 0.0) -> PlanCost:
    """Fits the MLP to pairs of kernels of one run: (s_i - s_j) to (y_i - y_j) by squared error,
    plus RankNet's logistic loss on their order where they differ by more than 5%. Pairs are
    drawn by kernel, `episode_share` of them from episode runs when both kinds are there
    (pair_weights)."""
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
    weights = pair_weights(data, episode_share)
    for epoch in range(epochs):
        i, j = (torch.from_numpy(a) for a in _pairs(data.run, pairs_per_epoch, rng, weights))
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


def train_trees(data: Dataset, rounds: int, depth: int = 6, seed: int = 0) -> Trees:
    """XGBoost's pairwise ranking (rank:pairwise: pairs of kernels of one run) fitted to the
    order of each run's kernels, `rounds` trees of depth <= `depth` over the raw features.
    Needs python3-xgboost (ImportError otherwise)."""
    import xgboost
    order = np.argsort(data.run, kind="stable")
    _, counts = np.unique(data.run[order], return_counts=True)
    matrix = xgboost.DMatrix(data.x[order], label=data.y[order])
    matrix.set_group(counts)
    params = {"objective": "rank:pairwise", "eta": 0.1, "max_depth": int(depth),
              "subsample": 0.8, "colsample_bytree": 0.8, "tree_method": "hist", "nthread": 2,
              "seed": int(seed)}
    return trees_from_xgboost(xgboost.train(params, matrix, int(rounds)))


def _within_run_std(v: Array, run: Array) -> float:
    """The standard deviation of `v` about each run's mean, over all kernels."""
    order = np.argsort(run, kind="stable")
    _, starts, counts = np.unique(run[order], return_index=True, return_counts=True)
    means = np.add.reduceat(v[order], starts) / counts
    return float(np.sqrt(np.mean((v[order] - np.repeat(means, counts)) ** 2)))


def blend(model: PlanCost, trees: Trees, data: Dataset, share: float) -> PlanCost:
    """`model` (an MLP, no trees) and `trees` as one PlanCost: (1 - share) of the MLP's score
    plus `share` of the trees' sum, scaled so that over `data` it spreads within each run as
    much as the MLP's score does (the two score on unrelated scales)."""
    if model.trees is not None or not 0 < share < 1:
        raise ValueError("blend: an MLP without trees and a share strictly between 0 and 1")
    spread = _within_run_std(trees.predict_matrix(data.x), data.run)
    factor = _within_run_std(model.predict_matrix(data.x), data.run) / spread if spread else 0
    return dataclasses.replace(model, trees=trees.scaled(share * factor),
                               mlp_weight=1.0 - share)


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


def _ranking_stats(model: PlanCost, val: Dataset, prefix: str) -> Dict[str, Any]:
    rho = spearman_per_run(model, val) if len(val.y) else []
    regret = top1_regret(model, val) if len(val.y) else []
    return {f"{prefix}runs": len(rho),
            f"{prefix}spearman_mean": float(np.mean(rho)) if rho else 0.0,
            f"{prefix}spearman_median": float(np.median(rho)) if rho else 0.0,
            f"{prefix}top1_over_best_geomean":
                float(2.0 ** np.mean(np.log2(regret))) if regret else 0.0}


def fit_records(path: str, epochs: int = 80, hidden: Sequence[int] = (128, 128),
                seed: Any = 0, log: Any = None, loss_weight: float = 0.5,
                episode_share: float = 0.0,
                others: Sequence[PlanCost] = (), trees: int = 0, tree_depth: int = 6,
                tree_share: float = 0.3,
                onto: Optional[PlanCost] = None) -> Tuple[PlanCost, Dict[str, Any]]:
    """A cost model trained on the train split of the records at `path` (`episode_share` of its
    pairs from episode runs: train()); with several seeds (a sequence), one per seed and their
    ensemble(); with `others` (earlier models), the ensemble of each of them and that, as
    equals; with `trees` > 0, XGBoost's trees (train_trees) blended in with `tree_share`
    (blend()); with `onto` (an MLP trained before, without trees), no MLP is trained: the trees
    are blended onto it (its loss_weight kept). And how well it ranks the validation split's runs
    (Spearman's rho per run; the first-ranked kernel's GFLOPS over the run's best), the
    searches' runs (validation_*) and the policy episodes' runs (episodes_*) apart."""
    from looptool import records as records_lib
    t0 = time.time()
    train_rows = records_lib.load(path, split="train")
    if not train_rows:
        raise ValueError(f"{path}: no train records")
    data = dataset(train_rows, onto.names if onto is not None else None)
    # (replace() checks the weight as the constructor does)
    seeds = [int(x) for x in seed] if isinstance(seed, (list, tuple)) else [int(seed)]
    if not seeds:
        raise ValueError("fit_records: no seeds")
    for other in others:  # (before minutes of training, not after)
        if other.names != data.names or len(other.layers) != len(hidden) + 1:
            raise ValueError("fit_records: an earlier model reads other plan features, or has "
                             f"another depth ({len(other.layers)} layers, not "
                             f"{len(hidden) + 1}), than this one would")
    if onto is not None:
        if onto.trees is not None or others or trees <= 0:
            raise ValueError("fit_records: onto takes an MLP without trees, trees > 0 and no "
                             "other models")
        model = onto
    else:
        members = [train(data, epochs, hidden, seed=x, log=log, episode_share=episode_share)
                   for x in seeds]
        trained = ensemble(members) if len(members) > 1 else members[0]
        model = dataclasses.replace(ensemble([*others, trained]) if others else trained,
                                    loss_weight=loss_weight)
    if trees > 0:
        t1 = time.time()
        model = blend(model, train_trees(data, trees, tree_depth, seeds[0]), data, tree_share)
        if log is not None:
            log(f"cost trees: {trees} of depth <= {tree_depth} in {time.time() - t1:.0f} s, "
                f"{len(model.trees.feature) if model.trees else 0} nodes")
    val = dataset(records_lib.load(path, split="validation"), data.names)
    stats: Dict[str, Any] = {"train_kernels": int(len(data.y)),
                             "train_episode_kernels": int(data.episodes.sum())}
    stats.update(_ranking_stats(model, subset(val, ~val.episodes), "validation_"))
    stats.update(_ranking_stats(model, subset(val, val.episodes), "episodes_"))
    if onto is None:
        stats.update({"epochs": epochs, "hidden": list(hidden), "seed": seeds[0],
                      "loss_weight": loss_weight, "episode_share": episode_share,
                      "seeds": seeds, "other_members": len(others)})
    if trees > 0:
        stats.update({"trees": trees, "tree_depth": tree_depth, "tree_seed": seeds[0],
                      "tree_share": tree_share,
                      "tree_nodes": int(len(model.trees.feature)) if model.trees else 0})
    stats["seconds"] = round(time.time() - t0, 1)
    return model, stats


def load_cost(path: str) -> PlanCost:
    """The cost model of the loop_set policy file at `path`. OSError or ValueError, saying what
    is wrong, when it cannot be read, is no loop_set policy or has no cost model."""
    from looptool.rl import loop_set
    cost = loop_set.load(path).cost
    if cost is None:
        raise ValueError(f"{path} has no cost model")
    return cost


def main(argv: Optional[Sequence[str]] = None) -> int:
    from looptool.rl import loop_set
    p = argparse.ArgumentParser(prog="python3 -m looptool.rl.plan_cost", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", required=True)
    p.add_argument("--policy", required=True, help="the loop_set policy file to add it to")
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=80)
    p.add_argument("--hidden", default="128,128")
    p.add_argument("--seed", default="0",
                   help="a seed, or several (0,1): one model each, their mean kept (ensemble)")
    p.add_argument("--with", dest="with_", default="",
                   help="policy files whose cost models are averaged with the one trained here "
                        "(it, the mean of its seeds, and each of them count as one)")
    p.add_argument("--episode-share", type=float, default=0.0,
                   help="the share of training pairs drawn from runs over policy episodes")
    p.add_argument("--loss-weight", type=float, default=0.5,
                   help="an episode's rank: the model's score minus this times its loss")
    p.add_argument("--trees", type=int, default=0,
                   help="XGBoost ranking trees blended with the MLP (0: none; needs "
                        "python3-xgboost)")
    p.add_argument("--tree-depth", type=int, default=6)
    p.add_argument("--tree-share", type=float, default=0.3,
                   help="the trees' share of the score (each scaled to the MLP's spread)")
    p.add_argument("--trees-onto-policy", action="store_true",
                   help="train no MLP: blend the trees onto --policy's cost model (its "
                        "loss_weight kept; --epochs, --seed's others, --with, --episode-share "
                        "and --loss-weight unused)")
    args = p.parse_args(argv)
    if not (args.loss_weight >= 0 and math.isfinite(args.loss_weight)):
        p.error("--loss-weight must be a number >= 0")
    if not 0 <= args.trees <= 100_000 or not 1 <= args.tree_depth <= 16:
        p.error("--trees must be in 0..100000 and --tree-depth in 1..16")
    if args.trees and not 0 < args.tree_share < 1:
        p.error("--tree-share must be strictly between 0 and 1")
    if args.trees_onto_policy and (not args.trees or args.with_):
        p.error("--trees-onto-policy takes --trees and no --with")
    if not 0 <= args.episode_share <= 1:
        p.error("--episode-share must be between 0 and 1")
    try:
        seeds = [int(x) for x in args.seed.split(",")]
    except ValueError:
        p.error("--seed takes integers separated by commas")
    try:
        policy = loop_set.load(args.policy)
    except (OSError, ValueError) as e:
        p.error(f"--policy: {e}")
    onto = None
    if args.trees_onto_policy:
        onto = policy.cost
        if onto is None or onto.trees is not None:
            p.error("--trees-onto-policy: --policy has no cost model, or one with trees")
    others = []
    for f in (x for x in args.with_.split(",") if x):
        try:
            others.append(load_cost(f))
        except (OSError, ValueError) as e:
            p.error(f"--with: {e}")
    try:
        model, stats = fit_records(args.records, args.epochs,
                                   [int(h) for h in args.hidden.split(",")], seeds,
                                   log=lambda m: print(m, file=sys.stderr),
                                   loss_weight=args.loss_weight,
                                   episode_share=args.episode_share, others=others,
                                   trees=args.trees, tree_depth=args.tree_depth,
                                   tree_share=args.tree_share, onto=onto)
    except ImportError as e:
        print(f"plan_cost: --trees needs XGBoost (Debian's python3-xgboost): {e}",
              file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"plan_cost: {e}", file=sys.stderr)
        return 2
    command = "python3 -m looptool.rl.plan_cost " + " ".join(
        argv if argv is not None else sys.argv[1:])
    if onto is not None:  # the MLP's own training stays on record beside the trees'
        policy.meta["cost"] = dict(policy.meta.get("cost", {}), trees=dict(stats,
                                                                         command=command))
    else:
        policy.meta["cost"] = dict(stats, command=command)
    policy.cost = model
    policy.save(args.out)
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
