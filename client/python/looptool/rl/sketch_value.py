"""Learning which sketch to start from: a one-step decision learned from measured rewards.

The server's `sketches` observation lists, for an untiled loop nest, up to 16 schedules in
`loop_nest` actions (register blocks and tilings after LoopNest's design, best first by a fixed
rule). Which one is fastest depends on the shape: the rule's first is 0.99x oneDNN on the test
matmuls but 0.54x on mm481_97_257, whose 14th is 1.09x. A `sketch_value` policy (policy_file.py)
scores the state each sketch leads to (its `loops_tensor`, no kernel timed) and takes the best:
Q(s, sketch) is learned as the value of the afterstate, so one network ranks any number of
candidates and reads the tiled nest itself (loop sizes, tails, strides) rather than an index.

An episode (`run_sketch_episode`) is one decision: fork the start once per sketch, apply it
(untimed), score every afterstate, choose. In "greedy" mode the chosen state is timed, and the
start (for the episode's speed-up; seconds for an untiled convolution, whose kernel the server
then caches); in "epsilon" mode (an actor's exploration) every other sketch is also timed with
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

import grpc
import numpy as np
import torch

from looptool import convert
from looptool import errors
from looptool.rl import apex_dqn
from looptool.rl import networks

SPACE = "loop_nest"


@dataclasses.dataclass
class SketchValueConfig:
    hidden: tuple = (128, 128)
    lr: float = 1e-3
    batch_size: int = 128
    buffer_size: int = 200_000
    learning_starts: int = 256     # samples before the first update
    replay_ratio: float = 1.0      # gradient updates per new sample, at most
    sync_every: int = 25           # updates between weight broadcasts to actors
    eps_base: float = 0.5          # actor i of N times each other sketch with eps_base ** (1 + ...)
    eps_alpha: float = 3.0
    value_scale: float = 10.0      # targets are fractions of the peak: scale to ~unit values


class SketchEpisode:
    """One decision: the chosen sketch's actions (loop_nest indices), the start and chosen
    states' GFLOPS, and every timed candidate (the chosen one among them)."""

    def __init__(self, benchmark, actions, start_gflops, gflops, peak, candidates,
                 candidate_gflops, chosen, seconds):
        self.benchmark = benchmark
        self.actions = np.asarray(actions, np.int64)
        self.gflops = np.asarray([start_gflops, gflops], np.float64)
        self.peak = peak
        self.candidates = candidates              # float32 (C, input_size): timed afterstates
        self.candidate_gflops = candidate_gflops  # float64 (C,)
        self.chosen = chosen                      # the sketch's line number, -1: none
        self.seconds = seconds

    def __len__(self):
        return len(self.candidate_gflops)  # kernels timed (the episode's "steps")

    @property
    def final_gflops(self):
        return float(self.gflops[-1])


def _observe(reply, names):
    if len(reply.observation) != len(names):
        raise errors.ServiceError(grpc.StatusCode.INTERNAL, f"Asked for {len(names)} "
                                  f"observations, got {len(reply.observation)}", "Step")
    return [convert.event_to_python(e) for e in reply.observation]


