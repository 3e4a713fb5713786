"""An episode's rewards, n-step transitions and Ape-X's prioritized replay buffer (numpy).

Rewards are looptool.reward's (the environment's reward, defined once). Debian 12 has no RL
library (no RLlib, no stable-baselines), so the sum tree of proportional prioritized replay
(Schaul et al. 2016, alpha 0.6 / beta 0.4 as Ape-X) is written here.
"""

from typing import Any, Dict, Optional, Protocol, Sequence, Tuple

import numpy as np
import numpy.typing as npt

from looptool import reward as reward_lib

REWARDS = reward_lib.KINDS

Transitions = Tuple["npt.NDArray[Any]", ...]
"""(obs, mask, action, return, next_obs, next_mask, discount) arrays, one row per transition."""


class MeasuredEpisode(Protocol):
    """What rewards need of an episode: its states' GFLOPS (the start first) and the peak."""

    @property
    def gflops(self) -> "npt.NDArray[np.float64]": ...

    @property
    def peak(self) -> float: ...


class StepEpisode(MeasuredEpisode, Protocol):
    """An episode of T actions whose T + 1 states were observed (rollout.Episode)."""

    @property
    def obs(self) -> "npt.NDArray[np.float32]": ...

    @property
    def masks(self) -> "npt.NDArray[np.bool_]": ...

    @property
    def actions(self) -> "npt.NDArray[np.int64]": ...


def rewards(episode: MeasuredEpisode,
            kind: str = reward_lib.DGFLOPS_PEAK) -> "npt.NDArray[np.float32]":
    """Per-step rewards of an episode: looptool.reward's `kind`, LoopTune's (GFLOPS after -
    before) / peak by default."""
    return reward_lib.episode_rewards(kind, episode.gflops, episode.peak)


def n_step_transitions(episode: StepEpisode, reward_kind: str, n: int,
                       gamma: float) -> Transitions:
    """The episode's n-step transitions: (obs, mask, action, return, next_obs, next_mask,
    discount) arrays, where return = sum_{i<k} gamma^i r_{t+i} over the k = min(n, T - t) steps
    left and discount = gamma^k, or 0 when the episode ends within them (its last state is
    terminal: episodes have a fixed length, as in LoopTune)."""
    r = rewards(episode, reward_kind)
    t_len = len(r)
    ret = np.zeros(t_len, np.float32)
    nxt = np.zeros(t_len, np.int64)
    disc = np.zeros(t_len, np.float32)
    for t in range(t_len):
        k = min(n, t_len - t)
        ret[t] = sum(gamma ** i * r[t + i] for i in range(k))
        nxt[t] = t + k
        disc[t] = 0.0 if t + k >= t_len else gamma ** k
    return (episode.obs[:-1], episode.masks[:-1], episode.actions, ret,
            episode.obs[nxt], episode.masks[nxt], disc)


