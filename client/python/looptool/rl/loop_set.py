"""A policy over the set of loops: builds a schedule in loop_nest's space from the untiled nest.

It reads the server's `loop_features` (a row per compute loop, row p being level L<p>; see
backend/features/loop_features.h), never the `sketches`, and scores every loop_nest action plus
"stop". The network is a DeepSets over the rows, so one set of weights serves any number of loops:

    e_r = relu(T_k(... relu(T_0(x_r))))               # every real row r (x_r[0] == 1)
    c   = [mean_r e_r, max_r e_r]                      # over the real rows
    h_r = relu(Mix([e_r, c]))                          # every row
    o_r = Head(h_r)                                     # 19: tile by 16 sizes, unroll, vectorize, merge
    inter(p, q) = Query(h_p) . Key(h_q)                 # interchange_L<p>_L<q>
    stop = Value([mean_r h_r, max_r h_r])

The scores are laid out as loop_nest's flat space (backend/actions/action_space.h): tile 16p+j,
interchange 256+16p+q, unroll 512+p, vectorize 528+p, merge 544+p (p, q < 16), then stop at 560.
Padding rows (levels past the tree's loops) are computed like the others and masked by the
server's `action_mask`. Greedy acting: the best allowed action, or stop when stop scores higher.

The policy file is the format of policy_file.py with kind "loop_set", preprocess "none",
input_size = the row width, num_actions = 560, and the layers "trunk" (list), "mix", "head",
"query", "key", "value", and optionally "cost": a cost model over the `plan_features` of the
states its episodes end in (plan_cost.py), which ranks them untimed, and "members": up to 7
other networks (each an object of those layers alone) whose episodes are played beside its own
(episodes.likely_episodes) and ranked by the same cost model. client/cpp/policy.cc reads
the same file and computes the same numbers.
"""

import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from looptool.rl import plan_cost, policy_file

LEVELS = 16
MAX_MEMBERS = 7  # a policy's other networks at most (client/cpp/policy.cc's kMaxMembers)
TILE_SIZES = (2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 96, 128, 256)
PER_ROW = len(TILE_SIZES) + 3
NUM_ACTIONS = 560
STOP = NUM_ACTIONS
FEATURES = 38
OBSERVATION = "loop_features"
KIND = "loop_set"

Layer = policy_file.Layer
Array = npt.NDArray[np.float32]


Array64 = npt.NDArray[np.float64]


def _relu(x: Array64) -> Array64:
    out: Array64 = np.maximum(x, 0.0)
    return out


def _apply(layer: Layer, x: Array64) -> Array64:
    """In float64 (as the C++ forward pass accumulates): the numbers reach the tens."""
    out: Array64 = x @ layer[0].T.astype(np.float64) + layer[1].astype(np.float64)
    return out


def layout(o: Array, inter: Array, stop: Array) -> Array:
    """Per-row outputs (B, R, 19), interchange scores (B, R, R) and stop (B,) -> (B, 561)."""
    b, r = o.shape[0], o.shape[1]
    n = min(r, LEVELS)
    pad = np.full((b, LEVELS, PER_ROW), -1e9, np.float32)
    pad[:, :n] = o[:, :n]
    ic = np.full((b, LEVELS, LEVELS), -1e9, np.float32)
    ic[:, :n, :n] = inter[:, :n, :n]
    out: Array = np.concatenate([pad[:, :, :16].reshape(b, -1), ic.reshape(b, -1), pad[:, :, 16],
                                 pad[:, :, 17], pad[:, :, 18], stop.reshape(b, 1)],
                                axis=1).astype(np.float32)
    return out


