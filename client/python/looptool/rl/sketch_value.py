"""Learning which sketch to start from: a one-step decision learned from measured rewards.

The server's `sketches` observation lists, for an untiled loop nest, up to 16 schedules in
`loop_nest` actions (register blocks and tilings after LoopNest's design, best first by a fixed
rule). Which one is fastest depends on the shape: the rule's first is not always the best. A
`sketch_value` policy (policy_file.py)
scores the state each sketch leads to (its `loops_tensor`, no kernel timed) and takes the best:
Q(s, sketch) is learned as the value of the afterstate, so one network ranks any number of
candidates and reads the tiled nest itself (loop sizes, tails, strides) rather than an index.

An episode (`run_sketch_episode`, on a LoopToolEnv with no reward space) is one decision: fork
the start once per sketch, apply it (untimed), score every afterstate, choose. In "greedy" mode
the chosen state is timed, and the start (for the episode's speed-up; an untiled convolution's
kernel is slow, and the server then caches it); in "epsilon" mode (an actor's exploration) every other sketch is also timed with
probability epsilon, so actors with larger epsilons measure more of the list. The episode's
`candidates` and `candidate_gflops` are what the learner regresses on. `choose(env, policy)` is
the same choice for a LoopToolEnv (no kernel timed), to apply with `env.multistep`.

`SketchValueLearner` keeps those (afterstate, fraction of peak) samples in a ring buffer and fits
the value by minibatch MSE; like ApexLearner it lives in the driver and exports `policy()` to the
actors (train.py: `--algo=sketch-value`). With a single decision and no successor state, the
Q-learning target is the reward itself (no bootstrapping): this is a contextual bandit.
"""

import dataclasses
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import numpy.typing as npt
import torch

from looptool.connection import Connection
from looptool.env import LoopToolEnv
from looptool.rl import apex_dqn
from looptool.rl import networks
from looptool.rl import policy_file
from looptool.rl.benchmarks import Benchmark
from looptool.rl.rollout import raise_failed_step

SPACE = "loop_nest"


@dataclasses.dataclass
class SketchValueConfig:
    hidden: Tuple[int, ...] = (128, 128)
    lr: float = 1e-3
    batch_size: int = 128
    buffer_size: int = 200_000
    learning_starts: int = 256     # samples before the first update
    replay_ratio: float = 1.0      # gradient updates per new sample, at most
    sync_every: int = 25           # updates between weight broadcasts to actors
    eps_base: float = 0.5          # actor i of N times each other sketch with eps_base ** (1 + ...)
    eps_alpha: float = 3.0
    value_scale: float = 10.0      # targets are fractions of the peak: scale to ~unit values


@dataclasses.dataclass(frozen=True, eq=False)
class SketchEpisode:
    """One decision: the chosen sketch's actions (loop_nest indices), the start and chosen
    states' GFLOPS, and every timed candidate (the chosen one among them)."""
    benchmark: str                                # the URI
    actions: "npt.NDArray[np.int64]"              # the chosen sketch's actions
    gflops: "npt.NDArray[np.float64]"             # [start, chosen state]
    peak: float
    candidates: "npt.NDArray[np.float32]"         # (C, input_size): timed afterstates
    candidate_gflops: "npt.NDArray[np.float64]"   # (C,)
    chosen: int                                   # the sketch's line number, -1: none
    seconds: float

    def __len__(self) -> int:
        return len(self.candidate_gflops)  # kernels timed (the episode's "steps")

    @property
    def final_gflops(self) -> float:
        return float(self.gflops[-1])


def _sketch_lines(env: LoopToolEnv, sketches: str, what: str) -> List[List[str]]:
    """The sketches observation as lists of action names; ValueError naming any action the
    environment's space does not have."""
    names = set(env.action_space.names)
    unknown = sorted({a for a in sketches.split() if a not in names})
    if unknown:
        raise ValueError(f"{what}: the server's sketches use actions not in the {SPACE} space: "
                         f"{', '.join(unknown)}")
    return [line.split() for line in sketches.splitlines() if line.strip()]


def _afterstate(env: LoopToolEnv, actions: Sequence[str]) -> "npt.NDArray[np.float32]":
    """The loops_tensor reached by `actions` from the env's state, on `env` (a fork), untimed."""
    (loops,), _, _, _ = env.multistep(actions, observation_spaces=["loops_tensor"])
    raise_failed_step(env)
    return np.asarray(loops, np.float32).reshape(-1)


def run_sketch_episode(connection: Connection, benchmark: Benchmark,
                       policy: policy_file.Policy, mode: str = "greedy", epsilon: float = 0.0,
                       rng: Optional[np.random.Generator] = None,
                       timeout: Optional[float] = 60.0) -> SketchEpisode:
    """One decision on `benchmark`; see the module's text. With no sketch (a nest the rule
    cannot block) the start state stands: no actions."""
    rng = rng if rng is not None else np.random.default_rng()
    start = time.perf_counter()
    forks: List[LoopToolEnv] = []
    with LoopToolEnv(connection, benchmark.uri, action_space=SPACE, observation_space=None,
                     reward_space=None, timeout=timeout) as env:
        try:
            sketches, start_gflops, peak = env.reset(
                program=benchmark.program,
                observation_spaces=["sketches", "flops", "peak_gflops"])
            lines = _sketch_lines(env, sketches, benchmark.uri)
            after = []
            for actions in lines:
                forks.append(env.fork())
                after.append(_afterstate(forks[-1], actions))
            if not lines:
                return SketchEpisode(benchmark.uri, np.zeros(0, np.int64),
                                     np.asarray([start_gflops, start_gflops], np.float64),
                                     float(peak), np.zeros((0, 0), np.float32),
                                     np.zeros(0), -1, time.perf_counter() - start)
            scores = policy.scores(np.stack(after)).reshape(-1)
            chosen = int(np.argmax(scores))
            timed = [chosen] + [i for i in range(len(lines))
                                if i != chosen and mode == "epsilon" and rng.random() < epsilon]
            gflops = [float(forks[i].observe(["flops"])["flops"]) for i in timed]
            chosen_actions = [env.action_space.index(a) for a in lines[chosen]]
            return SketchEpisode(benchmark.uri, np.asarray(chosen_actions, np.int64),
                                 np.asarray([start_gflops, gflops[0]], np.float64), float(peak),
                                 np.stack([after[i] for i in timed]), np.asarray(gflops),
                                 chosen, time.perf_counter() - start)
        finally:
            for fork in forks:
                fork.close()


