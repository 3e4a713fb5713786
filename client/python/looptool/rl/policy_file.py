"""A trained policy as one self-describing file, and its forward pass in numpy.

The file is what the trainer writes, what `looptool tune --search=policy` reads (the C++ forward
pass in client/cpp/policy.cc) and what rollout actors act with (no PyTorch needed there). It is
JSON:

    {"format": "looptool-policy", "version": 1,
     "kind": "dueling_q" | "actor_critic" | "sketch_value",
     "action_space": "loop_tool", "observation_space": "loops_tensor",
     "input_size": 320, "num_actions": 17, "preprocess": "log2p1",
     "trunk": [T0, T1, ...], "head": H, "value": V,
     "meta": {...: how it was trained: command, seed, steps, seconds, ...}}

where every layer is {"in": I, "out": O, "weight": base64 of O*I little-endian float32 (row
major, PyTorch's nn.Linear layout), "bias": base64 of O float32}. A block-diagonal weight (an
ensemble's hidden layers, plan_cost.ensemble) may be stored as its blocks: "blocks": [[O_1, I_1],
..., [O_k, I_k]] (the O_i summing to O, the I_i to I; block i at rows O_1+...+O_(i-1) and
columns I_1+...+I_(i-1)) and "weight" holding only the blocks' numbers, each block row major,
one after the other; every other entry is 0. The forward pass:

    x = log2(1 + max(obs, 0))                 # "log2p1": sizes span 1..4096, flags are 0/1
    h = relu(T_k(... relu(T_0(x))))           # every trunk layer, then ReLU
    dueling_q:    scores = V(h) + H(h) - mean(H(h))      (Q-values, one per action)
    actor_critic: scores = H(h)                          (logits; V(h) is the critic)
    sketch_value: scores = H(h), one number             (the value of the state observed)

and the action is the highest score among those `action_mask` allows (ties: the lowest index).
A sketch_value policy (num_actions 1, action_space "loop_nest"; its V layer is unused) acts once
per episode: of the server's `sketches` of the start state it picks the one whose resulting
state scores highest (sketch_value.py), with no kernel timed.
"""

import base64
import binascii
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple, Type, TypeVar

import numpy as np
import numpy.typing as npt

FORMAT = "looptool-policy"
MAX_LAYER_WEIGHTS = 1 << 24  # a layer's weights at most, as client/cpp/policy.cc
VERSION = 1
KINDS = ("dueling_q", "actor_critic", "sketch_value")

Layer = Tuple["npt.NDArray[np.float32]", "npt.NDArray[np.float32]"]
"""(weight of shape (out, in), bias of shape (out,)), float32."""
_Policy = TypeVar("_Policy", bound="Policy")


def _encode(array: "npt.ArrayLike") -> str:
    return base64.b64encode(np.ascontiguousarray(array, dtype="<f4").tobytes()).decode("ascii")


def _decode(text: str, shape: Tuple[int, ...]) -> "npt.NDArray[np.float32]":
    data = np.frombuffer(base64.b64decode(text), dtype="<f4")
    if data.size != int(np.prod(shape)):
        raise ValueError(f"A tensor of shape {shape} holds {data.size} numbers")
    return data.reshape(shape).astype(np.float32)


def diagonal_blocks(w: "npt.ArrayLike") -> Optional[List[Tuple[int, int]]]:
    """The (out, in) sizes of the diagonal blocks outside which `w` is 0, the finest such
    partition, when there are two or more; None otherwise."""
    w = np.asarray(w)
    nz = (w != 0) | np.signbit(w)  # (-0.0 kept, so that the blocks give back every bit)
    rows, cols = nz.shape
    blocks: List[Tuple[int, int]] = []
    r = c = 0
    while r < rows:
        r1, c1 = r + 1, c
        while True:  # grow rows [r, r1) x columns [c, c1) until nothing outside touches it
            right = np.flatnonzero(nz[r:r1, c1:].any(axis=0))
            below = np.flatnonzero(nz[r1:, c:c1].any(axis=1))
            if right.size:
                c1 += int(right[-1]) + 1
            elif below.size:
                r1 += int(below[-1]) + 1
            elif c1 == c and r1 < rows:  # rows of zeros so far: the next row joins
                r1 += 1
            else:
                break
        if nz[r:r1, :c].any():
            return None
        blocks.append((r1 - r, c1 - c))
        r, c = r1, c1
    if blocks and c < cols:  # columns of zeros at the end: the last block's
        blocks[-1] = (blocks[-1][0], blocks[-1][1] + cols - c)
    if blocks and blocks[-1][1] == 0:  # rows of zeros at the end: the block before's
        if len(blocks) < 2:
            return None
        o, _ = blocks.pop()
        blocks[-1] = (blocks[-1][0] + o, blocks[-1][1])
    return blocks if len(blocks) >= 2 else None