def run_sketch_episode(connection, benchmark, policy, mode="greedy", epsilon=0.0, rng=None,
                       timeout=60.0):
    """One decision on `benchmark` (a benchmarks.Benchmark); see the module's text. With no
    sketch (a nest the rule cannot block) the start state stands: no actions."""
    rng = rng if rng is not None else np.random.default_rng()
    spaces = connection.spaces(timeout)
    space = spaces.action_space(SPACE)
    index = {n: i for i, n in enumerate(space.names)}
    obs_index = {n: spaces.observation_space(n).index
                 for n in ("sketches", "loops_tensor", "flops", "peak_gflops")}
    start = time.perf_counter()
    reply = connection.start_session(
        benchmark.uri, space.space_index,
        [obs_index[n] for n in ("sketches", "flops", "peak_gflops")],
        program=benchmark.program, timeout=timeout)
    session = reply.session_id
    forks = []
    try:
        sketches, start_gflops, peak = _observe(reply, ("sketches", "flops", "peak_gflops"))
        unknown = sorted({a for a in sketches.split() if a not in index})
        if unknown:
            raise ValueError(f"{benchmark.uri}: the server's sketches use actions not in the "
                             f"{SPACE} space: {', '.join(unknown)}")
        lines = [[index[a] for a in line.split()] for line in sketches.splitlines() if line]
        after = []
        for actions in lines:
            fork = connection.fork_session(session, timeout=timeout)
            forks.append(fork)
            r = connection.step(fork, actions, [obs_index["loops_tensor"]], timeout=timeout)
            after.append(np.asarray(_observe(r, ("loops_tensor",))[0], np.float32).reshape(-1))
        if not lines:
            return SketchEpisode(benchmark.uri, [], start_gflops, start_gflops, float(peak),
                                 np.zeros((0, 0), np.float32), np.zeros(0), -1,
                                 time.perf_counter() - start)
        scores = policy.scores(np.stack(after)).reshape(-1)
        chosen = int(np.argmax(scores))
        timed = [chosen] + [i for i in range(len(lines))
                            if i != chosen and mode == "epsilon" and rng.random() < epsilon]
        gflops = []
        for i in timed:
            r = connection.step(forks[i], [], [obs_index["flops"]], timeout=timeout)
            gflops.append(float(_observe(r, ("flops",))[0]))
        return SketchEpisode(benchmark.uri, lines[chosen], start_gflops, gflops[0], float(peak),
                             np.stack([after[i] for i in timed]), np.asarray(gflops), chosen,
                             time.perf_counter() - start)
    finally:
        for s in forks + [session]:
            try:
                connection.end_session(s, timeout=timeout)
            except (errors.ServiceError, RuntimeError):
                pass


def choose(env, policy):
    """The sketch `policy` (sketch_value) takes in a LoopToolEnv's current state: the action
    names of the server's sketch whose resulting state it values most (each reached on a fork of
    the session, untimed), or [] when the server has none. `env` acts in loop_nest; apply the
    choice with `env.multistep(names)`."""
    if env.action_space.name != SPACE:
        raise ValueError(f"A sketch_value policy chooses among {SPACE} sketches; the "
                         f"environment acts in {env.action_space.name}")
    lines = [line.split() for line in env.observation["sketches"].splitlines() if line]
    if not lines:
        return []
    conn = env.connection
    loops = conn.spaces().observation_space("loops_tensor").index
    after = []
    for names in lines:
        fork = conn.fork_session(env.session_id)
        try:
            reply = conn.step(fork, [env.action_space.to_index(n) for n in names], [loops])
            after.append(np.asarray(_observe(reply, ("loops_tensor",))[0],
                                    np.float32).reshape(-1))
        finally:
            conn.end_session(fork)
    return lines[int(np.argmax(policy.scores(np.stack(after)).reshape(-1)))]


class SketchValueLearner:
    """Fits V(afterstate) ~ its fraction of the peak by minibatch MSE over a replay ring."""
    mode = "epsilon"

    def __init__(self, input_size, num_actions=1, config=None, seed=0, action_space=SPACE):
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
        self._policy = None

    def epsilon(self, actor, actors):
        # Ape-X's spread of exploration rates: actor i of N, base ** (1 + alpha i / (N - 1)).
        return apex_dqn.epsilon(actor, actors, self.config.eps_base, self.config.eps_alpha)

    def wants_episodes(self, in_flight):
        return True

    def add(self, episodes):
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

    def __len__(self):
        return self.size

    def can_update(self):
        c = self.config
        return (self.size >= max(c.learning_starts, 1)  # batches are drawn with replacement
                and self.updates - self._updates_at_start
                < c.replay_ratio * (self.added - self._added_at_start))

    def update(self):
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

    def policy(self, meta=None):
        if self._policy is None or meta is not None:
            p = self.net.to_policy(SPACE, meta=meta)
            if meta is not None:
                return p
            self._policy = p
        return self._policy

    def state_dict(self):
        return {"net": self.net.state_dict(), "opt": self.opt.state_dict(),
                "updates": self.updates, "size": self.size, "added": self.added,
                "obs": self.obs[:self.size].copy(), "target": self.target[:self.size].copy()}

    def load_state_dict(self, state):
        self.net.load_state_dict(state["net"])
        self.opt.load_state_dict(state["opt"])
        self.updates = state["updates"]
        self.size, self.added = state["size"], state["added"]
        self.obs[:self.size] = state["obs"]
        self.target[:self.size] = state["target"]
        self._updates_at_start, self._added_at_start = self.updates, self.added
        self._policy = None

    def kept_replay(self):
        return self.size