def choose(env: LoopToolEnv, policy: policy_file.Policy) -> List[str]:
    """The sketch `policy` (sketch_value) takes in a LoopToolEnv's current state: the action
    names of the server's sketch whose resulting state it values most (each reached on a fork of
    the session, untimed), or [] when the server has none. `env` acts in loop_nest; apply the
    choice with `env.multistep(names)`."""
    if env.action_space.name != SPACE:
        raise ValueError(f"A sketch_value policy chooses among {SPACE} sketches; the "
                         f"environment acts in {env.action_space.name}")
    lines = _sketch_lines(env, env.observation["sketches"], str(env.benchmark))
    if not lines:
        return []
    after = []
    for names in lines:
        # No observation or reward space on the fork: reaching the afterstate times nothing.
        with env.fork(observation_space=None, reward_space=None) as fork:
            after.append(_afterstate(fork, names))
    return lines[int(np.argmax(policy.scores(np.stack(after)).reshape(-1)))]


class SketchValueLearner:
    """Fits V(afterstate) ~ its fraction of the peak by minibatch MSE over a replay ring."""
    mode = "epsilon"

    def __init__(self, input_size: int, num_actions: int = 1,
                 config: Optional[SketchValueConfig] = None, seed: int = 0,
                 action_space: str = SPACE) -> None:
        # The same arguments as the other learners; a sketch value has one output, in loop_nest.
        if num_actions != 1 or action_space != SPACE:
            raise ValueError(f"a sketch_value learner has one output in {SPACE}, not "
                             f"{num_actions} in {action_space}")
        self.config = config or SketchValueConfig()
        c = self.config
        torch.manual_seed(seed)
        self.rng = np.random.default_rng(seed)
        self.action_space = SPACE
        self.net = networks.SketchValueNetwork(input_size, 1, c.hidden)
        self.opt = torch.optim.Adam(self.net.parameters(), lr=c.lr)
        self.obs = np.zeros((c.buffer_size, input_size), np.float32)
        self.target = np.zeros(c.buffer_size, np.float32)
        self.size = 0
        self.added = 0
        self.updates = 0
        self._updates_at_start = 0
        self._added_at_start = 0
        self._policy: Optional[policy_file.Policy] = None

    def epsilon(self, actor: int, actors: int) -> float:
        # Ape-X's spread of exploration rates: actor i of N, base ** (1 + alpha i / (N - 1)).
        return apex_dqn.epsilon(actor, actors, self.config.eps_base, self.config.eps_alpha)

    def wants_episodes(self, in_flight: int) -> bool:
        return True

    def add(self, episodes: Sequence[Any]) -> None:
        c = self.config
        for e in episodes:
            if not e.peak > 0:  # no peak from the server: no fraction of it to learn
                continue
            for row, g in zip(e.candidates, e.candidate_gflops):
                i = self.added % c.buffer_size
                self.obs[i] = row
                self.target[i] = c.value_scale * g / e.peak
                self.added += 1
                self.size = min(self.size + 1, c.buffer_size)

    def __len__(self) -> int:
        return self.size

    def can_update(self) -> bool:
        c = self.config
        return (self.size >= max(c.learning_starts, 1)  # batches are drawn with replacement
                and self.updates - self._updates_at_start
                < c.replay_ratio * (self.added - self._added_at_start))

    def update(self) -> float:
        c = self.config
        idx = self.rng.integers(self.size, size=c.batch_size)
        pred = self.net(torch.from_numpy(self.obs[idx]))
        loss = ((pred - torch.from_numpy(self.target[idx])) ** 2).mean()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.updates += 1
        if self.updates % c.sync_every == 0:
            self._policy = None
        return float(loss)

    def policy(self, meta: Optional[Dict[str, Any]] = None) -> policy_file.Policy:
        if self._policy is None or meta is not None:
            p = self.net.to_policy(SPACE, meta=meta)
            if meta is not None:
                return p
            self._policy = p
        return self._policy

    def state_dict(self) -> Dict[str, Any]:
        return {"net": self.net.state_dict(), "opt": self.opt.state_dict(),
                "updates": self.updates, "size": self.size, "added": self.added,
                "obs": self.obs[:self.size].copy(), "target": self.target[:self.size].copy()}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        self.net.load_state_dict(state["net"])
        self.opt.load_state_dict(state["opt"])
        self.updates = state["updates"]
        self.size, self.added = state["size"], state["added"]
        self.obs[:self.size] = state["obs"]
        self.target[:self.size] = state["target"]
        self._updates_at_start, self._added_at_start = self.updates, self.added
        self._policy = None

    def kept_replay(self) -> int:
        return self.size