def encode_layer(w: "npt.ArrayLike", b: "npt.ArrayLike") -> Dict[str, Any]:
    """A layer's entry in the file: its blocks alone when its weight is block-diagonal."""
    w = np.asarray(w, np.float32)
    spec: Dict[str, Any] = {"in": int(w.shape[1]), "out": int(w.shape[0])}
    blocks = diagonal_blocks(w)
    if blocks is None:
        spec["weight"] = _encode(w)
    else:
        parts, r, c = [], 0, 0
        for o, i in blocks:
            parts.append(w[r:r + o, c:c + i].reshape(-1))
            r, c = r + o, c + i
        spec["blocks"] = [[o, i] for o, i in blocks]
        spec["weight"] = _encode(np.concatenate(parts))
    spec["bias"] = _encode(b)
    return spec


def decode_layer(spec: Dict[str, Any]) -> Layer:
    """(weight, bias) of a layer's entry, dense or in blocks; ValueError saying what is wrong."""
    out, inp = spec["out"], spec["in"]
    if not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1 << 16
               for v in (out, inp)):
        raise ValueError("a layer has no in/out sizes in 1..65536")
    if out * inp > MAX_LAYER_WEIGHTS:
        raise ValueError(f"a layer has more than {MAX_LAYER_WEIGHTS} weights")
    if "blocks" not in spec:
        return _decode(spec["weight"], (out, inp)), _decode(spec["bias"], (out,))
    blocks = spec["blocks"]
    if not isinstance(blocks, list) or not blocks or not all(
            isinstance(x, list) and len(x) == 2 and all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in x)
            for x in blocks):
        raise ValueError("blocks must be a list of [out, in] pairs of positive integers")
    if sum(o for o, _ in blocks) != out or sum(i for _, i in blocks) != inp:
        raise ValueError(f"blocks do not add up to {out} x {inp}")
    flat = _decode(spec["weight"], (sum(o * i for o, i in blocks),))
    w = np.zeros((out, inp), np.float32)
    r = c = k = 0
    for o, i in blocks:
        w[r:r + o, c:c + i] = flat[k:k + o * i].reshape(o, i)
        r, c, k = r + o, c + i, k + o * i
    return w, _decode(spec["bias"], (out,))


def preprocess(obs: "npt.ArrayLike") -> "npt.NDArray[np.float32]":
    """The "log2p1" input transform (float32)."""
    x: "npt.NDArray[np.float32]" = np.log2(
        1.0 + np.maximum(np.asarray(obs, dtype=np.float32), 0.0)).astype(np.float32)
    return x