class LoopSetPolicy:
    """The weights and the numpy forward pass (float32) of a loop_set policy."""

    def __init__(self, trunk: Sequence[Tuple[Any, Any]], mix: Tuple[Any, Any],
                 head: Tuple[Any, Any], query: Tuple[Any, Any], key: Tuple[Any, Any],
                 value: Tuple[Any, Any], meta: Optional[Dict[str, Any]] = None,
                 cost: Optional[plan_cost.PlanCost] = None,
                 members: Sequence["LoopSetPolicy"] = ()) -> None:
        def f32(layer: Tuple[Any, Any]) -> Layer:
            return (np.asarray(layer[0], np.float32), np.asarray(layer[1], np.float32))
        self.kind = KIND
        self.action_space = "loop_nest"
        self.observation_space = OBSERVATION
        self.trunk = [f32(t) for t in trunk]
        self.mix, self.head, self.query, self.key, self.value = (
            f32(mix), f32(head), f32(query), f32(key), f32(value))
        self.meta = dict(meta or {})
        self.cost = cost  # ranks the states episodes end in (plan_cost.py); None: none
        self.input_size = int(self.trunk[0][0].shape[1])
        self.num_actions = NUM_ACTIONS
        # Other networks (the file's "members"): episodes.likely_episodes plays each network's.
        self.members = list(members)
        if len(self.members) > MAX_MEMBERS:
            raise ValueError(f"members: at most {MAX_MEMBERS} networks, not {len(self.members)}")
        for m in self.members:
            if m.cost is not None or m.members:
                raise ValueError("members are networks (layers only)")
            if m.input_size != self.input_size:
                raise ValueError("members read rows of another width")
        width = self.input_size
        for w, b in self.trunk:
            if w.shape[1] != width or b.shape != (w.shape[0],):
                raise ValueError("trunk sizes do not chain")
            width = w.shape[0]
        hidden = width
        want = {"mix": (hidden, 3 * hidden), "head": (PER_ROW, hidden),
                "query": (self.query[0].shape[0], hidden), "key": (self.query[0].shape[0], hidden),
                "value": (1, 2 * hidden)}
        for name, shape in want.items():
            w, b = getattr(self, name)
            if w.shape != shape or b.shape != (shape[0],):
                raise ValueError(f"{name} is {w.shape}, not {shape}")

    def scores(self, obs: "npt.ArrayLike") -> Array:
        """(B, R*F) or (R*F,) loop_features -> (B, 561) or (561,): loop_nest's 560 actions, stop
        (computed in float64, returned as float32)."""
        x: Array64 = np.asarray(obs, np.float64)
        single = x.ndim == 1
        x = x.reshape(x.shape[0] if not single else 1, -1, self.input_size)
        real = (x[:, :, 0] > 0.5).astype(np.float32)[:, :, None]      # (B, R, 1)
        count = np.maximum(real.sum(axis=1), 1.0)                     # (B, 1)
        e = x
        for layer in self.trunk:
            e = _relu(_apply(layer, e))
        mean = (e * real).sum(axis=1) / count
        mx = np.where(real > 0, e, -np.inf).max(axis=1)
        mx = np.where(np.isfinite(mx), mx, 0.0)
        ctx = np.concatenate([mean, mx], axis=1)[:, None, :].repeat(x.shape[1], axis=1)
        h = _relu(_apply(self.mix, np.concatenate([e, ctx], axis=2)))
        o = _apply(self.head, h)
        inter = np.einsum("brd,bqd->brq", _apply(self.query, h), _apply(self.key, h))
        hmean = (h * real).sum(axis=1) / count
        hmax = np.where(real > 0, h, -np.inf).max(axis=1)
        hmax = np.where(np.isfinite(hmax), hmax, 0.0)
        stop = _apply(self.value, np.concatenate([hmean, hmax], axis=1))[:, 0]
        out = layout(o.astype(np.float32), inter.astype(np.float32), stop.astype(np.float32))
        result: Array = out[0] if single else out
        return result

    def act(self, obs: "npt.ArrayLike", mask: "npt.ArrayLike") -> Optional[int]:
        """The greedy choice: an action index, or None for stop (also when nothing is allowed)."""
        s = self.scores(obs)
        # The server's mask may go on past the policy's actions (stream_L<p> and fold_L<p>,
        # appended to loop_nest after it was trained): those are never chosen.
        a = policy_file.masked_argmax(s[:NUM_ACTIONS], np.asarray(mask, bool)[:NUM_ACTIONS])
        if a is None or s[STOP] > s[a]:
            return None
        return a

    # --- the file -----------------------------------------------------------------------------

    def _layers(self) -> Dict[str, Any]:
        def layer(t: Layer) -> Dict[str, Any]:
            return policy_file.encode_layer(*t)
        return {"trunk": [layer(t) for t in self.trunk], "mix": layer(self.mix),
                "head": layer(self.head), "query": layer(self.query), "key": layer(self.key),
                "value": layer(self.value)}

    def to_json(self) -> str:
        d = {
            "format": policy_file.FORMAT, "version": policy_file.VERSION, "kind": KIND,
            "action_space": self.action_space, "observation_space": self.observation_space,
            "input_size": self.input_size, "num_actions": NUM_ACTIONS, "preprocess": "none",
            **self._layers(), "meta": self.meta}
        if self.cost is not None:
            d["cost"] = self.cost.to_dict()
        if self.members:
            d["members"] = [m._layers() for m in self.members]
        return json.dumps(d) + "\n"

    @classmethod
    def from_dict(cls, d: Dict[str, Any]) -> "LoopSetPolicy":
        if d.get("kind") != KIND or d.get("preprocess") != "none":
            raise ValueError("not a loop_set policy with preprocess none")

        layer = policy_file.decode_layer
        members = d.get("members", [])
        if not isinstance(members, list) or not all(
                isinstance(m, dict) and "cost" not in m and "members" not in m for m in members):
            raise ValueError("members is not a list of networks (layers only)")
        header = {k: d.get(k) for k in ("kind", "preprocess")}
        return cls([layer(t) for t in d["trunk"]], layer(d["mix"]), layer(d["head"]),
                   layer(d["query"]), layer(d["key"]), layer(d["value"]), d.get("meta"),
                   plan_cost.PlanCost.from_dict(d["cost"]) if "cost" in d else None,
                   [cls.from_dict({**m, **header}) for m in members])

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())