class PrioritizedReplay:
    """A ring buffer of transitions sampled with probability proportional to priority^alpha."""

    FIELDS = ("obs", "mask", "action", "ret", "next_obs", "next_mask", "discount")

    def __init__(self, capacity: int, obs_size: int, num_actions: int, alpha: float = 0.6,
                 seed: Optional[int] = None) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.alpha = alpha
        self._leaves = 1 << (capacity - 1).bit_length()
        self._tree = np.zeros(2 * self._leaves, np.float64)  # node i: children 2i, 2i+1
        self._data: Dict[str, "npt.NDArray[Any]"] = {
            "obs": np.zeros((capacity, obs_size), np.float32),
            "mask": np.zeros((capacity, num_actions), bool),
            "action": np.zeros(capacity, np.int64),
            "ret": np.zeros(capacity, np.float32),
            "next_obs": np.zeros((capacity, obs_size), np.float32),
            "next_mask": np.zeros((capacity, num_actions), bool),
            "discount": np.zeros(capacity, np.float32),
        }
        self._next = 0
        self._size = 0
        self._max_priority = 1.0
        self._rng = np.random.default_rng(seed)
        self.added = 0  # transitions ever added

    def __len__(self) -> int:
        return self._size

    def add(self, transitions: Transitions,
            priorities: Optional[Sequence[float]] = None) -> None:
        """Adds a batch (a tuple in FIELDS order); new ones get the highest priority seen
        unless `priorities` are given."""
        count = len(transitions[0])
        new = (np.full(count, self._max_priority) if priorities is None
               else np.asarray(priorities, np.float64))
        for i in range(count):
            slot = self._next
            for name, values in zip(self.FIELDS, transitions):
                self._data[name][slot] = values[i]
            self._set(np.array([slot]), np.array([new[i]]))
            self._next = (self._next + 1) % self.capacity
            self._size = min(self._size + 1, self.capacity)
        self.added += count

    def sample(self, batch_size: int, beta: float = 0.4) -> Tuple[
            "npt.NDArray[np.int64]", Dict[str, "npt.NDArray[Any]"], "npt.NDArray[np.float32]"]:
        """(indices, {field: array}, importance weights normalised to max 1)."""
        if self._size == 0:
            raise ValueError("sample from an empty replay buffer")
        total = self._tree[1]
        # Stratified: one uniform draw in each of batch_size equal slices of the total mass.
        targets = (np.arange(batch_size) + self._rng.random(batch_size)) * total / batch_size
        node = np.ones(batch_size, np.int64)
        while node[0] < self._leaves:
            left = 2 * node
            go_right = targets > self._tree[left]
            targets = np.where(go_right, targets - self._tree[left], targets)
            node = np.where(go_right, left + 1, left)
        idx = np.minimum(node - self._leaves, self._size - 1)
        p = self._tree[idx + self._leaves] / total
        p = np.maximum(p, 1e-12)
        weights = (self._size * p) ** (-beta)
        weights /= weights.max()
        return idx, {k: v[idx] for k, v in self._data.items()}, weights.astype(np.float32)

    def update(self, indices: Any, priorities: Any) -> None:
        """New priorities (|TD error| + eps) for sampled transitions."""
        priorities = np.asarray(priorities, np.float64)
        self._max_priority = max(self._max_priority, float(priorities.max()))
        self._set(np.asarray(indices), priorities)

    def state_dict(self) -> Dict[str, Any]:
        """The filled part of the buffer, its priorities and counters (numpy arrays), for
        checkpoints: a resumed run samples the same transitions as the run it continues."""
        n = self._size
        return {"capacity": self.capacity, "alpha": self.alpha, "size": n, "next": self._next,
                "added": self.added, "max_priority": self._max_priority,
                "leaves": self._tree[self._leaves:self._leaves + n].copy(),
                "data": {k: v[:n].copy() for k, v in self._data.items()}}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restores what state_dict() saved. ValueError when it does not fit this buffer
        (another capacity, observation size or action count)."""
        n = int(state["size"])
        if state["capacity"] != self.capacity or n > self.capacity:
            raise ValueError(f"a replay of capacity {state['capacity']} does not fit one of "
                             f"{self.capacity}")
        for k, v in self._data.items():
            saved = np.asarray(state["data"][k])
            if saved.shape[1:] != v.shape[1:] or len(saved) != n:
                raise ValueError(f"replay field {k} has shape {saved.shape}, expected "
                                 f"({n}, *{v.shape[1:]})")
        for k, v in self._data.items():
            v[:n] = state["data"][k]
        self._size, self._next = n, int(state["next"])
        self.added, self._max_priority = int(state["added"]), float(state["max_priority"])
        self._tree[:] = 0
        self._tree[self._leaves:self._leaves + n] = state["leaves"]
        for node in range(self._leaves - 1, 0, -1):
            self._tree[node] = self._tree[2 * node] + self._tree[2 * node + 1]

    def _set(self, slots: Any, priorities: Any) -> None:
        for slot, pr in zip(slots, priorities):
            node = int(slot) + self._leaves
            self._tree[node] = float(pr) ** self.alpha
            node //= 2
            while node >= 1:
                self._tree[node] = self._tree[2 * node] + self._tree[2 * node + 1]
                node //= 2