class Policy:
    """A policy's weights and its forward pass (numpy, float32).

    Layers are (weight, bias) pairs of float32 arrays with weight of shape (out, in).
    """

    def __init__(self, kind: str, trunk: Sequence[Tuple[Any, Any]], head: Tuple[Any, Any],
                 value: Tuple[Any, Any], action_space: str = "loop_tool",
                 observation_space: str = "loops_tensor",
                 meta: Optional[Dict[str, Any]] = None) -> None:
        if kind not in KINDS:
            raise ValueError(f"Unknown policy kind {kind!r}; known: {', '.join(KINDS)}")
        self.kind = kind
        self.trunk: List[Layer] = [(np.asarray(w, np.float32), np.asarray(b, np.float32))
                                   for w, b in trunk]
        self.head: Layer = (np.asarray(head[0], np.float32), np.asarray(head[1], np.float32))
        self.value: Layer = (np.asarray(value[0], np.float32), np.asarray(value[1], np.float32))
        self.action_space = action_space
        self.observation_space = observation_space
        self.meta = dict(meta or {})
        sizes = [w.shape for w, _ in self.trunk] + [self.head[0].shape, self.value[0].shape]
        self.input_size = int(self.trunk[0][0].shape[1])
        self.num_actions = int(self.head[0].shape[0])
        width = self.input_size
        for (w, b) in self.trunk + [self.head]:
            if w.shape[1] != width or b.shape != (w.shape[0],):
                raise ValueError(f"Layer shapes do not chain: {sizes}")
            width = w.shape[0]
        if self.value[0].shape != (1, self.head[0].shape[1]) or self.value[1].shape != (1,):
            raise ValueError(f"The value layer must map {self.head[0].shape[1]} -> 1: {sizes}")

    # --- the forward pass -------------------------------------------------------------------

    def features(self, obs: "npt.ArrayLike") -> "npt.NDArray[np.float32]":
        """The trunk's output for a batch (B, input_size) or one observation (input_size,)."""
        h = preprocess(obs)
        for w, b in self.trunk:
            h = np.maximum(h @ w.T + b, 0.0).astype(np.float32)
        return h

    def scores(self, obs: "npt.ArrayLike") -> "npt.NDArray[np.float32]":
        """Q-values (dueling_q), logits (actor_critic) or the state's value (sketch_value, one
        number): (B, num_actions) or (num_actions,)."""
        h = self.features(obs)
        a: "npt.NDArray[np.float32]" = (h @ self.head[0].T + self.head[1]).astype(np.float32)
        if self.kind != "dueling_q":
            return a
        v = h @ self.value[0].T + self.value[1]
        q: "npt.NDArray[np.float32]" = (v + a - a.mean(axis=-1, keepdims=True)).astype(np.float32)
        return q

    def act(self, obs: "npt.ArrayLike", mask: "npt.ArrayLike") -> Optional[int]:
        """The greedy action: the best score that `mask` allows (None if it allows none)."""
        return masked_argmax(self.scores(obs), mask)

    # --- the file -----------------------------------------------------------------------------

    def to_json(self) -> str:
        layer = encode_layer
        return json.dumps({
            "format": FORMAT, "version": VERSION, "kind": self.kind,
            "action_space": self.action_space, "observation_space": self.observation_space,
            "input_size": int(self.input_size), "num_actions": int(self.num_actions),
            "preprocess": "log2p1",
            "trunk": [layer(w, b) for w, b in self.trunk],
            "head": layer(*self.head), "value": layer(*self.value),
            "meta": self.meta,
        }, indent=None, sort_keys=False) + "\n"

    @classmethod
    def from_json(cls: Type[_Policy], text: str) -> _Policy:
        """ValueError, saying what is wrong, for text that is not a policy file."""
        try:
            return cls._from_dict(json.loads(text))
        except (ValueError, KeyError, TypeError, AttributeError, binascii.Error) as e:
            what = str(e) if type(e) is ValueError else f"{type(e).__name__}: {e}"
            raise ValueError(f"Not a {FORMAT} file: {what}") from None

    @classmethod
    def _from_dict(cls: Type[_Policy], d: Dict[str, Any]) -> _Policy:
        if d.get("format") != FORMAT or d.get("version") != VERSION:
            raise ValueError(f"format/version are not {FORMAT}/{VERSION}")
        if d.get("preprocess") != "log2p1":
            raise ValueError(f"Unknown preprocess {d.get('preprocess')!r}")

        layer = decode_layer
        return cls(d["kind"], [layer(t) for t in d["trunk"]], layer(d["head"]),
                   layer(d["value"]), d["action_space"], d["observation_space"], d.get("meta"))

    def save(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    @classmethod
    def load(cls: Type[_Policy], path: str) -> _Policy:
        with open(path, encoding="utf-8") as f:
            return cls.from_json(f.read())


def masked_argmax(scores: "npt.ArrayLike", mask: "npt.ArrayLike") -> Optional[int]:
    """Index of the highest score where mask is True (first on ties); None when none is."""
    mask = np.asarray(mask, dtype=bool)
    if not mask.any():
        return None
    s = np.where(mask, scores, -np.inf)
    return int(np.argmax(s))