# The committed loop_set files (datasets/policies/) and the server ISAs each is played at: the
# rule of client/cpp/policy.cc's Policy::LoopSetFor, which `--policy=loop_set` follows. AVX2 and
# SSE servers play the file learned from AVX2 records (never measured on SSE's scalar code); every
# other ISA the one learned at AVX-512.
BUILT_IN_FILE = "loop_set.json"
BUILT_IN_FILES_BY_ISA = {"avx2": "loop_set_avx2.json", "sse": "loop_set_avx2.json"}
ISAS = ("avx512", "avx2", "sse")  # what a server's `kernel_abi` observation may say


def built_in_path(isa: str, directory: str = "datasets/policies") -> str:
    """The path of the committed loop_set file for a server generating `isa` code (one of ISAS,
    as its `kernel_abi` observation says: `json.loads(env.observation["kernel_abi"])["isa"]`),
    under `directory` (the repository's datasets/policies); ValueError for another ISA."""
    if isa not in ISAS:
        raise ValueError(f"unknown ISA {isa!r}; known: {', '.join(ISAS)}")
    return os.path.join(directory, BUILT_IN_FILES_BY_ISA.get(isa, BUILT_IN_FILE))


def load(path: str) -> LoopSetPolicy:
    """A loop_set policy file; ValueError saying what is wrong otherwise."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        d = json.loads(text)
        if d.get("format") != policy_file.FORMAT or d.get("version") != policy_file.VERSION:
            raise ValueError("format/version are not looptool-policy/1")
        return LoopSetPolicy.from_dict(d)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path}: not a loop_set policy file: {e}") from None


def network(features: int = FEATURES, hidden: Sequence[int] = (128, 128), key: int = 32) -> Any:
    """The PyTorch module of the same forward pass (imported lazily: actors need no torch)."""
    import torch
    from torch import nn

    class LoopSetNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            sizes = [features, *hidden]
            self.trunk = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes, sizes[1:]))
            h = sizes[-1]
            self.mix = nn.Linear(3 * h, h)
            self.head = nn.Linear(h, PER_ROW)
            self.query = nn.Linear(h, key)
            self.key = nn.Linear(h, key)
            self.value = nn.Linear(2 * h, 1)
            self.features = features

        def forward(self, obs: "torch.Tensor") -> "torch.Tensor":
            x = obs.reshape(obs.shape[0], -1, self.features)
            real = (x[:, :, :1] > 0.5).float()
            count = real.sum(dim=1).clamp(min=1.0)
            e = x
            for layer in self.trunk:
                e = torch.relu(layer(e))
            neg = torch.finfo(e.dtype).min

            def pool(t: "torch.Tensor") -> "torch.Tensor":
                mean = (t * real).sum(dim=1) / count
                mx = torch.where(real > 0, t, torch.full_like(t, neg)).max(dim=1).values
                return torch.cat([mean, torch.where(mx > neg, mx, torch.zeros_like(mx))], dim=1)
            ctx = pool(e)[:, None, :].expand(-1, x.shape[1], -1)
            h = torch.relu(self.mix(torch.cat([e, ctx], dim=2)))
            o = self.head(h)
            inter = torch.einsum("brd,bqd->brq", self.query(h), self.key(h))
            stop = self.value(pool(h))[:, 0]
            b, r = o.shape[0], o.shape[1]
            n = min(r, LEVELS)
            pad = torch.full((b, LEVELS, PER_ROW), -1e9, dtype=o.dtype)
            pad[:, :n] = o[:, :n]
            ic = torch.full((b, LEVELS, LEVELS), -1e9, dtype=o.dtype)
            ic[:, :n, :n] = inter[:, :n, :n]
            return torch.cat([pad[:, :, :16].reshape(b, -1), ic.reshape(b, -1), pad[:, :, 16],
                              pad[:, :, 17], pad[:, :, 18], stop[:, None]], dim=1)

        def to_policy(self, meta: Optional[Dict[str, Any]] = None) -> LoopSetPolicy:
            def t(layer: "nn.Linear") -> Tuple[Any, Any]:
                return (layer.weight.detach().numpy().copy(), layer.bias.detach().numpy().copy())
            return LoopSetPolicy([t(x) for x in self.trunk], t(self.mix), t(self.head),
                                 t(self.query), t(self.key), t(self.value), meta)

        def load_policy(self, policy: LoopSetPolicy) -> None:
            with torch.no_grad():
                for layer, (w, b) in zip(list(self.trunk) + [self.mix, self.head, self.query,
                                                             self.key, self.value],
                                         policy.trunk + [policy.mix, policy.head, policy.query,
                                                         policy.key, policy.value]):
                    layer.weight.copy_(torch.from_numpy(w))
                    layer.bias.copy_(torch.from_numpy(b))

    return LoopSetNet()


def action_names() -> List[str]:
    """loop_nest's action names in index order (what the server lists), for readable output."""
    names = [f"tile_L{p}_{n}" for p in range(LEVELS) for n in TILE_SIZES]
    names += [f"interchange_L{p}_L{q}" for p in range(LEVELS) for q in range(LEVELS)]
    for kind in ("unroll", "vectorize", "merge"):
        names += [f"{kind}_L{p}" for p in range(LEVELS)]
    return names
